/*
 * The call of the class's method for one request that request.c has checked: arguments
 * from the request (fh: the file system's own, from the handle the token named), the
 * answer kept in the client for request.c to send. Handles the method hands over become
 * tokens of the caller's process (handles.c); names that change are told to the page
 * caches, the FIFOs and the table every client maps (coherence.c).
 */
#include "server.h"
#include <sys/file.h>
#include <sys/xattr.h>
#include <stdarg.h>
#include <stdio.h>

struct backend_ops *fs_ops;
__thread struct client *srv_current;

void server_log(int level, const char *msg)
{
    (void)level;
    char line[1200];
    int n = snprintf(line, sizeof line, "ldpfuse[%d]: %s\n", (int)getpid(), msg);
    const char *file = getenv("LDPFUSE_LOG_FILE");
    int fd = file && *file ? open(file, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600) : 2;
    if (fd >= 0) {
        (void)!write(fd, line, n > 0 && (size_t)n < sizeof line ? (size_t)n : strlen(line));
        if (fd != 2)
            close(fd);
    }
}

void server_logf(const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    server_log(0, msg);
}

const struct core_api server_core = { .abi = LDP_BACKEND_ABI, .log = server_log };

/* The class's open and create: one that meets EMFILE (its own os.open, in a server whose
 * fds the idle page caches hold) is tried again once they are let go of. The kernel checks
 * for a free fd before it looks at the name, so the first try created nothing. */
static int fs_open(int mnt, const char *path, int flags, struct open_result *res)
{
    int r = fs_ops->open(mnt, path, flags, res);
    if (r == -EMFILE && scache_shed() > 0)
        r = fs_ops->open(mnt, path, flags, res);
    /* with default_permissions every open is checked here (permissions.c): none is made
     * in the client alone (OPEN_LOCAL, OPEN_HOLD) */
    if (r >= 0 && policy.default_permissions)
        res->open_flags &= ~(OPEN_LOCAL | OPEN_HOLD);
    return r;
}

static int fs_create(int mnt, const char *path, mode_t mode, int flags, struct open_result *res)
{
    int r = fs_ops->create(mnt, path, mode, flags, res);
    if (r == -EMFILE && scache_shed() > 0)
        r = fs_ops->create(mnt, path, mode, flags, res);
    return r;
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

/* A handle the method handed over becomes the caller's (a token, in *token); if it cannot
 * (out of memory), the method's handle is let go of again and the caller gets ENOMEM. */
static int hand_over(struct client *cl, int kind, int mnt, const char *path, int flags, uint64_t fh,
                     uint64_t *token)
{
    struct handle *h = handle_add(cl, kind, mnt, path, flags, fh);
    if (h) {
        *token = h->token;
        return 0;
    }
    if (kind == W_OPEN)
        fs_ops->release(mnt, path, flags, fh);
    else if (kind == W_OPENDIR)
        fs_ops->releasedir(mnt, path, fh);
    else
        scache_close_id(fh);
    *token = 0;
    return -ENOMEM;
}

/* ---- a small file's data with its open's answer (issue 24): the open that made a file's
 * page cache fills it with the file, when the file is small enough that the caller's
 * first read() would fetch it whole (the client's first window, vfs/pagecache.c RA_MIN),
 * so that read finds it filled: one round trip per file, not two (a data loader reading
 * 10,000 small files; the first `cat` of each). Only
 *  - for an open that may read (not O_WRONLY, not O_TRUNC): no read the program could not
 *    make (tests/test_unasked_reads.py);
 *  - into a memfd this very request made, with one FS thread (a class that is not
 *    thread_safe): then no other process holds it, nor can get it before this answer, and
 *    every write to the file comes as a request after this one, so nothing newer is
 *    written over (with threads, the fills' order is the clients' turn, vfs/cache_turn.c,
 *    which the server does not take); or, with -o workers, with the data the instance
 *    that opened the file read in the same call (workers.c, workers_open), into a memfd
 *    no other open gets until it is filled (page_caches.c, scache_open_to_fill);
 *  - when the FS gives exactly the size its getattr gave: anything else (an error, a
 *    short or long read) is left for the caller's own read to meet, as without this.
 * The memfd's state after the fill is noted as its known state (note_known_fresh, here; or
 * by the client as it receives it, where that failed), so the data counts as read from the
 * FS, not as owed to it. Returns 1 if the memfd is now the file whole: the
 * answer says so (cache 3), and the client's reads then look at nothing before the kernel's
 * (vfs/pagecache.c, pcache_whole), as for a cache it saw filled. */
#define FIRST_WINDOW (128u << 10)

static int fill_first_window(int fd, off_t size, int mnt, const char *path, uint64_t fh, int flags,
                             const struct open_window *w)
{
    /* size: the new memfd's, as page_caches.c made it (no fstat: no one else has it yet) */
    if ((flags & O_ACCMODE) == O_WRONLY || (flags & O_TRUNC) || size <= 0 || size > (off_t)FIRST_WINDOW)
        return 0;
    if (w && w->len >= 0)   /* brought by the open (a worker's) */
        return w->len == (ssize_t)size && pwrite(fd, w->data, (size_t)w->len, 0) == w->len;
    if (!serialise)
        return 0;
    if (fs_ops->read_to_fd)     /* the class's bytes into the memfd, no buffer between */
        return fs_ops->read_to_fd(mnt, path, fd, (size_t)size, 0, fh) == (ssize_t)size;
    char *buf = malloc((size_t)size);
    ssize_t n = buf ? fs_ops->read(mnt, path, buf, (size_t)size, 0, fh) : -1;
    int whole = n == (ssize_t)size && pwrite(fd, buf, (size_t)n, 0) == n;  /* a part (no memory): the rest stays holes */
    free(buf);
    return whole;
}

/* A new memfd's known state (vfs/pagecache.c, KNOWN_XATTR: what has reached the FS), noted
 * here as the memfd stands after its fill, with XATTR_CREATE as the client's own first note:
 * the client takes it from the answer (wire_known) instead of an fstat and an fsetxattr of
 * its own, a file's first open. A note already there (a client of a thread_safe class that
 * got the memfd meanwhile) stands, and the client notes as before; so does one without
 * xattrs (tmpfs before 6.6). 1 if noted. */
static int note_known_fresh(int fd, struct wire_known *kn)
{
    struct stat k;
    if (fstat(fd, &k) < 0)
        return 0;
    kn->size = k.st_size;
    kn->sec = k.st_mtim.tv_sec;
    kn->nsec = k.st_mtim.tv_nsec;
    return fsetxattr(fd, WIRE_KNOWN_XATTR, kn, sizeof *kn, XATTR_CREATE) == 0;
}

/* A cached open's page cache, brought along with its answer (the client would ask for it
 * next): its fd, its token in ans; -1 if there is none (the client then asks). fh and
 * flags: the open's, for fill_first_window; w: what the open brought (a worker's), or
 * NULL; st_stamp: the name's stamp read before st or w were asked (a new cache is made
 * from them only if the name has not changed through the mount since: page_caches.c).
 * A new one's known state is noted (*noted, *known: note_known_fresh). */
static int cache_along(struct client *cl, int mnt, const char *path, const struct stat *st, uint64_t st_stamp,
                       uint64_t fh, int flags, const struct open_window *w, int32_t *cache, uint64_t *cache_token,
                       int32_t *noted, struct wire_known *known)
{
    int fresh, whole = 0;
    off_t size = 0;
    uint64_t id = 0, token;
    /* a file just made: empty, as far as this open knows (the cache's own getattr says);
     * a worker's open: the attributes its instance gave right after it */
    int brought = w && w->len >= 0;
    if (w && w->have_st)
        st = &w->st;
    int fd = brought ? scache_open_to_fill(mnt, path, st, st_stamp, &fresh, &size, &id)
             : st    ? scache_open_sized(mnt, path, st, st_stamp, &fresh, &size, &id)
                     : scache_open(mnt, path, 0, NULL, &fresh, &size, &id);
    if (fd < 0) {
        if (brought)
            scache_filled(id);      /* (a new one that could not be opened: dropped) */
        return -1;
    }
    if (fresh == 2)
        w = NULL;       /* the data brought is older than the file: not put in (nor read here) */
    if (fresh)
        whole = fill_first_window(fd, size, mnt, path, fh, flags, w);
    *noted = fresh && note_known_fresh(fd, known);
    if (*noted)
        scache_noted(id, (off_t)known->size,
                     &(struct timespec){ .tv_sec = (time_t)known->sec, .tv_nsec = (long)known->nsec });
    if (brought && fresh)
        scache_filled(id);
    uint64_t file = cl->added;      /* hand_over() notes the last handle: keep the file's */
    int file_kind = cl->added_kind;
    if (hand_over(cl, W_CACHE_OPEN, mnt, path, 0, id, &token) < 0) {
        close(fd);
        cl->added = file;
        cl->added_kind = file_kind;
        return -1;
    }
    cl->added_cache = token;
    cl->added = file;
    cl->added_kind = file_kind;
    *cache = whole ? 3 : fresh ? 2 : 1;
    *cache_token = token;
    return fd;
}

/* May the caller open path for writing (with its own rights, as the file system decides)?
 * The page cache of a file is handed to a truncate only then. */
static int try_open_for_writing(int mnt, const char *path)
{
    struct open_result res = { .passthrough_fd = -1 };
    int r = fs_ops->open(mnt, path, O_WRONLY, &res);
    if (r < 0)
        return r;
    if (res.passthrough_fd >= 0)
        close(res.passthrough_fd);
    else
        fs_ops->release(mnt, path, O_WRONLY, res.fh);
    return 0;
}

/* One request of cl (cl->rq, cl->body): call the operation, keep the answer in cl. Runs
 * on the client's thread, or on the FS thread for a class that is not thread_safe. */
void do_op(struct client *cl)
{
    const struct wire_req *rq = cl->rq;
    char *path = cl->path, *path2 = cl->path2, *data = cl->data;
    const uint64_t *fhp = rq->has_fh ? &cl->h.fh : NULL;    /* the file system's own */
    uint64_t hfh = cl->h.fh;
    int mnt = rq->mnt;
    int64_t r;
    uint64_t fh = 0;
    void *out = NULL;
    size_t out_len = 0;
    int pass_fd = -1;
    char *small = cl->small;
    become(cl->as_uid, cl->as_gid, cl->as_ngroups, cl->as_groups, cl->as_caps);
    srv_current = cl;
    cl->added = 0;
    cl->added_cache = 0;
    /* a name that goes away: the client may keep it as missing (wire.h), from this stamp */
    int goes = rq->op == W_UNLINK || rq->op == W_RMDIR;
    struct coherence *t = __atomic_load_n(&coh, __ATOMIC_ACQUIRE);
    uint64_t before = goes && t ? coherence_stamp(t, mnt, path) : 0;
    int changed_as = rq->op;        /* what coherence hears this request did */
    /* a change of the file's size or mtime through the mount: counted while under way,
     * until its stamp has moved (page_caches.c, held_changed_behind) */
    int writes = rq->op == W_WRITE || rq->op == W_APPEND || rq->op == W_TRUNCATE || rq->op == W_UTIMENS ||
                 (rq->op == W_OPEN && (rq->a & O_TRUNC)) || (rq->op == W_CREATE_OPEN && (rq->b & O_TRUNC));
    if (writes)
        scache_writing(mnt, path, 1);
    switch (rq->op) {
    case W_GETATTR:
        r = fs_ops->getattr(mnt, path, fhp, (struct stat *)small);
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
            r = fs_ops->readlink(mnt, path, out, size);
        else if (rq->op == W_READ)
            r = fs_ops->read(mnt, path, out, size, (off_t)rq->b, hfh);
        else if (rq->op == W_GETXATTR)
            r = fs_ops->getxattr(mnt, path, path2, out, size);
        else
            r = fs_ops->listxattr(mnt, path, out, size);
        if (r > 0 && size > 0)
            out_len = (size_t)r < size ? (size_t)r : size;
        break;
    }
    case W_MKNOD: r = fs_ops->mknod(mnt, path, (mode_t)rq->a, (dev_t)rq->b); break;
    case W_MKDIR: r = fs_ops->mkdir(mnt, path, (mode_t)rq->a); break;
    case W_UNLINK:
        r = fs_ops->unlink(mnt, path);
        if (r == 0) {
            scache_renamed(mnt, NULL, path);
            sfifo_renamed(mnt, NULL, path);
        }
        break;
    case W_RMDIR: r = fs_ops->rmdir(mnt, path); break;
    case W_SYMLINK: r = fs_ops->symlink(mnt, path, path2); break;
    case W_RENAME:
        r = fs_ops->rename(mnt, path, path2);
        if (r == 0) {
            scache_renamed(mnt, path, path2);
            sfifo_renamed(mnt, path, path2);
            handles_renamed(mnt, path, path2);
        }
        break;
    case W_LINK: r = fs_ops->link(mnt, path, path2); break;
    case W_CHMOD: r = fs_ops->chmod(mnt, path, (mode_t)rq->a); break;
    case W_CHOWN: r = fs_ops->chown(mnt, path, (uid_t)rq->a, (gid_t)rq->b); break;
    case W_TRUNCATE:
        if (rq->b == 1 && scache_held(mnt, path))
            r = TRUNCATE_CACHED;    /* the client truncates it through the page cache */
        else
            r = fs_ops->truncate(mnt, path, (off_t)rq->a, fhp);
        break;
    case W_OPEN:
    case W_CREATE: {
        struct open_result res = { .passthrough_fd = -1 };
        struct open_window win = { .len = -1 };
        int flags = (int)rq->a;
        /* with -o workers, a cached open's attributes come with it, and a small file's data
         * when it has no page cache yet and may be read (fill_first_window) */
        int windowed = rq->op == W_OPEN && (rq->b & WANT_CACHE) && workers_count() > 1 &&
                       peer_may_share_cache(cl->as_uid, flags);
        size_t window = windowed && (flags & O_ACCMODE) != O_WRONLY && !(flags & O_TRUNC) &&
                        !scache_known(mnt, path) ? FIRST_WINDOW : 0;
        struct coherence *ot = __atomic_load_n(&coh, __ATOMIC_ACQUIRE);
        uint64_t open_stamp = ot ? coherence_stamp(ot, mnt, path) : 0;   /* before win.st is asked */
        if (windowed) {
            r = workers_open(mnt, path, flags, window, NULL, &res, &win);
            if (r == -EMFILE && scache_shed() > 0) {
                free(win.buf);
                r = workers_open(mnt, path, flags, window, NULL, &res, &win);
            }
        } else {
            r = rq->op == W_OPEN ? fs_open(mnt, path, flags, &res)
                                 : fs_create(mnt, path, (mode_t)rq->a, (int)rq->b, &res);
        }
        pass_fd = r >= 0 ? res.passthrough_fd : -1;
        if (r >= 0 && pass_fd < 0)
            r = hand_over(cl, W_OPEN, mnt, path, rq->op == W_OPEN ? (int)rq->a : (int)rq->b, res.fh, &fh);
        if (r >= 0 && pass_fd >= 0 && rq->op == W_OPEN && (rq->b & WANT_LOWER))
            out_len = lower_name(pass_fd, (char **)&out);
        if (r >= 0)
            r = res.open_flags;     /* the result of a successful open: its OPEN_* flags */
        if (r >= 0 && pass_fd < 0 && rq->op == W_OPEN && (rq->b & WANT_CACHE) &&
            !(res.open_flags & OPEN_DIRECT_IO) && peer_may_share_cache(cl->as_uid, (int)rq->a)) {
            /* a cached open: its page cache comes along (the client would ask for it next) */
            _Static_assert(sizeof(struct wire_open_cache) <= sizeof cl->small, "fits the small answer");
            struct wire_open_cache *oc = memset(small, 0, sizeof *oc);
            if ((pass_fd = cache_along(cl, mnt, path, NULL, open_stamp, res.fh, flags, windowed ? &win : NULL,
                                       &oc->cache, &oc->cache_token, &oc->noted, &oc->known)) >= 0) {
                out = oc;
                out_len = sizeof *oc;
                r |= OPEN_CACHE_BROUGHT;
            }
        }
        free(win.buf);
        break;
    }
    case W_WRITE: r = fs_ops->write(mnt, path, data, rq->data_len, (off_t)rq->b, hfh); break;
    case W_CACHE_OPEN: {
        /* only for a caller that may open the file: its open's handle says so, or (a
         * truncate of a file others hold) an open for writing tried now as the caller */
        int hflags = O_WRONLY;
        r = rq->has_fh ? (handle_names(mnt, rq->fh, &cl->line, path, &hflags) ? 0 : -ESTALE) : try_open_for_writing(mnt, path);
        if (r == 0 && !peer_may_share_cache(cl->as_uid, hflags))
            r = -EPERM;     /* the client makes a cache of its own */
        int fresh;
        uint64_t id;
        if (r == 0 && (r = scache_open(mnt, path, (off_t)rq->a, fhp, &fresh, NULL, &id)) >= 0) {
            pass_fd = (int)r;
            r = hand_over(cl, W_CACHE_OPEN, mnt, path, 0, id, &fh);
            if (r == 0)
                r = fresh;
            else {
                close(pass_fd);
                pass_fd = -1;
            }
        }
        break;
    }
    case W_CACHE_CLOSE: {
        handle_put(&cl->href);
        struct handle *h = handle_take(W_CACHE_OPEN, mnt, rq->fh, &cl->line);
        if (h)
            handle_release(h);
        r = 0;
        break;
    }
    case W_WRITTEN:
        /* a notice that changes what every process's caches trust: only from a process
         * that may write the file (with default_permissions, permissions.c checked it) */
        r = policy.default_permissions || !fs_ops->access ? 0 : fs_ops->access(mnt, path, W_OK);
        if (r == 0)
            coh_written(mnt, path);
        break;
    case W_PASS: case W_CLAIM: {
        /* the look into the caller's fds (pidfd_getfd, kcmp: ptrace's rules) is the
         * server's own, as the FIFO directory is: another user's process is not the
         * caller's to look into, but is the launcher's */
        struct wire_claim *ans = rq->op == W_CLAIM ? malloc(sizeof *ans + WIRE_PATH_MAX) : NULL;
        if (rq->op == W_CLAIM && ans == NULL) {
            r = -ENOMEM;
            break;
        }
        become(own_uid, own_gid, 0, NULL, ~0ULL);
        if (rq->op == W_PASS)
            r = cl->href ? handle_pass(cl, cl->href, (int)rq->a) : -EBADF;
        else
            r = handle_claim(cl, (int)rq->a, ans, &fh, (char *)(ans + 1));
        become(cl->as_uid, cl->as_gid, cl->as_ngroups, cl->as_groups, cl->as_caps);
        if (rq->op == W_CLAIM && r == 0) {
            out = ans;
            out_len = sizeof *ans + strlen((char *)(ans + 1));
        } else {
            free(ans);
        }
        break;
    }
    case W_MOVED:
        /* a notice that only makes caches forget (every process's kept directories of a
         * backing tree, vfs/backing_dirs.c): never stale, so anyone the door let in */
        coh_moved(mnt, path, path2);
        r = 0;
        break;
    case W_APPEND: {
        /* one lock for every client's appends, whatever the class's threading */
        static pthread_mutex_t append_lock = PTHREAD_MUTEX_INITIALIZER;
        off_t at = 0;
        pthread_mutex_lock(&append_lock);
        r = fs_ops->append(mnt, path, data, rq->data_len, hfh, &at);
        pthread_mutex_unlock(&append_lock);
        fh = (uint64_t)at;
        break;
    }
    case W_AFTER:
        /* the class told of an operation of a backing tree done past it (vfs/backing.c),
         * as the caller, like any method: getattr's attributes come back adjusted; a
         * change's answer is 0 whatever the class did (the operation is done) */
        changed_as = 0;
        if (rq->a == AFTER_GETATTR) {
            memcpy(small, data, sizeof(struct stat));
            r = fs_ops->after ? fs_ops->after(mnt, AFTER_GETATTR, path, NULL, 0, (struct stat *)small) : 0;
            if (r >= 0) { out = small; out_len = sizeof(struct stat); }
        } else {
            r = fs_ops->after ? fs_ops->after(mnt, (unsigned)rq->a, path, rq->path2_len ? path2 : NULL,
                                              (int)rq->b, NULL) : 0;
            r = 0;
        }
        break;
    case W_STATFS:
        r = fs_ops->statfs(mnt, path, (struct statvfs *)small);
        if (r >= 0) { out = small; out_len = sizeof(struct statvfs); }
        break;
    case W_FLUSH: r = fs_ops->flush(mnt, path, hfh); break;
    case W_RELEASE: {
        handle_put(&cl->href);      /* its own use: the release waits for the others' */
        int kept;       /* a handle whose fd went over a unix socket lives on (handles.c) */
        struct handle *h = handle_let_go(mnt, rq->fh, &cl->line, &kept);
        if (h)
            handle_quiesce(h);
        r = h ? fs_ops->release(mnt, path, h->flags, h->fh) : kept ? 0 : -EBADF;   /* flags: the open's */
        if (h)
            handle_free(h);
        if (rq->c == RELEASE_CACHE_TOO) {
            /* the process's last hold on the file's page cache went with it: as W_CACHE_CLOSE,
             * by a token only a process that was given it can name */
            struct handle *ch = handle_take(W_CACHE_OPEN, mnt, (uint64_t)rq->b, &cl->line);
            if (ch)
                handle_release(ch);
        }
        break;
    }
    case W_FSYNC: r = fs_ops->fsync(mnt, path, (int)rq->a, hfh); break;
    case W_OPENDIR: {
        uint64_t dfh = 0;
        r = fs_ops->opendir(mnt, path, &dfh);
        if (r >= 0)
            r = hand_over(cl, W_OPENDIR, mnt, path, 0, dfh, &fh);
        break;
    }
    case W_READDIR: {
        struct dirlist l = { 0 };
        r = fs_ops->readdir(mnt, path, hfh, &l);
        /* the entries' attributes are a lookup of each: with default_permissions only for
         * a caller who may search the directory (the opendir checked those above it) */
        int plus = r >= 0 && l.attrs && (!policy.default_permissions || perm_may_search_dir(cl, mnt, path));
        if (r >= 0) {
            out_len = l.n * sizeof(struct wire_dirent) + l.names_len;
            for (size_t i = 0; plus && i < l.n; i++)
                out_len += l.ents[i].plus ? sizeof(struct stat) : 0;
            char *p = out = malloc(out_len ? out_len : 1);
            if (p == NULL) {
                r = -ENOMEM;
                out_len = 0;
            }
            for (size_t i = 0; p && i < l.n; i++) {
                struct wire_dirent d = { .ino = l.ents[i].ino, .type = l.ents[i].type, .namelen = l.ents[i].namelen };
                d.flags = plus && l.ents[i].plus ? WIRE_DIRENT_ATTRS : 0;
                memcpy(p, &d, sizeof d);
                p += sizeof d;
                if (d.flags & WIRE_DIRENT_ATTRS) {
                    memcpy(p, &l.attrs[i], sizeof(struct stat));
                    p += sizeof(struct stat);
                }
                memcpy(p, l.names + l.ents[i].name_off, d.namelen);
                p += d.namelen;
            }
            if (p)
                out_len = (size_t)(p - (char *)out);
        }
        dirlist_free(&l);
        break;
    }
    case W_RELEASEDIR: {
        handle_put(&cl->href);
        struct handle *h = handle_take(W_OPENDIR, mnt, rq->fh, &cl->line);
        if (h)
            handle_quiesce(h);
        r = h ? fs_ops->releasedir(mnt, path, h->fh) : -EBADF;
        if (h)
            handle_free(h);
        break;
    }
    case W_ACCESS: r = fs_ops->access(mnt, path, (int)rq->a); break;
    case W_UTIMENS: {
        struct timespec ts[2];      /* copied out: the body has no alignment to speak of */
        if (rq->data_len == sizeof ts)
            memcpy(ts, data, sizeof ts);
        r = rq->data_len == sizeof ts ? fs_ops->utimens(mnt, path, ts)
            : rq->data_len == 0 ? fs_ops->utimens(mnt, path, NULL)    /* "now" */
                                : -EINVAL;
        break;
    }
    case W_SETXATTR: r = fs_ops->setxattr(mnt, path, path2, data, rq->data_len, (int)rq->a); break;
    case W_REMOVEXATTR: r = fs_ops->removexattr(mnt, path, path2); break;
    case W_FIFO: {
        /* owner and mode as the FS gives them now (not as the client says) */
        struct stat *st = (struct stat *)small;
        char *real = malloc(128);
        r = real ? fs_ops->getattr(mnt, path, NULL, st) : -ENOMEM;
        if (r >= 0 && !S_ISFIFO(st->st_mode))
            r = -ENXIO;
        if (r >= 0) {
            /* the private directory is ours */
            r = become(own_uid, own_gid, 0, NULL, ~0ULL) < 0 ? -EPERM
                : sfifo_get(mnt, path, st->st_mode, st->st_uid, st->st_gid, real, 128);
            become(cl->as_uid, cl->as_gid, cl->as_ngroups, cl->as_groups, cl->as_caps);
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
        struct open_window win = { .len = -1 };
        int windowed = 0;
        changed_as = 0;
        struct coherence *ct = __atomic_load_n(&coh, __ATOMIC_ACQUIRE);
        ans->stamp = ct ? coherence_stamp(ct, mnt, path) : 0;
        r = fs_ops->getattr(mnt, path, NULL, &ans->st);
        if (r == 0 && ((flags & O_EXCL) || !S_ISREG(ans->st.st_mode))) {
            ans->outcome = CO_EXISTS;
            break;
        }
        if (r == 0) {
            ans->outcome = CO_OPENED;
            changed_as = W_OPEN;
            flags &= ~(O_CREAT | O_EXCL | O_NOCTTY);
            /* with -o workers, a small file's data comes with it (as for W_OPEN) */
            windowed = (rq->c & WANT_CACHE) && workers_count() > 1 && peer_may_share_cache(cl->as_uid, flags) &&
                       (flags & O_ACCMODE) != O_WRONLY && !(flags & O_TRUNC) && !scache_known(mnt, path);
            r = windowed ? workers_open(mnt, path, flags, FIRST_WINDOW, &ans->st, &res, &win)
                         : fs_open(mnt, path, flags, &res);
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
                dir_ok = dir && fs_ops->getattr(mnt, dir, NULL, &dst) == 0 && S_ISDIR(dst.st_mode);
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
            r = fs_create(mnt, path, (mode_t)rq->a, flags, &res);
        } else {
            r = 0;
            ans->outcome = CO_ASK;      /* its own lookup gives the client its own error */
            break;
        }
        pass_fd = r >= 0 ? res.passthrough_fd : -1;
        if (r >= 0 && pass_fd < 0)
            r = hand_over(cl, W_OPEN, mnt, path, flags, res.fh, &fh);
        if (r >= 0 && pass_fd < 0 && (rq->c & WANT_CACHE) && !(res.open_flags & OPEN_DIRECT_IO) &&
            peer_may_share_cache(cl->as_uid, flags))
            pass_fd = cache_along(cl, mnt, path, ans->outcome == CO_OPENED ? &ans->st : NULL, ans->stamp, res.fh,
                                  flags, windowed ? &win : NULL, &ans->cache, &ans->cache_token, &ans->noted,
                                  &ans->known);
        char *lower;
        size_t ll;
        if (r >= 0 && pass_fd >= 0 && !ans->cache && ans->outcome == CO_OPENED && (rq->c & WANT_LOWER) &&
            (ll = lower_name(pass_fd, &lower)) > 0) {
            char *both = realloc(ans, sizeof *ans + ll);
            if (both) {
                memcpy(both + sizeof *ans, lower, ll);
                out = both;
                out_len = sizeof *ans + ll;
            }
            free(lower);
        }
        free(win.buf);
        if (r >= 0)
            r = res.open_flags;
        break;
    }
    case W_COHERENCE:
        pass_fd = coh_reader_fd();
        r = pass_fd < 0 ? -ENOSYS : 0;
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
        r = fs_ops->ioctl ? fs_ops->ioctl(mnt, path, cmd, (void *)(intptr_t)rq->b, hfh, (unsigned int)rq->c,
                                    size ? out : NULL)
                       : -ENOTTY;
        if (r >= 0)
            out_len = size;
        break;
    }
    case W_LOCK:
        if (rq->b == 1) {
            r = fs_ops->flock ? fs_ops->flock(mnt, path, hfh, (int)rq->a) : -ENOSYS;
            if (r >= 0 && rq->a != LOCK_UN && cl->href)
                __atomic_or_fetch(&cl->href->locked, 2, __ATOMIC_ACQ_REL);
        } else {
            /* checked (request.c); l_pid is the caller's as the kernel knows it */
            struct flock *fl = (struct flock *)small;
            memcpy(fl, data, sizeof *fl);
            fl->l_pid = cl->pid;
            r = fs_ops->lock ? fs_ops->lock(mnt, path, hfh, (int)rq->a, fl) : -ENOSYS;
            if (r >= 0 && rq->a == F_GETLK) {
                out = small;
                out_len = sizeof *fl;
            } else if (r >= 0 && fl->l_type != F_UNLCK && cl->href) {
                __atomic_or_fetch(&cl->href->locked, 1, __ATOMIC_ACQ_REL);
            }
        }
        break;
    default: r = -ENOSYS;
    }
    uint64_t after = coh_changed(rq, changed_as, path, path2, r, before);
    if (writes)
        scache_writing(mnt, path, -1);
    if (goes)
        fh = after;
    srv_current = NULL;
    cl->r = r;
    cl->fh = fh;
    cl->out = out;
    cl->out_len = out_len;
    cl->pass_fd = pass_fd;
}

