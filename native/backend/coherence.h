/*
 * How every process's caches hear of changes (the shared mode): a table of change counters
 * in shared memory that the server owns and bumps after each operation that changes a name
 * (server/coherence.c), mapped by every client (backend/shared.c: its memfd comes with each
 * connection's region, or from W_COHERENCE). A process keeps attributes, missing names, open decisions and
 * listings (vfs/attrcache.c, shared.c) stamped with coherence_stamp() of their path as it
 * was before it asked; an answer whose stamp has changed since is not used.
 *
 * The stamp of a path sums the counters it depends on: its own ("self": its attributes,
 * whether it exists, its listing if a directory) and, for each directory above it, the
 * counter of what lies below that name ("below": bumped when the name is removed, renamed,
 * made, or its permissions change). A file created in /d bumps self[/d/f], below[/d/f] and
 * self[/d]: the answers about /d and /d/f are forgotten, those about /d's other entries and
 * everything elsewhere stay. Counters only grow, so a sum that changed is a change; names
 * that share a slot (hashed) only forget each other's answers more often.
 *
 * Changes to a passthrough file never reach the server: the kernel makes them. The process
 * that made one tells the server (W_WRITTEN, a round trip: vfs/passthrough.c), an attribute
 * change through the fd at once, written data at the fd's last close (close-to-open as
 * NFS), and the server bumps written[] before it answers. Only the server writes the table: its memfd is sealed
 * against writes once the server has mapped it (F_SEAL_FUTURE_WRITE) and clients get a
 * read-only fd, so no client can turn another's caches stale or make its calls fail.
 */
#ifndef LDPFUSE_COHERENCE_H
#define LDPFUSE_COHERENCE_H
#include <stdint.h>
#include <string.h>
#include <time.h>

#define COH_SLOTS 4096          /* power of two */
#define COH_MAGIC 0x6c6470636f683035ull

/*
 * The FS thread's progress, beside the counters because every client maps this table: a
 * class that is not thread_safe is served by one thread (server/serve.c), so a method
 * stuck there holds up every call. The FS thread writes busy_since (CLOCK_MONOTONIC, ns)
 * when it takes a request and 0 when it has finished it. While it has been in one request
 * longer than stuck_after_ns (op_timeout: a call behind it has timed out), it is stuck: a
 * request that waits behind it gives up after a short wait (CHAN_STUCK_MS), not its own
 * whole op_timeout; the request finished ends that. Only the slow path reads it (a wait
 * that slept), so a round trip pays nothing; on its own cache line, so the FS thread's
 * writes do not disturb the counters' readers. one_thread is 0 for a thread_safe class (a
 * thread per client: a stuck method holds up only its caller). The server writes all
 * three; no client can.
 */
struct coh_fs_thread {
    uint64_t one_thread;
    uint64_t busy_since;
    uint64_t stuck_after_ns;    /* op_timeout; 0: never stuck */
} __attribute__((aligned(64)));

struct coherence {
    uint64_t magic;
    uint64_t global;            /* every answer of every process */
    uint64_t changes;           /* bumped before any counter below is: every change */
    uint64_t self[COH_SLOTS];
    uint64_t below[COH_SLOTS];
    uint64_t written[COH_SLOTS];    /* a passthrough file changed (W_WRITTEN) */
    uint64_t opened[COH_SLOTS];     /* opened for writing without O_TRUNC: the class may have
                                       changed which file the name leads to (an overlay's
                                       copy-up); read by open decisions only, never by
                                       notify: no data or attribute changed */
    struct coh_fs_thread fs;
};

static inline uint64_t coh_step(uint64_t h, unsigned char c)
{
    return (h ^ c) * 1099511628211ULL;
}

static inline uint64_t coh_seed(int mnt)
{
    return 1469598103934665603ULL ^ (uint64_t)mnt;
}

static inline uint64_t coh_get(const uint64_t *p)
{
    return __atomic_load_n(p, __ATOMIC_ACQUIRE);
}

/* Is the FS thread of table t stuck (in one request for longer than op_timeout)? */
static inline int coh_fs_stuck(const struct coherence *t)
{
    if (t == NULL || !coh_get(&t->fs.one_thread))
        return 0;
    uint64_t since = coh_get(&t->fs.busy_since), after = coh_get(&t->fs.stuck_after_ns);
    if (since == 0 || after == 0)
        return 0;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    return ns > since && ns - since >= after;
}

/* The stamp of an answer about path (an FS path, "/" = the mount's root); with written
 * 0, of what does not change when the file's data is written past the server (which file
 * a name leads to: shared.c's open decisions). */
/* The walk both stamps share: the global counter plus the below[] counter of each
 * directory above path (an FS path, "/" = the mount's root); *slot is path's own slot. */
static inline uint64_t coh_walk_above(const struct coherence *t, int mnt, const char *path, unsigned *slot)
{
    uint64_t h = coh_seed(mnt), s = coh_get(&t->global);
    const char *p = path;
    if (*p == '/') {
        h = coh_step(h, '/');
        p++;
        if (*p)
            s += coh_get(&t->below[h & (COH_SLOTS - 1)]);     /* the root, above it */
    }
    for (; *p; p++) {
        if (*p == '/')
            s += coh_get(&t->below[h & (COH_SLOTS - 1)]);     /* each directory above */
        h = coh_step(h, (unsigned char)*p);
    }
    *slot = (unsigned)(h & (COH_SLOTS - 1));
    return s;
}

static inline uint64_t coherence_stamp_of(const struct coherence *t, int mnt, const char *path, int written)
{
    unsigned i;
    uint64_t s = coh_walk_above(t, mnt, path, &i);
    return s + coh_get(&t->self[i]) + (written ? coh_get(&t->written[i]) : 0);
}

static inline uint64_t coherence_stamp(const struct coherence *t, int mnt, const char *path)
{
    return coherence_stamp_of(t, mnt, path, 1);
}

/* The stamp of which file path leads to (backend/shared.c's open decisions): its answers'
 * stamp without the data written past the server, with the opens for writing that may have
 * copied it up (opened[]). */
static inline uint64_t coherence_stamp_decision(const struct coherence *t, int mnt, const char *path)
{
    unsigned i;
    uint64_t s = coh_walk_above(t, mnt, path, &i);
    return s + coh_get(&t->self[i]) + coh_get(&t->opened[i]);
}

/* The stamp of which directory path (an FS path) leads to and who may reach it: what lies
 * below it and below each directory above it (bumped when one of them is removed,
 * renamed, or its permissions change), not its listing. vfs/backing_dirs.c keeps open
 * directories of backing trees by it. */
static inline uint64_t coherence_stamp_below(const struct coherence *t, int mnt, const char *path)
{
    unsigned i;
    uint64_t s = coh_walk_above(t, mnt, path, &i);
    return s + coh_get(&t->below[i]);
}

/* The slot of the first len bytes of path. */
static inline unsigned coh_slot(int mnt, const char *path, size_t len)
{
    uint64_t h = coh_seed(mnt);
    for (size_t i = 0; i < len; i++)
        h = coh_step(h, (unsigned char)path[i]);
    return (unsigned)(h & (COH_SLOTS - 1));
}

/* The slot of path's parent directory ("/" for "/x" and for "/"). */
static inline unsigned coh_parent_slot(int mnt, const char *path)
{
    const char *slash = strrchr(path, '/');
    size_t len = slash && slash != path ? (size_t)(slash - path) : 1;
    return coh_slot(mnt, path, len);
}
#endif
