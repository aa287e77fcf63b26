/* flock and lockf on a file the FS serves (vfs/locks.c: the kernel's lock on the file every
 * process shares, or on its stand-in, and the class's lock or flock if it has one). Any
 * other fd, one lookup in the fd table and the kernel's call. fcntl's lock commands go the
 * same way (fd.c). glibc's lockf calls its own fcntl, past the wrapper: it is wrapped here,
 * as F_SETLK(W)/F_GETLK from the fd's offset, as glibc does. */
#include "../ldpfuse.h"
#include <sys/file.h>

int flock(int fd, int op)
{
    struct vfile *v = vfd(fd);
    if (LIKELY(v == NULL) || v->kind != VF_FILE)
        return REAL(flock)(fd, op);
    return vfs_lock_flock(fd, v, op);
}

static int lockf_file(int fd, struct vfile *v, int cmd, off64_t len)
{
    struct flock fl = { .l_whence = SEEK_CUR, .l_start = 0, .l_len = len };
    switch (cmd) {
    case F_TEST:
        fl.l_type = F_RDLCK;
        if (vfs_lock_fcntl(fd, v, F_GETLK, &fl) < 0)
            return -1;
        if (fl.l_type == F_UNLCK || fl.l_pid == getpid())
            return 0;
        errno = EACCES;
        return -1;
    case F_ULOCK:
        fl.l_type = F_UNLCK;
        return vfs_lock_fcntl(fd, v, F_SETLK, &fl);
    case F_LOCK:
        fl.l_type = F_WRLCK;
        return vfs_lock_fcntl(fd, v, F_SETLKW, &fl);
    case F_TLOCK:
        fl.l_type = F_WRLCK;
        return vfs_lock_fcntl(fd, v, F_SETLK, &fl);
    }
    errno = EINVAL;
    return -1;
}

int lockf(int fd, int cmd, off_t len)
{
    struct vfile *v = vfd(fd);
    if (LIKELY(v == NULL) || v->kind != VF_FILE)
        return REAL(lockf)(fd, cmd, len);
    return lockf_file(fd, v, cmd, len);
}

int lockf64(int fd, int cmd, off64_t len)
{
    struct vfile *v = vfd(fd);
    if (LIKELY(v == NULL) || v->kind != VF_FILE)
        return REAL(lockf64)(fd, cmd, len);
    return lockf_file(fd, v, cmd, len);
}
