/*
 * Union backing: the read side of a copy-on-write overlay, in the preload. A class declares
 * its mount a union of an upper directory over an ordered list of lower ones
 * (ldpfuse_py.Union, docs/overlay.md), written as kernel overlayfs writes it: a whiteout is
 * a character device 0/0, an opaque directory has trusted.overlay.opaque="y"; or as
 * fuse-overlayfs writes it where the caller may not: a whiteout is an empty file .wh.NAME,
 * an opaque directory holds .wh..wh..opq. Every layer is read in both forms.
 *
 * What only reads the merged view is done here, in the calling process, with the caller's
 * own rights, on the layers: getattr, readlink, access, open for reading, opendir, readdir
 * and releasedir (the merged listing: vfs/union_dirs.c; what a layer holds:
 * vfs/union_names.c; the parts' declarations: vfs/union.h). A name is looked up one component at a time in each layer of its
 * directory, top first (fstatat, never following a link: a symlink among the directories
 * is the core's to resolve, after ENOTDIR); the first non-directory hides what is below
 * it, a whiteout hides everything below, directories of one name merge down to an opaque
 * one. A listing is the layers' getdents merged: upper names over lower ones, whiteouts
 * hiding, .wh. names never shown. Everything that changes something (copy-up, whiteouts,
 * creates, renames) is the class's: the backend below, Python.
 *
 * Coherence: a union mount is uncached as a backed one (backing_uncached: no attribute
 * cache, stamps 0, no open decisions, no writer bookkeeping), so a change the class makes
 * to the upper directory is what the next call here reads. What a process keeps is the
 * layers' directories of the merged directories it walked to, and what those layers hold,
 * while nothing changed through the mount, or while those directories are as the walk
 * found them (below, "directories kept").
 *
 * The declaration comes from the launcher, which built the objects (shared mode):
 * LDPFUSE_UNION = "MNT\x1fUPPER\x1fLOWER\x1f...\x1e..." (layers top first).
 */
#include "../ldpfuse.h"
#include "union.h"
#include <dirent.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#define ASK_CLASS INT_MIN       /* a method's answer: the backend below decides */
#define OPAQUE_XATTR "trusted.overlay.opaque"
#define WH UNION_WH
#define OPAQUE_FILE UNION_OPAQUE_FILE

static struct onion *unions;
static int nunions;
static unsigned char *mount_union;
struct backend_ops *union_inner;
static struct backend_ops over;

static void unions_init(void)
{
    backing_served_init();      /* whom the layers serve: as the backing trees */
    const char *env = getenv("LDPFUSE_UNION");
    if (env == NULL || *env == '\0' || ldp_nmounts == 0)
        return;
    mount_union = calloc((size_t)ldp_nmounts, 1);
    int cap = 1;
    for (const char *p = env; *p; p++)
        cap += *p == '\x1e';
    unions = calloc((size_t)cap, sizeof *unions);
    if (unions == NULL || mount_union == NULL)
        return;
    char *copy = strdup(env), *save = NULL;
    for (char *rec = copy ? strtok_r(copy, "\x1e", &save) : NULL; rec; rec = strtok_r(NULL, "\x1e", &save)) {
        char *f[LAYERS_MAX + 1];
        int n = 0;
        for (char *p = rec; p && n <= LAYERS_MAX;) {
            f[n++] = p;
            p = strchr(p, '\x1f');
            if (p)
                *p++ = '\0';
        }
        int mnt = atoi(f[0]);
        if (n < 3 || n > LAYERS_MAX + 1 || mnt < 0 || mnt >= ldp_nmounts || mount_union[mnt])
            continue;
        struct onion *u = &unions[nunions];
        u->l = calloc((size_t)(n - 1), sizeof *u->l);
        if (u->l == NULL)
            continue;
        int ok = 1;
        for (int i = 1; i < n; i++) {
            ok &= f[i][0] == '/';
            u->l[i - 1].dir = strdup(f[i]);
            u->l[i - 1].fd = -1;
        }
        if (!ok)
            continue;
        u->mnt = mnt;
        u->n = n - 1;
        mount_union[mnt] = 1;
        nunions++;
    }
    free(copy);
}

int union_mount(int mnt)
{
    return UNLIKELY(mount_union != NULL) && mnt >= 0 && mnt < ldp_nmounts && mount_union[mnt];
}

struct onion *union_of(int mnt, const char *path)
{
    if (!union_mount(mnt) || strnlen(path, PATH_MAX) >= PATH_MAX || !backing_caller_served())
        return NULL;
    for (int i = 0; i < nunions; i++)
        if (unions[i].mnt == mnt)
            return &unions[i];
    return NULL;
}

static int layer_fd(struct layer *l)
{
    int fd = __atomic_load_n(&l->fd, __ATOMIC_ACQUIRE);
    if (LIKELY(fd >= 0))
        return fd;
    fd = fs_fd(REAL(open)(l->dir, O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (fd < 0)
        return -errno;
    int none = -1;
    if (!__atomic_compare_exchange_n(&l->fd, &none, fd, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        REAL(close)(fd);
        return none;
    }
    if (fd < ldp_backing_low_fd)
        ldp_backing_low_fd = fd;
    return fd;
}

/* ---- lookup */


static void stack_free(struct stack *s)
{
    s->kept = 0;
    for (int k = 0; k < s->n; k++) {
        if (s->owned[k])
            REAL(close)(s->fd[k]);
        if (s->names[k]) {
            guard_enter();      /* free: malloc's lock (union_getattr_here runs without the guard) */
            layer_names_free(s->names[k]);
            guard_leave();
        }
        s->names[k] = NULL;
    }
    s->n = 0;
}

/* from's whole state into to, its first n layers only */
static void stack_move(struct stack *to, const struct stack *from)
{
    int n = from->n;
    to->n = n;
    memcpy(to->fd, from->fd, (size_t)n * sizeof to->fd[0]);
    memcpy(to->layer, from->layer, (size_t)n);
    memcpy(to->owned, from->owned, (size_t)n);
    memcpy(to->names, from->names, (size_t)n * sizeof to->names[0]);
    memcpy(to->seen, from->seen, (size_t)n * sizeof to->seen[0]);
    to->kept = from->kept;
    to->slot = from->slot;
    to->changes = from->changes;
    to->self_known = from->self_known;
    to->self_merged = from->self_merged;
    to->self = from->self;
    to->settled = from->settled;
    to->gen = from->gen;
    to->parent_gen = from->parent_gen;
}

static int root_stack(struct onion *u, struct stack *s)
{
    s->n = 0;
    s->kept = 0;
    s->changes = 0;
    s->self_known = 0;
    s->gen = 0;
    s->parent_gen = 0;
    for (int k = 0; k < u->n; k++) {
        int fd = layer_fd(&u->l[k]);
        if (fd < 0)
            return fd;
        s->fd[s->n] = fd;
        s->layer[s->n] = (unsigned char)k;
        s->names[s->n] = NULL;
        s->owned[s->n++] = 0;
    }
    return 0;
}

int union_is_whiteout(const struct stat *st)
{
    return S_ISCHR(st->st_mode) && st->st_rdev == 0;
}

/* fuse-overlayfs' whiteout of name in dfd: .wh.NAME */
static int whiteout_file(int dfd, const char *name)
{
    char wh[NAME_MAX + 1];
    size_t len = strlen(name);
    if (len + 4 > NAME_MAX)
        return 0;       /* too long for the .wh. form: only the kernel's exists */
    memcpy(wh, WH, 4);
    memcpy(wh + 4, name, len + 1);
    struct stat st;
    return REAL(fstatat)(dfd, wh, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static int later(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec > b->tv_nsec);
}

/* ---- opaque directories: whether the directory name in a layer's dfd hides the layers
 * below it (the kernel's xattr, or .wh..wh..opq in it). Asked of the layer (two system
 * calls) at each step into a directory with layers below, and remembered by what the step
 * found: the directory's device, inode and ctime (a setxattr, and a name made or removed
 * in it, move its ctime), with the count of changes through the mount and attr_timeout as
 * every kept thing (vfs/union.c "directories kept"). A decision is remembered only where
 * the ctime is older than the clock before it was asked: a change after that gets a later
 * ctime (the kernel stamps changes with the coarse clock, or later), so a ctime seen again
 * is the directory as it was asked. */
#define OPAQUE_SEEN 256         /* a power of two */
#ifndef SYS_getxattrat
#define SYS_getxattrat 464      /* Linux 6.13 */
#endif

struct opaque_seen {
    unsigned seq;               /* odd while a thread writes it: readers miss, nothing waits */
    int opaque;
    dev_t dev;
    ino_t ino;
    struct timespec ctime, expires;
    uint64_t changes;
};
static struct opaque_seen opaque_seen[OPAQUE_SEEN];
static int no_getxattrat;

static int opaque_xattr(int dfd, const char *name)
{
    char v[2];
    long n = -1;
    if (!__atomic_load_n(&no_getxattrat, __ATOMIC_RELAXED)) {
        struct { uint64_t value; uint32_t size, flags; } args = { (uintptr_t)v, sizeof v, 0 };
        n = REAL(syscall)(SYS_getxattrat, dfd, name, AT_SYMLINK_NOFOLLOW, OPAQUE_XATTR, &args, sizeof args);
        if (n < 0 && errno == ENOSYS)
            __atomic_store_n(&no_getxattrat, 1, __ATOMIC_RELAXED);
    }
    if (__atomic_load_n(&no_getxattrat, __ATOMIC_RELAXED)) {
        char p[PATH_MAX];
        if ((size_t)snprintf(p, sizeof p, "/proc/self/fd/%d/%s", dfd, name) < sizeof p)
            n = REAL(lgetxattr)(p, OPAQUE_XATTR, v, sizeof v);
    }
    return n == 1 && v[0] == 'y';
}

static int opaque_asked(int dfd, const char *name)
{
    if (opaque_xattr(dfd, name))
        return 1;
    char p[PATH_MAX];
    size_t len = strlen(name);
    if (len + 1 + sizeof OPAQUE_FILE > PATH_MAX)
        return 0;
    memcpy(p, name, len);
    p[len] = '/';
    memcpy(p + len + 1, OPAQUE_FILE, sizeof OPAQUE_FILE);
    struct stat st;
    return REAL(fstatat)(dfd, p, &st, AT_SYMLINK_NOFOLLOW) == 0;
}

static int same_time(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

/* The directory name in dfd, st its stat, hides the layers below; changes: the stack's
 * count of changes (0: nothing is remembered) */
static int opaque(int dfd, const char *name, const struct stat *st, uint64_t changes)
{
    struct opaque_seen *o = &opaque_seen[(st->st_ino * 0x9e3779b97f4a7c15ull ^ st->st_dev) >> 56 & (OPAQUE_SEEN - 1)];
    struct timespec now, ttl;
    if (changes) {
        unsigned q = __atomic_load_n(&o->seq, __ATOMIC_ACQUIRE);
        struct opaque_seen c = *o;
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
        if (!(q & 1) && __atomic_load_n(&o->seq, __ATOMIC_RELAXED) == q && c.changes == changes &&
            c.ino == st->st_ino && c.dev == st->st_dev && same_time(&c.ctime, &st->st_ctim) && later(&c.expires, &now))
            return c.opaque;
    }
    struct timespec before;
    clock_gettime(CLOCK_REALTIME_COARSE, &before);
    int r = opaque_asked(dfd, name);
    unsigned q = __atomic_load_n(&o->seq, __ATOMIC_RELAXED);
    if (changes && later(&before, &st->st_ctim) && attrcache_timeout(&ttl) && !(q & 1) &&
        __atomic_compare_exchange_n(&o->seq, &q, q + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED)) {
        o->opaque = r;
        o->dev = st->st_dev;
        o->ino = st->st_ino;
        o->ctime = st->st_ctim;
        o->changes = changes;
        clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
        o->expires = timespec_after(now, ttl);
        __atomic_store_n(&o->seq, q + 2, __ATOMIC_RELEASE);
    }
    return r;
}

static void seen_set(struct layer_seen *l, const struct stat *st)
{
    l->ino = st->st_ino;
    l->dev = st->st_dev;
    l->ctime = st->st_ctim;
}

static int seen_same(const struct layer_seen *l, const struct stat *st)
{
    return l->ino == st->st_ino && l->dev == st->st_dev && same_time(&l->ctime, &st->st_ctim);
}

/* What name is in the merged directory s: the top entry's stat in *st and the index of
 * its layer in s in *top; *dirs, when asked, gets the directories of that name (top first,
 * down to an opaque one) and *merged whether there are two or more. -ENOENT, or -errno. */
static int step(struct stack *s, const char *name, struct stat *st, int *top, struct stack *dirs, int *merged)
{
    int found = 0, ndirs = 0;
    struct timespec before;
    if (dirs) {
        dirs->n = 0;
        dirs->kept = 0;
        dirs->changes = 0;
        dirs->self_known = 0;
        dirs->settled = 1;
        dirs->gen = 0;
        dirs->parent_gen = s->gen;
        clock_gettime(CLOCK_REALTIME_COARSE, &before);
    }
    for (int k = 0; k < s->n; k++) {
        int more = k + 1 < s->n;
        struct stat here;
        /* what the layer holds, if known (learned where lookups go on past it) */
        struct layer_names *ln = union_stack_names(s, k, more);
        if (!layer_names_may_hold(ln, name)) {
            if (more && layer_names_may_whiteout(ln, name) && whiteout_file(s->fd[k], name))
                break;
            continue;
        }
        if (REAL(fstatat)(s->fd[k], name, &here, AT_SYMLINK_NOFOLLOW) < 0) {
            if (errno != ENOENT && errno != ENOTDIR && errno != ENAMETOOLONG)
                return -errno;
            if (more && layer_names_may_whiteout(ln, name) && whiteout_file(s->fd[k], name))
                break;
            continue;
        }
        if (union_is_whiteout(&here))
            break;
        if (!S_ISDIR(here.st_mode)) {
            if (!found) {
                *st = here;
                *top = k;
                found = 1;
            }
            break;
        }
        if (!found) {
            *st = here;
            *top = k;
            found = 1;
        } else if (ndirs == 1 && s->layer[*top] == 0 && here.st_dev == st->st_dev) {
            /* a merged directory's inode number is its top lower directory's, as the
             * kernel's when its layers share a file system: the same before and after
             * its copy-up (fts, rm -r, find compare a directory's with what ".." opens) */
            st->st_ino = here.st_ino;
        }
        ndirs++;
        if (dirs) {
            int fd = REAL(openat)(s->fd[k], name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (fd < 0) {
                int e = errno;
                stack_free(dirs);
                return -e;
            }
            dirs->fd[dirs->n] = fd;
            dirs->layer[dirs->n] = s->layer[k];
            seen_set(&dirs->seen[dirs->n], &here);
            dirs->settled &= later(&before, &here.st_ctim);
            dirs->names[dirs->n] = NULL;
            dirs->owned[dirs->n++] = 1;
        } else if (ndirs > 1) {
            break;      /* merged: that is all getattr asks */
        }
        if (more && opaque(s->fd[k], name, &here, s->changes))
            break;
    }
    if (merged)
        *merged = ndirs > 1;
    return found ? 0 : -ENOENT;
}

/* ---- directories kept: the stacks of the merged directories a process walked to
 *
 * A name in a subdirectory costs a step in its directory's layers, not a walk from the
 * roots. A process keeps stacks (the layers' O_PATH fds, at high numbers), each used while:
 *  - the server's count of every change made through the mount (coherence.h changes) is
 *    what it was before the walk: a copy-up, a whiteout, a mkdir, a rename, an open for
 *    writing (server/coherence.c counts it for this) by any process of the command, all of
 *    them the class's, make every process walk again, but for the directories whose
 *    layers' directories are still those the walk found, with their ctimes, below a kept
 *    parent that is still the one they were walked from (still_true: one fstat a layer);
 *  - attr_timeout has not passed since (a change made by a process outside the command, as
 *    the rest of the mount's caches);
 *  - this process has not changed its credentials (the walk checked its search rights).
 * A process asks for the table of counters only at its KEPT_AFTER-th walk (a short one
 * connects to nothing). The root is kept too (its fds are the layers' own); a directory
 * whose parent is kept is walked to from it; a kept stack answers getattr of its directory
 * (the walk's answer: a directory changes only by what moves the count). A kept stack of
 * two layers or more learns what each layer's directory holds (vfs/union_names.c), from a
 * listing readdir merged or from lookups that go on past a layer, and is as true as the
 * stack: a lookup then asks a layer only for the names it holds.
 *
 * The table is sized by use, as vfs/backing_dirs.c's: it is mapped at the first keep with
 * as many entries as a quarter of the fd numbers RLIMIT_NOFILE leaves above fs_fd_base
 * (KEPT_MIN to KEPT_MAX), and its entries hold that many layer fds at most. An entry goes
 * in a set of WAYS by its path's hash and takes the place of the set's least recently used
 * one: a tree walk (git status, find) uses a directory's parent at each of its children,
 * so the directories above stay while those it walked past go (64 entries, one per hash,
 * were replaced over and over by git status's 100 directories and .git's).
 *
 * No lock, as backing_dirs.c: an entry's users count is its lock. A lookup adds itself to
 * the users of an entry whose hash matches and only then compares the rest; a keep claims
 * an entry with no users by making the count CLAIMED (negative), and a lookup that lands on
 * a claimed entry backs off and walks. Nothing waits, so a signal handler that touches the
 * mount in the middle of a lookup or a keep on the same thread walks as any other miss.
 */
#define KEPT_MIN 64             /* entries; powers of two */
#define KEPT_MAX 4096
#define WAYS 8                  /* per set */
#define KEPT_PATH 256
#define KEPT_AFTER 8
#define LEARN_AFTER 2           /* uses of a kept directory before a lookup learns a layer's names */
#define LEARN_PER_USE 32        /* names read per use of it at most: a big directory is learned
                                   only once lookups there have paid for its listing */
#define CLAIMED (INT_MIN / 2)   /* users while a keep rewrites the entry */

struct kept {
    struct stack s;             /* s.changes 0: empty; s.owned: its fds are the entry's (not the root's) */
    int mnt;
    unsigned creds;
    unsigned hits;              /* uses since it was kept */
    unsigned learn_at;          /* hits at which a lookup tries to learn a layer's names */
    unsigned used;              /* the clock at its last use: a set's oldest is replaced first */
    uint64_t hash;
    struct timespec expires;
    char path[KEPT_PATH];
};
static struct kept *kept;       /* nkept entries, mapped at the first keep (zeros: empty) */
static int *users;              /* calls using each entry now, or CLAIMED */
static uint64_t *hashes;        /* each way's entry's hash, a set's on one cache line */
static int *where;              /* each way's entry: 1 + its index in kept (0: none yet) */
static unsigned pooled;         /* entries handed out, in order: a process that keeps a few
                                   hundred directories touches as many pages as they fill */
static unsigned nkept;
static int fds_kept, fds_most;  /* layer fds the entries hold, and how many they may */
static unsigned uses;           /* the clock of used */
static unsigned walks;
static uint64_t gens;           /* of kept stacks */

/* fork: the child has none of the calls that were using kept stacks; an entry a thread it
 * does not have was rewriting is dropped (its fds stay open, close-on-exec). */
static void fork_child(void)
{
    struct kept *t = __atomic_load_n(&kept, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; t && i < nkept; i++) {
        if (users[i] < 0 && where[i]) {
            t[where[i] - 1].s.changes = 0;
            t[where[i] - 1].s.n = 0;
        }
        users[i] = 0;
    }
}

/* Way i's entry, NULL if it has none yet */
static struct kept *entry_at(unsigned i)
{
    int w = __atomic_load_n(&where[i], __ATOMIC_ACQUIRE);
    return w ? &kept[w - 1] : NULL;
}

/* The table, mapped now if it is not. */
static struct kept *table(void)
{
    struct kept *t = __atomic_load_n(&kept, __ATOMIC_ACQUIRE);
    if (LIKELY(t != NULL))
        return t;
    struct rlimit rl;
    unsigned n = KEPT_MIN;
    rlim_t room = KEPT_MIN;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rlim_t base = (rlim_t)fs_fd_base();
        room = rl.rlim_cur == RLIM_INFINITY ? 4 * KEPT_MAX : rl.rlim_cur > base ? (rl.rlim_cur - base) / 4 : 0;
        while (n < KEPT_MAX && 2 * (rlim_t)n <= room)
            n *= 2;
    }
    /* one thread maps it (nkept, fds_most and users set before the table is published,
     * never changed after); another, or a handler on this one, keeps nothing meanwhile */
    static int mapping;
    if (__atomic_exchange_n(&mapping, 1, __ATOMIC_ACQ_REL))
        return NULL;
    size_t size = n * sizeof *t + n * sizeof *hashes + n * sizeof *users + n * sizeof *where;
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;    /* nothing is kept in this process */
    nkept = n;
    fds_most = room < 16 ? 16 : room > 4 * KEPT_MAX ? 4 * KEPT_MAX : (int)room;
    hashes = (uint64_t *)((char *)m + n * sizeof *t);
    users = (int *)(hashes + n);
    where = users + n;
    __atomic_store_n(&kept, (struct kept *)m, __ATOMIC_RELEASE);
    return m;
}

/* The count of changes a stack walked now is good for, 0 if nothing is kept now. */
static uint64_t changes_now(struct onion *u)
{
    struct timespec ttl;
    if (union_inner->changes == NULL || union_inner->below_stamp == NULL || ldp_vfork_child ||
        !attrcache_timeout(&ttl))
        return 0;
    /* the root's stamp: 0 while the table is not mapped (mapped at the KEPT_AFTER-th walk),
     * never 0 once it is (its global counter starts at 1); the count of changes may be 0 */
    unsigned w = __atomic_load_n(&walks, __ATOMIC_RELAXED);
    int connect = (w >= KEPT_AFTER ? w : __atomic_add_fetch(&walks, 1, __ATOMIC_RELAXED)) >= KEPT_AFTER;
    uint64_t root = union_inner->below_stamp(u->mnt, "/", connect);
    return root ? root + union_inner->changes() : 0;
}

static int dir_get(struct onion *u, const char *dir, size_t len, struct stack *s);
static int kept_find(struct onion *u, const char *dir, size_t len, uint64_t changes, struct stack *s);

/* One step from dir's parent, if the parent is kept (good for changes): 1 and *r (0 and
 * the stack in *s, or -errno); 0 if it is not kept. A walk down a tree (find, git's
 * listings) then costs one step per directory, not one per component from the root. */
static int walk_from_parent(struct onion *u, const char *dir, struct stack *s, uint64_t changes, int *r)
{
    const char *slash = strrchr(dir, '/');
    size_t plen = slash ? (size_t)(slash - dir) : 0;
    if (!changes || plen < 2 || plen >= KEPT_PATH || slash[1] == '\0' || strlen(slash + 1) > NAME_MAX)
        return 0;
    char parent[KEPT_PATH];
    memcpy(parent, dir, plen);
    parent[plen] = '\0';
    struct stack ps;
    if (!kept_find(u, parent, plen, changes, &ps))
        return 0;
    struct stack dirs;
    struct stat st;
    int top, merged;
    *r = step(&ps, slash + 1, &st, &top, &dirs, &merged);
    union_dir_put(u, parent, &ps);
    if (*r < 0)
        return 1;
    if (!S_ISDIR(st.st_mode)) {
        stack_free(&dirs);
        *r = -ENOTDIR;
        return 1;
    }
    dirs.self = st;
    dirs.self_merged = merged;
    dirs.self_known = 1;
    stack_move(s, &dirs);
    return 1;
}

/* Walk the merged directory dir ("/a/b") from the roots (the kept root's, whose layers'
 * names may be known), or from its kept parent: its stack, or -ENOENT/-ENOTDIR. */
static int walk_dir(struct onion *u, const char *dir, struct stack *s, uint64_t changes)
{
    int from_parent;
    if (walk_from_parent(u, dir, s, changes, &from_parent))
        return from_parent;
    const char *p = dir;
    while (*p == '/')
        p++;
    int r = *p ? dir_get(u, "/", 1, s) : root_stack(u, s);
    if (r < 0)
        return r;
    int from_root = *p != '\0';
    char name[NAME_MAX + 1];
    for (;;) {
        while (*p == '/')
            p++;
        if (*p == '\0')
            return 0;
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > NAME_MAX) {
            if (from_root)
                union_dir_put(u, "/", s);
            else
                stack_free(s);
            return -ENAMETOOLONG;
        }
        memcpy(name, p, len);
        name[len] = '\0';
        p += len;
        struct stack dirs;
        struct stat st;
        int top, merged;
        r = step(s, name, &st, &top, &dirs, &merged);
        if (from_root)
            union_dir_put(u, "/", s);     /* the root's stack: kept, or its layers' own fds */
        else
            stack_free(s);
        from_root = 0;
        if (r < 0)
            return r;
        if (!S_ISDIR(st.st_mode)) {
            stack_free(&dirs);
            return -ENOTDIR;    /* a symlink among the directories: the core resolves it */
        }
        dirs.self = st;         /* what getattr answers for it, while the stack is kept */
        dirs.self_merged = merged;
        dirs.self_known = 1;
        stack_move(s, &dirs);
    }
}

static void stack_copy(struct stack *to, const struct stack *from)
{
    int n = from->n;
    to->n = n;
    memcpy(to->fd, from->fd, (size_t)n * sizeof to->fd[0]);
    memcpy(to->layer, from->layer, (size_t)n);
    memset(to->owned, 0, (size_t)n);
    memcpy(to->names, from->names, (size_t)n * sizeof to->names[0]);
    to->changes = from->changes;
    to->self_known = from->self_known;
    to->self_merged = from->self_merged;
    to->self = from->self;
    to->settled = 0;            /* a copy is not kept again: what the layers were is the entry's */
    to->gen = from->gen;
    to->parent_gen = from->parent_gen;
}

/* The kept stack k, walked when the count of changes was was, is still true now that it is
 * changes: each of its layers' directories is the one the walk found, with the ctime it
 * had (a name made, removed or renamed in it, an xattr or a mode set on it, move it; the
 * walk saw each ctime older than its clock, so a later change cannot give the same one),
 * and its parent's stack is the kept one it was walked from, still true, up to the root's
 * (a layer's directory made or removed moves its parent's ctime there; a parent walked
 * again since is a new stack: what changed there may have been this one's name). Then it is good for changes: a copy-up, a
 * create or an unlink elsewhere (git's index.lock) does not make every directory walk
 * again, only those on its path. */
static int kept_find(struct onion *u, const char *dir, size_t len, uint64_t changes, struct stack *s);

static int still_true(struct onion *u, struct kept *k, uint64_t was, uint64_t changes)
{
    if (!k->s.settled || was > changes)
        return 0;
    const char *slash = strrchr(k->path, '/');
    size_t plen = slash ? (size_t)(slash - k->path) : 0;
    if (slash && slash[1] != '\0') {
        char parent[KEPT_PATH];
        memcpy(parent, k->path, plen);
        parent[plen ? plen : 1] = '\0';
        if (!plen)
            parent[0] = '/';
        struct stack ps;
        if (!kept_find(u, parent, plen ? plen : 1, changes, &ps))
            return 0;
        __atomic_sub_fetch(&users[ps.slot], 1, __ATOMIC_RELEASE);
        if (ps.gen != k->s.parent_gen)
            return 0;           /* walked again since: it changed after this one's walk */
    }
    for (int i = 0; i < k->s.n; i++) {
        struct stat st;
        int fd = __atomic_load_n(&k->s.fd[i], __ATOMIC_ACQUIRE);
        if (fd < 0 || REAL(fstat)(fd, &st) < 0 || !seen_same(&k->s.seen[i], &st))
            return 0;
    }
    __atomic_compare_exchange_n(&k->s.changes, &was, changes, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    return 1;
}

/* The kept stack of dir (len bytes) if it is still good for changes: 1, s->kept, a user of
 * its entry (give it back with dir_put); 0 if none. */
static int kept_find(struct onion *u, const char *dir, size_t len, uint64_t changes, struct stack *s)
{
    struct kept *t = __atomic_load_n(&kept, __ATOMIC_ACQUIRE);
    if (!changes || t == NULL)
        return 0;
    uint64_t hash = fnv1a(fnv1a_seed(u->mnt), dir, NULL);
    unsigned creds = __atomic_load_n(&ldp_creds_gen, __ATOMIC_ACQUIRE);
    unsigned set = (unsigned)hash & (nkept - WAYS);
    struct timespec now = { 0, 0 };
    for (unsigned i = set; i < set + WAYS; i++) {
        if (__atomic_load_n(&hashes[i], __ATOMIC_RELAXED) != hash)
            continue;
        struct kept *k = entry_at(i);
        if (k == NULL)
            continue;
        if (now.tv_sec == 0)
            clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
        if (__atomic_add_fetch(&users[i], 1, __ATOMIC_ACQUIRE) > 0) {      /* no keep rewrites it now */
            uint64_t was = __atomic_load_n(&k->s.changes, __ATOMIC_RELAXED);
            if (was && k->hash == hash && k->mnt == u->mnt && k->creds == creds && later(&k->expires, &now) &&
                memcmp(k->path, dir, len + 1) == 0 && (was == changes || still_true(u, k, was, changes))) {
                stack_copy(s, &k->s);
                s->kept = 1;
                s->slot = (int)i;
                __atomic_add_fetch(&k->hits, 1, __ATOMIC_RELAXED);
                unsigned c = __atomic_load_n(&uses, __ATOMIC_RELAXED) + 1;
                __atomic_store_n(&uses, c, __ATOMIC_RELAXED);     /* a clock, not a count: races are fine */
                __atomic_store_n(&k->used, c, __ATOMIC_RELAXED);
                return 1;       /* a user until dir_put */
            }
        }
        __atomic_sub_fetch(&users[i], 1, __ATOMIC_RELEASE);
    }
    return 0;
}

/* The stack of the merged directory dir (len bytes): kept (s->kept: a user of its entry),
 * or walked now; give it back with dir_put. */
static int dir_get(struct onion *u, const char *dir, size_t len, struct stack *s)
{
    uint64_t changes = len < KEPT_PATH ? changes_now(u) : 0;
    if (kept_find(u, dir, len, changes, s))
        return 0;
    int r = walk_dir(u, dir, s, changes);
    if (r == 0)
        s->changes = changes;
    return r;
}

static int claim(unsigned i)
{
    int none = 0;
    return __atomic_compare_exchange_n(&users[i], &none, CLAIMED, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

static int owned_fds(const struct stack *s)
{
    int n = 0;
    for (int k = 0; k < s->n; k++)
        n += s->owned[k];
    return n;
}

/* An entry of dir's set claimed for a keep: its own old one or an empty one, else the
 * least recently used of those no call uses. -1: none. */
static int claim_for(struct kept *t, int mnt, uint64_t hash)
{
    unsigned set = (unsigned)hash & (nkept - WAYS);
    for (unsigned i = set; i < set + WAYS; i++) {
        struct kept *c = entry_at(i);     /* read only where there is one: a page each */
        if ((c == NULL || __atomic_load_n(&c->s.changes, __ATOMIC_RELAXED) == 0 ||
             (__atomic_load_n(&hashes[i], __ATOMIC_RELAXED) == hash && c->mnt == mnt)) && claim(i))
            return (int)i;
    }
    unsigned now = __atomic_load_n(&uses, __ATOMIC_RELAXED), oldest = 0;
    int victim = -1;
    for (unsigned i = set; i < set + WAYS; i++) {
        struct kept *c = entry_at(i);
        unsigned age = c ? now - __atomic_load_n(&c->used, __ATOMIC_RELAXED) : 0;
        if (c && (victim < 0 || age > oldest)) {
            victim = (int)i;
            oldest = age;
        }
    }
    return victim >= 0 && claim((unsigned)victim) ? victim : -1;
}

/* Done with dir_get's stack: kept for the next call if it was walked when it could be. */
void union_dir_put(struct onion *u, const char *dir, struct stack *s)
{
    if (s->kept) {
        s->kept = 0;
        s->n = 0;
        __atomic_sub_fetch(&users[s->slot], 1, __ATOMIC_RELEASE);
        return;
    }
    size_t len = strlen(dir);
    struct timespec ttl, now;
    int root = strcmp(dir, "/") == 0;  /* its fds are the layers' own: kept, never closed */
    int whole = s->n > 0;
    for (int k = 0; k < s->n; k++)
        whole &= s->owned[k] || root;
    struct kept *t = whole && s->changes && len < KEPT_PATH ? table() : NULL;
    if (t == NULL || !attrcache_timeout(&ttl)) {
        stack_free(s);
        return;
    }
    uint64_t hash = fnv1a(fnv1a_seed(u->mnt), dir, NULL);
    int slot = claim_for(t, u->mnt, hash);
    if (slot >= 0 && where[slot] == 0) {
        unsigned p = __atomic_fetch_add(&pooled, 1, __ATOMIC_RELAXED);  /* one per way: never past nkept */
        __atomic_store_n(&where[slot], (int)p + 1, __ATOMIC_RELEASE);
    }
    struct kept *k = slot >= 0 ? entry_at((unsigned)slot) : NULL;
    int more = owned_fds(s) - (k ? owned_fds(&k->s) : 0);
    if (k && __atomic_load_n(&fds_kept, __ATOMIC_RELAXED) + more > fds_most) {
        __atomic_sub_fetch(&users[slot], CLAIMED, __ATOMIC_RELEASE);
        k = NULL;               /* as many fds kept as there may be */
    }
    int saved = errno;
    for (int i = 0; k && i < s->n && !root; i++) {
        /* up out of the program's way (fs_fd, but these are close-on-exec: no F_GETFD) */
        int high = s->fd[i] < fs_fd_base() ? REAL(fcntl)(s->fd[i], F_DUPFD_CLOEXEC, fs_fd_base()) : s->fd[i];
        if (high < 0) {         /* no room up there: nothing is kept */
            __atomic_sub_fetch(&users[slot], CLAIMED, __ATOMIC_RELEASE);
            k = NULL;
            break;
        }
        if (high != s->fd[i]) {
            REAL(close)(s->fd[i]);
            s->fd[i] = high;
        }
    }
    errno = saved;
    if (k == NULL) {
        stack_free(s);
        return;
    }
    if (root) {
        struct timespec before;
        clock_gettime(CLOCK_REALTIME_COARSE, &before);
        s->settled = 1;
        for (int i = 0; i < s->n; i++) {
            struct stat st;
            if (REAL(fstat)(s->fd[i], &st) < 0)
                memset(&st, 0, sizeof st);
            seen_set(&s->seen[i], &st);
            s->settled &= st.st_ino && later(&before, &st.st_ctim);
        }
    }
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    /* the old stack's fds and names, and the new one moved in: as many layers as each
     * has, not the whole struct (two copies of 1.7 KB were the largest cost of a keep) */
    int old_n = k->s.n, old_fd[LAYERS_MAX];
    unsigned char old_owned[LAYERS_MAX];
    struct layer_names *old_names[LAYERS_MAX];
    memcpy(old_fd, k->s.fd, (size_t)old_n * sizeof old_fd[0]);
    memcpy(old_owned, k->s.owned, (size_t)old_n);
    memcpy(old_names, k->s.names, (size_t)old_n * sizeof old_names[0]);
    __atomic_store_n(&k->s.changes, 0, __ATOMIC_RELAXED);
    stack_move(&k->s, s);
    k->s.kept = 0;
    k->s.gen = __atomic_add_fetch(&gens, 1, __ATOMIC_RELAXED);
    k->mnt = u->mnt;
    k->hits = 0;
    k->learn_at = LEARN_AFTER;
    k->creds = __atomic_load_n(&ldp_creds_gen, __ATOMIC_ACQUIRE);
    memcpy(k->path, dir, len + 1);
    k->expires = timespec_after(now, ttl);
    __atomic_store_n(&k->used, __atomic_load_n(&uses, __ATOMIC_RELAXED), __ATOMIC_RELAXED);
    k->hash = hash;
    __atomic_store_n(&hashes[slot], hash, __ATOMIC_RELAXED);
    __atomic_add_fetch(&fds_kept, more, __ATOMIC_RELAXED);
    for (int i = 0; i < s->n; i++)
        if (s->fd[i] < ldp_backing_low_fd)
            ldp_backing_low_fd = s->fd[i];
    /* let go of the claim (lookups that backed off meanwhile took theirs back) */
    __atomic_sub_fetch(&users[slot], CLAIMED, __ATOMIC_RELEASE);
    for (int i = 0; i < old_n; i++) {
        if (old_owned[i] && old_fd[i] >= 0)
            REAL(close)(old_fd[i]);
        if (old_names[i]) {
            guard_enter();      /* free: as stack_free */
            layer_names_free(old_names[i]);
            guard_leave();
        }
    }
    s->n = 0;
}

/* What a lookup of the directory dir itself finds, from its kept stack (the walk's answer,
 * as true as the stack: a directory's attributes change only by what moves the count of
 * changes, or by attr_timeout's world outside): 1 and *st, *merged; 0: look it up. A
 * name that is no kept directory (most) costs the loads of its set's hashes, nothing else. */
/* Has a way of dir's set an entry of its hash (kept, or was): a load per way */
static int kept_may_have(struct onion *u, const char *dir)
{
    if (__atomic_load_n(&kept, __ATOMIC_ACQUIRE) == NULL)
        return 0;
    uint64_t hash = fnv1a(fnv1a_seed(u->mnt), dir, NULL);
    unsigned set = (unsigned)hash & (nkept - WAYS);
    for (unsigned i = set; i < set + WAYS; i++)
        if (__atomic_load_n(&hashes[i], __ATOMIC_RELAXED) == hash)
            return 1;
    return 0;
}

static int dir_peek(struct onion *u, const char *dir, struct stat *st, int *merged)
{
    size_t len = strlen(dir);
    if (len >= KEPT_PATH || len < 2 || !kept_may_have(u, dir))
        return 0;
    struct stack s;
    if (!kept_find(u, dir, len, changes_now(u), &s))
        return 0;
    int r = 0;
    if (s.self_known) {
        *st = s.self;
        *merged = s.self_merged;
        r = 1;
    }
    union_dir_put(u, dir, &s);
    return r;
}

/* Layer k of s learned ln (NULL: not learned): kept in s's entry, or in s, unless it has
 * one already. Returns what s's layer k has now. */
struct layer_names *union_names_keep(struct stack *s, int k, struct layer_names *ln)
{
    struct layer_names **at = s->kept ? &entry_at((unsigned)s->slot)->s.names[k] : &s->names[k];
    struct layer_names *none = NULL;
    if (ln == NULL)
        return __atomic_load_n(at, __ATOMIC_ACQUIRE);
    if (!__atomic_compare_exchange_n(at, &none, ln, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        guard_enter();
        layer_names_free(ln);
        guard_leave();
        return none;
    }
    return ln;
}

static struct onion *onion_of_mnt(int mnt)
{
    for (int i = 0; i < nunions; i++)
        if (unions[i].mnt == mnt)
            return &unions[i];
    return NULL;
}

/* Layer k's names in s, NULL if not known: a kept directory's are learned here when learn
 * says lookups go on past that layer, once it has been used LEARN_AFTER times, and only if
 * it holds at most LEARN_PER_USE names per use so far (else again at twice the uses: a
 * process that changes a big directory between its lookups never reads it whole for each). */
struct layer_names *union_stack_names(struct stack *s, int k, int learn)
{
    if (!s->kept)
        return s->names[k];
    struct kept *e = entry_at((unsigned)s->slot);
    struct layer_names *ln = __atomic_load_n(&e->s.names[k], __ATOMIC_ACQUIRE);
    if (ln || !learn)
        return ln;
    unsigned hits = __atomic_load_n(&e->hits, __ATOMIC_RELAXED);
    if (hits < __atomic_load_n(&e->learn_at, __ATOMIC_RELAXED))
        return NULL;
    ln = NAMES_UNKNOWN;
    struct onion *u = onion_of_mnt(e->mnt);
    if (u && layer_names_searchable(s->fd[k])) {
        int fd = union_listing(u, e->path, s, k);
        guard_enter();          /* the names' table is malloc'ed: once a kept directory */
        ln = fd < 0 ? NAMES_UNKNOWN : layer_names_read(fd, (size_t)hits * LEARN_PER_USE);
        guard_leave();
        if (fd >= 0)
            REAL(close)(fd);
    }
    if (ln == NULL) {
        __atomic_store_n(&e->learn_at, 2 * hits, __ATOMIC_RELAXED);
        return NULL;
    }
    return union_names_keep(s, k, ln);
}

/* The program closed or replaced fds first..last (vfs/backing.c backing_fds_lost): a layer
 * whose fd was among them opens again at its next use. Returns the lowest fd left. */
int union_fds_lost(unsigned first, unsigned last)
{
    int low = INT_MAX;
    for (int i = 0; i < nunions; i++) {
        for (int k = 0; k < unions[i].n; k++) {
            struct layer *l = &unions[i].l[k];
            int fd = __atomic_load_n(&l->fd, __ATOMIC_ACQUIRE);
            if (fd >= 0 && (unsigned)fd >= first && (unsigned)fd <= last)
                __atomic_store_n(&l->fd, -1, __ATOMIC_RELEASE);
            else if (fd >= 0 && fd < low)
                low = fd;
        }
    }
    struct kept *t = __atomic_load_n(&kept, __ATOMIC_ACQUIRE);
    unsigned n = t ? __atomic_load_n(&pooled, __ATOMIC_RELAXED) : 0;
    for (unsigned i = 0; i < n && i < nkept; i++) {
        struct stack *s = &t[i].s;
        for (int k = 0; k < s->n; k++) {
            int fd = __atomic_load_n(&s->fd[k], __ATOMIC_ACQUIRE);
            if (fd >= 0 && (unsigned)fd >= first && (unsigned)fd <= last) {
                __atomic_store_n(&s->changes, 0, __ATOMIC_RELEASE);    /* never used again */
                __atomic_store_n(&s->fd[k], -1, __ATOMIC_RELEASE);     /* nor closed: the program's */
            } else if (fd >= 0 && fd < low) {
                low = fd;
            }
        }
    }
    return low;
}

/* Layer k of the merged directory path (its stack s) opened for reading, for a listing: by
 * its name in the same layer's directory of its parent, kept (or the root's), as opening
 * it by name does (read permission on it; search permission on the parent, which the walk
 * to it needed); through /proc where the parent is not kept. An fd, or -1 and errno. */
int union_listing(struct onion *u, const char *path, struct stack *s, int k)
{
    const char *slash = strrchr(path, '/');
    size_t plen = slash ? (size_t)(slash - path) : 0;
    if (slash == NULL || slash[1] == '\0' || strlen(slash + 1) > NAME_MAX || plen >= KEPT_PATH || !s->changes)
        return union_open_listing(s->fd[k]);
    struct stack ps;
    int pfd = -1, kept_parent = 0;
    if (plen == 0) {
        int l = s->layer[k];
        pfd = l < u->n ? __atomic_load_n(&u->l[l].fd, __ATOMIC_ACQUIRE) : -1;    /* the root's: the layer's own */
    } else {
        char parent[KEPT_PATH];
        memcpy(parent, path, plen);
        parent[plen] = '\0';
        kept_parent = kept_find(u, parent, plen, s->changes, &ps);
        for (int j = 0; kept_parent && j < ps.n && pfd < 0; j++)
            if (ps.layer[j] == s->layer[k])
                pfd = ps.fd[j];
    }
    int fd = pfd >= 0 ? REAL(openat)(pfd, slash + 1, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC) : -1;
    int e = errno;
    if (kept_parent) {
        ps.kept = 0;
        ps.n = 0;
        __atomic_sub_fetch(&users[ps.slot], 1, __ATOMIC_RELEASE);
    }
    if (fd >= 0 || (pfd >= 0 && e == EACCES)) {
        errno = e;
        return fd;
    }
    return union_open_listing(s->fd[k]);     /* changed from outside since: the walk's own */
}

/* A looked-up name: its parent's stack, its last component, where it is. */
struct found {
    struct stack parent;
    char dir[PATH_MAX];         /* the parent's mount path */
    char last[NAME_MAX + 1];    /* "" for the root */
    struct stat st;
    int top;                    /* index in parent (the root: 0, the upper) */
    int merged;
};

static void found_put(struct onion *u, struct found *f)
{
    if (f->last[0])
        union_dir_put(u, f->dir, &f->parent);
    else
        stack_free(&f->parent);
}

/* Look path ("/a/b") up: its parent directory's stack, then its last component. A
 * directory found in a kept parent is kept too (its layers' directories opened as the
 * step finds them): a tree walk (find, git's listing of untracked files) stats a
 * directory, then opens it, then lists it; the open's lookup and the listing's walk find
 * it kept (dir_peek, kept_find) instead of asking each layer for the name again. */
static int lookup(struct onion *u, const char *path, struct found *f)
{
    const char *p = path;
    while (*p == '/')
        p++;
    if (*p == '\0') {
        int r = root_stack(u, &f->parent);
        if (r < 0)
            return r;
        f->last[0] = '\0';
        f->top = 0;
        f->merged = u->n > 1;   /* every layer's root merges (as the kernel's) */
        r = REAL(fstat)(f->parent.fd[0], &f->st) < 0 ? -errno : 0;
        if (r < 0)
            stack_free(&f->parent);
        return r;
    }
    size_t plen = strlen(path);
    while (plen > 1 && path[plen - 1] == '/')
        plen--;
    const char *slash = path + plen - 1;
    while (slash > path && *slash != '/')
        slash--;
    size_t dl = (size_t)(slash - path), nl = plen - dl - 1;
    if (nl > NAME_MAX)
        return -ENAMETOOLONG;
    if (dl >= sizeof f->dir)
        return -ENAMETOOLONG;
    memcpy(f->dir, path, dl);
    f->dir[dl ? dl : 1] = '\0';
    if (!dl)
        f->dir[0] = '/';
    memcpy(f->last, slash + 1, nl);
    f->last[nl] = '\0';
    int r = dir_get(u, f->dir, dl ? dl : 1, &f->parent);
    if (r < 0)
        return r;
    struct stack dirs;
    int keep = f->parent.kept && path[plen] == '\0' && plen < KEPT_PATH && !kept_may_have(u, path);
    r = step(&f->parent, f->last, &f->st, &f->top, keep ? &dirs : NULL, &f->merged);
    if (keep) {
        if (r == 0 && S_ISDIR(f->st.st_mode) && dirs.n > 0) {
            dirs.self = f->st;
            dirs.self_merged = f->merged;
            dirs.self_known = 1;
            dirs.changes = f->parent.changes;
            union_dir_put(u, path, &dirs);
        } else {
            stack_free(&dirs);
        }
    }
    if (r < 0)
        union_dir_put(u, f->dir, &f->parent);
    return r;
}

/* The merged directory at path itself: its layers' fds in *s (give back with dir_put). */
int union_dir_stack(struct onion *u, const char *path, struct stack *s)
{
    return dir_get(u, path, strlen(path), s);
}

/* ---- the methods */

static int union_getattr(struct onion *u, const char *path, struct stat *st)
{
    int merged;
    if (dir_peek(u, path, st, &merged)) {
        if (merged)
            st->st_nlink = 1;
        return 0;
    }
    struct found f;
    int r = lookup(u, path, &f);
    if (r < 0)
        return r;
    found_put(u, &f);
    *st = f.st;
    if (f.merged)
        st->st_nlink = 1;       /* as the kernel: find and fts do not trust the count */
    return 0;
}

static int u_getattr(int mnt, const char *path, const uint64_t *fh, struct stat *st)
{
    struct onion *u = union_of(mnt, path);
    if (u == NULL)
        return union_inner->getattr(mnt, path, fh, st);
    return union_getattr(u, path, st);
}

/* A stat of a name of the merged view in the calling process without the guard (no
 * signal blocked: a program with a handler, git's, paid an rt_sigprocmask pair for each):
 * 1 and *r (0 or -errno), or 0: ask the backend as usual (the class's name, under the
 * guard). What it does is safe with a handler that enters the mount on this thread at any
 * point, as vfs/backing.c's guard-free methods: the kept directories and the opaque
 * answers take no lock (a users count, a sequence count: a handler that lands on an entry
 * being rewritten walks), the table of changes is read without a lock (backend/shared.c
 * sh_below_stamp maps it under a guard of its own), and what allocates or frees (a layer's
 * names learned, dropped) takes the guard for it. */
int union_getattr_here(int mnt, const char *path, struct stat *st, int *r)
{
    struct onion *u = union_inner ? union_of(mnt, path) : NULL;
    if (u == NULL)
        return 0;
    *r = union_getattr(u, path, st);
    return 1;
}

static int u_readlink(int mnt, const char *path, char *buf, size_t size)
{
    struct onion *u = union_of(mnt, path);
    if (u == NULL)
        return union_inner->readlink(mnt, path, buf, size);
    struct found f;
    int r = lookup(u, path, &f);
    if (r < 0)
        return r;
    if (!S_ISLNK(f.st.st_mode))
        r = -EINVAL;
    else {
        ssize_t n = REAL(readlinkat)(f.parent.fd[f.top], f.last, buf, size);
        r = n < 0 ? -errno : (int)n;
    }
    found_put(u, &f);
    return r;
}

static int u_access(int mnt, const char *path, int mode)
{
    struct onion *u = union_of(mnt, path);
    if (u == NULL)
        return union_inner->access(mnt, path, mode);
    struct found f;
    int r = lookup(u, path, &f);
    if (r < 0)
        return r;
    const char *last = f.last[0] ? f.last : "";
    int flags = AT_SYMLINK_NOFOLLOW | (last[0] ? 0 : AT_EMPTY_PATH);
    /* the real uid, as access(2): this process is the caller */
    r = REAL(syscall)(SYS_faccessat2, f.parent.fd[f.top], last, mode, flags) < 0 ? -errno : 0;
    found_put(u, &f);
    return r;
}

static int reading(int flags)
{
    return (flags & O_ACCMODE) == O_RDONLY && !(flags & (O_TRUNC | O_CREAT | __O_TMPFILE));
}

/* A regular file of the merged view opened for reading where it is: an fd (passthrough),
 * ASK_CLASS for anything else, or -errno. st: what it is. */
static long open_reading(struct onion *u, const char *path, int flags, struct stat *st)
{
    int merged;
    if (dir_peek(u, path, st, &merged))
        return ASK_CLASS;       /* a kept directory: the core opens it (opendir) */
    struct found f;
    int r = lookup(u, path, &f);
    if (r < 0)
        return r;
    long fd = ASK_CLASS;
    *st = f.st;
    if (S_ISREG(f.st.st_mode) && f.last[0]) {
        fd = REAL(openat)(f.parent.fd[f.top], f.last, flags | O_NOFOLLOW);
        if (fd < 0)
            fd = errno == ENOENT || errno == ELOOP ? ASK_CLASS : -errno;    /* changed since */
    }
    found_put(u, &f);
    return fd;
}

static int open_result_fd(long fd, struct open_result *res)
{
    res->passthrough_fd = (int)fd;
    res->fd_flags_set = 1;      /* opened with the caller's O_CLOEXEC, at its lowest free number */
    res->fh = 0;
    res->open_flags = 0;
    return 0;
}

static int u_open(int mnt, const char *path, int flags, struct open_result *res)
{
    struct onion *u = reading(flags) ? union_of(mnt, path) : NULL;
    struct stat st;
    long fd = u ? open_reading(u, path, flags, &st) : ASK_CLASS;
    if (fd == ASK_CLASS)
        return union_inner->open(mnt, path, flags, res);
    return fd < 0 ? (int)fd : open_result_fd(fd, res);
}

static int u_create_open(int mnt, const char *path, mode_t mode, int flags, int parent_is_dir,
                         struct open_result *res, struct stat *st, int *outcome)
{
    struct onion *u = reading(flags) ? union_of(mnt, path) : NULL;
    *outcome = CO_ASK;
    if (u) {
        long fd = open_reading(u, path, flags, st);
        if (fd == -ENOENT) {
            *outcome = CO_MISSING;
            return -ENOENT;
        }
        if (fd >= 0) {
            *outcome = CO_OPENED;
            return open_result_fd(fd, res);
        }
        return 0;               /* the core looks up and opens as usual */
    }
    if (union_inner->create_open == NULL)
        return 0;
    return union_inner->create_open(mnt, path, mode, flags, parent_is_dir, res, st, outcome);
}

/* No process keeps a name of a union mount (as a backed one): 0, "cannot tell". */
static uint64_t u_stamp(int mnt, const char *path)
{
    if (union_mount(mnt))
        return 0;
    return union_inner->stamp ? union_inner->stamp(mnt, path) : 0;
}

static int u_written(int mnt, const char *path)
{
    if (union_mount(mnt))
        return 1;
    return union_inner->written ? union_inner->written(mnt, path) : 0;
}

static int u_open_decided(int mnt, const char *path, int flags)
{
    if (union_mount(mnt))
        return -1;      /* errno as it was: opens here are not remembered */
    return union_inner->open_decided ? union_inner->open_decided(mnt, path, flags) : -1;
}

struct backend_ops *union_over(struct backend_ops *be)
{
    static int done;
    if (!done) {
        done = 1;
        unions_init();
    }
    if (be == NULL || nunions == 0 || be == &over)
        return be;
    union_inner = be;
    pthread_atfork(NULL, NULL, fork_child);
    over = *be;
    over.getattr = u_getattr;
    over.readlink = u_readlink;
    over.access = u_access;
    over.open = u_open;
    over.create_open = u_create_open;
    over.opendir = union_opendir;
    over.readdir = union_readdir;
    over.releasedir = union_releasedir;
    over.stamp = u_stamp;
    over.written = u_written;
    over.open_decided = u_open_decided;
    return &over;
}
