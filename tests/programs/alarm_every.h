/* alarm_every.h: SIGALRM every `us` microseconds into `handler` (SA_RESTART), and off again,
 * for the test programs whose signal handlers touch the mount while the program does. */
#ifndef ALARM_EVERY_H
#define ALARM_EVERY_H
#include <signal.h>
#include <string.h>
#include <sys/time.h>

static void alarm_every(void (*handler)(int), long us)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = handler;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, us}, {0, us}};
    setitimer(ITIMER_REAL, &it, NULL);
}

static void alarm_off(void)
{
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
}
#endif
