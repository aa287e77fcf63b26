/* open, openat, creat and their 64-bit and fortified names: one vfs_open. */
#include "../ldpfuse.h"
#include "tmpfile.h"
#include <stdarg.h>
#include <stdlib.h>

#define MODE_ARG(flags) ({ \
    mode_t m_ = 0; \
    if ((flags) & (O_CREAT | __O_TMPFILE)) { \
        va_list ap; \
        va_start(ap, flags); \
        m_ = (mode_t)va_arg(ap, int); \
        va_end(ap); \
    } \
    m_; })

/* The fd a /proc/self/fd/N, /dev/fd/N or /dev/stdin-like name reopens, or -1. */
static int reopened_fd(const char *path)
{
    static const char *const dirs[] = { "/proc/self/fd/", "/proc/thread-self/fd/", "/dev/fd/" };
    static const char *const std[] = { "/dev/stdin", "/dev/stdout", "/dev/stderr" };
    if (path == NULL || path[0] != '/' || (strncmp(path, "/proc/", 6) != 0 && strncmp(path, "/dev/", 5) != 0))
        return -1;
    for (int i = 0; i < 3; i++)
        if (strcmp(path, std[i]) == 0)
            return i;
    const char *n = NULL;
    for (int i = 0; i < 3 && n == NULL; i++)
        if (strncmp(path, dirs[i], strlen(dirs[i])) == 0)
            n = path + strlen(dirs[i]);
    char own[40];
    snprintf(own, sizeof own, "/proc/%d/fd/", (int)getpid());
    if (n == NULL && strncmp(path, own, strlen(own)) == 0)
        n = path + strlen(own);
    if (n == NULL || *n < '0' || *n > '9')
        return -1;
    char *end;
    long fd = strtol(n, &end, 10);
    return *end == '\0' && fd <= INT_MAX ? (int)fd : -1;
}

/* A reopen of a cached fd through /proc (glibc's freopen(NULL) makes one too) is a new
 * open file description of the memfd, with no page-cache state of ours: its reads would
 * reach the holes. The cache is filled whole first. */
static void fill_before_reopen(const char *path, int flags)
{
    if (LIKELY(__atomic_load_n(&ldp_nvfds, __ATOMIC_RELAXED) == 0) || (flags & O_ACCMODE) == O_WRONLY)
        return;
    int fd = reopened_fd(path);
    struct vfile *v = fd >= 0 ? vfd(fd) : NULL;
    if (v && v->kind == VF_FILE && v->pc)
        pcache_fill(v, 0, 0, 1);
}

static int openat_common(int dirfd, const char *path, int flags, mode_t mode, int (*real)(int, const char *, int, ...))
{
    struct vpath vp;
    if (UNLIKELY(ldp_guard))
        return fs_fd(real(dirfd, path, flags, mode));
    if (LIKELY(!vfs_lookup(dirfd, &path, &vp))) {
        fill_before_reopen(path, flags);
        int fd = real(dirfd, path, flags, mode);
        /* a symlink outside the mount that points into it: the kernel found nothing */
        if (LIKELY(fd >= 0) || errno != ENOENT ||
            !vfs_lookup_outside_link(dirfd, path, !(flags & O_NOFOLLOW), &vp))
            return fd;
    }
    if ((flags & __O_TMPFILE) == __O_TMPFILE)
        return tmpfile_open(&vp, flags, mode);
    return vfs_open_in_place(&vp, flags, mode);
}

int open(const char *path, int flags, ...)
{
    return openat_common(AT_FDCWD, path, flags, MODE_ARG(flags), REAL(openat));
}
int open64(const char *path, int flags, ...)
{
    return openat_common(AT_FDCWD, path, flags, MODE_ARG(flags), REAL(openat64));
}
int openat(int dirfd, const char *path, int flags, ...)
{
    return openat_common(dirfd, path, flags, MODE_ARG(flags), REAL(openat));
}
int openat64(int dirfd, const char *path, int flags, ...)
{
    return openat_common(dirfd, path, flags, MODE_ARG(flags), REAL(openat64));
}
int __open_2(const char *path, int flags)
{
    return openat_common(AT_FDCWD, path, flags, 0, REAL(openat));
}
int __open64_2(const char *path, int flags)
{
    return openat_common(AT_FDCWD, path, flags, 0, REAL(openat64));
}
int __openat_2(int dirfd, const char *path, int flags)
{
    return openat_common(dirfd, path, flags, 0, REAL(openat));
}
int __openat64_2(int dirfd, const char *path, int flags)
{
    return openat_common(dirfd, path, flags, 0, REAL(openat64));
}
int creat(const char *path, mode_t mode)
{
    return openat_common(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode, REAL(openat));
}
int creat64(const char *path, mode_t mode)
{
    return openat_common(AT_FDCWD, path, O_CREAT | O_WRONLY | O_TRUNC, mode, REAL(openat64));
}
