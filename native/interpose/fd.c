/* Calls on fds: only virtual placeholders (cached files, directories) need anything here;
 * passthrough fds and every other fd go straight to the kernel. */
#include "../ldpfuse.h"
#include <stdarg.h>
#include <linux/close_range.h>

extern int ldp_private_fd;     /* the lowest fd number of the shared mode's channels */
void shared_fds_lost(unsigned first, unsigned last);
void shared_fds_closed(unsigned first, unsigned last);

/* written by channel.c under its lock, read here on any thread */
static inline int private_fd(void)
{
    return __atomic_load_n(&ldp_private_fd, __ATOMIC_RELAXED);
}

int close(int fd)
{
    if (UNLIKELY(fd >= private_fd()))
        shared_fds_lost(fd, fd);    /* the program closes our number: we reconnect later */
    if (UNLIKELY(fd >= ldp_backing_low_fd))
        backing_fds_lost(fd, fd);   /* a backing tree's lower directory: opened again */
    if (UNLIKELY(fd == __atomic_load_n(&ldp_proc_fd_dir, __ATOMIC_RELAXED)))
        proc_fd_lost(fd);           /* the reopens' /proc/self/fd: opened again */
    struct vfile *v = vfd(fd);
    if (LIKELY(v == NULL) || ldp_vfork_child)
        return REAL(close)(fd);     /* a vfork child: the table is its parent's */
    return vfs_close(fd, v);
}

/* A new fd that shares an open file description with a virtual one. */
static int track_dup(int oldfd, int newfd)
{
    if (newfd >= 0 && !ldp_vfork_child) {
        struct vfile *v = fdtable_get(oldfd);
        if (v) {
            vfile_ref(v);
            fdtable_set(newfd, v);
        }
    }
    return newfd;
}

int dup(int fd)
{
    if (LIKELY(vfd(fd) == NULL))
        return REAL(dup)(fd);
    return track_dup(fd, REAL(dup)(fd));
}

static int dup_onto(int oldfd, int newfd, int flags, int use3)
{
    if (UNLIKELY(newfd >= private_fd()))
        shared_fds_lost(newfd, newfd);
    if (UNLIKELY(newfd >= ldp_backing_low_fd))
        backing_fds_lost(newfd, newfd);
    if (UNLIKELY(newfd == __atomic_load_n(&ldp_proc_fd_dir, __ATOMIC_RELAXED)))
        proc_fd_lost(newfd);
    struct vfile *vo = vfd(oldfd), *vn = vfd(newfd);
    if (LIKELY(vo == NULL && vn == NULL) || oldfd == newfd || ldp_vfork_child)
        return use3 ? REAL(dup3)(oldfd, newfd, flags) : REAL(dup2)(oldfd, newfd);
    if (vn && newfd == 1 && stdout)
        fflush(stdout);         /* what it holds is the old file's */
    if (vn)
        vfs_flush(newfd, vn);   /* dup2 closes newfd: that is a close() */
    if (newfd == 0 && vo && vo->kind == VF_FILE && vo->pc && (vo->flags & O_ACCMODE) != O_WRONLY)
        pcache_fill(vo, 0, 0, 1);   /* stdin: glibc's stdio reads it past every wrapper (touch
                                     * moves its write-only fd there: nothing reads it) */
    int r = use3 ? REAL(dup3)(oldfd, newfd, flags) : REAL(dup2)(oldfd, newfd);
    if (r < 0)
        return r;
    if (vn) {
        fdtable_take(newfd);
        vfile_unref(vn);
    }
    r = track_dup(oldfd, r);
    if (newfd == 1) {
        struct vfile *v1 = fdtable_get(1);
        stdio_fd_changed(1, v1 && v1->kind == VF_FILE && (v1->flags & O_ACCMODE) != O_RDONLY);
    }
    return r;
}

int dup2(int oldfd, int newfd)
{
    return dup_onto(oldfd, newfd, 0, 0);
}

int dup3(int oldfd, int newfd, int flags)
{
    return dup_onto(oldfd, newfd, flags, 1);
}

static int is_lock_cmd(int cmd)
{
    return cmd == F_SETLK || cmd == F_SETLKW || cmd == F_GETLK || cmd == F_OFD_SETLK ||
           cmd == F_OFD_SETLKW || cmd == F_OFD_GETLK;
}

static int fcntl_common(int (*real)(int, int, ...), int fd, int cmd, void *arg)
{
    if ((cmd == F_DUPFD || cmd == F_DUPFD_CLOEXEC) && UNLIKELY(vfd(fd) != NULL))
        return track_dup(fd, real(fd, cmd, arg));
    if (UNLIKELY(is_lock_cmd(cmd)) && arg != NULL) {
        struct vfile *v = vfd(fd);
        if (v && v->kind == VF_FILE)
            return vfs_lock_fcntl(fd, v, cmd, arg);     /* vfs/locks.c */
    }
    return real(fd, cmd, arg);
}

int fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return fcntl_common(REAL(fcntl), fd, cmd, arg);
}

int fcntl64(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return fcntl_common(REAL(fcntl64), fd, cmd, arg);
}

/* Flush every virtual fd in [first, last] before the kernel closes them all. */
static void close_span(unsigned first, unsigned last, int before)
{
    int max = fdtable_max();
    if (max < 0 || first > (unsigned)max)
        return;
    if (last > (unsigned)max)
        last = (unsigned)max;
    for (unsigned fd = first; fd <= last; fd++) {
        struct vfile *v = fdtable_get((int)fd);
        if (v == NULL)
            continue;
        if (before) {
            vfs_flush((int)fd, v);
        } else {
            fdtable_take((int)fd);
            vfs_lock_closed(v);     /* POSIX: any close of the file lets go of its locks */
            vfile_unref(v);
        }
    }
}

/* The program closes [first, last] at once: any of our own fds there (the shared mode's
 * channels, a backing tree's directories, the reopens' /proc/self/fd) is lost. Told right before the kernel closes
 * them, after every request this close makes itself (the kept caches let go of, the
 * flushes): a request made after it would reconnect on a socket the close then takes,
 * the channel not known lost (a posted release's answer waited for on a closed socket was
 * EIO to the program's next call). */
static void range_lost(unsigned first, unsigned last)
{
    if (private_fd() != INT_MAX && (unsigned)private_fd() <= last)
        shared_fds_lost(first, last);
    if (ldp_backing_low_fd != INT_MAX && (unsigned)ldp_backing_low_fd <= last)
        backing_fds_lost(first, last);
    proc_fd_range_lost(first, last);
}

int close_range(unsigned first, unsigned last, int flags)
{
    int closing = !(flags & CLOSE_RANGE_CLOEXEC);
    if (closing && !ldp_guard && !ldp_vfork_child)
        pcache_kept_closing(first, last);
    if (LIKELY(__atomic_load_n(&ldp_nvfds, __ATOMIC_RELAXED) == 0) || ldp_guard || !closing || ldp_vfork_child) {
        if (closing)
            range_lost(first, last);
        int r = REAL(close_range)(first, last, flags);
        if (closing)
            shared_fds_closed(first, last);
        return r;
    }
    close_span(first, last, 1);
    range_lost(first, last);
    int r = REAL(close_range)(first, last, flags);
    shared_fds_closed(first, last);
    if (r == 0)
        close_span(first, last, 0);
    return r;
}

void closefrom(int lowfd)
{
    if (lowfd >= 0 && !ldp_guard && !ldp_vfork_child)
        pcache_kept_closing((unsigned)lowfd, ~0u);
    if (LIKELY(__atomic_load_n(&ldp_nvfds, __ATOMIC_RELAXED) == 0) || ldp_guard || lowfd < 0 || ldp_vfork_child) {
        if (lowfd >= 0)
            range_lost((unsigned)lowfd, INT_MAX);
        REAL(closefrom)(lowfd);
        if (lowfd >= 0)
            shared_fds_closed((unsigned)lowfd, INT_MAX);
        return;
    }
    close_span((unsigned)lowfd, ~0u, 1);
    range_lost((unsigned)lowfd, INT_MAX);
    REAL(closefrom)(lowfd);
    shared_fds_closed((unsigned)lowfd, INT_MAX);
    close_span((unsigned)lowfd, ~0u, 0);
}

int fsync(int fd)
{
    struct vfile *v = vfd(fd);
    if (LIKELY(v == NULL) || v->kind == VF_PASSTHROUGH)
        return REAL(fsync)(fd);
    return vfs_sync(fd, v, 0);
}

int fdatasync(int fd)
{
    struct vfile *v = vfd(fd);
    if (LIKELY(v == NULL) || v->kind == VF_PASSTHROUGH)
        return REAL(fdatasync)(fd);
    return vfs_sync(fd, v, 1);
}
