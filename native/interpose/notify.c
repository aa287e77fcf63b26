/* inotify_add_watch on a mount path (docs/limitations.md). The kernel does not see the
 * mount: given the path, it answers ENOENT, or, where the mount point exists on disk,
 * watches what lies under it, a file the program does not read (`tail -f` then waits
 * forever for lines written through the mount). No watch can report the changes made
 * through the mount, so the answer is EOPNOTSUPP, once the path is found as the kernel
 * would find it (ENOENT, ENOTDIR, ELOOP, EACCES as natively); `tail -f` then polls.
 * syscall(SYS_inotify_add_watch) and, under the safety net, the inline call (Go's fsnotify)
 * come here too (syscall.c, escape.c). */
#include "../ldpfuse.h"
#include <sys/inotify.h>

int inotify_add_watch(int fd, const char *path, uint32_t mask)
{
    struct vpath vp;
    int follow = !(mask & IN_DONT_FOLLOW);
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp))) {
        int r = REAL(inotify_add_watch)(fd, path, mask);
        if (LIKELY(r >= 0) || errno != ENOENT || !vfs_lookup_outside_link(AT_FDCWD, path, follow, &vp))
            return r;
    }
    struct stat st;
    if (vfs_getattr(&vp, follow, &st) < 0)
        return -1;
    errno = (mask & IN_ONLYDIR) && !S_ISDIR(st.st_mode) ? ENOTDIR : EOPNOTSUPP;
    return -1;
}
