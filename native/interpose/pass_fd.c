/* A cached fd sent to another process over a Unix socket (SCM_RIGHTS): the receiver gets
 * the memfd's open file description with no page-cache state of ours (another process, a
 * program not preloaded, or this one under a new number no wrapper knows), so its reads
 * would reach the holes. Every readable cached fd in a message is filled whole before the
 * message leaves (docs/cache.md, every way to read a cache). A fill that fails fails the
 * send with its errno: nothing is sent that could read zeros. */
#include "../ldpfuse.h"
#include <sys/socket.h>

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
            if (v && v->kind == VF_FILE && v->pc && (v->flags & O_ACCMODE) != O_WRONLY &&
                pcache_fill(v, 0, 0, 1) < 0)
                return -1;
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
