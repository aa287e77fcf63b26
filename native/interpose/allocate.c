/*
 * fallocate and posix_fallocate (and their *64 twins, which programs built with
 * -D_FILE_OFFSET_BITS=64 call) on a cached file. The FS has no such call, so each mode is
 * done with the calls it has, through the page cache (vfs/pagecache.c), never on the
 * memfd alone (the FS would not see it: a hole punched in the memfd reads as zeros only
 * until the cache is dropped, a size set there is a size the FS never had):
 *
 *   0                        growing the file is a truncate; nothing else changes
 *   KEEP_SIZE                nothing to do (space is the FS's business)
 *   PUNCH_HOLE|KEEP_SIZE     the range inside the file is written with zeros
 *   ZERO_RANGE [|KEEP_SIZE]  the same, and without KEEP_SIZE the file grows to its end
 *   anything else            EOPNOTSUPP (collapse and insert move data: the FS has no call)
 *
 * On a passthrough fd the kernel does it, and the change is told (vfs/passthrough.c).
 */
#include "../ldpfuse.h"
#include <stdlib.h>

#define ZERO_CHUNK (1u << 20)

static inline struct vfile *cached(int fd)
{
    struct vfile *v = vfd(fd);
    return UNLIKELY(v != NULL) && v->kind == VF_FILE && v->pc ? v : NULL;
}

/* Zeros over [off, end) through the FS and the cache. 0 or -1 with errno. */
static int write_zeros(struct vfile *v, int fd, off_t off, off_t end)
{
    char *zeros = off < end ? calloc(1, ZERO_CHUNK) : NULL;
    if (off < end && zeros == NULL) {
        errno = ENOMEM;
        return -1;
    }
    int ret = 0;
    while (off < end) {
        size_t n = end - off < ZERO_CHUNK ? (size_t)(end - off) : ZERO_CHUNK;
        ssize_t w = pcache_write(v, fd, zeros, n, off, 1);
        if (w <= 0) {
            if (w == 0)
                errno = EIO;
            ret = -1;
            break;
        }
        off += w;
    }
    free(zeros);
    return ret;
}

static int cached_fallocate(int fd, struct vfile *v, int mode, off_t off, off_t len)
{
    if (off < 0 || len <= 0) {
        errno = EINVAL;
        return -1;
    }
    if ((v->flags & O_ACCMODE) == O_RDONLY) {
        errno = EBADF;
        return -1;
    }
    if (off > INT64_MAX - len) {
        errno = EFBIG;
        return -1;
    }
    int keep = (mode & FALLOC_FL_KEEP_SIZE) != 0;
    int zero = 0;
    switch (mode & ~FALLOC_FL_KEEP_SIZE) {
    case 0:
        break;
    case FALLOC_FL_PUNCH_HOLE:
        if (!keep) {
            errno = EOPNOTSUPP;     /* as the kernel: a punch must keep the size */
            return -1;
        }
        zero = 1;
        break;
    case FALLOC_FL_ZERO_RANGE:
        zero = 1;
        break;
    default:
        errno = EOPNOTSUPP;
        return -1;
    }
    struct stat k;
    if (REAL(fstat)(fd, &k) < 0)
        return -1;
    off_t size = k.st_size, end = off + len;
    if (zero && write_zeros(v, fd, off, end < size ? end : size) < 0)
        return -1;
    if (!keep && end > size)
        return pcache_ftruncate(v, end);
    return 0;
}

int fallocate(int fd, int mode, off_t off, off_t len)
{
    struct vfile *v = cached(fd);
    if (LIKELY(v == NULL))
        return (int)vfs_changed_through(fd, REAL(fallocate)(fd, mode, off, len));
    return cached_fallocate(fd, v, mode, off, len);
}

int fallocate64(int fd, int mode, off64_t off, off64_t len)
{
    struct vfile *v = cached(fd);
    if (LIKELY(v == NULL))
        return (int)vfs_changed_through(fd, REAL(fallocate64)(fd, mode, off, len));
    return cached_fallocate(fd, v, mode, off, len);
}

/* posix_fallocate answers with the error number itself, and only ever grows the file. */
static int kernel_posix_fallocate(int fd, int r)
{
    vfs_changed_through(fd, r ? -1 : 0);    /* a passthrough file: told */
    return r;
}

static int cached_posix_fallocate(int fd, struct vfile *v, off_t off, off_t len)
{
    int e = errno;
    int r = cached_fallocate(fd, v, 0, off, len) < 0 ? errno : 0;
    errno = e;
    return r;
}

int posix_fallocate(int fd, off_t off, off_t len)
{
    struct vfile *v = cached(fd);
    if (LIKELY(v == NULL))
        return kernel_posix_fallocate(fd, REAL(posix_fallocate)(fd, off, len));
    return cached_posix_fallocate(fd, v, off, len);
}

int posix_fallocate64(int fd, off64_t off, off64_t len)
{
    struct vfile *v = cached(fd);
    if (LIKELY(v == NULL))
        return kernel_posix_fallocate(fd, REAL(posix_fallocate64)(fd, off, len));
    return cached_posix_fallocate(fd, v, off, len);
}
