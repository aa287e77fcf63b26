/* Looking names up: getattr with symlinks in the last component followed as the kernel
 * would, and the attribute fix-ups (device and inode numbers the FS did not give). */
#include "../ldpfuse.h"
#include <string.h>
#include <stdlib.h>

#define SYMLOOP_MAX 40

static void fixup(const struct vpath *vp, struct stat *st)
{
    if (st->st_dev == 0)
        st->st_dev = ldp_mounts[vp->mnt].dev;
    if (st->st_ino == 0) {
        uint64_t h = fnv1a(fnv1a_seed(vp->mnt), vp->path, NULL);
        st->st_ino = h ? h : 1;
    }
}

ssize_t be_errno(ssize_t r)
{
    if (r >= 0)
        return r;
    errno = (int)-r;
    return -1;
}

int vpath_name_too_long(const char *path)
{
    if (LIKELY(strnlen(path, NAME_MAX + 1) <= NAME_MAX))
        return 0;       /* no name in it can be longer than the whole (one vectorised scan) */
    size_t run = 0;
    for (const char *p = path; *p; p++) {
        run = *p == '/' ? 0 : run + 1;
        if (run > NAME_MAX)
            return 1;
    }
    return 0;
}

/* What the FS said of vp (a lookup made with another call, backend.h create_open), fixed up
 * and kept as getattr_once keeps it; stamp: taken before the FS was asked. */
void vfs_keep_attr(const struct vpath *vp, struct stat *st, uint64_t stamp)
{
    fixup(vp, st);
    attrcache_put(vp->mnt, vp->path, st, stamp);
}

/* *asked: the stamp taken before the FS was asked (attrcache_stamp), 0 if the cache
 * answered (a missing name it knew: ENOENT), WALKED_BENEATH if a backing tree did: its
 * openat2 beneath the lower directory followed the symlinks among the directories itself,
 * so a failure is final and lookup_failed resolves nothing. That also keeps a stat of a
 * missing backed name free of malloc (vfs_resolve_parents' buffers): a signal handler that
 * stats one while its thread is inside malloc (a listing's) neither deadlocks nor
 * corrupts the heap (tests/test_signals.py, handler_names.c). */
#define WALKED_BENEATH UINT64_MAX
static int getattr_once(const struct vpath *vp, struct stat *st, uint64_t *asked)
{
    if (asked)
        *asked = 0;
    /* a cached answer was a lookup of this very path that passed the checks below */
    int known = attrcache_get(vp->mnt, vp->path, st);
    if (known) {
        if (known > 0)
            return 0;
        errno = ENOENT;
        return -1;
    }
    if (UNLIKELY(vpath_name_too_long(vp->path))) {
        errno = ENAMETOOLONG;
        return -1;
    }
    struct backend_ops *be = backend_get();
    if (be == NULL) {
        errno = EIO;
        return -1;
    }
    uint64_t stamp = attrcache_stamp(vp->mnt, vp->path);
    int r, here = backing_getattr_here(vp->mnt, vp->path, st, &r);
    /* a backed name, or a merged one (its walk does not follow links among the
     * directories: the core resolves them after ENOTDIR, as for the class's): no guard */
    if (!here && !union_getattr_here(vp->mnt, vp->path, st, &r)) {
        guard_enter();
        r = be->getattr(vp->mnt, vp->path, NULL, st);
        guard_leave();
    }
    if (asked)
        *asked = here ? WALKED_BENEATH : stamp;
    if (r < 0) {
        errno = -r;
        return -1;
    }
    fixup(vp, st);
    attrcache_put(vp->mnt, vp->path, st, stamp);
    return 0;
}

/* The absolute path a symlink at vp points to (out: VPATH_MAX bytes). The link's own
 * directory may be deeper than PATH_MAX: it is built on the heap, not the stack. */
static int link_target(const struct vpath *vp, char *out, size_t size)
{
    char target[PATH_MAX];
    ssize_t n = vfs_readlink(vp, target, sizeof target - 1);
    if (n < 0)
        return -1;
    target[n] = '\0';
    char *dir = malloc(VPATH_MAX);
    if (dir == NULL) {
        errno = ENOMEM;
        return -1;
    }
    int r = 0;
    if (vfs_fullpath(vp, dir, VPATH_MAX) < 0) {
        r = -1;
    } else {
        char *slash = strrchr(dir, '/');
        dir[slash && slash != dir ? (size_t)(slash - dir) : 1] = '\0';
        if (path_normalize(dir, target, out, size, NULL) < 0) {
            errno = ENAMETOOLONG;
            r = -1;
        }
    }
    free(dir);
    return r;
}

/* The FS sees whole paths, so a symlink in a middle component ("link/x", link -> dir)
 * reaches it unresolved. Only after a lookup failed with ENOENT/ENOTDIR are the directory
 * components walked, each symlink among them replaced by its target (within the mount);
 * returns 1 if vp changed, -1 (ELOOP) if the links never end. Paths without links in
 * their middle never pay for this. */
int vfs_resolve_parents(struct vpath *vp)
{
    /* prefix, a link's target and target + rest: each up to VPATH_MAX, on the heap (this
     * runs only after a lookup failed) */
    char *prefix = malloc(3 * (size_t)VPATH_MAX);
    if (prefix == NULL)
        return 0;
    char *abs = prefix + VPATH_MAX, *joined = abs + VPATH_MAX;
    int changed = 0;
    for (int loops = 0; loops < SYMLOOP_MAX; loops++) {
        prefix[0] = '\0';
        const char *p = vp->path;
        int restarted = 0;
        while (*p) {
            while (*p == '/')
                p++;
            const char *e = strchr(p, '/');
            if (e == NULL)
                break;                  /* the last component is the caller's business */
            size_t pl = strlen(prefix);
            if (pl + 1 + (size_t)(e - p) >= VPATH_MAX)
                goto out;
            prefix[pl] = '/';
            memcpy(prefix + pl + 1, p, (size_t)(e - p));
            prefix[pl + 1 + (e - p)] = '\0';
            struct vpath pv;
            vpath_begin(&pv, vp->mnt);
            memcpy(pv.path, prefix, strlen(prefix) + 1);
            struct stat st;
            if (getattr_once(&pv, &st, NULL) < 0)
                goto out;
            if (S_ISLNK(st.st_mode)) {
                struct vpath target;
                if (link_target(&pv, abs, VPATH_MAX) < 0 ||
                    snprintf(joined, VPATH_MAX, "%s%s", abs, e) >= VPATH_MAX)
                    goto out;
                if (path_normalize("/", joined, abs, VPATH_MAX, NULL) < 0 || !mount_match(abs, &target) ||
                    target.mnt != vp->mnt)
                    goto out;           /* leaves the mount: not followed here */
                memcpy(vp->path, target.path, strlen(target.path) + 1);
                changed = restarted = 1;
                break;
            }
            if (!S_ISDIR(st.st_mode))
                goto out;
            p = e;
        }
        if (!restarted)
            goto out;
    }
    changed = -1;
    errno = ELOOP;
out:
    free(prefix);
    return changed;
}

/* getattr_once, retried once after resolving symlinks among the directory components. A
 * name found missing with no symlink above it is kept as missing (where the cache keeps
 * missing names, attrcache_put), so the next lookup of it asks nothing at all. */
static int lookup_failed(struct vpath *vp, struct stat *st, int e, uint64_t asked);

static int lookup(struct vpath *vp, struct stat *st)
{
    uint64_t asked;
    if (getattr_once(vp, st, &asked) == 0)
        return 0;
    return lookup_failed(vp, st, errno, asked);
}

/* What lookup does after getattr_once failed with e. */
static int lookup_failed(struct vpath *vp, struct stat *st, int e, uint64_t asked)
{
    if (e == ENOENT && asked == 0)
        return -1;      /* known missing: its directories were walked when it was kept */
    if (asked == WALKED_BENEATH)
        return -1;      /* a backing tree's walk, which followed them (errno is e) */
    if (e != ENOENT && e != ENOTDIR)
        return -1;
    int changed = vfs_resolve_parents(vp);
    if (changed <= 0) {
        if (changed == 0) {
            if (e == ENOENT)
                attrcache_put(vp->mnt, vp->path, NULL, asked);
            errno = e;  /* the FS calls on the way may have changed it */
        }
        return -1;
    }
    return getattr_once(vp, st, NULL);
}

/* vp names a symlink: vp becomes its target where that is in a mount (1); otherwise the
 * target's absolute path (with the trailing slash the caller wrote) goes to out (0); -1
 * and errno. Its VPATH_MAX buffer is on the stack only while a link is followed. */
__attribute__((noinline)) static int link_step(struct vpath *vp, char *out, size_t size, int trailing)
{
    char abs[VPATH_MAX];
    if (link_target(vp, abs, sizeof abs) < 0)
        return -1;
    if (mount_match(abs, vp))
        return 1;
    if (snprintf(out, size, "%s%s", abs, trailing ? "/" : "") >= (int)size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

int vfs_follow_stat(struct vpath *vp, char *out, size_t size, struct stat *st, int *state)
{
    struct stat tmp;
    if (st == NULL)
        st = &tmp;
    *state = LOOKED_UNKNOWN;
    for (int i = 0; i < SYMLOOP_MAX; i++) {
        if (lookup(vp, st) < 0) {
            if (errno != ENOENT)
                return -1;
            *state = LOOKED_MISSING;    /* a missing target stays where it is */
            return 1;
        }
        if (!S_ISLNK(st->st_mode)) {
            *state = LOOKED_FOUND;
            return 1;
        }
        int trailing = vp->trailing_slash;
        int r = link_step(vp, out, size, trailing);
        if (r <= 0)
            return r;
        vp->trailing_slash = trailing;
    }
    errno = ELOOP;
    return -1;
}

int vfs_follow(struct vpath *vp, char *out, size_t size)
{
    int state;
    return vfs_follow_stat(vp, out, size, NULL, &state);
}

/* getattr, following symlinks if asked. If the target leaves every mount, the real stat
 * answers. */
/* vfs_getattr past its first lookup of vp0, which failed (e: its errno) or found a
 * symlink to follow (e == 0): on a copy of vp0, in a frame of its own (a thread's first
 * call in the embedded mode starts Python on top of this chain). */
__attribute__((noinline)) static int getattr_further(const struct vpath *vp0, int follow, struct stat *st, int e,
                                                     uint64_t asked)
{
    struct vpath vp;
    vpath_copy(&vp, vp0);
    if (e != 0 && lookup_failed(&vp, st, e, asked) < 0)
        return -1;
    for (int i = 0; i < SYMLOOP_MAX; i++) {
        if (i > 0 && lookup(&vp, st) < 0)
            return -1;
        if (!follow || !S_ISLNK(st->st_mode))
            goto found;
        char out[PATH_MAX];     /* the kernel takes no longer path */
        int r = link_step(&vp, out, sizeof out, 0);
        if (r < 0)
            return -1;
        if (r == 0) {
            if (REAL(stat)(out, st) < 0)
                return -1;
            if (vp0->trailing_slash && !S_ISDIR(st->st_mode)) {
                errno = ENOTDIR;
                return -1;
            }
            return 0;
        }
    }
    errno = ELOOP;
    return -1;
found:
    if (vp0->trailing_slash && !S_ISDIR(st->st_mode) && !S_ISLNK(st->st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    vfs_patch_open_size(&vp, st);
    return 0;
}

int vfs_getattr(const struct vpath *vp0, int follow, struct stat *st)
{
    if (vp0->trailing_slash)
        follow = 1;
    /* the common case: found at once, and not a link to follow (no copy of vp0) */
    uint64_t asked;
    if (getattr_once(vp0, st, &asked) < 0)
        return getattr_further(vp0, follow, st, errno, asked);
    if (follow && S_ISLNK(st->st_mode))
        return getattr_further(vp0, follow, st, 0, 0);
    if (vp0->trailing_slash && !S_ISDIR(st->st_mode) && !S_ISLNK(st->st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    vfs_patch_open_size(vp0, st);
    return 0;
}

int vfs_fgetattr(int fd, struct vfile *v, struct stat *st)
{
    struct backend_ops *be = backend_get();
    if (be == NULL) {
        errno = EIO;
        return -1;
    }
    struct vpath vp;
    vpath_begin(&vp, v->mnt);
    snprintf(vp.path, sizeof vp.path, "%s", v->path);
    /* what this process knows of the name, while no process has changed it (the open's
     * own lookup, most often): as the kernel answers fstat from the inode's attributes
     * for attr_timeout; not for a file unlinked since, whose name is another's */
    int by_name = !v->unlinked;
    if (by_name && attrcache_get(v->mnt, v->path, st) == 1)
        goto known;
    uint64_t stamp = by_name ? attrcache_stamp(v->mnt, v->path) : 0;
    /* FUSE passes a handle to getattr only for open files, never for directories */
    guard_enter();
    int r = be->getattr(v->mnt, v->path, v->kind == VF_FILE && v->fh_valid ? &v->fh : NULL, st);
    guard_leave();
    if (r < 0) {
        errno = -r;
        return -1;
    }
    fixup(&vp, st);
    if (by_name)
        attrcache_put(v->mnt, v->path, st, stamp);
known:
    if (v->kind == VF_FILE && fd >= 0) {
        /* writes not yet written back are in the memfd: its size is the file's size */
        struct stat k;
        if (REAL(fstat)(fd, &k) == 0 && S_ISREG(k.st_mode)) {
            st->st_size = k.st_size;
            st->st_blocks = (k.st_size + 511) / 512;
        }
    }
    return 0;
}

int vfs_fd_vpath(int fd, struct vpath *vp)
{
    struct vfile *v = fdtable_get(fd);
    if (v == NULL || v->kind == VF_PASSTHROUGH)
        return 0;
    vp->mnt = v->mnt;
    vp->trailing_slash = 0;
    snprintf(vp->path, sizeof vp->path, "%s", v->path);
    return 1;
}
