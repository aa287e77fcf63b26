/*
 * -o default_permissions, as kernel FUSE has it: the server checks the caller's rights
 * from what the class's getattr says (owner, group, mode) before the class is called, for
 * file systems that check nothing themselves (the memory example, most fusepy file
 * systems). The rules are the kernel's for a local file system (generic_permission and
 * the VFS's checks around it):
 *
 *  - search (x) permission on every directory above a name;
 *  - read / write / execute on the file by owner, group (the caller's gid or one of its
 *    supplementary groups) or other bits; CAP_DAC_OVERRIDE passes read and write always,
 *    and execute where any x bit is set or on a directory, CAP_DAC_READ_SEARCH read and
 *    search;
 *  - making or removing a name needs write and search on its directory (a device node,
 *    CAP_MKNOD too); in a sticky directory only the owner of the name or of the directory
 *    (or CAP_FOWNER) removes or renames it; moving a directory to another
 *    parent needs write on it (its "..");
 *  - chmod by the owner or CAP_FOWNER (a set-group-ID bit dropped for one not in the
 *    file's group, without CAP_FSETID); chown: the owner may change the group to one of
 *    its groups, only CAP_CHOWN the owner; a hard link only to one's own file, or (fs.protected_hardlinks)
 *    to a regular file one may read and write that is not set-ID; utimens to "now" by
 *    the owner or a writer, to given times by the owner only; user.* xattrs need read or
 *    write on the file, trusted.* and security.* CAP_SYS_ADMIN (security.capability, the
 *    file's own capabilities, CAP_SETFCAP to set).
 *
 * Root's rights are its capabilities (the effective set the kernel shows: credentials.c),
 * never its uid: root with every capability dropped is checked as any other user.
 *
 * Requests that name a handle (read, write, release, readdir, ...) are not checked: the
 * open that gave the handle was. The checks cost getattr calls (one per directory above
 * a name, for a caller that is not root): this is why the option is not on unless asked
 * for, or implied by allow_other (cli.py; docs/security.md).
 */
#include "server.h"
#include <linux/capability.h>

#define MAY_EXEC 1
#define MAY_WRITE 2
#define MAY_READ 4

static int in_group(const struct client *cl, gid_t g)
{
    if (g == cl->as_gid)
        return 1;
    for (int i = 0; i < cl->as_ngroups; i++)
        if (cl->as_groups[i] == g)
            return 1;
    return 0;
}

/* Has the caller this capability (its effective set: credentials.c)? Root's rights here
 * are its capabilities, never its uid: root with every capability dropped is any user. */
static int capable(const struct client *cl, int cap)
{
    return (int)((cl->as_caps >> cap) & 1);
}

/* May the caller do `mask` (MAY_*) to a file with these attributes? 0 or -EACCES (the
 * kernel's generic_permission: the mode bits, then CAP_DAC_READ_SEARCH for reading and
 * searching, CAP_DAC_OVERRIDE for the rest but executing a file no x bit allows). */
static int may(const struct client *cl, const struct stat *st, int mask)
{
    mode_t m = st->st_mode;
    int bits = st->st_uid == cl->as_uid ? (m >> 6) & 7 : in_group(cl, st->st_gid) ? (m >> 3) & 7 : m & 7;
    if ((bits & mask) == mask)
        return 0;
    if (S_ISDIR(m))
        return (!(mask & MAY_WRITE) && capable(cl, CAP_DAC_READ_SEARCH)) || capable(cl, CAP_DAC_OVERRIDE) ? 0 : -EACCES;
    if ((!(mask & MAY_EXEC) || (m & 0111)) && capable(cl, CAP_DAC_OVERRIDE))
        return 0;
    return mask == MAY_READ && capable(cl, CAP_DAC_READ_SEARCH) ? 0 : -EACCES;
}

static int attr(int mnt, const char *path, struct stat *st)
{
    return fs_ops->getattr(mnt, path, NULL, st);
}

/* The parent directory of path ("/" for "/x"), in buf. */
static const char *parent_of(const char *path, char *buf)
{
    const char *slash = strrchr(path, '/');
    size_t n = slash && slash != path ? (size_t)(slash - path) : 1;
    memcpy(buf, path, n);
    buf[n] = '\0';
    return buf;
}

/* Search permission on every directory above path (not path itself). */
static int search(const struct client *cl, int mnt, const char *path)
{
    if (capable(cl, CAP_DAC_READ_SEARCH) || capable(cl, CAP_DAC_OVERRIDE))
        return 0;       /* it searches every directory; the FS says what does not exist */
    char dir[WIRE_PATH_MAX];
    size_t len = strlen(path);
    for (size_t i = 0; i < len; i++) {
        if (path[i] != '/')
            continue;
        size_t n = i ? i : 1;
        if (i && n == len)
            break;
        memcpy(dir, path, n);
        dir[n] = '\0';
        struct stat st;
        int r = attr(mnt, dir, &st);
        if (r < 0)
            return r;
        if (!S_ISDIR(st.st_mode))
            return -ENOTDIR;
        if ((r = may(cl, &st, MAY_EXEC)) < 0)
            return r;
    }
    return 0;
}

/* May the caller search the directory path itself (readdir's attributes of its entries
 * stand for lookups of them)? The directories above it were searched by its opendir. */
int perm_may_search_dir(struct client *cl, int mnt, const char *path)
{
    if (capable(cl, CAP_DAC_READ_SEARCH) || capable(cl, CAP_DAC_OVERRIDE))
        return 1;
    struct stat st;
    struct client *was = srv_current;
    srv_current = cl;       /* the class's getattr may ask fuse_get_context() */
    int r = attr(mnt, path, &st);
    srv_current = was;
    return r == 0 && S_ISDIR(st.st_mode) && may(cl, &st, MAY_EXEC) == 0;
}

/* path, looked up (search above it): its attributes. */
static int lookup(const struct client *cl, int mnt, const char *path, struct stat *st)
{
    int r = search(cl, mnt, path);
    return r < 0 ? r : attr(mnt, path, st);
}

/* Write and search on the directory of path (making or removing its name). */
static int dir_writable(const struct client *cl, int mnt, const char *path, struct stat *dst)
{
    char dir[WIRE_PATH_MAX];
    int r = lookup(cl, mnt, parent_of(path, dir), dst);
    if (r < 0)
        return r;
    if (!S_ISDIR(dst->st_mode))
        return -ENOTDIR;
    return may(cl, dst, MAY_WRITE | MAY_EXEC);
}

/* The sticky rule: in a sticky directory only the owner of the name, of the directory,
 * or root removes or renames it. */
static int sticky_ok(const struct client *cl, const struct stat *dir, const struct stat *st)
{
    if (!(dir->st_mode & S_ISVTX) || capable(cl, CAP_FOWNER) || st->st_uid == cl->as_uid || dir->st_uid == cl->as_uid)
        return 0;
    return -EPERM;
}

/* A name removed from its directory (unlink, rmdir, the source of a rename). */
static int removable(const struct client *cl, int mnt, const char *path, struct stat *st)
{
    struct stat dst;
    int r = dir_writable(cl, mnt, path, &dst);
    if (r < 0)
        return r;
    if ((r = attr(mnt, path, st)) < 0)
        return r;
    return sticky_ok(cl, &dst, st);
}

static int is_owner(const struct client *cl, const struct stat *st)
{
    return capable(cl, CAP_FOWNER) || st->st_uid == cl->as_uid;
}

static int open_mask(int flags)
{
    int acc = flags & O_ACCMODE, mask = 0;
    if (acc == O_RDONLY || acc == O_RDWR)
        mask |= MAY_READ;
    if (acc == O_WRONLY || acc == O_RDWR || (flags & O_TRUNC))
        mask |= MAY_WRITE;
    return mask;
}

/* An open (or create) of path with flags. */
static int openable(const struct client *cl, int mnt, const char *path, int flags)
{
    struct stat st;
    int r = lookup(cl, mnt, path, &st);
    if (r == -ENOENT && (flags & O_CREAT)) {
        struct stat dst;
        return dir_writable(cl, mnt, path, &dst);
    }
    if (r < 0)
        return r == -ENOENT ? 0 : r;    /* the class answers ENOENT itself */
    if ((flags & O_CREAT) && (flags & O_EXCL))
        return 0;                        /* EEXIST, the class's to say */
    return may(cl, &st, open_mask(flags));
}

/* fs.protected_hardlinks (as the kernel's may_linkat, which applies to every file system):
 * one links only a file it owns, or a regular file it may read and write that does not
 * run as someone else (set-user-ID, or set-group-ID and group-executable). */
static int hardlink_ok(const struct client *cl, const struct stat *st)
{
    static int protected = -1;
    if (__atomic_load_n(&protected, __ATOMIC_RELAXED) < 0) {
        char buf[16] = "1";
        int fd = open("/proc/sys/fs/protected_hardlinks", O_RDONLY | O_CLOEXEC);
        if (fd >= 0) {
            if (read(fd, buf, sizeof buf - 1) <= 0)
                buf[0] = '1';
            close(fd);
        }
        __atomic_store_n(&protected, buf[0] != '0', __ATOMIC_RELAXED);
    }
    if (!protected || is_owner(cl, st))
        return 0;
    if (S_ISREG(st->st_mode) && !(st->st_mode & S_ISUID) &&
        (st->st_mode & (S_ISGID | S_IXGRP)) != (S_ISGID | S_IXGRP) && may(cl, st, MAY_READ | MAY_WRITE) == 0)
        return 0;
    return -EPERM;
}

static int xattr_rule(const struct client *cl, int mnt, const char *path, const char *name, int write)
{
    struct stat st;
    int r = lookup(cl, mnt, path, &st);
    if (r < 0)
        return r;
    if (strncmp(name, "security.capability", 20) == 0 && write)
        return capable(cl, CAP_SETFCAP) ? 0 : -EPERM;   /* a file that runs with capabilities */
    if (strncmp(name, "trusted.", 8) == 0 || strncmp(name, "security.", 9) == 0)
        return capable(cl, CAP_SYS_ADMIN) ? 0 : write ? -EPERM : -ENODATA;
    if (strncmp(name, "system.", 7) == 0)
        return !write || is_owner(cl, &st) ? 0 : -EPERM;
    if (strncmp(name, "user.", 5) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode))
        return write ? -EPERM : -ENODATA;
    return may(cl, &st, write ? MAY_WRITE : MAY_READ);
}

/* The caller's rights for the request (request.c calls this after request_check, with
 * the caller's identity set): 0, or the errno it gets instead of the class's answer. */
int perm_check(struct client *cl, int op, int mnt, const char *path, const char *path2, int64_t a, int64_t b)
{
    struct stat st, dst;
    int r;
    if (cl->rq && cl->rq->has_fh && op != W_CACHE_OPEN)
        return 0;   /* a handle: its open was checked */
    switch (op) {
    case W_GETATTR: case W_READLINK: case W_STATFS: case W_FIFO: case W_LISTXATTR:
        return search(cl, mnt, path);
    case W_ACCESS:
        if ((r = lookup(cl, mnt, path, &st)) < 0)
            return r;
        return a ? may(cl, &st, (int)(((a & R_OK) ? MAY_READ : 0) | ((a & W_OK) ? MAY_WRITE : 0) |
                                      ((a & X_OK) ? MAY_EXEC : 0)))
                 : 0;
    case W_OPEN:
        return openable(cl, mnt, path, (int)a);
    case W_CREATE:
        return openable(cl, mnt, path, (int)b | O_CREAT);
    case W_CREATE_OPEN:
        return openable(cl, mnt, path, (int)b);
    case W_OPENDIR:
        if ((r = lookup(cl, mnt, path, &st)) < 0)
            return r == -ENOENT ? 0 : r;
        return may(cl, &st, MAY_READ);
    case W_MKNOD: case W_MKDIR: case W_SYMLINK:
        if ((r = dir_writable(cl, mnt, path, &dst)) < 0)
            return r;
        /* device nodes are root's to make (the kernel's vfs_mknod: CAP_MKNOD) */
        if (op == W_MKNOD && !capable(cl, CAP_MKNOD) && (S_ISCHR((mode_t)a) || S_ISBLK((mode_t)a)))
            return -EPERM;
        return 0;
    case W_LINK:
        if ((r = lookup(cl, mnt, path2, &st)) < 0)
            return r;
        if ((r = dir_writable(cl, mnt, path, &dst)) < 0)
            return r;
        return hardlink_ok(cl, &st);
    case W_UNLINK: case W_RMDIR:
        return removable(cl, mnt, path, &st);
    case W_RENAME: {
        if ((r = removable(cl, mnt, path, &st)) < 0)
            return r;
        struct stat to, tdir;
        if ((r = dir_writable(cl, mnt, path2, &tdir)) < 0)
            return r;
        if (attr(mnt, path2, &to) == 0 && (r = sticky_ok(cl, &tdir, &to)) < 0)
            return r;
        char d1[WIRE_PATH_MAX], d2[WIRE_PATH_MAX];
        if (S_ISDIR(st.st_mode) && strcmp(parent_of(path, d1), parent_of(path2, d2)) != 0)
            return may(cl, &st, MAY_WRITE);     /* its ".." changes */
        return 0;
    }
    case W_CHMOD:
        if ((r = lookup(cl, mnt, path, &st)) < 0)
            return r;
        if (!is_owner(cl, &st))
            return -EPERM;
        /* the set-group-ID bit is dropped, not refused, when the caller is not in the
         * file's group (the kernel's setattr_prepare): the class gets the mode without it */
        if (!capable(cl, CAP_FSETID) && (a & S_ISGID) && !in_group(cl, st.st_gid) && cl->rq)
            cl->rq->a &= ~(int64_t)S_ISGID;
        return 0;
    case W_CHOWN: {
        if ((r = lookup(cl, mnt, path, &st)) < 0)
            return r;
        if (capable(cl, CAP_CHOWN))
            return 0;
        uid_t uid = (uid_t)a;
        gid_t gid = (gid_t)b;
        if (uid == (uid_t)-1 && gid == (gid_t)-1)
            return 0;       /* changes nothing but ctime: anyone may (the kernel's chown_common) */
        if (st.st_uid != cl->as_uid)
            return -EPERM;
        if (uid != (uid_t)-1 && uid != st.st_uid)
            return -EPERM;
        if (gid != (gid_t)-1 && gid != st.st_gid && !in_group(cl, gid))
            return -EPERM;
        return 0;
    }
    case W_WRITTEN:     /* "I wrote it": only a writer of the file says so */
    case W_TRUNCATE:
        if ((r = lookup(cl, mnt, path, &st)) < 0)
            return r;
        if (S_ISDIR(st.st_mode))
            return -EISDIR;
        return may(cl, &st, MAY_WRITE);
    case W_CACHE_OPEN:
        if (cl->rq && cl->rq->has_fh)
            return 0;
        if ((r = lookup(cl, mnt, path, &st)) < 0)
            return r;
        return may(cl, &st, MAY_WRITE);
    case W_UTIMENS: {
        if ((r = lookup(cl, mnt, path, &st)) < 0)
            return r;
        if (is_owner(cl, &st))
            return 0;
        struct timespec ts[2] = { { 0, UTIME_NOW }, { 0, UTIME_NOW } };
        if (cl->rq && cl->rq->data_len == sizeof ts)
            memcpy(ts, cl->data, sizeof ts);
        if (ts[0].tv_nsec == UTIME_OMIT && ts[1].tv_nsec == UTIME_OMIT)
            return 0;
        if ((ts[0].tv_nsec == UTIME_NOW || ts[0].tv_nsec == UTIME_OMIT) &&
            (ts[1].tv_nsec == UTIME_NOW || ts[1].tv_nsec == UTIME_OMIT))
            return may(cl, &st, MAY_WRITE);
        return -EPERM;
    }
    case W_GETXATTR:
        return xattr_rule(cl, mnt, path, path2, 0);
    case W_SETXATTR: case W_REMOVEXATTR:
        return xattr_rule(cl, mnt, path, path2, 1);
    default:
        return 0;
    }
}
