/*
 * Who may connect. The file system belongs to the command (docs/security.md), as a FUSE
 * mount belongs to the user who mounted it:
 *
 *  1. The kernel's word for the peer (SO_PEERCRED) must name a uid the server serves: the
 *     launcher's own; with -o allow_other any uid; with -o allow_root root too. Others are
 *     refused at once (the hello says EACCES) before anything else is read or given.
 *  2. The connection's first bytes must hold the run's secret (LDPFUSE_SECRET: 32 random
 *     bytes that only the command's processes inherit, request.c reads it): no request of
 *     a connection is read before it, and a connection without it is dropped.
 *  3. Connections per uid are bounded (max_conns_per_uid, a quarter of the fds the server
 *     may have), for every user but the launcher's: with allow_other one user cannot take
 *     the fds, memory or threads the others need. Past it a connection is refused with
 *     EMFILE. The launcher's user's processes, past the server's fds, wait in the backlog
 *     for others to end, as before.
 *
 * The accept thread does the least a client needs before its first answer, since it runs
 * on the connecting process's CPU (a socket's wake-up is a synchronous one: the scheduler
 * puts the woken thread where the waker runs): the uid check, the accept and the hello (a
 * region made ahead, a spare: a fresh memfd, nothing of anyone else's). Who the client's
 * groups are and the watch on its socket are done by the thread that serves it
 * (client_setup), on another CPU while the client sends its request and maps its region.
 */
#include "server.h"
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
    long per = (fds - 64) / 4;
    const char *m = getenv("LDPFUSE_MAX_CONNECTIONS");
    if (m && *m)
        per = atol(m);
    policy.max_conns_per_uid = (int)(per < 16 ? 16 : per > 4096 && !(m && *m) ? 4096 : per);
    return 0;
}

/* ---- connections per uid */
struct uid_quota {
    struct uid_quota *next;
    uid_t uid;
    int conns;
};
static struct uid_quota *quotas;
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
    if (q && uid != policy.owner && q->conns >= policy.max_conns_per_uid)
        q = NULL;       /* the launcher's own user waits in the backlog instead (fds run out) */
    else if (q)
        q->conns++;
    pthread_mutex_unlock(&quotas_lock);
    return q;
}

static void quota_give(struct uid_quota *q)
{
    pthread_mutex_lock(&quotas_lock);
    q->conns--;
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

/* The accept thread's part of a new connection: who it is, and the hello (its region).
 * NULL: refused or failed (the fd is closed). */
static struct client *client_new(int fd)
{
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0) {
        close(fd);
        return NULL;
    }
    if (!peer_uid_allowed(cred.uid)) {
        refuse(fd, EACCES, &cred, "not the launcher's user, and no -o allow_other (allow_root for root)");
        return NULL;
    }
    struct uid_quota *q = quota_take(cred.uid);
    if (q == NULL) {
        refuse(fd, EMFILE, &cred, "too many connections of that user (LDPFUSE_MAX_CONNECTIONS)");
        return NULL;
    }
    struct client *cl = calloc(1, sizeof *cl);
    if (cl == NULL) {
        quota_give(q);
        close(fd);
        return NULL;
    }
    cl->fd = fd;
    cl->quota = q;
    cl->uid = cred.uid;
    cl->gid = cred.gid;
    cl->pid = cred.pid;
    cl->first = 1;      /* sent with the connect, after the hello (channel.c) */
    if (region_give(cl) < 0) {
        quota_give(q);
        close(fd);
        free(cl);
        return NULL;
    }
    return cl;
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

void *accept_thread(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    for (;;) {
        if (spares_count() == 0 && region_make() < 0) {
            nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
            continue;
        }
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EBADF || errno == EINVAL || errno == ENOTSOCK)
                break;      /* no listening socket any more */
            /* EMFILE, ENFILE, ENOBUFS, ENOMEM: the client waits in the backlog until
             * another one lets go of something */
            nanosleep(&(struct timespec){ 0, 10 * 1000 * 1000 }, NULL);
            continue;
        }
        __atomic_store_n(&last_connect_ns, chan_now_ns(), __ATOMIC_RELAXED);
        struct client *cl = client_new(fd);
        if (cl == NULL)
            continue;       /* refused; or the client sees EIO for this call and connects again */
        if (serialise)
            fs_client_add(cl);
        else
            pool_start(cl);
    }
    return NULL;
}
