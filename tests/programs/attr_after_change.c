/*
 * stat(path) after a change made through an fd shows the change, as the kernel gives it:
 * for each call (ftruncate, pwrite, fallocate, fchmod, fchown, futimens), each open mode
 * that may make it (O_RDWR; the attribute calls O_RDONLY too) and with the fd closed
 * before the second stat or still open, N iterations of
 *
 *     stat(f); fd = open(f, mode); change through fd; [close(fd)]; stat(f)
 *
 * each change to a value the file did not have (sizes grow, modes and owners alternate,
 * times count up). Prints one line per case: "ok", or how many second stats showed the
 * value from before the change and the first of them. The same output natively is the
 * reference.
 *
 *     attr_after_change DIR N            one process
 *     attr_after_change DIR N child      a child process makes the change (and closes, or
 *                                        keeps the fd open until the next iteration); the
 *                                        parent stats before and after it, told by pipes
 *                                        (never by wait(), which forgets every answer)
 *     attr_after_change DIR N child-all  the same, with data that the child writes and
 *                                        has not closed yet: "child" leaves that case out
 *                                        (a passthrough file's writes are told to other
 *                                        processes at its close, docs/passthrough.md)
 *     attr_after_change DIR N vfork      fchmod through an O_RDONLY fd that a vfork child
 *                                        closed in its own fd table before it exited
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

enum call { FTRUNCATE, PWRITE, FALLOCATE, FCHMOD, FCHOWN, FUTIMENS, NCALLS };
static const char *names[NCALLS] = { "ftruncate", "pwrite", "fallocate", "fchmod", "fchown", "futimens" };

static uid_t other_uid;
static gid_t gids[2];
static int can_chown;

/* ftruncate shrinks the file every other iteration, and grows it in between */
static off_t truncated_to(long i)
{
    return i % 2 ? 10 + i % 7 : 1001 + i;
}

/* What iteration i sets through fd; the value it expects stat to show is then checked
 * by shows(). -1 and errno if the call failed. */
static int change(enum call c, int fd, long i)
{
    switch (c) {
    case FTRUNCATE:
        return ftruncate(fd, truncated_to(i));
    case PWRITE:
        return pwrite(fd, "x", 1, 1000 + i) == 1 ? 0 : -1;
    case FALLOCATE:
        return fallocate(fd, 0, 0, 1001 + i);
    case FCHMOD:
        return fchmod(fd, i % 2 ? 0600 : 0640);
    case FCHOWN:
        return fchown(fd, i % 2 ? other_uid : geteuid(), gids[i % 2]);
    case FUTIMENS: {
        struct timespec ts[2] = { { 1000000 + i, 0 }, { 2000000 + i, 0 } };
        return futimens(fd, ts);
    }
    default:
        return -1;
    }
}

static int shows(enum call c, const struct stat *st, long i)
{
    switch (c) {
    case FTRUNCATE:
        return st->st_size == truncated_to(i);
    case PWRITE: case FALLOCATE:
        return st->st_size == 1001 + i;
    case FCHMOD:
        return (st->st_mode & 07777) == (i % 2 ? 0600 : 0640);
    case FCHOWN:
        return st->st_uid == (i % 2 ? other_uid : geteuid()) && st->st_gid == gids[i % 2];
    case FUTIMENS:
        return st->st_mtim.tv_sec == 2000000 + i;
    default:
        return 0;
    }
}

static void shown(enum call c, const struct stat *st, char *out, size_t n)
{
    if (c == FCHMOD)
        snprintf(out, n, "mode %o", (unsigned)(st->st_mode & 07777));
    else if (c == FCHOWN)
        snprintf(out, n, "owner %u:%u", (unsigned)st->st_uid, (unsigned)st->st_gid);
    else if (c == FUTIMENS)
        snprintf(out, n, "mtime %ld", (long)st->st_mtim.tv_sec);
    else
        snprintf(out, n, "size %ld", (long)st->st_size);
}

/* The file the case starts from: empty, 0644, the caller's, times 0. */
static int fresh(const char *f)
{
    unlink(f);
    int fd = open(f, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (fd < 0)
        return -1;
    fchmod(fd, 0644);
    close(fd);
    struct timespec ts[2] = { { 0, 0 }, { 0, 0 } };
    return utimensat(AT_FDCWD, f, ts, 0);
}

static void must(int ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "attr_after_change: %s: %s\n", what, strerror(errno));
        exit(2);
    }
}

/* Tell the other process one byte, wait for its one byte. */
static void say(int fd, char b)
{
    must(write(fd, &b, 1) == 1, "pipe write");
}
static char hear(int fd)
{
    char b = 0;
    must(read(fd, &b, 1) == 1, "pipe read");
    return b;
}

/* The child's side of one case: on 'o' open and answer; on 'c' change, close if asked,
 * answer; on 'n' close what it kept open. The parent stats between the open and the
 * change, so that what it sees was not settled by the open. */
static void child_loop(const char *f, enum call c, int mode, int close_first, long n, int in, int out)
{
    int fd = -1;
    for (long i = 0; i < n; i++) {
        hear(in);
        fd = open(f, mode);
        must(fd >= 0, "child open");
        say(out, 'o');
        hear(in);
        must(change(c, fd, i) == 0, names[c]);
        if (close_first) {
            close(fd);
            fd = -1;
        }
        say(out, 'd');
        hear(in);
        if (fd >= 0)
            close(fd);
        say(out, 'n');
    }
    _exit(0);
}

static void run_case(const char *dir, enum call c, int mode, int close_first, long n, int two)
{
    char f[4096];
    snprintf(f, sizeof f, "%s/%s-%s-%s", dir, names[c], mode == O_RDONLY ? "rdonly" : "rdwr",
             close_first ? "closed" : "open");
    must(fresh(f) == 0, f);
    int to_child[2], from_child[2];
    pid_t pid = -1;
    if (two) {
        must(pipe(to_child) == 0 && pipe(from_child) == 0, "pipe");
        pid = fork();
        must(pid >= 0, "fork");
        if (pid == 0) {
            close(to_child[1]);
            close(from_child[0]);
            child_loop(f, c, mode, close_first, n, to_child[0], from_child[1]);
        }
        close(to_child[0]);
        close(from_child[1]);
    }
    long stale = 0, first = -1;
    char what[128] = "";
    for (long i = 0; i < n; i++) {
        struct stat st;
        int fd = -1;
        if (two) {
            say(to_child[1], 'o');
            hear(from_child[0]);
            must(stat(f, &st) == 0, "stat before");
            say(to_child[1], 'c');
            hear(from_child[0]);
        } else {
            must(stat(f, &st) == 0, "stat before");
            fd = open(f, mode);
            must(fd >= 0, "open");
            must(change(c, fd, i) == 0, names[c]);
            if (close_first) {
                close(fd);
                fd = -1;
            }
        }
        must(stat(f, &st) == 0, "stat after");
        if (!shows(c, &st, i)) {
            if (stale++ == 0) {
                first = i;
                shown(c, &st, what, sizeof what);
            }
        }
        if (fd >= 0)
            close(fd);
        if (two) {
            say(to_child[1], 'n');
            hear(from_child[0]);
        }
    }
    if (two) {
        close(to_child[1]);
        close(from_child[0]);
        waitpid(pid, NULL, 0);
    }
    printf("%s %s %s: ", names[c], mode == O_RDONLY ? "O_RDONLY" : "O_RDWR",
           close_first ? "closed" : "still open");
    if (stale == 0)
        printf("ok\n");
    else
        printf("%ld stale of %ld (first at %ld: %s)\n", stale, n, first, what);
    unlink(f);
}

/* A vfork child's close of fd is its own: the parent's fchmod through it is still told. */
static void vfork_case(const char *dir, long n)
{
    char f[4096];
    snprintf(f, sizeof f, "%s/vfork-closed", dir);
    must(fresh(f) == 0, f);
    long stale = 0, first = -1;
    for (long i = 0; i < n; i++) {
        int fd = open(f, O_RDONLY);
        must(fd >= 0, "open");
        pid_t pid = vfork();
        must(pid >= 0, "vfork");
        if (pid == 0) {
            close(fd);
            _exit(0);
        }
        waitpid(pid, NULL, 0);
        struct stat st;
        must(stat(f, &st) == 0, "stat before");
        must(change(FCHMOD, fd, i) == 0, "fchmod");
        must(stat(f, &st) == 0, "stat after");
        if (!shows(FCHMOD, &st, i) && stale++ == 0)
            first = i;
        close(fd);
    }
    printf("fchmod O_RDONLY after a vfork child closed the fd: ");
    if (stale == 0)
        printf("ok\n");
    else
        printf("%ld stale of %ld (first at %ld)\n", stale, n, first);
    unlink(f);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[3], "vfork") == 0) {
        vfork_case(argv[1], strtol(argv[2], NULL, 10));
        return 0;
    }
    if (argc < 3 || (argc == 4 && strcmp(argv[3], "child") != 0 && strcmp(argv[3], "child-all") != 0) ||
        argc > 4) {
        fprintf(stderr, "usage: attr_after_change DIR N [child|child-all|vfork]\n");
        return 2;
    }
    long n = strtol(argv[2], NULL, 10);
    int two = argc == 4, all = two && strcmp(argv[3], "child-all") == 0;
    gids[0] = gids[1] = getegid();
    other_uid = geteuid();
    can_chown = 1;
    if (geteuid() == 0) {
        other_uid = 65534;
        gids[1] = 65534;
    } else {
        gid_t groups[64];
        int ng = getgroups(64, groups);
        for (int i = 0; i < ng; i++)
            if (groups[i] != gids[0]) {
                gids[1] = groups[i];
                break;
            }
        can_chown = gids[1] != gids[0];
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    for (int c = 0; c < NCALLS; c++) {
        if (c == FCHOWN && !can_chown) {
            printf("fchown: not run (no second group to give the file)\n");
            continue;
        }
        for (int m = 0; m < 2; m++) {
            int mode = m ? O_RDWR : O_RDONLY;
            if (mode == O_RDONLY && c <= FALLOCATE)
                continue;       /* a data change needs a writable fd */
            for (int close_first = 1; close_first >= 0; close_first--) {
                if (two && !all && c == PWRITE && !close_first) {
                    printf("pwrite O_RDWR still open: not run (child)\n");
                    continue;
                }
                run_case(argv[1], (enum call)c, mode, close_first, n, two);
            }
        }
    }
    printf("done\n");
    return 0;
}
