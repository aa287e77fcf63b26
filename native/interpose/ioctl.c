/*
 * ioctl: on a file the FS serves itself (cached or direct), FUSE's ioctl operation;
 * anything else, the kernel's. One lookup in the fd table on the pass-through path.
 */
#include "../ldpfuse.h"
#include <stdarg.h>

int ioctl(int fd, unsigned long request, ...)
{
    va_list ap;
    va_start(ap, request);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    struct vfile *v = vfd(fd);
    if (LIKELY(v == NULL) || v->kind != VF_FILE)
        return REAL(ioctl)(fd, request, arg);
    return vfs_ioctl(fd, v, request, arg);
}
