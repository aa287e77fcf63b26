/*
 * The union's merged listing (vfs/union.h): opendir, readdir and releasedir of a merged
 * directory, in the calling process, on its layers. A listing is the layers' getdents
 * merged, top first: upper names over lower ones, whiteouts (a 0/0 character device, or
 * fuse-overlayfs' .wh.NAME) hiding the names below them, .wh. names never shown. A kept
 * directory of two layers or more learns what each layer holds from it (vfs/union_names.c).
 */
#include "../ldpfuse.h"
#include "union.h"
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

/* A layer's directory (an O_PATH fd) opened for reading: through /proc, which checks read
 * permission on the directory alone, as opening it by name does (openat(fd, ".") would
 * ask for search permission too: a directory of mode 0600 could not be listed). Where the
 * directory's parent is kept, union_listing opens it by its name there instead (vfs/union.c:
 * one openat, where the /proc path costs a walk of /proc and the magic link). */
int union_open_listing(int dfd)
{
    char p[40];
    snprintf(p, sizeof p, "/proc/self/fd/%d", dfd);
    int fd = REAL(open)(p, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        fd = REAL(openat)(dfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);     /* no /proc */
    return fd;
}

/* The caller may read the layer's directory dfd (O_PATH): 0 or -errno. One faccessat2, or
 * the open and close it stands for where the kernel has none. */
static int may_list(int dfd)
{
    if (REAL(syscall)(SYS_faccessat2, dfd, "", R_OK, AT_EMPTY_PATH | AT_EACCESS) == 0)
        return 0;
    if (errno != ENOSYS && errno != EINVAL)
        return -errno;
    int fd = union_open_listing(dfd);
    if (fd < 0)
        return -errno;
    REAL(close)(fd);
    return 0;
}

/* The caller owns the top directory and its mode lets the owner read it: the kernel's
 * check of read permission on it (its owner's bits, which an ACL does not narrow) is
 * known to pass, without asking. The effective uid is asked again at a credentials
 * change only. */
static int owner_may_read(const struct stack *s)
{
    static uid_t euid;
    static unsigned euid_gen;   /* ldp_creds_gen + 1 when euid was taken (0: never) */
    unsigned gen = __atomic_load_n(&ldp_creds_gen, __ATOMIC_ACQUIRE);
    if (!s->self_known || !(s->self.st_mode & S_IRUSR))
        return 0;
    if (__atomic_load_n(&euid_gen, __ATOMIC_ACQUIRE) != gen + 1) {
        uid_t now = geteuid();
        __atomic_store_n(&euid, now, __ATOMIC_RELAXED);
        __atomic_store_n(&euid_gen, gen + 1, __ATOMIC_RELEASE);
        return now == s->self.st_uid;
    }
    return __atomic_load_n(&euid, __ATOMIC_RELAXED) == s->self.st_uid;
}

int union_opendir(int mnt, const char *path, uint64_t *fh)
{
    struct onion *u = union_of(mnt, path);
    if (u == NULL)
        return union_inner->opendir(mnt, path, fh);
    struct stack s;
    int r = union_dir_stack(u, path, &s);
    if (r < 0)
        return r;
    /* read permission on the top directory, with the caller's rights (a walk's stack
     * knows the directory's stat: its owner may read it by its mode, one faccessat2 less
     * per directory of a tree walk) */
    r = owner_may_read(&s) ? 0 : may_list(s.fd[0]);
    union_dir_put(u, path, &s);
    if (r == 0)
        *fh = UNION_FH;
    return r;
}

/* The names met so far (shown or hidden): open addressing, grown at half full. */
struct names {
    char **slot;
    size_t cap, n;
};

static int names_add(struct names *t, const char *name)    /* 1 added, 0 there, -1 ENOMEM */
{
    if (2 * (t->n + 1) > t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 256;
        char **slot = calloc(cap, sizeof *slot);
        if (slot == NULL)
            return -1;
        for (size_t i = 0; i < t->cap; i++) {
            if (t->slot[i] == NULL)
                continue;
            size_t h = fnv1a(0, t->slot[i], NULL) & (cap - 1);
            while (slot[h])
                h = (h + 1) & (cap - 1);
            slot[h] = t->slot[i];
        }
        free(t->slot);
        t->slot = slot;
        t->cap = cap;
    }
    size_t h = fnv1a(0, name, NULL) & (t->cap - 1);
    for (; t->slot[h]; h = (h + 1) & (t->cap - 1))
        if (strcmp(t->slot[h], name) == 0)
            return 0;
    if ((t->slot[h] = strdup(name)) == NULL)
        return -1;
    t->n++;
    return 1;
}

static int names_has(const struct names *t, const char *name)
{
    if (t->n == 0)
        return 0;
    for (size_t h = fnv1a(0, name, NULL) & (t->cap - 1); t->slot[h]; h = (h + 1) & (t->cap - 1))
        if (strcmp(t->slot[h], name) == 0)
            return 1;
    return 0;
}

static void names_free(struct names *t)
{
    for (size_t i = 0; i < t->cap; i++)
        free(t->slot[i]);
    free(t->slot);
}

/* One layer's entries (fd: its directory opened for reading, closed here) under those of
 * the layers above (seen: their names, shown or hidden; the last layer's own are not added,
 * nothing lies below it); what the layer holds learned in *learn, if not NULL. */
static int merge_layer(int fd, struct names *seen, int last, struct layer_names **learn, struct dirlist *out,
                       char *buf, size_t size)
{
    if (fd < 0)
        return -errno;
    int r = 0;
    while (r == 0) {
        long n = REAL(syscall)(SYS_getdents64, fd, buf, size);
        if (n <= 0) {
            r = n < 0 ? -errno : 0;
            break;
        }
        for (long off = 0; off < n && r == 0;) {
            struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);
            off += d->d_reclen;
            const char *name = d->d_name;
            if (learn)
                layer_names_add(learn, name);
            if (strncmp(name, UNION_WH, 4) == 0) {
                if (!last && strcmp(name, UNION_OPAQUE_FILE) != 0 && names_add(seen, name + 4) < 0)
                    r = -ENOMEM;
                continue;
            }
            unsigned char type = d->d_type;
            struct stat st;
            if (type == DT_CHR || type == DT_UNKNOWN) {
                if (REAL(fstatat)(fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) {
                    if (union_is_whiteout(&st)) {
                        if (!last && names_add(seen, name) < 0)
                            r = -ENOMEM;
                        continue;
                    }
                    type = IFTODT(st.st_mode);
                }
            }
            int added = last ? !names_has(seen, name) : names_add(seen, name);
            if (added < 0 || (added && dirlist_add(out, name, strlen(name), d->d_ino, type) < 0))
                r = -ENOMEM;
        }
    }
    REAL(close)(fd);
    return r;
}

int union_readdir(int mnt, const char *path, uint64_t fh, struct dirlist *out)
{
    struct onion *u = fh == UNION_FH ? union_of(mnt, path) : NULL;
    if (u == NULL)
        return union_inner->readdir(mnt, path, fh, out);
    struct stack s;
    int r = union_dir_stack(u, path, &s);
    if (r < 0)
        return r;
    struct names seen = { 0 };
    char *buf = malloc(32768);
    r = buf ? 0 : -ENOMEM;
    /* a merged directory that is kept (or will be) learns what its layers hold, for the
     * lookups in it (a directory of one layer only: its misses would cost what they save) */
    int learn = s.changes && s.n > 1;
    for (int k = 0; k < s.n && r == 0; k++) {
        struct layer_names *ln = NULL;
        int want = learn && union_stack_names(&s, k, 0) == NULL;
        r = merge_layer(union_listing(u, path, &s, k), &seen, k + 1 == s.n, want ? &ln : NULL, out, buf, 32768);
        if (want && r == 0 && ln != NULL && ln != NAMES_UNKNOWN && layer_names_searchable(s.fd[k])) {
            union_names_keep(&s, k, ln);    /* kept, or freed there */
            ln = NULL;
        }
        layer_names_free(ln);
    }
    free(buf);
    names_free(&seen);
    union_dir_put(u, path, &s);
    return r;
}

int union_releasedir(int mnt, const char *path, uint64_t fh)
{
    if (fh == UNION_FH && union_mount(mnt))
        return 0;
    return union_inner->releasedir(mnt, path, fh);
}

