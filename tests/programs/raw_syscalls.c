/* File system calls made with inline `syscall` instructions, never through libc, as Go's
 * runtime, liburing or a JIT make them: no LD_PRELOAD wrapper can see these. Used by
 * tests/test_escapes.py: under --watch-escapes they are served (the output is the same
 * as on a native directory), under --strict they fail with EIO.
 * Usage: raw_syscalls DIR [thread|fork]   (DIR holds a file "hello"; the program creates
 * "made"); with "thread" or "fork" the calls are made in a new thread or a forked child,
 * where the net must be armed again.
 * raw_syscalls DIR rename-into FILE: one renameat of FILE (outside DIR) to DIR/"moved",
 * whose only path in a mount is the second one.
 * raw_syscalls DIR watch: inotify_add_watch of DIR/hello, as Go's fsnotify makes it. */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <sys/wait.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static long raw(long nr, long a, long b, long c, long d)
{
    long r;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    return r;
}

static int failed(const char *what, long r)
{
    if (r >= 0)
        return 0;
    printf("%s: %s\n", what, strerror((int)-r));
    return 1;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int calls(const char *dir)
{
    char path[4096], made[4096], buf[256];
    snprintf(path, sizeof path, "%s/hello", dir);
    snprintf(made, sizeof made, "%s/made", dir);
    int bad = 0;

    long fd = raw(SYS_openat, AT_FDCWD, (long)path, O_RDONLY, 0);
    if (!(bad |= failed("openat", fd))) {
        long n = raw(SYS_read, fd, (long)buf, sizeof buf - 1, 0);
        if (!(bad |= failed("read", n))) {
            buf[n] = '\0';
            printf("read %ld bytes: %s", n, buf);
        }
        bad |= failed("close", raw(SYS_close, fd, 0, 0, 0));
    }

    struct stat st;
    long r = raw(SYS_newfstatat, AT_FDCWD, (long)path, (long)&st, 0);
    if (!(bad |= failed("newfstatat", r)))
        printf("newfstatat: regular %d, size %lld, mode %o\n", S_ISREG(st.st_mode),
               (long long)st.st_size, (unsigned)(st.st_mode & 07777));

    fd = raw(SYS_openat, AT_FDCWD, (long)made, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (!(bad |= failed("openat O_CREAT", fd))) {
        bad |= failed("write", raw(SYS_write, fd, (long)"made raw\n", 9, 0));
        bad |= failed("close", raw(SYS_close, fd, 0, 0, 0));
        FILE *f = fopen(made, "r");     /* read back through libc */
        if (f && fgets(buf, sizeof buf, f))
            printf("fopen reads back: %s", buf);
        if (f)
            fclose(f);
    }

    fd = raw(SYS_openat, AT_FDCWD, (long)dir, O_RDONLY | O_DIRECTORY, 0);
    if (!(bad |= failed("openat O_DIRECTORY", fd))) {
        char *names[64];
        int nn = 0;
        char dents[512];    /* small: several getdents64 calls */
        for (;;) {
            long n = raw(SYS_getdents64, fd, (long)dents, sizeof dents, 0);
            if ((bad |= failed("getdents64", n)) || n == 0)
                break;
            for (long off = 0; off < n;) {
                char *name = dents + off + 19;
                unsigned short reclen;
                memcpy(&reclen, dents + off + 16, sizeof reclen);
                if (nn < 64)
                    names[nn++] = strdup(name);
                off += reclen;
            }
        }
        qsort(names, (size_t)nn, sizeof *names, cmp);
        printf("getdents64:");
        for (int i = 0; i < nn; i++)
            printf(" %s", names[i]);
        printf("\n");
        bad |= failed("close", raw(SYS_close, fd, 0, 0, 0));
    }
    return bad;
}

static void *in_thread(void *dir)
{
    return (void *)(long)calls(dir);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        return 2;
    if (argc > 2 && strcmp(argv[2], "watch") == 0) {
        char hello[4096];
        snprintf(hello, sizeof hello, "%s/hello", argv[1]);
        long fd = raw(SYS_inotify_init1, 0, 0, 0, 0);
        long r = fd < 0 ? fd : raw(SYS_inotify_add_watch, fd, (long)hello, 2 /* IN_MODIFY */, 0);
        printf("inotify_add_watch: %s\n", r < 0 ? strerror((int)-r) : "a watch");
        return r < 0;
    }
    if (argc > 3 && strcmp(argv[2], "rename-into") == 0) {
        char moved[4096];
        snprintf(moved, sizeof moved, "%s/moved", argv[1]);
        long r = raw(SYS_renameat, AT_FDCWD, (long)argv[3], AT_FDCWD, (long)moved);
        printf("renameat: %s\n", r < 0 ? strerror((int)-r) : "done");
        return r < 0;
    }
    if (argc > 2 && strcmp(argv[2], "thread") == 0) {
        pthread_t t;
        void *r;
        if (pthread_create(&t, NULL, in_thread, argv[1]) != 0 || pthread_join(t, &r) != 0)
            return 3;
        return (int)(long)r;
    }
    if (argc > 2 && strcmp(argv[2], "fork") == 0) {
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0) {
            int r = calls(argv[1]);
            fflush(stdout);
            _exit(r);
        }
        int st;
        if (pid < 0 || waitpid(pid, &st, 0) != pid)
            return 3;
        return WIFEXITED(st) ? WEXITSTATUS(st) : 4;
    }
    return calls(argv[1]);
}
