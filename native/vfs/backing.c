/*
 * Backing trees: fuse-bpf's backing directories, in the preload. A class declares that a
 * directory of its tree (the root included) is backed by a lower directory, and which
 * operations under it it wants to see (ldpfuse_py.Backing, docs/backing.md). Every other
 * operation on a name under that directory is done here, in the calling process, with the
 * caller's own rights, on the lower directory: *at calls relative to an O_PATH fd of it that
 * the process holds, each path resolved by openat2 beneath it (crossing no symlink, else
 * with RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS: no "..", absolute symlink or /proc link
 * leads out of the lower directory; beneath()) and the last component never followed (the
 * core has followed what the call follows). No round trip, no Python.
 *
 * This is a method table over the backend's (backend.h), as SQLite's VFS shims are: each
 * method either does the operation on the lower tree or hands it to the backend below, which
 * calls the class. What a class sees goes to the class; so does anything the lower tree
 * cannot answer here without leaving it (a symlink among the directories that points out
 * of the tree: EXDEV from openat2), and the class answers as it would unbacked.
 *
 * Coherence: names under a backed mount are never kept in the attribute cache (attrcache.c
 * asks backing_uncached), their stamps are 0 (notify.c then polls them) and a passthrough
 * writer of one needs no entry: the kernel's own caches are the only ones, as natively.
 * What a process keeps is the directories it walked to (vfs/backing_dirs.c): a rmdir, the
 * rename of a directory and a directory's permission change made here tell the server
 * (dir_changed: W_MOVED) before they return, so that no process uses one from before.
 *
 * After-filters (Backing(after=...)): an operation the class asked to be told of after is
 * still done here; then the class is told (backend after: a round trip in the shared mode)
 * with its result: a getattr's attributes come back adjusted, a change's notice changes
 * nothing of what was done. Hidden names (Backing(hide=...)): a name that matches one of
 * the tree's patterns is left out of listings here, and any operation on a path through
 * one goes to the class, whose wrapper refuses it (ldpfuse_py/after.py): ENOENT, EACCES
 * for making one. docs/backing.md, "After the operation".
 *
 * The declaration comes from the launcher, which built the objects (shared mode):
 * LDPFUSE_BACKING = "MNT\x1fSEE\x1fDIR\x1fLOWER[\x1fAFTER\x1fHIDE]\x1e..." (SEE, AFTER:
 * the BK_* bits, decimal; HIDE: the name patterns, '/' between them).
 */
#include "../ldpfuse.h"
#include <linux/openat2.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/xattr.h>

#ifndef SYS_fchmodat2
#define SYS_fchmodat2 452
#endif
#define ASK_CLASS INT_MIN       /* a local method's answer: the backend below decides */

/* Without the guard (ldpfuse.h): the core calls these methods with no signal blocked on a
 * mount with trees (backing_guard_free), so that a program with a handler does not pay an
 * rt_sigprocmask pair around each open, create, unlink, rename, mkdir or rmdir the tree
 * serves. What they do here is safe with a handler that enters the mount on this thread at
 * any point, because nothing here can be met half-done by it:
 *  - no lock and no allocation: the kept directories (backing_dirs.c) and the names opened
 *    a moment ago (backing_regular.c) take none (a users count, a sequence count: a handler
 *    that lands on an entry being rewritten walks, or opens after a look, as any miss);
 *    tree_fd is one compare-and-swap; the table of changes is read without a lock and
 *    mapped under a guard of its own (backend/shared.c sh_below_stamp);
 *  - the fds given to the program are the lower files' own, with no entry in the fd table
 *    (vfs/file.c open_passthrough) and nothing in the attribute cache (backing_uncached);
 *  - every call below (the class: a method it sees, an after-filter, the server's W_MOVED
 *    posting of dir_changed) goes through CLASS, which takes the guard for it: the channel's
 *    lock, the GIL and the class's own are never held with signals open.
 * A handler's call between this thread's system call and what follows it (a rename of a
 * directory before its W_MOVED, an unlink before this process forgets the name's type)
 * sees what another thread of the process would see in that window: the kernel's tree as
 * it is now, through directories kept from before, as docs/backing.md says of threads. */
#define CLASS(call) ({ \
    guard_enter(); \
    __typeof__(inner->call) r_ = inner->call; \
    guard_leave(); \
    r_; })

struct tree {
    int mnt;
    unsigned see;               /* BK_* bits: operations the class answers */
    char *dir;                  /* "/" or "/a/b": the mount path it covers */
    size_t dirlen;              /* 0 for "/" */
    char *lower;
    int fd;                     /* O_PATH of lower; -1 until used, or after the program closed it */
    unsigned after;             /* BK_* bits: operations the class is told of after they are done */
    char **hide;                /* name patterns ('*', '?'), NULL-terminated; NULL: none */
};
static struct tree *trees;
static int ntrees;
static unsigned char *mount_has_tree;
static int no_openat2;
static unsigned any_after;      /* the after bits of every tree */
/* Who the trees serve: as the server (server/peers.c), the launcher's uid, any uid with
 * allow_other, root too with allow_root; another process of the command goes to the
 * backend, which refuses it with the reason in the log */
static uid_t owner;
static int allow_other, allow_root;
int ldp_backing_low_fd = INT_MAX;   /* the lowest fd number of a tree's: close/dup2 wrappers */
static struct backend_ops *inner;
static struct backend_ops over;

/* Who may be served here (the environment the launcher set): read by trees_init and by
 * vfs/union.c's unions_init, before either mount is used. */
void backing_served_init(void)
{
    const char *o = getenv("LDPFUSE_BACKING_OWNER");
    owner = o ? (uid_t)strtoul(o, NULL, 10) : 0;
    const char *a = getenv("LDPFUSE_ALLOW_OTHER");
    allow_other = a && strcmp(a, "1") == 0;
    a = getenv("LDPFUSE_ALLOW_ROOT");
    allow_root = a && strcmp(a, "1") == 0;
}

/* "a/b/c" -> {"a", "b", "c", NULL}; "" -> NULL */
static char **hide_patterns(const char *list)
{
    if (*list == '\0')
        return NULL;
    size_t n = 2;
    for (const char *p = list; *p; p++)
        n += *p == '/';
    char **v = calloc(n, sizeof *v), *copy = strdup(list), *save = NULL;
    if (v == NULL || copy == NULL)
        return NULL;
    size_t i = 0;
    for (char *w = strtok_r(copy, "/", &save); w; w = strtok_r(NULL, "/", &save))
        v[i++] = w;
    return v;
}

/* Does the name s (len bytes) match pattern p ('*': any run of bytes, '?': one byte, the
 * rest as is; ldpfuse_py/after.py matches the same way)? */
static int pattern_match(const char *p, const char *s, size_t len)
{
    const char *star = NULL;
    size_t i = 0, back = 0;
    while (i < len) {
        if (*p == '*') {
            star = ++p;
            back = i;
        } else if (*p && (*p == '?' || *p == s[i])) {
            p++;
            i++;
        } else if (star) {
            p = star;
            i = ++back;
        } else {
            return 0;
        }
    }
    while (*p == '*')
        p++;
    return *p == '\0';
}

static int name_hidden(const struct tree *t, const char *name, size_t len)
{
    if (name[0] == '.' && (len == 1 || (len == 2 && name[1] == '.')))
        return 0;       /* "." and "..": never a name of the tree's */
    for (char **p = t->hide; *p; p++)
        if (pattern_match(*p, name, len))
            return 1;
    return 0;
}

/* rel (relative to the tree's lower directory) goes through a hidden name */
static int path_hidden(const struct tree *t, const char *rel)
{
    while (*rel) {
        const char *end = strchrnul(rel, '/');
        if (end > rel && name_hidden(t, rel, (size_t)(end - rel)))
            return 1;
        rel = *end ? end + 1 : end;
    }
    return 0;
}

static void trees_init(void)
{
    backing_served_init();
    const char *env = getenv("LDPFUSE_BACKING");
    if (env == NULL || *env == '\0' || ldp_nmounts == 0)
        return;
    mount_has_tree = calloc((size_t)ldp_nmounts, 1);
    int cap = 1;
    for (const char *p = env; *p; p++)
        cap += *p == '\x1e';
    trees = calloc((size_t)cap, sizeof *trees);
    if (trees == NULL || mount_has_tree == NULL)
        return;
    char *copy = strdup(env), *save = NULL;
    for (char *rec = strtok_r(copy, "\x1e", &save); rec; rec = strtok_r(NULL, "\x1e", &save)) {
        char *f[6] = { 0 };
        int n = 0;
        for (char *p = rec; n < 6; n++) {
            f[n] = p;
            p = strchr(p, '\x1f');
            if (p == NULL) {
                n++;
                break;
            }
            *p++ = '\0';
        }
        if (n != 4 && n != 6)
            continue;
        int mnt = atoi(f[0]);
        if (mnt < 0 || mnt >= ldp_nmounts || f[2][0] != '/' || f[3][0] != '/')
            continue;
        struct tree *t = &trees[ntrees++];
        t->mnt = mnt;
        t->see = (unsigned)strtoul(f[1], NULL, 10);
        t->dir = strdup(f[2]);
        t->dirlen = strcmp(f[2], "/") == 0 ? 0 : strlen(f[2]);
        t->lower = strdup(f[3]);
        t->fd = -1;
        if (n == 6) {
            t->after = (unsigned)strtoul(f[4], NULL, 10);
            any_after |= t->after;
            t->hide = hide_patterns(f[5]);
        }
        mount_has_tree[mnt] = 1;
    }
    free(copy);
}

/* Asked again only when this process changes its credentials (interpose/creds.c): a
 * geteuid() per call was a quarter of a backed stat's system calls. A signal handler may
 * ask on this thread between any two instructions: served is stored before served_gen
 * says it is good (the compiler put the two plain stores the other way round, and a
 * handler in between on the thread's first call found "not served" and went to the
 * class), and served_gen's store is the last one. */
static TLS unsigned served_gen;
static TLS int served;

int backing_caller_served(void)
{
    if (allow_other)
        return 1;
    unsigned gen = __atomic_load_n(&ldp_creds_gen, __ATOMIC_ACQUIRE);
    if (LIKELY(__atomic_load_n(&served_gen, __ATOMIC_RELAXED) == gen))
        return __atomic_load_n(&served, __ATOMIC_RELAXED);
    uid_t uid = geteuid();
    int now = uid == owner || (uid == 0 && allow_root);
    __atomic_store_n(&served, now, __ATOMIC_RELAXED);
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    __atomic_store_n(&served_gen, gen, __ATOMIC_RELAXED);
    return now;
}

/* The core may call the methods for mnt without the guard: they take it themselves for
 * whatever reaches the class (CLASS above). A union is not: its methods are union.c's. */
int backing_guard_free(int mnt)
{
    return UNLIKELY(mount_has_tree != NULL) && mnt >= 0 && mnt < ldp_nmounts && mount_has_tree[mnt] &&
           !union_mount(mnt);
}

int backing_uncached(int mnt)
{
    return (UNLIKELY(mount_has_tree != NULL) && mnt >= 0 && mnt < ldp_nmounts && mount_has_tree[mnt]) ||
           union_mount(mnt);    /* vfs/union.c: the same, for an overlay's merged view */
}

/* The program closed or replaced fds first..last: a tree whose fd was among them opens its
 * lower directory again at its next use (never through a number that is now another file). */
void backing_fds_lost(unsigned first, unsigned last)
{
    int low = INT_MAX;
    for (int i = 0; i < ntrees; i++) {
        int fd = __atomic_load_n(&trees[i].fd, __ATOMIC_ACQUIRE);
        if (fd >= 0 && (unsigned)fd >= first && (unsigned)fd <= last)
            __atomic_store_n(&trees[i].fd, -1, __ATOMIC_RELEASE);
        else if (fd >= 0 && fd < low)
            low = fd;
    }
    int kept = backing_dirs_lost(first, last);
    int layers = union_fds_lost(first, last);      /* vfs/union.c's */
    kept = layers < kept ? layers : kept;
    ldp_backing_low_fd = kept < low ? kept : low;
}

static int tree_fd(struct tree *t)
{
    int fd = __atomic_load_n(&t->fd, __ATOMIC_ACQUIRE);
    if (LIKELY(fd >= 0))
        return fd;
    fd = fs_fd(REAL(open)(t->lower, O_PATH | O_DIRECTORY | O_CLOEXEC));
    if (fd < 0)
        return -errno;
    int none = -1;
    if (!__atomic_compare_exchange_n(&t->fd, &none, fd, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        REAL(close)(fd);        /* another thread got there first */
        return none;
    }
    if (fd < ldp_backing_low_fd)
        ldp_backing_low_fd = fd;
    return fd;
}

/* The tree path on mnt is under, for a caller the trees serve, and path relative to its
 * lower directory in *rel ("." for the tree's directory itself). */
static struct tree *tree_at(int mnt, const char *path, const char **rel)
{
    if (no_openat2)
        return NULL;
    struct tree *best = NULL;
    for (int i = 0; i < ntrees; i++) {
        struct tree *t = &trees[i];
        if (t->mnt != mnt || (best && best->dirlen >= t->dirlen))
            continue;
        if (t->dirlen && (strncmp(path, t->dir, t->dirlen) != 0 ||
                          (path[t->dirlen] != '/' && path[t->dirlen] != '\0')))
            continue;
        best = t;
    }
    if (best == NULL || !backing_caller_served())
        return NULL;
    const char *r = path + best->dirlen;
    while (*r == '/')
        r++;
    if (UNLIKELY(best->hide != NULL) && path_hidden(best, r))
        return NULL;    /* the class's wrapper refuses it (ldpfuse_py/after.py) */
    *rel = *r ? r : ".";
    return best;
}

/* The same for an operation the tree serves without the class (its see has none of bits). */
static struct tree *tree_for(int mnt, const char *path, unsigned bits, const char **rel)
{
    struct tree *t = tree_at(mnt, path, rel);
    return t && !(t->see & bits) ? t : NULL;
}

/* Open path beneath dfd: an fd, -errno or ASK_CLASS (past the tree: EXDEV). A relative path
 * with no ".." (every mount path here is clean: vfs/mount.c) is first walked crossing no
 * symlink (RESOLVE_NO_SYMLINKS): it cannot leave dfd then, and the kernel skips
 * RESOLVE_BENEATH's hold of dfd as the walk's root, 55 ns of a 0.8 us open (bench/NOTES.md).
 * A symlink on the way (ELOOP, the last component's too) is walked again beneath dfd, where
 * one that stays in the tree is followed and one that leads out is EXDEV. */
static long beneath(int dfd, const char *path, int flags, mode_t mode)
{
    if (strnlen(path, PATH_MAX) >= PATH_MAX)
        return ASK_CLASS;   /* past the kernel's limit on a path string: the class walks it */
    struct open_how how = {
        .flags = (uint64_t)(unsigned)flags,
        .mode = (flags & O_CREAT) || (flags & __O_TMPFILE) == __O_TMPFILE ? (mode & 07777) : 0,
        .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    if (path[0] != '/' && !path_has_dotdot(path)) {
        long fd = REAL(syscall)(SYS_openat2, dfd, path, &how, sizeof how);
        if (fd >= 0)
            return fd;
        if (errno != ELOOP && errno != ENOSYS)
            return -errno;
    }
    how.resolve = RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS;
    for (int tries = 0;; tries++) {
        long fd = REAL(syscall)(SYS_openat2, dfd, path, &how, sizeof how);
        if (fd >= 0)
            return fd;
        if (errno == EAGAIN && tries < 8)
            continue;       /* a rename raced the walk's ".." check */
        if (errno == ENOSYS) {
            no_openat2 = 1;     /* a kernel before 5.6: the class does everything */
            return ASK_CLASS;
        }
        return errno == EXDEV ? ASK_CLASS : -errno;
    }
}

#define EMPTY(last) ((last)[0] ? 0 : AT_EMPTY_PATH)

static int neg(long r)
{
    return r < 0 ? -errno : (int)r;
}

/* The directory that holds rel's last component, and that component: *dfd is the tree's
 * own fd, a kept directory (vfs/backing_dirs.c) or one opened for the call: put_parent
 * gives it back. rel "." (the tree's directory): *last "" for calls that take
 * AT_EMPTY_PATH, or ASK_CLASS when no_empty. */
static int get_parent(struct tree *t, const char *rel, int no_empty, int *dfd, const char **last, int *slot)
{
    *slot = -1;
    int tfd = tree_fd(t);
    if (tfd < 0)
        return tfd;
    if (rel[0] == '.' && rel[1] == '\0') {
        if (no_empty)
            return ASK_CLASS;
        *dfd = tfd;
        *last = "";
        return 0;
    }
    const char *slash = strrchr(rel, '/');
    if (slash == NULL) {
        *dfd = tfd;
        *last = rel;
        return 0;
    }
    char dir[PATH_MAX];
    size_t dl = (size_t)(slash - rel);
    if (dl >= sizeof dir)
        return ASK_CLASS;
    memcpy(dir, rel, dl);
    dir[dl] = '\0';
    long fd = -ELOOP;
    char mdir[256];         /* its mount path, by which it is kept */
    if (t->dirlen + 1 + dl < sizeof mdir) {
        memcpy(mdir, t->dir, t->dirlen);
        mdir[t->dirlen] = '/';
        memcpy(mdir + t->dirlen + 1, dir, dl + 1);
        fd = backing_dir_get(t->mnt, mdir, tfd, dir, slot);
    }
    if (fd != -ENOENT && fd != -ENOTDIR && fd != -EACCES && fd < 0) {
        /* a symlink on the way (or a path too long to keep): walked beneath the tree
         * for this call alone, as it always was */
        *slot = -1;
        fd = beneath(tfd, dir, O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
    }
    if (fd < 0)
        return (int)fd;
    *dfd = (int)fd;
    *last = slash + 1;
    return 0;
}

static void put_parent(struct tree *t, int dfd, int slot)
{
    if (dfd != __atomic_load_n(&t->fd, __ATOMIC_RELAXED) || slot >= 0)
        backing_dir_put(slot, dfd);
}

/* Open rel in t beneath its lower directory: an fd, -errno or ASK_CLASS. One openat2 of the
 * whole path, as natively (every caller's flags have O_NOFOLLOW: the last component is not
 * followed; a symlink among the directories is, beneath the tree, as get_parent's walk
 * would): no kept directory is needed, and a miss of the table (vfs/backing_dirs.c) would
 * have cost a walk, a dup3 and a close more (filebench's creates over 1,000 directories). */
static long open_in(struct tree *t, const char *rel, int flags, mode_t mode)
{
    int tfd = tree_fd(t);
    return tfd < 0 ? tfd : beneath(tfd, rel, flags, mode);
}

/* A directory changed here that processes may keep (vfs/backing_dirs.c): all of them
 * forget it before the call returns. */
static void dir_changed(int mnt, const char *path, const char *path2)
{
    struct timespec ttl;
    backing_regular_forget_all();
    if (inner->moved && attrcache_timeout(&ttl))
        (void)CLASS(moved(mnt, path, path2));
}

/* The class asked to be told of op (a BK_* bit) after it: it is, with the result (0 or
 * -errno). What it answers changes nothing: the operation is done (docs/backing.md). */
static void told(struct tree *t, int mnt, unsigned op, const char *path, const char *path2, int r)
{
    if (inner->after)
        (void)CLASS(after(mnt, op, path, path2, r, NULL));
}
#define TOLD(t, op, mnt, path, path2, r) \
    do { if (UNLIKELY((t)->after & (op))) told(t, mnt, op, path, path2, r); } while (0)

/* A name changed here: this process's memory of regular files forgets it. */
#define CHANGED(mnt, path, r) do { if ((r) == 0) backing_regular_forget(mnt, path); } while (0)

static int is_dir(int dfd, const char *last)
{
    struct stat st;
    return REAL(fstatat)(dfd, last, &st, AT_SYMLINK_NOFOLLOW | EMPTY(last)) == 0 && S_ISDIR(st.st_mode);
}

/* One *at call on rel's parent and last component: `call` sees dfd and last, and its
 * result (libc convention) becomes the method's; ASK_CLASS goes below. */
#define AT_PARENT(t, rel, no_empty, call) ({ \
    int dfd_, slot_; \
    const char *last_; \
    int pr_ = get_parent(t, rel, no_empty, &dfd_, &last_, &slot_); \
    if (pr_ == 0) { \
        const int dfd = dfd_; \
        const char *last = last_; \
        pr_ = neg(call); \
        put_parent(t, dfd_, slot_); \
    } \
    pr_; })

/* The path of this thread's last name operation (unlink, rmdir, mkdir, mknod, symlink) that
 * the tree did itself and that found a directory missing or not one (ENOENT, ENOTDIR),
 * else NULL. Its walk beneath the lower directory followed the symlinks among the
 * directories, so that miss is final: vfs/names.c's retry_in_real_parent does not resolve
 * the directories and ask again, which was a newfstatat per directory and a malloc more
 * than native's one call for each `rm -f` of a missing name (vfs/attr.c's WALKED_BENEATH
 * says the same for a stat). Known
 * by the address of the caller's path, set during the caller's call (names.c clears it
 * first): a signal handler's own operation in between leaves its own address or NULL, and
 * the caller then resolves, as before. */
TLS const char *ldp_backing_miss;
#define MISSED(path, r) (ldp_backing_miss = ((r) == -ENOENT || (r) == -ENOTDIR) ? (path) : NULL)

/* ---- the methods */

/* A stat the tree serves, done here without the guard (vfs/attr.c): signals are left as the
 * program has them, no rt_sigprocmask pair around one fstatat (a program with a handler
 * paid two more system calls per stat: Python, filebench). 1 and *r (0 or -errno) when it
 * was done; 0 when it goes to b_getattr, under the guard. Safe with a handler that touches
 * the mount on this thread at any point of it: it takes no lock (the kept directories are
 * lock-free, tree_fd is one compare-and-swap, the table of changes is read without a lock
 * and mapped under a guard of its own) and calls nothing that could re-enter the backend.
 * b_getattr does the same for the calls that come through the backend: keep them alike
 * (what the class is told of a getattr would have to be told here, or not done here). */
int backing_getattr_here(int mnt, const char *path, struct stat *st, int *r)
{
    const char *rel;
    if (LIKELY(mount_has_tree == NULL) || !mount_has_tree[mnt] || union_mount(mnt))
        return 0;
    struct tree *t = tree_for(mnt, path, BK_GETATTR, &rel);
    if (t && UNLIKELY(t->after & BK_GETATTR))
        return 0;       /* the class adjusts the answer: b_getattr, under the guard */
    int v = t ? AT_PARENT(t, rel, 0, REAL(fstatat)(dfd, last, st, AT_SYMLINK_NOFOLLOW | EMPTY(last))) : ASK_CLASS;
    if (v == ASK_CLASS)
        return 0;
    *r = v;
    return 1;
}

/* Does a tree look path up (b_create_open's own lookup: its walk beneath the lower
 * directory follows the symlinks among the directories, so a missing name is final)? */
int backing_looks_up(int mnt, const char *path)
{
    const char *rel;
    if (LIKELY(mount_has_tree == NULL) || !mount_has_tree[mnt])
        return 0;
    struct tree *t = tree_at(mnt, path, &rel);
    return t && !(t->see & BK_GETATTR);
}

static int b_getattr(int mnt, const char *path, const uint64_t *fh, struct stat *st)
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, BK_GETATTR, &rel);
    int r = t ? AT_PARENT(t, rel, 0, REAL(fstatat)(dfd, last, st, AT_SYMLINK_NOFOLLOW | EMPTY(last)))
              : ASK_CLASS;
    if (r == 0 && UNLIKELY(t->after & BK_GETATTR) && inner->after)
        r = CLASS(after(mnt, BK_GETATTR, path, NULL, 0, st));     /* attributes adjusted */
    return r != ASK_CLASS ? r : CLASS(getattr(mnt, path, fh, st));
}

static int b_readlink(int mnt, const char *path, char *buf, size_t size)
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, BK_READLINK, &rel);
    int r = t ? AT_PARENT(t, rel, 1, REAL(readlinkat)(dfd, last, buf, size)) : ASK_CLASS;
    return r != ASK_CLASS ? r : CLASS(readlink(mnt, path, buf, size));
}

static int b_mknod(int mnt, const char *path, mode_t mode, dev_t dev)
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, BK_MKNOD, &rel);
    int r = t ? AT_PARENT(t, rel, 1, REAL(mknodat)(dfd, last, mode, dev)) : ASK_CLASS;
    MISSED(path, r == ASK_CLASS ? 0 : r);
    if (r == ASK_CLASS)
        return CLASS(mknod(mnt, path, mode, dev));
    CHANGED(mnt, path, r);
    TOLD(t, BK_MKNOD, mnt, path, NULL, r);
    return r;
}

static int b_mkdir(int mnt, const char *path, mode_t mode)
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, BK_MKDIR, &rel);
    int r = t ? AT_PARENT(t, rel, 1, REAL(mkdirat)(dfd, last, mode & 07777)) : ASK_CLASS;
    MISSED(path, r == ASK_CLASS ? 0 : r);
    if (r == ASK_CLASS)
        return CLASS(mkdir(mnt, path, mode));
    CHANGED(mnt, path, r);
    TOLD(t, BK_MKDIR, mnt, path, NULL, r);
    return r;
}

static int b_unlink(int mnt, const char *path)
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, BK_UNLINK, &rel);
    int r = t ? AT_PARENT(t, rel, 1, REAL(unlinkat)(dfd, last, 0)) : ASK_CLASS;
    MISSED(path, r == ASK_CLASS ? 0 : r);
    if (r == ASK_CLASS)
        return CLASS(unlink(mnt, path));
    CHANGED(mnt, path, r);
    TOLD(t, BK_UNLINK, mnt, path, NULL, r);
    return r;
}

static int b_rmdir(int mnt, const char *path)
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, BK_RMDIR, &rel);
    int r = t ? AT_PARENT(t, rel, 1, REAL(unlinkat)(dfd, last, AT_REMOVEDIR)) : ASK_CLASS;
    if (r == 0)
        dir_changed(mnt, path, path);
    MISSED(path, r == ASK_CLASS ? 0 : r);
    if (r == ASK_CLASS)
        return CLASS(rmdir(mnt, path));
    TOLD(t, BK_RMDIR, mnt, path, NULL, r);
    return r;
}

static int b_symlink(int mnt, const char *linkpath, const char *target)
{
    const char *rel;
    struct tree *t = tree_for(mnt, linkpath, BK_SYMLINK, &rel);
    int r = t ? AT_PARENT(t, rel, 1, REAL(symlinkat)(target, dfd, last)) : ASK_CLASS;
    MISSED(linkpath, r == ASK_CLASS ? 0 : r);
    if (r == ASK_CLASS)
        return CLASS(symlink(mnt, linkpath, target));
    CHANGED(mnt, linkpath, r);
    TOLD(t, BK_SYMLINK, mnt, linkpath, target, r);
    return r;
}

/* Two names of one tree: both parents, or ASK_CLASS. */
static int two_names(int mnt, const char *a, const char *b, unsigned bit, int flags, int rename)
{
    const char *ra, *rb;
    struct tree *t = tree_for(mnt, a, bit, &ra);
    if (t == NULL || tree_for(mnt, b, bit, &rb) != t)
        return ASK_CLASS;
    int da, db, sa, sb;
    const char *la, *lb;
    int r = get_parent(t, ra, 1, &da, &la, &sa);
    if (r != 0)
        return r;
    r = get_parent(t, rb, 1, &db, &lb, &sb);
    if (r == 0) {
        r = neg(rename ? REAL(renameat)(da, la, db, lb) : REAL(linkat)(da, la, db, lb, flags));
        if (r == 0 && rename && is_dir(db, lb))
            dir_changed(mnt, a, b);     /* a file's rename moves no directory */
        CHANGED(mnt, a, r);
        CHANGED(mnt, b, r);
        put_parent(t, db, sb);
    }
    put_parent(t, da, sa);
    return r;
}

static int b_rename(int mnt, const char *from, const char *to)
{
    int r = two_names(mnt, from, to, BK_RENAME, 0, 1);
    if (r == ASK_CLASS)
        return CLASS(rename(mnt, from, to));
    const char *rel;
    struct tree *t = UNLIKELY(any_after & BK_RENAME) ? tree_at(mnt, from, &rel) : NULL;
    if (t)
        TOLD(t, BK_RENAME, mnt, from, to, r);
    return r;
}

static int b_link(int mnt, const char *newpath, const char *oldpath)
{
    int r = two_names(mnt, oldpath, newpath, BK_LINK, 0, 0);
    if (r == ASK_CLASS)
        return CLASS(link(mnt, newpath, oldpath));
    const char *rel;
    struct tree *t = UNLIKELY(any_after & BK_LINK) ? tree_at(mnt, newpath, &rel) : NULL;
    if (t)
        TOLD(t, BK_LINK, mnt, newpath, oldpath, r);     /* fusepy's link(target, source) */
    return r;
}

static long fchmodat2(int dfd, const char *name, mode_t mode)
{
    long r = REAL(syscall)(SYS_fchmodat2, dfd, name, mode, AT_SYMLINK_NOFOLLOW | EMPTY(name));
    if (r < 0 && errno == ENOSYS)
        return ASK_CLASS;   /* before Linux 6.6: no chmod that cannot follow a link */
    return r;
}

static int b_chmod(int mnt, const char *path, mode_t mode)
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, BK_CHMOD, &rel);
    int r = ASK_CLASS;
    if (t) {
        int dfd, slot;
        const char *last;
        r = get_parent(t, rel, 0, &dfd, &last, &slot);
        if (r == 0) {
            long c = fchmodat2(dfd, last, mode & 07777);
            r = c == ASK_CLASS ? ASK_CLASS : neg(c);
            if (r == 0 && (S_ISDIR(mode) || ((mode & S_IFMT) == 0 && is_dir(dfd, last))))
                dir_changed(mnt, path, path);   /* who may search it */
            put_parent(t, dfd, slot);
        }
    }
    if (r == ASK_CLASS)
        return CLASS(chmod(mnt, path, mode));
    TOLD(t, BK_CHMOD, mnt, path, NULL, r);
    return r;
}

static int b_chown(int mnt, const char *path, uid_t uid, gid_t gid)
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, BK_CHOWN, &rel);
    int r = t ? AT_PARENT(t, rel, 0, REAL(fchownat)(dfd, last, uid, gid, AT_SYMLINK_NOFOLLOW | EMPTY(last)) ?:
                                     (is_dir(dfd, last) ? 1 : 0))
              : ASK_CLASS;
    if (r == 1) {
        dir_changed(mnt, path, path);       /* who may search it */
        r = 0;
    }
    if (r == ASK_CLASS)
        return CLASS(chown(mnt, path, uid, gid));
    TOLD(t, BK_CHOWN, mnt, path, NULL, r);
    return r;
}

static int truncate_here(struct tree *t, const char *rel, off_t len)
{
    long fd = open_in(t, rel, O_WRONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC, 0);
    if (fd < 0)
        return (int)fd;
    int r = neg(REAL(ftruncate)((int)fd, len));
    REAL(close)((int)fd);
    return r;
}

static int b_truncate(int mnt, const char *path, off_t len, const uint64_t *fh)
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, BK_TRUNCATE, &rel);
    int r = t ? truncate_here(t, rel, len) : ASK_CLASS;
    if (r == ASK_CLASS)
        return CLASS(truncate(mnt, path, len, fh));
    TOLD(t, BK_TRUNCATE, mnt, path, NULL, r);
    return r;
}

static int b_truncate_uncached(int mnt, const char *path, off_t len)
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, BK_TRUNCATE, &rel);
    int r = t ? truncate_here(t, rel, len) : ASK_CLASS;
    if (r != ASK_CLASS) {
        TOLD(t, BK_TRUNCATE, mnt, path, NULL, r);
        return r;
    }
    return inner->truncate_uncached ? CLASS(truncate_uncached(mnt, path, len)) : CLASS(truncate(mnt, path, len, NULL));
}

/* Which of the class's open bits an open with these flags asks about. */
static unsigned open_bits(int flags)
{
    unsigned bits = BK_OPEN;
    if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC))
        bits |= BK_OPEN_WRITE;
    return bits;
}

/* The open bit the class is told of an open with these flags by (after), 0: none. */
static unsigned open_told(const struct tree *t, int flags)
{
    unsigned bits = open_bits(flags) & t->after;
    return bits & BK_OPEN_WRITE ? BK_OPEN_WRITE : bits;
}

static int open_result_fd(long fd, struct open_result *res)
{
    if (fd < 0)
        return (int)fd;
    res->passthrough_fd = (int)fd;
    res->fd_flags_set = 1;      /* opened with the caller's O_CLOEXEC, at its lowest free number */
    res->fh = 0;
    res->open_flags = 0;
    return 0;
}

static int b_open(int mnt, const char *path, int flags, struct open_result *res)
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, open_bits(flags), &rel);
    int r = t ? open_result_fd(open_in(t, rel, flags | O_NOFOLLOW, 0), res) : ASK_CLASS;
    if (r == ASK_CLASS)
        return CLASS(open(mnt, path, flags, res));
    TOLD(t, open_told(t, flags), mnt, path, NULL, r);
    return r;
}

static int b_create(int mnt, const char *path, mode_t mode, int flags, struct open_result *res)
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, BK_CREATE | open_bits(flags), &rel);
    int r = t ? open_result_fd(open_in(t, rel, flags | O_CREAT | O_NOFOLLOW, mode), res) : ASK_CLASS;
    if (r == ASK_CLASS)
        return CLASS(create(mnt, path, mode, flags, res));
    TOLD(t, BK_CREATE, mnt, path, NULL, r);
    return r;
}

static int b_open_special(int mnt, const char *path, const struct stat *st, int flags)
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, open_bits(flags), &rel);
    long r = t ? open_in(t, rel, flags | O_NOFOLLOW, 0) : ASK_CLASS;
    if (r != ASK_CLASS)
        return (int)r;
    return inner->open_special(mnt, path, st, flags);   /* no guard, as the core calls it: a FIFO's
                                                          * open waits, and a signal must end it */
}

/* An existing name opened where it is: CO_OPENED (a regular file; opened here, or by the
 * class if it sees such opens) or CO_ASK (anything else, for the core to open as it opens
 * such things); CO_MISSING; CO_EXISTS for O_CREAT|O_EXCL. Its type is looked at first:
 * opening a FIFO or a device to find out what it is would be seen (a FIFO's writer let
 * through by a reader that goes away at once). That look and the open are made on the
 * name's directory, found beneath the tree (kept: vfs/backing_dirs.c); what the look says
 * is never an answer (the core keeps no attributes of a backed mount). A name this process
 * opened as a regular file a moment ago (vfs/backing_regular.c) is opened without the
 * look, by one openat2 of its whole path beneath the tree. */
static int open_existing(int mnt, const char *path, struct tree *t, const char *rel, int flags,
                         struct open_result *res, struct stat *st, int *outcome)
{
    int excl = (flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL);
    if (!excl && !(rel[0] == '.' && rel[1] == '\0') && !(t->see & open_bits(flags)) &&
        backing_regular_known(mnt, path)) {
        /* a regular file a moment ago (vfs/backing_regular.c): opened without a look, and
         * without its directory: one openat2 of the whole path beneath the tree, as the
         * create's (no kept directory to find, no stamp of it to take) */
        long fd = open_in(t, rel, (flags & ~(O_CREAT | O_EXCL)) | O_NOFOLLOW | O_NOCTTY, 0);
        if (fd == ASK_CLASS || fd == -ENOENT || fd == -ENOTDIR || fd == -ELOOP || fd == -EISDIR) {
            backing_regular_forget(mnt, path);
            *outcome = CO_ASK;  /* not what it was: the core looks again */
            return 0;
        }
        memset(st, 0, sizeof *st);
        st->st_mode = S_IFREG;  /* never an answer: the core keeps none of a tree's */
        *outcome = CO_OPENED;
        int r = open_result_fd(fd, res);
        TOLD(t, open_told(t, flags), mnt, path, NULL, r);
        return r;
    }
    int dfd, slot;
    const char *last;
    int r = get_parent(t, rel, 0, &dfd, &last, &slot);
    if (r == ASK_CLASS)
        return ASK_CLASS;       /* a symlink on the way leads out: the class's */
    if (r < 0) {
        *outcome = r == -ENOENT ? CO_MISSING : CO_ASK;
        return r == -ENOENT ? r : 0;
    }
    if (REAL(fstatat)(dfd, last, st, AT_SYMLINK_NOFOLLOW | AT_NO_AUTOMOUNT | EMPTY(last)) < 0) {
        r = errno == ENOENT ? -ENOENT : 0;
        *outcome = r ? CO_MISSING : CO_ASK;
    } else if (excl) {
        *outcome = CO_EXISTS;   /* the core answers EEXIST */
    } else if (!S_ISREG(st->st_mode)) {
        *outcome = CO_ASK;      /* a symlink, a directory, a FIFO...: the core's */
    } else if (t->see & open_bits(flags)) {
        *outcome = CO_OPENED;
        r = CLASS(open(mnt, path, flags & ~(O_CREAT | O_EXCL), res));
    } else {
        long fd = beneath(dfd, last[0] ? last : ".", (flags & ~(O_CREAT | O_EXCL)) | O_NOFOLLOW, 0);
        if (fd == ASK_CLASS || fd == -ENOENT || fd == -ELOOP) {
            *outcome = CO_ASK;  /* changed since: the core looks again */
        } else {
            if (fd >= 0 && last[0])
                backing_regular_seen(mnt, path);
            *outcome = CO_OPENED;
            r = open_result_fd(fd, res);
            TOLD(t, open_told(t, flags), mnt, path, NULL, r);
        }
    }
    put_parent(t, dfd, slot);
    return r;
}

/* open() under a tree in one call: a create here (O_CREAT|O_EXCL added, so that a name
 * that exists is opened as one: open_existing), or the class's create when it sees them
 * (after a lookup here: the class is not asked for getattr). A class that sees getattr
 * answers the whole of it. */
static int b_create_open(int mnt, const char *path, mode_t mode, int flags, int parent_is_dir,
                         struct open_result *res, struct stat *st, int *outcome)
{
    const char *rel;
    struct tree *t = tree_at(mnt, path, &rel);
    *outcome = CO_ASK;
    if (t && !(t->see & BK_GETATTR)) {
        int create = (flags & O_CREAT) != 0;
        /* an O_CREAT open of a file this process opened a moment ago: opened as one that
         * exists (vfs/backing_regular.c), not first tried with O_EXCL */
        int known = create && !(flags & O_EXCL) && backing_regular_known(mnt, path);
        if (create && !known && !(t->see & (BK_CREATE | open_bits(flags)))) {
            long fd = open_in(t, rel, flags | O_EXCL | O_NOFOLLOW, mode);
            if (fd >= 0) {
                *outcome = CO_CREATED;
                TOLD(t, BK_CREATE, mnt, path, NULL, 0);
                return open_result_fd(fd, res);
            }
            if (fd == -ENOENT) {
                *outcome = CO_MISSING;
                return (int)fd;
            }
            if (fd == -ELOOP || fd == -EISDIR)
                return 0;       /* a symlink or a directory there: the core looks it up */
            if (fd != -EEXIST && fd != ASK_CLASS) {
                *outcome = CO_CREATED;
                TOLD(t, BK_CREATE, mnt, path, NULL, (int)fd);
                return (int)fd;
            }
            create = fd == -EEXIST ? 0 : create;
        }
        int r = open_existing(mnt, path, t, rel, flags, res, st, outcome);
        if (r != ASK_CLASS && *outcome == CO_MISSING && known) {
            *outcome = CO_ASK;  /* gone since: the core looks it up and creates it */
            return 0;
        }
        if (r != ASK_CLASS && *outcome == CO_MISSING && create) {
            *outcome = CO_CREATED;      /* the class creates it (it sees create) */
            return CLASS(create(mnt, path, mode, flags, res));
        }
        if (r != ASK_CLASS)
            return r;
        *outcome = CO_ASK;
    }
    if (inner->create_open == NULL)
        return 0;
    return CLASS(create_open(mnt, path, mode, flags, parent_is_dir, res, st, outcome));
}

/* open() of a name under a tree, before anything of the core's (vfs/file.c
 * vfs_open_in_place), in one system call as natively, with nothing around it (no lookup's
 * stamps, no backend call, no stat to fill: a third of the preload's own CPU in a backed
 * open, bench/NOTES.md):
 *  - for writing (O_EXCL aside): the program's own open, O_CREAT and all. What open_existing
 *    looks at first cannot differ then: a directory is EISDIR, a symlink ELOOP (both sent
 *    to the core, which answers as before), and a FIFO or a device is opened with the
 *    program's flags as the core's would be (b_open_special);
 *  - for reading: a name this process opened as a regular file a moment ago
 *    (open_existing's first case; another could be a directory, whose fd is the core's);
 *  - O_EXCL, or O_CREAT for reading: b_create_open's create, O_EXCL.
 * Returns the fd; -1 with errno, the open's own answer; or -2 for anything else (a name not
 * known, a miss, a symlink, a class that sees or is told of these opens, a union): the
 * core's way, which meets the same answers. */
int backing_open_here(const struct vpath *vp, int flags, mode_t mode)
{
    if (vp->trailing_slash || (flags & (O_PATH | O_DIRECTORY | __O_TMPFILE)) || !backing_guard_free(vp->mnt))
        return -2;
    const char *rel;
    struct tree *t = tree_at(vp->mnt, vp->path, &rel);
    unsigned bits = open_bits(flags) | ((flags & O_CREAT) ? BK_CREATE : 0);
    if (t == NULL || (t->see & (BK_GETATTR | bits)) || (t->after & bits) || (rel[0] == '.' && rel[1] == '\0'))
        return -2;
    mode_t made = (flags & O_CREAT) ? mode & 07777 & ~ldp_umask : 0;
    int known = 0;
    long fd;
    if ((flags & O_ACCMODE) != O_RDONLY && !(flags & O_EXCL))
        fd = open_in(t, rel, flags | O_NOFOLLOW, made);
    else if (!(flags & O_EXCL) && (known = backing_regular_known(vp->mnt, vp->path)))
        fd = open_in(t, rel, (flags & ~O_CREAT) | O_NOFOLLOW | O_NOCTTY, 0);
    else if (flags & O_CREAT)
        fd = open_in(t, rel, flags | O_EXCL | O_NOFOLLOW, made);
    else
        return -2;
    if (fd >= 0)
        return (int)fd;
    if (fd == ASK_CLASS || fd == -ENOENT || fd == -ENOTDIR || fd == -ELOOP || fd == -EISDIR ||
        fd == -EEXIST || fd == -ENAMETOOLONG) {
        if (known)
            backing_regular_forget(vp->mnt, vp->path);     /* not what it was: looked at again */
        return -2;
    }
    errno = (int)-fd;   /* the open's own answer (EACCES, EINTR from a FIFO's wait...): the
                         * core's open would meet it again, or wait again */
    return -1;
}

static int b_open_decided(int mnt, const char *path, int flags)
{
    if (backing_uncached(mnt))
        return -1;      /* errno as it was: the opens under a tree are not remembered */
    return inner->open_decided ? inner->open_decided(mnt, path, flags) : -1;
}

static int statfs_here(struct tree *t, const char *rel, struct statvfs *sv)
{
    long fd = open_in(t, rel, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0)
        return (int)fd;
    int r = neg(REAL(fstatvfs)((int)fd, sv));
    REAL(close)((int)fd);
    return r;
}

static int b_statfs(int mnt, const char *path, struct statvfs *sv)
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, BK_STATFS, &rel);
    int r = t ? statfs_here(t, rel, sv) : ASK_CLASS;
    return r != ASK_CLASS ? r : CLASS(statfs(mnt, path, sv));
}

static int b_opendir(int mnt, const char *path, uint64_t *fh)
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, BK_READDIR, &rel);
    long fd = t ? open_in(t, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0) : ASK_CLASS;
    if (fd == ASK_CLASS)
        return CLASS(opendir(mnt, path, fh));
    if (fd < 0)
        return (int)fd;
    REAL(close)((int)fd);      /* the permission check of opendir(); readdir opens again */
    *fh = 0;
    return 0;
}

static int b_readdir(int mnt, const char *path, uint64_t fh, struct dirlist *out)
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, BK_READDIR, &rel);
    long fd = t ? open_in(t, rel, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC, 0) : ASK_CLASS;
    if (fd == ASK_CLASS)
        return CLASS(readdir(mnt, path, fh, out));
    if (fd < 0)
        return (int)fd;
    char *buf = malloc(32768);
    int r = buf ? 0 : -ENOMEM;
    while (r == 0) {
        long n = REAL(syscall)(SYS_getdents64, (int)fd, buf, 32768);
        if (n <= 0) {
            r = n < 0 ? -errno : 0;
            break;
        }
        for (long off = 0; off < n && r == 0;) {
            struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);
            size_t len = strlen(d->d_name);
            off += d->d_reclen;
            if (UNLIKELY(t->hide != NULL) && name_hidden(t, d->d_name, len))
                continue;       /* a hidden name is not in the listing */
            if (dirlist_add(out, d->d_name, len, d->d_ino, d->d_type) < 0)
                r = -ENOMEM;
        }
    }
    free(buf);
    REAL(close)((int)fd);
    return r;
}

static int b_releasedir(int mnt, const char *path, uint64_t fh)
{
    const char *rel;
    if (tree_for(mnt, path, BK_READDIR, &rel))
        return 0;
    return CLASS(releasedir(mnt, path, fh));
}

static int b_access(int mnt, const char *path, int mode)
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, BK_ACCESS, &rel);
    /* the real uid, as access(2): this process is the caller */
    int r = t ? AT_PARENT(t, rel, 0, REAL(syscall)(SYS_faccessat2, dfd, last, mode, AT_SYMLINK_NOFOLLOW | EMPTY(last)))
              : ASK_CLASS;
    return r != ASK_CLASS ? r : CLASS(access(mnt, path, mode));
}

static int b_utimens(int mnt, const char *path, const struct timespec ts[2])
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, BK_UTIMENS, &rel);
    int r = t ? AT_PARENT(t, rel, 1, REAL(utimensat)(dfd, last, ts, AT_SYMLINK_NOFOLLOW)) : ASK_CLASS;
    if (r == ASK_CLASS)
        return CLASS(utimens(mnt, path, ts));
    TOLD(t, BK_UTIMENS, mnt, path, NULL, r);
    return r;
}

/* xattrs have no *at form: the name is opened O_PATH beneath the tree and reached as
 * /proc/self/fd/N (a symlink itself, or no /proc: the class). */
static long xattr_here(struct tree *t, const char *path, const char *rel, int which, const char *name, void *val,
                       size_t size, int flags)
{
    long fd = open_in(t, rel, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd < 0)
        return fd;
    struct stat st;
    long r = ASK_CLASS;
    char proc[40];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", (int)fd);
    if (REAL(fstat)((int)fd, &st) == 0 && !S_ISLNK(st.st_mode)) {
        switch (which) {
        case 0: r = REAL(getxattr)(proc, name, val, size); break;
        case 1: r = REAL(setxattr)(proc, name, val, size, flags); break;
        case 2: r = REAL(listxattr)(proc, (char *)val, size); break;
        default: r = REAL(removexattr)(proc, name); break;
        }
        r = r < 0 ? (errno == ENOENT ? ASK_CLASS : -errno) : r;
        if (r >= 0 && (which & 1) && S_ISDIR(st.st_mode))
            dir_changed(t->mnt, path, path);    /* an ACL: who may search it */
    }
    REAL(close)((int)fd);
    return r;
}

static ssize_t b_getxattr(int mnt, const char *path, const char *name, void *value, size_t size)
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, BK_GETXATTR, &rel);
    long r = t ? xattr_here(t, path, rel, 0, name, value, size, 0) : ASK_CLASS;
    return r != ASK_CLASS ? r : CLASS(getxattr(mnt, path, name, value, size));
}

static int b_setxattr(int mnt, const char *path, const char *name, const void *value, size_t size, int flags)
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, BK_SETXATTR, &rel);
    long r = t ? xattr_here(t, path, rel, 1, name, (void *)value, size, flags) : ASK_CLASS;
    if (r == ASK_CLASS)
        return CLASS(setxattr(mnt, path, name, value, size, flags));
    TOLD(t, BK_SETXATTR, mnt, path, name, (int)r);
    return (int)r;
}

static ssize_t b_listxattr(int mnt, const char *path, char *list, size_t size)
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, BK_LISTXATTR, &rel);
    long r = t ? xattr_here(t, path, rel, 2, NULL, list, size, 0) : ASK_CLASS;
    return r != ASK_CLASS ? r : CLASS(listxattr(mnt, path, list, size));
}

static int b_removexattr(int mnt, const char *path, const char *name)
{
    const char *rel;
    struct tree *t = tree_for(mnt, path, BK_REMOVEXATTR, &rel);
    long r = t ? xattr_here(t, path, rel, 3, name, NULL, 0, 0) : ASK_CLASS;
    if (r == ASK_CLASS)
        return CLASS(removexattr(mnt, path, name));
    TOLD(t, BK_REMOVEXATTR, mnt, path, name, (int)r);
    return (int)r;
}

/* No process's cache keeps a name of a backed mount: 0, "cannot tell", makes notify.c look
 * at the lower file itself. */
static uint64_t b_stamp(int mnt, const char *path)
{
    if (backing_uncached(mnt))
        return 0;
    return inner->stamp ? inner->stamp(mnt, path) : 0;
}

static int b_written(int mnt, const char *path)
{
    if (backing_uncached(mnt))
        return 1;
    return inner->written ? inner->written(mnt, path) : 0;
}

struct backend_ops *backing_over(struct backend_ops *be)
{
    static int done;
    if (!done) {
        done = 1;
        trees_init();
    }
    if (be == NULL || ntrees == 0)
        return be;
    if (be == &over)
        return be;
    inner = be;
    backing_dirs_over(be);
    over = *be;
    over.getattr = b_getattr;
    over.readlink = b_readlink;
    over.mknod = b_mknod;
    over.mkdir = b_mkdir;
    over.unlink = b_unlink;
    over.rmdir = b_rmdir;
    over.symlink = b_symlink;
    over.rename = b_rename;
    over.link = b_link;
    over.chmod = b_chmod;
    over.chown = b_chown;
    over.truncate = b_truncate;
    over.truncate_uncached = b_truncate_uncached;
    over.open = b_open;
    over.create = b_create;
    over.statfs = b_statfs;
    over.opendir = b_opendir;
    over.readdir = b_readdir;
    over.releasedir = b_releasedir;
    over.access = b_access;
    over.utimens = b_utimens;
    over.setxattr = b_setxattr;
    over.getxattr = b_getxattr;
    over.listxattr = b_listxattr;
    over.removexattr = b_removexattr;
    over.create_open = b_create_open;
    over.open_decided = b_open_decided;
    if (be->open_special)
        over.open_special = b_open_special;
    over.stamp = b_stamp;
    over.written = b_written;
    return &over;
}
