/*
 * getattr results kept for attr_timeout seconds (FUSE's attr_timeout; LDPFUSE_ATTR_TIMEOUT,
 * default 1 s, 0 turns it off), so stat-heavy programs (make, git status, ls -l) pay one
 * Python call per name per second instead of one per stat.
 *
 * Each answer is stamped (attrcache_stamp) with what it depends on, taken before the FS was
 * asked: this process's own generation, bumped by changes no backend tells of (a child it
 * waited for; and in the embedded mode every change this process makes, a passthrough
 * file's through its fd included, vfs/passthrough.c), plus the backend's stamp of the path. The shared backend's stamp is the
 * server's table of change counters (backend/coherence.h), so a change any process makes
 * through the mount is seen by every process at once, and a change to one name forgets
 * only the answers about that name and its directory. An answer whose stamp moved is not
 * used. While a passthrough file is open for writing here, the kernel changes its size
 * and times behind us, so no answer about its name is used or kept (attrcache_writer: a
 * count per hash of the names of this process's writers, which renames here move); where
 * the backend is not coherent a file's other names (hard links) are kept too, so there no
 * answer at all is used while any such file is open. A file another process renames
 * while this one writes it is seen under its new name as the FS says when asked, for
 * attr_timeout (as between processes: close-to-open).
 *
 * Missing names are kept too (st_mode 0: ENOENT), but only where the backend tells of
 * every change (coherent): a name another process creates must not stay missing here.
 * There, a file with several names (hard links) is not kept: a change through one name
 * is told under that name only.
 */
#include "../ldpfuse.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* power of two. Names a program touches within attr_timeout: fio's web-server workload
 * (bench/workloads, 4,000 files read by 100 threads) found a quarter of its answers gone
 * with 4096 (each lookup then a round trip); 16384 slots of 440 bytes are 7 MB of
 * zero-filled data, touched only as answers are kept */
#define SLOTS 16384
#define WAYS 4                  /* slots per set: names that collide still fit */

struct slot {
    uint64_t gen;                   /* the stamp of the answer; 0: empty */
    uint64_t hash;
    int mnt;
    struct timespec expires;
    struct stat st;
    char path[ATTRCACHE_PATH_MAX];
};

/* in the library's zero-filled data, not allocated: no page of it costs anything until
 * an answer is kept there (1.8 MB from calloc was an mmap of its own, in every process
 * that opened a file of the mount) */
static struct slot slot_store[SLOTS];
static struct slot *slots;      /* slot_store from the first answer kept on */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t generation = 1;    /* this process's changes that no backend tells of */
static struct timespec timeout = { 1, 0 };
static int enabled = -1;
static int ldp_writers;         /* passthrough fds open for writing in this process */
#define WRITER_BUCKETS 1024     /* power of two */
static int writer_buckets[WRITER_BUCKETS];      /* the same, by the hash of their names */
static TLS int holding;         /* this thread holds the lock: a signal handler's stat skips the cache */

static int cache_on(void)
{
    if (UNLIKELY(enabled < 0)) {
        const char *t = getenv("LDPFUSE_ATTR_TIMEOUT");
        double secs = t && *t ? strtod(t, NULL) : 1.0;
        timeout.tv_sec = (time_t)secs;
        timeout.tv_nsec = (long)((secs - (double)timeout.tv_sec) * 1e9);
        enabled = secs > 0;
    }
    return enabled;
}

int attrcache_timeout(struct timespec *t)
{
    if (!cache_on())
        return 0;
    *t = timeout;
    return 1;
}

static uint64_t hash_path(int mnt, const char *p, size_t *len)
{
    const char *end;
    uint64_t h = fnv1a(fnv1a_seed(mnt), p, &end);
    *len = (size_t)(end - p);
    return h;
}

static int later(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec > b->tv_nsec);
}

/* A file this process has open for writing, past the FS (a passthrough fd), has the name
 * whose hash is h: its answers would go stale as the kernel writes. */
static int written_here(uint64_t h)
{
    if (__atomic_load_n(&ldp_writers, __ATOMIC_ACQUIRE) == 0)
        return 0;
    if (!attrcache_coherent())
        return 1;       /* its other names are kept too (hard links): use nothing */
    return __atomic_load_n(&writer_buckets[h & (WRITER_BUCKETS - 1)], __ATOMIC_ACQUIRE) != 0;
}

void attrcache_writer(int mnt, const char *path, int delta)
{
    size_t len;
    uint64_t h = hash_path(mnt, path, &len);
    __atomic_add_fetch(&writer_buckets[h & (WRITER_BUCKETS - 1)], delta, __ATOMIC_ACQ_REL);
    __atomic_add_fetch(&ldp_writers, delta, __ATOMIC_ACQ_REL);
}

/* The backend's stamp of path (0: it has none); path NULL: only our own generation. */
static uint64_t backend_stamp(int mnt, const char *path)
{
    if (backing_uncached(mnt))
        return 0;       /* a backing tree's or a union's name: b_stamp's answer, without the call */
    struct backend_ops *be = path ? backend_get() : NULL;
    if (be == NULL || be->stamp == NULL)
        return 0;
    return be->stamp(mnt, path);        /* a read of shared memory: no guard (backend.h) */
}

uint64_t attrcache_stamp(int mnt, const char *path)
{
    return __atomic_load_n(&generation, __ATOMIC_ACQUIRE) + backend_stamp(mnt, path);
}

/* The stamp of a name whose backend part was taken elsewhere (the server's, backend.h
 * answer_stamp). */
uint64_t attrcache_stamp_from(uint64_t backend_part)
{
    return __atomic_load_n(&generation, __ATOMIC_ACQUIRE) + backend_part;
}

/* What tells of a change made to path through the mount: the backend's stamp where it
 * has one (the shared server's table, moved by every process's change), else this
 * process's own changes (the embedded mode, where what other processes change is, to
 * this one, a change behind the mount). Not moved by a child waited for, as the
 * generation is: the page caches' check of a file against its attributes
 * (vfs/pagecache.c) tells those apart. */
static uint64_t own_changes = 1;

uint64_t attrcache_change_stamp(int mnt, const char *path)
{
    uint64_t b = backend_stamp(mnt, path);
    return b ? b : __atomic_load_n(&own_changes, __ATOMIC_ACQUIRE);
}

int attrcache_coherent(void)
{
    return backend_stamp(0, "/") != 0;
}

/* 1: st filled; -1: the name is known missing (ENOENT); 0: ask the FS */
int attrcache_get(int mnt, const char *path, struct stat *st)
{
    if (!cache_on() || __atomic_load_n(&slots, __ATOMIC_ACQUIRE) == NULL || backing_uncached(mnt))
        return 0;
    size_t len;
    uint64_t h = hash_path(mnt, path, &len);
    if (len >= ATTRCACHE_PATH_MAX || written_here(h))
        return 0;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    int hit = 0;
    if (holding)
        return 0;
    uint64_t g = attrcache_stamp(mnt, path);
    holding = 1;
    pthread_mutex_lock(&lock);
    for (struct slot *s = &slots[h & (SLOTS - WAYS)]; s < &slots[(h & (SLOTS - WAYS)) + WAYS]; s++)
        if (s->gen == g && s->hash == h && s->mnt == mnt && later(&s->expires, &now) &&
            memcmp(s->path, path, len + 1) == 0) {
            hit = s->st.st_mode ? 1 : -1;
            if (hit > 0)
                *st = s->st;
            break;
        }
    pthread_mutex_unlock(&lock);
    holding = 0;
    return hit;
}

/* st NULL: the name is missing (kept only where the backend is coherent). stamp: taken
 * before the FS was asked (an answer made stale during the call is not kept). */
void attrcache_put(int mnt, const char *path, const struct stat *st, uint64_t stamp)
{
    if (!cache_on() || backing_uncached(mnt))    /* vfs/backing.c: the kernel's names */
        return;
    struct stat missing;
    if (st == NULL) {
        if (!attrcache_coherent())
            return;
        memset(&missing, 0, sizeof missing);
        st = &missing;
    } else if (st->st_mode == 0) {
        return;
    } else if (!S_ISDIR(st->st_mode) && st->st_nlink > 1 && attrcache_coherent()) {
        return;     /* its other names change it too, and their changes are told by name */
    }
    size_t len;
    uint64_t h = hash_path(mnt, path, &len);
    if (len >= ATTRCACHE_PATH_MAX || written_here(h))
        return;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    if (holding)
        return;
    /* a change that happened during the FS call makes this answer possibly stale */
    uint64_t g = attrcache_stamp(mnt, path);
    holding = 1;
    pthread_mutex_lock(&lock);
    if (slots == NULL)
        __atomic_store_n(&slots, slot_store, __ATOMIC_RELEASE);
    if (slots && stamp == g) {
        /* WAYS slots per set: the same name's, else the one that expires first (an
         * empty one never expires later than any) */
        struct slot *set = &slots[h & (SLOTS - WAYS)], *s = set;
        for (struct slot *t = set; t < set + WAYS; t++) {
            if (t->hash == h && t->mnt == mnt && memcmp(t->path, path, len + 1) == 0) {
                s = t;
                break;
            }
            if (later(&s->expires, &t->expires))
                s = t;
        }
        s->gen = g;
        s->hash = h;
        s->mnt = mnt;
        s->st = *st;
        memcpy(s->path, path, len + 1);
        s->expires = timespec_after(now, timeout);
    }
    pthread_mutex_unlock(&lock);
    holding = 0;
}

void attrcache_invalidate(void)
{
    __atomic_add_fetch(&generation, 1, __ATOMIC_ACQ_REL);
}

/* This process changed something through the backend: a coherent backend has told every
 * process (this one included) of that very name; otherwise everything is forgotten. */
void attrcache_changed(void)
{
    if (!attrcache_coherent()) {
        __atomic_add_fetch(&own_changes, 1, __ATOMIC_ACQ_REL);
        attrcache_invalidate();
    }
}

/* The same for a change on mnt: none for a mount whose names no cache keeps (a backing
 * tree's or a union's, backing_uncached): what this process cached is another mount's,
 * which that change did not touch, and the two counters it would bump are written by
 * every thread's create and unlink (their cache line went from core to core). */
void attrcache_changed_in(int mnt)
{
    if (!backing_uncached(mnt))
        attrcache_changed();
}

void attrcache_fork(int phase)
{
    if (phase == 0)
        pthread_mutex_lock(&lock);
    else
        pthread_mutex_unlock(&lock);
}
