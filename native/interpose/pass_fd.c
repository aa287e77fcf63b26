/* Served fds sent to another process over a Unix socket (SCM_RIGHTS).
 *
 * Sending: the receiver gets the memfd's open file description with no page-cache state
 * of ours (another process, a program not preloaded, or this one under a new number no
 * wrapper knows), so its reads would reach the holes. Every readable cached fd in a
 * message is filled whole before the message leaves (docs/cache.md, every way to read a
 * cache). A fill that fails fails the send with its errno: nothing is sent that could
 * read zeros. With the shared server, each served file's fd is also noted there (the
 * backend's pass: the server keeps a reference to that open file description) before the
 * send, for the receiver to claim.
 *
 * Receiving (recvmsg, recvmmsg): an fd that is a page cache of ours (/memfd:ldpfuse:/PATH)
 * would otherwise be a plain memfd here, whose writes never reach the file system. With
 * the shared server, the server tells which open file it is, if the kernel says the fd is
 * the very open file description a process passed (kcmp), and lets this process (and
 * those below it) use that handle, as the kernel lets a receiver use the file: the fd
 * becomes a served one, whose last close here tells the server (W_RELEASE: the handle
 * lives on while its opener or another claimant holds it, server/handles.c). A token
 * learnt any other way still opens nothing. Without a
 * server (the embedded mode), the fd is taken as an exec'd one is (vfs_adopt: the file
 * with its path, a handle of this process's own opened at its first use) if the memfd is
 * of this process's user (made by a process with its rights) and there is one mount (its
 * name holds no mount). Anything else is left a plain fd, as before. */
#include "../ldpfuse.h"
#include <sys/socket.h>

/* What a cached fd of a file the FS serves is, for the server, before it leaves. */
static void pass_noted(int fd, struct vfile *v)
{
    struct backend_ops *be = backend_get();
    if (be == NULL || be->pass == NULL || vfile_ensure_fh(v) < 0)
        return;
    guard_enter();
    be->pass(v->mnt, v->fh, fd);    /* refused: the receiver's claim finds nothing */
    guard_leave();
}

static int fill_rights(const struct msghdr *m)
{
    if (m == NULL || m->msg_control == NULL || m->msg_controllen < sizeof(struct cmsghdr))
        return 0;
    for (struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)m); c; c = CMSG_NXTHDR((struct msghdr *)m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        const int *fds = (const int *)CMSG_DATA(c);
        for (size_t i = 0; i < n; i++) {
            struct vfile *v = vfd(fds[i]);
            if (v == NULL || v->kind != VF_FILE || v->pc == NULL)
                continue;
            if ((v->flags & O_ACCMODE) != O_WRONLY && pcache_fill(v, 0, 0, 1) < 0)
                return -1;
            pass_noted(fds[i], v);
        }
    }
    return 0;
}

ssize_t sendmsg(int fd, const struct msghdr *m, int flags)
{
    if (UNLIKELY(__atomic_load_n(&ldp_nvfds, __ATOMIC_RELAXED) != 0) && !ldp_guard && fill_rights(m) < 0)
        return -1;
    return REAL(sendmsg)(fd, m, flags);
}

int sendmmsg(int fd, struct mmsghdr *v, unsigned n, int flags)
{
    if (UNLIKELY(__atomic_load_n(&ldp_nvfds, __ATOMIC_RELAXED) != 0) && !ldp_guard && v)
        for (unsigned i = 0; i < n && i < 1024; i++)
            if (fill_rights(&v[i].msg_hdr) < 0)
                return -1;
    return REAL(sendmmsg)(fd, v, n, flags);
}

/* fd, just received: a page cache of ours? Then a served fd of this process. */
static void take_received(int fd)
{
    char link[64], target[40];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = REAL(readlink)(link, target, sizeof target - 1);
    /* a page cache's name is its path (the server's table of counters is ldpfuse:coherence) */
    if (n < 16 || memcmp(target, "/memfd:ldpfuse:/", 16) != 0 || fdtable_get(fd) != NULL)
        return;
    struct backend_ops *be = backend_get();
    if (be == NULL)
        return;
    struct vpath vp;
    int mnt = 0, flags = 0;
    uint64_t fh;
    if (be->claim) {
        char path[sizeof vp.path];
        guard_enter();
        int r = be->claim(fd, &mnt, &flags, path, sizeof path, &fh);
        guard_leave();
        if (r < 0 || mnt < 0 || mnt >= ldp_nmounts) {
            static int warned;
            if (r != -EIO && !__atomic_exchange_n(&warned, 1, __ATOMIC_RELAXED))
                ldp_log(LOG_WARNING, "fd %d came over a unix socket from a page cache, but no open file the "
                        "server knows (its sender let go of it over 10 s before this process received it?): writes "
                        "through it do not reach the file system (logged once)", fd);
            return;
        }
        vpath_begin(&vp, mnt);
        memcpy(vp.path, path, sizeof path);
        vfs_adopt(fd, VF_FILE, &vp, flags, &fh);
        return;
    }
    /* no server: the memfd's name is "ldpfuse:PATH" (vfs/pagecache.c) */
    struct stat st;
    int fl = REAL(fcntl)(fd, F_GETFL);
    if (ldp_nmounts != 1 || fl < 0 || REAL(fstat)(fd, &st) < 0 || st.st_uid != geteuid())
        return;
    char name[sizeof vp.path + 64];
    n = REAL(readlink)(link, name, sizeof name - 1);
    if (n <= 16 || (size_t)n >= sizeof name - 1)
        return;
    name[n] = '\0';
    if (n > 10 && strcmp(name + n - 10, " (deleted)") == 0)
        name[n - 10] = '\0';
    if (name[15] != '/' || strlen(name + 15) >= sizeof vp.path)
        return;
    vpath_begin(&vp, 0);
    strcpy(vp.path, name + 15);
    vfs_adopt(fd, VF_FILE, &vp, fl & (O_ACCMODE | O_APPEND), NULL);
}

static void take_rights(const struct msghdr *m)
{
    if (m->msg_control == NULL || m->msg_controllen < sizeof(struct cmsghdr))
        return;
    for (struct cmsghdr *c = CMSG_FIRSTHDR((struct msghdr *)m); c; c = CMSG_NXTHDR((struct msghdr *)m, c)) {
        if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS)
            continue;
        size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        const int *fds = (const int *)CMSG_DATA(c);
        for (size_t i = 0; i < n; i++) {
            int e = errno;
            take_received(fds[i]);
            errno = e;
        }
    }
}

ssize_t recvmsg(int fd, struct msghdr *m, int flags)
{
    ssize_t r = REAL(recvmsg)(fd, m, flags);
    if (UNLIKELY(r >= 0 && m && m->msg_controllen != 0) && ldp_nmounts > 0 && !ldp_guard)
        take_rights(m);
    return r;
}

int recvmmsg(int fd, struct mmsghdr *v, unsigned n, int flags, struct timespec *timeout)
{
    int r = REAL(recvmmsg)(fd, v, n, flags, timeout);
    for (int i = 0; i < r && ldp_nmounts > 0 && !ldp_guard; i++)
        if (UNLIKELY(v[i].msg_hdr.msg_controllen != 0))
            take_rights(&v[i].msg_hdr);
    return r;
}
