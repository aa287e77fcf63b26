/*
 * The file system process of the shared mode: answers backend/wire.h requests from every
 * process of the command tree by calling the embedded backend's operations, the same code
 * (and so the same conversions and error rules) as the embedded mode uses in-process.
 *
 * One thread per client connection; the user's Operations object is called by one thread
 * at a time unless its class sets `thread_safe = True` (as fusepy's nothreads, inverted).
 * Python-facing entry points: _embedded.serve_init() builds the FS objects;
 * _embedded.serve_start(listen_fd, thread_safe) starts accepting.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "backend.h"
#include "wire.h"
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <sys/mman.h>
#include <unistd.h>

struct backend_ops *ldpfuse_backend_embedded_init(const struct core_api *c, int host_owns_python, char *err,
                                                  size_t errsize);

static struct backend_ops *ops;

/* ---- the page caches of cached files, one memfd per file for every client (docs/cache.md):
 * clients fill and write them themselves; the server only hands them out and keeps each
 * alive while a client holds it. */
struct scache {
    struct scache *next;
    int mnt, refs, mfd;
    char *path;
};
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

static void scache_drop(struct scache **p)
{
    struct scache *s = *p;
    *p = s->next;
    close(s->mfd);
    free(s->path);
    free(s);
}

/* An fd of the file's memfd (a new open file description) for a client; -errno. */
static int scache_open(int mnt, const char *path, off_t size, int *fresh)
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
        s->next = scaches;
        scaches = s;
        *fresh = 1;
    }
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", s->mfd);
    int fd = open(proc, O_RDWR | O_CLOEXEC);
    int r = fd >= 0 ? fd : -errno;
    if (fd >= 0)
        s->refs++;
    else if (s->refs == 0)
        scache_drop(scache_find(mnt, path));
    pthread_mutex_unlock(&scache_lock);
    return r;
}

static void scache_close(int mnt, const char *path)
{
    pthread_mutex_lock(&scache_lock);
    struct scache **p = scache_find(mnt, path);
    if (*p && --(*p)->refs <= 0)
        scache_drop(p);
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
static __thread const struct wire_req *current;     /* the request being answered */
static pthread_mutex_t fs_lock = PTHREAD_MUTEX_INITIALIZER;
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

static int send_resp(int fd, int64_t result, uint64_t fh, const void *data, size_t len, int pass_fd)
{
    struct wire_resp resp = { .len = (uint32_t)len, .has_fd = pass_fd >= 0, .result = result, .fh = fh };
    struct iovec iov[2] = { { &resp, sizeof resp }, { (void *)data, len } };
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct msghdr mh = { .msg_iov = iov, .msg_iovlen = len ? 2 : 1 };
    if (pass_fd >= 0) {
        memset(cbuf, 0, sizeof cbuf);
        mh.msg_control = cbuf;
        mh.msg_controllen = sizeof cbuf;
        struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int));
        memcpy(CMSG_DATA(c), &pass_fd, sizeof(int));
    }
    size_t total = sizeof resp + len;
    size_t sent = 0;
    while (sent < total) {
        ssize_t w = sendmsg(fd, &mh, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return -1;
        }
        sent += (size_t)w;
        if (sent >= total)
            break;
        /* the rest goes without the fd */
        mh.msg_control = NULL;
        mh.msg_controllen = 0;
        size_t skip = (size_t)w;
        while (mh.msg_iovlen > 0 && skip >= mh.msg_iov->iov_len) {
            skip -= mh.msg_iov->iov_len;
            mh.msg_iov++;
            mh.msg_iovlen--;
        }
        mh.msg_iov->iov_base = (char *)mh.msg_iov->iov_base + skip;
        mh.msg_iov->iov_len -= skip;
    }
    return 0;
}

/* One request: call the operation, answer. Returns -1 when the connection is broken. */
static int serve_one(int fd, const struct wire_req *rq, char *body)
{
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
    char small[sizeof(struct stat) > sizeof(struct statvfs) ? sizeof(struct stat) : sizeof(struct statvfs)];
    if (serialise)
        pthread_mutex_lock(&fs_lock);
    current = rq;
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
        if (r == 0)
            scache_renamed(mnt, NULL, path);
        break;
    case W_RMDIR: r = ops->rmdir(mnt, path); break;
    case W_SYMLINK: r = ops->symlink(mnt, path, path2); break;
    case W_RENAME:
        r = ops->rename(mnt, path, path2);
        if (r == 0)
            scache_renamed(mnt, path, path2);
        break;
    case W_LINK: r = ops->link(mnt, path, path2); break;
    case W_CHMOD: r = ops->chmod(mnt, path, (mode_t)rq->a); break;
    case W_CHOWN: r = ops->chown(mnt, path, (uid_t)rq->a, (gid_t)rq->b); break;
    case W_TRUNCATE: r = ops->truncate(mnt, path, (off_t)rq->a, fhp); break;
    case W_OPEN:
    case W_CREATE: {
        struct open_result res = { .passthrough_fd = -1 };
        r = rq->op == W_OPEN ? ops->open(mnt, path, (int)rq->a, &res)
                             : ops->create(mnt, path, (mode_t)rq->a, (int)rq->b, &res);
        fh = res.fh;
        pass_fd = r >= 0 ? res.passthrough_fd : -1;
        if (r >= 0)
            r = res.open_flags;     /* the result of a successful open: its OPEN_* flags */
        break;
    }
    case W_WRITE: r = ops->write(mnt, path, data, rq->data_len, (off_t)rq->b, rq->fh); break;
    case W_CACHE_OPEN: {
        int fresh;
        r = scache_open(mnt, path, (off_t)rq->a, &fresh);
        if (r >= 0) {
            pass_fd = (int)r;
            fh = (uint64_t)fresh;
            r = 0;
        }
        break;
    }
    case W_CACHE_CLOSE: scache_close(mnt, path); r = 0; break;
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
    case W_RELEASE: r = ops->release(mnt, path, (int)rq->a, rq->fh); break;
    case W_FSYNC: r = ops->fsync(mnt, path, (int)rq->a, rq->fh); break;
    case W_OPENDIR: r = ops->opendir(mnt, path, &fh); break;
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
    case W_RELEASEDIR: r = ops->releasedir(mnt, path, rq->fh); break;
    case W_ACCESS: r = ops->access(mnt, path, (int)rq->a); break;
    case W_UTIMENS:
        r = rq->data_len == 2 * sizeof(struct timespec) ? ops->utimens(mnt, path, (const struct timespec *)data)
                                                         : -EINVAL;
        break;
    case W_SETXATTR: r = ops->setxattr(mnt, path, path2, data, rq->data_len, (int)rq->a); break;
    case W_REMOVEXATTR: r = ops->removexattr(mnt, path, path2); break;
    default: r = -ENOSYS;
    }
    current = NULL;
    if (serialise)
        pthread_mutex_unlock(&fs_lock);
    int ret = send_resp(fd, r, fh, out, out_len, pass_fd);
    if (pass_fd >= 0)
        close(pass_fd);         /* the client has its own now */
    if (out != small)
        free(out);
    return ret;
}

static void *conn_thread(void *arg)
{
    int fd = (int)(intptr_t)arg;
    for (;;) {
        struct wire_req rq;
        if (wire_read_all(fd, &rq, sizeof rq) < 0)
            break;
        if ((uint64_t)rq.path_len + rq.path2_len + rq.data_len != rq.len || rq.len > (1u << 30))
            break;
        char *body = malloc((size_t)rq.len + 2);
        if (body == NULL || wire_read_all(fd, body, rq.len) < 0 || serve_one(fd, &rq, body) < 0) {
            free(body);
            break;
        }
        free(body);
    }
    close(fd);
    return NULL;
}

static void *accept_thread(void *arg)
{
    int lfd = (int)(intptr_t)arg;
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            break;
        }
        pthread_t t;
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
        if (pthread_create(&t, &at, conn_thread, (void *)(intptr_t)fd) != 0)
            close(fd);
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
    return Py_BuildValue("(III)", current->uid, current->gid, current->pid);
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
    pthread_t t;
    if (pthread_create(&t, NULL, accept_thread, (void *)(intptr_t)lfd) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return NULL;
    }
    pthread_detach(t);
    Py_RETURN_NONE;
}
