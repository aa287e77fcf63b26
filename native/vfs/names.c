/* Operations on names and attributes: each is one FS call after the path is resolved. */
#include "../ldpfuse.h"
#include <string.h>
#include <sys/xattr.h>
#include <time.h>

/* Every call through BE changes something (access and statfs excepted, which use BE_RO):
 * the attribute cache forgets what it knew, after the call as well as before it (unless the
 * backend tells every process's caches of the change: attrcache_changed, or the mount is
 * one no cache keeps names of, a backing tree's or a union's: attrcache_changed_in).
 * The call runs under the guard (signals blocked), but on a mount with backing trees, whose
 * methods take it themselves for what reaches the class (vfs/backing.c CLASS): there a
 * program with a signal handler pays no rt_sigprocmask pair for an unlink, a rename or a
 * mkdir the tree does. GUARDED as mnt: always under it (the xattrs: backing.c formats a
 * /proc path with snprintf, which is no call for a handler to meet half-done). */
#define GUARDED (-1)
#define BE_RO(mnt, call) ({ \
    struct backend_ops *be_ = backend_get(); \
    ssize_t r_; \
    if (be_ == NULL) { \
        r_ = -EIO; \
    } else if (backing_guard_free(mnt)) { \
        r_ = be_->call; \
    } else { \
        guard_enter(); \
        r_ = be_->call; \
        guard_leave(); \
    } \
    r_; })
#define BE(mnt, call) ({ \
    attrcache_changed_in(mnt); \
    ssize_t rr_ = BE_RO(mnt, call); \
    attrcache_changed_in(mnt); \
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
    struct vpath vp;
    vpath_copy(&vp, vp0);
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
    return be_errno(BE_RO(vp.mnt, access(vp.mnt, vp.path, mode)));
}

/* The FS sees whole paths: a symlink among the directories ("link/new", link -> dir)
 * reaches it unresolved, and an FS that does not follow links answers ENOENT or ENOTDIR.
 * Then the directories are resolved (ELOOP if their links never end) and the call made
 * once more: 1 to retry with vp changed, 0 to keep the answer r, -1 with errno. A backing
 * tree's own miss is final: its walk beneath the lower directory followed those links. */
static int retry_in_real_parent(struct vpath *vp, ssize_t r)
{
    if (r != -ENOENT && r != -ENOTDIR)
        return 0;
    if (ldp_backing_miss == vp->path)
        return 0;       /* a backing tree walked the directories itself (vfs/backing.c) */
    return vfs_resolve_parents(vp);
}
#define BE_NAME(vp, call) ({ \
    ssize_t rn_; \
    int again_ = 0; \
    for (int try_ = 0; try_ < 2; try_++) { \
        ldp_backing_miss = NULL; \
        rn_ = BE((vp)->mnt, call); \
        if (try_ > 0 || (again_ = retry_in_real_parent(vp, rn_)) <= 0) \
            break; \
    } \
    again_ < 0 ? -errno : rn_; })

/* The same for a call with two paths: 1 if either changed. */
static int retry_in_real_parents(struct vpath *a, struct vpath *b, ssize_t r)
{
    if (r != -ENOENT && r != -ENOTDIR)
        return 0;
    int ca = vfs_resolve_parents(a);
    int cb = ca < 0 ? 0 : vfs_resolve_parents(b);
    if (ca < 0 || cb < 0)
        return -1;
    return ca || cb;
}

int vfs_mkdir(const struct vpath *vp0, mode_t mode)
{
    if (!new_name_ok(vp0))
        return -1;
    struct vpath vp;
    vpath_copy(&vp, vp0);
    return be_errno(BE_NAME(&vp, mkdir(vp.mnt, vp.path, S_IFDIR | (mode & 07777 & ~ldp_umask))));
}

int vfs_mknod(const struct vpath *vp0, mode_t mode, dev_t dev)
{
    if (!new_name_ok(vp0))
        return -1;
    mode_t type = mode & S_IFMT;
    if (type == 0)
        type = S_IFREG;
    struct vpath vp;
    vpath_copy(&vp, vp0);
    return be_errno(BE_NAME(&vp, mknod(vp.mnt, vp.path, type | (mode & 07777 & ~ldp_umask), dev)));
}

int vfs_rmdir(const struct vpath *vp)
{
    if (strcmp(vp->path, "/") == 0) {
        errno = EBUSY;
        return -1;
    }
    struct vpath v;
    vpath_copy(&v, vp);
    return be_errno(BE_NAME(&v, rmdir(v.mnt, v.path)));
}

int vfs_unlink(const struct vpath *vp0)
{
    struct vpath vp;
    vpath_copy(&vp, vp0);
    int r = be_errno(BE_NAME(&vp, unlink(vp.mnt, vp.path)));
    if (r == 0)
        vfs_unlinked(vp.mnt, vp.path);
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
    struct vpath f, t;
    vpath_copy(&f, from);
    vpath_copy(&t, to);
    ssize_t rr = BE(f.mnt, rename(f.mnt, f.path, t.path));
    int again = retry_in_real_parents(&f, &t, rr);
    if (again < 0)
        return -1;
    if (again)
        rr = BE(f.mnt, rename(f.mnt, f.path, t.path));
    int r = be_errno(rr);
    if (r == 0)
        vfs_renamed(f.mnt, f.path, t.path);
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
    struct vpath f, t;
    vpath_copy(&f, from);
    vpath_copy(&t, to);
    ssize_t r = BE(t.mnt, link(t.mnt, t.path, f.path));
    int again = retry_in_real_parents(&f, &t, r);
    if (again < 0)
        return -1;
    if (again)
        r = BE(t.mnt, link(t.mnt, t.path, f.path));
    return be_errno(r);
}

int vfs_symlink(const char *target, const struct vpath *vp0)
{
    if (!new_name_ok(vp0))
        return -1;
    struct vpath vp;
    vpath_copy(&vp, vp0);
    return be_errno(BE_NAME(&vp, symlink(vp.mnt, vp.path, target)));
}

ssize_t vfs_readlink(const struct vpath *vp, char *buf, size_t size)
{
    return be_errno(BE_RO(vp->mnt, readlink(vp->mnt, vp->path, buf, size)));
}

int vfs_chmod(const struct vpath *vp0, mode_t mode, int follow_links)
{
    struct vpath vp;
    vpath_copy(&vp, vp0);
    char out[PATH_MAX];
    int r = follow(&vp, follow_links, out, sizeof out);
    if (r <= 0)
        return r < 0 ? -1 : REAL(chmod)(out, mode);
    struct stat st;
    if (vfs_getattr(&vp, 0, &st) < 0)
        return -1;
    return be_errno(BE(vp.mnt, chmod(vp.mnt, vp.path, (st.st_mode & S_IFMT) | (mode & 07777))));
}

int vfs_chown(const struct vpath *vp0, uid_t uid, gid_t gid, int follow_links)
{
    struct vpath vp;
    vpath_copy(&vp, vp0);
    char out[PATH_MAX];
    int r = follow(&vp, follow_links, out, sizeof out);
    if (r <= 0)
        return r < 0 ? -1 : REAL(chown)(out, uid, gid);
    return be_errno(BE_NAME(&vp, chown(vp.mnt, vp.path, uid, gid)));
}

int vfs_truncate(const struct vpath *vp0, off_t len)
{
    struct vpath vp;
    vpath_copy(&vp, vp0);
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
    /* the cache of the file, if it is held, follows under its lock (vfs/pagecache.c) */
    attrcache_changed();
    return be_errno(pcache_truncate_path(&vp, len));
}

int vfs_utimens(const struct vpath *vp0, const struct timespec ts[2], int follow_links)
{
    struct vpath vp;
    vpath_copy(&vp, vp0);
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
    if (ts == NULL || (ts[0].tv_nsec == UTIME_NOW && ts[1].tv_nsec == UTIME_NOW)) {
        /* "now" goes as is: the FS applies its own rule (the kernel lets a writer who is not
         * the owner set the times to now, but only the owner set them to given values) */
        return be_errno(BE(vp.mnt, utimens(vp.mnt, vp.path, NULL)));
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
    return be_errno(BE(vp.mnt, utimens(vp.mnt, vp.path, t)));
}

int vfs_statvfs(const struct vpath *vp, struct statvfs *sv)
{
    struct stat st;
    if (vfs_getattr(vp, 1, &st) < 0)
        return -1;
    int r = be_errno(BE_RO(vp->mnt, statfs(vp->mnt, vp->path, sv)));
    if (r == 0 && sv->f_fsid == 0)
        sv->f_fsid = (unsigned long)ldp_mounts[vp->mnt].dev;
    return r;
}

/* The kernel's limits on an xattr, checked before the path is looked up: a name of 1 to
 * XATTR_NAME_MAX bytes (else ERANGE), a value of at most XATTR_SIZE_MAX (else E2BIG). The
 * FS never sees what the kernel would refuse. */
#define KERNEL_XATTR_NAME_MAX 255
#define KERNEL_XATTR_SIZE_MAX 65536
static int xattr_name_refused(const char *name)
{
    if (name == NULL) {
        errno = EFAULT;
        return 1;
    }
    size_t n = strnlen(name, KERNEL_XATTR_NAME_MAX + 1);
    if (n == 0 || n > KERNEL_XATTR_NAME_MAX) {
        errno = ERANGE;
        return 1;
    }
    return 0;
}

ssize_t vfs_getxattr(const struct vpath *vp0, const char *name, void *val, size_t size, int follow_links)
{
    if (xattr_name_refused(name))
        return -1;
    struct vpath vp;
    vpath_copy(&vp, vp0);
    char out[PATH_MAX];
    int r = follow(&vp, follow_links, out, sizeof out);
    if (r <= 0)
        return r < 0 ? -1 : REAL(getxattr)(out, name, val, size);
    ssize_t n = BE_RO(GUARDED, getxattr(vp.mnt, vp.path, name, val, size));
    return be_errno(n == -ENOSYS ? -ENOTSUP : n);
}

int vfs_setxattr(const struct vpath *vp0, const char *name, const void *val, size_t size, int flags,
                 int follow_links)
{
    if (xattr_name_refused(name))
        return -1;
    if (size > KERNEL_XATTR_SIZE_MAX) {
        errno = E2BIG;
        return -1;
    }
    struct vpath vp;
    vpath_copy(&vp, vp0);
    char out[PATH_MAX];
    int r = follow(&vp, follow_links, out, sizeof out);
    if (r <= 0)
        return r < 0 ? -1 : REAL(setxattr)(out, name, val, size, flags);
    return be_errno(BE(GUARDED, setxattr(vp.mnt, vp.path, name, val, size, flags)));
}

ssize_t vfs_listxattr(const struct vpath *vp0, char *list, size_t size, int follow_links)
{
    struct vpath vp;
    vpath_copy(&vp, vp0);
    char out[PATH_MAX];
    int r = follow(&vp, follow_links, out, sizeof out);
    if (r <= 0)
        return r < 0 ? -1 : REAL(listxattr)(out, list, size);
    return be_errno(BE_RO(GUARDED, listxattr(vp.mnt, vp.path, list, size)));
}

int vfs_removexattr(const struct vpath *vp0, const char *name, int follow_links)
{
    if (xattr_name_refused(name))
        return -1;
    struct vpath vp;
    vpath_copy(&vp, vp0);
    char out[PATH_MAX];
    int r = follow(&vp, follow_links, out, sizeof out);
    if (r <= 0)
        return r < 0 ? -1 : REAL(removexattr)(out, name);
    return be_errno(BE(GUARDED, removexattr(vp.mnt, vp.path, name)));
}
