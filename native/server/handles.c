/*
 * The handles a process was given: file handles (open, create), directory handles
 * (opendir) and page caches (W_CACHE_OPEN). A client never learns the file system's own fh:
 * it gets a token, 64 random bits, and a request that names a handle names its token. A
 * process can use a handle only if it was given it, or inherited it (fork keeps the memory
 * that holds it, exec the LDPFUSE_FDS list): a token cannot be guessed, and one that was
 * learned (from a file, a log, another process) is of no use to a process that does not
 * descend from the opener: the request's connection brings its process's parents as read
 * at connect (peers.c, struct lineage), and the handle names its opener by pid and start
 * time (may_use); a process an fd of it was passed to over a unix socket is named in the
 * handle too, once the kernel said it holds that open file (grants, at the end of this
 * file). So a process cannot read or write through another's files, close the
 * server's own fds, or release what others hold. The token also says what the handle is (a file's, a directory's, a
 * cache's), on which mount, and with which access mode it was opened.
 *
 * What a process holds is its own, whichever of its threads opened or releases it, and is
 * released when it ends: at its last connection's close if it has ended (exit, kill -9),
 * else (it exec'd, or closed our fds and goes on using its files) when it ends, as the
 * kernel releases at the last close.
 */
#include "server.h"
#include <sys/file.h>
#include <stdio.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <linux/kcmp.h>

#define HBUCKETS 4096           /* power of two */
static struct handle *htab[HBUCKETS];
static struct proc *procs;      /* processes with a connection, or with handles left */
static pthread_mutex_t handles_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t tokens[64];
static int ntokens;

/* A fresh token (handles_lock held): never 0, never one in use. */
static uint64_t token_new(void)
{
    for (;;) {
        if (ntokens == 0) {
            ssize_t n = getrandom(tokens, sizeof tokens, 0);
            if (n != (ssize_t)sizeof tokens) {
                /* no entropy source at all: the kernel's own randomness through /proc */
                for (int i = 0; i < 64; i++)
                    tokens[i] = ((uint64_t)random() << 33) ^ ((uint64_t)random() << 11) ^ (uint64_t)random();
            }
            ntokens = 64;
        }
        uint64_t t = tokens[--ntokens];
        if (t == 0 || t >= 0xffffffffffffff00ull)
            continue;       /* 0 is no handle; the top values are the clients' own marks */
        struct handle *h = htab[t & (HBUCKETS - 1)];
        while (h && h->token != t)
            h = h->hnext;
        if (h == NULL)
            return t;
    }
}

static struct handle **bucket_of(uint64_t token, struct handle *h)
{
    struct handle **p = &htab[token & (HBUCKETS - 1)];
    while (*p && *p != h)
        p = &(*p)->hnext;
    return p;
}

static struct handle *lingering;   /* handles whose opener let go of them (below) */
static int nlingering;

/* Out of the table and out of its process's list (handles_lock held). */
static void handle_unlink(struct handle *h)
{
    struct handle **p = bucket_of(h->token, h);
    if (*p)
        *p = h->hnext;
    if (h->lingering)
        nlingering--;
    for (p = h->lingering ? &lingering : &h->owner->handles; *p; p = &(*p)->next)
        if (*p == h) {
            *p = h->next;
            break;
        }
    h->live = 0;
}

/* May the process of `line` (the requester and its parents) use h? Its opener's, or a
 * descendant's of the opener (fork, then exec: the fd was inherited). NULL: the server's
 * own use. */
static int may_use(const struct handle *h, const struct lineage *line)
{
    if (line == NULL)
        return 1;
    for (int i = 0; i < line->n; i++) {
        if (line->pid[i] == h->pid && line->start[i] == h->start)
            return 1;
        for (int g = 0; g < h->ngrants && g < HANDLE_GRANTS; g++)     /* it received the fd */
            if (line->pid[i] == h->grant_pid[g] && line->start[i] == h->grant_start[g])
                return 1;
    }
    return 0;
}

struct proc *proc_get(pid_t pid)
{
    pthread_mutex_lock(&handles_lock);
    struct proc *p = procs;
    while (p && p->pid != pid)
        p = p->next;
    if (p == NULL && (p = calloc(1, sizeof *p)) != NULL) {
        p->pid = pid;
        p->next = procs;
        procs = p;
    }
    if (p)
        p->conns++;
    pthread_mutex_unlock(&handles_lock);
    return p;
}

int read_proc(pid_t pid, const char *name, char *buf, size_t size)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/%s", (int)pid, name);
    /* out of fds for a moment (the reserve is shared by every serving thread, each of
     * which opens a /proc file or a page cache now and then): a refusal here would be a
     * wrong answer (EACCES for a process of the command), so wait, 2 s at most, for
     * another thread to let go of one */
    int fd;
    for (int tries = 0; (fd = open(p, O_RDONLY | O_CLOEXEC)) < 0 &&
         (errno == EMFILE || errno == ENFILE) && tries < 2000; tries++)
        nanosleep(&(struct timespec){ 0, 1000 * 1000 }, NULL);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    return 1;
}

static int pid_alive(pid_t pid)
{
    char buf[256];
    if (!read_proc(pid, "stat", buf, sizeof buf))
        return 0;
    char *end = strrchr(buf, ')');     /* "pid (comm) S ...": comm may hold anything */
    return end && end[1] == ' ' && end[2] != 'Z' && end[2] != 'X' && end[2] != 'x';
}

/* The handles of p, taken out of the table, and p forgotten (handles_lock held). */
static struct handle *proc_drop(struct proc *p)
{
    struct handle *list = p->handles;
    for (struct handle *h = list; h; h = h->next) {
        struct handle **b = bucket_of(h->token, h);
        if (*b)
            *b = h->hnext;
        h->live = 0;
    }
    p->handles = NULL;
    for (struct proc **q = &procs; *q; q = &(*q)->next)
        if (*q == p) {
            *q = p->next;
            break;
        }
    free(p);
    return list;
}

/* One connection of p closed. If it was the last and the process has ended, its handles to
 * release (the caller does, as its identity); NULL otherwise: a process that lives on keeps
 * them until it ends (orphans_sweep). */
struct handle *proc_put(struct proc *p)
{
    struct handle *h = NULL;
    pid_t pid = p->pid;
    int last;
    pthread_mutex_lock(&handles_lock);
    last = --p->conns == 0;
    if (last && p->handles == NULL) {
        proc_drop(p);
        last = 0;           /* nothing left to release */
    }
    pthread_mutex_unlock(&handles_lock);
    if (!last || pid_alive(pid))
        return NULL;
    pthread_mutex_lock(&handles_lock);
    for (struct proc *q = procs; q; q = q->next)
        if (q == p && q->pid == pid && q->conns == 0) {     /* no new connection came */
            h = proc_drop(p);
            break;
        }
    pthread_mutex_unlock(&handles_lock);
    return h;
}

/* A handle the request hands over to cl's process; NULL if out of memory (the caller then
 * releases what the file system gave). */
struct handle *handle_add(struct client *cl, int kind, int mnt, const char *path, int flags, uint64_t fh)
{
    struct handle *h = calloc(1, sizeof *h);
    if (h == NULL || (h->path = strdup(path)) == NULL) {
        free(h);
        return NULL;
    }
    h->kind = kind;
    h->mnt = mnt;
    h->flags = flags;
    h->fh = fh;
    h->live = 1;
    h->owner = cl->proc;
    h->pid = cl->proc->pid;
    h->start = cl->line.n > 0 && cl->line.pid[0] == cl->pid ? cl->line.start[0] : 0;
    h->uid = cl->as_uid;
    h->gid = cl->as_gid;
    h->caps = cl->as_caps;
    pthread_mutex_lock(&handles_lock);
    h->token = token_new();
    h->hnext = htab[h->token & (HBUCKETS - 1)];
    htab[h->token & (HBUCKETS - 1)] = h;
    h->next = cl->proc->handles;
    cl->proc->handles = h;
    cl->proc->uid = cl->as_uid;
    cl->proc->gid = cl->as_gid;
    cl->proc->caps = cl->as_caps;
    pthread_mutex_unlock(&handles_lock);
    cl->added = h->token;
    cl->added_kind = kind;
    cl->added_mnt = mnt;
    return h;
}

/* What token names, if it is a live handle of this kind on this mount: a copy of it in *out
 * (its path, the name it was opened by and renamed to since, in path_out if not NULL:
 * WIRE_PATH_MAX bytes), and a reference on it in *ref that the request holds while the
 * class uses it (handle_put), so that a release on another thread waits for the method to
 * be done with it (handle_quiesce), as the kernel releases a file only once nothing uses
 * it. -EBADF otherwise. */
int handle_get(int kind, int mnt, uint64_t token, const struct lineage *line, struct handle *out,
               struct handle **ref, char *path_out)
{
    int r = -EBADF;
    pthread_mutex_lock(&handles_lock);
    struct handle *h = htab[token & (HBUCKETS - 1)];
    while (h && h->token != token)
        h = h->hnext;
    if (h && token != 0 && h->kind == kind && h->mnt == mnt && may_use(h, line)) {
        *out = *h;
        out->path = NULL;
        out->next = out->hnext = NULL;
        if (path_out)
            snprintf(path_out, WIRE_PATH_MAX, "%s", h->path);
        h->inflight++;
        *ref = h;
        r = 0;
    }
    pthread_mutex_unlock(&handles_lock);
    return r;
}

static pthread_cond_t handles_idle = PTHREAD_COND_INITIALIZER;

/* The request is done with the handle it named. */
void handle_put(struct handle **ref)
{
    struct handle *h = *ref;
    if (h == NULL)
        return;
    *ref = NULL;
    pthread_mutex_lock(&handles_lock);
    if (--h->inflight == 0)
        pthread_cond_broadcast(&handles_idle);
    pthread_mutex_unlock(&handles_lock);
}

/* Wait until no request uses h (it is out of the table: no new one can). */
void handle_quiesce(struct handle *h)
{
    pthread_mutex_lock(&handles_lock);
    while (h->inflight > 0)
        pthread_cond_wait(&handles_idle, &handles_lock);
    pthread_mutex_unlock(&handles_lock);
}

/* Does token name a live W_OPEN handle of (mnt, path)? */
int handle_names(int mnt, uint64_t token, const struct lineage *line, const char *path, int *flags)
{
    int yes = 0;
    pthread_mutex_lock(&handles_lock);
    struct handle *h = htab[token & (HBUCKETS - 1)];
    while (h && h->token != token)
        h = h->hnext;
    yes = h && token != 0 && h->kind == W_OPEN && h->mnt == mnt && may_use(h, line) && strcmp(h->path, path) == 0;
    if (yes)
        *flags = h->flags;
    pthread_mutex_unlock(&handles_lock);
    return yes;
}

/* The handle token names, taken out of the table for the caller to release or free; NULL
 * if it names none of this kind on this mount. */
struct handle *handle_take(int kind, int mnt, uint64_t token, const struct lineage *line)
{
    pthread_mutex_lock(&handles_lock);
    struct handle *h = htab[token & (HBUCKETS - 1)];
    while (h && h->token != token)
        h = h->hnext;
    if (h && (token == 0 || h->kind != kind || h->mnt != mnt || !may_use(h, line)))
        h = NULL;
    if (h)
        handle_unlink(h);
    pthread_mutex_unlock(&handles_lock);
    return h;
}

static int npassed;      /* handles holding a passed open file description (below) */

void handle_free(struct handle *h)
{
    handle_quiesce(h);
    if (h->passed_fd1) {
        close(h->passed_fd1 - 1);
        __atomic_sub_fetch(&npassed, 1, __ATOMIC_RELAXED);
    }
    free(h->path);
    free(h);
}

static int handle_linger(struct handle *h);

/* Let go of one handle as the file system sees it (its process closed it, or ended). */
void handle_release(struct handle *h)
{
    handle_quiesce(h);
    if (h->kind == W_OPEN) {
        /* a process gone without closing the file: its locks go, as the kernel's do (a
         * process's close tells the class itself: vfs/locks.c), asked for as that process:
         * orphans_sweep releases with no client current, which gave the class l_pid 0 */
        int locked = __atomic_load_n(&h->locked, __ATOMIC_ACQUIRE);
        if ((locked & 1) && fs_ops->lock) {
            struct flock all = { .l_type = F_UNLCK, .l_whence = SEEK_SET, .l_pid = h->pid };
            fs_ops->lock(h->mnt, h->path, h->fh, F_SETLK, &all);
        }
        if ((locked & 2) && fs_ops->flock)
            fs_ops->flock(h->mnt, h->path, h->fh, LOCK_UN);
        if (handle_linger(h))
            return;     /* its fd went over a unix socket: released when no one holds that */
        fs_ops->flush(h->mnt, h->path, h->fh);
        fs_ops->release(h->mnt, h->path, h->flags, h->fh);
    } else if (h->kind == W_OPENDIR) {
        fs_ops->releasedir(h->mnt, h->path, h->fh);
    } else {
        scache_close_id(h->fh);
    }
    handle_free(h);
}

/* h's path, if it is from or below it, moved under to */
static void handle_renamed(struct handle *h, int mnt, const char *from, size_t fl, const char *to)
{
    if (h->mnt != mnt || strncmp(h->path, from, fl) != 0 || (h->path[fl] != '\0' && h->path[fl] != '/'))
        return;
    char *np = malloc(strlen(to) + strlen(h->path + fl) + 1);
    if (np == NULL)
        return;
    strcpy(np, to);
    strcat(np, h->path + fl);
    free(h->path);
    h->path = np;
}

/* A name renamed (from -> to) or gone (from NULL): handles follow their file, as an open
 * file description does, so a page cache asked for under the new name finds them. */
void handles_renamed(int mnt, const char *from, const char *to)
{
    if (from == NULL)
        return;
    size_t fl = strlen(from);
    pthread_mutex_lock(&handles_lock);
    for (struct proc *p = procs; p; p = p->next)
        for (struct handle *h = p->handles; h; h = h->next)
            handle_renamed(h, mnt, from, fl, to);
    for (struct handle *h = lingering; h; h = h->next)
        handle_renamed(h, mnt, from, fl, to);
    pthread_mutex_unlock(&handles_lock);
}

/* Release what processes that have ended still held (on a thread that may call the FS).
 * Whether a process lives is read from /proc without the lock held. */
void orphans_sweep(void)
{
    pid_t cand[64];
    int n = 0;
    pthread_mutex_lock(&handles_lock);
    for (struct proc *p = procs; p && n < 64; p = p->next)
        if (p->conns == 0)
            cand[n++] = p->pid;
    pthread_mutex_unlock(&handles_lock);
    for (int i = 0; i < n; i++) {
        if (pid_alive(cand[i]))
            continue;
        struct handle *list = NULL;
        uid_t uid = 0;
        gid_t gid = 0;
        uint64_t caps = 0;
        pthread_mutex_lock(&handles_lock);
        for (struct proc *p = procs; p; p = p->next)
            if (p->pid == cand[i] && p->conns == 0) {   /* no new connection came meanwhile */
                uid = p->uid;
                gid = p->gid;
                caps = p->caps;
                list = proc_drop(p);
                break;
            }
        pthread_mutex_unlock(&handles_lock);
        if (list)
            become(uid, gid, 0, NULL, caps);
        while (list) {
            struct handle *h = list;
            list = h->next;
            handle_release(h);
        }
    }
}

/* Are there handles of processes with no connection (orphans_sweep has work)? */
int orphans_pending(void)
{
    int any = 0;
    pthread_mutex_lock(&handles_lock);
    for (struct proc *p = procs; p && !any; p = p->next)
        any = p->conns == 0;
    pthread_mutex_unlock(&handles_lock);
    return any;
}

/* What a client that went away held, its process having ended: released as its identity. */
void release_all(struct client *cl, struct handle *handles)
{
    request_identity(cl, &(struct wire_req){ .uid = cl->uid, .gid = cl->gid });
    become(cl->as_uid, cl->as_gid, cl->as_ngroups, cl->as_groups, cl->as_caps);
    srv_current = cl;
    while (handles) {
        struct handle *h = handles;
        handles = h->next;
        handle_release(h);
    }
    srv_current = NULL;
}

/* An answer nobody waits for any more: the client gave the request up (op_timeout) while
 * the method ran. What it handed over (a file or directory handle, a page cache) is
 * released now, as if the client had closed it at once; an fd riding along is closed by
 * the caller. */
void answer_dropped(struct client *cl)
{
    uint64_t cache = cl->added_cache;
    cl->added_cache = 0;
    struct handle *c = cache ? handle_take(W_CACHE_OPEN, cl->added_mnt, cache, NULL) : NULL;
    if (c) {
        srv_current = cl;
        handle_release(c);
        srv_current = NULL;
    }
    uint64_t added = cl->added;
    cl->added = 0;
    /* a release of it by another thread may have taken it meanwhile: then NULL */
    struct handle *h = added ? handle_take(cl->added_kind, cl->added_mnt, added, NULL) : NULL;
    if (h == NULL)
        return;
    srv_current = cl;
    handle_release(h);
    srv_current = NULL;
}

/* ---- fds passed over unix sockets (SCM_RIGHTS: interpose/pass_fd.c)
 *
 * A handle's fd sent to a process that does not descend from its opener (a sibling, the
 * parent) is usable there, as the kernel's open file is, and only there: a token learnt
 * any other way still opens nothing. The sender says, before the send, which fd of its
 * own goes (W_PASS): the server takes a reference to that open file description
 * (pidfd_getfd) and keeps it with the handle. The receiver, once it has the fd, asks
 * (W_CLAIM): if the kernel says its fd is the same open file description (kcmp
 * KCMP_FILE), it and the processes below it may use the handle, as long as the handle
 * lives: while its opener holds it, or a claimant does (a handle the opener let go of
 * with its fd in flight lingers: at the end of this file). */

static int same_file(pid_t pid1, int fd1, pid_t pid2, int fd2)
{
    long r = syscall(SYS_kcmp, pid1, pid2, KCMP_FILE, fd1, fd2);
    return r == 0 ? 1 : r > 0 ? 0 : -errno;
}

/* cl is about to send its fd `fd` of the open file h (referenced by the request). */
int handle_pass(struct client *cl, struct handle *h, int fd)
{
    pid_t ppid;
    unsigned long long start;
    int pidfd = (int)syscall(SYS_pidfd_open, cl->pid, 0);
    if (pidfd < 0)
        return -errno;
    /* the pidfd is of the process that connected (its start time), not one that took its pid */
    int d = -1, e = ESRCH;
    if (proc_stat(cl->pid, &ppid, &start) == 0 && cl->line.n > 0 && cl->line.pid[0] == cl->pid &&
        start == cl->line.start[0]) {
        d = (int)syscall(SYS_pidfd_getfd, pidfd, fd, 0);
        e = errno;
    }
    close(pidfd);
    if (d < 0)
        return e == EBADF ? -EBADF : -e;
    /* what a client of ours holds for a cached file: a page cache's memfd, opened as h was */
    char link[64], target[32] = "";
    snprintf(link, sizeof link, "/proc/self/fd/%d", d);
    ssize_t n = readlink(link, target, sizeof target - 1);
    int fl = fcntl(d, F_GETFL);
    if (n < 16 || memcmp(target, "/memfd:ldpfuse:/", 16) != 0 || fl < 0 ||
        (fl & O_ACCMODE) != (h->flags & O_ACCMODE)) {
        close(d);
        return -EBADF;
    }
    int drop = -1;
    pthread_mutex_lock(&handles_lock);
    if (!h->live) {
        drop = d;
    } else if (h->passed_fd1 == 0) {
        h->passed_fd1 = d + 1;
        __atomic_add_fetch(&npassed, 1, __ATOMIC_RELAXED);
    } else if (same_file(getpid(), h->passed_fd1 - 1, getpid(), d) == 1) {
        drop = d;       /* sent before */
    } else {
        drop = h->passed_fd1 - 1;   /* another description of it (one kept: the latest) */
        h->passed_fd1 = d + 1;
    }
    int r = h->live ? 0 : -EBADF;
    pthread_mutex_unlock(&handles_lock);
    if (drop >= 0)
        close(drop);
    return r;
}

/* cl received fd `fd`: which passed handle is it, if any? Its token in *token, mount and
 * flags in *out, path in path_out (WIRE_PATH_MAX bytes); -ENOENT if none, -ENOSYS without
 * kcmp (the kernel's CONFIG_KCMP). */
/* handle_claim's look at one list of handles (handles_lock held): r as handle_claim's. */
static int claim_in(struct handle *h, struct client *cl, int fd, struct wire_claim *out, uint64_t *token,
                    char *path_out)
{
    int r = -ENOENT;
    for (; h && r == -ENOENT; h = h->next) {
        if (h->passed_fd1 == 0)
            continue;
        int same = same_file(getpid(), h->passed_fd1 - 1, cl->pid, fd);
        if (same < 0 && same != -EBADF)
            r = same;       /* no kcmp, or the caller is not ours to look at */
        else if (same < 0)
            r = -EBADF;     /* no such fd in the caller */
        if (same != 1)
            continue;
        int g = 0;
        while (g < h->ngrants && g < HANDLE_GRANTS &&
               !(h->grant_pid[g] == cl->pid && h->grant_start[g] == cl->line.start[0]))
            g++;
        if (g == h->ngrants || g == HANDLE_GRANTS) {
            g = h->ngrants++ % HANDLE_GRANTS;     /* the oldest grant goes first */
            h->grant_pid[g] = cl->pid;
            h->grant_start[g] = cl->line.start[0];
            h->grant_holds[g] = 0;
        }
        h->grant_holds[g]++;        /* its last close releases it (W_RELEASE: handle_let_go) */
        out->mnt = h->mnt;
        out->flags = h->flags;
        *token = h->token;
        snprintf(path_out, WIRE_PATH_MAX, "%s", h->path);
        r = 0;
    }
    return r;
}

/* cl received fd `fd`: which passed handle is it, if any? Its token in *token, mount and
 * flags in *out, path in path_out (WIRE_PATH_MAX bytes); -ENOENT if none, -ENOSYS without
 * kcmp (the kernel's CONFIG_KCMP). A handle its opener has let go of meanwhile is found
 * too (it lingers: below). */
int handle_claim(struct client *cl, int fd, struct wire_claim *out, uint64_t *token, char *path_out)
{
    if (__atomic_load_n(&npassed, __ATOMIC_RELAXED) == 0 || cl->line.n == 0 || cl->line.pid[0] != cl->pid)
        return -ENOENT;
    pthread_mutex_lock(&handles_lock);
    int r = claim_in(lingering, cl, fd, out, token, path_out);
    for (struct proc *p = procs; p && r == -ENOENT; p = p->next)
        r = claim_in(p->handles, cl, fd, out, token, path_out);
    pthread_mutex_unlock(&handles_lock);
    return r;
}

/* ---- a passed handle its opener lets go of
 *
 * The sender of an fd often closes it at once (or ends) before the receiver's recvmsg, as
 * the kernel allows: the open file lives on in the message. Its handle does too: while the
 * server holds a passed description of it (W_PASS) and either no process has claimed it
 * yet (it may be in flight) or a claimant still holds it, the opener's release (its close,
 * or its end) leaves it in the table, on the lingering list, with no process of its own.
 * A claimant's last close (W_RELEASE) counts its hold down; the last one releases the
 * handle as the class sees it. One never claimed is released LINGER_NS after its opener
 * let go (flush, then release, as its opener's close would have), and so is one whose
 * claimants have all ended without a close; at the command's end (serve_loop's return,
 * before destroy()) every one left is. At most LINGER_PER_UID of a user linger: past that
 * its handles are released at once, as before (the receiver's fd is then a bare memfd,
 * a warning in its log). */

#define LINGER_NS (10ull * 1000 * 1000 * 1000)
#define LINGER_PER_UID 64

static int holds_of(const struct handle *h)
{
    int n = 0;
    for (int g = 0; g < h->ngrants && g < HANDLE_GRANTS; g++)
        n += h->grant_holds[g];
    return n;
}

/* Should h, out of the table, linger rather than be released now (handles_lock held)?
 * Then it is back in the table, on the lingering list. */
static int linger_locked(struct handle *h)
{
    if (h->kind != W_OPEN || h->passed_fd1 == 0 || h->lingering || (h->ngrants > 0 && holds_of(h) == 0))
        return 0;
    int mine = 0;
    for (struct handle *o = lingering; o; o = o->next)
        mine += o->uid == h->uid;
    if (mine >= LINGER_PER_UID)
        return 0;
    h->lingering = 1;
    h->linger_until = chan_now_ns() + LINGER_NS;
    h->owner = NULL;
    h->live = 1;
    h->hnext = htab[h->token & (HBUCKETS - 1)];
    htab[h->token & (HBUCKETS - 1)] = h;
    h->next = lingering;
    lingering = h;
    nlingering++;
    return 1;
}

static int handle_linger(struct handle *h)
{
    pthread_mutex_lock(&handles_lock);
    int r = linger_locked(h);
    pthread_mutex_unlock(&handles_lock);
    return r;
}

/* W_RELEASE of token by the process of line: the handle to release now, taken out of the
 * table; NULL with *kept 1 if the release is counted but the handle lives on (a
 * claimant's while others hold it, or its opener's while it lingers); NULL, *kept 0: no
 * such handle of this process's. */
struct handle *handle_let_go(int mnt, uint64_t token, const struct lineage *line, int *kept)
{
    *kept = 0;
    pthread_mutex_lock(&handles_lock);
    struct handle *h = htab[token & (HBUCKETS - 1)];
    while (h && h->token != token)
        h = h->hnext;
    if (h && (token == 0 || h->kind != W_OPEN || h->mnt != mnt || !may_use(h, line)))
        h = NULL;
    if (h && h->passed_fd1 && line && line->n > 0 && line->pid[0] != h->pid) {
        /* not its opener: a claimant's last close of its fd (the handle stays its opener's
         * while that one holds it), else nothing of this process's to release */
        int g = 0;
        while (g < h->ngrants && g < HANDLE_GRANTS &&
               !(h->grant_pid[g] == line->pid[0] && h->grant_start[g] == line->start[0] && h->grant_holds[g] > 0))
            g++;
        int claimant = g < h->ngrants && g < HANDLE_GRANTS;
        if (claimant)
            h->grant_holds[g]--;
        if (!claimant || !h->lingering || holds_of(h) > 0) {
            *kept = 1;
            h = NULL;
        }
    } else if (h && h->lingering) {
        *kept = 1;      /* let go of already */
        h = NULL;
    }
    if (h) {
        handle_unlink(h);
        if (linger_locked(h)) {
            *kept = 1;
            h = NULL;
        }
    }
    pthread_mutex_unlock(&handles_lock);
    return h;
}

/* Are there lingering handles (lingering_sweep has work, or will have)? */
int lingering_pending(void)
{
    return __atomic_load_n(&nlingering, __ATOMIC_RELAXED) > 0;
}

/* Is a claimant of h that still holds it alive (handles_lock held)? */
static int claimant_alive(const struct handle *h)
{
    for (int g = 0; g < h->ngrants && g < HANDLE_GRANTS; g++) {
        pid_t ppid;
        unsigned long long start;
        if (h->grant_holds[g] > 0 && proc_stat(h->grant_pid[g], &ppid, &start) == 0 &&
            start == h->grant_start[g] && pid_alive(h->grant_pid[g]))
            return 1;
    }
    return 0;
}

/* Release the lingering handles that are due (all: every one, at the command's end), as
 * their openers' identity, on a thread that may call the FS. */
void lingering_sweep(int all)
{
    struct handle *due = NULL;
    uint64_t now = chan_now_ns();
    pthread_mutex_lock(&handles_lock);
    for (struct handle *h = lingering, *next; h; h = next) {
        next = h->next;
        if (all || (now >= h->linger_until && !claimant_alive(h))) {
            handle_unlink(h);
            h->next = due;
            due = h;
        }
    }
    pthread_mutex_unlock(&handles_lock);
    srv_current = NULL;
    while (due) {
        struct handle *h = due;
        due = h->next;
        become(h->uid, h->gid, 0, NULL, h->caps);
        handle_release(h);      /* lingering: flush, then release */
    }
}
