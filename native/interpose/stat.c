/* stat in all three generations (stat/fstatat, the pre-2.33 __xstat family, statx),
 * access, statfs/statvfs. struct stat and stat64 are one layout on 64-bit Linux. */
#include "../ldpfuse.h"
#include <string.h>

/* fstatat's logic for every spelling; real is called when nothing is virtual. */
static int statat(int dirfd, const char *path, struct stat *st, int flags)
{
    if ((flags & AT_EMPTY_PATH) && path && path[0] == '\0') {
        if (dirfd == AT_FDCWD) {
            if (ldp_cwd_virtual && !ldp_guard) {
                struct vpath vp;
                const char *dot = ".";
                if (vfs_lookup(AT_FDCWD, &dot, &vp))
                    return vfs_getattr(&vp, 0, st);
            }
        } else {
            struct vfile *v = vfd_served(dirfd);
            if (v)
                return vfs_fgetattr(dirfd, v, st);
        }
        return REAL(fstatat)(dirfd, path, st, flags);
    }
    struct vpath vp;
    if (LIKELY(!vfs_lookup(dirfd, &path, &vp))) {
        int r = REAL(fstatat)(dirfd, path, st, flags);
        if (LIKELY(r == 0) || errno != ENOENT ||
            !vfs_lookup_outside_link(dirfd, path, !(flags & AT_SYMLINK_NOFOLLOW), &vp))
            return r;
    }
    return vfs_getattr(&vp, !(flags & AT_SYMLINK_NOFOLLOW), st);
}

int stat(const char *path, struct stat *st)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp))) {
        int r = REAL(stat)(path, st);
        if (LIKELY(r == 0) || errno != ENOENT || !vfs_lookup_outside_link(AT_FDCWD, path, 1, &vp))
            return r;
    }
    return vfs_getattr(&vp, 1, st);
}
int stat64(const char *path, struct stat64 *st)
{
    return stat(path, (struct stat *)st);
}
int lstat(const char *path, struct stat *st)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp))) {
        int r = REAL(lstat)(path, st);
        if (LIKELY(r == 0) || errno != ENOENT || !vfs_lookup_outside_link(AT_FDCWD, path, 0, &vp))
            return r;
    }
    return vfs_getattr(&vp, 0, st);
}
int lstat64(const char *path, struct stat64 *st)
{
    return lstat(path, (struct stat *)st);
}
int fstat(int fd, struct stat *st)
{
    struct vfile *v = vfd_served(fd);
    if (LIKELY(v == NULL))
        return REAL(fstat)(fd, st);
    return vfs_fgetattr(fd, v, st);
}
int fstat64(int fd, struct stat64 *st)
{
    return fstat(fd, (struct stat *)st);
}
int fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
    return statat(dirfd, path, st, flags);
}
int fstatat64(int dirfd, const char *path, struct stat64 *st, int flags)
{
    return statat(dirfd, path, (struct stat *)st, flags);
}
int __xstat(int ver, const char *path, struct stat *st)
{
    (void)ver;
    return stat(path, st);
}
int __xstat64(int ver, const char *path, struct stat64 *st)
{
    (void)ver;
    return stat(path, (struct stat *)st);
}
int __lxstat(int ver, const char *path, struct stat *st)
{
    (void)ver;
    return lstat(path, st);
}
int __lxstat64(int ver, const char *path, struct stat64 *st)
{
    (void)ver;
    return lstat(path, (struct stat *)st);
}
int __fxstat(int ver, int fd, struct stat *st)
{
    (void)ver;
    return fstat(fd, st);
}
int __fxstat64(int ver, int fd, struct stat64 *st)
{
    (void)ver;
    return fstat(fd, (struct stat *)st);
}
int __fxstatat(int ver, int dirfd, const char *path, struct stat *st, int flags)
{
    (void)ver;
    return statat(dirfd, path, st, flags);
}
int __fxstatat64(int ver, int dirfd, const char *path, struct stat64 *st, int flags)
{
    (void)ver;
    return statat(dirfd, path, (struct stat *)st, flags);
}

int statx(int dirfd, const char *path, int flags, unsigned mask, struct statx *stx)
{
    struct stat st;
    int r;
    if ((flags & AT_EMPTY_PATH) && path && path[0] == '\0') {
        struct vfile *v = dirfd == AT_FDCWD ? NULL : vfd_served(dirfd);
        if (LIKELY(v == NULL) && !(dirfd == AT_FDCWD && ldp_cwd_virtual && !ldp_guard))
            return REAL(statx)(dirfd, path, flags, mask, stx);
        r = statat(dirfd, path, &st, flags);
    } else {
        struct vpath vp;
        if (LIKELY(!vfs_lookup(dirfd, &path, &vp))) {
            r = REAL(statx)(dirfd, path, flags, mask, stx);
            if (LIKELY(r == 0) || errno != ENOENT ||
                !vfs_lookup_outside_link(dirfd, path, !(flags & AT_SYMLINK_NOFOLLOW), &vp))
                return r;
        }
        r = vfs_getattr(&vp, !(flags & AT_SYMLINK_NOFOLLOW), &st);
    }
    if (r == 0)
        stat_to_statx(&st, mask, stx);
    return r;
}

/* ---- access */
int faccessat(int dirfd, const char *path, int mode, int flags)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(dirfd, &path, &vp))) {
        int r = REAL(faccessat)(dirfd, path, mode, flags);
        if (LIKELY(r == 0) || errno != ENOENT ||
            !vfs_lookup_outside_link(dirfd, path, !(flags & AT_SYMLINK_NOFOLLOW), &vp))
            return r;
    }
    return vfs_access(&vp, mode, flags);
}
int access(const char *path, int mode)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp))) {
        int r = REAL(access)(path, mode);
        if (LIKELY(r == 0) || errno != ENOENT || !vfs_lookup_outside_link(AT_FDCWD, path, 1, &vp))
            return r;
    }
    return vfs_access(&vp, mode, 0);
}
int euidaccess(const char *path, int mode)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp)))
        return REAL(euidaccess)(path, mode);
    return vfs_access(&vp, mode, AT_EACCESS);
}
int eaccess(const char *path, int mode)
{
    return euidaccess(path, mode);
}

/* ---- statfs / statvfs */
static int fd_statvfs(int fd, struct statvfs *sv, int *handled)
{
    struct vpath vp;
    *handled = !ldp_guard && vfs_fd_vpath(fd, &vp);
    return *handled ? vfs_statvfs(&vp, sv) : 0;
}

int statvfs(const char *path, struct statvfs *sv)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp)))
        return REAL(statvfs)(path, sv);
    return vfs_statvfs(&vp, sv);
}
int statvfs64(const char *path, struct statvfs64 *sv)
{
    return statvfs(path, (struct statvfs *)sv);
}
int fstatvfs(int fd, struct statvfs *sv)
{
    int handled, r = fd_statvfs(fd, sv, &handled);
    return handled ? r : REAL(fstatvfs)(fd, sv);
}
int fstatvfs64(int fd, struct statvfs64 *sv)
{
    return fstatvfs(fd, (struct statvfs *)sv);
}
int statfs(const char *path, struct statfs *sf)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp)))
        return REAL(statfs)(path, sf);
    struct statvfs sv;
    if (vfs_statvfs(&vp, &sv) < 0)
        return -1;
    statvfs_to_statfs(&sv, sf);
    return 0;
}
int statfs64(const char *path, struct statfs64 *sf)
{
    return statfs(path, (struct statfs *)sf);
}
int fstatfs(int fd, struct statfs *sf)
{
    struct statvfs sv;
    int handled, r = fd_statvfs(fd, &sv, &handled);
    if (!handled)
        return REAL(fstatfs)(fd, sf);
    if (r == 0)
        statvfs_to_statfs(&sv, sf);
    return r;
}
int fstatfs64(int fd, struct statfs64 *sf)
{
    return fstatfs(fd, (struct statfs *)sf);
}

/* ---- pathconf: glibc's asks statfs by its own internal call, past the wrappers. A path
 * in a mount must exist (the FS's statfs after a lookup); the name length is the FS's,
 * the rest are what the kernel would say of a directory on /, where nothing depends on
 * the file system. */
static long mount_pathconf(const struct vpath *vp, int name)
{
    struct statvfs sv;
    if (vfs_statvfs(vp, &sv) < 0)
        return -1;
    if (name == _PC_NAME_MAX)
        return sv.f_namemax ? (long)sv.f_namemax : NAME_MAX;
    return REAL(pathconf)("/", name);
}
long pathconf(const char *path, int name)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp)))
        return REAL(pathconf)(path, name);
    return mount_pathconf(&vp, name);
}
long fpathconf(int fd, int name)
{
    struct vpath vp;
    if (LIKELY(ldp_guard || !vfs_fd_vpath(fd, &vp)))
        return REAL(fpathconf)(fd, name);
    return mount_pathconf(&vp, name);
}
