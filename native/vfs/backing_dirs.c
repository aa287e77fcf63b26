/*
 * The directories of backing trees, kept open: a name in a subdirectory of a tree costs one
 * *at call on its directory, as natively, instead of a walk from the tree's lower directory
 * (openat2 beneath it), the call, and a close every time (issue 33: stat of such a name ran
 * at a third of native's speed, and unlink, chmod and the rest paid the same).
 *
 * A process keeps directories, each an O_PATH fd of its own at a high number (from
 * fs_fd_base up), found by the directory's mount path: as many as a quarter of the fd
 * numbers its RLIMIT_NOFILE leaves above fs_fd_base, from DIRS_MIN to DIRS_MAX (filebench's
 * web-server spreads its files over 2,600 directories: a table of 64 missed at nearly every
 * open, and a miss costs the walk, a dup3 and a close). The table is mapped at the first
 * keep, with the limit the program has then. A kept directory is used while:
 *
 *  - no process of the command has removed or renamed it or a directory above it, or
 *    changed their permissions: the entry is stamped with coherence_stamp_below() of its
 *    path, taken before the walk; such a change made here (vfs/backing.c) tells the server
 *    (W_MOVED) before the call returns, one made by the class goes through the server:
 *    either way the server bumps the counters first, so the next call anywhere walks again;
 *  - attr_timeout has not passed since the walk: a directory that a process outside the
 *    command renames or removes is seen within it, as FUSE's entry_timeout and the rest of
 *    the mount's caches (-o attr_timeout=0: nothing is kept, every call walks);
 *  - this process has not changed its credentials (vfs creds.c: the walk checked its
 *    search rights on every directory above).
 *
 * Only walks that crossed no symlink are kept (RESOLVE_NO_SYMLINKS): a kept path is real
 * directories only, which nothing but rmdir and rename can replace, and a symlink swapped
 * in for one of them is met by the next walk, beneath the tree. The fd follows the
 * directory itself, so a symlink swapped in from outside the command is never followed
 * through it either. Names within a kept directory are the kernel's at every call: a file
 * created, removed or changed anywhere is seen at once, as natively.
 *
 * A process asks for the table of counters (a connection to the server) only at its
 * DIRS_AFTER-th walk: a short process (cat, a shell's test) walks as before and connects to
 * nothing. A kept fd in use by a call is never replaced meanwhile (users); one the program
 * closes or dup2()s over is forgotten (backing_dirs_lost). A vfork child, which shares this
 * memory but not the fd table, keeps nothing.
 *
 * No lock: an entry's users count is its lock. A lookup adds itself to the users of an entry
 * whose hash matches and only then compares the rest; a keep claims an entry with no users
 * by making the count CLAIMED (negative), and a lookup that lands on a claimed entry backs
 * off and walks. Nothing waits, so a signal handler that touches the mount in the middle of
 * a lookup or a keep on the same thread walks as any other miss (100 threads on 2 cores
 * queued on the one mutex this had).
 */
#include "../ldpfuse.h"
#include <linux/openat2.h>
#include <pthread.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>

#define DIRS_MIN 64             /* powers of two */
#define DIRS_MAX 4096
#define WAYS 4                  /* per set */
#define DIR_PATH_MAX 256        /* longer paths walk every time */
#define DIRS_AFTER 8
#define CLAIMED (INT_MIN / 2)   /* users while a keep rewrites the entry */

struct kept {
    int fd1;                    /* 1 + ours, high; kept across replacements (dup3); 0 none */
    int mnt;
    unsigned creds;
    uint64_t hash, stamp;       /* stamp 0: empty */
    struct timespec expires;
    char path[DIR_PATH_MAX];
};
static struct kept *kept;       /* ndirs entries, mapped at the first keep (zeros: empty) */
static int *users;              /* calls using each entry now, or CLAIMED */
static unsigned ndirs;
static unsigned walks, hand;
static struct backend_ops *be;

/* fork: the child has none of the calls that were using kept fds; an entry a thread it
 * does not have was rewriting is dropped (its fd, if any, stays the entry's). */
static void fork_child(void)
{
    struct kept *t = __atomic_load_n(&kept, __ATOMIC_ACQUIRE);
    if (t == NULL)
        return;
    for (unsigned i = 0; i < ndirs; i++) {
        if (users[i] < 0)
            t[i].stamp = 0;
        users[i] = 0;
    }
}

void backing_dirs_over(struct backend_ops *backend)
{
    be = backend;
    pthread_atfork(NULL, NULL, fork_child);
}

/* The table, mapped now if it is not: a quarter of the fd numbers above fs_fd_base. */
static struct kept *table(void)
{
    struct kept *t = __atomic_load_n(&kept, __ATOMIC_ACQUIRE);
    if (LIKELY(t != NULL))
        return t;
    struct rlimit rl;
    unsigned n = DIRS_MIN;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0) {
        rlim_t base = (rlim_t)fs_fd_base();
        rlim_t room = rl.rlim_cur == RLIM_INFINITY ? 4 * DIRS_MAX : rl.rlim_cur > base ? (rl.rlim_cur - base) / 4 : 0;
        while (n < DIRS_MAX && 2 * (rlim_t)n <= room)
            n *= 2;
    }
    /* one thread maps it (ndirs and users set before the table is published, never
     * changed after); another, or a handler on this one, walks meanwhile */
    static int mapping;
    if (__atomic_exchange_n(&mapping, 1, __ATOMIC_ACQ_REL))
        return NULL;
    size_t size = n * sizeof *t + n * sizeof *users;
    void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return NULL;    /* nothing is kept in this process */
    ndirs = n;
    users = (int *)((char *)m + n * sizeof *t);
    __atomic_store_n(&kept, (struct kept *)m, __ATOMIC_RELEASE);
    return m;
}

static int later(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec > b->tv_nsec);
}

/* The stamp a kept dir must still have, 0 if nothing is kept now. */
static uint64_t stamp_of(int mnt, const char *dir)
{
    if (be == NULL || be->below_stamp == NULL || ldp_vfork_child)
        return 0;
    /* counted until it connects: past that, no call of any thread writes the counter's line */
    int connect = __atomic_load_n(&walks, __ATOMIC_RELAXED) >= DIRS_AFTER ||
                  __atomic_add_fetch(&walks, 1, __ATOMIC_RELAXED) >= DIRS_AFTER;
    return be->below_stamp(mnt, dir, connect);
}

/* Walk rel beneath tfd for a directory fd that may be kept: crossing no symlink. A relative
 * rel with no ".." (a clean mount path's) cannot leave tfd then: RESOLVE_BENEATH, which
 * costs the walk a hold of tfd as its root, is added only for another (vfs/backing.c beneath). */
static long walk(int tfd, const char *rel)
{
    struct open_how how = {
        .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
        .resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    if (rel[0] == '/' || path_has_dotdot(rel))
        how.resolve |= RESOLVE_BENEATH;
    long fd = REAL(syscall)(SYS_openat2, tfd, rel, &how, sizeof how);
    return fd >= 0 ? fd : -errno;
}

static int claim(unsigned i)
{
    int none = 0;
    return __atomic_compare_exchange_n(&users[i], &none, CLAIMED, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED);
}

/* Keep fd (ours, from walk) as dir's: the kept fd, used (put it back), and *slot; or -1. */
static int keep(int mnt, const char *dir, size_t len, uint64_t hash, uint64_t stamp, unsigned creds, int fd,
                int *slot)
{
    struct timespec now, ttl;
    struct kept *t = table();
    if (t == NULL || !attrcache_timeout(&ttl))
        return -1;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    unsigned set = (unsigned)hash & (ndirs - WAYS);
    int i = -1;
    for (unsigned w = 0; w < WAYS && i < 0; w++) {      /* its own old entry, or an empty one */
        struct kept *c = &t[set + w];
        uint64_t s = __atomic_load_n(&c->stamp, __ATOMIC_RELAXED);
        if ((s == 0 || (__atomic_load_n(&c->hash, __ATOMIC_RELAXED) == hash && __atomic_load_n(&c->mnt, __ATOMIC_RELAXED) == mnt)) && claim(set + w))
            i = (int)(set + w);
    }
    for (unsigned w = 0; w < WAYS && i < 0; w++) {      /* else in turn */
        unsigned j = set + (__atomic_fetch_add(&hand, 1, __ATOMIC_RELAXED) % WAYS);
        if (claim(j))
            i = (int)j;
    }
    if (i < 0)
        return -1;
    struct kept *k = &t[i];
    __atomic_store_n(&k->stamp, 0, __ATOMIC_RELAXED);
    int kfd = __atomic_load_n(&k->fd1, __ATOMIC_ACQUIRE) - 1;
    if (kfd >= 0 && REAL(dup3)(fd, kfd, O_CLOEXEC) < 0) {
        kfd = -1;               /* keeps the old directory: it is not used again */
    } else if (kfd < 0) {
        kfd = (int)REAL(fcntl)(fd, F_DUPFD_CLOEXEC, fs_fd_base());     /* no room up there: -1 */
        __atomic_store_n(&k->fd1, kfd + 1, __ATOMIC_RELEASE);
        if (kfd >= 0 && kfd < ldp_backing_low_fd)
            ldp_backing_low_fd = kfd;
    }
    int r = -1;
    if (kfd >= 0) {
        __atomic_store_n(&k->mnt, mnt, __ATOMIC_RELAXED);
        __atomic_store_n(&k->hash, hash, __ATOMIC_RELAXED);
        k->creds = creds;
        memcpy(k->path, dir, len + 1);
        k->expires = timespec_after(now, ttl);
        __atomic_store_n(&k->stamp, stamp, __ATOMIC_RELAXED);
        *slot = i;
        r = kfd;
    }
    /* let go of the claim (lookups that backed off meanwhile took theirs back), using it */
    __atomic_sub_fetch(&users[i], r >= 0 ? CLAIMED - 1 : CLAIMED, __ATOMIC_RELEASE);
    return r;
}

/* A kept fd of dir, used (put it back), or -1. */
static int find(int mnt, const char *dir, size_t len, uint64_t hash, uint64_t stamp, unsigned creds, int *slot)
{
    struct kept *t = __atomic_load_n(&kept, __ATOMIC_ACQUIRE);
    if (t == NULL)
        return -1;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    unsigned set = (unsigned)hash & (ndirs - WAYS);
    for (unsigned i = set; i < set + WAYS; i++) {
        struct kept *k = &t[i];
        if (__atomic_load_n(&k->hash, __ATOMIC_RELAXED) != hash)
            continue;
        if (__atomic_add_fetch(&users[i], 1, __ATOMIC_ACQUIRE) > 0) {      /* no keep rewrites it now */
            int kfd = __atomic_load_n(&k->fd1, __ATOMIC_ACQUIRE) - 1;
            if (__atomic_load_n(&k->stamp, __ATOMIC_RELAXED) == stamp && k->hash == hash && k->mnt == mnt &&
                k->creds == creds && kfd >= 0 && later(&k->expires, &now) && memcmp(k->path, dir, len + 1) == 0) {
                *slot = (int)i;
                return kfd;
            }
        }
        __atomic_sub_fetch(&users[i], 1, __ATOMIC_RELEASE);
    }
    return -1;
}

/* The directory dir (a mount path on mnt; rel: the same beneath the tree fd tfd): an fd of
 * it kept or walked now, to give back with backing_dir_put(*slot, fd); -errno; or -EXDEV
 * if the walk would leave the tree, -ELOOP if it crosses a symlink (then the caller walks
 * as it always did, uncached). */
long backing_dir_get(int mnt, const char *dir, int tfd, const char *rel, int *slot)
{
    *slot = -1;
    size_t len = strlen(dir);
    uint64_t stamp = len < DIR_PATH_MAX ? stamp_of(mnt, dir) : 0;
    uint64_t hash = 0;
    unsigned creds = __atomic_load_n(&ldp_creds_gen, __ATOMIC_ACQUIRE);
    if (stamp) {
        hash = fnv1a(fnv1a_seed(mnt), dir, NULL);
        int fd = find(mnt, dir, len, hash, stamp, creds, slot);
        if (fd >= 0)
            return fd;
    }
    long fd = walk(tfd, rel);
    if (fd < 0 || !stamp)
        return fd;
    int k = keep(mnt, dir, len, hash, stamp, creds, (int)fd, slot);
    if (k < 0)
        return fd;
    REAL(close)((int)fd);
    return k;
}

/* A call is done with what backing_dir_get gave. */
void backing_dir_put(int slot, int fd)
{
    if (slot < 0) {
        REAL(close)(fd);
        return;
    }
    __atomic_sub_fetch(&users[slot], 1, __ATOMIC_RELEASE);
}

/* The program closed or replaced fds first..last: kept fds among them are forgotten (the
 * number is the program's now). Returns the lowest kept fd left, INT_MAX if none. */
int backing_dirs_lost(unsigned first, unsigned last)
{
    int low = INT_MAX;
    struct kept *t = __atomic_load_n(&kept, __ATOMIC_ACQUIRE);
    for (unsigned i = 0; t && i < ndirs; i++) {
        int fd = __atomic_load_n(&t[i].fd1, __ATOMIC_ACQUIRE) - 1;
        if (fd >= 0 && (unsigned)fd >= first && (unsigned)fd <= last) {
            __atomic_store_n(&t[i].stamp, 0, __ATOMIC_RELAXED);
            __atomic_store_n(&t[i].fd1, 0, __ATOMIC_RELEASE);
        } else if (fd >= 0 && fd < low) {
            low = fd;
        }
    }
    return low;
}
