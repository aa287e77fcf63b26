/* Creating, removing, renaming and linking names; reading links. */
#include "../ldpfuse.h"
#include "tmpfile.h"
#include <stdio.h>
#include <string.h>

/* "dir/." and "dir/.." name a directory the kernel resolves, then refuses to remove or
 * rename (rmdir: EINVAL and ENOTEMPTY, unlink: EISDIR, rename: EBUSY); lexical
 * normalisation would hand the FS the directory itself. -1 with errno if path is one. */
static int refuse_dot(const char *path, const struct vpath *vp, int e_dot, int e_dotdot)
{
    int d = path_last_is_dot(path);
    if (LIKELY(d == 0))
        return 0;
    struct stat st;
    if (vfs_getattr(vp, 1, &st) == 0)
        errno = !S_ISDIR(st.st_mode) ? ENOTDIR : d == 1 ? e_dot : e_dotdot;
    return -1;
}

int mkdirat(int dirfd, const char *path, mode_t mode)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(dirfd, &path, &vp)))
        return REAL(mkdirat)(dirfd, path, mode);
    return vfs_mkdir(&vp, mode);
}
int mkdir(const char *path, mode_t mode)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp)))
        return REAL(mkdir)(path, mode);
    return vfs_mkdir(&vp, mode);
}
int rmdir(const char *path)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp)))
        return REAL(rmdir)(path);
    if (refuse_dot(path, &vp, EINVAL, ENOTEMPTY))
        return -1;
    return vfs_rmdir(&vp);
}
int unlink(const char *path)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp)))
        return REAL(unlink)(path);
    if (vp.trailing_slash) {
        errno = EISDIR;
        return -1;
    }
    if (refuse_dot(path, &vp, EISDIR, EISDIR))
        return -1;
    return vfs_unlink(&vp);
}
int unlinkat(int dirfd, const char *path, int flags)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(dirfd, &path, &vp)))
        return REAL(unlinkat)(dirfd, path, flags);
    if ((flags & AT_REMOVEDIR) ? refuse_dot(path, &vp, EINVAL, ENOTEMPTY) : refuse_dot(path, &vp, EISDIR, EISDIR))
        return -1;
    return (flags & AT_REMOVEDIR) ? vfs_rmdir(&vp) : vfs_unlink(&vp);
}

/* glibc's remove() calls its own unlink and rmdir, past these wrappers. */
int remove(const char *path)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp)))
        return REAL(remove)(path);
    struct stat st;
    if (vfs_getattr(&vp, 0, &st) < 0)
        return -1;
    if (S_ISDIR(st.st_mode))
        return vfs_rmdir(&vp);
    if (vp.trailing_slash) {
        errno = ENOTDIR;
        return -1;
    }
    return vfs_unlink(&vp);
}

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, unsigned flags)
{
    struct vpath a, b;
    int ia = vfs_lookup(olddirfd, &oldpath, &a);
    int ib = vfs_lookup(newdirfd, &newpath, &b);
    if (LIKELY(!ia && !ib))
        return REAL(renameat2)(olddirfd, oldpath, newdirfd, newpath, flags);
    if (!ia || !ib) {
        int e = vfs_lookup_refused(ia ? newpath : oldpath);
        errno = e ? e : EXDEV;          /* across the mount boundary, as between two file systems */
        return -1;
    }
    if (refuse_dot(oldpath, &a, EBUSY, EBUSY) ||
        refuse_dot(newpath, &b, (flags & RENAME_NOREPLACE) ? EEXIST : EBUSY, (flags & RENAME_NOREPLACE) ? EEXIST : EBUSY))
        return -1;
    return vfs_rename(&a, &b, flags);
}
int renameat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath)
{
    return renameat2(olddirfd, oldpath, newdirfd, newpath, 0);
}
int rename(const char *oldpath, const char *newpath)
{
    return renameat2(AT_FDCWD, oldpath, AT_FDCWD, newpath, 0);
}

int linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath, int flags)
{
    struct vpath a, b;
    int ia = vfs_lookup(olddirfd, &oldpath, &a);
    int ib = vfs_lookup(newdirfd, &newpath, &b);
    if (LIKELY(!ia && !ib))
        return REAL(linkat)(olddirfd, oldpath, newdirfd, newpath, flags);
    if (!ia && ib) {
        /* naming an O_TMPFILE file: by its fd, or by /proc/self/fd/N */
        int fd = -1, r;
        if ((flags & AT_EMPTY_PATH) && oldpath && oldpath[0] == '\0')
            fd = olddirfd;
        else if ((flags & AT_SYMLINK_FOLLOW) && oldpath && sscanf(oldpath, "/proc/self/fd/%d", &fd) != 1)
            fd = -1;
        if (fd >= 0 && tmpfile_link(fd, &b, &r))
            return r;
    }
    if (!ia || !ib) {
        int e = vfs_lookup_refused(ia ? newpath : oldpath);
        errno = e ? e : EXDEV;
        return -1;
    }
    if (flags & AT_SYMLINK_FOLLOW) {
        char out[PATH_MAX];
        int r = vfs_follow(&a, out, sizeof out);
        if (r < 0)
            return -1;
        if (r == 0) {
            errno = EXDEV;
            return -1;
        }
    }
    return vfs_link(&a, &b);
}
int link(const char *oldpath, const char *newpath)
{
    return linkat(AT_FDCWD, oldpath, AT_FDCWD, newpath, 0);
}

int symlinkat(const char *target, int dirfd, const char *linkpath)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(dirfd, &linkpath, &vp)))
        return REAL(symlinkat)(target, dirfd, linkpath);
    if (vfs_lookup_refused(target) == EFAULT) {
        errno = EFAULT;
        return -1;
    }
    if (strnlen(target, PATH_MAX) >= PATH_MAX) {
        errno = ENAMETOOLONG;   /* the kernel takes a link's content as it takes a path */
        return -1;
    }
    return vfs_symlink(target, &vp);
}
int symlink(const char *target, const char *linkpath)
{
    return symlinkat(target, AT_FDCWD, linkpath);
}

ssize_t readlinkat(int dirfd, const char *path, char *buf, size_t size)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(dirfd, &path, &vp)))
        return REAL(readlinkat)(dirfd, path, buf, size);
    return vfs_readlink(&vp, buf, size);
}
ssize_t readlink(const char *path, char *buf, size_t size)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp)))
        return REAL(readlink)(path, buf, size);
    return vfs_readlink(&vp, buf, size);
}
ssize_t __readlink_chk(const char *path, char *buf, size_t size, size_t buflen)
{
    (void)buflen;
    return readlink(path, buf, size);
}
ssize_t __readlinkat_chk(int dirfd, const char *path, char *buf, size_t size, size_t buflen)
{
    (void)buflen;
    return readlinkat(dirfd, path, buf, size);
}

int mknodat(int dirfd, const char *path, mode_t mode, dev_t dev)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(dirfd, &path, &vp)))
        return REAL(mknodat)(dirfd, path, mode, dev);
    return vfs_mknod(&vp, mode, dev);
}
int mknod(const char *path, mode_t mode, dev_t dev)
{
    return mknodat(AT_FDCWD, path, mode, dev);
}
int __xmknod(int ver, const char *path, mode_t mode, dev_t *dev)
{
    (void)ver;
    return mknodat(AT_FDCWD, path, mode, *dev);
}
int __xmknodat(int ver, int dirfd, const char *path, mode_t mode, dev_t *dev)
{
    (void)ver;
    return mknodat(dirfd, path, mode, *dev);
}
int mkfifoat(int dirfd, const char *path, mode_t mode)
{
    return mknodat(dirfd, path, (mode & 07777) | S_IFIFO, 0);
}
int mkfifo(const char *path, mode_t mode)
{
    return mknodat(AT_FDCWD, path, (mode & 07777) | S_IFIFO, 0);
}
