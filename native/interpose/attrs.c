/* Changing attributes: mode, owner, size, times, extended attributes. The fd spellings
 * act on a virtual fd's path; passthrough fds are the lower file and go to the kernel,
 * and what it changed is told to every process before the call returns
 * (vfs_changed_through, vfs/passthrough.c). */
#include "../ldpfuse.h"
#include <string.h>
#include <sys/xattr.h>

static inline int fd_vpath(int fd, struct vpath *vp)
{
    return !ldp_guard && vfs_fd_vpath(fd, vp);
}

int fchmodat(int dirfd, const char *path, mode_t mode, int flags)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(dirfd, &path, &vp)))
        return REAL(fchmodat)(dirfd, path, mode, flags);
    if (flags & AT_SYMLINK_NOFOLLOW) {
        /* a symlink's mode cannot change on Linux: glibc answers EOPNOTSUPP before any
         * file system is asked, so the FS is not asked here either */
        struct stat st;
        if (vfs_getattr(&vp, 0, &st) < 0)
            return -1;
        if (S_ISLNK(st.st_mode)) {
            errno = EOPNOTSUPP;
            return -1;
        }
    }
    return vfs_chmod(&vp, mode, !(flags & AT_SYMLINK_NOFOLLOW));
}
int chmod(const char *path, mode_t mode)
{
    return fchmodat(AT_FDCWD, path, mode, 0);
}
int lchmod(const char *path, mode_t mode)
{
    return fchmodat(AT_FDCWD, path, mode, AT_SYMLINK_NOFOLLOW);
}
int fchmod(int fd, mode_t mode)
{
    struct vpath vp;
    if (LIKELY(!fd_vpath(fd, &vp)))
        return (int)vfs_changed_through(fd, REAL(fchmod)(fd, mode));
    return vfs_chmod(&vp, mode, 0);
}

int fchownat(int dirfd, const char *path, uid_t uid, gid_t gid, int flags)
{
    if ((flags & AT_EMPTY_PATH) && path && path[0] == '\0') {
        struct vpath vp;
        if (dirfd != AT_FDCWD && fd_vpath(dirfd, &vp))
            return vfs_chown(&vp, uid, gid, 0);
        return (int)vfs_changed_through(dirfd, REAL(fchownat)(dirfd, path, uid, gid, flags));
    }
    struct vpath vp;
    if (LIKELY(!vfs_lookup(dirfd, &path, &vp)))
        return REAL(fchownat)(dirfd, path, uid, gid, flags);
    return vfs_chown(&vp, uid, gid, !(flags & AT_SYMLINK_NOFOLLOW));
}
int chown(const char *path, uid_t uid, gid_t gid)
{
    return fchownat(AT_FDCWD, path, uid, gid, 0);
}
int lchown(const char *path, uid_t uid, gid_t gid)
{
    return fchownat(AT_FDCWD, path, uid, gid, AT_SYMLINK_NOFOLLOW);
}
int fchown(int fd, uid_t uid, gid_t gid)
{
    struct vpath vp;
    if (LIKELY(!fd_vpath(fd, &vp)))
        return (int)vfs_changed_through(fd, REAL(fchown)(fd, uid, gid));
    return vfs_chown(&vp, uid, gid, 0);
}

int truncate(const char *path, off_t len)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp)))
        return REAL(truncate)(path, len);
    return vfs_truncate(&vp, len);
}
int truncate64(const char *path, off64_t len)
{
    return truncate(path, (off_t)len);
}

/* ---- times */
int utimensat(int dirfd, const char *path, const struct timespec ts[2], int flags)
{
    struct vpath vp;
    if (path == NULL) {         /* Linux: utimensat(fd, NULL, ...) is futimens(fd) */
        if (LIKELY(!fd_vpath(dirfd, &vp)))
            return (int)vfs_changed_through(dirfd, REAL(utimensat)(dirfd, path, ts, flags));
        return vfs_utimens(&vp, ts, 0);
    }
    if ((flags & AT_EMPTY_PATH) && path && path[0] == '\0') {
        if (dirfd != AT_FDCWD && fd_vpath(dirfd, &vp))
            return vfs_utimens(&vp, ts, 0);
        return (int)vfs_changed_through(dirfd, REAL(utimensat)(dirfd, path, ts, flags));
    }
    if (LIKELY(!vfs_lookup(dirfd, &path, &vp)))
        return REAL(utimensat)(dirfd, path, ts, flags);
    return vfs_utimens(&vp, ts, !(flags & AT_SYMLINK_NOFOLLOW));
}
int futimens(int fd, const struct timespec ts[2])
{
    struct vpath vp;
    if (LIKELY(!fd_vpath(fd, &vp)))
        return (int)vfs_changed_through(fd, REAL(futimens)(fd, ts));
    return vfs_utimens(&vp, ts, 0);
}

static const struct timespec *tv_to_ts(const struct timeval *tv, struct timespec ts[2])
{
    if (tv == NULL)
        return NULL;
    for (int i = 0; i < 2; i++) {
        ts[i].tv_sec = tv[i].tv_sec;
        ts[i].tv_nsec = tv[i].tv_usec * 1000;
    }
    return ts;
}
int utimes(const char *path, const struct timeval tv[2])
{
    struct vpath vp;
    struct timespec ts[2];
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp)))
        return REAL(utimes)(path, tv);
    return vfs_utimens(&vp, tv_to_ts(tv, ts), 1);
}
int lutimes(const char *path, const struct timeval tv[2])
{
    struct vpath vp;
    struct timespec ts[2];
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp)))
        return REAL(lutimes)(path, tv);
    return vfs_utimens(&vp, tv_to_ts(tv, ts), 0);
}
int futimes(int fd, const struct timeval tv[2])
{
    struct vpath vp;
    struct timespec ts[2];
    if (LIKELY(!fd_vpath(fd, &vp)))
        return (int)vfs_changed_through(fd, REAL(futimes)(fd, tv));
    return vfs_utimens(&vp, tv_to_ts(tv, ts), 0);
}
int futimesat(int dirfd, const char *path, const struct timeval tv[2])
{
    struct vpath vp;
    struct timespec ts[2];
    if (LIKELY(!vfs_lookup(dirfd, &path, &vp)))
        return REAL(futimesat)(dirfd, path, tv);
    return vfs_utimens(&vp, tv_to_ts(tv, ts), 1);
}
int utime(const char *path, const struct utimbuf *ub)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp)))
        return REAL(utime)(path, ub);
    struct timespec ts[2];
    if (ub) {
        ts[0] = (struct timespec){ ub->actime, 0 };
        ts[1] = (struct timespec){ ub->modtime, 0 };
    }
    return vfs_utimens(&vp, ub ? ts : NULL, 1);
}

/* ---- extended attributes */
#define XATTR_PATH(name, follow, call_real, call_vfs) \
    { \
        struct vpath vp; \
        if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp))) \
            return call_real; \
        return call_vfs; \
    }

ssize_t getxattr(const char *path, const char *name, void *val, size_t size)
XATTR_PATH(getxattr, 1, REAL(getxattr)(path, name, val, size), vfs_getxattr(&vp, name, val, size, 1))
ssize_t lgetxattr(const char *path, const char *name, void *val, size_t size)
XATTR_PATH(lgetxattr, 0, REAL(lgetxattr)(path, name, val, size), vfs_getxattr(&vp, name, val, size, 0))
int setxattr(const char *path, const char *name, const void *val, size_t size, int flags)
XATTR_PATH(setxattr, 1, REAL(setxattr)(path, name, val, size, flags), vfs_setxattr(&vp, name, val, size, flags, 1))
int lsetxattr(const char *path, const char *name, const void *val, size_t size, int flags)
XATTR_PATH(lsetxattr, 0, REAL(lsetxattr)(path, name, val, size, flags), vfs_setxattr(&vp, name, val, size, flags, 0))
ssize_t listxattr(const char *path, char *list, size_t size)
XATTR_PATH(listxattr, 1, REAL(listxattr)(path, list, size), vfs_listxattr(&vp, list, size, 1))
ssize_t llistxattr(const char *path, char *list, size_t size)
XATTR_PATH(llistxattr, 0, REAL(llistxattr)(path, list, size), vfs_listxattr(&vp, list, size, 0))
int removexattr(const char *path, const char *name)
XATTR_PATH(removexattr, 1, REAL(removexattr)(path, name), vfs_removexattr(&vp, name, 1))
int lremovexattr(const char *path, const char *name)
XATTR_PATH(lremovexattr, 0, REAL(lremovexattr)(path, name), vfs_removexattr(&vp, name, 0))

ssize_t fgetxattr(int fd, const char *name, void *val, size_t size)
{
    struct vpath vp;
    if (LIKELY(!fd_vpath(fd, &vp)))
        return REAL(fgetxattr)(fd, name, val, size);
    return vfs_getxattr(&vp, name, val, size, 0);
}
int fsetxattr(int fd, const char *name, const void *val, size_t size, int flags)
{
    struct vpath vp;
    if (LIKELY(!fd_vpath(fd, &vp)))
        return (int)vfs_changed_through(fd, REAL(fsetxattr)(fd, name, val, size, flags));
    return vfs_setxattr(&vp, name, val, size, flags, 0);
}
ssize_t flistxattr(int fd, char *list, size_t size)
{
    struct vpath vp;
    if (LIKELY(!fd_vpath(fd, &vp)))
        return REAL(flistxattr)(fd, list, size);
    return vfs_listxattr(&vp, list, size, 0);
}
int fremovexattr(int fd, const char *name)
{
    struct vpath vp;
    if (LIKELY(!fd_vpath(fd, &vp)))
        return (int)vfs_changed_through(fd, REAL(fremovexattr)(fd, name));
    return vfs_removexattr(&vp, name, 0);
}
