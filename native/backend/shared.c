/*
 * The shared backend (--mode shared): every operation is a request to the one file system
 * process that ldpfuse-run started (backend/wire.h), over a channel of this thread
 * (backend/channel.c: shared memory and a futex, with the unix socket beside it for
 * credentials, fds and what does not fit). No Python in this process at all, so any
 * program, and a Python host of any version, works.
 *
 * Each thread makes its own channel at its first operation, so threads never queue behind
 * each other; a forked child makes its own. Passthrough opens come back as the lower fd
 * itself (SCM_RIGHTS): data still never leaves the kernel. If the server is gone, every
 * call fails with EIO at once; a call it does not answer within op_timeout fails with EIO
 * and one log line naming the method, the path and the timeout; calls behind a stuck FS
 * thread fail sooner (channel.c), with one log line per process in a row.
 * What this process caches (attributes, missing names, open decisions, listings) is
 * stamped with the server's change counters (backend/coherence.h, mapped at the first
 * answer kept), so every process hears of every change at once.
 */
#include "../ldpfuse.h"
#include "coherence.h"
#include "wire.h"
#include "channel.h"
#include "fifo_dir.h"
#include <pthread.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/sysmacros.h>
#include <fcntl.h>
#include <time.h>
#include <limits.h>

static int gone_logged;

struct call {
    struct wire_req rq;
    const char *path, *path2;
    const void *data;
    size_t data_len;
    void *out;              /* response data goes here (up to out_cap) */
    size_t out_cap, out_len;
    char *out_alloc;        /* or, if out is NULL, into a malloc'ed buffer */
    int fd;                 /* an fd that came with the response, or -1 */
    int keep_on_exec;       /* that fd without close-on-exec (an open without O_CLOEXEC) */
    uint64_t fh;
};


/* A request given up at op_timeout (backend/channel.c): one line naming it. */
static void log_timed_out(const struct call *c)
{
    unsigned op = c->rq.op;
    const char *name = wire_op_name(op);
    ldp_log(LOG_ERROR, "%s %s: no answer from the file system in %g s (-o op_timeout): EIO", name,
            c->path, channel_op_timeout());
}

/* A request given up sooner, the FS thread being stuck (channel.c): one line the first
 * time in a row, not one per call of a program that goes on calling. */
static int stuck_logged;

static void log_stuck(const struct call *c)
{
    if (stuck_logged)
        return;
    stuck_logged = 1;
    unsigned op = c->rq.op;
    const char *name = wire_op_name(op);
    ldp_log(LOG_ERROR, "%s %s: the file system is still in a method that did not answer a call in "
            "%g s (-o op_timeout): EIO, and so for this process's calls until it answers one", name,
            c->path, channel_op_timeout());
}

static int refused_logged;

/* --stats (LDPFUSE_STATS): every request tells the server how long the one before it took
 * as its caller saw it, so the launcher can tell time in the file system from transport. */
static int stats_on(void)
{
    static int on = -1;
    if (UNLIKELY(on < 0)) {
        const char *e = getenv("LDPFUSE_STATS");
        on = e && *e && strcmp(e, "0") != 0;
    }
    return on;
}

/* The caller's effective ids, sent with each request: asked again only when this process
 * changes its credentials (interpose/creds.c, as vfs/backing.c's backing_caller_served):
 * a geteuid() and a getegid() per request were 4 of a Python reader's system calls per
 * small file (bench/NOTES.md). As there, a signal handler's request may come between any
 * two instructions: the ids are stored before ids_gen says they are good (plain stores
 * may be put in any order: uid 0 in a request of a thread's first call). */
static TLS unsigned ids_gen;
static TLS uint32_t ids_uid, ids_gid;

static void caller_ids(uint32_t *uid, uint32_t *gid)
{
    unsigned gen = __atomic_load_n(&ldp_creds_gen, __ATOMIC_ACQUIRE);
    if (UNLIKELY(__atomic_load_n(&ids_gen, __ATOMIC_RELAXED) != gen)) {
        uint32_t u = (uint32_t)geteuid(), g = (uint32_t)getegid();
        __atomic_store_n(&ids_uid, u, __ATOMIC_RELAXED);
        __atomic_store_n(&ids_gid, g, __ATOMIC_RELAXED);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        __atomic_store_n(&ids_gen, gen, __ATOMIC_RELAXED);
        *uid = u;
        *gid = g;
        return;
    }
    *uid = __atomic_load_n(&ids_uid, __ATOMIC_RELAXED);
    *gid = __atomic_load_n(&ids_gid, __ATOMIC_RELAXED);
}

static int post(int op, int mnt, const char *path, int64_t a, const uint64_t *fh, int64_t b, int64_t c);
static uint64_t sh_stamp(int mnt, const char *path);

static int64_t xact(struct call *c)
{
    c->fd = -1;
    c->out_len = 0;
    c->out_alloc = NULL;
    size_t pl = strlen(c->path), p2l = c->path2 ? strlen(c->path2) : 0;
    c->rq.path_len = (uint32_t)pl;
    c->rq.path2_len = (uint32_t)p2l;
    c->rq.data_len = (uint32_t)c->data_len;
    c->rq.len = (uint32_t)(pl + p2l + c->data_len);
    caller_ids(&c->rq.uid, &c->rq.gid);
    struct iovec iov[3] = {
        { (void *)c->path, pl }, { (void *)c->path2, p2l }, { (void *)c->data, c->data_len },
    };
    struct channel *ch = channel_begin();
    if (ch == NULL)
        goto gone;
    struct wire_resp resp;
    uint64_t t0 = 0;
    if (UNLIKELY(stats_on())) {     /* --stats: the round trip as this caller sees it */
        c->rq.prev_us = channel_last_us(ch);
        t0 = chan_now_ns();
    }
    int w = channel_send(ch, &c->rq, iov, 3);
    if (w == 0)
        w = channel_wait(ch, &resp, &c->fd, c->keep_on_exec);
    if (UNLIKELY(t0) && w == 0) {
        uint64_t us = (chan_now_ns() - t0 + 999) / 1000;
        channel_note_us(ch, us > UINT32_MAX ? UINT32_MAX : (uint32_t)us);
    }
    if (w == CHAN_REFUSED) {
        int e = channel_refused(ch);
        channel_fail(ch);       /* refused for who it is now: the next call asks again */
        if (!refused_logged) {
            refused_logged = 1;
            ldp_log(LOG_ERROR, "the file system refused this process (uid %u): %s", (unsigned)geteuid(),
                    e == EACCES ? "it serves only the launcher's user unless -o allow_other (allow_root for root)"
                                : strerror(e));
        }
        return -e;
    }
    if (w == CHAN_TIMED_OUT || w == CHAN_STUCK) {
        channel_fail(ch);       /* the next call makes a fresh channel */
        if (w == CHAN_STUCK)
            log_stuck(c);
        else
            log_timed_out(c);
        return -EIO;
    }
    if (UNLIKELY(stuck_logged))
        stuck_logged = 0;
    if (w < 0)
        goto fail;
    size_t len = resp.len;
    if (len > 0) {
        size_t take = len;
        char *dst;
        if (c->out) {
            dst = c->out;
            if (take > c->out_cap)
                take = c->out_cap;      /* more than asked: keep what fits */
        } else {
            dst = c->out_alloc = malloc(len);
        }
        if (dst == NULL || channel_data(ch, &resp, dst, take) < 0) {
            free(c->out_alloc);
            c->out_alloc = NULL;
            goto fail;
        }
        c->out_len = take;
    }
    c->fh = resp.fh;
    channel_end(ch);
    return resp.result;
fail:
    if (c->fd >= 0)
        REAL(close)(c->fd);
    c->fd = -1;
    channel_fail(ch);
gone:
    if (!gone_logged) {
        gone_logged = 1;
        ldp_log(LOG_ERROR, "the file system process does not answer: mount operations fail with EIO");
    }
    return -EIO;
}

#define CALL(op_, mnt_, path_) struct call c = { .rq = { .op = (op_), .mnt = (uint16_t)(mnt_) }, .path = (path_) }

static int sh_getattr(int mnt, const char *path, const uint64_t *fh, struct stat *st)
{
    CALL(W_GETATTR, mnt, path);
    if (fh) {
        c.rq.has_fh = 1;
        c.rq.fh = *fh;
    }
    c.out = st;
    c.out_cap = sizeof *st;
    int64_t r = xact(&c);
    if (r >= 0 && c.out_len != sizeof *st)
        r = -EIO;
    return (int)r;
}

static int sh_readlink(int mnt, const char *path, char *buf, size_t size)
{
    CALL(W_READLINK, mnt, path);
    c.rq.a = (int64_t)size;
    c.out = buf;
    c.out_cap = size;
    int64_t r = xact(&c);
    return r < 0 ? (int)r : (int)c.out_len;
}

static int simple(int op, int mnt, const char *path, const char *path2, int64_t a, int64_t b, const uint64_t *fh)
{
    CALL(op, mnt, path);
    c.path2 = path2;
    c.rq.a = a;
    c.rq.b = b;
    if (fh) {
        c.rq.has_fh = 1;
        c.rq.fh = *fh;
    }
    return (int)xact(&c);
}

static int sh_mknod(int mnt, const char *path, mode_t mode, dev_t dev)
{
    return simple(W_MKNOD, mnt, path, NULL, mode, (int64_t)dev, NULL);
}
static int sh_mkdir(int mnt, const char *path, mode_t mode)
{
    return simple(W_MKDIR, mnt, path, NULL, mode, 0, NULL);
}
/* A name this process removed (unlink, rmdir) is kept as missing, from the
 * stamp the server read just after (0: another change may have come in between), so that
 * the create cycle's next open(O_CREAT) of it asks nothing before it creates. */
static int gone(int op, int mnt, const char *path, const char *path2)
{
    uint64_t own = attrcache_stamp(mnt, NULL);
    CALL(op, mnt, path);
    c.path2 = path2;
    int r = (int)xact(&c);
    if (r == 0 && c.fh != 0)
        attrcache_put(mnt, path, NULL, own + c.fh);
    return r;
}
static int sh_unlink(int mnt, const char *path)
{
    return gone(W_UNLINK, mnt, path, NULL);
}
static int sh_rmdir(int mnt, const char *path)
{
    return gone(W_RMDIR, mnt, path, NULL);
}
static int sh_symlink(int mnt, const char *linkpath, const char *target)
{
    return simple(W_SYMLINK, mnt, linkpath, target, 0, 0, NULL);
}
static int sh_rename(int mnt, const char *from, const char *to)
{
    /* not gone(): renaming a name onto itself, or onto another link of its file, leaves
     * it where it was */
    return simple(W_RENAME, mnt, from, to, 0, 0, NULL);
}
static int sh_link(int mnt, const char *newpath, const char *oldpath)
{
    return simple(W_LINK, mnt, newpath, oldpath, 0, 0, NULL);
}
static int sh_chmod(int mnt, const char *path, mode_t mode)
{
    return simple(W_CHMOD, mnt, path, NULL, mode, 0, NULL);
}
static int sh_chown(int mnt, const char *path, uid_t uid, gid_t gid)
{
    return simple(W_CHOWN, mnt, path, NULL, uid == (uid_t)-1 ? -1 : (int64_t)uid,
                  gid == (gid_t)-1 ? -1 : (int64_t)gid, NULL);
}
static int sh_truncate(int mnt, const char *path, off_t len, const uint64_t *fh)
{
    return simple(W_TRUNCATE, mnt, path, NULL, len, 0, fh);
}
static int sh_truncate_uncached(int mnt, const char *path, off_t len)
{
    return simple(W_TRUNCATE, mnt, path, NULL, len, 1, NULL);     /* b = 1: unless cached */
}

/* ---- open decisions: a passthrough open names the lower file it chose; for attr_timeout
 * this process opens that file itself for the same path and flags (its own rights apply,
 * as they would in the server), with no round trip, and before any lookup (decision_open,
 * the backend's open_decided). They live as long as the attribute cache's answers,
 * stamped the same way but for the file's data (decision_stamp): a change any process
 * makes to the name through the mount, an open of it for writing (the class may have
 * copied it up: coherence.h opened[]), or a child this one waited for, forgets it; a
 * write to the file past the server (W_WRITTEN) does not, as it leaves the name leading
 * to the same file. */
#define OPENCACHE_SLOTS 16384     /* as many as the attribute cache (vfs/attrcache.c) */
#define DECISION_WAYS 4
struct open_decision {
    int mnt, flags;
    uint64_t gen;           /* attrcache_stamp() of the path when the server was asked */
    char *path, *lower;
    struct timespec expires;
};
static struct open_decision decisions[OPENCACHE_SLOTS];
static pthread_mutex_t decisions_lock = PTHREAD_MUTEX_INITIALIZER;
static double decision_ttl = -1;

#define DECISION_FLAGS (O_ACCMODE | O_TRUNC | O_APPEND | O_DIRECT | O_SYNC | O_DSYNC | O_NOATIME | O_DIRECTORY | O_NOFOLLOW)

static TLS int decisions_held;      /* this thread holds decisions_lock: a signal handler's open asks the server */

static uint64_t decision_stamp(int mnt, const char *path)
{
    struct coherence *t = shared_coherence();
    return attrcache_stamp_from(t ? coherence_stamp_decision(t, mnt, path) : 0);
}

static int later(const struct timespec *a, const struct timespec *b)
{
    return a->tv_sec > b->tv_sec || (a->tv_sec == b->tv_sec && a->tv_nsec > b->tv_nsec);
}

static unsigned decision_slot(int mnt, const char *path, int flags)
{
    unsigned h = 2166136261u ^ (unsigned)mnt ^ ((unsigned)(flags & DECISION_FLAGS) << 7);
    for (const char *p = path; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    return h % OPENCACHE_SLOTS;
}

static int decisions_on(void)
{
    if (decision_ttl < 0) {
        const char *t = getenv("LDPFUSE_ATTR_TIMEOUT");
        decision_ttl = t && *t ? strtod(t, NULL) : 1.0;
    }
    return decision_ttl > 0;
}

/* WANT_LOWER, or 0: should the server name the lower file of this passthrough open?
 * Not before this process has the table of change counters (its first request, a
 * `cat`'s only one): the answer is stamped without it and so not kept anyway, and the
 * name costs the server a readlink on that process's way. */
static int want_lower(void)
{
    return decisions_on() && shared_coherence() != NULL ? WANT_LOWER : 0;
}

static void decision_keep(int mnt, const char *path, int flags, const char *lower, size_t len, uint64_t gen)
{
    if (!decisions_on() || decisions_held)
        return;     /* held: a signal handler's open on a thread that keeps one already */
    char *p = strdup(path), *l = malloc(len + 1);
    if (p == NULL || l == NULL) {
        free(p);
        free(l);
        return;
    }
    memcpy(l, lower, len);
    l[len] = '\0';
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double end = (double)now.tv_sec + now.tv_nsec / 1e9 + decision_ttl;
    decisions_held = 1;
    pthread_mutex_lock(&decisions_lock);
    /* DECISION_WAYS slots per set: this name's, else an empty one, else the one that
     * expires first */
    struct open_decision *set = &decisions[decision_slot(mnt, path, flags) & ~(DECISION_WAYS - 1u)], *d = set;
    for (struct open_decision *e = set; e < set + DECISION_WAYS; e++) {
        if (e->path && e->mnt == mnt && e->flags == (flags & DECISION_FLAGS) && strcmp(e->path, path) == 0) {
            d = e;
            break;
        }
        if (d->path && (!e->path || later(&d->expires, &e->expires)))
            d = e;
    }
    free(d->path);
    free(d->lower);
    d->mnt = mnt;
    d->flags = flags & DECISION_FLAGS;
    d->path = p;
    d->lower = l;
    d->gen = gen;
    d->expires.tv_sec = (time_t)end;
    d->expires.tv_nsec = (long)((end - (double)(time_t)end) * 1e9);
    pthread_mutex_unlock(&decisions_lock);
    decisions_held = 0;
}

/* The fd of the lower file (close-on-exec as flags say), or -1 with errno kept: ask the
 * server. Needs no guard_enter (a signal handler's open on this thread while it holds the
 * lock asks the server instead). The backend's open_decided, tried before any lookup. */
static int decision_open(int mnt, const char *path, int flags)
{
    char lower[PATH_MAX];
    int found = 0;
    if (!decisions_on() || decisions_held)
        return -1;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t gen = decision_stamp(mnt, path);
    decisions_held = 1;
    pthread_mutex_lock(&decisions_lock);
    struct open_decision *d = &decisions[decision_slot(mnt, path, flags) & ~(DECISION_WAYS - 1u)];
    for (int way = 0; way < DECISION_WAYS && !found; way++, d++)
        if (d->path && d->gen == gen && d->mnt == mnt && d->flags == (flags & DECISION_FLAGS) &&
            strcmp(d->path, path) == 0 && later(&d->expires, &now) && strlen(d->lower) < sizeof lower) {
            strcpy(lower, d->lower);
            found = 1;
        }
    pthread_mutex_unlock(&decisions_lock);
    decisions_held = 0;
    if (!found)
        return -1;
    int saved = errno;
    int fd = REAL(open)(lower, flags, 0);
    errno = saved;
    return fd;      /* failed (gone, refused): the server says what it is now */
}

static void brought_keep(int mnt, const char *path, int fd, int cache, uint64_t token, uint64_t stamp,
                         const struct wire_known *known);

/* The stamp a cache brought filled whole is known whole at (brought.whole_stamp): the
 * name's, taken before the request, so that a change during it is a change (0: none yet). */
static uint64_t stamp_before(int mnt, const char *path)
{
    uint64_t s = sh_stamp(mnt, path);
    return s ? attrcache_stamp_from(s) : 0;
}

static int open_common(int op, int mnt, const char *path, int64_t a, int64_t b, struct open_result *res)
{
    uint64_t gen = decision_stamp(mnt, path);     /* a change during the call: not kept */
    int want_cache = op == W_OPEN && !pcache_held(mnt, path);
    uint64_t before = want_cache ? stamp_before(mnt, path) : 0;
    CALL(op, mnt, path);
    c.rq.a = a;
    c.rq.b = op == W_OPEN ? want_lower() | (want_cache ? WANT_CACHE : 0) : b;
    c.keep_on_exec = !((op == W_OPEN ? a : b) & O_CLOEXEC);
    int64_t r = xact(&c);
    if (op == W_OPEN && r >= 0 && (r & OPEN_CACHE_BROUGHT)) {
        /* a cached open: its page cache, for pcache_open to take */
        struct wire_open_cache oc;
        if (c.fd >= 0 && c.out_len == sizeof oc) {
            memcpy(&oc, c.out_alloc, sizeof oc);
            brought_keep(mnt, path, c.fd, oc.cache, oc.cache_token, before, oc.noted ? &oc.known : NULL);
        } else if (c.fd >= 0) {
            REAL(close)(c.fd);
        }
        c.fd = -1;
        c.out_len = 0;
        r &= ~(int64_t)OPEN_CACHE_BROUGHT;
    }
    res->passthrough_fd = c.fd;
    res->fd_flags_set = 1;
    res->fh = c.fh;
    res->open_flags = 0;
    if (r < 0 && c.fd >= 0) {
        REAL(close)(c.fd);
        res->passthrough_fd = -1;
    }
    if (op == W_OPEN && r >= 0 && c.fd >= 0 && c.out_len > 0)
        decision_keep(mnt, path, (int)a, c.out_alloc, c.out_len, gen);
    free(c.out_alloc);
    if (r < 0)
        return (int)r;
    res->open_flags = (unsigned)r;      /* the server answers an open with its OPEN_* flags */
    return 0;
}
static int sh_open(int mnt, const char *path, int flags, struct open_result *res)
{
    /* tried again here: the lookup may have resolved links on the way (the decision is
     * kept under the path the open was made with) */
    int fd = decision_open(mnt, path, flags);
    if (fd >= 0) {
        res->passthrough_fd = fd;
        res->fd_flags_set = 1;
        res->fh = 0;
        return 0;
    }
    return open_common(W_OPEN, mnt, path, flags, 0, res);
}
static int sh_create(int mnt, const char *path, mode_t mode, int flags, struct open_result *res)
{
    return open_common(W_CREATE, mnt, path, mode, flags, res);
}

/* The page cache a cached open brought along (W_CREATE_OPEN, WANT_CACHE), kept for the
 * cache_open that follows it on this thread (vfs/pagecache.c, pcache_open): one round trip
 * less per first open of a file. One at a time; one left over (an open that failed after)
 * is let go of when the next comes, or at fork in the child (the parent's). */
static TLS struct {     /* small: the preload's TLS must fit ld.so's static TLS
                                 surplus (an LD_AUDIT exec loads it there) */
    int fd, fresh, mnt;         /* fresh: 1 new, 2 new with its known state noted (known) */
    uint64_t token;
    struct wire_known known;    /* the server's note of a new one's state (wire.h) */
    uint64_t whole_stamp;       /* the server filled it with the file whole: the stamp before
                                   the request (0: not whole, or no stamp) */
    char *path;                 /* malloc'd */
} brought = { .fd = -1 };
static TLS uint64_t t_whole_stamp;    /* of the cache sh_cache_open just gave */
static TLS int t_noted;                /* it came with the server's note: brought.known */

static void brought_drop(int tell_server)
{
    if (brought.fd < 0)
        return;
    REAL(close)(brought.fd);
    brought.fd = -1;
    if (tell_server)
        post(W_CACHE_CLOSE, brought.mnt, brought.path ? brought.path : "/", 0, &brought.token, 0, 0);
    free(brought.path);
    brought.path = NULL;
}

/* cache: the answer's (wire.h: 2 new, 3 new and filled whole) */
static void brought_keep(int mnt, const char *path, int fd, int cache, uint64_t token, uint64_t stamp,
                         const struct wire_known *known)
{
    brought_drop(1);
    brought.fd = fd;
    brought.fresh = cache >= 2 ? (known ? 2 : 1) : 0;
    if (known && cache >= 2)
        brought.known = *known;
    brought.whole_stamp = cache == 3 ? stamp : 0;
    brought.mnt = mnt;
    brought.token = token;
    brought.path = strdup(path);
    if (brought.path == NULL)
        brought_drop(1);    /* the server lets go of it: the open asks again */
}

static TLS uint64_t t_answer_stamp;

static uint64_t sh_answer_stamp(void)
{
    uint64_t s = t_answer_stamp;
    t_answer_stamp = 0;
    return s;
}

/* open() of a name this process knows nothing about: the server looks it up and opens
 * (or, O_CREAT, creates) it, one round trip instead of a lookup and then an open or a
 * create. A passthrough open's decision is kept as W_OPEN's is. */
static int sh_create_open(int mnt, const char *path, mode_t mode, int flags, int parent_is_dir,
                          struct open_result *res, struct stat *st, int *outcome)
{
    struct {
        struct wire_create_open ans;
        char lower[PATH_MAX];
    } got = { .ans = { .outcome = CO_ASK } };
    struct wire_create_open *ans = &got.ans;
    uint64_t gen = decision_stamp(mnt, path);     /* a change during the call: not kept */
    int had_table = sh_stamp(mnt, path) != 0;
    uint64_t before = stamp_before(mnt, path);
    int held = pcache_held(mnt, path);      /* before the request: it may let go of a kept cache */
    CALL(W_CREATE_OPEN, mnt, path);
    c.rq.a = mode;
    c.rq.b = flags;
    c.rq.c = (parent_is_dir ? WANT_DIR_OK : 0) | want_lower() | (held ? 0 : WANT_CACHE);
    c.keep_on_exec = !(flags & O_CLOEXEC);
    c.out = &got;
    c.out_cap = sizeof got;
    int64_t r = xact(&c);
    if (c.fd >= 0 && c.out_len >= sizeof *ans && ans->cache) {
        /* not a passthrough file: the page cache, for pcache_open to take */
        if (r >= 0)
            brought_keep(mnt, path, c.fd, ans->cache, ans->cache_token,
                         had_table ? before : ans->stamp ? attrcache_stamp_from(ans->stamp) : 0,
                         ans->noted ? &ans->known : NULL);
        else
            REAL(close)(c.fd);
        c.fd = -1;
    }
    res->passthrough_fd = c.fd;
    res->fd_flags_set = 1;
    res->fh = c.fh;
    res->open_flags = r >= 0 ? (unsigned)r : 0;
    if (r < 0 && c.fd >= 0) {
        REAL(close)(c.fd);
        res->passthrough_fd = -1;
    }
    if (c.out_len < sizeof *ans) {      /* an error before any answer: the core asks */
        if (res->passthrough_fd >= 0)
            REAL(close)(res->passthrough_fd);
        res->passthrough_fd = -1;
        *outcome = CO_ASK;
        return r < 0 ? (int)r : -EIO;
    }
    *outcome = ans->outcome;
    *st = ans->st;
    t_answer_stamp = had_table ? 0 : ans->stamp;     /* no table when it asked: the server's */
    if (r >= 0 && ans->outcome == CO_OPENED && res->passthrough_fd >= 0 && c.out_len > sizeof *ans)
        decision_keep(mnt, path, flags, got.lower, c.out_len - sizeof *ans, gen);
    return r < 0 ? (int)r : 0;
}

/* Reads and writes go in pieces that fit the region (the server answers no more, and
 * takes no bigger body: server/request.c); a short piece ends a read, as the FS said. */
#define SH_PIECE (CHAN_BUF & ~(size_t)4095)

static ssize_t sh_read(int mnt, const char *path, char *buf, size_t size, off_t off, uint64_t fh)
{
    size_t done = 0;
    do {
        size_t n = size - done < SH_PIECE ? size - done : SH_PIECE;
        CALL(W_READ, mnt, path);
        c.rq.a = (int64_t)n;
        c.rq.b = off + (off_t)done;
        c.rq.has_fh = 1;
        c.rq.fh = fh;
        c.out = buf + done;
        c.out_cap = n;
        int64_t r = xact(&c);
        if (r < 0)
            return done ? (ssize_t)done : (ssize_t)r;
        done += c.out_len;
        if (c.out_len < n)
            break;
    } while (done < size);
    return (ssize_t)done;
}

/* W_WRITE at off, or (at != NULL) W_APPEND, whose first piece's answer tells where the
 * end was (*at): in region-sized pieces; a short piece ends it, as the FS said. */
static ssize_t write_pieces(int op, int mnt, const char *path, const char *buf, size_t size, off_t off,
                            uint64_t fh, off_t *at)
{
    size_t done = 0;
    do {
        size_t n = size - done < SH_PIECE ? size - done : SH_PIECE;
        CALL(op, mnt, path);
        if (op == W_WRITE)
            c.rq.b = off + (off_t)done;
        c.rq.has_fh = 1;
        c.rq.fh = fh;
        c.data = buf + done;
        c.data_len = n;
        int64_t r = xact(&c);
        if (r < 0)
            return done ? (ssize_t)done : (ssize_t)r;
        if (at && done == 0)
            *at = (off_t)c.fh;
        done += (size_t)r < n ? (size_t)r : n;
        if ((size_t)r < n)
            break;
    } while (done < size);
    return (ssize_t)done;
}
static ssize_t sh_write(int mnt, const char *path, const char *buf, size_t size, off_t off, uint64_t fh)
{
    return write_pieces(W_WRITE, mnt, path, buf, size, off, fh, NULL);
}
static ssize_t sh_append(int mnt, const char *path, const char *buf, size_t size, uint64_t fh, off_t *at)
{
    return write_pieces(W_APPEND, mnt, path, buf, size, 0, fh, at);
}

static int sh_statfs(int mnt, const char *path, struct statvfs *sv)
{
    CALL(W_STATFS, mnt, path);
    c.out = sv;
    c.out_cap = sizeof *sv;
    int64_t r = xact(&c);
    if (r >= 0 && c.out_len != sizeof *sv)
        r = -EIO;
    return (int)r;
}

static int sh_flush(int mnt, const char *path, uint64_t fh)
{
    return simple(W_FLUSH, mnt, path, NULL, 0, 0, &fh);
}
/* release, releasedir and a page cache's close are posted, as FUSE sends release without
 * waiting: close() has nothing to learn from them (flush, which close() does report, is
 * not posted). */
static int sh_release(int mnt, const char *path, int flags, uint64_t fh)
{
    return post(W_RELEASE, mnt, path, flags, &fh, 0, 0) ? 0 : -EIO;
}
static int sh_fsync(int mnt, const char *path, int datasync, uint64_t fh)
{
    return simple(W_FSYNC, mnt, path, NULL, datasync, 0, &fh);
}
/* ---- listings: a directory's readdir() answer is kept like the attributes (attr_timeout,
 * stamped with attrcache_stamp of the directory: forgotten at once when any process makes
 * or removes a name in it, or after a child this one waited for), so `ls`, `find` and
 * `make` list a directory once per attr_timeout, not once per opendir. A cached opendir
 * answers LISTING_FH without a round trip and its releasedir is local too. */
#define LISTING_SLOTS 64
#define LISTING_WAYS 4
#define LISTING_MAX (1u << 20)          /* bytes of names: a bigger one is not kept */
#define LISTING_FH 0xfffffffffffffff1ull
struct listing {
    int mnt;
    uint64_t gen;
    struct timespec expires;
    char *path;
    struct dirlist list;
};
static struct listing listings[LISTING_SLOTS];
static pthread_mutex_t listings_lock = PTHREAD_MUTEX_INITIALIZER;

static double cache_ttl(void)
{
    if (decision_ttl < 0) {
        const char *t = getenv("LDPFUSE_ATTR_TIMEOUT");
        decision_ttl = t && *t ? strtod(t, NULL) : 1.0;
    }
    return decision_ttl;
}

static struct listing *listing_find(int mnt, const char *path, uint64_t gen, const struct timespec *now)
{
    struct listing *set = &listings[decision_slot(mnt, path, 0) % LISTING_SLOTS & ~(LISTING_WAYS - 1u)];
    for (struct listing *l = set; l < set + LISTING_WAYS; l++)
        if (l->path && l->gen == gen && l->mnt == mnt && later(&l->expires, now) && strcmp(l->path, path) == 0)
            return l;
    return NULL;
}

static int listing_copy(int mnt, const char *path, struct dirlist *out)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int r = -1;
    uint64_t gen = attrcache_stamp(mnt, path);
    pthread_mutex_lock(&listings_lock);
    struct listing *l = listing_find(mnt, path, gen, &now);
    if (l) {
        r = 0;
        for (size_t i = 0; i < l->list.n && r == 0; i++) {
            const struct dirent_rec *e = &l->list.ents[i];
            if (dirlist_add(out, l->list.names + e->name_off, e->namelen, e->ino, e->type) < 0)
                r = -ENOMEM;
        }
    }
    pthread_mutex_unlock(&listings_lock);
    return r;
}

static void listing_keep(int mnt, const char *path, const struct dirlist *list, uint64_t gen)
{
    double ttl = cache_ttl();
    if (ttl <= 0 || list->names_len > LISTING_MAX)
        return;
    struct dirlist copy = { 0 };
    for (size_t i = 0; i < list->n; i++) {
        const struct dirent_rec *e = &list->ents[i];
        if (dirlist_add(&copy, list->names + e->name_off, e->namelen, e->ino, e->type) < 0) {
            dirlist_free(&copy);
            return;
        }
    }
    char *p = strdup(path);
    if (p == NULL) {
        dirlist_free(&copy);
        return;
    }
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    double end = (double)now.tv_sec + now.tv_nsec / 1e9 + ttl;
    pthread_mutex_lock(&listings_lock);
    struct listing *set = &listings[decision_slot(mnt, path, 0) % LISTING_SLOTS & ~(LISTING_WAYS - 1u)], *d = set;
    for (struct listing *l = set; l < set + LISTING_WAYS; l++) {
        if (l->path && l->mnt == mnt && strcmp(l->path, path) == 0) {
            d = l;
            break;
        }
        if (d->path && (!l->path || later(&d->expires, &l->expires)))
            d = l;
    }
    free(d->path);
    dirlist_free(&d->list);
    d->mnt = mnt;
    d->gen = gen;
    d->path = p;
    d->list = copy;
    d->expires.tv_sec = (time_t)end;
    d->expires.tv_nsec = (long)((end - (double)(time_t)end) * 1e9);
    pthread_mutex_unlock(&listings_lock);
}

static int opendir_call(int mnt, const char *path, uint64_t *fh)
{
    CALL(W_OPENDIR, mnt, path);
    int64_t r = xact(&c);
    *fh = c.fh;
    return (int)r;
}

static int readdir_call(int mnt, const char *path, uint64_t fh, struct dirlist *out)
{
    CALL(W_READDIR, mnt, path);
    c.rq.has_fh = 1;
    c.rq.fh = fh;
    int64_t r = xact(&c);
    const char *p = c.out_alloc, *end = p ? p + c.out_len : NULL;
    while (r >= 0 && p && p + sizeof(struct wire_dirent) <= end) {
        struct wire_dirent d;
        struct stat st;
        memcpy(&d, p, sizeof d);
        p += sizeof d;
        int plus = d.flags & WIRE_DIRENT_ATTRS;
        if (plus) {
            if (p + sizeof st > end) {
                r = -EIO;
                break;
            }
            memcpy(&st, p, sizeof st);
            p += sizeof st;
        }
        if (p + d.namelen > end || dirlist_add(out, p, d.namelen, d.ino, d.type) < 0 ||
            (plus && dirlist_attr(out, &st) < 0)) {
            r = -EIO;
            break;
        }
        p += d.namelen;
    }
    free(c.out_alloc);
    return (int)r;
}

static int sh_opendir(int mnt, const char *path, uint64_t *fh)
{
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    uint64_t gen = attrcache_stamp(mnt, path);
    pthread_mutex_lock(&listings_lock);
    struct listing *l = listing_find(mnt, path, gen, &now);
    pthread_mutex_unlock(&listings_lock);
    if (l) {
        *fh = LISTING_FH;
        return 0;
    }
    return opendir_call(mnt, path, fh);
}

static int sh_readdir(int mnt, const char *path, uint64_t fh, struct dirlist *out)
{
    if (fh == LISTING_FH) {
        int r = listing_copy(mnt, path, out);
        if (r != -1)
            return r;
        /* forgotten since the opendir: ask the file system after all */
        dirlist_free(out);
        uint64_t real;
        if ((r = opendir_call(mnt, path, &real)) < 0)
            return r;
        r = readdir_call(mnt, path, real, out);
        simple(W_RELEASEDIR, mnt, path, NULL, 0, 0, &real);
        return r;
    }
    uint64_t gen = attrcache_stamp(mnt, path);
    int r = readdir_call(mnt, path, fh, out);
    if (r >= 0)
        listing_keep(mnt, path, out, gen);
    return r;
}

static int sh_releasedir(int mnt, const char *path, uint64_t fh)
{
    if (fh == LISTING_FH)
        return 0;
    return post(W_RELEASEDIR, mnt, path, 0, &fh, 0, 0) ? 0 : -EIO;
}
static int sh_access(int mnt, const char *path, int mode)
{
    return simple(W_ACCESS, mnt, path, NULL, mode, 0, NULL);
}
static int sh_utimens(int mnt, const char *path, const struct timespec ts[2])
{
    CALL(W_UTIMENS, mnt, path);
    c.data = ts;
    c.data_len = ts ? 2 * sizeof ts[0] : 0;     /* none: "now" */
    return (int)xact(&c);
}
static int sh_setxattr(int mnt, const char *path, const char *name, const void *value, size_t size, int flags)
{
    CALL(W_SETXATTR, mnt, path);
    c.path2 = name;
    c.data = value;
    c.data_len = size;
    c.rq.a = flags;
    return (int)xact(&c);
}
static ssize_t sh_getxattr(int mnt, const char *path, const char *name, void *value, size_t size)
{
    CALL(W_GETXATTR, mnt, path);
    c.path2 = name;
    c.rq.a = (int64_t)size;
    c.out = value;
    c.out_cap = size;
    return (ssize_t)xact(&c);
}
static ssize_t sh_listxattr(int mnt, const char *path, char *list, size_t size)
{
    CALL(W_LISTXATTR, mnt, path);
    c.rq.a = (int64_t)size;
    c.out = list;
    c.out_cap = size;
    return (ssize_t)xact(&c);
}
static int sh_removexattr(int mnt, const char *path, const char *name)
{
    return simple(W_REMOVEXATTR, mnt, path, name, 0, 0, NULL);
}

/* The file's page cache, for a caller that opened it (fh: its open's handle) or, with no
 * handle, one that may open it for writing (a truncate): the server checks which. */
static int sh_cache_open(int mnt, const char *path, off_t size, const uint64_t *fh, int *fd, int *fresh,
                         uint64_t *token)
{
    if (brought.fd >= 0 && brought.mnt == mnt && brought.path && strcmp(brought.path, path) == 0) {
        *fd = brought.fd;       /* the open brought it */
        *fresh = brought.fresh != 0;
        *token = brought.token;
        t_whole_stamp = brought.whole_stamp;
        t_noted = brought.fresh == 2;
        brought.fd = -1;
        free(brought.path);
        brought.path = NULL;
        return 0;
    }
    t_whole_stamp = 0;
    t_noted = 0;
    CALL(W_CACHE_OPEN, mnt, path);
    c.rq.a = size;
    if (fh) {
        c.rq.has_fh = 1;
        c.rq.fh = *fh;
    }
    int64_t r = xact(&c);
    if (r < 0 || c.fd < 0) {
        if (c.fd >= 0)
            REAL(close)(c.fd);
        return r < 0 ? (int)r : -EIO;
    }
    *fd = c.fd;
    *fresh = r == 1;
    *token = c.fh;
    return 0;
}

/* After a cache_open that gave a new cache: the known state the server noted on it (0), or
 * -1: none (the caller notes it). Read once. */
static int sh_cache_known(int64_t *size, struct timespec *mtime)
{
    if (!t_noted)
        return -1;
    t_noted = 0;
    *size = brought.known.size;
    mtime->tv_sec = (time_t)brought.known.sec;
    mtime->tv_nsec = (long)brought.known.nsec;
    return 0;
}

static uint64_t sh_cache_whole_stamp(void)
{
    uint64_t s = t_whole_stamp;
    t_whole_stamp = 0;
    return s;
}

static void sh_cache_close(int mnt, const char *path, uint64_t token)
{
    post(W_CACHE_CLOSE, mnt, path, 0, &token, 0, 0);
}

/* A close that ends both the open and the process's hold on the page cache: one posted
 * request, not a release and then a cache close that waits for the release's answer. */
static void sh_release_cached(int mnt, const char *path, int flags, uint64_t fh, uint64_t token)
{
    post(W_RELEASE, mnt, path, flags, &fh, (int64_t)token, RELEASE_CACHE_TOO);
}

/* A request the server answers at once, and after what this thread posted before it: a
 * cache close of no token. */
static void sh_settle(void)
{
    uint64_t none = 0;
    simple(W_CACHE_CLOSE, 0, "/", NULL, 0, 0, &none);
}

/* FIFOs, sockets and devices never reach the FS's open, as with the kernel: a FIFO is a
 * real one the server keeps for it (the open blocks this process, as it would natively),
 * a device is the machine's own, a socket cannot be opened. */
static int sh_open_special(int mnt, const char *path, const struct stat *st, int flags)
{
    char real[PATH_MAX];
    if (S_ISFIFO(st->st_mode)) {
        CALL(W_FIFO, mnt, path);
        c.out = real;
        c.out_cap = sizeof real - 1;
        int64_t r = xact(&c);
        if (r < 0)
            return (int)r;
        real[c.out_len] = '\0';
    } else if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) {
        snprintf(real, sizeof real, "/dev/%s/%u:%u", S_ISCHR(st->st_mode) ? "char" : "block",
                 major(st->st_rdev), minor(st->st_rdev));
    } else {
        return -ENXIO;
    }
    if (S_ISFIFO(st->st_mode))
        return fifo_dir_checked(REAL(open)(real, flags | O_NOFOLLOW, 0));
    int fd = REAL(open)(real, flags, 0);
    if (fd < 0)
        return errno == ENOENT ? -ENXIO : -errno;
    return fd;
}


/* ---- coherence: the server's table of change counters (backend/coherence.h). Its memfd
 * comes with each connection's region (channel.c), and the first one is mapped; after fork
 * the child has it too, mapped read-only: only the server writes it. Before the first connection
 * the stamp is 0: the answer to a process's first request (which makes the connection) is
 * stamped without the table, so it is never used once the table is there. A connection
 * that brought none (mapping it failed) asks with W_COHERENCE; refused: 0, and the caches
 * hear only of this process's own changes, for attr_timeout. */
static struct coherence *coh;
static int coh_refused;
static int coh_offered;     /* a connection brought the table */
static pthread_mutex_t coh_lock = PTHREAD_MUTEX_INITIALIZER;

/* Map the table from fd (closed) unless one is mapped: 1 if there is one now. */
static int coh_adopt(int fd)
{
    void *m = MAP_FAILED;
    if (__atomic_load_n(&coh, __ATOMIC_ACQUIRE) == NULL && channel_memfd_ok(fd, sizeof *coh))
        m = mmap(NULL, sizeof *coh, PROT_READ, MAP_SHARED, fd, 0);   /* the server's alone to write */
    REAL(close)(fd);
    struct coherence *none = NULL;
    if (m != MAP_FAILED && (((struct coherence *)m)->magic != COH_MAGIC ||
                            !__atomic_compare_exchange_n(&coh, &none, (struct coherence *)m, 0,
                                                         __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)))
        munmap(m, sizeof *coh);
    return __atomic_load_n(&coh, __ATOMIC_ACQUIRE) != NULL;
}

/* The table if this process has mapped it, else NULL (channel.c: the FS thread's progress). */
struct coherence *shared_coherence(void)
{
    return __atomic_load_n(&coh, __ATOMIC_ACQUIRE);
}

void shared_coherence_offer(int fd)
{
    __atomic_store_n(&coh_offered, 1, __ATOMIC_RELEASE);
    coh_adopt(fd);
}

static void coh_map(void)
{
    pthread_mutex_lock(&coh_lock);
    if (coh == NULL && !coh_refused) {
        CALL(W_COHERENCE, 0, "/");
        int64_t r = xact(&c);
        int mapped = c.fd >= 0 && coh_adopt(c.fd);
        if (!mapped && r != -EIO)   /* EIO: no server now; every call fails anyway */
            coh_refused = 1;
    }
    pthread_mutex_unlock(&coh_lock);
}

/* The server's count of every change (coherence.h changes); 0 before the table is mapped
 * (answers are then stamped without it, and never used once it is). */
static uint64_t sh_changes(void)
{
    struct coherence *t = __atomic_load_n(&coh, __ATOMIC_ACQUIRE);
    return t ? __atomic_load_n(&t->changes, __ATOMIC_SEQ_CST) : 0;
}

static uint64_t sh_stamp(int mnt, const char *path)
{
    struct coherence *t = __atomic_load_n(&coh, __ATOMIC_ACQUIRE);
    if (UNLIKELY(t == NULL)) {
        if (coh_refused || !__atomic_load_n(&coh_offered, __ATOMIC_ACQUIRE))
            return 0;       /* not connected yet: the first request brings the table */
        guard_enter();      /* a lock and a request, once */
        coh_map();
        guard_leave();
        if ((t = __atomic_load_n(&coh, __ATOMIC_ACQUIRE)) == NULL)
            return 0;
    }
    return coherence_stamp(t, mnt, path);
}

static uint64_t sh_below_stamp(int mnt, const char *path, int connect)
{
    struct coherence *t = __atomic_load_n(&coh, __ATOMIC_ACQUIRE);
    if (UNLIKELY(t == NULL)) {
        if (coh_refused || (!connect && !__atomic_load_n(&coh_offered, __ATOMIC_ACQUIRE)))
            return 0;
        guard_enter();
        coh_map();
        guard_leave();
        if ((t = __atomic_load_n(&coh, __ATOMIC_ACQUIRE)) == NULL)
            return 0;
    }
    return coherence_stamp_below(t, mnt, path);
}

/* A request whose answer the caller does not need (backend/channel.c, channel_post): its
 * answer is taken before the thread's next request, so requests stay in order. 0: it could
 * not be sent. */
static int post(int op, int mnt, const char *path, int64_t a, const uint64_t *fh, int64_t b, int64_t c)
{
    size_t pl = strlen(path);
    struct wire_req rq = { .op = (uint16_t)op, .mnt = (uint16_t)mnt, .a = a, .b = b, .c = c, .path_len = (uint32_t)pl,
                           .len = (uint32_t)pl };
    caller_ids(&rq.uid, &rq.gid);
    if (fh) {
        rq.has_fh = 1;
        rq.fh = *fh;
    }
    struct iovec body = { (void *)path, pl };
    struct channel *ch = channel_begin();
    if (ch == NULL)
        return 0;
    if (UNLIKELY(stats_on())) {
        /* --stats: the round trip of the request before it (a release's open) goes with
         * it, which the server's previous request on the channel is; told with the next
         * request instead, it was counted as this posted one's transport */
        rq.prev_us = channel_last_us(ch);
        channel_note_us(ch, 0);
    }
    int w = channel_post(ch, &rq, &body, 1);
    if (w < 0) {
        channel_fail(ch);
        return 0;
    }
    channel_end(ch);
    return 1;
}

/* The kernel changed a passthrough file behind the server (vfs/passthrough.c): the server
 * tells every process's caches (only the server writes the table). A round trip, not a
 * notice: the counter is bumped before the call that made the change returns, so neither
 * this process nor one it then tells can find the answer from before (a posted notice
 * left the old size to the next stat, here and elsewhere, until the server got to it).
 * 0: it could not (the caller forgets its own). */
static int sh_written(int mnt, const char *path)
{
    return simple(W_WRITTEN, mnt, path, NULL, 0, 0, NULL) == 0;
}

/* A directory of a backing tree changed past the server (vfs/backing.c): a round trip, as
 * sh_written, so that no process uses a directory it kept from before once the call that
 * changed it has returned. */
static int sh_moved(int mnt, const char *path, const char *path2)
{
    return simple(W_MOVED, mnt, path, path2, 0, 0, NULL) == 0;
}

/* An operation of a backing tree the class is told of after it (vfs/backing.c): a round
 * trip, so that the class has heard of it before the program's call returns; a getattr's
 * attributes come back as the class adjusted them. */
static int sh_after(int mnt, unsigned op, const char *path, const char *path2, int result, struct stat *st)
{
    CALL(W_AFTER, mnt, path);
    c.path2 = path2;
    c.rq.a = (int64_t)op;
    c.rq.b = result;
    if (st) {
        c.data = st;
        c.data_len = sizeof *st;
        c.out = st;
        c.out_cap = sizeof *st;
    }
    int64_t r = xact(&c);
    if (st && r >= 0 && c.out_len != sizeof *st)
        r = -EIO;
    return st ? (int)r : 0;
}

/* An fd of an open file about to go to another process (interpose/pass_fd.c): the server
 * takes its own reference to the open file description, for the receiver's claim. */
static int sh_pass(int mnt, uint64_t fh, int fd)
{
    return simple(W_PASS, mnt, "/", NULL, fd, 0, &fh);
}

/* An fd that came over a unix socket: the server says whether it is the open file
 * description some process passed (kcmp), and then lets this process use its handle. */
static int sh_claim(int fd, int *mnt, int *flags, char *path, size_t size, uint64_t *fh)
{
    CALL(W_CLAIM, 0, "/");
    c.rq.a = fd;
    int64_t r = xact(&c);
    struct wire_claim wc;
    size_t pl = c.out_len - sizeof wc;
    if (r == 0 && (c.out_len < sizeof wc + 1 || pl >= size))
        r = -EIO;
    if (r == 0) {
        memcpy(&wc, c.out_alloc, sizeof wc);
        memcpy(path, c.out_alloc + sizeof wc, pl);
        path[pl] = '\0';
        *mnt = wc.mnt;
        *flags = wc.flags;
        *fh = c.fh;
    }
    free(c.out_alloc);
    return (int)r;
}

/* FUSE's ioctl: the caller's _IOC_SIZE(cmd) bytes go to the server and come back; they are
 * written back only where the file system changed them (a request that only reads the
 * caller's buffer may point at read-only memory). Many requests carry a number, not an
 * address, whatever their _IOC_SIZE says (FICLONE's is an fd): the bytes are read with
 * process_vm_readv, so an address that is not one sends no data (the FS gets data None,
 * and arg as the number it is) instead of faulting. */
static int sh_ioctl(int mnt, const char *path, unsigned int cmd, void *arg, uint64_t fh, unsigned int flags,
                    void *data)
{
    size_t size = data ? _IOC_SIZE(cmd) : 0;
    char *in = size ? malloc(2 * size) : NULL, *back = in ? in + size : NULL;
    if (size && in == NULL)
        return -ENOMEM;
    struct iovec mine = { in, size }, theirs = { data, size };
    if (size && process_vm_readv(getpid(), &mine, 1, &theirs, 1, 0) != (ssize_t)size)
        size = 0;
    CALL(W_IOCTL, mnt, path);
    c.rq.a = cmd;
    c.rq.b = (int64_t)(intptr_t)arg;
    c.rq.c = flags;
    c.rq.has_fh = 1;
    c.rq.fh = fh;
    c.data = in;
    c.data_len = size;
    c.out = back;
    c.out_cap = size;
    int64_t r = xact(&c);
    if (r >= 0 && size && c.out_len == size && memcmp(back, in, size) != 0) {
        mine.iov_base = back;
        if (process_vm_writev(getpid(), &mine, 1, &theirs, 1, 0) != (ssize_t)size)
            r = -EFAULT;
    }
    free(in);
    return (int)r;
}

/* The class's lock and flock (W_LOCK): the struct flock goes and, for F_GETLK, comes back. */
static int sh_lock(int mnt, const char *path, uint64_t fh, int cmd, struct flock *lk)
{
    CALL(W_LOCK, mnt, path);
    c.rq.a = cmd;
    c.rq.b = 0;
    c.rq.has_fh = 1;
    c.rq.fh = fh;
    struct flock back;
    c.data = (const char *)lk;
    c.data_len = sizeof *lk;
    c.out = &back;
    c.out_cap = sizeof back;
    int64_t r = xact(&c);
    if (r >= 0 && cmd == F_GETLK && c.out_len == sizeof back)
        *lk = back;
    return (int)r;
}

static int sh_flock(int mnt, const char *path, uint64_t fh, int op)
{
    return simple(W_LOCK, mnt, path, NULL, op, 1, &fh);
}

static struct backend_ops shared_ops = {
    .abi = LDP_BACKEND_ABI,
    .getattr = sh_getattr, .readlink = sh_readlink, .mknod = sh_mknod, .mkdir = sh_mkdir,
    .unlink = sh_unlink, .rmdir = sh_rmdir, .symlink = sh_symlink, .rename = sh_rename,
    .link = sh_link, .chmod = sh_chmod, .chown = sh_chown, .truncate = sh_truncate,
    .open = sh_open, .create = sh_create, .read = sh_read, .write = sh_write,
    .statfs = sh_statfs, .flush = sh_flush, .release = sh_release, .fsync = sh_fsync,
    .opendir = sh_opendir, .readdir = sh_readdir, .releasedir = sh_releasedir,
    .access = sh_access, .utimens = sh_utimens, .setxattr = sh_setxattr,
    .getxattr = sh_getxattr, .listxattr = sh_listxattr, .removexattr = sh_removexattr,
    .destroy = NULL, .append = sh_append, .cache_open = sh_cache_open, .cache_close = sh_cache_close,
    .release_cached = sh_release_cached, .settle = sh_settle,
    .open_special = sh_open_special, .ioctl = sh_ioctl, .stamp = sh_stamp,
    .written = sh_written, .below_stamp = sh_below_stamp, .moved = sh_moved, .after = sh_after, .pass = sh_pass, .claim = sh_claim, .create_open = sh_create_open, .open_decided = decision_open, .answer_stamp = sh_answer_stamp, .cache_whole_stamp = sh_cache_whole_stamp, .cache_known = sh_cache_known, .truncate_uncached = sh_truncate_uncached,
    .lock = sh_lock, .flock = sh_flock, .changes = sh_changes,
};

/* fork: the caches of decisions and listings are taken across it, so that the child never
 * finds an entry half-replaced by a thread it does not have (their locks are leaves: only
 * memory is touched under them). coh_lock is held across a round trip to the server, so
 * the child renews it instead; what it guards (the table's mapping) is made again there. */
static int fork_took_decisions;     /* not when a signal handler forks on the thread that holds it */

static void atfork_prepare(void)
{
    fork_took_decisions = !decisions_held;
    if (fork_took_decisions)
        pthread_mutex_lock(&decisions_lock);
    pthread_mutex_lock(&listings_lock);
}

static void atfork_parent(void)
{
    pthread_mutex_unlock(&listings_lock);
    if (fork_took_decisions)
        pthread_mutex_unlock(&decisions_lock);
}

static void atfork_child(void)
{
    if (brought.fd >= 0) {      /* the parent's to take or let go of */
        REAL(close)(brought.fd);
        brought.fd = -1;
    }
    brought.path = NULL;        /* the parent's copy, in memory the child shares no more */
    channel_atfork_child();
    pthread_mutex_unlock(&listings_lock);
    if (fork_took_decisions)    /* else the holder is this thread, whose handler forked: it lets go */
        pthread_mutex_unlock(&decisions_lock);
    pthread_mutex_init(&coh_lock, NULL);
}

struct backend_ops *backend_shared_init(void)
{
    pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
    return &shared_ops;
}
