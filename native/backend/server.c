/*
 * The file system process of the shared mode: answers backend/wire.h requests from every
 * thread of every process of the command tree by calling the embedded backend's
 * operations, the same code (and so the same conversions and error rules) as the embedded
 * mode uses in-process.
 *
 * Each client thread connects once; the accept thread gives it a channel
 * (backend/channel.h: a region of shared memory with a futex word), through which its
 * requests and answers then go, and the thread that serves it reads who it is
 * (SO_PEERCRED). The connection's first request comes
 * on the socket, sent with the connect: it is answered in the region like the others. A class that is not thread_safe is
 * called from one thread only, the one that built it (the launcher's main thread, in
 * serve_loop: it waits on every channel's futex at once with futex_waitv). A class with
 * `thread_safe = True` gets one thread per channel, so a call that blocks holds up only
 * its caller. Either way each request runs with its caller's rights (fsuid, fsgid,
 * groups, set per thread, from the kernel's word for the connection), FIFOs are opened by
 * the clients themselves, and what a process held is released when its last connection
 * closes (a closed socket is how the server learns that a client died).
 * A client may give a request up (op_timeout, backend/channel.c: a method that never
 * returns): one compare-and-swap on the region's state (chan_settle) decides whether the
 * answer stands or is dropped; a dropped answer's handle (a late open, create, opendir) is
 * released at once (answer_dropped), and a request given up while it waited behind the
 * FS thread is never run. The FS thread serves the others again once the method returns.
 * After each operation that changes a name, the server bumps that name's counters in the
 * table every client maps (backend/coherence.h), before the answer leaves: every
 * process's caches hear of it. The FS thread also counts there each request it finishes,
 * so that clients tell a stuck FS thread (a call timed out, none finished since) from a
 * busy one, and stop queueing a full op_timeout each behind it.
 * Python-facing entry points: _embedded.serve_init() builds the FS objects;
 * _embedded.serve_start(listen_fd, thread_safe) starts accepting; serve_loop() serves
 * until serve_stop().
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "backend.h"
#include "coherence.h"
#include "wire.h"
#include "channel.h"
#include "fifo_dir.h"
#include <linux/futex.h>
#include <dirent.h>
#include <limits.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>
#include <sched.h>
#include <sys/epoll.h>

void ldp_thread_done(void);
struct backend_ops *ldpfuse_backend_embedded_init(const struct core_api *c, int host_owns_python, char *err,
                                                  size_t errsize);

static struct backend_ops *ops;

/* ---- the page caches of cached files, one memfd per file for every client (docs/cache.md):
 * clients fill and write them themselves; the server only hands them out and keeps each
 * alive while a client holds it. */
struct scache {
    struct scache *next;
    int mnt, refs, mfd;
    uint64_t id;                /* names it in a client's list of what it holds */
    char *path;
};
static uint64_t scache_ids;
static struct scache *scaches;
static pthread_mutex_t scache_lock = PTHREAD_MUTEX_INITIALIZER;

static struct scache **scache_find(int mnt, const char *path)
{
    struct scache **p = &scaches;
    for (; *p; p = &(*p)->next)
        if ((*p)->mnt == mnt && strcmp((*p)->path, path) == 0)
            break;
    return p;
}

/* Does any client hold the page cache of (mnt, path)? */
static int scache_held(int mnt, const char *path)
{
    pthread_mutex_lock(&scache_lock);
    int held = *scache_find(mnt, path) != NULL;
    pthread_mutex_unlock(&scache_lock);
    return held;
}

static void scache_drop(struct scache **p)
{
    struct scache *s = *p;
    *p = s->next;
    close(s->mfd);
    free(s->path);
    free(s);
}

/* An fd of the file's memfd (a new open file description) for a client; -errno. */
static int scache_open(int mnt, const char *path, off_t size, int *fresh, uint64_t *id)
{
    pthread_mutex_lock(&scache_lock);
    struct scache **p = scache_find(mnt, path), *s = *p;
    *fresh = 0;
    if (s == NULL) {
        char name[250];
        snprintf(name, sizeof name, "ldpfuse:%.240s", path);
        int mfd = memfd_create(name, MFD_CLOEXEC);
        s = mfd >= 0 ? calloc(1, sizeof *s) : NULL;
        if (s == NULL || (s->path = strdup(path)) == NULL || ftruncate(mfd, size) < 0) {
            int e = errno ? errno : ENOMEM;
            if (mfd >= 0)
                close(mfd);
            if (s)
                free(s->path);
            free(s);
            pthread_mutex_unlock(&scache_lock);
            return -e;
        }
        s->mnt = mnt;
        s->mfd = mfd;
        s->id = ++scache_ids;
        s->next = scaches;
        scaches = s;
        *fresh = 1;
    }
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", s->mfd);
    int fd = open(proc, O_RDWR | O_CLOEXEC);
    int r = fd >= 0 ? fd : -errno;
    *id = s->id;
    if (fd >= 0)
        s->refs++;
    else if (s->refs == 0)
        scache_drop(scache_find(mnt, path));
    pthread_mutex_unlock(&scache_lock);
    return r;
}

/* Returns the id of the cache let go of (0: none by that name). */
static uint64_t scache_close(int mnt, const char *path)
{
    pthread_mutex_lock(&scache_lock);
    struct scache **p = scache_find(mnt, path);
    uint64_t id = *p ? (*p)->id : 0;
    if (*p && --(*p)->refs <= 0)
        scache_drop(p);
    pthread_mutex_unlock(&scache_lock);
    return id;
}

/* A client that went away without letting go (exit, kill -9, exec). A cache already
 * dropped (its name unlinked) is no longer in the table. */
static void scache_close_id(uint64_t id)
{
    pthread_mutex_lock(&scache_lock);
    for (struct scache **p = &scaches; *p; p = &(*p)->next)
        if ((*p)->id == id) {
            if (--(*p)->refs <= 0)
                scache_drop(p);
            break;
        }
    pthread_mutex_unlock(&scache_lock);
}

/* A name that went away (unlink, rename over it) takes its cache with it: the clients that
 * hold it keep their fds; the next open of the name gets a new one. A renamed file's
 * cache follows it. */
static void scache_renamed(int mnt, const char *from, const char *to)
{
    pthread_mutex_lock(&scache_lock);
    struct scache **p = scache_find(mnt, to);
    if (*p)
        scache_drop(p);
    size_t fl = from ? strlen(from) : 0;
    for (struct scache *s = scaches; from && s; s = s->next) {
        if (s->mnt != mnt || strncmp(s->path, from, fl) != 0 || (s->path[fl] != '\0' && s->path[fl] != '/'))
            continue;
        char *np = malloc(strlen(to) + strlen(s->path + fl) + 1);
        if (np == NULL)
            continue;
        strcpy(np, to);
        strcat(np, s->path + fl);
        free(s->path);
        s->path = np;
    }
    pthread_mutex_unlock(&scache_lock);
}

/* ---- FIFOs in the mount: the kernel gives a FIFO inode of a FUSE mount a pipe of its own
 * and never calls the FS's open; here each one is a real FIFO in a private directory,
 * with the FS's owner and mode, that the client opens itself (blocking it, not us). */
struct sfifo {
    struct sfifo *next;
    int mnt;
    char *path;
    char real[128];
};
static struct sfifo *sfifos;
static pthread_mutex_t sfifo_lock = PTHREAD_MUTEX_INITIALIZER;
static char fifo_dir[64];

static int sfifo_get(int mnt, const char *path, mode_t mode, uid_t uid, gid_t gid, char *out, size_t outsz)
{
    int r = 0;
    pthread_mutex_lock(&sfifo_lock);
    struct sfifo *f = sfifos, named = { .mnt = mnt };
    const char *command_dir = fifo_dir_of_command();
    if (command_dir) {
        /* the embedded mode's launcher: the FIFO the command's other processes use */
        f = &named;
        if (fifo_dir_name(f->real, sizeof f->real, command_dir, mnt, path) < 0)
            r = -ENAMETOOLONG;
        else if (mkfifo(f->real, 0600) < 0 && errno != EEXIST)
            r = -errno;
        if (r < 0)
            goto out;
    }
    for (; f && f != &named; f = f->next)
        if (f->mnt == mnt && strcmp(f->path, path) == 0)
            break;
    if (f == NULL) {
        if (fifo_dir[0] == '\0') {
            strcpy(fifo_dir, "/tmp/ldpfuse-fifos-XXXXXX");
            if (mkdtemp(fifo_dir) == NULL || chmod(fifo_dir, 0711) < 0) {
                r = -errno;
                fifo_dir[0] = '\0';
                goto out;
            }
        }
        static unsigned serial;
        f = calloc(1, sizeof *f);
        if (f == NULL || (f->path = strdup(path)) == NULL) {
            free(f);
            r = -ENOMEM;
            goto out;
        }
        snprintf(f->real, sizeof f->real, "%s/%u", fifo_dir, ++serial);
        if (mkfifo(f->real, 0600) < 0) {
            r = -errno;
            free(f->path);
            free(f);
            goto out;
        }
        f->mnt = mnt;
        f->next = sfifos;
        sfifos = f;
    }
    /* who may open it is what the FS says now */
    if (chown(f->real, uid, gid) < 0 && geteuid() == 0)
        r = -errno;
    if (r == 0 && chmod(f->real, mode & 07777) < 0)
        r = -errno;
    if (r == 0)
        snprintf(out, outsz, "%s", f->real);
out:
    pthread_mutex_unlock(&sfifo_lock);
    return r;
}

/* unlink (from NULL) or rename: the pipe follows its name, as an inode would */
static void sfifo_renamed(int mnt, const char *from, const char *to)
{
    if (fifo_dir_of_command())
        return;     /* the embedded backend's unlink and rename move the command's FIFOs */
    pthread_mutex_lock(&sfifo_lock);
    for (struct sfifo **p = &sfifos; *p;) {
        struct sfifo *f = *p;
        if (f->mnt == mnt && strcmp(f->path, to) == 0) {
            *p = f->next;
            unlink(f->real);
            free(f->path);
            free(f);
            continue;
        }
        p = &f->next;
    }
    for (struct sfifo *f = sfifos; from && f; f = f->next)
        if (f->mnt == mnt && strcmp(f->path, from) == 0) {
            char *np = strdup(to);
            if (np) {
                free(f->path);
                f->path = np;
            }
        }
    pthread_mutex_unlock(&sfifo_lock);
}

/* ---- coherence: the table of change counters every client maps
 * (backend/coherence.h), bumped after each operation that changes a name, before its
 * answer leaves: a process that hears "done" and tells another one finds the other's
 * caches already forgetting. */
static struct coherence *coh;
static int coh_fd = -1;
static int serialise;       /* (defined below) one FS thread: a class that is not thread_safe */
static pthread_once_t coh_once = PTHREAD_ONCE_INIT;

/* A memfd of `size` bytes that every client maps, sealed against shrinking and growing
 * (nobody can cut it under the others' mappings), mapped here too: the mapping, its fd in
 * *fd; MAP_FAILED if it cannot be made. */
static void *shared_memfd(const char *name, size_t size, int *fd)
{
    int mfd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (mfd < 0)
        return MAP_FAILED;
    void *p = MAP_FAILED;
    if (ftruncate(mfd, (off_t)size) == 0 &&
        fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) == 0)
        p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    if (p == MAP_FAILED)
        close(mfd);
    else
        *fd = mfd;
    return p;
}

static void coh_make(void)
{
    int fd;
    void *m = shared_memfd("ldpfuse:coherence", sizeof *coh, &fd);   /* clients bump written[] */
    if (m == MAP_FAILED)
        return;
    struct coherence *t = m;
    t->magic = COH_MAGIC;
    t->global = 1;
    t->fs.one_thread = serialise;   /* set before the accept thread, which makes the table */
    __atomic_store_n(&coh, t, __ATOMIC_RELEASE);
    coh_fd = fd;
}

/* The FS thread finished a request (any outcome): it is not stuck (coherence.h, fs). */
static void coh_fs_served(void)
{
    struct coherence *t = __atomic_load_n(&coh, __ATOMIC_ACQUIRE);
    if (t)
        __atomic_store_n(&t->fs.served, t->fs.served + 1, __ATOMIC_RELEASE);   /* one writer */
}

/* The counters one operation bumps. */
struct coh_change {
    unsigned self[4], below[2];
    int nself, nbelow;
};

/* A name made, removed, or its permissions changed: itself, what lies below it, its
 * directory's listing (parent != 0). */
static void coh_name(struct coh_change *c, int mnt, const char *path, int parent)
{
    if (c->nself > 2 || c->nbelow > 1)
        return;
    c->self[c->nself++] = coh_slot(mnt, path, strlen(path));
    if (parent)
        c->self[c->nself++] = coh_parent_slot(mnt, path);
    c->below[c->nbelow++] = coh_slot(mnt, path, strlen(path));
}

/* How much the change adds to path's stamp (coherence_stamp's sum, counter by counter). */
static uint64_t coh_share(const struct coh_change *c, int mnt, const char *path)
{
    uint64_t n = 0;
    size_t len = strlen(path);
    unsigned me = coh_slot(mnt, path, len);
    for (int i = 0; i < c->nself; i++)
        n += c->self[i] == me;
    for (size_t i = 0; i < len && len > 1; i++) {
        if (path[i] != '/')
            continue;
        unsigned above = coh_slot(mnt, path, i ? i : 1);
        for (int j = 0; j < c->nbelow; j++)
            n += c->below[j] == above;
    }
    return n;
}

/* What the operation rq (answered r) changed, bumped. Returns the stamp of path just after
 * it, or 0 if another change may have come in between (before is path's stamp before it). */
static uint64_t coh_changed(const struct wire_req *rq, int op, const char *path, const char *path2, int64_t r,
                            uint64_t before)
{
    struct coherence *t = __atomic_load_n(&coh, __ATOMIC_ACQUIRE);
    if (t == NULL || (r < 0 && r != -EIO))      /* EIO: an exception, maybe half done */
        return 0;
    struct coh_change c = { .nself = 0 };
    int mnt = rq->mnt;
    int64_t open_flags = op == W_OPEN && rq->op == W_CREATE_OPEN ? rq->b : rq->a;
    switch (op) {
    case W_MKNOD: case W_MKDIR: case W_UNLINK: case W_RMDIR: case W_SYMLINK: case W_CREATE:
        coh_name(&c, mnt, path, 1);
        break;
    case W_RENAME:
        coh_name(&c, mnt, path, 1);
        coh_name(&c, mnt, path2, 1);
        break;
    case W_LINK:
        coh_name(&c, mnt, path, 1);
        c.self[c.nself++] = coh_slot(mnt, path2, strlen(path2));   /* its link count */
        break;
    case W_CHMOD: case W_CHOWN: case W_SETXATTR: case W_REMOVEXATTR:
        coh_name(&c, mnt, path, 0);       /* who may reach what lies below, too */
        break;
    case W_OPEN:
        if (!(open_flags & O_TRUNC) || (open_flags & O_ACCMODE) == O_RDONLY)
            return 0;
        /* fall through */
    case W_TRUNCATE: case W_UTIMENS: case W_WRITE: case W_APPEND:
        c.self[c.nself++] = coh_slot(mnt, path, strlen(path));
        break;
    default:
        return 0;
    }
    for (int i = 0; i < c.nself; i++)
        __atomic_add_fetch(&t->self[c.self[i]], 1, __ATOMIC_RELEASE);
    for (int i = 0; i < c.nbelow; i++)
        __atomic_add_fetch(&t->below[c.below[i]], 1, __ATOMIC_RELEASE);
    if (before == 0 || r < 0)
        return 0;
    uint64_t after = coherence_stamp(t, mnt, path);
    return after == before + coh_share(&c, mnt, path) ? after : 0;
}

/* ---- clients: one connection (and channel) per client thread; what a process holds is
 * its own, whichever of its threads opened or releases it, and is released when its last
 * connection goes */
struct handle {
    struct handle *next;
    int kind;               /* W_OPEN (a file's fh), W_OPENDIR, W_CACHE_OPEN (a cache id) */
    int mnt, flags;
    uint64_t fh;
    char *path;
    uint64_t serial;        /* names this one handle (answer_dropped) */
};

struct proc {
    struct proc *next;
    pid_t pid;
    int conns;              /* its connections that are still open */
    pthread_mutex_t lock;
    struct handle *handles;
};
static struct proc *procs;
static pthread_mutex_t procs_lock = PTHREAD_MUTEX_INITIALIZER;

static struct proc *proc_get(pid_t pid)
{
    pthread_mutex_lock(&procs_lock);
    struct proc *p = procs;
    while (p && p->pid != pid)
        p = p->next;
    if (p == NULL && (p = calloc(1, sizeof *p)) != NULL) {
        p->pid = pid;
        pthread_mutex_init(&p->lock, NULL);
        p->next = procs;
        procs = p;
    }
    if (p)
        p->conns++;
    pthread_mutex_unlock(&procs_lock);
    return p;
}

/* One connection of p closed: the handles to let go of if it was the last, else NULL. */
static struct handle *proc_put(struct proc *p)
{
    struct handle *h = NULL;
    pthread_mutex_lock(&procs_lock);
    if (--p->conns == 0) {
        for (struct proc **q = &procs; *q; q = &(*q)->next)
            if (*q == p) {
                *q = p->next;
                break;
            }
        h = p->handles;
        pthread_mutex_destroy(&p->lock);
        free(p);
    }
    pthread_mutex_unlock(&procs_lock);
    return h;
}

struct client {
    struct client *next;    /* the FS thread's list (a class that is not thread_safe) */
    int fd;
    struct chan_region *region;
    int gone;               /* its socket closed: drop it */
    int first;              /* its first request comes on the socket, not in the region */
    int ready;              /* client_setup() has run: who it is, what it holds, watched */
    struct proc *proc;
    uid_t uid;              /* SO_PEERCRED at connect: what the kernel vouches for */
    gid_t gid;
    pid_t pid;
    int ngroups;
    gid_t *groups;          /* SO_PEERGROUPS */
    uid_t as_uid;           /* who the current request runs as */
    gid_t as_gid;
    int as_ngroups;
    gid_t *as_groups;
    int as_proc;            /* as_groups is ours (from /proc), not `groups` */
    /* the request being answered */
    struct wire_req *rq;
    char *body;
    /* the answer */
    int64_t r;
    uint64_t fh;
    void *out;
    size_t out_len;
    int pass_fd;
    uint64_t added;         /* the serial of the handle the request handed over, or 0 */
    char small[sizeof(struct stat) > sizeof(struct statvfs) ? sizeof(struct stat) : sizeof(struct statvfs)];
};

static void handle_add(struct client *cl, int kind, int mnt, const char *path, int flags, uint64_t fh)
{
    struct handle *h = calloc(1, sizeof *h);
    if (h == NULL || (h->path = strdup(path)) == NULL) {
        free(h);
        return;             /* not released at death: a leak, not an error */
    }
    h->kind = kind;
    h->mnt = mnt;
    h->flags = flags;
    h->fh = fh;
    static uint64_t serials;
    h->serial = __atomic_add_fetch(&serials, 1, __ATOMIC_RELAXED);
    pthread_mutex_lock(&cl->proc->lock);
    h->next = cl->proc->handles;
    cl->proc->handles = h;
    pthread_mutex_unlock(&cl->proc->lock);
    cl->added = h->serial;
}

static void handle_del(struct client *cl, int kind, int mnt, const char *path, uint64_t fh)
{
    struct handle **any = NULL;
    pthread_mutex_lock(&cl->proc->lock);
    for (struct handle **p = &cl->proc->handles; *p; p = &(*p)->next) {
        struct handle *h = *p;
        if (h->kind != kind || h->mnt != mnt || h->fh != fh)
            continue;
        if (path == NULL || strcmp(h->path, path) == 0) {
            any = p;
            break;
        }
        if (any == NULL)
            any = p;        /* renamed since: the same fh is the best match */
    }
    if (any) {
        struct handle *h = *any;
        *any = h->next;
        free(h->path);
        free(h);
    }
    pthread_mutex_unlock(&cl->proc->lock);
}

/* ---- credentials: every operation runs with the caller's fsuid, fsgid and groups, set on
 * the thread that runs it (raw syscalls: glibc's setgroups would change every thread) */
static int switch_creds;            /* the server may (it runs as root) */
static uid_t own_uid;
static gid_t own_gid;
static __thread int t_switched;
static __thread uid_t t_uid;
static __thread gid_t t_gid;
static __thread int t_ngroups = -1;
static __thread gid_t *t_groups;

static void become(uid_t uid, gid_t gid, int ngroups, const gid_t *groups)
{
    if (!switch_creds)
        return;
    if (t_switched && t_uid == uid && t_gid == gid && t_ngroups == ngroups &&
        (ngroups == 0 || memcmp(t_groups, groups, (size_t)ngroups * sizeof *groups) == 0))
        return;
    syscall(SYS_setgroups, (size_t)ngroups, groups);
    syscall(SYS_setfsgid, gid);
    syscall(SYS_setfsuid, uid);
    gid_t *copy = ngroups ? malloc((size_t)ngroups * sizeof *groups) : NULL;
    if (ngroups && copy == NULL) {
        t_switched = 0;
        return;
    }
    if (copy)
        memcpy(copy, groups, (size_t)ngroups * sizeof *groups);
    free(t_groups);
    t_groups = copy;
    t_uid = uid;
    t_gid = gid;
    t_ngroups = ngroups;
    t_switched = 1;
}

/* The launcher's own rights again (destroy, at the end). */
static void become_self(void)
{
    if (switch_creds && t_switched) {
        gid_t g[1] = { own_gid };
        become(own_uid, own_gid, 0, g);
    }
}

/* Supplementary groups of a process that changed identity since it connected (a root
 * process dropping to another user): /proc says. */
/* /proc/PID/NAME into buf, NUL-terminated; 0 if there is nothing to read. */
static int read_proc(pid_t pid, const char *name, char *buf, size_t size)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/%s", (int)pid, name);
    int fd = open(p, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    ssize_t n = read(fd, buf, size - 1);
    close(fd);
    if (n <= 0)
        return 0;
    buf[n] = '\0';
    return 1;
}

static int proc_groups(pid_t pid, gid_t **out)
{
    char buf[8192];
    if (!read_proc(pid, "status", buf, sizeof buf))
        return 0;
    char *g = strstr(buf, "\nGroups:");
    if (g == NULL)
        return 0;
    g += 8;
    int cap = 16, k = 0;
    gid_t *v = malloc(cap * sizeof *v);
    while (v && *g && *g != '\n') {
        char *end;
        unsigned long x = strtoul(g, &end, 10);
        if (end == g) {
            g++;
            continue;
        }
        if (k == cap) {
            gid_t *nv = realloc(v, (size_t)(cap *= 2) * sizeof *v);
            if (nv == NULL)
                break;
            v = nv;
        }
        v[k++] = (gid_t)x;
        g = end;
    }
    *out = v;
    return v ? k : 0;
}

/* Who this request runs as: the kernel's word for the connection; a root client (who may
 * become anyone anyway) is taken at its word for the identity it has now. */
static void request_identity(struct client *cl, const struct wire_req *rq)
{
    int peer = cl->uid != 0 || (rq->uid == cl->uid && rq->gid == cl->gid);
    if (!peer && cl->as_proc && cl->as_uid == rq->uid && cl->as_gid == rq->gid)
        return;
    if (cl->as_proc)
        free(cl->as_groups);
    cl->as_proc = !peer;
    if (peer) {
        cl->as_uid = cl->uid;
        cl->as_gid = cl->gid;
        cl->as_ngroups = cl->ngroups;
        cl->as_groups = cl->groups;
    } else {
        cl->as_groups = NULL;
        cl->as_ngroups = proc_groups(cl->pid, &cl->as_groups);
        cl->as_uid = rq->uid;
        cl->as_gid = rq->gid;
    }
}

static __thread struct client *current;     /* the client whose request is being answered */
static int serialise = 1;

static void server_log(int level, const char *msg)
{
    (void)level;
    char line[1200];
    int n = snprintf(line, sizeof line, "ldpfuse[%d]: %s\n", (int)getpid(), msg);
    const char *file = getenv("LDPFUSE_LOG_FILE");
    int fd = file && *file ? open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0644) : 2;
    if (fd >= 0) {
        (void)!write(fd, line, n > 0 && (size_t)n < sizeof line ? (size_t)n : strlen(line));
        if (fd != 2)
            close(fd);
    }
}

static const struct core_api server_core = { .abi = LDP_BACKEND_ABI, .log = server_log };

/* What of an answer rides on the socket (backend/channel.h): the fd, as one byte with
 * SCM_RIGHTS, then data too big for the region. */
static int send_resp(int fd, const void *data, size_t len, int pass_fd)
{
    char byte = 0;
    struct iovec iov[2] = { { &byte, 1 }, { (void *)data, len } };
    struct iovec *v = iov;
    size_t n = 2;
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct msghdr mh = { 0 };
    if (pass_fd >= 0) {
        memset(cbuf, 0, sizeof cbuf);
        mh.msg_control = cbuf;
        mh.msg_controllen = sizeof cbuf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    } else {
        v++;                /* no fd: only the data */
        n--;
    }
    while (n > 0) {
        mh.msg_iov = v;
        mh.msg_iovlen = n;
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        mh.msg_control = NULL;      /* the fd went with the first bytes */
        mh.msg_controllen = 0;
        n = iov_advance(&v, n, (size_t)w);
    }
    return 0;
}

/* The lower file a passthrough open chose, sent back with the fd so that the client may
 * open it itself next time (backend/shared.c: the open decision is cached for
 * attr_timeout, as a kernel caches a lookup). Only a regular file with a name. */
static size_t lower_name(int fd, char **out)
{
    struct stat st;
    char proc[64], *name = malloc(PATH_MAX);
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    ssize_t n = name && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? readlink(proc, name, PATH_MAX - 1) : -1;
    if (n <= 0 || name[0] != '/' || (n > 10 && memcmp(name + n - 10, " (deleted)", 10) == 0)) {
        free(name);
        return 0;
    }
    *out = name;
    return (size_t)n;
}

/* One request of cl (cl->rq, cl->body): call the operation, keep the answer in cl. Runs
 * on the client's thread, or on the FS thread for a class that is not thread_safe. */
static void do_op(struct client *cl)
{
    const struct wire_req *rq = cl->rq;
    char *body = cl->body;
    char *path = body, *path2 = body + rq->path_len + 1, *data = path2 + rq->path2_len + 1;
    /* make both names NUL-terminated in place (the body was read with room for it) */
    memmove(data, body + rq->path_len + rq->path2_len, rq->data_len);
    memmove(path2, body + rq->path_len, rq->path2_len);
    path[rq->path_len] = '\0';
    path2[rq->path2_len] = '\0';
    const uint64_t *fhp = rq->has_fh ? &rq->fh : NULL;
    int mnt = rq->mnt;
    int64_t r;
    uint64_t fh = 0;
    void *out = NULL;
    size_t out_len = 0;
    int pass_fd = -1;
    char *small = cl->small;
    request_identity(cl, rq);
    become(cl->as_uid, cl->as_gid, cl->as_ngroups, cl->as_groups);
    current = cl;
    cl->added = 0;
    /* a name that goes away: the client may keep it as missing (wire.h), from this stamp */
    int goes = rq->op == W_UNLINK || rq->op == W_RMDIR;
    struct coherence *t = __atomic_load_n(&coh, __ATOMIC_ACQUIRE);
    uint64_t before = goes && t ? coherence_stamp(t, mnt, path) : 0;
    int changed_as = rq->op;        /* what coherence hears this request did */
    switch (rq->op) {
    case W_GETATTR:
        r = ops->getattr(mnt, path, fhp, (struct stat *)small);
        if (r >= 0) { out = small; out_len = sizeof(struct stat); }
        break;
    case W_READLINK:
    case W_READ:
    case W_GETXATTR:
    case W_LISTXATTR: {
        size_t size = (size_t)rq->a;
        out = size ? malloc(size) : NULL;
        if (size && out == NULL) { r = -ENOMEM; break; }
        if (rq->op == W_READLINK)
            r = ops->readlink(mnt, path, out, size);
        else if (rq->op == W_READ)
            r = ops->read(mnt, path, out, size, (off_t)rq->b, rq->fh);
        else if (rq->op == W_GETXATTR)
            r = ops->getxattr(mnt, path, path2, out, size);
        else
            r = ops->listxattr(mnt, path, out, size);
        if (r > 0 && size > 0)
            out_len = (size_t)r < size ? (size_t)r : size;
        break;
    }
    case W_MKNOD: r = ops->mknod(mnt, path, (mode_t)rq->a, (dev_t)rq->b); break;
    case W_MKDIR: r = ops->mkdir(mnt, path, (mode_t)rq->a); break;
    case W_UNLINK:
        r = ops->unlink(mnt, path);
        if (r == 0) {
            scache_renamed(mnt, NULL, path);
            sfifo_renamed(mnt, NULL, path);
        }
        break;
    case W_RMDIR: r = ops->rmdir(mnt, path); break;
    case W_SYMLINK: r = ops->symlink(mnt, path, path2); break;
    case W_RENAME:
        r = ops->rename(mnt, path, path2);
        if (r == 0) {
            scache_renamed(mnt, path, path2);
            sfifo_renamed(mnt, path, path2);
        }
        break;
    case W_LINK: r = ops->link(mnt, path, path2); break;
    case W_CHMOD: r = ops->chmod(mnt, path, (mode_t)rq->a); break;
    case W_CHOWN: r = ops->chown(mnt, path, (uid_t)rq->a, (gid_t)rq->b); break;
    case W_TRUNCATE:
        if (rq->b == 1 && scache_held(mnt, path))
            r = TRUNCATE_CACHED;    /* the client truncates it through the page cache */
        else
            r = ops->truncate(mnt, path, (off_t)rq->a, fhp);
        break;
    case W_OPEN:
    case W_CREATE: {
        struct open_result res = { .passthrough_fd = -1 };
        r = rq->op == W_OPEN ? ops->open(mnt, path, (int)rq->a, &res)
                             : ops->create(mnt, path, (mode_t)rq->a, (int)rq->b, &res);
        fh = res.fh;
        pass_fd = r >= 0 ? res.passthrough_fd : -1;
        if (r >= 0 && pass_fd < 0)
            handle_add(cl, W_OPEN, mnt, path, rq->op == W_OPEN ? (int)rq->a : (int)rq->b, fh);
        if (r >= 0 && pass_fd >= 0 && rq->op == W_OPEN && (rq->b & WANT_LOWER))
            out_len = lower_name(pass_fd, (char **)&out);
        if (r >= 0)
            r = res.open_flags;     /* the result of a successful open: its OPEN_* flags */
        break;
    }
    case W_WRITE: r = ops->write(mnt, path, data, rq->data_len, (off_t)rq->b, rq->fh); break;
    case W_CACHE_OPEN: {
        int fresh;
        uint64_t id;
        r = scache_open(mnt, path, (off_t)rq->a, &fresh, &id);
        if (r >= 0) {
            pass_fd = (int)r;
            fh = (uint64_t)fresh;
            r = 0;
            handle_add(cl, W_CACHE_OPEN, mnt, path, 0, id);
        }
        break;
    }
    case W_CACHE_CLOSE: {
        uint64_t id = scache_close(mnt, path);
        if (id)
            handle_del(cl, W_CACHE_OPEN, mnt, NULL, id);
        r = 0;
        break;
    }
    case W_APPEND: {
        /* one lock for every client's appends, whatever the class's threading */
        static pthread_mutex_t append_lock = PTHREAD_MUTEX_INITIALIZER;
        off_t at = 0;
        pthread_mutex_lock(&append_lock);
        r = ops->append(mnt, path, data, rq->data_len, rq->fh, &at);
        pthread_mutex_unlock(&append_lock);
        fh = (uint64_t)at;
        break;
    }
    case W_STATFS:
        r = ops->statfs(mnt, path, (struct statvfs *)small);
        if (r >= 0) { out = small; out_len = sizeof(struct statvfs); }
        break;
    case W_FLUSH: r = ops->flush(mnt, path, rq->fh); break;
    case W_RELEASE:
        handle_del(cl, W_OPEN, mnt, path, rq->fh);
        r = ops->release(mnt, path, (int)rq->a, rq->fh);
        break;
    case W_FSYNC: r = ops->fsync(mnt, path, (int)rq->a, rq->fh); break;
    case W_OPENDIR:
        r = ops->opendir(mnt, path, &fh);
        if (r >= 0)
            handle_add(cl, W_OPENDIR, mnt, path, 0, fh);
        break;
    case W_READDIR: {
        struct dirlist l = { 0 };
        r = ops->readdir(mnt, path, rq->fh, &l);
        if (r >= 0) {
            out_len = l.n * sizeof(struct wire_dirent) + l.names_len;
            char *p = out = malloc(out_len ? out_len : 1);
            if (p == NULL) {
                r = -ENOMEM;
                out_len = 0;
            }
            for (size_t i = 0; p && i < l.n; i++) {
                struct wire_dirent d = { .ino = l.ents[i].ino, .type = l.ents[i].type, .namelen = l.ents[i].namelen };
                memcpy(p, &d, sizeof d);
                p += sizeof d;
                memcpy(p, l.names + l.ents[i].name_off, d.namelen);
                p += d.namelen;
            }
            if (p)
                out_len = (size_t)(p - (char *)out);
        }
        dirlist_free(&l);
        break;
    }
    case W_RELEASEDIR:
        handle_del(cl, W_OPENDIR, mnt, path, rq->fh);
        r = ops->releasedir(mnt, path, rq->fh);
        break;
    case W_ACCESS: r = ops->access(mnt, path, (int)rq->a); break;
    case W_UTIMENS:
        r = rq->data_len == 2 * sizeof(struct timespec) ? ops->utimens(mnt, path, (const struct timespec *)data)
            : rq->data_len == 0 ? ops->utimens(mnt, path, NULL)    /* "now" */
                                : -EINVAL;
        break;
    case W_SETXATTR: r = ops->setxattr(mnt, path, path2, data, rq->data_len, (int)rq->a); break;
    case W_REMOVEXATTR: r = ops->removexattr(mnt, path, path2); break;
    case W_FIFO: {
        /* owner and mode as the FS gives them now (not as the client says) */
        struct stat *st = (struct stat *)small;
        char *real = malloc(128);
        r = real ? ops->getattr(mnt, path, NULL, st) : -ENOMEM;
        if (r >= 0 && !S_ISFIFO(st->st_mode))
            r = -ENXIO;
        if (r >= 0) {
            become(own_uid, own_gid, 0, NULL);     /* the private directory is ours */
            r = sfifo_get(mnt, path, st->st_mode, st->st_uid, st->st_gid, real, 128);
            become(cl->as_uid, cl->as_gid, cl->as_ngroups, cl->as_groups);
        }
        if (r == 0) {
            out = real;
            out_len = strlen(real);
        } else {
            free(real);
        }
        break;
    }
    case W_CREATE_OPEN: {
        /* the client's lookup, then its create or open, in one round trip; a passthrough
         * open's lower name follows the answer, as W_OPEN's does */
        struct wire_create_open *ans = calloc(1, sizeof *ans);
        if (ans == NULL) {
            r = -ENOMEM;
            break;
        }
        out = ans;
        out_len = sizeof *ans;
        int flags = (int)rq->b;
        struct open_result res = { .passthrough_fd = -1 };
        changed_as = 0;
        r = ops->getattr(mnt, path, NULL, &ans->st);
        if (r == 0 && ((flags & O_EXCL) || !S_ISREG(ans->st.st_mode))) {
            ans->outcome = CO_EXISTS;
            break;
        }
        if (r == 0) {
            ans->outcome = CO_OPENED;
            changed_as = W_OPEN;
            flags &= ~(O_CREAT | O_EXCL | O_NOCTTY);
            r = ops->open(mnt, path, flags, &res);
        } else if (r == -ENOENT && !(flags & O_CREAT)) {
            ans->outcome = CO_MISSING;  /* the client looks at the directories above */
            break;
        } else if (r == -ENOENT) {
            /* a directory the FS does not know as one (missing, a symlink it leaves to
             * the caller to follow): the client looks the way the kernel would */
            int dir_ok = (rq->c & WANT_DIR_OK) != 0;
            if (!dir_ok) {
                const char *slash = strrchr(path, '/');
                size_t dl = slash && slash != path ? (size_t)(slash - path) : 1;
                char *dir = strndup(path, dl);
                struct stat dst;
                dir_ok = dir && ops->getattr(mnt, dir, NULL, &dst) == 0 && S_ISDIR(dst.st_mode);
                free(dir);
            }
            if (!dir_ok) {
                r = 0;
                ans->outcome = CO_ASK;
                break;
            }
            ans->outcome = CO_CREATED;
            changed_as = W_CREATE;
            flags &= ~O_NOCTTY;
            r = ops->create(mnt, path, (mode_t)rq->a, flags, &res);
        } else {
            r = 0;
            ans->outcome = CO_ASK;      /* its own lookup gives the client its own error */
            break;
        }
        fh = res.fh;
        pass_fd = r >= 0 ? res.passthrough_fd : -1;
        if (r >= 0 && pass_fd < 0)
            handle_add(cl, W_OPEN, mnt, path, flags, fh);
        char *lower;
        size_t ll;
        if (r >= 0 && pass_fd >= 0 && ans->outcome == CO_OPENED && (rq->c & WANT_LOWER) &&
            (ll = lower_name(pass_fd, &lower)) > 0) {
            char *both = realloc(ans, sizeof *ans + ll);
            if (both) {
                memcpy(both + sizeof *ans, lower, ll);
                out = both;
                out_len = sizeof *ans + ll;
            }
            free(lower);
        }
        if (r >= 0)
            r = res.open_flags;
        break;
    }
    case W_COHERENCE:
        pthread_once(&coh_once, coh_make);
        pass_fd = coh_fd >= 0 ? fcntl(coh_fd, F_DUPFD_CLOEXEC, 0) : -1;
        r = coh_fd < 0 ? -ENOSYS : pass_fd < 0 ? -errno : 0;
        break;
    case W_IOCTL: {
        /* the caller's buffer came along (its _IOC_SIZE bytes), and goes back */
        unsigned int cmd = (unsigned int)rq->a;
        size_t size = rq->data_len;
        if (size != 0 && size != _IOC_SIZE(cmd)) {
            r = -EINVAL;
            break;
        }
        out = size ? malloc(size) : NULL;
        if (size && out == NULL) {
            r = -ENOMEM;
            break;
        }
        if (size)
            memcpy(out, data, size);
        r = ops->ioctl ? ops->ioctl(mnt, path, cmd, (void *)(intptr_t)rq->b, rq->fh, (unsigned int)rq->c,
                                    size ? out : NULL)
                       : -ENOTTY;
        if (r >= 0)
            out_len = size;
        break;
    }
    default: r = -ENOSYS;
    }
    uint64_t after = coh_changed(rq, changed_as, path, path2, r, before);
    if (goes)
        fh = after;
    current = NULL;
    cl->r = r;
    cl->fh = fh;
    cl->out = out;
    cl->out_len = out_len;
    cl->pass_fd = pass_fd;
}

/* Give up one handle a client held. */
static void handle_release(struct handle *h)
{
    if (h->kind == W_OPEN) {
        ops->flush(h->mnt, h->path, h->fh);
        ops->release(h->mnt, h->path, h->flags, h->fh);
    } else if (h->kind == W_OPENDIR) {
        ops->releasedir(h->mnt, h->path, h->fh);
    } else {
        scache_close_id(h->fh);
    }
    free(h->path);
    free(h);
}

/* The handles of a process that closed its connection but lives on: it exec'd (the new
 * image keeps the fds, and so the memfds, it inherited: every process must still share
 * one memfd per file) or closed our fd (close_range) and goes on using its files. They
 * are released when it ends, as the kernel releases at the last close. */
struct orphan {
    struct orphan *next;
    pid_t pid;
    uid_t uid;
    gid_t gid;
    struct handle *h;
};
static struct orphan *orphans;
static pthread_mutex_t orphans_lock = PTHREAD_MUTEX_INITIALIZER;

static int pid_alive(pid_t pid)
{
    char buf[256];
    if (!read_proc(pid, "stat", buf, sizeof buf))
        return 0;
    char *end = strrchr(buf, ')');     /* "pid (comm) S ...": comm may hold anything */
    return end && end[1] == ' ' && end[2] != 'Z' && end[2] != 'X' && end[2] != 'x';
}

/* Release the orphans of processes that have ended (on a thread that may call the FS). */
static void orphans_sweep(void)
{
    struct orphan *dead = NULL;
    pthread_mutex_lock(&orphans_lock);
    for (struct orphan **p = &orphans; *p;) {
        struct orphan *o = *p;
        if (pid_alive(o->pid)) {
            p = &o->next;
            continue;
        }
        *p = o->next;
        o->next = dead;
        dead = o;
    }
    pthread_mutex_unlock(&orphans_lock);
    while (dead) {
        struct orphan *o = dead;
        dead = o->next;
        become(o->uid, o->gid, 0, NULL);
        handle_release(o->h);
        free(o);
    }
}

/* What a client that went away still held: released now if its process has ended (exit,
 * kill -9), or when it ends. */
static void release_all(struct client *cl, struct handle *handles)
{
    request_identity(cl, &(struct wire_req){ .uid = cl->uid, .gid = cl->gid });
    become(cl->as_uid, cl->as_gid, cl->as_ngroups, cl->as_groups);
    current = cl;
    int alive = pid_alive(cl->pid);
    while (handles) {
        struct handle *h = handles;
        handles = h->next;
        struct orphan *o = alive ? malloc(sizeof *o) : NULL;
        if (o == NULL) {
            handle_release(h);
            continue;
        }
        o->pid = cl->pid;
        o->uid = cl->as_uid;
        o->gid = cl->as_gid;
        o->h = h;
        pthread_mutex_lock(&orphans_lock);
        o->next = orphans;
        orphans = o;
        pthread_mutex_unlock(&orphans_lock);
    }
    current = NULL;
}

static void client_free(struct client *cl)
{
    if (cl->as_proc)
        free(cl->as_groups);
    free(cl->groups);
    free(cl);
}

/* An answer nobody waits for any more: the client gave the request up (op_timeout) while
 * the method ran. What it handed over (a file or directory handle, a page cache) is
 * released now, as if the client had closed it at once; an fd riding along is closed by
 * the caller. The region is still ours (mapped here until client_gone): writing the
 * answer into it touched nothing freed. */
static void answer_dropped(struct client *cl)
{
    struct handle *h = NULL;
    if (cl->added == 0)
        return;
    pthread_mutex_lock(&cl->proc->lock);
    for (struct handle **p = &cl->proc->handles; *p; p = &(*p)->next)
        if ((*p)->serial == cl->added) {
            h = *p;
            *p = h->next;
            break;
        }
    pthread_mutex_unlock(&cl->proc->lock);
    cl->added = 0;
    if (h == NULL)
        return;     /* a release of the same fh by another thread took it meanwhile */
    current = cl;
    handle_release(h);
    current = NULL;
}

/* Answer the request cl's client published in its region. -1: the client has gone (or
 * broke the protocol). The header is read once and the body copied out of the region, so
 * a client that scribbles on its region while we work changes nothing we rely on. */

/* Has the first request of cl (on its socket) come in whole, header at least? 1 yes, 0 not
 * yet, -1 the client has gone. */
static int first_ready(struct client *cl)
{
    struct wire_req rq;
    ssize_t n = recv(cl->fd, &rq, sizeof rq, MSG_PEEK | MSG_DONTWAIT);
    if (n == (ssize_t)sizeof rq)
        return 1;
    return n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) ? -1 : 0;
}

/* Answer the request cl's client published in its region (its first request: sent on the
 * socket). -1: the client has gone (or broke the protocol). The header is read once and
 * the body copied out of the region, so a client that scribbles on its region while we
 * work changes nothing we rely on. */
static int serve_request(struct client *cl)
{
    struct chan_region *rg = cl->region;
    struct wire_req rq;
    int on_socket = cl->first;
    cl->first = 0;
    if (on_socket && chan_load(&rg->state) == CHAN_GAVE_UP)
        return -1;      /* given up (op_timeout) before its turn, and gone: never run */
    if (on_socket) {
        if (wire_read_all(cl->fd, &rq, sizeof rq) < 0)
            return -1;
    } else {
        rq = rg->rq;
    }
    if ((uint64_t)rq.path_len + rq.path2_len + rq.data_len != rq.len || rq.len > (1u << 30))
        return -1;
    char *body = malloc((size_t)rq.len + 2);
    if (body == NULL)
        return -1;
    if (rq.len <= CHAN_BUF && !on_socket)
        memcpy(body, rg->buf, rq.len);
    else if (wire_read_all(cl->fd, body, rq.len) < 0) {
        free(body);
        return -1;
    }
    cl->rq = &rq;
    cl->body = body;
    do_op(cl);
    int ret = 0;
    struct wire_resp rs = { .len = (uint32_t)cl->out_len, .has_fd = cl->pass_fd >= 0, .result = cl->r, .fh = cl->fh };
    /* the fd before the answer: the client that sees the answer finds the fd waiting and
     * never sleeps in recvmsg for it (a wake-up more per open, on a busy machine) */
    if (cl->pass_fd >= 0)
        ret = send_resp(cl->fd, NULL, 0, cl->pass_fd);
    rg->rs = rs;
    if (cl->out_len <= CHAN_BUF && cl->out_len)
        memcpy(rg->buf, cl->out, cl->out_len);
    if (!chan_settle(&rg->state, on_socket ? CHAN_IDLE : CHAN_REQ, CHAN_RESP)) {
        answer_dropped(cl);     /* the client gave up waiting (op_timeout) and left */
        ret = -1;
    } else {
        if (chan_load(&rg->client_waits))
            chan_wake(&rg->state);
        /* data that did not fit only after it: the client reads it once it has the answer,
         * and a socket filled before that would stop us */
        if (ret == 0 && cl->out_len > CHAN_BUF)
            ret = send_resp(cl->fd, cl->out, cl->out_len, -1);
    }
    if (cl->pass_fd >= 0)
        close(cl->pass_fd);         /* the client has its own now */
    if (cl->out != cl->small)
        free(cl->out);
    free(body);
    return ret;
}

static void client_gone(struct client *cl)
{
    close(cl->fd);
    munmap(cl->region, CHAN_SIZE);
    struct handle *h = cl->proc ? proc_put(cl->proc) : NULL;
    if (h)
        release_all(cl, h);
    client_free(cl);
    orphans_sweep();
}

static int client_setup(struct client *cl);
static void spares_fill(void);

static long server_spin_ns = -1;
#define FS_ANTICIPATE_NS 3000000ull     /* the FS thread stays awake this long after a connection */

/* How long the server spins for a client's next request (LDPFUSE_SERVER_SPIN_US, default
 * 100 us). Long enough to cover what a program does between two requests of a loop (a
 * create cycle writes 4 KiB and closes between its create and its unlink): a sleep costs
 * the waker a wake-up of an idle CPU, 50-80 us on this 2-core VM when the machine is
 * otherwise quiet. Measured (bench/targets.py, idle machine): 5 us gave the create cycle
 * x0.14 of native and open+read+close x0.43; 100 us x0.64 and x0.58. chan_spin stops
 * spinning where it does not pay (a short process), and the spin yields the CPU. */
static uint64_t spin_budget(void)
{
    if (server_spin_ns < 0) {
        const char *e = getenv("LDPFUSE_SERVER_SPIN_US");
        server_spin_ns = e && *e ? strtol(e, NULL, 10) * 1000 : 100000;
    }
    return (uint64_t)server_spin_ns;
}

/* A thread_safe class: one thread per client connection while it lasts, so a call that
 * blocks holds up only its caller. It waits on its channel's futex, in slices, checking
 * between them that the client still lives. */
static void serve_client(struct client *cl)
{
    struct chan_region *rg = cl->region;
    struct chan_spin spin = { 0 };
    if (client_setup(cl) < 0) {
        client_gone(cl);
        return;
    }
    /* the first request comes on the socket: wait for it as long as the client lives (a
     * client stopped between connect and send must not meet SO_RCVTIMEO) */
    struct pollfd first = { .fd = cl->fd, .events = POLLIN | POLLRDHUP };
    while (cl->first && poll(&first, 1, -1) < 0 && errno == EINTR)
        ;
    if (cl->first && serve_request(cl) < 0) {
        client_gone(cl);
        return;
    }
    spares_fill();      /* after the answer: out of the way of this client and the next */
    for (;;) {
        uint32_t st = chan_load(&rg->state);
        if (st != CHAN_REQ && spin_budget() > 0 && chan_spin_now(&spin)) {
            struct chan_spinner spinner;
            chan_spin_start(&spinner, spin_budget());
            while ((st = chan_load(&rg->state)) != CHAN_REQ && chan_spin_turn(&spinner))
                ;
            chan_spin_result(&spin, st == CHAN_REQ);
        }
        if (st != CHAN_REQ) {
            chan_store(&rg->server_waits, 1);
            st = chan_load(&rg->state);
            if (st != CHAN_REQ)
                chan_sleep(&rg->state, st, 100);
            chan_store(&rg->server_waits, 0);
            if (chan_load(&rg->state) != CHAN_REQ) {
                if (chan_peer_gone(cl->fd))
                    break;
                continue;
            }
        }
        if (serve_request(cl) < 0)
            break;
    }
    client_gone(cl);
}

/* Threads whose connection has ended wait here for the next one (up to POOL_IDLE_MAX of
 * them, for POOL_IDLE_S), so a new connection (every short process makes one) costs no
 * thread start and no new Python thread state: 200 `cat` processes on a thread_safe
 * loopback ran at x0.47 of native with a thread per connection. The accept thread hands a
 * client to a waiting thread (pool_give) or starts one. */
#define POOL_IDLE_MAX 16
#define POOL_IDLE_S 10
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond = PTHREAD_COND_INITIALIZER;
static struct client *pool_queue;   /* handed over, not yet taken (linked by next) */
static int pool_idle, pool_queued;

static int pool_give(struct client *cl)
{
    pthread_mutex_lock(&pool_lock);
    int given = pool_idle > pool_queued;
    if (given) {
        struct client **p = &pool_queue;
        while (*p)
            p = &(*p)->next;
        cl->next = NULL;
        *p = cl;
        pool_queued++;
        pthread_cond_signal(&pool_cond);
    }
    pthread_mutex_unlock(&pool_lock);
    return given;
}

/* The next client for this thread, or NULL: it ends. */
static struct client *pool_wait(void)
{
    struct client *cl = NULL;
    pthread_mutex_lock(&pool_lock);
    if (pool_idle < POOL_IDLE_MAX) {
        struct timespec end;
        clock_gettime(CLOCK_MONOTONIC, &end);
        end.tv_sec += POOL_IDLE_S;
        pool_idle++;
        while (pool_queue == NULL && pthread_cond_clockwait(&pool_cond, &pool_lock, CLOCK_MONOTONIC, &end) != ETIMEDOUT)
            ;
        pool_idle--;
        if ((cl = pool_queue) != NULL) {
            pool_queue = cl->next;
            pool_queued--;
        }
    }
    pthread_mutex_unlock(&pool_lock);
    return cl;
}

static void *conn_thread(void *arg)
{
    for (struct client *cl = arg; cl; cl = pool_wait())
        serve_client(cl);
    ldp_thread_done();
    return NULL;
}

/* A connection's region: a sealed memfd (the client cannot shrink it under us), mapped
 * here and sent to the client as the connection's first message. A few are made ahead
 * (spares), by the threads that serve clients, after an answer: the accept thread runs on
 * the connecting process's CPU (a socket's wake-up is a synchronous one: the scheduler
 * puts the woken thread where the waker runs), and whatever it does there before it
 * sleeps again delays that process. Its own part is the least a client needs before its
 * first answer: the accept and the hello; who the client is, what it may do, and the
 * watch on its socket are done by the thread that serves it (client_setup), on another
 * CPU while the client sends its request and maps its region. It makes a spare itself only
 * when none is left, and before it accepts: out of fds, a client waits in the backlog,
 * it does not fail. */
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

static int spares_count(void)
{
    return __atomic_load_n(&nspares, __ATOMIC_RELAXED);
}

static void spares_fill(void)
{
    while (spares_count() < SPARES && region_make() == 0)
        ;
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
    /* the table of change counters rides along: every process maps it, and a round trip
     * of its own cost each short process as much as its first operation */
    pthread_once(&coh_once, coh_make);
    int fds[2] = { sp.mfd, coh_fd }, nfd = coh_fd >= 0 ? 2 : 1;
    struct wire_resp hello = { .has_fd = nfd, .result = CHAN_SIZE };
    struct iovec iov = { &hello, sizeof hello };
    char cbuf[CMSG_SPACE(sizeof fds)];
    memset(cbuf, 0, sizeof cbuf);
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf,
                         .msg_controllen = CMSG_SPACE((size_t)nfd * sizeof(int)) };
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN((size_t)nfd * sizeof(int));
    memcpy(CMSG_DATA(c), fds, (size_t)nfd * sizeof(int));
    int r = sendmsg(cl->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT) == (ssize_t)sizeof hello ? 0 : -1;
    close(sp.mfd);
    if (r < 0) {
        munmap(sp.p, CHAN_SIZE);
        cl->region = NULL;
    }
    return r;
}

/* The accept thread's part of a new connection: the hello (its region). */
static struct client *client_new(int fd)
{
    struct client *cl = calloc(1, sizeof *cl);
    if (cl == NULL)
        return NULL;
    cl->fd = fd;
    cl->first = 1;      /* sent with the connect (channel.c) */
    if (region_give(cl) < 0) {
        free(cl);
        return NULL;
    }
    return cl;
}

static int watch_ep = -1;

/* The serving thread's part, before the client's first request: who it is (SO_PEERCRED,
 * its groups: what the kernel vouches for), its process's handles, and the watch on its
 * socket. -1: the client cannot be served (it has gone, or we are out of memory). */
static int client_setup(struct client *cl)
{
    if (cl->ready)
        return 0;
    cl->ready = 1;
    int fd = cl->fd;
    struct ucred cred;
    socklen_t len = sizeof cred;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0)
        return -1;
    cl->uid = cred.uid;
    cl->gid = cred.gid;
    cl->pid = cred.pid;
    len = 64 * sizeof(gid_t);
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
    /* a client that stops reading or writing what rides on the socket cannot hold a
     * server thread for ever */
    struct timeval tv = { 10, 0 };
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    if ((cl->proc = proc_get(cl->pid)) == NULL)
        return -1;
    if (watch_ep >= 0) {
        /* the FS thread's clients under their fd << 1; a thread_safe class's once, under
         * its region's futex word, tagged (watch_thread) */
        struct epoll_event ev = { .events = EPOLLRDHUP, .data.u64 = (uint64_t)fd << 1 };
        if (!serialise)
            ev = (struct epoll_event){ .events = EPOLLRDHUP | EPOLLONESHOT,
                                       .data.u64 = (uintptr_t)&cl->region->state | 1 };
        epoll_ctl(watch_ep, EPOLL_CTL_ADD, fd, &ev);
    }
    return 0;
}

/* The clients of a class that is not thread_safe, served by the FS thread: the accept
 * thread adds to `fs_clients` (at its head, under fs_clients_lock, published whole with
 * a release store) and bumps `fs_ctl`, a futex the FS thread also waits on. Only the FS
 * thread takes clients off the list, so it may walk the list without the lock. */
static struct client *fs_clients;
static pthread_mutex_t fs_clients_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t fs_ctl;
static int fs_stop;
static uint64_t last_connect_ns;    /* when the accept thread last took a connection */

static int fs_asleep;               /* the FS thread is in (or on its way into) fs_wait */

/* A spinning FS thread sees fs_ctl move; only a sleeping one needs the wake-up (whose
 * system call, to an idle CPU, costs the waker tens of microseconds on a VM: the
 * watcher, when a short process exits, does it on that process's CPU). */
static void fs_poke(void)
{
    __atomic_add_fetch(&fs_ctl, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&fs_asleep, __ATOMIC_SEQ_CST))
        syscall(SYS_futex, &fs_ctl, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* The clients' sockets, watched for hang-ups so that a client that has gone (a short
 * process's exit) is let go of soon, not at its server thread's next 100 ms look. For
 * the FS thread a hang-up is a hint (fs_hangup), it checks each socket. A thread_safe
 * class's connection is watched once (EPOLLONESHOT) under the address of its region's
 * futex word (tagged with bit 0; the FS thread's clients under their fd << 1), which the
 * watcher wakes: a stale address (the region gone since) makes
 * that wake fail (EFAULT) or wake a thread that then finds nothing to do, never more. */
static int fs_hangup;

static void *watch_thread(void *arg)
{
    (void)arg;
    /* at the lowest priority: a short process's exit woke it on that process's CPU,
     * where it ran (10-20 us) before the process could finish dying and its parent go on;
     * as SCHED_IDLE it runs once a CPU has nothing else to do. Nothing waits on it: the
     * FS thread also looks at every socket each 100 ms, and a thread_safe class's
     * threads at theirs. */
    struct sched_param idle = { 0 };
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
    for (;;) {
        struct epoll_event ev[32];
        int n = epoll_wait(watch_ep, ev, 32, -1);
        if (n < 0 && errno != EINTR)
            break;
        int hangup = 0, poke = 0;
        for (int i = 0; i < n; i++) {
            if (ev[i].data.u64 & 1) {
                syscall(SYS_futex, (uint32_t *)(uintptr_t)(ev[i].data.u64 & ~(uint64_t)1), FUTEX_WAKE, INT_MAX,
                        NULL, NULL, 0);
                continue;
            }
            poke = 1;
            int fd = (int)(ev[i].data.u64 >> 1);
            epoll_ctl(watch_ep, EPOLL_CTL_DEL, fd, NULL);
            hangup = 1;
        }
        if (hangup)
            __atomic_store_n(&fs_hangup, 1, __ATOMIC_SEQ_CST);
        if (poke)
            fs_poke();
    }
    return NULL;
}

static void *accept_thread(void *arg)
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
        if (cl == NULL) {
            close(fd);      /* the client sees EIO for this call and connects again */
            continue;
        }
        if (serialise) {
            pthread_mutex_lock(&fs_clients_lock);
            cl->next = fs_clients;
            __atomic_store_n(&fs_clients, cl, __ATOMIC_RELEASE);  /* whole, for lock-free readers */
            pthread_mutex_unlock(&fs_clients_lock);
            fs_poke();
            continue;
        }
        if (pool_give(cl))
            continue;
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &at, conn_thread, cl) != 0)
            client_gone(cl);
        pthread_attr_destroy(&at);
    }
    return NULL;
}

/* fuse_get_context() in the server: the calling client's (uid, gid, pid), or None when
 * this thread is not answering a request. */
PyObject *ldp_context(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    if (current == NULL)
        Py_RETURN_NONE;
    return Py_BuildValue("(III)", current->as_uid, current->as_gid, current->pid);
}

PyObject *ldp_serve_init(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    char err[512] = "";
    ops = ldpfuse_backend_embedded_init(&server_core, 1, err, sizeof err);
    if (ops == NULL) {
        PyErr_SetString(PyExc_RuntimeError, err[0] ? err : "the file system could not start");
        return NULL;
    }
    Py_RETURN_NONE;
}

PyObject *ldp_serve_start(PyObject *self, PyObject *args)
{
    (void)self;
    int lfd, thread_safe = 0;
    if (!PyArg_ParseTuple(args, "i|p", &lfd, &thread_safe))
        return NULL;
    if (ops == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "serve_init() first");
        return NULL;
    }
    serialise = !thread_safe;
    own_uid = geteuid();
    own_gid = getegid();
    switch_creds = own_uid == 0;
    umask(0);       /* each client applied its own umask to the modes it sends */
    pthread_t t;
    if ((watch_ep = epoll_create1(EPOLL_CLOEXEC)) >= 0 &&
        pthread_create(&t, NULL, watch_thread, NULL) == 0)
        pthread_detach(t);
    if (pthread_create(&t, NULL, accept_thread, (void *)(intptr_t)lfd) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return NULL;
    }
    pthread_detach(t);
    Py_RETURN_NONE;
}

/* The FS thread's wait: every client's futex word (futex_waitv, up to FUTEX_WAITV_MAX - 1 of
 * them; with more, a short timeout and a scan of the rest) and fs_ctl (a new client,
 * serve_stop()). Returns after at most `ms` milliseconds. */
static void fs_wait(long ms)
{
    struct futex_waitv w[FUTEX_WAITV_MAX];
    int n = 0;
    /* announced before fs_ctl is read: a poke after that read wakes us, one before it
     * moved the value we wait on (futex_waitv then returns at once) */
    __atomic_store_n(&fs_asleep, 1, __ATOMIC_SEQ_CST);
    uint32_t ctl = __atomic_load_n(&fs_ctl, __ATOMIC_SEQ_CST);
    w[n++] = (struct futex_waitv){ .val = ctl, .uaddr = (uintptr_t)&fs_ctl, .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG };
    int more = 0;
    pthread_mutex_lock(&fs_clients_lock);
    for (struct client *cl = fs_clients; cl; cl = cl->next) {
        if (!cl->ready) {
            n = 0;          /* a new client to set up */
            break;
        }
        chan_store(&cl->region->server_waits, 1);
        uint32_t st = chan_load(&cl->region->state);
        if (cl->first ? first_ready(cl) != 0 : st == CHAN_REQ) {
            n = 0;          /* work (or a client's end) came in meanwhile */
            break;
        }
        /* a client whose first request is still on its way on the socket wakes this
         * futex once it has sent it and has its region (channel.c), the others publish
         * requests there: either way no other thread is woken first. (Before its first
         * request a client's region holds no request: what it says there is not read.) */
        if (n == FUTEX_WAITV_MAX) {
            more = 1;
            continue;
        }
        w[n++] = (struct futex_waitv){ .val = st, .uaddr = (uintptr_t)&cl->region->state, .flags = FUTEX_32 };
    }
    pthread_mutex_unlock(&fs_clients_lock);
    if (n > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        long add = more ? 1 : ms;
        ts.tv_nsec += (add % 1000) * 1000000L;
        ts.tv_sec += add / 1000 + ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        if (syscall(SYS_futex_waitv, w, n, 0, &ts, CLOCK_MONOTONIC) < 0 && errno == ENOSYS)
            chan_sleep(&fs_ctl, ctl, 1);    /* a kernel before 5.16: look again every ms */
    }
    __atomic_store_n(&fs_asleep, 0, __ATOMIC_SEQ_CST);
    pthread_mutex_lock(&fs_clients_lock);
    for (struct client *cl = fs_clients; cl; cl = cl->next)
        chan_store(&cl->region->server_waits, 0);
    pthread_mutex_unlock(&fs_clients_lock);
}

/* One pass over the FS thread's clients: answer each published request, and, when
 * `check` says so, drop those whose socket has closed. Returns how many it answered. */
static int fs_pass(int check)
{
    int served = 0;
    pthread_mutex_lock(&fs_clients_lock);
    struct client *list = fs_clients;
    pthread_mutex_unlock(&fs_clients_lock);
    /* only this thread removes from the list; the accept thread only pushes at its head */
    for (struct client *cl = list; cl; cl = cl->next) {
        if (client_setup(cl) < 0) {
            cl->gone = 1;
            continue;
        }
        int first = cl->first ? first_ready(cl) : 0;
        if (first < 0) {
            cl->gone = 1;
        } else if (first > 0 || (!cl->first && chan_load(&cl->region->state) == CHAN_REQ)) {
            if (serve_request(cl) < 0)
                cl->gone = 1;
            coh_fs_served();
            served++;
        } else if (check && chan_peer_gone(cl->fd)) {
            cl->gone = 1;
        }
    }
    for (;;) {
        struct client *dead = NULL;
        pthread_mutex_lock(&fs_clients_lock);
        for (struct client **p = &fs_clients; *p; p = &(*p)->next)
            if ((*p)->gone) {
                dead = *p;
                *p = dead->next;
                break;
            }
        pthread_mutex_unlock(&fs_clients_lock);
        if (dead == NULL)
            break;
        client_gone(dead);
    }
    return served;
}

/* Is one process at most among the FS thread's live clients? Then new processes come one
 * after another (a shell loop of short processes: waking the FS thread for each costs
 * more than it does), not beside others: with two or more at once (make -j2, whose make
 * is a client too) the CPUs have work, and a spinning FS thread slowed the build (16
 * compiles: 274 ms without anticipation, 335 ms with it, 191 natively). A client whose
 * socket has closed but whose hang-up has not been told yet does not count. */
static int fs_client_alone(void)
{
    pid_t one = 0;
    for (struct client *cl = __atomic_load_n(&fs_clients, __ATOMIC_ACQUIRE); cl; cl = cl->next) {
        if (cl->gone || !cl->ready || cl->pid == one)
            continue;
        if (chan_peer_gone(cl->fd))
            continue;
        if (one != 0)
            return 0;
        one = cl->pid;
    }
    return 1;
}

/* serve_loop(): the calling thread (the one that built the FS objects) answers every
 * client of a class that is not thread_safe, one request at a time, until serve_stop():
 * so the class is always called from the thread that built it, and objects bound to a
 * thread (sqlite3 connections made in __init__) work. After an answer it spins a little
 * for the next request (while processes come one after another, for the next connection
 * too), then
 * sleeps on every client's futex at once (futex_waitv). For a
 * thread_safe class it only waits. Python signal handlers still run (every 100 ms at
 * worst); an exception from one ends the loop. */
PyObject *ldp_serve_loop(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    struct chan_spin fs_spin = { 0 };
    while (!__atomic_load_n(&fs_stop, __ATOMIC_ACQUIRE)) {
        Py_BEGIN_ALLOW_THREADS
        uint64_t t0 = chan_now_ns(), last_check = t0;
        while (!__atomic_load_n(&fs_stop, __ATOMIC_ACQUIRE) && chan_now_ns() - t0 < 100000000u) {
            uint64_t now = chan_now_ns();
            int check = now - last_check > 100000000u || __atomic_exchange_n(&fs_hangup, 0, __ATOMIC_SEQ_CST);
            if (check)
                last_check = now;
            if (fs_pass(check) > 0)
                continue;
            /* spin a little: a client that just got its answer often asks again at once
             * (adaptive: fs_spin). While new processes come one after another (a shell
             * loop of short processes: one every millisecond or so), stay awake until
             * FS_ANTICIPATE_NS after the last connection, whatever the spins so far paid:
             * asleep, the FS thread costs each new process an idle CPU's wake-up (50-80 us
             * on a quiet VM) between the accept thread's hand-over and the call; with the
             * adaptive rule it slept between most two `cat`s of a loop. */
            uint64_t start = chan_now_ns(), budget = spin_budget();
            uint64_t last = __atomic_load_n(&last_connect_ns, __ATOMIC_RELAXED);
            uint64_t since = start > last ? start - last : 0;
            uint32_t ctl = __atomic_load_n(&fs_ctl, __ATOMIC_SEQ_CST);
            int anticipate = budget > 0 && since < FS_ANTICIPATE_NS && fs_client_alone();
            int work = 0;
            if (anticipate)
                budget = FS_ANTICIPATE_NS - since;
            spares_fill();
            if (budget > 0 && (anticipate || chan_spin_now(&fs_spin))) {
                struct chan_spinner spinner;
                chan_spin_start(&spinner, budget);
                while (!work && chan_spin_turn(&spinner)) {
                    if (__atomic_load_n(&fs_ctl, __ATOMIC_SEQ_CST) != ctl)
                        work = 1;       /* a new client, or one that has gone */
                    /* no lock: only this thread takes clients off the list (fs_pass); a
                     * first request is looked for on the socket (no watcher's wake-up) */
                    for (struct client *cl = __atomic_load_n(&fs_clients, __ATOMIC_ACQUIRE); cl && !work; cl = cl->next)
                        work = cl->first ? !cl->ready || first_ready(cl) != 0
                                         : chan_load(&cl->region->state) == CHAN_REQ;
                }
                if (!anticipate)
                    chan_spin_result(&fs_spin, work);
            }
            /* a poke after the spin's last look (a hang-up) would be lost to fs_wait,
             * which waits from fs_ctl's value of then */
            if (!work && __atomic_load_n(&fs_ctl, __ATOMIC_SEQ_CST) == ctl)
                fs_wait(100);
        }
        fs_pass(1);
        if (__atomic_load_n(&orphans, __ATOMIC_ACQUIRE))
            orphans_sweep();    /* a process seen leaving may have been mid-exit */
        Py_END_ALLOW_THREADS
        if (!__atomic_load_n(&fs_stop, __ATOMIC_ACQUIRE) && PyErr_CheckSignals() < 0)
            return NULL;
    }
    become_self();
    Py_RETURN_NONE;
}

/* fs_thread_stuck(): has a call timed out behind the FS thread, which has finished no
 * request since (coherence.h, fs)? The launcher then does not wait for it to end. */
PyObject *ldp_fs_thread_stuck(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    return PyBool_FromLong(coh_fs_stuck(__atomic_load_n(&coh, __ATOMIC_ACQUIRE)));
}

PyObject *ldp_serve_stop(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    __atomic_store_n(&fs_stop, 1, __ATOMIC_RELEASE);
    fs_poke();
    Py_RETURN_NONE;
}

/* serve_cleanup(): remove what the server left on disk (the FIFOs' directory). */
PyObject *ldp_serve_cleanup(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    pthread_mutex_lock(&sfifo_lock);
    for (struct sfifo *f = sfifos; f; f = f->next)
        unlink(f->real);
    if (fifo_dir[0])
        rmdir(fifo_dir);
    pthread_mutex_unlock(&sfifo_lock);
    Py_RETURN_NONE;
}
