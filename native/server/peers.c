/*
 * Who may connect. The file system belongs to the command (docs/security.md), as a FUSE
 * mount belongs to the user who mounted it:
 *
 *  1. The kernel's word for the peer (SO_PEERCRED) must name a uid the server serves: the
 *     launcher's own; with -o allow_other any uid; with -o allow_root root too. Others are
 *     refused at once (the hello says EACCES) before anything else is read or given.
 *  2. The connection's first bytes must hold the run's secret (LDPFUSE_SECRET: 32 random
 *     bytes that the command's processes inherit), and its first request whole.
 *  3. The peer must be a process of the command, as the kernel tells it: the launcher is
 *     the command's child subreaper (shared_mode.py), so every process the command starts,
 *     daemons that double-fork included, has the launcher among its ancestors for as long
 *     as it lives; a process started anywhere else has not, whatever it read (the secret,
 *     from /proc/PID/environ of a process of its uid). The chain of parents is read from
 *     /proc (in_command), each parent older than its child (a pid reused on the way is
 *     younger), and the peer itself is held by a pidfd (SO_PEERPIDFD) while it is read.
 *     The chain is kept with the connection: handles follow it (handles.c).
 *  4. Connections per uid are bounded (max_conns_per_uid, a quarter of the fds the server
 *     may have, at most 4096; past it a connection is refused with EMFILE), the launcher's
 *     own user's at the fds the server gives connections at all (max_conns: every fd but
 *     a reserve for its own work, the class's files included). With that many in use, the
 *     accept thread takes no more: new connections wait in the backlog for one to end.
 *
 * 3 is checked as soon as the connection is accepted (the client checks its launcher
 * meanwhile: native/backend/channel.c), 2 once the hello is there. Until both are done a
 * connection costs nothing that lasts (the door): no region, no quota slot, no thread;
 * it waits, among at most PENDING_MAX (PENDING_PER_UID of a uid,
 * the oldest of that uid dropped for a new one), for SILENCE_MS at most, on the accept
 * thread's epoll, and is dropped if it has not sent its hello and first request whole by
 * then. A client of ours sends them right after its connect, so most are admitted at once:
 * the accept thread, on the connecting process's CPU (a socket's wake-up is a synchronous
 * one), spins a little for them while nobody is waiting at the door.
 *
 * Admitted, a client gets its region (the hello: a region made ahead, a spare: a fresh
 * memfd, nothing of anyone else's). Who the client's groups are and the watch on its socket
 * are done by the thread that serves it (client_setup).
 */
#include "server.h"
#include <poll.h>
#include <stdio.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <time.h>

struct peer_policy policy;
int fs_nmounts;

int peer_uid_allowed(uid_t uid)
{
    if (uid == policy.owner || policy.allow_other)
        return 1;
    return uid == 0 && policy.allow_root;
}

int peer_may_share_cache(uid_t uid, int flags)
{
    return uid == policy.owner || uid == 0 || (flags & O_ACCMODE) != O_RDONLY;
}

static int env_flag(const char *name)
{
    const char *e = getenv(name);
    return e && *e && strcmp(e, "0") != 0;
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* fds never given to connections, admitted or at the door: the server's own work, its
 * class's files. A quarter of them, within these bounds. */
#define FD_RESERVE_MIN 16
#define FD_RESERVE_MAX 1024

/* The policy from the launcher's environment (cli.py sets it from -o); -1 without a secret
 * (no launcher made one: nothing could ever connect). */
int peers_init(void)
{
    policy.owner = geteuid();
    policy.allow_other = env_flag("LDPFUSE_ALLOW_OTHER");
    policy.allow_root = env_flag("LDPFUSE_ALLOW_ROOT");
    policy.default_permissions = env_flag("LDPFUSE_DEFAULT_PERMISSIONS");
    stats_enabled = env_flag("LDPFUSE_STATS");
    const char *s = getenv("LDPFUSE_SECRET");
    if (s == NULL || strlen(s) != 2 * WIRE_SECRET_LEN)
        return -1;
    for (int i = 0; i < WIRE_SECRET_LEN; i++) {
        int hi = hexval(s[2 * i]), lo = hexval(s[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return -1;
        policy.secret[i] = (unsigned char)(hi << 4 | lo);
    }
    const char *nm = getenv("LDPFUSE_NMOUNTS");
    fs_nmounts = nm && *nm ? atoi(nm) : 1;
    if (fs_nmounts < 1)
        fs_nmounts = 1;
    /* as many fds as the system lets us: each connection costs one (and a region) */
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        setrlimit(RLIMIT_NOFILE, &rl);
        getrlimit(RLIMIT_NOFILE, &rl);
    }
    long fds = (long)(rl.rlim_cur > 1u << 20 ? 1u << 20 : rl.rlim_cur);
    long reserve = fds / 4 < FD_RESERVE_MIN ? FD_RESERVE_MIN : fds / 4 > FD_RESERVE_MAX ? FD_RESERVE_MAX : fds / 4;
    policy.max_conns = fds - reserve > 16 ? (int)(fds - reserve) : 16;
    long per = (fds - 64) / 4;
    const char *m = getenv("LDPFUSE_MAX_CONNECTIONS");
    if (m && *m)
        per = atol(m);
    policy.max_conns_per_uid = (int)(per < 16 ? 16 : per > 4096 && !(m && *m) ? 4096 : per);
    if (policy.max_conns_per_uid > policy.max_conns)
        policy.max_conns_per_uid = policy.max_conns;
    return 0;
}

/* ---- connections per uid */
struct uid_quota {
    struct uid_quota *next;
    uid_t uid;
    int conns;
};
static struct uid_quota *quotas;
static int conns_total;         /* admitted connections, of every uid */
static pthread_mutex_t quotas_lock = PTHREAD_MUTEX_INITIALIZER;

static struct uid_quota *quota_take(uid_t uid)
{
    pthread_mutex_lock(&quotas_lock);
    struct uid_quota *q = quotas;
    while (q && q->uid != uid)
        q = q->next;
    if (q == NULL && (q = calloc(1, sizeof *q)) != NULL) {
        q->uid = uid;
        q->next = quotas;
        quotas = q;
    }
    /* the launcher's own user may have every fd given to connections (past them the
     * accept thread takes none: connections wait in the backlog); others a quarter */
    if (q && (q->conns >= (uid == policy.owner ? policy.max_conns : policy.max_conns_per_uid) ||
              conns_total >= policy.max_conns))
        q = NULL;
    else if (q) {
        q->conns++;
        __atomic_add_fetch(&conns_total, 1, __ATOMIC_RELAXED);     /* read by the accept thread with no lock */
    }
    pthread_mutex_unlock(&quotas_lock);
    return q;
}

static void quota_give(struct uid_quota *q)
{
    pthread_mutex_lock(&quotas_lock);
    q->conns--;
    __atomic_sub_fetch(&conns_total, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&quotas_lock);
}

/* ---- regions: a connection's region is a sealed memfd (the client cannot shrink it under
 * us), mapped here and sent to the client as the connection's first message. A few are
 * made ahead (spares), by the threads that serve clients, after an answer; the accept
 * thread makes one itself only when none is left, and before it accepts: out of fds, a
 * client waits in the backlog, it does not fail. */
#define SPARES 2
static struct spare { int mfd; void *p; } spares[SPARES];
static int nspares;
static pthread_mutex_t spares_lock = PTHREAD_MUTEX_INITIALIZER;

static int region_make(void)
{
    int mfd;
    void *p = shared_memfd("ldpfuse-channel", CHAN_SIZE, &mfd);
    if (p == MAP_FAILED)
        return -1;
    pthread_mutex_lock(&spares_lock);
    int kept = nspares < SPARES;
    if (kept)
        spares[nspares++] = (struct spare){ mfd, p };
    pthread_mutex_unlock(&spares_lock);
    if (!kept) {
        munmap(p, CHAN_SIZE);
        close(mfd);
    }
    return 0;
}

int spares_count(void)
{
    pthread_mutex_lock(&spares_lock);
    int n = nspares;
    pthread_mutex_unlock(&spares_lock);
    return n;
}

void spares_fill(void)
{
    while (spares_count() < SPARES && region_make() == 0)
        ;
}

/* The server's first message: a struct wire_resp whose result is CHAN_SIZE, with the
 * region's memfd riding along (its fh: since when the FS thread is in the request it is
 * in, 0 if none); or a refusal (result -errno, no fd). */
static int hello_send(int fd, int mfd, int64_t result, uint64_t busy_since)
{
    struct wire_resp hello = { .has_fd = mfd >= 0, .result = result, .fh = busy_since };
    struct iovec iov = { &hello, sizeof hello };
    char cbuf[CMSG_SPACE(sizeof(int))];
    memset(cbuf, 0, sizeof cbuf);
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1 };
    if (mfd >= 0) {
        mh.msg_control = cbuf;
        mh.msg_controllen = sizeof cbuf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &mfd, sizeof(int));
    }
    return sendmsg(fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof hello ? 0 : -1;
}

static int region_give(struct client *cl)
{
    struct spare sp = { -1, MAP_FAILED };
    pthread_mutex_lock(&spares_lock);
    if (nspares > 0)        /* always: the accept thread, the only taker, made one if none */
        sp = spares[--nspares];
    pthread_mutex_unlock(&spares_lock);
    if (sp.mfd < 0)
        return -1;
    cl->region = sp.p;
    /* since when the FS thread is in its request (0: idle, or thread_safe): a new process
     * has no table yet to tell a stuck FS thread by (coherence.h), and waits behind it */
    struct coherence *t = __atomic_load_n(&coh, __ATOMIC_ACQUIRE);
    uint64_t busy = t && coh_get(&t->fs.one_thread) ? coh_get(&t->fs.busy_since) : 0;
    int r = hello_send(cl->fd, sp.mfd, CHAN_SIZE, busy);
    close(sp.mfd);
    if (r < 0) {
        munmap(sp.p, CHAN_SIZE);
        cl->region = NULL;
    }
    return r;
}

/* A refused peer hears why (the call it makes fails with that errno), and goes. */
static void refuse(int fd, int err, const struct ucred *who, const char *why)
{
    hello_send(fd, -1, -err, 0);
    close(fd);
    static int logged;
    if (who && !__atomic_exchange_n(&logged, 1, __ATOMIC_RELAXED))
        server_logf("refused pid %d (uid %u): %s (logged once)", (int)who->pid, (unsigned)who->uid, why);
}

/* ---- membership: is pid a process of the command (a descendant of this process, the
 * launcher, its subreaper)? Its chain of parents up to the launcher, each read from
 * /proc/PID/stat (ppid, start time) and each older than its child: a pid that ended and
 * was reused on the way is younger than the child that named it. 1 in (the chain in
 * line[], the peer first), 0 out. */
int proc_stat(pid_t pid, pid_t *ppid, unsigned long long *start)
{
    char buf[512];
    if (!read_proc(pid, "stat", buf, sizeof buf))
        return -1;
    char *s = strrchr(buf, ')');
    if (s == NULL || s[1] != ' ' || s[2] == 'Z' || s[2] == 'X' || s[2] == 'x')
        return -1;
    s += 2;     /* state */
    *ppid = (pid_t)strtol(s + 1, NULL, 10);
    for (int field = 3; field < 22; field++) {
        s = strchr(s, ' ');
        if (s == NULL)
            return -1;
        s++;
    }
    *start = strtoull(s, NULL, 10);
    return 0;
}

/* A process the launcher started outside the command's tree, a member as the launcher
 * is: the supervisor, which detaches from it (ldpfuse_py/supervisor.py). Named by pid and
 * start time, so that its pid reused by another process is not. */
static pid_t member_pid;
static unsigned long long member_start;

int peers_admit_member(pid_t pid)
{
    pid_t ppid;
    unsigned long long start;
    if (proc_stat(pid, &ppid, &start) < 0)
        return -1;
    __atomic_store_n(&member_start, start, __ATOMIC_RELAXED);
    __atomic_store_n(&member_pid, pid, __ATOMIC_RELEASE);
    return 0;
}

static int in_command(pid_t pid, struct lineage *line)
{
    pid_t self = getpid(), ppid;
    pid_t member = __atomic_load_n(&member_pid, __ATOMIC_ACQUIRE);
    unsigned long long start, younger = ~0ull;
    line->n = 0;
    for (int depth = 0; depth < 4096; depth++) {
        if (pid == self)
            return 1;       /* the launcher: an ancestor (or the peer itself) */
        if (pid <= 1)
            return 0;       /* init (or a pid our namespace does not see) */
        if (proc_stat(pid, &ppid, &start) < 0 || start > younger)
            return 0;
        if (line->n < LINEAGE_MAX) {
            line->pid[line->n] = pid;
            line->start[line->n++] = start;
        }
        if (member && pid == member && start == __atomic_load_n(&member_start, __ATOMIC_RELAXED))
            return 1;       /* the supervisor (or one of its children) */
        younger = start;
        pid = ppid;
    }
    return 0;
}

/* The peer of fd (SO_PEERCRED's pid) is of the command. The pidfd holds the peer while its
 * chain is read: if it has not ended after that, its pid was its own all along. */
#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif
static int peer_in_command(int fd, pid_t pid, struct lineage *line)
{
    int pidfd = -1;
    socklen_t len = sizeof pidfd;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0)
        pidfd = -1;     /* before Linux 6.5: the start times alone */
    int in = in_command(pid, line);
    if (pidfd >= 0) {
        struct pollfd p = { .fd = pidfd, .events = POLLIN };
        if (poll(&p, 1, 0) != 0)
            in = 0;     /* ended (or unknown): its pid may be another's now */
        close(pidfd);
    }
    return in;
}

/* ---- the door: connections not yet admitted */
#define PENDING_MAX 256
#define PENDING_PER_UID 32
#define SILENCE_MS 2000
static struct pending {
    int fd;
    struct ucred cred;
    uint64_t since;
    struct lineage line;
} pending[PENDING_MAX];
static int npending;
static int door_ep = -1;

static void pending_drop(int i)
{
    epoll_ctl(door_ep, EPOLL_CTL_DEL, pending[i].fd, NULL);
    close(pending[i].fd);
    pending[i] = pending[--npending];
}

/* Admit fd (of the command, line: its hello and first request are there whole): its
 * secret, its uid's count; then its region, and a thread to serve it. */
static void admit(int fd, const struct ucred *cred, const struct lineage *line)
{
    struct wire_hello hello;
    if (recv(fd, &hello, sizeof hello, MSG_PEEK | MSG_DONTWAIT) != (ssize_t)sizeof hello ||
        hello.magic != WIRE_HELLO_MAGIC || !secret_ok(hello.secret)) {
        refuse(fd, EACCES, cred, "it does not hold the run's secret");
        return;
    }
    struct client *cl = calloc(1, sizeof *cl);
    if (cl == NULL) {
        close(fd);
        return;
    }
    cl->line = *line;
    struct uid_quota *q = quota_take(cred->uid);
    if (q == NULL) {
        free(cl);
        refuse(fd, EMFILE, cred, "too many connections of that user (LDPFUSE_MAX_CONNECTIONS)");
        return;
    }
    cl->fd = fd;
    cl->quota = q;
    cl->uid = cred->uid;
    cl->gid = cred->gid;
    cl->pid = cred->pid;
    cl->first = 1;      /* read by its serving thread, after the hello (channel.c) */
    if (spares_count() == 0)
        region_make();
    if (region_give(cl) < 0) {
        quota_give(q);
        close(fd);
        free(cl);
        return;
    }
    if (serialise)
        fs_client_add(cl);
    else
        pool_start(cl);
}

/* A connection just accepted: refused, admitted, or left at the door. */
static void door_enter(int fd)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        close(fd);
        return;
    }
    if (!peer_uid_allowed(cred.uid)) {
        refuse(fd, EACCES, &cred, "not the launcher's user, and no -o allow_other (allow_root for root)");
        return;
    }
    /* who it is first: the client checks its launcher meanwhile, before it sends */
    struct lineage line;
    if (!peer_in_command(fd, cred.pid, &line)) {
        refuse(fd, EACCES, &cred, "not a process of the command (the launcher is not its ancestor)");
        return;
    }
    int r = first_ready_fd(fd);
    if (r == 0 && npending == 0) {
        /* nobody waits at the door: the client's hello is on its way */
        struct chan_spinner spin;
        chan_spin_start(&spin, 300000);
        while ((r = first_ready_fd(fd)) == 0 && chan_spin_turn(&spin))
            ;
    }
    if (r > 0) {
        admit(fd, &cred, &line);
        return;
    }
    if (r < 0) {
        close(fd);
        return;
    }
    /* it waits: the oldest of its uid goes if that uid has its share, the oldest of all
     * if the door is full */
    int oldest = -1, mine = 0;
    for (int i = 0; i < npending; i++)
        if (pending[i].cred.uid == cred.uid) {
            mine++;
            if (oldest < 0 || pending[i].since < pending[oldest].since)
                oldest = i;
        }
    if (mine < PENDING_PER_UID && npending == PENDING_MAX) {
        oldest = 0;
        for (int i = 1; i < npending; i++)
            if (pending[i].since < pending[oldest].since)
                oldest = i;
    }
    if (mine >= PENDING_PER_UID || npending == PENDING_MAX)
        pending_drop(oldest);
    /* edge-triggered: what came is peeked at, never read, and a part of a hello must
     * not wake this thread again until more comes */
    struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP | EPOLLET, .data.fd = fd };
    if (epoll_ctl(door_ep, EPOLL_CTL_ADD, fd, &ev) < 0) {
        close(fd);
        return;
    }
    pending[npending++] = (struct pending){ fd, cred, chan_now_ns(), line };
}

/* A connection at the door sent something, or hung up. */
static void door_heard(int fd)
{
    for (int i = 0; i < npending; i++)
        if (pending[i].fd == fd) {
            int r = first_ready_fd(fd);
            if (r == 0)
                return;     /* a part: the rest within SILENCE_MS, or it goes */
            struct pending p = pending[i];
            epoll_ctl(door_ep, EPOLL_CTL_DEL, fd, NULL);
            pending[i] = pending[--npending];
            if (r > 0)
                admit(fd, &p.cred, &p.line);
            else
                close(fd);
            return;
        }
}

/* Drop the connections silent for SILENCE_MS; how long until the next one is due (ms,
 * -1: none waits). */
static int door_expire(void)
{
    uint64_t now = chan_now_ns(), next = UINT64_MAX;
    for (int i = 0; i < npending;) {
        uint64_t due = pending[i].since + SILENCE_MS * 1000000ull;
        if (now >= due) {
            pending_drop(i);
            continue;
        }
        if (due < next)
            next = due;
        i++;
    }
    return next == UINT64_MAX ? -1 : (int)((next - now) / 1000000) + 1;
}

/* The serving thread's part, before the client's first request: its groups (what the
 * kernel vouches for), its process's handles, and the watch on its socket. -1: the client
 * cannot be served (it has gone, or we are out of memory). */
int client_setup(struct client *cl)
{
    if (cl->ready)
        return 0;
    cl->ready = 1;
    int fd = cl->fd;
    socklen_t len = 64 * sizeof(gid_t);
    for (int tries = 0; tries < 3; tries++) {
        gid_t *g = malloc(len ? len : sizeof(gid_t));
        if (g == NULL)
            break;
        if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) == 0) {
            cl->groups = g;
            cl->ngroups = (int)(len / sizeof(gid_t));
            break;
        }
        free(g);
        if (errno != ERANGE) {
            cl->ngroups = proc_groups(cl->pid, &cl->groups);
            break;
        }
    }
    cl->caps = peer_caps(fd, cl->pid, cl->uid);
    if ((cl->proc = proc_get(cl->pid)) == NULL)
        return -1;
    if (watch_ep >= 0) {
        /* the FS thread's clients under their fd << 1; a thread_safe class's under its
         * region's futex word, tagged (serve.c, watch_thread); each once: the watcher never
         * names the fd again, which client_gone() may have closed and a new client reused */
        struct epoll_event ev = { .events = EPOLLRDHUP | EPOLLONESHOT, .data.u64 = (uint64_t)fd << 1 };
        if (!serialise)
            ev = (struct epoll_event){ .events = EPOLLRDHUP | EPOLLONESHOT,
                                       .data.u64 = (uintptr_t)&cl->region->state | 1 };
        epoll_ctl(watch_ep, EPOLL_CTL_ADD, fd, &ev);
    }
    return 0;
}

static void client_free(struct client *cl)
{
    if (cl->as_proc)
        free(cl->as_groups);
    free(cl->groups);
    free(cl);
}

/* A client that has gone (or broke the protocol): its side let go of, and what its
 * process held released if that has ended. */
void client_gone(struct client *cl)
{
    sender_forget(cl);
    if (watch_ep >= 0)
        epoll_ctl(watch_ep, EPOLL_CTL_DEL, cl->fd, NULL);   /* before the number is free again */
    close(cl->fd);
    if (cl->region)
        munmap(cl->region, CHAN_SIZE);
    if (cl->quota)
        quota_give(cl->quota);
    struct handle *h = cl->proc ? proc_put(cl->proc) : NULL;
    if (h)
        release_all(cl, h);
    client_free(cl);
    orphans_sweep();
}

/* The accept thread: new connections, and those at the door, on one epoll. With every fd
 * connections may have in use (policy.max_conns), or out of fds all the same (EMFILE,
 * ENFILE, ...), a client waits in the backlog until another one lets go of something;
 * the server's own work has its reserve all the same. */
void *accept_thread(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    door_ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event lev = { .events = EPOLLIN, .data.fd = lfd };
    if (door_ep < 0 || epoll_ctl(door_ep, EPOLL_CTL_ADD, lfd, &lev) < 0)
        return NULL;
    fcntl(lfd, F_SETFL, fcntl(lfd, F_GETFL) | O_NONBLOCK);     /* accept4 never waits */
    int wait_ms = -1, taking = 1;
    for (;;) {
        if (spares_count() == 0)
            region_make();
        /* every fd connections may have in use: new ones wait in the backlog, which costs
         * the server nothing, until one ends (looked at every 10 ms) */
        int full = __atomic_load_n(&conns_total, __ATOMIC_RELAXED) + npending >= policy.max_conns;
        if (full == taking) {
            lev.events = full ? 0 : EPOLLIN;
            epoll_ctl(door_ep, EPOLL_CTL_MOD, lfd, &lev);
            taking = !full;
        }
        if (full && (wait_ms < 0 || wait_ms > 10))
            wait_ms = 10;
        struct epoll_event ev[64];
        int n = epoll_wait(door_ep, ev, 64, wait_ms);
        if (n < 0 && errno != EINTR)
            break;
        for (int i = 0; i < n; i++) {
            if (ev[i].data.fd != lfd) {
                door_heard(ev[i].data.fd);
                continue;
            }
            int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
            if (fd < 0) {
                if (errno == EBADF || errno == EINVAL || errno == ENOTSOCK)
                    return NULL;    /* no listening socket any more */
                if (errno != EINTR && errno != ECONNABORTED && errno != EAGAIN)
                    nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
                continue;
            }
            __atomic_store_n(&last_connect_ns, chan_now_ns(), __ATOMIC_RELAXED);
            door_enter(fd);
        }
        wait_ms = door_expire();
    }
    return NULL;
}
