/*
 * The server's side of the table of change counters every client maps (backend/coherence.h):
 * bumped after each operation that changes a name, before its answer leaves, so a process
 * that hears "done" and tells another one finds the other's caches already forgetting.
 *
 * Only the server writes it. The memfd is sealed against writes (F_SEAL_FUTURE_WRITE) once
 * the server has mapped it, and clients get a read-only fd of it: a client can neither map
 * it writable nor write, truncate or punch it. A process that changed a passthrough file
 * through its fd tells the server (W_WRITTEN), which bumps written[] for it; the FS thread's progress (fs) is the
 * server's word too.
 */
#include "server.h"
#include <stdio.h>
#include <sys/mman.h>

struct coherence *coh;
int coh_fd = -1;                /* a read-only fd of the table, for clients */
static pthread_once_t coh_once = PTHREAD_ONCE_INIT;

/* A memfd of `size` bytes shared with clients, sealed against shrinking and growing
 * (nobody can cut it under the others' mappings), mapped here: the mapping, its fd in
 * *fd; MAP_FAILED if it cannot be made. */
void *shared_memfd(const char *name, size_t size, int *fd)
{
    int mfd = memfd_create(name, MFD_CLOEXEC | MFD_ALLOW_SEALING);
    if (mfd < 0)
        return MAP_FAILED;
    void *p = MAP_FAILED;
    if (ftruncate(mfd, (off_t)size) == 0 && fcntl(mfd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW) == 0)
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
    void *m = shared_memfd("ldpfuse:coherence", sizeof *coh, &fd);
    if (m == MAP_FAILED)
        return;
    struct coherence *t = m;
    t->magic = COH_MAGIC;
    t->global = 1;
    t->fs.one_thread = serialise;
    const char *e = getenv("LDPFUSE_OP_TIMEOUT");
    double sec = e && *e ? strtod(e, NULL) : 60.0;
    t->fs.stuck_after_ns = sec > 0 ? (uint64_t)(sec * 1e9) : 0;
    /* from now on nobody gets a writable mapping or writes: the server's own mapping stays */
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    int ro = open(proc, O_RDONLY | O_CLOEXEC);
    if (fcntl(fd, F_ADD_SEALS, F_SEAL_FUTURE_WRITE | F_SEAL_SEAL) < 0 || ro < 0) {
        if (ro >= 0)
            close(ro);
        close(fd);
        munmap(m, sizeof *coh);
        return;
    }
    close(fd);
    __atomic_store_n(&coh, t, __ATOMIC_RELEASE);
    coh_fd = ro;
}

void coh_ensure(void)
{
    pthread_once(&coh_once, coh_make);
}

/* A new read-only fd of the table for a client, or -1. */
int coh_reader_fd(void)
{
    coh_ensure();
    return coh_fd >= 0 ? fcntl(coh_fd, F_DUPFD_CLOEXEC, 0) : -1;
}

/* The FS thread takes a request: from now, while it has not finished it, clients that
 * wait behind it see how long it has been in it (coherence.h, coh_fs_stuck). */
void coh_fs_begin(void)
{
    struct coherence *t = __atomic_load_n(&coh, __ATOMIC_ACQUIRE);
    if (t)
        __atomic_store_n(&t->fs.busy_since, chan_now_ns(), __ATOMIC_RELEASE);
}

/* The FS thread finished a request (any outcome): it is not stuck. */
void coh_fs_served(void)
{
    struct coherence *t = __atomic_load_n(&coh, __ATOMIC_ACQUIRE);
    if (t)
        __atomic_store_n(&t->fs.busy_since, 0, __ATOMIC_RELEASE);
}

/* A process changed a passthrough file behind the server's back (the kernel did it, through
 * the process's fd): every process forgets what it knew of the file. */
void coh_written(int mnt, const char *path)
{
    struct coherence *t = __atomic_load_n(&coh, __ATOMIC_ACQUIRE);
    if (t) {
        __atomic_add_fetch(&t->changes, 1, __ATOMIC_SEQ_CST);
        __atomic_add_fetch(&t->written[coh_slot(mnt, path, strlen(path))], 1, __ATOMIC_RELEASE);
    }
}

/* A process removed or renamed a directory of a backing tree, or changed its permissions,
 * itself (vfs/backing.c): what lies below path and path2 is forgotten (the directories the
 * processes keep open, coherence_stamp_below). */
void coh_moved(int mnt, const char *path, const char *path2)
{
    struct coherence *t = __atomic_load_n(&coh, __ATOMIC_ACQUIRE);
    if (t == NULL)
        return;
    __atomic_add_fetch(&t->below[coh_slot(mnt, path, strlen(path))], 1, __ATOMIC_RELEASE);
    if (strcmp(path, path2) != 0)
        __atomic_add_fetch(&t->below[coh_slot(mnt, path2, strlen(path2))], 1, __ATOMIC_RELEASE);
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
uint64_t coh_changed(const struct wire_req *rq, int op, const char *path, const char *path2, int64_t r,
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
        if ((open_flags & O_ACCMODE) == O_RDONLY)
            return 0;
        if (!(open_flags & O_TRUNC)) {
            /* no name changed, but the class may have made some (an overlay copies the
             * file and its directories up): the count of every change moves, by which
             * vfs/union.c keeps the directories it walked, and the name's opened[], by
             * which every process forgets the open it decided for it (backend/shared.c:
             * it would open the lower file again). Not the name's stamp: a watcher would
             * be told IN_MODIFY of an open (vfs/notify.c) */
            __atomic_add_fetch(&t->changes, 1, __ATOMIC_SEQ_CST);
            __atomic_add_fetch(&t->opened[coh_slot(mnt, path, strlen(path))], 1, __ATOMIC_RELEASE);
            return 0;
        }
        /* fall through */
    case W_TRUNCATE: case W_UTIMENS: case W_WRITE: case W_APPEND:
        c.self[c.nself++] = coh_slot(mnt, path, strlen(path));
        break;
    default:
        return 0;
    }
    /* first the count of every change: a client that reads a counter moved by this one
     * and then the count (vfs/dir.c, readdir's attributes) sees the count moved too */
    __atomic_add_fetch(&t->changes, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < c.nself; i++)
        __atomic_add_fetch(&t->self[c.self[i]], 1, __ATOMIC_RELEASE);
    for (int i = 0; i < c.nbelow; i++)
        __atomic_add_fetch(&t->below[c.below[i]], 1, __ATOMIC_RELEASE);
    if (before == 0 || r < 0)
        return 0;
    uint64_t after = coherence_stamp(t, mnt, path);
    return after == before + coh_share(&c, mnt, path) ? after : 0;
}
