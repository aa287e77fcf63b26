/* Unix sockets bound to a path in a mount. A file system has no sockets to hand the kernel,
 * so the name in the mount is a node of type S_IFSOCK made with the FS's mknod (what stat,
 * ls and unlink see), and the socket itself is bound to a stand-in path outside the mount,
 * named by a hash of the mount point and the path: every process that connects to the name
 * in the mount reaches the same stand-in. The stand-ins live in the command's private
 * directory (run_dir.h: made by the launcher for the run, never a fixed name another user
 * could make first), so only the command's processes can connect. */
#include "../ldpfuse.h"
#include "../run_dir.h"
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/un.h>
#include <unistd.h>

/* Is addr a Unix socket path inside a mount? Fills vp and the stand-in address. */
static int stand_in(const struct sockaddr *addr, socklen_t len, struct vpath *vp,
                    struct sockaddr_un *out)
{
    if (addr == NULL || len <= offsetof(struct sockaddr_un, sun_path) || addr->sa_family != AF_UNIX)
        return 0;
    const struct sockaddr_un *un = (const struct sockaddr_un *)addr;
    size_t max = len - offsetof(struct sockaddr_un, sun_path);
    if (max > sizeof un->sun_path)
        max = sizeof un->sun_path;
    char path[sizeof un->sun_path + 1];
    size_t n = strnlen(un->sun_path, max);
    if (n == 0)
        return 0;               /* the abstract namespace */
    memcpy(path, un->sun_path, n);
    path[n] = '\0';
    const char *p = path;
    if (!vfs_lookup(AT_FDCWD, &p, vp))
        return 0;
    char full[VPATH_MAX];
    vfs_fullpath(vp, full, sizeof full);
    uint64_t h = 1469598103934665603ULL;    /* FNV-1a */
    for (const char *c = full; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ULL;
    memset(out, 0, sizeof *out);
    out->sun_family = AF_UNIX;
    char dir[PATH_MAX];
    int saved = errno;
    if (run_dir_get(dir, sizeof dir) < 0) {
        errno = saved;
        return 0;       /* nowhere private to put it: the name stays the program's */
    }
    errno = saved;
    int w = snprintf(out->sun_path, sizeof out->sun_path, "%s/s-%016llx", dir, (unsigned long long)h);
    return w > 0 && (size_t)w < sizeof out->sun_path;
}

int bind(int fd, const struct sockaddr *addr, socklen_t len)
{
    struct vpath vp;
    struct sockaddr_un su;
    if (LIKELY(ldp_nmounts == 0) || ldp_guard || !stand_in(addr, len, &vp, &su))
        return REAL(bind)(fd, addr, len);
    /* the name is taken in the mount first: EADDRINUSE if it exists, as natively */
    if (vfs_mknod(&vp, S_IFSOCK | (0777 & ~ldp_umask), 0) < 0) {
        if (errno == EEXIST)
            errno = EADDRINUSE;
        return -1;
    }
    int saved = errno;
    REAL(unlink)(su.sun_path);     /* a stand-in left by a name since removed */
    errno = saved;
    if (REAL(bind)(fd, (struct sockaddr *)&su, sizeof su) < 0) {
        saved = errno;
        vfs_unlink(&vp);
        errno = saved;
        return -1;
    }
    return 0;
}

int connect(int fd, const struct sockaddr *addr, socklen_t len)
{
    struct vpath vp;
    struct sockaddr_un su;
    if (LIKELY(ldp_nmounts == 0) || ldp_guard || !stand_in(addr, len, &vp, &su))
        return REAL(connect)(fd, addr, len);
    struct stat st;
    if (vfs_getattr(&vp, 1, &st) < 0)
        return -1;
    if (!S_ISSOCK(st.st_mode)) {
        errno = ECONNREFUSED;
        return -1;
    }
    return REAL(connect)(fd, (struct sockaddr *)&su, sizeof su);
}
