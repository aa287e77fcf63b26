/* Open a FIFO that has no peer, with alarm(1) armed and a SIGALRM handler installed
 * without SA_RESTART (stress-ng's dup stressor does this): the open must end with EINTR,
 * natively and in a mount. Prints "EINTR handler ran", or what the open did instead.
 * Usage: fifo_open_alarm FIFO r|w.  Used by tests/test_fifo.py. */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static volatile sig_atomic_t ran;

static void on_alarm(int sig)
{
    (void)sig;
    ran = 1;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;   /* no SA_RESTART: a slow call ends with EINTR */
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGALRM, &sa, NULL) < 0)
        return 2;
    alarm(1);
    int fd = open(argv[1], argv[2][0] == 'w' ? O_WRONLY : O_RDONLY);
    int saved = errno;
    if (fd >= 0) {
        printf("opened\n");
        return 1;
    }
    printf("%s handler ran %s\n", saved == EINTR ? "EINTR" : strerror(saved), ran ? "yes" : "no");
    return 0;
}
