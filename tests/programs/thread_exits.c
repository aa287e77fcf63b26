/* Threads that end while a signal handler touches the mount: SIGALRM every 100 us, whose
 * handler stat()s a file in the mount, while the main thread starts and joins THREADS
 * threads ROUNDS times, each of which stats the file a few times, fills its malloc cache
 * and ends (the main thread blocks SIGALRM: the handler runs on these threads, at their
 * ends too). A thread that ends frees its malloc cache (glibc's __libc_thread_freeres)
 * with signals open, holding its arena's lock now and then; a handler that ran there and
 * entered the file system's Python (the embedded mode: a new thread state, calloc)
 * deadlocked. Prints counts that are the same on any correct file system; a deadlock
 * shows as a timeout. Used by tests/test_signals.py. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "alarm_every.h"

#define THREADS 4
#define ROUNDS 400

static char target[4096];
static volatile sig_atomic_t ran, failed;
static int failures[THREADS];

static void on_alarm(int sig)
{
    struct stat st;
    (void)sig;
    ran = 1;
    if (stat(target, &st) != 0 || st.st_size != 6)
        failed++;
}

static void *work(void *arg)
{
    int t = (int)(long)arg;
    struct stat st;
    sigset_t alrm;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    pthread_sigmask(SIG_UNBLOCK, &alrm, NULL);
    for (int i = 0; i < 3; i++)
        if (stat(target, &st) != 0 || st.st_size != 6)
            failures[t]++;
    /* fill the thread's malloc cache (tcache: 7 chunks of each of 64 sizes), which it frees
     * at its end, each under its arena's lock: a long window for the handler */
    void *p[64][7];
    for (int s = 0; s < 64; s++)
        for (int k = 0; k < 7; k++)
            p[s][k] = malloc(16 * s + 8);
    for (int s = 0; s < 64; s++)
        for (int k = 0; k < 7; k++)
            free(p[s][k]);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    snprintf(target, sizeof target, "%s/target", argv[1]);
    FILE *f = fopen(target, "w");
    if (f == NULL || fputs("target", f) < 0 || fclose(f) != 0)
        return 3;
    /* the handler runs on the threads alone (the main thread blocks it): at their ends too */
    sigset_t alrm;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    pthread_sigmask(SIG_BLOCK, &alrm, NULL);
    alarm_every(on_alarm, 100);
    int total = 0;
    for (int r = 0; r < ROUNDS; r++) {
        pthread_t th[THREADS];
        for (long t = 0; t < THREADS; t++)
            pthread_create(&th[t], NULL, work, (void *)t);
        for (int t = 0; t < THREADS; t++)
            pthread_join(th[t], NULL);
    }
    alarm_off();
    for (int t = 0; t < THREADS; t++)
        total += failures[t];
    printf("loop failures %d\n", total);
    printf("handler ran %s, handler failures %d\n", ran ? "yes" : "no", (int)failed);
    return 0;
}
