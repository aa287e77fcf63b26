/*
 * The directories of backing trees, kept open: a name in a subdirectory of a tree costs one
 * *at call on its directory, as natively, instead of a walk from the tree's lower directory
 * (openat2 beneath it), the call, and a close every time (issue 33: stat of such a name ran
 * at a third of native's speed, and unlink, chmod and the rest paid the same).
 *
 * A process keeps up to DIRS directories, each an O_PATH fd of its own at a high number
 * (fs_fd), found by the directory's mount path. A kept directory is used while:
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
 */
#include "../ldpfuse.h"
#include <linux/openat2.h>
#include <pthread.h>
#include <string.h>
#include <sys/syscall.h>

#define DIRS 64                 /* power of two */
#define WAYS 4                  /* per set */
#define DIR_PATH_MAX 256        /* longer paths walk every time */
#define DIRS_AFTER 8

struct kept {
    int fd;                     /* ours, high; kept across replacements (dup3); -1 none */
    int users;                  /* calls using fd now: taken under the lock, given back without */
    int mnt;
    unsigned creds;
    uint64_t hash, stamp;       /* stamp 0: empty */
    struct timespec expires;
    char path[DIR_PATH_MAX];
};
static struct kept kept[DIRS];
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static TLS int holding;         /* a signal handler's call on this thread walks */
static unsigned walks, hand;
static struct backend_ops *be;

/* fork: the table is taken across it (no entry half-replaced in the child); the child has
 * none of the calls that were using kept fds, so none is in use there. */
static int fork_took;

static void fork_prepare(void)
{
    fork_took = !holding;       /* not when a signal handler forks on the thread that holds it */
    if (fork_took)
        pthread_mutex_lock(&lock);
}

static void fork_parent(void)
{
    if (fork_took)
        pthread_mutex_unlock(&lock);
}

static void fork_child(void)
{
    for (int i = 0; i < DIRS; i++)
        kept[i].users = 0;
    if (fork_took)
        pthread_mutex_unlock(&lock);
}

void backing_dirs_over(struct backend_ops *backend)
{
    be = backend;
    for (int i = 0; i < DIRS; i++)
        kept[i].fd = -1;
    pthread_atfork(fork_prepare, fork_parent, fork_child);
}

static int later(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec > b->tv_nsec);
}

/* The stamp a kept dir must still have, 0 if nothing is kept now. */
static uint64_t stamp_of(int mnt, const char *dir)
{
    if (be == NULL || be->below_stamp == NULL || ldp_vfork_child || holding)
        return 0;
    int connect = __atomic_add_fetch(&walks, 1, __ATOMIC_RELAXED) >= DIRS_AFTER;
    return be->below_stamp(mnt, dir, connect);
}

/* Walk rel beneath tfd for a directory fd that may be kept: crossing no symlink. */
static long walk(int tfd, const char *rel)
{
    struct open_how how = {
        .flags = O_PATH | O_DIRECTORY | O_CLOEXEC,
        .resolve = RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS,
    };
    long fd = REAL(syscall)(SYS_openat2, tfd, rel, &how, sizeof how);
    return fd >= 0 ? fd : -errno;
}

/* Keep fd (ours, from walk) as dir's: the kept fd, used (put it back), and *slot; or -1. */
static int keep(int mnt, const char *dir, size_t len, uint64_t hash, uint64_t stamp, unsigned creds, int fd,
                int *slot)
{
    struct timespec now, ttl;
    if (!attrcache_timeout(&ttl))
        return -1;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    holding = 1;
    pthread_mutex_lock(&lock);
    unsigned set = (unsigned)hash & (DIRS - WAYS);
    struct kept *k = NULL;
    for (unsigned i = 0; i < WAYS && k == NULL; i++) {     /* its own old entry, or an empty one */
        struct kept *c = &kept[set + i];
        if (__atomic_load_n(&c->users, __ATOMIC_ACQUIRE) == 0 &&
            (c->stamp == 0 || (c->hash == hash && c->mnt == mnt)))
            k = c;
    }
    for (unsigned i = 0; i < WAYS && k == NULL; i++) {     /* else in turn */
        struct kept *c = &kept[set + (hand++ % WAYS)];
        if (__atomic_load_n(&c->users, __ATOMIC_ACQUIRE) == 0)
            k = c;
    }
    int r = -1;
    if (k) {
        k->stamp = 0;
        int kfd = __atomic_load_n(&k->fd, __ATOMIC_ACQUIRE);
        if (kfd >= 0 && REAL(dup3)(fd, kfd, O_CLOEXEC) < 0)
            kfd = -1;               /* keeps the old directory: it is not used again */
        else if (kfd < 0) {
            int copy = (int)REAL(fcntl)(fd, F_DUPFD_CLOEXEC, 0);
            kfd = copy >= 0 ? fs_fd(copy) : -1;
            if (kfd >= 0 && kfd < fs_fd_base()) {
                REAL(close)(kfd);   /* no room up there: nothing is kept */
                kfd = -1;
            }
            __atomic_store_n(&k->fd, kfd, __ATOMIC_RELEASE);
            if (kfd >= 0 && kfd < ldp_backing_low_fd)
                ldp_backing_low_fd = kfd;
        }
        if (kfd >= 0) {
            k->mnt = mnt;
            k->hash = hash;
            k->creds = creds;
            memcpy(k->path, dir, len + 1);
            k->expires.tv_sec = now.tv_sec + ttl.tv_sec;
            k->expires.tv_nsec = now.tv_nsec + ttl.tv_nsec;
            if (k->expires.tv_nsec >= 1000000000L) {
                k->expires.tv_sec++;
                k->expires.tv_nsec -= 1000000000L;
            }
            k->stamp = stamp;
            __atomic_store_n(&k->users, 1, __ATOMIC_RELAXED);
            *slot = (int)(k - kept);
            r = kfd;
        }
    }
    pthread_mutex_unlock(&lock);
    holding = 0;
    return r;
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
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
        int fd = -1;
        holding = 1;
        pthread_mutex_lock(&lock);
        unsigned set = (unsigned)hash & (DIRS - WAYS);
        for (struct kept *k = &kept[set]; k < &kept[set + WAYS]; k++) {
            int kfd = __atomic_load_n(&k->fd, __ATOMIC_ACQUIRE);
            if (k->stamp == stamp && k->hash == hash && k->mnt == mnt && k->creds == creds && kfd >= 0 &&
                later(&k->expires, &now) && memcmp(k->path, dir, len + 1) == 0) {
                __atomic_add_fetch(&k->users, 1, __ATOMIC_ACQ_REL);
                fd = kfd;
                *slot = (int)(k - kept);
                break;
            }
        }
        pthread_mutex_unlock(&lock);
        holding = 0;
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
    __atomic_sub_fetch(&kept[slot].users, 1, __ATOMIC_RELEASE);  /* only taken under the lock */
}

/* The program closed or replaced fds first..last: kept fds among them are forgotten (the
 * number is the program's now). Returns the lowest kept fd left, INT_MAX if none. */
int backing_dirs_lost(unsigned first, unsigned last)
{
    int low = INT_MAX;
    if (be == NULL)
        return low;     /* no tree (a union alone): the table was never set up, its fds are not -1 */
    for (int i = 0; i < DIRS; i++) {
        int fd = __atomic_load_n(&kept[i].fd, __ATOMIC_ACQUIRE);
        if (fd >= 0 && (unsigned)fd >= first && (unsigned)fd <= last) {
            kept[i].stamp = 0;
            __atomic_store_n(&kept[i].fd, -1, __ATOMIC_RELEASE);
        } else if (fd >= 0 && fd < low) {
            low = fd;
        }
    }
    return low;
}
