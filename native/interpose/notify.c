/* inotify on mount paths (vfs/notify.c makes the events; docs/limitations.md says which).
 * A watch on a real path is the kernel's, on the program's inotify fd, or, once that fd has
 * a watch on a mount path, on the kernel's inotify fd behind it. A mount path is found as
 * the kernel would find it (ENOENT, ENOTDIR, ELOOP as natively; its symlinks followed
 * unless IN_DONT_FOLLOW, a link out of the mounts watched by the kernel).
 * syscall(SYS_inotify_add_watch) and, under the safety net, the inline call (Go's fsnotify)
 * come here too (syscall.c, escape.c). */
#include "../ldpfuse.h"
#include <sys/inotify.h>

int notify_add(int fd, const struct vpath *vp, const struct stat *st, uint32_t mask);
int notify_rm(int fd, int wd);
int notify_real_fd(int fd);
extern int ldp_notify_any;

static int kernel_fd(int fd)
{
    return UNLIKELY(__atomic_load_n(&ldp_notify_any, __ATOMIC_RELAXED)) ? notify_real_fd(fd) : fd;
}

int inotify_add_watch(int fd, const char *path, uint32_t mask)
{
    struct vpath vp;
    int follow = !(mask & IN_DONT_FOLLOW);
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp))) {
        int r = REAL(inotify_add_watch)(kernel_fd(fd), path, mask);
        if (LIKELY(r >= 0) || errno != ENOENT || !vfs_lookup_outside_link(AT_FDCWD, path, follow, &vp))
            return r;
    }
    struct stat st;
    if (follow) {
        char out[PATH_MAX];
        int state, r = vfs_follow_stat(&vp, out, sizeof out, &st, &state);
        if (r < 0)
            return -1;
        if (r == 0)
            return REAL(inotify_add_watch)(kernel_fd(fd), out, mask);
        if (state != LOOKED_FOUND && vfs_getattr(&vp, 1, &st) < 0)
            return -1;
    } else if (vfs_getattr(&vp, 0, &st) < 0) {
        return -1;
    }
    if ((mask & IN_ONLYDIR) && !S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    return notify_add(fd, &vp, &st, mask);
}

int inotify_rm_watch(int fd, int wd)
{
    if (UNLIKELY(__atomic_load_n(&ldp_notify_any, __ATOMIC_RELAXED))) {
        int r = notify_rm(fd, wd);
        if (r != -2)
            return r;
    }
    return REAL(inotify_rm_watch)(fd, wd);
}
