/* open, openat, creat and their 64-bit and fortified names: one vfs_open. */
#include "../ldpfuse.h"
#include "tmpfile.h"
#include <stdarg.h>

#define MODE_ARG(flags) ({ \
    mode_t m_ = 0; \
    if ((flags) & (O_CREAT | __O_TMPFILE)) { \
        va_list ap; \
        va_start(ap, flags); \
        m_ = (mode_t)va_arg(ap, int); \
        va_end(ap); \
    } \
    m_; })

static int openat_common(int dirfd, const char *path, int flags, mode_t mode, int (*real)(int, const char *, int, ...))
{
    struct vpath vp;
    if (UNLIKELY(ldp_guard))
        return fs_fd(real(dirfd, path, flags, mode));
    if (LIKELY(!vfs_lookup(dirfd, &path, &vp))) {
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
