/*
 * Names of backing trees this process found to be regular files a moment ago, so that
 * opening one again is one openat2, as natively, and not an fstatat first (issue 33).
 *
 * vfs/backing.c's open of an existing name for reading looks at its type before it opens
 * it: opening a FIFO or a device to find out what it is could be seen, and a directory
 * opened as a file would give the program the lower directory's own fd (past the mount's
 * listings and filters). (An open for writing is the program's own, at once:
 * backing_open_here; a directory cannot be opened so.) That look was the one system call a backed open of an existing file made
 * beyond native's (bench/NOTES.md). A name whose look said "a regular file", and whose
 * open then succeeded, is remembered here for attr_timeout (-o attr_timeout=0: never), as
 * the rest of the mount's lookups are: the next open of it within that time opens it
 * directly, with the program's flags and O_NOFOLLOW | O_NOCTTY.
 *
 * What is forgotten at once: a name this process unlinks or renames (either name), and
 * every name when it removes, renames or changes the rights of a directory (backing.c's
 * dir_changed). What is not seen: another process replacing the file within the window.
 * Then the open meets what is there now, with the program's own flags and rights: a
 * symlink (ELOOP) or a missing name sends it back to the core's lookup as before; a FIFO
 * or a device is opened as the core would open it anyway (backing.c's b_open_special:
 * the same openat2); a directory opened read-only would be the lower directory's fd,
 * as backing=no's remembered opens (backend/shared.c, decision_open) would open it.
 *
 * One table for the process's threads, without a lock: each slot has a sequence count
 * (odd while a writer fills it; a reader that sees it change reads nothing). A name is
 * known by two 64-bit hashes of its mount and path: its set of WAYS slots (one cache line) by the
 * first, its key in the set by the second and the epoch. The
 * table is sized by use: SMALL slots in the library (a round robin over 1,000 names,
 * microbench's orc, finds nearly all of them), and BIG, mapped once this process has put
 * out SMALL / 4 names still live to make room for others (filebench's web-server opens 4,000
 * to 50,000 names over and over: SMALL two-way slots missed a quarter of 4,000, nearly all
 * of 50,000, and each miss is the look again). A process that opens a few hundred names
 * touches a few pages of SMALL and maps nothing. A process that has kept no name yet (one
 * that only creates and unlinks) hashes nothing.
 */
#include "../ldpfuse.h"
#include <string.h>
#include <sys/mman.h>

#define SMALL 4096              /* slots, powers of two */
#define BIG 65536               /* 1 MiB, only the pages used */
#define WAYS 4                  /* per set: one cache line */

struct regular {
    unsigned seq;
    int until;                  /* CLOCK_MONOTONIC_COARSE, ms, modulo 2^32 */
    uint64_t key;               /* the name's second hash and the epoch; 0: empty */
};
static struct regular small[SMALL] __attribute__((aligned(64)));
static struct regular *slots = small;   /* small, or the BIG ones mapped: never back */
static struct regular *big;
static unsigned evicted;        /* live names put out of small: at SMALL / 4, big is mapped */
static unsigned epoch = 1;      /* backing_regular_forget_all: every slot of an older one is stale */
static int any;                 /* set at the first name kept: before it, nothing to hash or forget */

/* Two 64-bit hashes of mnt and path, eight bytes at a time (a byte at a time, they were
 * 170 instructions of an open of a 20-byte path). */
static void hash2(int mnt, const char *path, uint64_t *h1, uint64_t *h2)
{
    size_t n = strlen(path);
    uint64_t a = fnv1a_seed(mnt) ^ n, b = 0x9e3779b97f4a7c15ULL ^ (uint64_t)mnt;
    const char *last = path + (n >= 8 ? n - 8 : 0);     /* the last word overlaps the one before */
    for (;;) {
        uint64_t w = 0;
        if (n >= 8)
            memcpy(&w, path < last ? path : last, 8);
        else
            for (size_t i = 0; i < n; i++)
                w |= (uint64_t)(unsigned char)path[i] << (8 * i);
        a = (a ^ w) * 0x100000001b3ULL;
        a ^= a >> 32;
        b = (b ^ w) * 0xff51afd7ed558ccdULL;
        b ^= b >> 29;
        if (path >= last)
            break;
        path += 8;
    }
    a *= 0xc4ceb9fe1a85ec53ULL;
    *h1 = a ^ (a >> 33);        /* its low bits (the set) from every byte */
    *h2 = b | 1;                /* never 0: an empty slot */
}

static int now_ms(void)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
    return (int)(unsigned)((uint64_t)now.tv_sec * 1000 + (uint64_t)now.tv_nsec / 1000000);
}

static int live(int until, int now)
{
    return (int)((unsigned)until - (unsigned)now) > 0;
}

/* The name's key in this epoch: backing_regular_forget_all makes every kept key stale. */
static uint64_t key_of(uint64_t h2)
{
    return (h2 ^ (__atomic_load_n(&epoch, __ATOMIC_ACQUIRE) * 0x9e3779b97f4a7c15ULL)) | 1;
}

static int slot_has(struct regular *r, uint64_t key, int now)
{
    unsigned s = __atomic_load_n(&r->seq, __ATOMIC_ACQUIRE);
    if (s & 1)
        return 0;
    int hit = r->key == key;
    int until = r->until;
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return hit && __atomic_load_n(&r->seq, __ATOMIC_RELAXED) == s && live(until, now);
}

static struct regular *set_of(struct regular *t, uint64_t h1)
{
    return &t[h1 & ((t == small ? SMALL : BIG) - WAYS)];
}

/* Was path on mnt a regular file a moment ago (this process opened it as one)? */
int backing_regular_known(int mnt, const char *path)
{
    if (!__atomic_load_n(&any, __ATOMIC_RELAXED))
        return 0;
    uint64_t h1, h2;
    hash2(mnt, path, &h1, &h2);
    uint64_t key = key_of(h2);
    struct regular *set = set_of(__atomic_load_n(&slots, __ATOMIC_ACQUIRE), h1);
    for (int i = 0; i < WAYS; i++)
        if (__atomic_load_n(&set[i].key, __ATOMIC_RELAXED) == key)
            return slot_has(&set[i], key, now_ms());
    return 0;
}

/* small has turned over: the big table from now on (one thread maps it; the others and a
 * handler on this thread go on with small meanwhile). Names in small are looked at again. */
static void grow(void)
{
    static int mapping;
    if (__atomic_exchange_n(&mapping, 1, __ATOMIC_ACQ_REL))
        return;
    void *m = mmap(NULL, BIG * sizeof *big, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED)
        return;         /* small stays */
    __atomic_store_n(&big, (struct regular *)m, __ATOMIC_RELEASE);
    __atomic_store_n(&slots, (struct regular *)m, __ATOMIC_RELEASE);
}

static void put(struct regular *r, uint64_t key, int until)
{
    unsigned s = __atomic_load_n(&r->seq, __ATOMIC_RELAXED);
    if ((s & 1) || !__atomic_compare_exchange_n(&r->seq, &s, s + 1, 0, __ATOMIC_ACQUIRE, __ATOMIC_RELAXED))
        return;         /* another thread is filling it: this one keeps nothing */
    __atomic_thread_fence(__ATOMIC_RELEASE);
    __atomic_store_n(&r->key, key, __ATOMIC_RELAXED);
    r->until = until;
    __atomic_store_n(&r->seq, s + 2, __ATOMIC_RELEASE);
}

/* path on mnt was a regular file, opened as one just now. */
void backing_regular_seen(int mnt, const char *path)
{
    struct timespec ttl;
    if (!attrcache_timeout(&ttl))
        return;
    uint64_t h1, h2;
    hash2(mnt, path, &h1, &h2);
    if (!__atomic_load_n(&any, __ATOMIC_RELAXED))
        __atomic_store_n(&any, 1, __ATOMIC_RELAXED);
    uint64_t key = key_of(h2);
    int now = now_ms();
    struct regular *t = __atomic_load_n(&slots, __ATOMIC_ACQUIRE), *set = set_of(t, h1), *r = NULL;
    /* its own slot, else an empty or stale one, else the one that expires first */
    for (int i = 0; i < WAYS && r == NULL; i++)
        if (set[i].key == key)
            r = &set[i];
    for (int i = 0; i < WAYS && r == NULL; i++)
        if (set[i].key == 0 || !live(set[i].until, now))
            r = &set[i];
    if (r == NULL) {
        r = &set[0];
        for (int i = 1; i < WAYS; i++)
            if ((int)((unsigned)set[i].until - (unsigned)r->until) < 0)
                r = &set[i];
        if (t == small && __atomic_add_fetch(&evicted, 1, __ATOMIC_RELAXED) == SMALL / 4)
            grow();
    }
    put(r, key, (int)((unsigned)now + (unsigned)(ttl.tv_sec * 1000 + ttl.tv_nsec / 1000000)));
}

static void forget_in(struct regular *t, uint64_t h1, uint64_t key)
{
    struct regular *set = set_of(t, h1);
    for (int i = 0; i < WAYS; i++) {
        struct regular *r = &set[i];
        if (r->key != key)
            continue;
        put(r, 0, 0);
        if (r->key == key)      /* a slot being filled is missed: */
            backing_regular_forget_all();   /* then every name is forgotten */
    }
}

/* This process removed or renamed path on mnt. */
void backing_regular_forget(int mnt, const char *path)
{
    if (!__atomic_load_n(&any, __ATOMIC_RELAXED))
        return;
    uint64_t h1, h2;
    hash2(mnt, path, &h1, &h2);
    uint64_t key = key_of(h2);
    forget_in(small, h1, key);  /* both: a thread may still be reading small */
    struct regular *b = __atomic_load_n(&big, __ATOMIC_ACQUIRE);
    if (b)
        forget_in(b, h1, key);
}

/* A directory this process removed, renamed or changed the rights of: no name stays. */
void backing_regular_forget_all(void)
{
    __atomic_add_fetch(&epoch, 1, __ATOMIC_RELEASE);
}
