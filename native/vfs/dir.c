/*
 * Directory streams over a mount. glibc's opendir/readdir issue getdents64 internally,
 * which no wrapper sees, so a virtual directory gets a DIR of our own. Its first member is
 * the fd, like glibc's DIR, so dirfd() and vdir_of() can read it from either kind.
 * The listing is one readdir() call on the FS, loaded at the first read (and again after
 * rewinddir), so a directory costs one Python call, not one per entry.
 */
#include "../ldpfuse.h"
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

struct vdir {
    int fd;                 /* first, as in glibc's DIR */
    struct vfile *v;
    struct dirlist list;
    int loaded;
    size_t pos;
    struct dirent64 ent;
};

struct vdir *vdir_of(DIR *d)
{
    if (d == NULL || __atomic_load_n(&ldp_nvfds, __ATOMIC_RELAXED) == 0)
        return NULL;
    struct vfile *v = fdtable_get(*(int *)d);
    if (v == NULL || v->kind != VF_DIR || v->dir != (struct vdir *)d)
        return NULL;
    return (struct vdir *)d;
}

DIR *vdir_fdopen(int fd, struct vfile *v)
{
    if (v->kind != VF_DIR || (v->flags & O_PATH)) {
        errno = v->kind == VF_DIR ? EBADF : ENOTDIR;
        return NULL;
    }
    if (vfile_ensure_fh(v) < 0)
        return NULL;
    if (v->dir != NULL) {
        errno = EBUSY;
        return NULL;
    }
    struct vdir *d = calloc(1, sizeof *d);
    if (d == NULL)
        return NULL;
    d->fd = fd;
    d->v = v;
    v->dir = d;
    return (DIR *)d;
}

DIR *vdir_open(const struct vpath *vp)
{
    int fd = vfs_open(vp, O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (fd < 0)
        return NULL;
    struct vfile *v = fdtable_get(fd);
    if (v == NULL)
        return REAL(fdopendir)(fd);     /* a symlink led out of the mount */
    DIR *d = vdir_fdopen(fd, v);
    if (d == NULL) {
        int e = errno;
        if (v)
            vfs_close(fd, v);
        else
            REAL(close)(fd);
        errno = e;
    }
    return d;
}

/* Entries whose attributes a listing fills in the attribute cache at most: a quarter of it
 * (vfs/attrcache.c), so one huge directory does not push out every other answer. */
#define PLUS_MAX 4096

/* What the FS's readdir said of its entries (backend.h dirlist.attrs) kept as getattr
 * answers, as FUSE's readdirplus fills the kernel's: a stat after a listing asks nothing.
 * An entry's answer must be stamped as it was before the FS was asked, but its name was
 * not known then: the stamps are read after the call, and kept only if no change at all
 * reached the backend (its count, backend.h changes) nor this process (own) meanwhile:
 * then each stamp is what it was before the call. */
static void keep_entry_attrs(struct vdir *d, struct backend_ops *be, uint64_t changes, uint64_t own)
{
    const struct dirlist *l = &d->list;
    size_t n = l->n < PLUS_MAX ? l->n : PLUS_MAX, dlen = strlen(d->v->path);
    if (dlen == 1)
        dlen = 0;       /* the root: "/" + name */
    struct vpath *vp = malloc(sizeof *vp);
    uint64_t *stamps = malloc(n * sizeof *stamps);
    if (vp == NULL || stamps == NULL)
        goto out;
    vp->mnt = d->v->mnt;
    vp->trailing_slash = 0;
    for (size_t i = 0; i < n; i++) {
        const struct dirent_rec *e = &l->ents[i];
        const char *name = l->names + e->name_off;
        stamps[i] = 0;
        if (!e->plus || (name[0] == '.' && (e->namelen == 1 || (e->namelen == 2 && name[1] == '.'))) ||
            dlen + 1 + e->namelen >= sizeof vp->path)
            continue;
        memcpy(vp->path, d->v->path, dlen);
        vp->path[dlen] = '/';
        memcpy(vp->path + dlen + 1, name, e->namelen + 1u);
        stamps[i] = attrcache_stamp(vp->mnt, vp->path);
    }
    if ((be->changes ? be->changes() : 0) != changes || attrcache_stamp(vp->mnt, NULL) != own)
        goto out;       /* something changed during the call: ask getattr as before */
    for (size_t i = 0; i < n; i++) {
        const struct dirent_rec *e = &l->ents[i];
        if (stamps[i] == 0)
            continue;
        memcpy(vp->path, d->v->path, dlen);
        vp->path[dlen] = '/';
        memcpy(vp->path + dlen + 1, l->names + e->name_off, e->namelen + 1u);
        struct stat st = l->attrs[i];
        vfs_keep_attr(vp, &st, stamps[i]);
    }
out:
    free(stamps);
    free(vp);
}

static int load(struct vdir *d)
{
    struct backend_ops *be = backend_get();
    if (be == NULL) {
        errno = EIO;
        return -1;
    }
    dirlist_free(&d->list);
    guard_enter();
    uint64_t own = attrcache_stamp(d->v->mnt, NULL);
    uint64_t changes = be->changes ? be->changes() : 0;
    int r = be->readdir(d->v->mnt, d->v->path, d->v->fh, &d->list);
    guard_leave();
    if (r < 0) {
        dirlist_free(&d->list);
        errno = -r;
        return -1;
    }
    if (d->list.attrs)
        keep_entry_attrs(d, be, changes, own);
    d->loaded = 1;
    return 0;
}

static uint64_t name_ino(const struct vfile *v, const char *name)
{
    /* the hash of the entry's own path, as stat gives it: "/" + name at the root */
    uint64_t h = fnv1a_seed(v->mnt);
    if (strcmp(v->path, "/") != 0)
        h = fnv1a(h, v->path, NULL);
    h = fnv1a(fnv1a(h, "/", NULL), name, NULL);
    return h ? h : 1;
}

struct dirent64 *vdir_read(struct vdir *d)
{
    int saved = errno;
    if (!d->loaded && load(d) < 0)
        return NULL;            /* errno set: readdir's error convention */
    if (d->pos >= d->list.n) {
        errno = saved;
        return NULL;
    }
    const struct dirent_rec *e = &d->list.ents[d->pos++];
    size_t len = e->namelen < sizeof d->ent.d_name ? e->namelen : sizeof d->ent.d_name - 1;
    memcpy(d->ent.d_name, d->list.names + e->name_off, len);
    d->ent.d_name[len] = '\0';
    d->ent.d_ino = e->ino ? e->ino : name_ino(d->v, d->ent.d_name);
    d->ent.d_off = (off64_t)d->pos;
    d->ent.d_type = e->type;
    d->ent.d_reclen = (unsigned short)((offsetof(struct dirent64, d_name) + len + 1 + 7) & ~7u);
    errno = saved;
    return &d->ent;
}

void vdir_rewind(struct vdir *d)
{
    d->pos = 0;
    d->loaded = 0;
}

long vdir_tell(struct vdir *d)
{
    return (long)d->pos;
}

void vdir_seek(struct vdir *d, long pos)
{
    d->pos = pos < 0 ? 0 : (size_t)pos;
}

int vdir_fd(struct vdir *d)
{
    return d->fd;
}

int vdir_close(struct vdir *d)
{
    d->v->dir = NULL;
    int r = vfs_close(d->fd, d->v);
    dirlist_free(&d->list);
    free(d);
    return r;
}
