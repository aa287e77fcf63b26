/*
 * What a request may say. A request is read once out of the client's region (or, for a
 * connection's first, off its socket, after the hello that proves the client belongs to
 * the command: peers.c), and every field is checked against the connection before the
 * class sees it:
 *
 *  - the operation and the mount index are ones that exist;
 *  - the lengths add up, and the body fits the region (a connection's first, its socket's
 *    WIRE_FIRST_MAX): nothing is read from a client that has not sent it whole, so a slow
 *    or stopped client never holds a serving thread;
 *  - names are mount paths as the kernel would pass them: absolute, normalised (no `.`,
 *    `..` or empty component: nothing above the mount's root), no NUL, shorter than
 *    WIRE_PATH_MAX bytes and NAME_MAX a component; a symlink's target and an xattr's
 *    name only have no NUL and their limits;
 *  - sizes asked for are capped (a read at the region's size, xattrs at 64 KiB), offsets
 *    and lengths are not negative, modes and ids are ones that exist;
 *  - a handle (fh) is a token this process was given or inherited (handles.c), of the kind
 *    the operation takes, on this mount, opened for what the operation does (no read
 *    through a handle opened for writing only, nor the other way); the class gets the
 *    handle's path, not the one the request names;
 *  - the caller's identity now is one the server may serve (peers.c: the launcher's uid,
 *    others with allow_other, root with allow_root);
 *  - with default_permissions, the caller's rights from getattr (permissions.c).
 *
 * The answer goes into the region; what rides on the socket (fds, a listing bigger than
 * the region) is sent without waiting: a client that does not read what it asked for loses
 * its connection, after a bounded time, on a thread of its own (the sender), and no other
 * client waits for it.
 */
#include "server.h"
#include "../stats.h"
#include <poll.h>
#include <stdio.h>
#include <sys/file.h>
#include <sys/uio.h>

/* ---- names */

/* A mount path as the kernel passes one: 0, or -EINVAL / -ENAMETOOLONG. */
static int check_path(const char *p, size_t len)
{
    if (len == 0 || p[0] != '/' || memchr(p, '\0', len))
        return -EINVAL;
    if (len >= WIRE_PATH_MAX)
        return -ENAMETOOLONG;
    if (len == 1)
        return 0;           /* the root */
    const char *end = p + len, *c = p + 1;
    while (c <= end) {
        const char *slash = memchr(c, '/', (size_t)(end - c));
        const char *stop = slash ? slash : end;
        size_t n = (size_t)(stop - c);
        if (n == 0 || (n == 1 && c[0] == '.') || (n == 2 && c[0] == '.' && c[1] == '.'))
            return -EINVAL;     /* "//", a trailing "/", ".", ".." */
        if (n > WIRE_NAME_MAX)
            return -ENAMETOOLONG;
        c = stop + 1;
    }
    return 0;
}

/* Bytes with no NUL, 1..max of them (a symlink's target, an xattr's name). */
static int check_text(const char *p, size_t len, size_t max)
{
    if (len == 0 || memchr(p, '\0', len))
        return -EINVAL;
    return len > max ? (max == WIRE_NAME_MAX ? -ERANGE : -ENAMETOOLONG) : 0;
}

/* ---- the fields of each operation */

enum fh_use { FH_NONE, FH_MAY, FH_MUST };
struct op_rule {
    unsigned char path2;    /* 0: none, 1: a mount path, 2: a symlink's target, 3: an xattr name,
                               4: none or a text (W_AFTER's second name) */
    unsigned char data;     /* data may come */
    unsigned char fh;       /* enum fh_use */
    unsigned char kind;     /* the handle's kind: W_OPEN, W_OPENDIR, W_CACHE_OPEN */
};
static const struct op_rule rules[W_OP_MAX + 1] = {
    [W_GETATTR] = { .fh = FH_MAY, .kind = W_OPEN },
    [W_READLINK] = { 0 },
    [W_MKNOD] = { 0 }, [W_MKDIR] = { 0 }, [W_UNLINK] = { 0 }, [W_RMDIR] = { 0 },
    [W_SYMLINK] = { .path2 = 2 },
    [W_RENAME] = { .path2 = 1 }, [W_LINK] = { .path2 = 1 },
    [W_CHMOD] = { 0 }, [W_CHOWN] = { 0 },
    [W_TRUNCATE] = { .fh = FH_MAY, .kind = W_OPEN },
    [W_OPEN] = { 0 }, [W_CREATE] = { 0 },
    [W_READ] = { .fh = FH_MUST, .kind = W_OPEN },
    [W_WRITE] = { .data = 1, .fh = FH_MUST, .kind = W_OPEN },
    [W_STATFS] = { 0 },
    [W_FLUSH] = { .fh = FH_MUST, .kind = W_OPEN },
    [W_RELEASE] = { .fh = FH_MUST, .kind = W_OPEN },
    [W_FSYNC] = { .fh = FH_MUST, .kind = W_OPEN },
    [W_OPENDIR] = { 0 },
    [W_READDIR] = { .fh = FH_MUST, .kind = W_OPENDIR },
    [W_RELEASEDIR] = { .fh = FH_MUST, .kind = W_OPENDIR },
    [W_ACCESS] = { 0 },
    [W_UTIMENS] = { .data = 1 },
    [W_SETXATTR] = { .path2 = 3, .data = 1 }, [W_GETXATTR] = { .path2 = 3 },
    [W_LISTXATTR] = { 0 }, [W_REMOVEXATTR] = { .path2 = 3 },
    [W_APPEND] = { .data = 1, .fh = FH_MUST, .kind = W_OPEN },
    [W_CACHE_OPEN] = { .fh = FH_MAY, .kind = W_OPEN },
    [W_CACHE_CLOSE] = { .fh = FH_MUST, .kind = W_CACHE_OPEN },
    [W_FIFO] = { 0 },
    [W_COHERENCE] = { 0 },
    [W_IOCTL] = { .data = 1, .fh = FH_MUST, .kind = W_OPEN },
    [W_CREATE_OPEN] = { 0 },
    [W_WRITTEN] = { 0 },
    [W_LOCK] = { .data = 1, .fh = FH_MUST, .kind = W_OPEN },
    [W_MOVED] = { .path2 = 1 },
    [W_PASS] = { .fh = FH_MUST, .kind = W_OPEN },
    [W_CLAIM] = { 0 },
    [W_AFTER] = { .path2 = 4, .data = 1 },
};

static int valid_id(int64_t id)
{
    return id == -1 || (id >= 0 && id <= (int64_t)UINT32_MAX - 1) || id == (int64_t)UINT32_MAX;
}

/* The checks of the comment above, on rq and its body (cl->path, path2, data, split and
 * NUL-terminated). 0, or the -errno the caller gets without the class being called. */
static int request_check(struct client *cl, struct wire_req *rq)
{
    if (rq->op == 0 || rq->op > W_OP_MAX)
        return -ENOSYS;
    if (rq->mnt >= fs_nmounts)
        return -EINVAL;
    const struct op_rule *rule = &rules[rq->op];
    int r = check_path(cl->path, rq->path_len);
    if (r < 0)
        return r;
    switch (rule->path2) {
    case 0: r = rq->path2_len ? -EINVAL : 0; break;
    case 1: r = check_path(cl->path2, rq->path2_len); break;
    case 2: r = check_text(cl->path2, rq->path2_len, PATH_MAX - 1); break;
    case 4: r = rq->path2_len ? check_text(cl->path2, rq->path2_len, PATH_MAX - 1) : 0; break;
    default: r = check_text(cl->path2, rq->path2_len, WIRE_NAME_MAX); break;
    }
    if (r < 0)
        return r;
    if (!rule->data && rq->data_len)
        return -EINVAL;
    switch (rq->op) {
    case W_READ:
        if (rq->b < 0)
            return -EINVAL;
        if (rq->a < 0 || rq->a > (int64_t)CHAN_BUF)
            rq->a = CHAN_BUF;       /* the client asks again for the rest */
        break;
    case W_READLINK:
        if (rq->a < 0 || rq->a > PATH_MAX)
            rq->a = PATH_MAX;
        break;
    case W_GETXATTR: case W_LISTXATTR:
        if (rq->a < 0 || rq->a > WIRE_XATTR_MAX)
            rq->a = WIRE_XATTR_MAX;
        break;
    case W_WRITE:
        if (rq->b < 0 || rq->b > INT64_MAX - (int64_t)rq->data_len)
            return -EINVAL;
        break;
    case W_SETXATTR:
        if (rq->data_len > WIRE_XATTR_MAX)
            return -E2BIG;
        break;
    case W_TRUNCATE:
        if (rq->a < 0)
            return -EINVAL;
        break;
    case W_CACHE_OPEN:
        if (rq->a < 0)
            return -EINVAL;
        break;
    case W_PASS: case W_CLAIM:     /* an fd number of the caller's */
        if (rq->a < 0 || rq->a > INT32_MAX)
            return -EBADF;
        break;
    case W_AFTER:       /* one BK_* bit (ldpfuse.h), a result, a struct stat with getattr's */
        if (rq->a <= 0 || rq->a > (1 << 22) || (rq->a & (rq->a - 1)) || rq->b > 0 || rq->b < -4095 ||
            rq->data_len != (rq->a == AFTER_GETATTR ? sizeof(struct stat) : 0))
            return -EINVAL;
        break;
    case W_RELEASE:     /* b: a page cache's token, released too (dispatch.c checks it) */
        if (rq->c != 0 && rq->c != RELEASE_CACHE_TOO)
            return -EINVAL;
        break;
    case W_CHOWN:
        if (!valid_id(rq->a) || !valid_id(rq->b))
            return -EINVAL;
        break;
    case W_MKNOD: case W_MKDIR: case W_CREATE: case W_CHMOD: case W_CREATE_OPEN:
        if (rq->a < 0 || rq->a > (int64_t)(S_IFMT | 07777))
            return -EINVAL;
        break;
    case W_ACCESS:
        if (rq->a & ~(int64_t)(R_OK | W_OK | X_OK))
            return -EINVAL;
        break;
    case W_UTIMENS: {
        if (rq->data_len != 0 && rq->data_len != 2 * sizeof(struct timespec))
            return -EINVAL;
        struct timespec ts[2];      /* copied out: the body has no alignment to speak of */
        memcpy(ts, cl->data, rq->data_len);
        for (unsigned i = 0; rq->data_len && i < 2; i++)
            if (ts[i].tv_nsec != UTIME_NOW && ts[i].tv_nsec != UTIME_OMIT &&
                (ts[i].tv_nsec < 0 || ts[i].tv_nsec >= 1000000000L))
                return -EINVAL;
        break;
    }
    case W_IOCTL:
        if (rq->data_len != 0 && rq->data_len != _IOC_SIZE((unsigned int)rq->a))
            return -EINVAL;
        break;
    case W_LOCK:
        if (rq->b == 1) {       /* flock */
            int op = (int)rq->a;
            if (rq->data_len != 0 || rq->a != (int64_t)op ||
                ((op & ~LOCK_NB) != LOCK_SH && (op & ~LOCK_NB) != LOCK_EX && op != LOCK_UN))
                return -EINVAL;
        } else if (rq->b == 0) {
            struct flock fl;
            if (rq->data_len != sizeof fl || (rq->a != F_GETLK && rq->a != F_SETLK))
                return -EINVAL;
            memcpy(&fl, cl->data, sizeof fl);
            if ((fl.l_type != F_RDLCK && fl.l_type != F_WRLCK && fl.l_type != F_UNLCK) ||
                fl.l_whence != SEEK_SET || fl.l_start < 0 || fl.l_len < 0 ||
                fl.l_start > INT64_MAX - fl.l_len)
                return -EINVAL;
        } else {
            return -EINVAL;
        }
        break;
    }
    /* the handle */
    if (rule->fh == FH_NONE || (rule->fh == FH_MAY && !rq->has_fh))
        rq->has_fh = 0;
    else if (!rq->has_fh || handle_get(rule->kind, rq->mnt, rq->fh, &cl->line, &cl->h, &cl->href, cl->hpath) < 0)
        return -EBADF;
    /* the class gets the handle's own path, as the kernel gives the open file's: a class
     * that finds its files by path (fusepy's memory example) must not be led by a request
     * naming another file to read or write that one through this handle */
    if (rq->has_fh && rq->op != W_CACHE_OPEN && rq->op != W_CACHE_CLOSE)
        cl->path = cl->hpath;
    if (rq->has_fh && rule->kind == W_OPEN) {
        int acc = cl->h.flags & O_ACCMODE;
        if (rq->op == W_READ && acc == O_WRONLY)
            return -EBADF;
        if ((rq->op == W_WRITE || rq->op == W_APPEND) && acc == O_RDONLY)
            return -EBADF;
        /* ftruncate needs a handle open for writing (EINVAL, as the kernel's); an
         * O_RDONLY | O_TRUNC open truncates through its own */
        if (rq->op == W_TRUNCATE && acc == O_RDONLY && !(cl->h.flags & O_TRUNC))
            return -EINVAL;
        /* a write lock needs a handle open for writing, a read lock one open for reading,
         * as the kernel's F_SETLK (F_GETLK asks only) */
        if (rq->op == W_LOCK && rq->b == 0 && rq->a == F_SETLK) {
            struct flock fl;
            memcpy(&fl, cl->data, sizeof fl);
            if ((fl.l_type == F_WRLCK && acc == O_RDONLY) || (fl.l_type == F_RDLCK && acc == O_WRONLY))
                return -EBADF;
        }
    }
    /* who asks */
    request_identity(cl, rq);
    if (!peer_uid_allowed(cl->as_uid))
        return -EACCES;
    return 0;
}

/* ---- reading a request */

/* Has the first request of cl (on its socket, after the hello) come in whole? 1 yes, 0
 * not yet, -1 the client has gone or sent what no client of ours sends. */
int first_ready(struct client *cl)
{
    return first_ready_fd(cl->fd);
}

/* The same, of a connection not yet admitted (peers.c): fd. */
int first_ready_fd(int fd)
{
    struct {
        struct wire_hello hello;
        struct wire_req rq;
    } head;
    ssize_t n = recv(fd, &head, sizeof head, MSG_PEEK | MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR))
        return -1;
    if (n < (ssize_t)sizeof head)
        return 0;
    if (head.hello.magic != WIRE_HELLO_MAGIC || head.rq.len > WIRE_FIRST_MAX)
        return -1;
    if (head.rq.len == 0)
        return 1;
    /* the body too: peeked whole, so reading it cannot wait */
    char peek[sizeof head + WIRE_FIRST_MAX];
    n = recv(fd, peek, sizeof head + head.rq.len, MSG_PEEK | MSG_DONTWAIT);
    return n == (ssize_t)(sizeof head + head.rq.len) ? 1 : n == 0 ? -1 : 0;
}

/* Constant time: how much of the secret a wrong guess got right says nothing. */
int secret_ok(const unsigned char *s)
{
    unsigned char d = 0;
    for (int i = 0; i < WIRE_SECRET_LEN; i++)
        d |= (unsigned char)(s[i] ^ policy.secret[i]);
    return d == 0;
}

/* The first request, off the socket: all there (first_ready), so no read here waits. */
static int read_first(struct client *cl, struct wire_req *rq, char **body)
{
    struct wire_hello hello;
    if (recv(cl->fd, &hello, sizeof hello, MSG_DONTWAIT) != (ssize_t)sizeof hello ||
        recv(cl->fd, rq, sizeof *rq, MSG_DONTWAIT) != (ssize_t)sizeof *rq)
        return -1;
    if (hello.magic != WIRE_HELLO_MAGIC || !secret_ok(hello.secret)) {
        static int logged;      /* once: a flood of them must not fill the log */
        if (!__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
            server_logf("refused pid %d (uid %u): it does not hold the run's secret (logged once)",
                        (int)cl->pid, (unsigned)cl->uid);
        return -1;
    }
    cl->authed = 1;
    cl->want_coherence = (hello.flags & HELLO_WANT_COHERENCE) != 0;
    if (rq->len > WIRE_FIRST_MAX)
        return -1;
    *body = malloc((size_t)rq->len + 3);
    if (*body == NULL)
        return -1;
    if (rq->len && recv(cl->fd, *body, rq->len, MSG_DONTWAIT) != (ssize_t)rq->len) {
        free(*body);
        return -1;
    }
    return 0;
}

/* The body split into its parts, each NUL-terminated (room for it was allocated). */
static void body_split(struct client *cl, const struct wire_req *rq, char *body)
{
    cl->path = body;
    cl->path2 = body + rq->path_len + 1;
    cl->data = cl->path2 + rq->path2_len + 1;
    memmove(cl->data, body + rq->path_len + rq->path2_len, rq->data_len);
    memmove(cl->path2, body + rq->path_len, rq->path2_len);
    cl->path[rq->path_len] = '\0';
    cl->path2[rq->path2_len] = '\0';
}

/* ---- the sender: answers' data bigger than the region, pushed on a thread of its own */

struct sending {
    struct sending *next;
    int fd;                 /* a dup of the client's socket */
    char *buf;
    size_t len, off;
    uint64_t stalled_since;
    int *busy;              /* the client's flag, cleared when done (NULL once it has gone) */
};
#define SEND_STALL_NS (10ull * 1000000000ull)   /* no progress for this long: cut off */
static struct sending *sendings;
static pthread_mutex_t send_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t send_cond = PTHREAD_COND_INITIALIZER;
static int sender_started;

static void *sender_thread(void *arg)
{
    (void)arg;
    for (;;) {
        pthread_mutex_lock(&send_lock);
        while (sendings == NULL)
            pthread_cond_wait(&send_cond, &send_lock);
        struct pollfd p[64];
        int n = 0;
        for (struct sending *s = sendings; s && n < 64; s = s->next)
            p[n++] = (struct pollfd){ .fd = s->fd, .events = POLLOUT };
        pthread_mutex_unlock(&send_lock);
        poll(p, (nfds_t)n, 100);
        uint64_t now = chan_now_ns();
        pthread_mutex_lock(&send_lock);
        for (struct sending **q = &sendings; *q;) {
            struct sending *s = *q;
            ssize_t w = send(s->fd, s->buf + s->off, s->len - s->off, MSG_DONTWAIT | MSG_NOSIGNAL);
            if (w > 0) {
                s->off += (size_t)w;
                s->stalled_since = now;
            }
            int failed = (w < 0 && errno != EAGAIN && errno != EINTR) || now - s->stalled_since > SEND_STALL_NS;
            if (s->off < s->len && !failed) {
                q = &s->next;
                continue;
            }
            if (failed)
                shutdown(s->fd, SHUT_RDWR);     /* it did not read: its connection ends */
            if (s->busy)
                __atomic_store_n(s->busy, 0, __ATOMIC_RELEASE);
            *q = s->next;
            close(s->fd);
            free(s->buf);
            free(s);
        }
        pthread_mutex_unlock(&send_lock);
    }
    return NULL;
}

/* data (len bytes, ours to free) to go on cl's socket after its answer. -1: it cannot. */
static int send_later(struct client *cl, void *data, size_t len, int *busy)
{
    struct sending *s = calloc(1, sizeof *s);
    int fd = s ? fcntl(cl->fd, F_DUPFD_CLOEXEC, 0) : -1;
    if (fd < 0) {
        free(s);
        free(data);
        return -1;
    }
    *s = (struct sending){ .fd = fd, .buf = data, .len = len, .stalled_since = chan_now_ns(), .busy = busy };
    __atomic_store_n(busy, 1, __ATOMIC_RELEASE);
    pthread_mutex_lock(&send_lock);
    if (!sender_started) {
        pthread_t t;
        if (pthread_create(&t, NULL, sender_thread, NULL) == 0) {
            pthread_detach(t);
            sender_started = 1;
        }
    }
    s->next = sendings;
    sendings = s;
    pthread_cond_signal(&send_cond);
    pthread_mutex_unlock(&send_lock);
    return 0;
}

/* cl has gone: the sender must not touch its flag any more. */
void sender_forget(struct client *cl)
{
    pthread_mutex_lock(&send_lock);
    for (struct sending *s = sendings; s; s = s->next)
        if (s->busy == &cl->sending)
            s->busy = NULL;
    pthread_mutex_unlock(&send_lock);
}

/* Fds for the answer, one message with one byte, without waiting: the client takes them
 * before it reads the answer, so the socket has room unless it broke the protocol. */
static int send_fds(int sock, const int *fds, int n)
{
    char byte = 0;
    struct iovec iov = { &byte, 1 };
    char cbuf[CMSG_SPACE(2 * sizeof(int))];
    memset(cbuf, 0, sizeof cbuf);
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                         .msg_controllen = CMSG_SPACE((size_t)n * sizeof(int)) };
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN((size_t)n * sizeof(int));
    memcpy(CMSG_DATA(c), fds, (size_t)n * sizeof(int));
    ssize_t w;
    do {
        w = sendmsg(sock, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    } while (w < 0 && errno == EINTR);
    return w == 1 ? 0 : -1;
}

/* ---- --stats: per operation, the time a request spent in the server (its checks, the
 * class's method, the conversions) and in transport (what its caller saw, told with the
 * caller's next request on the channel, less the server's part) */

int stats_enabled;
static struct op_stats in_server[W_OP_MAX + 1], in_transport[W_OP_MAX + 1];

static void stats_request(struct client *cl, unsigned op, uint64_t server_ns, uint32_t prev_us)
{
    if (op > W_OP_MAX)
        return;
    stats_add(&in_server[op], server_ns);
    uint64_t seen = (uint64_t)prev_us * 1000;
    if (prev_us && cl->stats_prev_op && seen > cl->stats_prev_ns)
        stats_add(&in_transport[cl->stats_prev_op], seen - cl->stats_prev_ns);
    cl->stats_prev_op = op;
    cl->stats_prev_ns = server_ns;
}

/* The table for the launcher: (operation's name, count, server total, p50, p99, transport
 * count, total, p50, p99) for each operation called, times in ns. */
PyObject *ldp_server_stats(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    PyObject *list = PyList_New(0);
    for (unsigned op = 1; list && op <= W_OP_MAX; op++) {
        const struct op_stats *s = &in_server[op], *t = &in_transport[op];
        if (__atomic_load_n(&s->count, __ATOMIC_RELAXED) == 0)
            continue;
        PyObject *row = Py_BuildValue("(sKKKKKKKK)", wire_op_name(op), (unsigned long long)s->count, (unsigned long long)s->total_ns,
                                      (unsigned long long)stats_quantile(s, 0.5), (unsigned long long)stats_quantile(s, 0.99),
                                      (unsigned long long)t->count, (unsigned long long)t->total_ns,
                                      (unsigned long long)stats_quantile(t, 0.5), (unsigned long long)stats_quantile(t, 0.99));
        if (row == NULL || PyList_Append(list, row) < 0) {
            Py_XDECREF(row);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(row);
    }
    return list;
}

/* ---- one request */

/* A client whose last answer's data the sender still pushes sent another request: a
 * client of ours reads all of it first, so this is the sender finishing its last write,
 * or a client that broke the protocol (then it goes). */
static int previous_sent(struct client *cl)
{
    for (int i = 0; i < 1000 && __atomic_load_n(&cl->sending, __ATOMIC_ACQUIRE); i++)
        usleep(10);
    return __atomic_load_n(&cl->sending, __ATOMIC_ACQUIRE) ? -1 : 0;
}

/* Answer the request cl's client published in its region (its first request: sent on the
 * socket). -1: the client has gone (or broke the protocol): the caller drops it. */
int serve_request(struct client *cl)
{
    struct chan_region *rg = cl->region;
    struct wire_req rq;
    char *body = NULL;
    int on_socket = cl->first;
    cl->first = 0;
    if (on_socket && chan_load(&rg->state) == CHAN_GAVE_UP)
        return -1;      /* given up (op_timeout) before its turn, and gone: never run */
    if (on_socket) {
        if (read_first(cl, &rq, &body) < 0)
            return -1;
    } else {
        if (!cl->authed || previous_sent(cl) < 0)
            return -1;
        rq = rg->rq;    /* once: what the client writes from now on changes nothing */
        if (rq.len > CHAN_BUF)
            return -1;
        if ((body = malloc((size_t)rq.len + 3)) == NULL)
            return -1;
        memcpy(body, rg->buf, rq.len);
    }
    if ((uint64_t)rq.path_len + rq.path2_len + rq.data_len != rq.len) {
        free(body);
        return -1;
    }
    body_split(cl, &rq, body);
    cl->rq = &rq;
    cl->body = body;
    uint64_t t0 = stats_enabled ? chan_now_ns() : 0;
    int bad = request_check(cl, &rq);
    if (bad == 0 && become(cl->as_uid, cl->as_gid, cl->as_ngroups, cl->as_groups, cl->as_caps) < 0)
        bad = -EPERM;   /* it cannot run as its caller: it does not run */
    if (bad == 0 && policy.default_permissions) {
        srv_current = cl;       /* the class's getattr may ask fuse_get_context() */
        bad = perm_check(cl, rq.op, rq.mnt, cl->path, cl->path2, rq.a, rq.b);
        srv_current = NULL;
    }
    if (bad == 0) {
        do_op(cl);
    } else {
        cl->r = bad;
        cl->fh = 0;
        cl->out = NULL;
        cl->out_len = 0;
        cl->pass_fd = -1;
        cl->added = 0;
    }
    handle_put(&cl->href);      /* before anything that may wait for the handle's users */
    if (t0)
        stats_request(cl, rq.op, chan_now_ns() - t0, rq.prev_us);
    int ret = 0;
    struct wire_resp rs = { .len = (uint32_t)cl->out_len, .result = cl->r, .fh = cl->fh };
    /* the fds before the answer: the client that sees the answer finds them waiting and
     * never sleeps in recvmsg for them */
    int fds[2], nfd = 0;
    if (on_socket && cl->want_coherence && (fds[nfd] = coh_reader_fd()) >= 0) {
        rs.has_fd |= RESP_FD_TABLE;
        nfd++;
    }
    if (cl->pass_fd >= 0) {
        rs.has_fd |= RESP_FD;
        fds[nfd++] = cl->pass_fd;
    }
    if (nfd > 0 && send_fds(cl->fd, fds, nfd) < 0)
        ret = -1;
    if (rs.has_fd & RESP_FD_TABLE)
        close(fds[0]);
    rg->rs = rs;
    if (cl->out_len <= CHAN_BUF && cl->out_len)
        memcpy(rg->buf, cl->out, cl->out_len);
    if (ret < 0 || !chan_settle(&rg->state, on_socket ? CHAN_IDLE : CHAN_REQ, CHAN_RESP)) {
        answer_dropped(cl);     /* the client gave up waiting (op_timeout) and left */
        ret = -1;
    } else {
        if (chan_load(&rg->client_waits))
            chan_wake(&rg->state);
        /* data that did not fit only after it, by the sender: the client reads it once it
         * has the answer */
        if (cl->out_len > CHAN_BUF) {
            if (send_later(cl, cl->out, cl->out_len, &cl->sending) < 0)
                ret = -1;
            cl->out = NULL;     /* the sender's now */
        }
    }
    if (cl->pass_fd >= 0)
        close(cl->pass_fd);         /* the client has its own now */
    if (cl->out != cl->small)
        free(cl->out);
    free(body);
    cl->rq = NULL;
    cl->body = NULL;
    return ret;
}
