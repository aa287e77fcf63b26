/* Calls on paths made through libc's syscall() by number, as libuv (statx), gnulib
 * (renameat2) and newer programs (openat2, faccessat2) make them. Given a directory D
 * holding a file "f", prints what each call answered; run natively and in a mount, the two
 * outputs must be the same. */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static char dir[4096];

static const char *in(const char *name)
{
    static char buf[2][4200];
    static int which;
    which ^= 1;
    snprintf(buf[which], sizeof buf[which], "%s/%s", dir, name);
    return buf[which];
}

static void said(const char *what, long r)
{
    if (r < 0)
        printf("%s: -1 %s\n", what, strerror(errno));
    else
        printf("%s: %ld\n", what, r >= 0 && r < 3 ? r : 3);   /* fds differ: say "3+" */
}

static void show_file(const char *name)
{
    char buf[256];
    int fd = (int)syscall(SYS_openat, AT_FDCWD, in(name), O_RDONLY, 0);
    if (fd < 0) {
        printf("  %s: open %s\n", name, strerror(errno));
        return;
    }
    long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = '\0';
    printf("  %s holds %ld bytes: %s", name, n, buf);
    syscall(SYS_close, fd);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    snprintf(dir, sizeof dir, "%s", argv[1]);

    /* openat2: create, exclusive create, a missing file, bad arguments */
    struct open_how how = { .flags = O_WRONLY | O_CREAT | O_TRUNC, .mode = 0640 };
    long fd = syscall(SYS_openat2, AT_FDCWD, in("made"), &how, sizeof how);
    said("openat2 create", fd);
    if (fd >= 0) {
        said("write", syscall(SYS_write, fd, "by openat2\n", 11));
        said("close", syscall(SYS_close, fd));
    }
    show_file("made");
    how.flags = O_WRONLY | O_CREAT | O_EXCL;
    said("openat2 O_EXCL on an existing file", syscall(SYS_openat2, AT_FDCWD, in("made"), &how, sizeof how));
    struct open_how rd = { .flags = O_RDONLY };
    said("openat2 missing", syscall(SYS_openat2, AT_FDCWD, in("missing"), &rd, sizeof rd));
    struct open_how bad = { .flags = O_RDONLY, .mode = 0644 };
    said("openat2 mode without O_CREAT", syscall(SYS_openat2, AT_FDCWD, in("f"), &bad, sizeof bad));
    said("openat2 short how", syscall(SYS_openat2, AT_FDCWD, in("f"), &rd, (size_t)8));
    fd = syscall(SYS_openat2, AT_FDCWD, in("f"), &rd, sizeof rd);
    said("openat2 read", fd);
    if (fd >= 0) {
        char buf[64] = "";
        long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
        printf("  read %ld: %s", n, n > 0 ? buf : "\n");
        struct stat st;
        said("fstat", syscall(SYS_fstat, fd, &st));
        printf("  size %lld mode %o\n", (long long)st.st_size, st.st_mode);
        syscall(SYS_close, fd);
    }
    fd = syscall(SYS_openat2, AT_FDCWD, dir, &(struct open_how){ .flags = O_RDONLY | O_DIRECTORY }, sizeof how);
    said("openat2 directory", fd);
    if (fd >= 0) {
        said("openat2 relative to it", syscall(SYS_openat2, (int)fd, "f", &rd, sizeof rd));
        syscall(SYS_close, fd);
    }

    /* statx, newfstatat, faccessat2 */
    struct statx stx;
    said("statx", syscall(SYS_statx, AT_FDCWD, in("made"), 0, STATX_BASIC_STATS, &stx));
    printf("  size %llu mode %o type %s\n", (unsigned long long)stx.stx_size, stx.stx_mode & 07777,
           S_ISREG(stx.stx_mode) ? "file" : "other");
    said("statx dir", syscall(SYS_statx, AT_FDCWD, dir, 0, STATX_BASIC_STATS, &stx));
    printf("  dir: %s\n", S_ISDIR(stx.stx_mode) ? "yes" : "no");
    said("statx missing", syscall(SYS_statx, AT_FDCWD, in("missing"), 0, STATX_BASIC_STATS, &stx));
    struct stat st;
    said("newfstatat", syscall(SYS_newfstatat, AT_FDCWD, in("f"), &st, 0));
    printf("  size %lld\n", (long long)st.st_size);
    said("faccessat2 R_OK", syscall(SYS_faccessat2, AT_FDCWD, in("f"), R_OK, AT_EACCESS));
    said("faccessat2 missing", syscall(SYS_faccessat2, AT_FDCWD, in("missing"), F_OK, 0));
    said("faccessat F_OK", syscall(SYS_faccessat, AT_FDCWD, in("made"), F_OK));

    /* renameat2: plain, RENAME_NOREPLACE onto an existing name and onto a free one */
    said("renameat2 NOREPLACE onto existing",
         syscall(SYS_renameat2, AT_FDCWD, in("made"), AT_FDCWD, in("f"), RENAME_NOREPLACE));
    said("renameat2 NOREPLACE",
         syscall(SYS_renameat2, AT_FDCWD, in("made"), AT_FDCWD, in("renamed"), RENAME_NOREPLACE));
    said("renameat2", syscall(SYS_renameat2, AT_FDCWD, in("renamed"), AT_FDCWD, in("again"), 0));
    said("renameat2 missing", syscall(SYS_renameat2, AT_FDCWD, in("made"), AT_FDCWD, in("x"), 0));
    show_file("again");

    /* a few more by number: mkdir, symlink, readlink, unlink, rmdir */
    said("mkdir", syscall(SYS_mkdirat, AT_FDCWD, in("sub"), 0755));
    said("symlinkat", syscall(SYS_symlinkat, "again", AT_FDCWD, in("link")));
    char target[64] = "";
    long n = syscall(SYS_readlinkat, AT_FDCWD, in("link"), target, sizeof target - 1);
    printf("readlinkat: %ld %s\n", n, n > 0 ? target : "");
    said("unlinkat link", syscall(SYS_unlinkat, AT_FDCWD, in("link"), 0));
    said("unlinkat dir", syscall(SYS_unlinkat, AT_FDCWD, in("sub"), AT_REMOVEDIR));
    /* a number with nothing to do with paths still works */
    printf("getpid matches: %s\n", syscall(SYS_getpid) == getpid() ? "yes" : "no");
    printf("done\n");
    return 0;
}
