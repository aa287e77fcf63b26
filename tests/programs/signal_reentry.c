/* A signal handler that touches the mount while the interrupted code is in
 * the middle of mount operations (issue 4, item 7).  SIGALRM fires every
 * 500 us of real time; the handler stat()s and access()es a mount file
 * (both async-signal-safe), the main loop opens, reads, stats and closes.
 * Prints counts that are the same on any correct file system; a deadlock
 * shows as a timeout.  Used by tests/test_signals.py. */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "alarm_every.h"

static char target[4096];
static volatile sig_atomic_t ran, failed;

static void on_alarm(int sig)
{
    struct stat st;
    (void)sig;
    ran = 1;
    if (stat(target, &st) != 0 || st.st_size != 6 || access(target, R_OK) != 0)
        failed++;
}

int main(int argc, char **argv)
{
    char dir[4096], other[4096], buf[64];
    int loop_failures = 0;
    if (argc < 2)
        return 2;
    snprintf(dir, sizeof dir, "%s", argv[1]);
    snprintf(target, sizeof target, "%s/target", dir);
    snprintf(other, sizeof other, "%s/other", dir);
    int fd = open(target, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "target", 6) != 6)
        return 3;
    close(fd);

    /* 500 us: often enough to land inside mount calls, rarely enough that a handler whose
     * two mount calls go to another process (--mode shared, 10-30 us each on a loaded
     * machine) cannot keep the program in its handler forever */
    alarm_every(on_alarm, 500);

    for (int i = 0; i < 3000; i++) {
        struct stat st;
        fd = open(other, O_RDWR | O_CREAT, 0644);
        if (fd < 0) { loop_failures++; continue; }
        if (pwrite(fd, "0123456789", 10, 0) != 10) loop_failures++;
        if (pread(fd, buf, 10, 0) != 10) loop_failures++;
        if (close(fd) != 0) loop_failures++;
        if (stat(other, &st) != 0 || st.st_size != 10) loop_failures++;
        if (i % 100 == 0 && unlink(other) != 0) loop_failures++;
    }
    alarm_off();
    printf("loop failures %d\n", loop_failures);
    printf("handler ran %s, handler failures %d\n", ran ? "yes" : "no", (int)failed);
    return 0;
}
