/*
 * -o workers=N (docs/operations.md): one command served by N instances of the class, in
 * N processes, for a class that says its instances may serve side by side
 * (`workers_safe = True`, or the user's -o workers_safe).
 *
 * The server stays one: its page caches, handles, attribute stamps and coherence table are
 * the command's, whatever instance answered. Only the calls of the class move: fs_ops
 * becomes the forwarding table below, and each call goes to one instance:
 *   worker 0    the server's own instance (built by serve_init, as with workers=1), called
 *               in this process (but for a fusepy script whose calls must run on its
 *               FUSE() thread, which the server's loop holds: then a process too);
 *   worker 1..  a process of its own (ldpfuse_py/workers.py: a fresh interpreter that
 *               builds its instance from the same description, as the embedded mode's
 *               processes do, or, for a class that says workers_safe = "fork", a fork of
 *               this process made after its instance was built and before any thread of
 *               the server's), reached over a unix stream socket.
 * A handle the class gave (open, create, opendir) is known by the forwarding table's own
 * number (a slot: the worker and the class's fh); every call with it goes to that worker.
 * A call without one goes to the serving thread's own worker, or another idle one. A
 * worker answers one call at a time: the class need not be thread_safe. The server
 * serves with a thread per connection (serve.c), and a thread waits for a worker on a
 * mutex, without the GIL; calls to worker 0 take the GIL as the embedded backend does.
 *
 * A request carries the serving thread's identity (credentials.c: uid, gid, groups,
 * capabilities), which the worker takes on its thread for the call, and the caller's
 * (uid, gid, pid) for fuse_get_context(). Answers come back with their data straight into
 * the caller's buffer (read: no copy but the socket's), a passthrough fd by SCM_RIGHTS.
 * A release (releasedir) of a worker process's handle is posted, not waited for (wk_post):
 * written onto its socket in order, the client answered at once (close() has flush's
 * result; release's is ignored, as in kernel FUSE); the worker runs it before the calls
 * written after it and before its destroy(), and sends no answer. The worker reads what
 * its socket holds in one recv (a request, and the posted calls behind it).
 *
 * Failure: a worker that does not answer within op_timeout is killed (its pidfd), and one
 * whose socket breaks is dead: its call and every later call of its handles answer EIO
 * (release: 0, the slot goes); calls without a handle go to the others. A posted release
 * that hangs is met by the next call's wait (op_timeout, counted from that call's own
 * request) or, if the socket fills behind it, by SO_SNDTIMEO. A worker ends when
 * its socket closes (after its instance's destroy()), or op_timeout after the server has
 * gone if it is stuck in a method (its watchdog thread): no orphans.
 */
#include "server.h"
#include <poll.h>
#include <signal.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>

enum {
    K_GETATTR = 1, K_READLINK, K_MKNOD, K_MKDIR, K_UNLINK, K_RMDIR, K_SYMLINK, K_RENAME, K_LINK,
    K_CHMOD, K_CHOWN, K_TRUNCATE, K_OPEN, K_CREATE, K_READ, K_WRITE, K_APPEND, K_STATFS, K_FLUSH,
    K_RELEASE, K_FSYNC, K_OPENDIR, K_READDIR, K_RELEASEDIR, K_ACCESS, K_UTIMENS, K_SETXATTR,
    K_GETXATTR, K_LISTXATTR, K_REMOVEXATTR, K_LOCK, K_FLOCK, K_IOCTL,
};

struct wk_req {
    uint32_t op;
    int32_t mnt;
    uint32_t plen, p2len;       /* path and path2 follow (no NUL), after the groups */
    uint64_t dlen;              /* then the data */
    uint64_t size;              /* the caller's buffer */
    int64_t a, b, c;
    uint64_t fh;
    int32_t has_fh;
    int32_t switched;           /* the serving thread runs as uid...caps (else as the launcher) */
    uint32_t uid, gid;
    int32_t ngroups;            /* the groups follow the header */
    uint32_t ctx_uid, ctx_gid, ctx_pid;     /* fuse_get_context(); ctx_pid 0: none */
    uint64_t caps;
    uint32_t noreply;           /* release, releasedir: no answer (wk_post) */
    uint32_t pad;
};

struct wk_rep {
    int64_t r;
    uint64_t fh;
    int64_t at;
    uint64_t out_len;           /* the data that follows */
    uint32_t open_flags;
    int32_t fd_flags_set;
    int32_t has_fd;
    int32_t pad;
};

struct dirent_wk {              /* readdir's answer: each entry, [struct stat], its name */
    uint64_t ino;
    uint8_t type, plus;
    uint16_t namelen;
};

#define WK_MAX 64
struct worker {
    int fd;             /* -1: worker 0, in this process */
    int pidfd;
    pid_t pid;
    int busy, dead;
    pthread_mutex_t send;   /* a request is written whole: wk_post writes while it is busy */
};
static struct worker wks[WK_MAX];
static int nwk;
static unsigned turn;
static pthread_mutex_t wk_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t wk_free = PTHREAD_COND_INITIALIZER;
static struct backend_ops *inner;   /* the embedded backend: worker 0, and what a worker calls */
static struct backend_ops fwd;
static int wk_timeout_ms = 60000;

/* ---- the class's handles: slot number (and its use count, against a stale one) */
struct slot {
    uint64_t fh;
    int worker;
    uint32_t gen;
    int used;
};
static struct slot *slots;
static size_t nslots, slots_cap;
static uint32_t *free_list;     /* slots let go of, to use again (at most nslots) */
static size_t nfree;
static pthread_mutex_t slot_lock = PTHREAD_MUTEX_INITIALIZER;

static int slot_add(int worker, uint64_t fh, uint64_t *id)
{
    pthread_mutex_lock(&slot_lock);
    size_t i;
    if (nfree > 0) {
        i = free_list[--nfree];
    } else {
        if (nslots == slots_cap) {
            size_t cap = slots_cap ? slots_cap * 2 : 64;
            struct slot *p = realloc(slots, cap * sizeof *slots);
            if (p)
                slots = p;
            uint32_t *q = p ? realloc(free_list, cap * sizeof *free_list) : NULL;
            if (q)
                free_list = q;
            if (!p || !q) {
                pthread_mutex_unlock(&slot_lock);
                return -ENOMEM;
            }
            slots_cap = cap;
        }
        i = nslots++;
        slots[i].gen = 0;
    }
    slots[i].fh = fh;
    slots[i].worker = worker;
    slots[i].gen++;
    slots[i].used = 1;
    *id = (uint64_t)slots[i].gen << 32 | i;
    pthread_mutex_unlock(&slot_lock);
    return 0;
}

/* The worker and class fh of handle id; drop: the slot goes (release). -EBADF: none. */
static int slot_get(uint64_t id, uint64_t *fh, int drop)
{
    size_t i = (uint32_t)id;
    pthread_mutex_lock(&slot_lock);
    int w = -EBADF;
    if (i < nslots && slots[i].used && slots[i].gen == (uint32_t)(id >> 32)) {
        w = slots[i].worker;
        *fh = slots[i].fh;
        if (drop) {
            slots[i].used = 0;
            free_list[nfree++] = (uint32_t)i;
        }
    }
    pthread_mutex_unlock(&slot_lock);
    return w;
}

/* ---- choosing a worker: a call without a handle goes to its serving thread's own worker
 * (given in turn at the thread's first call: one client's calls stay with one instance,
 * and the clients are spread over them) when it is idle, else to the next idle one. A
 * turn per call would not spread them: a request of two calls (lookup, then open) would
 * send every open to the same instance. */
static __thread int home = -1;
static int wk_take(int want)
{
    pthread_mutex_lock(&wk_lock);
    for (;;) {
        if (want >= 0) {
            if (want >= nwk || wks[want].dead) {
                pthread_mutex_unlock(&wk_lock);
                return -EIO;
            }
            if (!wks[want].busy)
                break;
        } else {
            if (home < 0)
                home = (int)(turn++ % (unsigned)nwk);
            unsigned start = (unsigned)home;
            for (int k = 0; k < nwk && want < 0; k++) {
                int i = (int)((start + (unsigned)k) % (unsigned)nwk);
                if (!wks[i].busy && !wks[i].dead)
                    want = i;
            }
            if (want >= 0)
                break;
            int alive = 0;
            for (int i = 0; i < nwk; i++)
                alive += !wks[i].dead;
            if (!alive) {
                pthread_mutex_unlock(&wk_lock);
                return -EIO;
            }
        }
        pthread_cond_wait(&wk_free, &wk_lock);
    }
    wks[want].busy = 1;
    pthread_mutex_unlock(&wk_lock);
    return want;
}

static void wk_give(int k)
{
    pthread_mutex_lock(&wk_lock);
    wks[k].busy = 0;
    pthread_cond_broadcast(&wk_free);
    pthread_mutex_unlock(&wk_lock);
}

static int wk_stopping;         /* workers_stop has closed the sockets: a send fails, no worker broke */

/* A worker that broke its protocol or did not answer in time: killed, never asked again.
 * Called with it taken (busy), so no other thread uses its fd. Not once the command
 * ended: a release posted after workers_stop closed the socket fails to send, and the
 * worker, in its destroy(), is left to end as workers_stop says. */
static void wk_kill(int k, const char *why)
{
    if (__atomic_load_n(&wk_stopping, __ATOMIC_ACQUIRE)) {
        pthread_mutex_lock(&wk_lock);
        wks[k].dead = 1;
        pthread_mutex_unlock(&wk_lock);
        return;
    }
    server_logf("worker %d (pid %d) %s: killed, its calls answer EIO", k, (int)wks[k].pid, why);
    if (wks[k].pidfd >= 0)
        syscall(SYS_pidfd_send_signal, wks[k].pidfd, SIGKILL, NULL, 0);
    pthread_mutex_lock(&wk_lock);
    wks[k].dead = 1;
    pthread_mutex_unlock(&wk_lock);
}

/* ---- the socket */
static int send_all(int fd, struct iovec *iov, int n)
{
    while (n > 0) {
        struct msghdr m = { .msg_iov = iov, .msg_iovlen = (size_t)n };
        ssize_t w = sendmsg(fd, &m, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        while (n > 0 && (size_t)w >= iov->iov_len) {
            w -= (ssize_t)iov->iov_len;
            iov++;
            n--;
        }
        if (n > 0) {
            iov->iov_base = (char *)iov->iov_base + w;
            iov->iov_len -= (size_t)w;
        }
    }
    return 0;
}

static int recv_all(int fd, void *buf, size_t len)
{
    for (size_t got = 0; got < len;) {
        ssize_t r = recv(fd, (char *)buf + got, len - got, MSG_WAITALL);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

/* The header, with an fd if one came along; 1: EOF before it. */
static int recv_head(int fd, void *head, size_t len, int *pass_fd)
{
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = { head, len };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
    ssize_t r;
    while ((r = recvmsg(fd, &m, MSG_WAITALL | MSG_CMSG_CLOEXEC)) < 0 && errno == EINTR)
        ;
    if (r == 0)
        return 1;
    for (struct cmsghdr *c = r > 0 ? CMSG_FIRSTHDR(&m) : NULL; c; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && pass_fd)
            memcpy(pass_fd, CMSG_DATA(c), sizeof(int));
    if (r < 0)
        return -1;
    if ((size_t)r < len)
        return recv_all(fd, (char *)head + r, len - (size_t)r);
    return 0;
}

/* Request q (its path, path2, data, and the serving thread's identity) onto worker k's
 * socket, whole (the send lock: a posted release may be written while another thread
 * waits for its answer). -1: the socket is broken (or full for op_timeout: SO_SNDTIMEO). */
static int wk_send(int k, struct wk_req *q, const char *path, const char *path2, const void *data)
{
    gid_t *groups = NULL;
    int switched, ngroups;
    uid_t uid;
    gid_t gid;
    uint64_t caps;
    creds_now(&switched, &uid, &gid, &ngroups, &groups, &caps);
    q->switched = switched;
    q->uid = uid;
    q->gid = gid;
    q->ngroups = switched ? ngroups : 0;
    q->caps = caps;
    struct client *cl = srv_current;
    q->ctx_uid = cl ? cl->as_uid : 0;
    q->ctx_gid = cl ? cl->as_gid : 0;
    q->ctx_pid = cl ? (uint32_t)cl->pid : 0;
    q->plen = path ? (uint32_t)strlen(path) : 0;
    q->p2len = path2 ? (uint32_t)strlen(path2) : 0;
    struct iovec iov[5] = {
        { q, sizeof *q }, { groups, (size_t)q->ngroups * sizeof(gid_t) }, { (void *)path, q->plen },
        { (void *)path2, q->p2len }, { (void *)data, q->dlen },
    };
    pthread_mutex_lock(&wks[k].send);
    int r = send_all(wks[k].fd, iov, 5);
    pthread_mutex_unlock(&wks[k].send);
    return r;
}

/* A call whose answer no caller waits for (release, releasedir: close() has flush's
 * result, and release's is ignored, as in kernel FUSE): written onto worker k's socket in
 * its order among the others' calls, without taking the worker or waiting for it. The
 * worker runs it before the calls written after it (a call of the same instance sees the
 * handle gone), and before its destroy() at the end (its socket is read to the end). A
 * worker stuck in it is killed as any: the next call's answer does not come within
 * op_timeout. Those still queued when the command ends run before destroy(), within the
 * op_timeout workers_stop gives. */
static void wk_post(int k, struct wk_req *q, const char *path)
{
    q->noreply = 1;
    if (wk_send(k, q, path, NULL, NULL) < 0 && !wks[k].dead)
        wk_kill(k, "hung up");
}

/* One call on worker k (taken): the answer's data into out (up to cap; *alloc: malloc'ed
 * to its size instead), an fd into *pass_fd. Returns the call's result. The answer is
 * waited for op_timeout at most: a poll, then the reads (each bounded by SO_RCVTIMEO too).
 * (A blocking recvmsg bounded by SO_RCVTIMEO alone, one syscall less, made a direct_io
 * read through a worker slower, 17 -> 46 us at load 9: the poll stays.) */
static int64_t wk_remote(int k, struct wk_req *q, const char *path, const char *path2, const void *data,
                         void *out, size_t cap, void **alloc, struct wk_rep *rep, int *pass_fd)
{
    int fd = wks[k].fd;
    if (wk_send(k, q, path, path2, data) < 0) {
        wk_kill(k, "hung up");
        return -EIO;
    }
    struct pollfd p = { .fd = fd, .events = POLLIN };
    int pr;
    while ((pr = poll(&p, 1, wk_timeout_ms > 0 ? wk_timeout_ms : -1)) < 0 && errno == EINTR)
        ;
    if (pr == 0) {
        wk_kill(k, "did not answer within op_timeout");
        return -EIO;
    }
    int got_fd = -1;
    int h = recv_head(fd, rep, sizeof *rep, &got_fd);
    if (h != 0) {
        if (got_fd >= 0)
            close(got_fd);
        wk_kill(k, h < 0 && (errno == EAGAIN || errno == EWOULDBLOCK) ? "did not answer within op_timeout" : "ended");
        return -EIO;
    }
    size_t n = (size_t)rep->out_len;
    if (alloc) {
        *alloc = n ? malloc(n) : NULL;
        out = *alloc;
        cap = out ? n : 0;
    }
    size_t keep = n < cap ? n : cap;
    if ((keep && recv_all(fd, out, keep) < 0)) {
        wk_kill(k, "ended");
        if (got_fd >= 0)
            close(got_fd);
        return -EIO;
    }
    for (size_t left = n - keep; left > 0;) {     /* more than asked: not kept */
        char sink[4096];
        size_t c = left < sizeof sink ? left : sizeof sink;
        if (recv_all(fd, sink, c) < 0) {
            wk_kill(k, "ended");
            return -EIO;
        }
        left -= c;
    }
    if (pass_fd)
        *pass_fd = got_fd;
    else if (got_fd >= 0)
        close(got_fd);
    return rep->r;
}

/* ---- the forwarding table. CALL(k, local call, remote request...): worker k, taken */
#define Q(o) struct wk_req q = { .op = (o), .mnt = mnt }; struct wk_rep rep = { 0 }
#define GO(want, local, ...)                                                    \
    int k = wk_take(want);                                                      \
    if (k < 0)                                                                  \
        return k;                                                               \
    int64_t r = wks[k].fd < 0 ? (int64_t)(local) : wk_remote(k, &q, __VA_ARGS__); \
    wk_give(k)

/* handle id -> worker and the class's fh (or returns what a bad or dead one answers) */
#define HANDLE(id, fhv, drop, dead_answer)                                      \
    uint64_t fhv = 0;                                                           \
    int want_ = slot_get((id), &fhv, (drop));                                   \
    if (want_ < 0)                                                              \
        return want_;                                                           \
    if (wks[want_].dead)                                                        \
        return (dead_answer)

static int f_getattr(int mnt, const char *path, const uint64_t *fhp, struct stat *st)
{
    Q(K_GETATTR);
    int want = -1;
    uint64_t real = 0;
    if (fhp) {
        want = slot_get(*fhp, &real, 0);
        if (want < 0 || wks[want].dead)
            fhp = NULL, want = -1;      /* as by path */
        q.has_fh = fhp != NULL;
        q.fh = real;
    }
    GO(want, inner->getattr(mnt, path, fhp ? &real : NULL, st), path, NULL, NULL, st, sizeof *st, NULL, &rep, NULL);
    return (int)r;
}

static int f_readlink(int mnt, const char *path, char *buf, size_t size)
{
    Q(K_READLINK);
    q.size = size;
    GO(-1, inner->readlink(mnt, path, buf, size), path, NULL, NULL, buf, size, NULL, &rep, NULL);
    return (int)r;
}

#define PATH_CALL(name, op, args, a_, b_, p2)                                   \
    static int f_##name args                                                    \
    {                                                                           \
        Q(op);                                                                  \
        q.a = (int64_t)(a_);                                                    \
        q.b = (int64_t)(b_);                                                    \
        GO(-1, LOCAL_##name, path, p2, NULL, NULL, 0, NULL, &rep, NULL);        \
        return (int)r;                                                          \
    }
#define LOCAL_mknod inner->mknod(mnt, path, mode, dev)
#define LOCAL_mkdir inner->mkdir(mnt, path, mode)
#define LOCAL_unlink inner->unlink(mnt, path)
#define LOCAL_rmdir inner->rmdir(mnt, path)
#define LOCAL_symlink inner->symlink(mnt, path, target)
#define LOCAL_rename inner->rename(mnt, path, to)
#define LOCAL_link inner->link(mnt, path, oldpath)
#define LOCAL_chmod inner->chmod(mnt, path, mode)
#define LOCAL_chown inner->chown(mnt, path, uid, gid)
#define LOCAL_access inner->access(mnt, path, mode)
#define LOCAL_removexattr inner->removexattr(mnt, path, name)
PATH_CALL(mknod, K_MKNOD, (int mnt, const char *path, mode_t mode, dev_t dev), mode, dev, NULL)
PATH_CALL(mkdir, K_MKDIR, (int mnt, const char *path, mode_t mode), mode, 0, NULL)
PATH_CALL(unlink, K_UNLINK, (int mnt, const char *path), 0, 0, NULL)
PATH_CALL(rmdir, K_RMDIR, (int mnt, const char *path), 0, 0, NULL)
PATH_CALL(symlink, K_SYMLINK, (int mnt, const char *path, const char *target), 0, 0, target)
PATH_CALL(rename, K_RENAME, (int mnt, const char *path, const char *to), 0, 0, to)
PATH_CALL(link, K_LINK, (int mnt, const char *path, const char *oldpath), 0, 0, oldpath)
PATH_CALL(chmod, K_CHMOD, (int mnt, const char *path, mode_t mode), mode, 0, NULL)
PATH_CALL(chown, K_CHOWN, (int mnt, const char *path, uid_t uid, gid_t gid), uid, gid, NULL)
PATH_CALL(access, K_ACCESS, (int mnt, const char *path, int mode), mode, 0, NULL)
PATH_CALL(removexattr, K_REMOVEXATTR, (int mnt, const char *path, const char *name), 0, 0, name)

static int f_truncate(int mnt, const char *path, off_t len, const uint64_t *fhp)
{
    Q(K_TRUNCATE);
    q.a = len;
    int want = -1;
    uint64_t real = 0;
    if (fhp) {
        want = slot_get(*fhp, &real, 0);
        if (want < 0 || wks[want].dead)
            fhp = NULL, want = -1;
        q.has_fh = fhp != NULL;
        q.fh = real;
    }
    GO(want, inner->truncate(mnt, path, len, fhp ? &real : NULL), path, NULL, NULL, NULL, 0, NULL, &rep, NULL);
    return (int)r;
}

/* open and create: the class's fh becomes a slot of the worker that opened it */
static int opened(int k, int64_t r, struct open_result *res, const struct wk_rep *rep, int fd, int remote)
{
    if (remote) {
        res->passthrough_fd = fd;
        res->fh = rep->fh;
        res->open_flags = rep->open_flags;
        res->fd_flags_set = rep->fd_flags_set;
    }
    if (r < 0 || res->passthrough_fd >= 0)
        return (int)r;
    uint64_t id;
    if (slot_add(k, res->fh, &id) < 0)
        return -ENOMEM;     /* (the class keeps its handle: no memory to name it) */
    res->fh = id;
    return (int)r;
}

static char *grow(char **buf, size_t *cap, size_t need);

/* An open's window (workers_open): the file's attributes (getattr by name, as the page
 * cache asks them; known: those the caller already has), then, if it is a regular file of
 * 1 to `data` bytes, its data (read whole at 0 through the handle just made), laid out
 * [struct stat][data] in *buf. Returns the length; 0: no attributes; sizeof(struct stat):
 * no data (not small, or the read did not give the size getattr gave: the caller's own
 * read meets that, as without this). */
static size_t window_fill(struct backend_ops *ops, int mnt, const char *path, uint64_t fh, size_t data,
                          const struct stat *known, char **buf, size_t *cap)
{
    struct stat st;
    if (known)
        st = *known;
    else if (ops->getattr(mnt, path, NULL, &st) < 0)
        return 0;
    if (!grow(buf, cap, sizeof st))
        return 0;
    memcpy(*buf, &st, sizeof st);
    if (!S_ISREG(st.st_mode) || st.st_size <= 0 || (uint64_t)st.st_size > data ||
        !grow(buf, cap, sizeof st + (size_t)st.st_size))
        return sizeof st;
    ssize_t n = ops->read(mnt, path, *buf + sizeof st, (size_t)st.st_size, 0, fh);
    return n == (ssize_t)st.st_size ? sizeof st + (size_t)n : sizeof st;
}

int workers_count(void)
{
    return nwk;
}

/* open, with its window: the attributes (known: the caller's, sent along), and the data
 * of a file of at most `data` bytes (0: attributes only), asked of the instance that opens
 * it in the same call (one round trip to a worker, not three: open, the page cache's
 * getattr, the first read), for the open's page cache (dispatch.c, cache_along). */
int workers_open(int mnt, const char *path, int flags, size_t data, const struct stat *known, struct open_result *res,
                 struct open_window *w)
{
    Q(K_OPEN);
    q.a = flags;
    q.c = 1;
    q.size = data;
    q.dlen = known ? sizeof *known : 0;
    int fd = -1;
    void *enc = NULL;
    char *buf = NULL;
    size_t len = 0, cap = 0;
    int k = wk_take(-1);
    if (k < 0)
        return k;
    int64_t r;
    if (wks[k].fd < 0) {
        r = inner->open(mnt, path, flags, res);
        if (r >= 0 && res->passthrough_fd < 0 && !(res->open_flags & OPEN_DIRECT_IO))
            len = window_fill(inner, mnt, path, res->fh, data, known, &buf, &cap);
    } else {
        r = wk_remote(k, &q, path, NULL, known, NULL, 0, &enc, &rep, &fd);
        buf = enc;
        len = r >= 0 ? (size_t)rep.out_len : 0;
    }
    wk_give(k);
    *w = (struct open_window){ .len = -1, .buf = buf };
    if (len >= sizeof w->st) {
        memcpy(&w->st, buf, sizeof w->st);
        w->have_st = 1;
        if (len > sizeof w->st) {
            w->data = buf + sizeof w->st;
            w->len = (ssize_t)(len - sizeof w->st);
        }
    }
    return opened(k, r, res, &rep, fd, wks[k].fd >= 0);
}

static int f_open(int mnt, const char *path, int flags, struct open_result *res)
{
    Q(K_OPEN);
    q.a = flags;
    int fd = -1;
    GO(-1, inner->open(mnt, path, flags, res), path, NULL, NULL, NULL, 0, NULL, &rep, &fd);
    return opened(k, r, res, &rep, fd, wks[k].fd >= 0);
}

static int f_create(int mnt, const char *path, mode_t mode, int flags, struct open_result *res)
{
    Q(K_CREATE);
    q.a = mode;
    q.b = flags;
    int fd = -1;
    GO(-1, inner->create(mnt, path, mode, flags, res), path, NULL, NULL, NULL, 0, NULL, &rep, &fd);
    return opened(k, r, res, &rep, fd, wks[k].fd >= 0);
}

static ssize_t f_read(int mnt, const char *path, char *buf, size_t size, off_t off, uint64_t id)
{
    HANDLE(id, fh, 0, -EIO);
    Q(K_READ);
    q.size = size;
    q.b = off;
    q.fh = fh;
    GO(want_, inner->read(mnt, path, buf, size, off, fh), path, NULL, NULL, buf, size, NULL, &rep, NULL);
    return (ssize_t)r;
}

static ssize_t f_write(int mnt, const char *path, const char *buf, size_t size, off_t off, uint64_t id)
{
    HANDLE(id, fh, 0, -EIO);
    Q(K_WRITE);
    q.dlen = size;
    q.b = off;
    q.fh = fh;
    GO(want_, inner->write(mnt, path, buf, size, off, fh), path, NULL, buf, NULL, 0, NULL, &rep, NULL);
    return (ssize_t)r;
}

static ssize_t f_append(int mnt, const char *path, const char *buf, size_t size, uint64_t id, off_t *at)
{
    HANDLE(id, fh, 0, -EIO);
    Q(K_APPEND);
    q.dlen = size;
    q.fh = fh;
    off_t local_at = 0;
    GO(want_, inner->append(mnt, path, buf, size, fh, &local_at), path, NULL, buf, NULL, 0, NULL, &rep, NULL);
    *at = wks[k].fd < 0 ? local_at : (off_t)rep.at;
    return (ssize_t)r;
}

static int f_statfs(int mnt, const char *path, struct statvfs *sv)
{
    Q(K_STATFS);
    GO(-1, inner->statfs(mnt, path, sv), path, NULL, NULL, sv, sizeof *sv, NULL, &rep, NULL);
    return (int)r;
}

static int f_flush(int mnt, const char *path, uint64_t id)
{
    HANDLE(id, fh, 0, -EIO);
    Q(K_FLUSH);
    q.fh = fh;
    GO(want_, inner->flush(mnt, path, fh), path, NULL, NULL, NULL, 0, NULL, &rep, NULL);
    return (int)r;
}

static int f_release(int mnt, const char *path, int flags, uint64_t id)
{
    HANDLE(id, fh, 1, 0);
    Q(K_RELEASE);
    q.a = flags;
    q.fh = fh;
    if (wks[want_].fd >= 0) {
        wk_post(want_, &q, path);
        return 0;
    }
    GO(want_, inner->release(mnt, path, flags, fh), path, NULL, NULL, NULL, 0, NULL, &rep, NULL);
    return (int)r;
}

static int f_fsync(int mnt, const char *path, int datasync, uint64_t id)
{
    HANDLE(id, fh, 0, -EIO);
    Q(K_FSYNC);
    q.a = datasync;
    q.fh = fh;
    GO(want_, inner->fsync(mnt, path, datasync, fh), path, NULL, NULL, NULL, 0, NULL, &rep, NULL);
    return (int)r;
}

static int f_opendir(int mnt, const char *path, uint64_t *out)
{
    Q(K_OPENDIR);
    uint64_t fh = 0;
    GO(-1, inner->opendir(mnt, path, &fh), path, NULL, NULL, NULL, 0, NULL, &rep, NULL);
    if (r < 0)
        return (int)r;
    if (wks[k].fd >= 0)
        fh = rep.fh;
    if (slot_add(k, fh, out) < 0)
        return -ENOMEM;     /* (the class's releasedir is not called: it keeps the handle) */
    return (int)r;
}

/* readdir's entries, as a worker sends them (wk_serve) */
static int dir_decode(const char *p, size_t n, struct dirlist *out)
{
    const char *end = p + n;
    while (p < end) {
        struct dirent_wk d;
        if ((size_t)(end - p) < sizeof d)
            return -EIO;
        memcpy(&d, p, sizeof d);
        p += sizeof d;
        struct stat st;
        if (d.plus) {
            if ((size_t)(end - p) < sizeof st)
                return -EIO;
            memcpy(&st, p, sizeof st);
            p += sizeof st;
        }
        if ((size_t)(end - p) < d.namelen || dirlist_add(out, p, d.namelen, d.ino, d.type) < 0 ||
            (d.plus && dirlist_attr(out, &st) < 0))
            return -EIO;
        p += d.namelen;
    }
    return 0;
}

static int f_readdir(int mnt, const char *path, uint64_t id, struct dirlist *out)
{
    HANDLE(id, fh, 0, -EIO);
    Q(K_READDIR);
    q.fh = fh;
    void *enc = NULL;
    GO(want_, inner->readdir(mnt, path, fh, out), path, NULL, NULL, NULL, 0, &enc, &rep, NULL);
    if (wks[k].fd >= 0 && r >= 0 && enc)
        r = dir_decode(enc, (size_t)rep.out_len, out);
    free(enc);
    return (int)r;
}

static int f_releasedir(int mnt, const char *path, uint64_t id)
{
    HANDLE(id, fh, 1, 0);
    Q(K_RELEASEDIR);
    q.fh = fh;
    if (wks[want_].fd >= 0) {
        wk_post(want_, &q, path);
        return 0;
    }
    GO(want_, inner->releasedir(mnt, path, fh), path, NULL, NULL, NULL, 0, NULL, &rep, NULL);
    return (int)r;
}

static int f_utimens(int mnt, const char *path, const struct timespec ts[2])
{
    Q(K_UTIMENS);
    q.dlen = ts ? 2 * sizeof *ts : 0;
    GO(-1, inner->utimens(mnt, path, ts), path, NULL, ts, NULL, 0, NULL, &rep, NULL);
    return (int)r;
}

static int f_setxattr(int mnt, const char *path, const char *name, const void *value, size_t size, int flags)
{
    Q(K_SETXATTR);
    q.dlen = size;
    q.a = flags;
    GO(-1, inner->setxattr(mnt, path, name, value, size, flags), path, name, value, NULL, 0, NULL, &rep, NULL);
    return (int)r;
}

static ssize_t f_getxattr(int mnt, const char *path, const char *name, void *value, size_t size)
{
    Q(K_GETXATTR);
    q.size = size;
    GO(-1, inner->getxattr(mnt, path, name, value, size), path, name, NULL, value, size, NULL, &rep, NULL);
    return (ssize_t)r;
}

static ssize_t f_listxattr(int mnt, const char *path, char *list, size_t size)
{
    Q(K_LISTXATTR);
    q.size = size;
    GO(-1, inner->listxattr(mnt, path, list, size), path, NULL, NULL, list, size, NULL, &rep, NULL);
    return (ssize_t)r;
}

static int f_lock(int mnt, const char *path, uint64_t id, int cmd, struct flock *lk)
{
    HANDLE(id, fh, 0, -EIO);
    Q(K_LOCK);
    q.a = cmd;
    q.fh = fh;
    q.dlen = sizeof *lk;
    GO(want_, inner->lock(mnt, path, fh, cmd, lk), path, NULL, lk, lk, sizeof *lk, NULL, &rep, NULL);
    return (int)r;
}

static int f_flock(int mnt, const char *path, uint64_t id, int op)
{
    HANDLE(id, fh, 0, -EIO);
    Q(K_FLOCK);
    q.a = op;
    q.fh = fh;
    GO(want_, inner->flock(mnt, path, fh, op), path, NULL, NULL, NULL, 0, NULL, &rep, NULL);
    return (int)r;
}

static int f_ioctl(int mnt, const char *path, unsigned int cmd, void *arg, uint64_t id, unsigned int flags, void *data)
{
    HANDLE(id, fh, 0, -EIO);
    Q(K_IOCTL);
    q.a = cmd;
    q.b = (int64_t)(intptr_t)arg;
    q.c = flags;
    q.fh = fh;
    size_t size = data ? _IOC_SIZE(cmd) : 0;
    q.dlen = size;
    q.size = size;
    GO(want_, inner->ioctl(mnt, path, cmd, arg, fh, flags, data), path, NULL, data, data, size, NULL, &rep, NULL);
    return (int)r;
}

/* ---- a worker's side: serve calls on fd until it closes (ldpfuse_py/workers.py) */
static void *watchdog(void *arg)
{
    int fd = (int)(intptr_t)arg;
    struct pollfd p = { .fd = fd, .events = POLLRDHUP };
    while (poll(&p, 1, -1) < 0 && errno == EINTR)
        ;
    /* the server has gone: the serving loop ends and destroy() runs, unless it is stuck in
     * a method; then this process ends op_timeout later all the same */
    sleep(wk_timeout_ms > 0 ? (unsigned)(wk_timeout_ms / 1000) + 1 : 60);
    _exit(1);
    return NULL;
}

static char *grow(char **buf, size_t *cap, size_t need)
{
    if (need > *cap) {
        char *p = realloc(*buf, need);
        if (p == NULL)
            return NULL;
        *buf = p;
        *cap = need;
    }
    return *buf;
}

static int64_t wk_call_local(const struct wk_req *q, const char *path, const char *path2, const char *data,
                             char **out, size_t *out_cap, struct wk_rep *rep, int *pass_fd)
{
    int mnt = q->mnt;
    uint64_t fh = q->fh;
    size_t size = (size_t)q->size;
    switch (q->op) {
    case K_GETATTR: {
        if (!grow(out, out_cap, sizeof(struct stat)))
            return -ENOMEM;
        int64_t r = fs_ops->getattr(mnt, path, q->has_fh ? &fh : NULL, (struct stat *)*out);
        rep->out_len = r >= 0 ? sizeof(struct stat) : 0;
        return r;
    }
    case K_STATFS: {
        if (!grow(out, out_cap, sizeof(struct statvfs)))
            return -ENOMEM;
        int64_t r = fs_ops->statfs(mnt, path, (struct statvfs *)*out);
        rep->out_len = r >= 0 ? sizeof(struct statvfs) : 0;
        return r;
    }
    case K_READLINK:
    case K_READ:
    case K_GETXATTR:
    case K_LISTXATTR: {
        if (size && !grow(out, out_cap, size))
            return -ENOMEM;
        char *o = size ? *out : NULL;
        int64_t r = q->op == K_READLINK ? fs_ops->readlink(mnt, path, o, size)
                    : q->op == K_READ   ? fs_ops->read(mnt, path, o, size, (off_t)q->b, fh)
                    : q->op == K_GETXATTR ? fs_ops->getxattr(mnt, path, path2, o, size)
                                          : fs_ops->listxattr(mnt, path, o, size);
        if (q->op == K_READLINK && r >= 0)
            rep->out_len = (size_t)r < size ? (size_t)r + 1 : size;     /* with its NUL */
        else
            rep->out_len = r > 0 && size ? ((size_t)r < size ? (size_t)r : size) : 0;
        return r;
    }
    case K_MKNOD: return fs_ops->mknod(mnt, path, (mode_t)q->a, (dev_t)q->b);
    case K_MKDIR: return fs_ops->mkdir(mnt, path, (mode_t)q->a);
    case K_UNLINK: return fs_ops->unlink(mnt, path);
    case K_RMDIR: return fs_ops->rmdir(mnt, path);
    case K_SYMLINK: return fs_ops->symlink(mnt, path, path2);
    case K_RENAME: return fs_ops->rename(mnt, path, path2);
    case K_LINK: return fs_ops->link(mnt, path, path2);
    case K_CHMOD: return fs_ops->chmod(mnt, path, (mode_t)q->a);
    case K_CHOWN: return fs_ops->chown(mnt, path, (uid_t)q->a, (gid_t)q->b);
    case K_ACCESS: return fs_ops->access(mnt, path, (int)q->a);
    case K_REMOVEXATTR: return fs_ops->removexattr(mnt, path, path2);
    case K_TRUNCATE: return fs_ops->truncate(mnt, path, (off_t)q->a, q->has_fh ? &fh : NULL);
    case K_OPEN:
    case K_CREATE: {
        struct open_result res = { .passthrough_fd = -1 };
        int64_t r = q->op == K_OPEN ? fs_ops->open(mnt, path, (int)q->a, &res)
                                    : fs_ops->create(mnt, path, (mode_t)q->a, (int)q->b, &res);
        if (r >= 0) {
            rep->fh = res.fh;
            rep->open_flags = res.open_flags;
            rep->fd_flags_set = res.fd_flags_set;
            *pass_fd = res.passthrough_fd;
            if (q->op == K_OPEN && q->c == 1 && res.passthrough_fd < 0 && !(res.open_flags & OPEN_DIRECT_IO))
                rep->out_len = window_fill(fs_ops, mnt, path, res.fh, size,
                                           q->dlen == sizeof(struct stat) ? (const struct stat *)data : NULL, out,
                                           out_cap);
        }
        return r;
    }
    case K_WRITE: return fs_ops->write(mnt, path, data, (size_t)q->dlen, (off_t)q->b, fh);
    case K_APPEND: {
        off_t at = 0;
        int64_t r = fs_ops->append(mnt, path, data, (size_t)q->dlen, fh, &at);
        rep->at = at;
        return r;
    }
    case K_FLUSH: return fs_ops->flush(mnt, path, fh);
    case K_RELEASE: return fs_ops->release(mnt, path, (int)q->a, fh);
    case K_FSYNC: return fs_ops->fsync(mnt, path, (int)q->a, fh);
    case K_OPENDIR: {
        uint64_t dfh = 0;
        int64_t r = fs_ops->opendir(mnt, path, &dfh);
        rep->fh = dfh;
        return r;
    }
    case K_READDIR: {
        struct dirlist l = { 0 };
        int64_t r = fs_ops->readdir(mnt, path, fh, &l);
        size_t n = 0;
        for (size_t i = 0; r >= 0 && i < l.n; i++)
            n += sizeof(struct dirent_wk) + (l.ents[i].plus ? sizeof(struct stat) : 0) + l.ents[i].namelen;
        if (r >= 0 && n && !grow(out, out_cap, n))
            r = -ENOMEM;
        char *p = *out;
        for (size_t i = 0; r >= 0 && i < l.n; i++) {
            struct dirent_wk d = { .ino = l.ents[i].ino, .type = l.ents[i].type, .plus = l.ents[i].plus,
                                   .namelen = l.ents[i].namelen };
            memcpy(p, &d, sizeof d);
            p += sizeof d;
            if (d.plus) {
                memcpy(p, &l.attrs[i], sizeof(struct stat));
                p += sizeof(struct stat);
            }
            memcpy(p, l.names + l.ents[i].name_off, d.namelen);
            p += d.namelen;
        }
        rep->out_len = r >= 0 ? n : 0;
        dirlist_free(&l);
        return r;
    }
    case K_RELEASEDIR: return fs_ops->releasedir(mnt, path, fh);
    case K_UTIMENS: {
        struct timespec ts[2];
        if (q->dlen == sizeof ts)
            memcpy(ts, data, sizeof ts);
        return fs_ops->utimens(mnt, path, q->dlen == sizeof ts ? ts : NULL);
    }
    case K_SETXATTR: return fs_ops->setxattr(mnt, path, path2, data, (size_t)q->dlen, (int)q->a);
    case K_LOCK: {
        struct flock lk;
        if (q->dlen != sizeof lk || !fs_ops->lock || !grow(out, out_cap, sizeof lk))
            return -ENOSYS;
        memcpy(&lk, data, sizeof lk);
        int64_t r = fs_ops->lock(mnt, path, fh, (int)q->a, &lk);
        memcpy(*out, &lk, sizeof lk);
        rep->out_len = sizeof lk;
        return r;
    }
    case K_FLOCK: return fs_ops->flock ? fs_ops->flock(mnt, path, fh, (int)q->a) : -ENOSYS;
    case K_IOCTL: {
        size_t n = (size_t)q->dlen;
        if (!fs_ops->ioctl)
            return -ENOTTY;
        if (n && !grow(out, out_cap, n))
            return -ENOMEM;
        if (n)
            memcpy(*out, data, n);
        int64_t r = fs_ops->ioctl(mnt, path, (unsigned int)q->a, (void *)(intptr_t)q->b, fh, (unsigned int)q->c,
                                  n ? *out : NULL);
        rep->out_len = r >= 0 ? n : 0;
        return r;
    }
    default: return -ENOSYS;
    }
}

/* What the worker has read of its socket, not yet served: a request and the posted calls
 * behind it come in one recv, not two per request (its header, then the rest). */
struct inbox {
    int fd;
    char *b;
    size_t cap, lo, hi;     /* b[lo..hi): read, not yet taken */
};

/* At least n bytes at ib->b + ib->lo. -1: the socket ended first (or broke). */
static int inbox_fill(struct inbox *ib, size_t n)
{
    if (ib->hi - ib->lo >= n)
        return 0;
    if (ib->lo > 0 && (ib->cap - ib->lo < n || ib->lo == ib->hi)) {
        memmove(ib->b, ib->b + ib->lo, ib->hi - ib->lo);
        ib->hi -= ib->lo;
        ib->lo = 0;
    }
    if (ib->cap < n && !grow(&ib->b, &ib->cap, n < 65536 ? 65536 : n))
        return -1;
    while (ib->hi - ib->lo < n) {
        ssize_t r = recv(ib->fd, ib->b + ib->hi, ib->cap - ib->hi, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        ib->hi += (size_t)r;
    }
    return 0;
}

/* _embedded.worker_serve(fd): answer the server's calls on fd until it closes. */
PyObject *ldp_worker_serve(PyObject *self, PyObject *args)
{
    (void)self;
    int fd;
    if (!PyArg_ParseTuple(args, "i", &fd))
        return NULL;
    if (fs_ops == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "serve_init() first");
        return NULL;
    }
    const char *t = getenv("LDPFUSE_OP_TIMEOUT");
    if (t && *t)
        wk_timeout_ms = (int)(strtod(t, NULL) * 1000);
    switch_creds = creds_init();
    umask(0);       /* the clients applied their own umask to the modes they send */
    pthread_t wd;
    if (pthread_create(&wd, NULL, watchdog, (void *)(intptr_t)fd) == 0)
        pthread_detach(wd);
    static struct client ctx;
    struct wk_rep hello = { .r = getpid() };    /* ready: built */
    struct iovec hi = { &hello, sizeof hello };
    if (send_all(fd, &hi, 1) < 0)
        Py_RETURN_NONE;
    char *in = NULL, *out = NULL;
    size_t in_cap = 0, out_cap = 0;
    struct inbox ib = { .fd = fd };
    Py_BEGIN_ALLOW_THREADS
    for (;;) {
        struct wk_req q;
        if (inbox_fill(&ib, sizeof q) < 0)
            break;
        memcpy(&q, ib.b + ib.lo, sizeof q);
        ib.lo += sizeof q;
        if (q.ngroups < 0 || q.ngroups > 65536 || q.plen >= WIRE_PATH_MAX || q.p2len >= WIRE_PATH_MAX ||
            q.dlen > (1ull << 31))
            break;      /* the server never sends these */
        size_t gl = (size_t)q.ngroups * sizeof(gid_t), need = gl + q.plen + 1 + q.p2len + 1 + q.dlen + 16;
        if (!grow(&in, &in_cap, need) || inbox_fill(&ib, gl + q.plen + q.p2len + q.dlen) < 0)
            break;
        /* laid out as path\0 path2\0 data after the groups */
        const char *src = ib.b + ib.lo;
        memcpy(in, src, gl + q.plen);
        memcpy(in + gl + q.plen + 1, src + gl + q.plen, q.p2len);
        memcpy(in + gl + q.plen + 1 + q.p2len + 1, src + gl + q.plen + q.p2len, q.dlen);
        ib.lo += gl + q.plen + q.p2len + q.dlen;
        char *path = in + gl, *path2 = in + gl + q.plen + 1, *data = in + gl + q.plen + 1 + q.p2len + 1;
        path[q.plen] = '\0';
        path2[q.p2len] = '\0';
        gid_t *groups = (gid_t *)in;
        int64_t r;
        struct wk_rep rep = { 0 };
        int pass_fd = -1;
        if (!q.switched)
            become_self();
        if (q.switched && become(q.uid, q.gid, q.ngroups, groups, q.caps) < 0) {
            r = -EPERM;
        } else {
            ctx.as_uid = q.ctx_uid;
            ctx.as_gid = q.ctx_gid;
            ctx.pid = (pid_t)q.ctx_pid;
            srv_current = q.ctx_pid ? &ctx : NULL;
            r = wk_call_local(&q, path, q.p2len || q.op == K_GETXATTR || q.op == K_SETXATTR ||
                                  q.op == K_REMOVEXATTR ? path2 : NULL, data, &out, &out_cap, &rep, &pass_fd);
            srv_current = NULL;
        }
        if (q.noreply) {
            if (pass_fd >= 0)
                close(pass_fd);
            continue;
        }
        rep.r = r;
        if (r < 0)
            rep.out_len = 0;
        char cbuf[CMSG_SPACE(sizeof(int))];
        struct iovec iov[2] = { { &rep, sizeof rep }, { out, (size_t)rep.out_len } };
        struct msghdr m = { .msg_iov = iov, .msg_iovlen = 2 };
        if (pass_fd >= 0) {
            rep.has_fd = 1;
            memset(cbuf, 0, sizeof cbuf);
            m.msg_control = cbuf;
            m.msg_controllen = sizeof cbuf;
            struct cmsghdr *c = CMSG_FIRSTHDR(&m);
            c->cmsg_level = SOL_SOCKET;
            c->cmsg_type = SCM_RIGHTS;
            c->cmsg_len = CMSG_LEN(sizeof(int));
            memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
        }
        ssize_t w;
        while ((w = sendmsg(fd, &m, MSG_NOSIGNAL)) < 0 && errno == EINTR)
            ;
        if (pass_fd >= 0)
            close(pass_fd);
        size_t total = sizeof rep + (size_t)rep.out_len;
        if (w < 0)
            break;
        if ((size_t)w < total) {    /* the rest, without the fd */
            struct iovec rest[2] = { { &rep, sizeof rep }, { out, (size_t)rep.out_len } };
            struct iovec *rp = rest;
            int rn = 2;
            size_t skip = (size_t)w;
            while (rn > 0 && skip >= rp->iov_len) {
                skip -= rp->iov_len;
                rp++;
                rn--;
            }
            if (rn > 0) {
                rp->iov_base = (char *)rp->iov_base + skip;
                rp->iov_len -= skip;
            }
            if (send_all(fd, rp, rn) < 0)
                break;
        }
    }
    Py_END_ALLOW_THREADS
    free(ib.b);
    free(in);
    free(out);
    become_self();
    Py_RETURN_NONE;
}

/* ---- the server's side: start the workers, install the forwarding table */

/* A worker process, not our child (a subreaper's child would keep the launcher waiting
 * for the command's descendants, shared_mode.reap_all): forked twice, its middle process
 * gone at once. Its end of the socket is fd 3. Returns our end, or -1. */
static int spawn(char *const argv[], char *const envp[])
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        return -1;
    pid_t mid = fork();
    if (mid == 0) {
        if (fork() == 0) {
            if (sv[1] == 3)
                fcntl(3, F_SETFD, 0);
            else if (dup2(sv[1], 3) < 0)
                _exit(127);
            execve(argv[0], argv, envp);
            _exit(127);
        }
        _exit(0);
    }
    close(sv[1]);
    if (mid < 0) {
        close(sv[0]);
        return -1;
    }
    while (waitpid(mid, NULL, 0) < 0 && errno == EINTR)
        ;
    return sv[0];
}

static char **str_list(PyObject *seq)
{
    Py_ssize_t n = PySequence_Length(seq);
    if (n < 0)
        return NULL;
    char **v = calloc((size_t)n + 1, sizeof *v);
    for (Py_ssize_t i = 0; v && i < n; i++) {
        PyObject *o = PySequence_GetItem(seq, i);
        PyObject *b = o ? PyUnicode_EncodeFSDefault(o) : NULL;
        v[i] = b ? strdup(PyBytes_AS_STRING(b)) : NULL;
        Py_XDECREF(b);
        Py_XDECREF(o);
        if (v[i] == NULL) {
            for (Py_ssize_t j = 0; j < i; j++)
                free(v[j]);
            free(v);
            PyErr_Clear();
            return NULL;
        }
    }
    return v;
}

static void str_free(char **v)
{
    for (char **p = v; p && *p; p++)
        free(*p);
    free(v);
}

/* _embedded.workers_start(n, argv, env, local=True): n - 1 worker processes besides this
 * one's instance (local False: n, this one's instance unused: a fusepy script's whose calls
 * must run on its FUSE() thread, which serve_loop holds), each built (its hello) before
 * this returns; RuntimeError if one could not. argv None: the workers are forks of this
 * process already made (workers.py, fork_workers), env the server's end of each one's
 * socket, taken over here. */
PyObject *ldp_workers_start(PyObject *self, PyObject *args)
{
    (void)self;
    int n, local = 1;
    PyObject *pargv, *penv;
    if (!PyArg_ParseTuple(args, "iOO|p", &n, &pargv, &penv, &local))
        return NULL;
    int first = local ? 1 : 0;
    if (fs_ops == NULL || n < 2 || n > WK_MAX) {
        PyErr_Format(PyExc_RuntimeError, "workers: 2 to %d, after serve_init()", WK_MAX);
        return NULL;
    }
    char **argv = NULL, **envp = NULL;
    int forks[WK_MAX];
    if (pargv == Py_None) {
        PyObject *l = PySequence_Fast(penv, "workers: a list of fds");
        if (l == NULL)
            return NULL;
        int bad = PySequence_Fast_GET_SIZE(l) != n - first;
        for (int i = 0; !bad && i < n - first; i++) {
            forks[i] = (int)PyLong_AsLong(PySequence_Fast_GET_ITEM(l, i));
            bad = forks[i] < 0;
        }
        Py_DECREF(l);
        if (bad) {
            PyErr_Clear();
            PyErr_SetString(PyExc_RuntimeError, "workers: one fd for each forked worker");
            return NULL;
        }
    } else if (!(argv = str_list(pargv)) || !(envp = str_list(penv))) {
        str_free(argv);
        str_free(envp);
        PyErr_SetString(PyExc_RuntimeError, "workers: bad argv or environment");
        return NULL;
    }
    const char *t = getenv("LDPFUSE_OP_TIMEOUT");
    if (t && *t)
        wk_timeout_ms = (int)(strtod(t, NULL) * 1000);
    wks[0] = (struct worker){ .fd = -1, .pidfd = -1, .pid = getpid() };
    int ok = 1;
    for (int i = first; i < n; i++)
        wks[i] = (struct worker){ .fd = -1, .pidfd = -1 };
    Py_BEGIN_ALLOW_THREADS
    for (int i = first; i < n && ok; i++) {
        wks[i] = (struct worker){ .fd = argv ? spawn(argv, envp) : forks[i - first], .pidfd = -1 };
        ok = wks[i].fd >= 0;
    }
    /* each worker says it is built (its pid) */
    for (int i = first; i < n && ok; i++) {
        struct wk_rep hello;
        if (recv_head(wks[i].fd, &hello, sizeof hello, NULL) != 0 || hello.r <= 0) {
            ok = 0;
            break;
        }
        wks[i].pid = (pid_t)hello.r;
        wks[i].pidfd = (int)syscall(SYS_pidfd_open, wks[i].pid, 0);
        if (wks[i].pidfd >= 0)
            fcntl(wks[i].pidfd, F_SETFD, FD_CLOEXEC);
    }
    Py_END_ALLOW_THREADS
    str_free(argv);
    str_free(envp);
    if (!ok) {
        for (int i = first; i < n; i++) {
            if (wks[i].pidfd >= 0)
                syscall(SYS_pidfd_send_signal, wks[i].pidfd, SIGKILL, NULL, 0);
            if (wks[i].fd >= 0)
                close(wks[i].fd);   /* the others end at EOF */
        }
        PyErr_SetString(PyExc_RuntimeError, "a worker process could not build its instance (its error is above)");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        pthread_mutex_init(&wks[i].send, NULL);
        if (wks[i].fd >= 0 && wk_timeout_ms > 0) {
            /* a request not taken (a posted release behind a stuck call fills the socket),
             * or the rest of an answer not come, within op_timeout: the worker is stuck */
            struct timeval tv = { .tv_sec = wk_timeout_ms / 1000, .tv_usec = (wk_timeout_ms % 1000) * 1000 };
            setsockopt(wks[i].fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
            setsockopt(wks[i].fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
        }
    }
    nwk = n;
    inner = fs_ops;
    fwd = *inner;
#define SET(x) fwd.x = inner->x ? f_##x : NULL;
    SET(getattr) SET(readlink) SET(mknod) SET(mkdir) SET(unlink) SET(rmdir) SET(symlink) SET(rename)
    SET(link) SET(chmod) SET(chown) SET(truncate) SET(open) SET(create) SET(read) SET(write)
    SET(append) SET(statfs) SET(flush) SET(release) SET(fsync) SET(opendir) SET(readdir)
    SET(releasedir) SET(access) SET(utimens) SET(setxattr) SET(getxattr) SET(listxattr)
    SET(removexattr) SET(lock) SET(flock) SET(ioctl)
#undef SET
    fwd.read_to_fd = NULL;      /* the instance's read comes back over its socket: into a buffer */
    fs_ops = &fwd;
    Py_RETURN_NONE;
}

/* _embedded.workers_stop(grace): each worker's socket closed (it calls its destroy() and
 * ends); one that has not ended grace seconds later is killed. */
PyObject *ldp_workers_stop(PyObject *self, PyObject *args)
{
    (void)self;
    double grace = 5;
    if (!PyArg_ParseTuple(args, "|d", &grace))
        return NULL;
    Py_BEGIN_ALLOW_THREADS
    __atomic_store_n(&wk_stopping, 1, __ATOMIC_RELEASE);
    for (int i = 0; i < nwk; i++)
        if (wks[i].fd >= 0)
            shutdown(wks[i].fd, SHUT_RDWR);
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (int i = 0; i < nwk; i++) {
        if (wks[i].fd < 0 || wks[i].pidfd < 0)
            continue;
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        double left = grace - ((double)(now.tv_sec - t0.tv_sec) + (double)(now.tv_nsec - t0.tv_nsec) / 1e9);
        struct pollfd p = { .fd = wks[i].pidfd, .events = POLLIN };
        if (left <= 0 || poll(&p, 1, (int)(left * 1000)) <= 0)
            syscall(SYS_pidfd_send_signal, wks[i].pidfd, SIGKILL, NULL, 0);
    }
    Py_END_ALLOW_THREADS
    Py_RETURN_NONE;
}

/* _embedded.worker_pids(): the worker processes' pids (tests, --stats). */
PyObject *ldp_worker_pids(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    PyObject *l = PyList_New(0);
    for (int i = 0; l && i < nwk; i++) {
        if (wks[i].fd < 0)
            continue;
        PyObject *v = PyLong_FromLong(wks[i].pid);
        if (!v || PyList_Append(l, v) < 0) {
            Py_XDECREF(v);
            Py_DECREF(l);
            return NULL;
        }
        Py_DECREF(v);
    }
    return l;
}
