/*
 * The client's channels to the shared mode's server (backend/channel.h): one per thread,
 * made at the thread's first request, so threads of a process never queue behind each
 * other. Each is a connection to the server's socket plus the region the server hands over
 * it. The connection's first request rides on the socket right after connect(), without
 * waiting for the region: the server reads it as soon as it has accepted, and answers it in
 * the region its first message brought (a short process's first operation is one round
 * trip, not a hand-shake and then a request). A request is written into the region and the server woken only if it sleeps; the
 * caller spins a little for the answer while that pays (chan_spin: in a run of requests
 * most answers come within microseconds; a connection's first answer is spun for longer,
 * as its CPU would otherwise go idle; no spin goes on once the CPU turns out busy), then sleeps on the
 * futex in slices, checking between slices that the server still lives: a dead server is
 * EIO within one slice, never a hang.
 * A live server whose method never returns is bounded too (op_timeout, LDPFUSE_OP_TIMEOUT,
 * default 60 s, 0 = wait for ever): past it, within a slice, the caller gives the request
 * up (chan_settle: the server then drops the answer and releases what it handed over),
 * lets go of the channel and gets EIO; its next call makes a fresh channel. The clock is
 * read only after a slice slept, so a round trip that needs no sleep pays nothing. A body
 * too big for the region waits for the server to take it under the same bound.
 * While the FS thread (a class that is not thread_safe) has been in one request for longer
 * than op_timeout (the server says so in the table every process maps, backend/coherence.h,
 * fs), every wait behind it, in every process, gives up after CHAN_STUCK_MS (CHAN_STUCK)
 * instead of queueing a whole op_timeout each. Only a wait that slept looks.
 *
 * A connection is made only to the launcher this process was given (server_is: its pid
 * and start time, LDPFUSE_SERVER_PID and LDPFUSE_SERVER_START), checked before a byte is
 * sent; once the launcher has ended, every call is EIO for good (server_ended).
 *
 * A signal handler that makes a request while its thread waits for another (nested calls)
 * gets a channel of the next depth. A forked child drops its parent's channels (pthread_atfork)
 * and makes its own; a thread that ends closes its own (the server then lets go of its
 * side). The sockets live on high fd numbers (fs_fd); a program that closes or dup2()s over
 * one of them (close_range in a child) makes that channel reconnect at its next use: a
 * close_range's own requests (kept caches let go of, flushes) go out before it marks its
 * channels lost (interpose/fd.c), and one another thread made meanwhile, whose socket the
 * close took, is found after it (shared_fds_closed). A new
 * socket is born on the lowest free number: one that a process sharing the fd table
 * replaced before it moved up is found (connected_socket) and made again.
 */
#include "../ldpfuse.h"
#include "channel.h"
#include "coherence.h"
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sched.h>

#define CHAN_DEPTH 4            /* nested requests (signal handlers) per thread */
#define CHAN_SLICE_MS 50        /* between checks that the server lives */
#define CHAN_FIRST_SPIN_NS 300000   /* for a connection's first answer (channel_wait) */
#define CHAN_STUCK_MS 100       /* how long a request waits for an FS thread seen stuck */
#define CHAN_OPS 64             /* answer times learned per op (wire.h's ops, masked) */
#define CHAN_LONG_SPIN_NS 200000    /* the longest spin an op's learned answer time earns */

struct channel {
    struct channel *next;       /* every channel of the process (fork, fd checks) */
    int sock;
    int lost;                   /* the program closed or replaced our socket's number */
    struct chan_region *r;      /* NULL until the first request (channel_send) */
    int refused;                /* the server refused this process: the errno it said */
    int hello_flags;            /* what the connection's hello asked (HELLO_WANT_COHERENCE) */
    uint64_t hello_busy_since;  /* the server's hello: since when its FS thread was in a request */
    struct chan_spin spin;
    int answered;               /* a request has been answered on it */
    int posted;                 /* a request was posted (channel_post): its answer is unread */
    uint16_t op;                /* the op of the request in flight, and when it was sent */
    uint64_t sent_ns;
    uint32_t expect_ns[CHAN_OPS];   /* how long each op's answer takes, as spins saw it (0: no
                                     * longer than the spin budget as far as we know) */
    uint32_t last_us;           /* --stats: the round trip of its last request */
};

struct thread_channels {
    struct channel *at[CHAN_DEPTH];
};

static struct channel *channels;
static pthread_mutex_t channels_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_key_t thread_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static TLS struct thread_channels *t_chans;
static TLS int t_depth;
static long spin_ns = -1;
static int64_t op_timeout_ns = -1;

/* the lowest fd number of a channel: close/dup2 wrappers read it on any thread (atomic,
 * relaxed: a stale value only asks shared_fds_lost, which takes the lock, once more) */
int ldp_private_fd = INT_MAX;

static void private_fd_update(void)     /* channels_lock held */
{
    int low = INT_MAX;
    for (struct channel *c = channels; c; c = c->next)
        if (!c->lost && c->sock < low)
            low = c->sock;
    __atomic_store_n(&ldp_private_fd, low, __ATOMIC_RELAXED);
}

/* The program closed or replaced fds first..last: any of ours among them is lost. */
void shared_fds_lost(unsigned first, unsigned last)
{
    pthread_mutex_lock(&channels_lock);
    for (struct channel *c = channels; c; c = c->next)
        if ((unsigned)c->sock >= first && (unsigned)c->sock <= last)
            c->lost = 1;
    private_fd_update();
    pthread_mutex_unlock(&channels_lock);
}

static void channel_free(struct channel *c)
{
    pthread_mutex_lock(&channels_lock);
    for (struct channel **p = &channels; *p; p = &(*p)->next)
        if (*p == c) {
            *p = c->next;
            break;
        }
    private_fd_update();
    pthread_mutex_unlock(&channels_lock);
    if (!c->lost)
        REAL(close)(c->sock);
    if (c->r)
        munmap(c->r, CHAN_SIZE);
    free(c);
}

static void thread_ends(void *arg)
{
    struct thread_channels *tc = arg;
    for (int i = 0; i < CHAN_DEPTH; i++)
        if (tc->at[i])
            channel_free(tc->at[i]);
    free(tc);
    t_chans = NULL;
}

static void key_make(void)
{
    pthread_key_create(&thread_key, thread_ends);
}

/* --stats: the round trip of c's last request (us), told with the next one. */
uint32_t channel_last_us(const struct channel *c)
{
    return c->last_us;
}

void channel_note_us(struct channel *c, uint32_t us)
{
    c->last_us = us;
}

/* Why the server refused this process (an errno), after CHAN_REFUSED. */
int channel_refused(struct channel *c)
{
    return c->refused;
}

/* fd is a memfd the server made: sealed against shrinking and growing, of exactly `size`
 * bytes. A process that shares our fd table (clone(CLONE_FILES): stress-ng's dup) may have
 * put a file of its own on the number an fd arrived on before we map it; mapping that one
 * shared and writable would write into the program's file, or fault past its end. */
int channel_memfd_ok(int fd, off_t size)
{
    struct stat st;
    int seals = REAL(fcntl)(fd, F_GET_SEALS);
    return seals >= 0 && (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) == (F_SEAL_SHRINK | F_SEAL_GROW) &&
           REAL(fstat)(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size == size;
}

/* The region comes first on the socket: a header with the memfd riding along; or a refusal
 * (the header's result is -errno: this process may not use the file system, server/peers.c).
 * NULL, with *refused the errno if refused. */
static struct chan_region *region_receive(int sock, int *refused, uint64_t *busy_since)
{
    struct wire_resp hello;
    int mfd = -1;
    char cbuf[CMSG_SPACE(2 * sizeof(int))];
    struct iovec iov = { &hello, sizeof hello };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
    ssize_t r;
    /* spun for, as the answer after it is (channel_wait): asleep here, this process would
     * pay its CPU's wake-up when the accept thread, started on the other CPU, sends it */
    char peek;
    struct chan_spinner spin;
    chan_spin_start(&spin, CHAN_FIRST_SPIN_NS);
    while (recv(sock, &peek, 1, MSG_PEEK | MSG_DONTWAIT) < 0 && errno == EAGAIN && chan_spin_turn(&spin))
        ;
    do {
        r = recvmsg(sock, &mh, MSG_CMSG_CLOEXEC | MSG_WAITALL);
    } while (r < 0 && errno == EINTR);
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); r > 0 && c; c = CMSG_NXTHDR(&mh, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            int n = (int)((c->cmsg_len - CMSG_LEN(0)) / sizeof(int));
            int got[2] = { -1, -1 };
            memcpy(got, CMSG_DATA(c), (size_t)(n < 2 ? n : 2) * sizeof(int));
            mfd = got[0];
            if (n > 1 && got[1] >= 0)
                REAL(close)(got[1]);
        }
    if (r == sizeof hello && hello.result < 0 && hello.result > -4096)
        *refused = (int)-hello.result;
    if (r == sizeof hello)
        *busy_since = hello.fh;
    if (mfd < 0)
        return NULL;
    void *p = MAP_FAILED;
    if (r == sizeof hello && hello.result == CHAN_SIZE && channel_memfd_ok(mfd, CHAN_SIZE))
        p = mmap(NULL, CHAN_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    REAL(close)(mfd);
    return p == MAP_FAILED ? NULL : p;
}

/* The run's secret (LDPFUSE_SECRET, hex): what proves to the server that this process is
 * one of the command's (server/peers.c). Read once: the environment is the program's. */
static unsigned char secret[WIRE_SECRET_LEN];
static int secret_state;        /* 0 unread, 1 read, -1 none */
static pthread_once_t secret_once = PTHREAD_ONCE_INIT;

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

static void secret_read(void)
{
    const char *s = getenv("LDPFUSE_SECRET");
    secret_state = -1;
    if (s == NULL || strlen(s) != 2 * WIRE_SECRET_LEN)
        return;
    for (int i = 0; i < WIRE_SECRET_LEN; i++) {
        int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return;
        secret[i] = (unsigned char)(hi << 4 | lo);
    }
    secret_state = 1;
}

/* fd is a connected stream socket (the one connect() was given, unless the program
 * replaced it with something else): the peer's pid, or 0. */
static pid_t connected_socket(int fd)
{
    int type = 0;
    struct ucred peer = { 0 };
    socklen_t tl = sizeof type, pl = sizeof peer;
    return getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &tl) == 0 && type == SOCK_STREAM &&
           getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &pl) == 0 && peer.pid > 0 ? peer.pid : 0;
}

/* ---- the launcher this process was given: a process, not a number. LDPFUSE_SERVER_PID
 * and LDPFUSE_SERVER_START (its start time, /proc/PID/stat's 22nd field, which the
 * launcher read of itself) name it for as long as it lives: once it has ended, no process
 * can be it again, whatever pid it gets. A client sends the run's secret and its requests
 * only to a socket whose listener (SO_PEERCRED: the process that called listen()) is that
 * process, alive now; once the launcher is found ended, every call of this process is EIO
 * for good, with no connect at all (server_ended). */
static pid_t srv_pid;
static unsigned long long srv_start;
static pthread_once_t srv_once = PTHREAD_ONCE_INIT;
static int server_ended;        /* the launcher has ended: no channel is made any more */

static void server_read(void)
{
    const char *p = getenv("LDPFUSE_SERVER_PID"), *t = getenv("LDPFUSE_SERVER_START");
    if (p && *p && t && *t) {
        srv_pid = (pid_t)atoi(p);
        srv_start = strtoull(t, NULL, 10);
    }
}

/* The start time of process pid (clock ticks since boot), 0 if it has none (ended, or no
 * /proc). Raw system calls: the program's open() is ours. */
static unsigned long long ldp_proc_start_time(pid_t pid)
{
    char path[40], buf[512];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = syscall(SYS_read, fd, buf, sizeof buf - 1);
    syscall(SYS_close, fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    char *s = strrchr(buf, ')');    /* "pid (comm) S ppid ...": comm may hold anything */
    if (s == NULL || s[1] != ' ' || s[2] == 'Z' || s[2] == 'X' || s[2] == 'x')
        return 0;           /* a zombie has ended */
    s += 2;
    for (int field = 3; field < 22; field++) {     /* to the 22nd: starttime */
        s = strchr(s, ' ');
        if (s == NULL)
            return 0;
        s++;
    }
    return strtoull(s, NULL, 10);
}

/* Is pid our launcher, alive now? (A live process is the only one with its pid.) */
static int server_is(pid_t pid)
{
    pthread_once(&srv_once, server_read);
    return srv_pid > 0 && pid == srv_pid && ldp_proc_start_time(pid) == srv_start;
}

/* No channel could be made: if the launcher has ended, none will ever be. */
static void server_check_ended(void)
{
    pthread_once(&srv_once, server_read);
    if (srv_pid <= 0 || ldp_proc_start_time(srv_pid) != srv_start)
        __atomic_store_n(&server_ended, 1, __ATOMIC_RELAXED);
}

/* After the kernel closed fds first..last (close_range, closefrom; shared_fds_lost was told
 * just before): a channel another thread made there in between, its socket gone now or
 * another file on its number, is lost too, not used for a request no one will answer. */
void shared_fds_closed(unsigned first, unsigned last)
{
    int low = __atomic_load_n(&ldp_private_fd, __ATOMIC_RELAXED);
    if (low == INT_MAX || (unsigned)low > last)
        return;         /* no channel there: shared_fds_lost, just before, marked them all */
    pthread_once(&srv_once, server_read);
    pthread_mutex_lock(&channels_lock);
    for (struct channel *c = channels; c; c = c->next)
        if (!c->lost && (unsigned)c->sock >= first && (unsigned)c->sock <= last && connected_socket(c->sock) != srv_pid)
            c->lost = 1;
    private_fd_update();
    pthread_mutex_unlock(&channels_lock);
}

static struct channel *channel_open(void)
{
    const char *name = getenv("LDPFUSE_SOCKET");
    if (name == NULL || *name == '\0' || __atomic_load_n(&server_ended, __ATOMIC_RELAXED))
        return NULL;
    struct sockaddr_un addr = { .sun_family = AF_UNIX };
    size_t nl = strlen(name);
    if (nl + 1 > sizeof addr.sun_path)
        return NULL;
    memcpy(addr.sun_path + 1, name, nl);        /* abstract namespace: no file to leave */
    struct channel *c = calloc(1, sizeof *c);
    if (c == NULL)
        return NULL;
    /* The socket is born on the lowest free number, where a process that shares this fd
     * table (stress-ng's dup: a clone(CLONE_FILES) that dup2()s over "the next fd" while
     * this one opens) may replace it before fs_fd() moves it up: then the connect, or the
     * moved fd, is not our socket. Nothing has been sent yet, so try again. */
    for (int attempt = 0;; attempt++) {
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            free(c);
            return NULL;
        }
        int r = connect(fd, (struct sockaddr *)&addr, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + nl));
        int e = errno;
        if (r == 0) {
            c->sock = fs_fd(fd);    /* out of the program's way, as the FS's own fds */
            pid_t peer = connected_socket(c->sock);
            if (peer && !server_is(peer)) {
                REAL(close)(c->sock);
                free(c);
                server_check_ended();
                return NULL;    /* not our launcher's socket: nothing was sent to it */
            }
            if (peer)
                break;
            fd = c->sock;
            e = ENOTSOCK;
        }
        REAL(close)(fd);
        if ((e != ENOTSOCK && e != EBADF) || attempt == 2) {
            free(c);
            if (e == ECONNREFUSED || e == ENOENT)
                server_check_ended();
            return NULL;
        }
    }
    pthread_mutex_lock(&channels_lock);
    c->next = channels;
    channels = c;
    private_fd_update();
    pthread_mutex_unlock(&channels_lock);
    return c;
}

/* This thread's channel for one request (at the depth of nesting), or NULL: the server
 * cannot be reached. channel_end() or channel_fail() after it. */
struct channel *channel_begin(void)
{
    if (t_depth >= CHAN_DEPTH)
        return NULL;
    if (t_chans == NULL) {
        pthread_once(&key_once, key_make);
        t_chans = calloc(1, sizeof *t_chans);
        if (t_chans == NULL)
            return NULL;
        pthread_setspecific(thread_key, t_chans);
    }
    struct channel **slot = &t_chans->at[t_depth];
    if (*slot && __atomic_load_n(&(*slot)->lost, __ATOMIC_RELAXED)) {
        channel_free(*slot);
        *slot = NULL;
    }
    if (*slot == NULL && (*slot = channel_open()) == NULL)
        return NULL;
    t_depth++;
    return *slot;
}

void channel_end(struct channel *c)
{
    (void)c;
    t_depth--;
}

/* The server is gone (or broke the protocol): this channel is done. */
void channel_fail(struct channel *c)
{
    t_depth--;
    if (t_chans && t_chans->at[t_depth] == c)
        t_chans->at[t_depth] = NULL;
    channel_free(c);
}

/* How long a request may wait for the server, in ns (0: for ever). */
static uint64_t op_timeout(void)
{
    int64_t ns = __atomic_load_n(&op_timeout_ns, __ATOMIC_RELAXED);
    if (ns < 0) {       /* threads may race to read the variable: they agree on the value */
        const char *s = getenv("LDPFUSE_OP_TIMEOUT");
        double sec = s && *s ? strtod(s, NULL) : 60.0;
        ns = sec > 0 ? (int64_t)(sec * 1e9) : 0;
        __atomic_store_n(&op_timeout_ns, ns, __ATOMIC_RELAXED);
    }
    return (uint64_t)ns;
}

double channel_op_timeout(void)
{
    return (double)op_timeout() / 1e9;
}

/* Has the FS thread been seen stuck (backend/coherence.h, fs) for CHAN_STUCK_MS by this
 * wait (*since: when it was first seen so, 0 while it was not)? A request behind a stuck
 * FS thread gives up then, not at its own op_timeout; one that finishes meanwhile makes
 * the wait a normal one. Read only by a wait that has slept: a round trip pays nothing. */
static int fs_thread_stuck_for_long(const struct channel *c, uint64_t *since, uint64_t now)
{
    struct coherence *t = shared_coherence();
    /* no table yet (a process's first answer brings it): the hello said since when the FS
     * thread was in the request it was in then */
    int stuck = t ? coh_fs_stuck(t)
                  : c && c->hello_busy_since && op_timeout() && now > c->hello_busy_since &&
                        now - c->hello_busy_since >= op_timeout();
    if (!stuck) {
        *since = 0;
        return 0;
    }
    if (*since == 0)
        *since = now;
    return now - *since >= CHAN_STUCK_MS * 1000000ull;
}

/* A request given up at op_timeout. (The FS thread is then stuck for every client: the
 * server's own clock in the table says so, coherence.h.) */
static int timed_out(void)
{
    return CHAN_TIMED_OUT;
}

/* A body bigger than the region, on the socket: a server that takes none of it for
 * op_timeout (its FS thread is in a method that never returns) is given up on. */
static int sock_write_all(int fd, const struct iovec *iov_in, int n)
{
    struct iovec iov[6];
    memcpy(iov, iov_in, (size_t)n * sizeof *iov);
    struct iovec *v = iov;
    uint64_t deadline = 0, stuck_since = 0;
    while (n > 0) {
        struct msghdr mh = { .msg_iov = v, .msg_iovlen = (size_t)n };
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            if (errno != EAGAIN)
                return -1;
            uint64_t now = chan_now_ns(), limit = op_timeout();
            if (limit && deadline == 0)
                deadline = now + limit;
            if (limit && now >= deadline)
                return timed_out();
            if (limit && fs_thread_stuck_for_long(NULL, &stuck_since, now))
                return CHAN_STUCK;
            struct pollfd p = { .fd = fd, .events = POLLOUT };
            struct timespec slice = { 0, CHAN_SLICE_MS * 1000000L };
            syscall(SYS_ppoll, &p, 1, &slice, NULL, 0);     /* not the program's poll() */
            continue;
        }
        deadline = 0;       /* the server takes it: a slow reader is not a stuck one */
        n = (int)iov_advance(&v, (size_t)n, (size_t)w);
    }
    return 0;
}

/* Publish a request: the header and body (n <= 4 pieces, rq->len bytes in all). The
 * connection's first goes on the socket; the server's first message, already sent or on
 * its way, brings the region the answer comes in. */
int channel_send(struct channel *c, const struct wire_req *rq, const struct iovec *body, int n)
{
    if (c->posted) {
        /* a posted request's answer first (long there, as a rule): one at a time */
        struct wire_resp rs;
        int fd = -1, w;
        c->posted = 0;
        if ((w = channel_wait(c, &rs, &fd, 0)) < 0)
            return w;
        if (fd >= 0)
            REAL(close)(fd);
    }
    if (c->r == NULL) {
        pthread_once(&secret_once, secret_read);
        if (secret_state < 0)
            return -1;
        if (rq->len > WIRE_FIRST_MAX) {
            /* too long to go with the connect (the server must see a first request whole
             * before it reads it): a request of nothing first, then this one */
            struct wire_req hi = { .op = W_COHERENCE, .mnt = rq->mnt, .path_len = 1, .len = 1, .uid = rq->uid,
                                   .gid = rq->gid };
            struct iovec root = { (void *)"/", 1 };
            struct wire_resp rs;
            int fd = -1;
            if (channel_send(c, &hi, &root, 1) < 0 || channel_wait(c, &rs, &fd, 0) < 0)
                return -1;
            if (fd >= 0)
                REAL(close)(fd);
            return channel_send(c, rq, body, n);
        }
        struct wire_hello hello = { .magic = WIRE_HELLO_MAGIC };
        memcpy(hello.secret, secret, sizeof secret);
        if (shared_coherence() == NULL)
            hello.flags |= HELLO_WANT_COHERENCE;
        c->hello_flags = (int)hello.flags;
        struct iovec v[6] = { { &hello, sizeof hello }, { (void *)rq, sizeof *rq } };
        memcpy(v + 2, body, (size_t)n * sizeof *body);
        int w = sock_write_all(c->sock, v, n + 2);
        /* a refused process may find the server gone before its request went: the refusal
         * waits on the socket all the same */
        if ((c->r = region_receive(c->sock, &c->refused, &c->hello_busy_since)) == NULL)
            return c->refused ? CHAN_REFUSED : -1;
        if (w < 0)
            return -1;
        if (chan_load(&c->r->server_waits))
            chan_wake(&c->r->state);    /* a sleeping FS thread: the request is on the socket */
        return 0;
    }
    struct chan_region *r = c->r;
    r->rq = *rq;
    c->op = rq->op;
    c->sent_ns = chan_now_ns();
    if (rq->len <= CHAN_BUF) {
        char *p = r->buf;
        for (int i = 0; i < n; i++) {
            if (body[i].iov_len)
                memcpy(p, body[i].iov_base, body[i].iov_len);
            p += body[i].iov_len;
        }
    }
    chan_store(&r->state, CHAN_REQ);
    if (chan_load(&r->server_waits))
        chan_wake(&r->state);
    int w = rq->len > CHAN_BUF ? sock_write_all(c->sock, body, n) : 0;
    if ((w == CHAN_TIMED_OUT || w == CHAN_STUCK) && !chan_settle(&r->state, CHAN_REQ, CHAN_GAVE_UP))
        return -1;      /* answered without its whole body: the protocol is broken */
    return w;
}

/* Post a request whose answer nobody waits for (a notice: W_WRITTEN, a release): the
 * caller goes on at once; the channel's next request (posted or not) first takes the
 * answer (channel_send), so one is in flight at most and they are answered in order. A
 * channel with no region yet sends it as a request like any other. 0, or < 0 as
 * channel_send. */
int channel_post(struct channel *c, const struct wire_req *rq, const struct iovec *body, int n)
{
    if (c->r == NULL) {
        struct wire_resp rs;
        int fd = -1, w = channel_send(c, rq, body, n);
        if (w == 0)
            w = channel_wait(c, &rs, &fd, 0);
        if (fd >= 0)
            REAL(close)(fd);
        return w;
    }
    int w = channel_send(c, rq, body, n);
    if (w == 0)
        c->posted = 1;
    return w;
}

static long spin_budget(void)
{
    long ns = __atomic_load_n(&spin_ns, __ATOMIC_RELAXED);
    if (ns < 0) {       /* threads may race to read the variable: they agree on the value */
        const char *s = getenv("LDPFUSE_SPIN_US");
        ns = s && *s ? strtol(s, NULL, 10) * 1000 : 20000;
        __atomic_store_n(&spin_ns, ns, __ATOMIC_RELAXED);
    }
    return ns;
}

/* Wait for the answer's header (and the fd riding along, if any: close-on-exec unless
 * keep_on_exec, what the caller's open asked). -1: the server is gone; CHAN_TIMED_OUT:
 * no answer within op_timeout, the request is given up. */
int channel_wait(struct channel *c, struct wire_resp *rs, int *fd, int keep_on_exec)
{
    struct chan_region *r = c->r;
    int first = !c->answered;
    c->answered = 1;
    if (chan_load(&r->state) != CHAN_RESP && spin_budget() > 0 && (first || chan_spin_now(&c->spin))) {
        /* spin first (chan_spin_turn): in a run of requests most answers come within
         * microseconds, and a sleep costs a wake-up on each side. A connection's first
         * answer (a fresh process's first operation: the server's accept, then the call)
         * is waited for longer: the caller would sleep and its CPU go idle, and on a
         * quiet VM waking an idle CPU costs 50-80 us, a third of a short process's whole
         * extra cost (bench/short_processes.py: 1.23 -> 1.17 ms per `cat`).
         * An op whose answers take longer than the budget (a cached open: the class's
         * open and read of the file, the memfd made and handed over, 25-45 us) is spun
         * for as long as its answers were seen to take, up to CHAN_LONG_SPIN_NS: with the
         * budget alone every such open slept and paid the wake-up (105 us an open for 41
         * in the server, bench/NOTES.md), and its misses stopped the spins of the other
         * ops too (chan_spin_result). A spin that misses doubles what it learned (it was
         * too short), one that catches the answer moves it towards the time it took. */
        uint64_t budget = (uint64_t)spin_budget();
        uint32_t *expect = &c->expect_ns[c->op & (CHAN_OPS - 1)];
        if (!first && *expect > budget)
            budget = *expect + *expect / 4 < CHAN_LONG_SPIN_NS ? *expect + *expect / 4 : CHAN_LONG_SPIN_NS;
        struct chan_spinner spin;
        chan_spin_start(&spin, first ? CHAN_FIRST_SPIN_NS : budget);
        while (chan_load(&r->state) != CHAN_RESP && chan_spin_turn(&spin))
            ;
        if (!first) {
            int paid = chan_load(&r->state) == CHAN_RESP;
            chan_spin_result(&c->spin, paid);
            uint64_t took = chan_now_ns() - c->sent_ns;
            if (paid)
                *expect = took <= (uint64_t)spin_budget() ? 0 : (uint32_t)((3 * (uint64_t)*expect + took) / 4);
            else if (took >= budget)    /* not a spin stopped early by a busy CPU */
                *expect = 2 * budget < CHAN_LONG_SPIN_NS ? (uint32_t)(2 * budget) : CHAN_LONG_SPIN_NS;
        }
    }
    uint32_t st;
    uint64_t deadline = 0, stuck_since = 0;
    while (chan_load(&r->state) != CHAN_RESP) {
        chan_store(&r->client_waits, 1);
        /* CHAN_REQ, or CHAN_IDLE while the connection's first request (sent on the socket)
         * is being answered */
        if ((st = chan_load(&r->state)) != CHAN_RESP)
            chan_sleep(&r->state, st, CHAN_SLICE_MS);
        chan_store(&r->client_waits, 0);
        if (chan_load(&r->state) == CHAN_RESP)
            break;
        if (chan_peer_gone(c->sock))
            return -1;
        /* a slice slept with no answer: the deadline counts from here (the clock is read
         * only by a wait that sleeps); past it the request is given up, unless the answer
         * won the race (chan_settle) */
        uint64_t limit = op_timeout();
        if (limit == 0)
            continue;
        uint64_t now = chan_now_ns();
        if (deadline == 0)
            deadline = now + limit;
        else if (now >= deadline && (st = chan_load(&r->state)) != CHAN_RESP &&
                 chan_settle(&r->state, st, CHAN_GAVE_UP))
            return timed_out();
        if (fs_thread_stuck_for_long(c, &stuck_since, now) && (st = chan_load(&r->state)) != CHAN_RESP &&
            chan_settle(&r->state, st, CHAN_GAVE_UP))
            return CHAN_STUCK;
    }
    *rs = r->rs;
    if (rs->has_fd & (RESP_FD | RESP_FD_TABLE)) {
        /* the table of change counters (a first answer that was asked for it), then the
         * answer's own fd, in one message */
        int want = !!(rs->has_fd & RESP_FD) + !!(rs->has_fd & RESP_FD_TABLE);
        int got[2] = { -1, -1 }, ngot = 0;
        char byte, cbuf[CMSG_SPACE(2 * sizeof(int))];
        struct iovec iov = { &byte, 1 };
        struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
        ssize_t n;
        do {
            n = recvmsg(c->sock, &mh, keep_on_exec && !(rs->has_fd & RESP_FD_TABLE) ? 0 : MSG_CMSG_CLOEXEC);
        } while (n < 0 && errno == EINTR);
        if (n <= 0)
            return -1;
        for (struct cmsghdr *m = CMSG_FIRSTHDR(&mh); m; m = CMSG_NXTHDR(&mh, m))
            if (m->cmsg_level == SOL_SOCKET && m->cmsg_type == SCM_RIGHTS) {
                ngot = (int)((m->cmsg_len - CMSG_LEN(0)) / sizeof(int));
                memcpy(got, CMSG_DATA(m), (size_t)(ngot < 2 ? ngot : 2) * sizeof(int));
            }
        if (ngot != want) {
            for (int i = 0; i < ngot && i < 2; i++)
                REAL(close)(got[i]);
            return -1;
        }
        int i = 0;
        if (rs->has_fd & RESP_FD_TABLE)
            shared_coherence_offer(got[i++]);
        if (rs->has_fd & RESP_FD) {
            *fd = got[i];
            if (keep_on_exec && (rs->has_fd & RESP_FD_TABLE))
                REAL(fcntl)(*fd, F_SETFD, 0);   /* it came close-on-exec with the table */
        }
    }
    return 0;
}

/* The answer's data: the first `take` bytes into dst, the rest (up to rs->len) dropped. */
int channel_data(struct channel *c, const struct wire_resp *rs, void *dst, size_t take)
{
    size_t len = rs->len;
    if (take > len)
        take = len;
    if (len <= CHAN_BUF) {
        memcpy(dst, c->r->buf, take);
        return 0;
    }
    if (wire_read_all(c->sock, dst, take) < 0)
        return -1;
    char sink[4096];
    for (size_t left = len - take; left > 0;) {
        size_t k = left < sizeof sink ? left : sizeof sink;
        if (wire_read_all(c->sock, sink, k) < 0)
            return -1;
        left -= k;
    }
    return 0;
}

/* A forked child: the parent's channels are the parent's (their regions and sockets stay
 * with it); the child makes its own at its first request. */
void channel_atfork_child(void)
{
    pthread_mutex_init(&channels_lock, NULL);
    struct channel *c = channels;
    channels = NULL;
    __atomic_store_n(&ldp_private_fd, INT_MAX, __ATOMIC_RELAXED);
    while (c) {
        struct channel *next = c->next;
        if (!c->lost)
            REAL(close)(c->sock);
        if (c->r)
            munmap(c->r, CHAN_SIZE);
        free(c);
        c = next;
    }
    if (t_chans) {
        memset(t_chans, 0, sizeof *t_chans);
    }
    t_depth = 0;
}
