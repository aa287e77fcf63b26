/*
 * flock, fcntl and lockf locks on files the file system serves itself. Where every process
 * of the command opens one kernel file for the file, the kernel's locks already are the
 * file system's: a passthrough fd is the lower file, and a cached file in the shared mode
 * is an open of the one page cache memfd the server hands to every process (docs/cache.md),
 * so locks conflict between processes, go with the close of any fd (POSIX) or of the last
 * fd of the open file description (flock, OFD locks), and with the process.
 *
 * Where it does not (a cached file in the embedded mode, whose processes each have their
 * own page cache; a direct_io file, whose fd is no one else's), the locks are taken on a
 * stand-in instead: a file per (mount point, path) in the command's private directory
 * (run_dir.h), opened once per open file description (vfile), so that the kernel applies
 * its own rules between every process of the command: conflicts, l_pid in F_GETLK,
 * deadlock detection, EINTR for a wait a signal interrupts, release at close and exit.
 */
#include "../ldpfuse.h"
#include "../run_dir.h"
#include <stdio.h>

int vfs_lock_standin_needed(const struct vfile *v)
{
    if (v->kind != VF_FILE)
        return 0;
    if (v->direct_io)
        return 1;
    struct backend_ops *be = backend_get();
    return be == NULL || be->cache_open == NULL;
}

/* The stand-in's fd for this open file description, opened at its first lock. */
int vfs_lock_fd(struct vfile *v)
{
    int fd = __atomic_load_n(&v->lock_fd1, __ATOMIC_ACQUIRE) - 1;
    if (fd >= 0)
        return fd;
    char dir[PATH_MAX], name[PATH_MAX + 64];
    if (run_dir_get(dir, sizeof dir - 64) < 0) {
        errno = ENOLCK;
        return -1;
    }
    uint64_t h = fnv1a(fnv1a(fnv1a_seed(0), ldp_mounts[v->mnt].point, NULL), v->path, NULL);
    snprintf(name, sizeof name, "%s/lock-%016llx", dir, (unsigned long long)h);
    fd = REAL(open)(name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        errno = ENOLCK;
        return -1;
    }
    struct stat st;
    if (REAL(fstat)(fd, &st) == 0 && st.st_uid == geteuid())
        fchmod(fd, 0666);       /* -o allow_other: the command's other users lock it too */
    fd = fs_fd(fd);
    int expected = 0;
    if (!__atomic_compare_exchange_n(&v->lock_fd1, &expected, fd + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        REAL(close)(fd);        /* another thread was first */
        fd = expected - 1;
    }
    return fd;
}

/* l_whence SEEK_CUR and SEEK_END are the program's fd's offset and the file's size, not the
 * stand-in's (empty): made SEEK_SET. */
static int lock_absolute(int fd, struct vfile *v, const struct flock *in, struct flock *out)
{
    *out = *in;
    off_t base = 0;
    if (in->l_whence == SEEK_CUR) {
        base = REAL(lseek)(fd, 0, SEEK_CUR);
    } else if (in->l_whence == SEEK_END) {
        struct stat st;
        base = vfs_fgetattr(fd, v, &st) < 0 ? -1 : st.st_size;
    } else if (in->l_whence != SEEK_SET) {
        errno = EINVAL;
        return -1;
    }
    if (base < 0)
        return -1;
    out->l_whence = SEEK_SET;
    out->l_start = in->l_start + base;
    return 0;
}

/* fcntl(fd, F_SETLK/F_SETLKW/F_GETLK and the OFD ones, arg) on the stand-in. */
int vfs_lock_fcntl(int fd, struct vfile *v, int cmd, struct flock *arg)
{
    int lfd = vfs_lock_fd(v);
    if (lfd < 0)
        return -1;
    struct flock fl;
    if (lock_absolute(fd, v, arg, &fl) < 0)
        return -1;
    int r = REAL(fcntl)(lfd, cmd, &fl);
    if (r == 0 && (cmd == F_GETLK || cmd == F_OFD_GETLK))
        *arg = fl;
    return r;
}

int vfs_lock_flock(struct vfile *v, int op)
{
    int lfd = vfs_lock_fd(v);
    return lfd < 0 ? -1 : REAL(flock)(lfd, op);
}

/* An fd of the file is closed: the process's POSIX locks on it go (not its flock and OFD
 * locks: those go with the stand-in's description, at the vfile's last close). */
void vfs_lock_closed(struct vfile *v)
{
    int fd = __atomic_load_n(&v->lock_fd1, __ATOMIC_ACQUIRE) - 1;
    if (fd < 0)
        return;
    struct flock all = { .l_type = F_UNLCK, .l_whence = SEEK_SET };
    int e = errno;
    REAL(fcntl)(fd, F_SETLK, &all);
    errno = e;
}

void vfs_lock_release(struct vfile *v)
{
    int fd = v->lock_fd1 - 1;
    if (fd >= 0)
        REAL(close)(fd);
    v->lock_fd1 = 0;
}
