/* Operations on names and attributes: each is one FS call after the path is resolved. */
#include "../ldpfuse.h"
#include <string.h>
#include <sys/xattr.h>
#include <time.h>

/* Every call through BE changes something (access and statfs excepted, which use BE_RO):
 * the attribute cache forgets what it knew, after the call as well as before it (unless the
 * backend tells every process's caches of the change: attrcache_changed). */
#define BE_RO(call) ({ \
    struct backend_ops *be_ = backend_get(); \
    ssize_t r_; \
    if (be_ == NULL) { \
        r_ = -EIO; \
    } else { \
        guard_enter(); \
        r_ = be_->call; \
        guard_leave(); \
    } \
    r_; })
#define BE(call) ({ \
    attrcache_changed(); \
    ssize_t rr_ = BE_RO(call); \
    attrcache_changed(); \
    rr_; })

/* A new name longer than NAME_MAX is refused as by the kernel (ENAMETOOLONG). */
static int new_name_ok(const struct vpath *vp)
{
    if (!vpath_name_too_long(vp->path))
        return 1;
    errno = ENAMETOOLONG;
    return 0;
}

/* Resolve a symlink in the last component when the call follows links. Returns 1 when the
 * object is in a mount (vp updated), 0 when it is outside (out holds the real path). */
static int follow(struct vpath *vp, int follow_links, char *out, size_t size)
{
    if (!follow_links)
        return 1;
    return vfs_follow(vp, out, size);
}

int vfs_access(const struct vpath *vp0, int mode, int flags)
{
    struct vpath vp = *vp0;
    char out[PATH_MAX];
    int r = follow(&vp, !(flags & AT_SYMLINK_NOFOLLOW), out, sizeof out);
    if (r < 0)
        return -1;
    if (r == 0)
        return REAL(faccessat)(AT_FDCWD, out, mode, flags);
    struct stat st;
    if (vfs_getattr(&vp, 0, &st) < 0)
        return -1;
    if (mode == F_OK)
        return 0;
    return be_errno(BE_RO(access(vp.mnt, vp.path, mode)));
}

int vfs_mkdir(const struct vpath *vp, mode_t mode)
{
    if (!new_name_ok(vp))
        return -1;
    return be_errno(BE(mkdir(vp->mnt, vp->path, S_IFDIR | (mode & 07777 & ~ldp_umask))));
}

int vfs_mknod(const struct vpath *vp, mode_t mode, dev_t dev)
{
    if (!new_name_ok(vp))
        return -1;
    mode_t type = mode & S_IFMT;
    if (type == 0)
        type = S_IFREG;
    return be_errno(BE(mknod(vp->mnt, vp->path, type | (mode & 07777 & ~ldp_umask), dev)));
}

int vfs_rmdir(const struct vpath *vp)
{
    if (strcmp(vp->path, "/") == 0) {
        errno = EBUSY;
        return -1;
    }
    return be_errno(BE(rmdir(vp->mnt, vp->path)));
}

int vfs_unlink(const struct vpath *vp)
{
    int r = be_errno(BE(unlink(vp->mnt, vp->path)));
    if (r == 0)
        vfs_unlinked(vp->mnt, vp->path);
    return r;
}

int vfs_rename(const struct vpath *from, const struct vpath *to, unsigned flags)
{
    if (from->mnt != to->mnt) {
        errno = EXDEV;
        return -1;
    }
    if (!new_name_ok(to))
        return -1;
    if (flags & ~RENAME_NOREPLACE) {
        errno = EINVAL;         /* RENAME_EXCHANGE/WHITEOUT: fusepy's rename has no flags */
        return -1;
    }
    struct stat st;
    if (flags & RENAME_NOREPLACE) {
        if (vfs_getattr(to, 0, &st) == 0) {
            errno = EEXIST;
            return -1;
        }
    }
    if (strcmp(from->path, "/") == 0 || strcmp(to->path, "/") == 0) {
        errno = EBUSY;
        return -1;
    }
    int r = be_errno(BE(rename(from->mnt, from->path, to->path)));
    if (r == 0)
        vfs_renamed(from->mnt, from->path, to->path);
    return r;
}

int vfs_link(const struct vpath *from, const struct vpath *to)
{
    if (from->mnt != to->mnt) {
        errno = EXDEV;
        return -1;
    }
    if (!new_name_ok(to))
        return -1;
    return be_errno(BE(link(to->mnt, to->path, from->path)));
}

int vfs_symlink(const char *target, const struct vpath *vp)
{
    if (!new_name_ok(vp))
        return -1;
    return be_errno(BE(symlink(vp->mnt, vp->path, target)));
}

ssize_t vfs_readlink(const struct vpath *vp, char *buf, size_t size)
{
    return be_errno(BE_RO(readlink(vp->mnt, vp->path, buf, size)));
}

int vfs_chmod(const struct vpath *vp0, mode_t mode, int follow_links)
{
    struct vpath vp = *vp0;
    char out[PATH_MAX];
    int r = follow(&vp, follow_links, out, sizeof out);
    if (r <= 0)
        return r < 0 ? -1 : REAL(chmod)(out, mode);
    struct stat st;
    if (vfs_getattr(&vp, 0, &st) < 0)
        return -1;
    return be_errno(BE(chmod(vp.mnt, vp.path, (st.st_mode & S_IFMT) | (mode & 07777))));
}

int vfs_chown(const struct vpath *vp0, uid_t uid, gid_t gid, int follow_links)
{
    struct vpath vp = *vp0;
    char out[PATH_MAX];
    int r = follow(&vp, follow_links, out, sizeof out);
    if (r <= 0)
        return r < 0 ? -1 : REAL(chown)(out, uid, gid);
    return be_errno(BE(chown(vp.mnt, vp.path, uid, gid)));
}

int vfs_truncate(const struct vpath *vp0, off_t len)
{
    struct vpath vp = *vp0;
    char out[PATH_MAX];
    int r = follow(&vp, 1, out, sizeof out);
    if (r <= 0)
        return r < 0 ? -1 : REAL(truncate)(out, len);
    if (len < 0) {
        errno = EINVAL;
        return -1;
    }
    struct stat st;
    if (vfs_getattr(&vp, 0, &st) < 0)
        return -1;
    if (S_ISDIR(st.st_mode)) {
        errno = EISDIR;
        return -1;
    }
    return be_errno(BE(truncate(vp.mnt, vp.path, len, NULL)));
}

int vfs_utimens(const struct vpath *vp0, const struct timespec ts[2], int follow_links)
{
    struct vpath vp = *vp0;
    char out[PATH_MAX];
    int r = follow(&vp, follow_links, out, sizeof out);
    if (r <= 0)
        return r < 0 ? -1 : REAL(utimensat)(AT_FDCWD, out, ts, 0);
    struct timespec t[2], now;
    clock_gettime(CLOCK_REALTIME, &now);
    /* a missing path is ENOENT, as the kernel's lookup makes it, whatever the FS's
     * utimens would say (fusepy's default answers 0: `touch` on a read-only FS then
     * "succeeds" at creating nothing) */
    struct stat st;
    if (vfs_getattr(&vp, 0, &st) < 0)
        return -1;
    if (ts == NULL) {
        t[0] = t[1] = now;
    } else {
        t[0] = ts[0];
        t[1] = ts[1];
        if (t[0].tv_nsec == UTIME_OMIT && t[1].tv_nsec == UTIME_OMIT)
            return 0;
        int have = 1;
        for (int i = 0; i < 2; i++) {
            if (t[i].tv_nsec == UTIME_NOW) {
                t[i] = now;
            } else if (t[i].tv_nsec == UTIME_OMIT) {
                if (!have && vfs_getattr(&vp, 0, &st) < 0)
                    return -1;
                have = 1;
                t[i] = i == 0 ? st.st_atim : st.st_mtim;
            } else if (t[i].tv_nsec < 0 || t[i].tv_nsec >= 1000000000L) {
                errno = EINVAL;
                return -1;
            }
        }
    }
    return be_errno(BE(utimens(vp.mnt, vp.path, t)));
}

int vfs_statvfs(const struct vpath *vp, struct statvfs *sv)
{
    struct stat st;
    if (vfs_getattr(vp, 1, &st) < 0)
        return -1;
    int r = be_errno(BE_RO(statfs(vp->mnt, vp->path, sv)));
    if (r == 0 && sv->f_fsid == 0)
        sv->f_fsid = (unsigned long)ldp_mounts[vp->mnt].dev;
    return r;
}

ssize_t vfs_getxattr(const struct vpath *vp0, const char *name, void *val, size_t size, int follow_links)
{
    struct vpath vp = *vp0;
    char out[PATH_MAX];
    int r = follow(&vp, follow_links, out, sizeof out);
    if (r <= 0)
        return r < 0 ? -1 : REAL(getxattr)(out, name, val, size);
    ssize_t n = BE_RO(getxattr(vp.mnt, vp.path, name, val, size));
    return be_errno(n == -ENOSYS ? -ENOTSUP : n);
}

int vfs_setxattr(const struct vpath *vp0, const char *name, const void *val, size_t size, int flags,
                 int follow_links)
{
    struct vpath vp = *vp0;
    char out[PATH_MAX];
    int r = follow(&vp, follow_links, out, sizeof out);
    if (r <= 0)
        return r < 0 ? -1 : REAL(setxattr)(out, name, val, size, flags);
    return be_errno(BE(setxattr(vp.mnt, vp.path, name, val, size, flags)));
}

ssize_t vfs_listxattr(const struct vpath *vp0, char *list, size_t size, int follow_links)
{
    struct vpath vp = *vp0;
    char out[PATH_MAX];
    int r = follow(&vp, follow_links, out, sizeof out);
    if (r <= 0)
        return r < 0 ? -1 : REAL(listxattr)(out, list, size);
    return be_errno(BE_RO(listxattr(vp.mnt, vp.path, list, size)));
}

int vfs_removexattr(const struct vpath *vp0, const char *name, int follow_links)
{
    struct vpath vp = *vp0;
    char out[PATH_MAX];
    int r = follow(&vp, follow_links, out, sizeof out);
    if (r <= 0)
        return r < 0 ? -1 : REAL(removexattr)(out, name);
    return be_errno(BE(removexattr(vp.mnt, vp.path, name)));
}
