/* A signal handler that changes names in the mount while the program does the same: SIGALRM
 * every 50 us (setitimer), whose handler (argv[2] "names") stats a file at every run, opens
 * and reads it at every 4th, and at every 16th creates, writes, renames, stats, reads and
 * unlinks a file, opens and stats a missing name, and makes and removes a directory, all
 * in the mount (at 50 us a handler that did it all every time would leave the loop no
 * time; argv[2] "stat": it only stats,
 * for a mount whose opens allocate), while the main loop creates, writes, renames, stats,
 * reads, lists and unlinks files and makes and removes directories. Each handler run
 * leaves nothing behind; the main loop leaves a known tree.
 * Prints counts that are the same on any correct file system; a deadlock shows as a
 * timeout, a corrupted table as a failed call or a wrong tree. vfs/backing.c runs these
 * operations without blocking signals (CLASS). Used by tests/test_signals.py. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/time.h>
#include <unistd.h>

#include "alarm_every.h"

#define ROUNDS 600

static char root[3000], hf[4096], hg[4096], hd[4096], target[4096];
static int names;
static volatile sig_atomic_t ran, failed;
static unsigned fired;

static void on_alarm(int sig)
{
    int saved = errno;
    struct stat st;
    char c[16];
    (void)sig;
    ran = 1;
    fired++;
    if (stat(target, &st) != 0 || st.st_size != 6)
        failed++;
    int fd = !names || fired % 4 ? -2 : open(target, O_RDONLY);
    if (fd != -2 && (fd < 0 || read(fd, c, sizeof c) != 6 || close(fd) != 0))
        failed++;
    if (names && fired % 16 == 0) {
        fd = open(hf, O_WRONLY | O_CREAT | O_EXCL, 0644);
        if (fd < 0 || write(fd, "handler", 7) != 7 || close(fd) != 0)
            failed++;
        if (rename(hf, hg) != 0 || stat(hg, &st) != 0 || st.st_size != 7 || stat(hf, &st) == 0)
            failed++;
        if (open(hf, O_RDONLY) >= 0 || errno != ENOENT)     /* a missing name: no malloc */
            failed++;
        fd = open(hg, O_RDONLY);
        if (fd < 0 || read(fd, c, sizeof c) != 7 || memcmp(c, "handler", 7) != 0 || close(fd) != 0)
            failed++;
        if (unlink(hg) != 0 || mkdir(hd, 0755) != 0 || rmdir(hd) != 0)
            failed++;
    }
    errno = saved;
}

int main(int argc, char **argv)
{
    char p[4096], q[4096], d[4096], buf[64];
    if (argc < 3)
        return 2;
    names = strcmp(argv[2], "names") == 0;
    snprintf(root, sizeof root, "%s", argv[1]);
    snprintf(p, sizeof p, "%s/sub", root);
    if (mkdir(p, 0755) != 0)
        return 3;
    snprintf(target, sizeof target, "%s/sub/target", root);
    snprintf(hf, sizeof hf, "%s/sub/handler-f", root);
    snprintf(hg, sizeof hg, "%s/handler-g", root);
    snprintf(hd, sizeof hd, "%s/sub/handler-d", root);
    int fd = open(target, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "target", 6) != 6 || close(fd) != 0)
        return 3;

    alarm_every(on_alarm, 50);
    int failures = 0, listed = 0;
    for (int i = 0; i < ROUNDS; i++) {
        struct stat st;
        int len = snprintf(buf, sizeof buf, "round %d\n", i);
        snprintf(p, sizeof p, "%s/sub/f%03d", root, i);
        snprintf(q, sizeof q, "%s/sub/g%03d", root, i);
        snprintf(d, sizeof d, "%s/sub/d%03d", root, i);
        fd = open(p, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0 || write(fd, buf, (size_t)len) != len || close(fd) != 0) failures++;
        if (rename(p, q) != 0 || stat(q, &st) != 0 || st.st_size != len || stat(p, &st) == 0) failures++;
        fd = open(q, O_RDONLY);
        if (fd < 0 || read(fd, buf, sizeof buf) != len || close(fd) != 0) failures++;
        if (mkdir(d, 0700) != 0) failures++;
        if (i % 10 != 0 && (unlink(q) != 0 || rmdir(d) != 0)) failures++;   /* every 10th stays */
        if (i % 50 == 0) {
            DIR *dir = opendir(root);
            if (dir == NULL) failures++;
            else {
                while (readdir(dir)) listed++;
                closedir(dir);
            }
        }
    }
    alarm_off();
    printf("loop failures %d, listings %s\n", failures, listed >= 3 * (ROUNDS / 50) ? "ok" : "short");
    printf("handler ran %s, handler failures %d\n", ran ? "yes" : "no", (int)failed);
    return 0;
}
