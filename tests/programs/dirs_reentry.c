/* Names in many directories of a backed tree (vfs/backing_dirs.c keeps them) while a signal
 * handler touches the mount: SIGALRM every 300 us on each of THREADS threads' process,
 * whose handler stat()s and access()es (argv[2] "open": and open()s and reads) a file in a
 * subdirectory, while the threads create,
 * write, read, stat and unlink files across DIRS directories, more than the table of kept
 * directories holds under the test's low RLIMIT_NOFILE: entries are replaced all the time,
 * under the handler too. Prints counts that are the same on any correct file system; a
 * deadlock shows as a timeout. Used by tests/test_signals.py. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "alarm_every.h"

#define DIRS 300
#define THREADS 4
#define ROUNDS 1500

static char root[3000], target[4096];
static int handler_opens;
static volatile sig_atomic_t ran, failed;
static int failures[THREADS];

static void on_alarm(int sig)
{
    struct stat st;
    char c[8];
    (void)sig;
    ran = 1;
    int fd = handler_opens ? open(target, O_RDONLY) : -1;
    if (stat(target, &st) != 0 || st.st_size != 6 || access(target, R_OK) != 0 ||
        (handler_opens && (fd < 0 || read(fd, c, sizeof c) != 6)))
        failed++;
    if (fd >= 0)
        close(fd);
}

static void *work(void *arg)
{
    int t = (int)(long)arg;
    unsigned x = 2463534242u + (unsigned)t;
    char p[4096], buf[64];
    for (int i = 0; i < ROUNDS; i++) {
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        struct stat st;
        snprintf(p, sizeof p, "%s/d%02u/e%03u/t%d", root, x % DIRS / 20, x % DIRS, t);
        int fd = open(p, O_RDWR | O_CREAT | O_EXCL, 0644);
        if (fd < 0 || pwrite(fd, "0123456789", 10, 0) != 10 || close(fd) != 0) failures[t]++;
        fd = open(p, O_RDONLY);
        if (fd < 0 || pread(fd, buf, 10, 0) != 10 || close(fd) != 0) failures[t]++;
        if (stat(p, &st) != 0 || st.st_size != 10 || unlink(p) != 0) failures[t]++;
        if (stat(p, &st) == 0) failures[t]++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    char p[4096];
    if (argc < 3)
        return 2;
    handler_opens = strcmp(argv[2], "open") == 0;
    snprintf(root, sizeof root, "%s", argv[1]);
    for (int d = 0; d < DIRS; d++) {
        snprintf(p, sizeof p, "%s/d%02d", root, d / 20);
        mkdir(p, 0755);
        snprintf(p, sizeof p, "%s/d%02d/e%03d", root, d / 20, d);
        if (mkdir(p, 0755) != 0 && errno != EEXIST)
            return 3;
    }
    snprintf(target, sizeof target, "%s/d07/e150/target", root);
    int fd = open(target, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "target", 6) != 6)
        return 3;
    close(fd);

    alarm_every(on_alarm, 300);
    pthread_t th[THREADS];
    for (long t = 0; t < THREADS; t++)
        pthread_create(&th[t], NULL, work, (void *)t);
    int total = 0;
    for (int t = 0; t < THREADS; t++) {
        pthread_join(th[t], NULL);
        total += failures[t];
    }
    alarm_off();
    printf("loop failures %d\n", total);
    printf("handler ran %s, handler failures %d\n", ran ? "yes" : "no", (int)failed);
    return 0;
}
