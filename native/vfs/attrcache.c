/*
 * getattr results kept for attr_timeout seconds (FUSE's attr_timeout; LDPFUSE_ATTR_TIMEOUT,
 * default 1 s, 0 turns it off), so stat-heavy programs (make, git status, ls -l) pay one
 * Python call per name per second instead of one per stat.
 *
 * Any modifying operation of this process bumps a generation and so empties the cache at
 * once; while a passthrough file is open for writing here, the kernel changes its size and
 * times behind us, so the cache is not used at all. Other processes' changes are seen
 * after at most the timeout, as with FUSE.
 */
#include "../ldpfuse.h"
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define SLOTS 4096              /* power of two */
#define WAYS 4                  /* slots per set: names that collide still fit */
#define MAXPATH 256             /* longer paths are not cached */

struct slot {
    uint64_t gen;
    uint64_t hash;
    int mnt;
    struct timespec expires;
    struct stat st;
    char path[MAXPATH];
};

static struct slot *slots;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t generation = 1;
static struct timespec timeout = { 1, 0 };
static int enabled = -1;
int ldp_writers;                /* passthrough fds open for writing in this process */
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
    return enabled && __atomic_load_n(&ldp_writers, __ATOMIC_RELAXED) == 0;
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

int attrcache_get(int mnt, const char *path, struct stat *st)
{
    if (!cache_on() || __atomic_load_n(&slots, __ATOMIC_ACQUIRE) == NULL)
        return 0;
    size_t len;
    uint64_t h = hash_path(mnt, path, &len);
    if (len >= MAXPATH)
        return 0;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    int hit = 0;
    if (holding)
        return 0;
    holding = 1;
    pthread_mutex_lock(&lock);
    uint64_t g = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
    for (struct slot *s = &slots[h & (SLOTS - WAYS)]; s < &slots[(h & (SLOTS - WAYS)) + WAYS]; s++)
        if (s->gen == g && s->hash == h && s->mnt == mnt && later(&s->expires, &now) &&
            memcmp(s->path, path, len + 1) == 0) {
            *st = s->st;
            hit = 1;
            break;
        }
    pthread_mutex_unlock(&lock);
    holding = 0;
    return hit;
}

void attrcache_put(int mnt, const char *path, const struct stat *st, uint64_t gen_before)
{
    if (!cache_on())
        return;
    size_t len;
    uint64_t h = hash_path(mnt, path, &len);
    if (len >= MAXPATH)
        return;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    if (holding)
        return;
    holding = 1;
    pthread_mutex_lock(&lock);
    if (slots == NULL)
        __atomic_store_n(&slots, calloc(SLOTS, sizeof *slots), __ATOMIC_RELEASE);
    /* a change that happened during the FS call makes this answer possibly stale */
    uint64_t g = __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
    if (slots && gen_before == g) {
        /* WAYS slots per set: the same name's, else a stale one, else the one that
         * expires first */
        struct slot *set = &slots[h & (SLOTS - WAYS)], *s = set;
        for (struct slot *t = set; t < set + WAYS; t++) {
            if (t->gen == g && t->hash == h && t->mnt == mnt) {
                s = t;
                break;
            }
            if (s->gen == g && (t->gen != g || later(&s->expires, &t->expires)))
                s = t;
        }
        s->gen = g;
        s->hash = h;
        s->mnt = mnt;
        s->st = *st;
        memcpy(s->path, path, len + 1);
        s->expires.tv_sec = now.tv_sec + timeout.tv_sec;
        s->expires.tv_nsec = now.tv_nsec + timeout.tv_nsec;
        if (s->expires.tv_nsec >= 1000000000L) {
            s->expires.tv_sec++;
            s->expires.tv_nsec -= 1000000000L;
        }
    }
    pthread_mutex_unlock(&lock);
    holding = 0;
}

uint64_t attrcache_generation(void)
{
    return __atomic_load_n(&generation, __ATOMIC_ACQUIRE);
}

void attrcache_invalidate(void)
{
    __atomic_add_fetch(&generation, 1, __ATOMIC_ACQ_REL);
}

void attrcache_fork(int phase)
{
    if (phase == 0)
        pthread_mutex_lock(&lock);
    else
        pthread_mutex_unlock(&lock);
}
