/*
 * The read and write family on cached files (vfs/pagecache.c). A read makes sure the range
 * it will touch is in the page cache (a read() of a cache seen filled whole, and unchanged
 * since, has nothing to check: pcache_whole), then lets the kernel serve it from the memfd;
 * a write goes to the FS first, at the fd's offset, and returns the FS's answer. A
 * direct_io file (the FS's FileInfo.direct_io) is read from the FS itself, at the offset
 * asked, past the cache, as FUSE does for live files. Every other fd (passthrough files
 * included) goes straight to the kernel; a passthrough file's ftruncate is then told to
 * every process (vfs/passthrough.c), its writes at its close.
 */
#include "../ldpfuse.h"
#include <stdlib.h>
#include <string.h>

#define COPY_CHUNK (1u << 20)       /* sendfile/copy_file_range/splice: per call at most */

static inline struct vfile *cached(int fd)
{
    struct vfile *v = vfd(fd);
    return UNLIKELY(v != NULL) && v->kind == VF_FILE && v->pc ? v : NULL;
}

/* Before the kernel reads n bytes at off (-1: the fd's offset) of a cached fd. */
static int before_read(int fd, struct vfile *v, off_t off, size_t n)
{
    if ((v->flags & O_ACCMODE) == O_WRONLY)
        return 0;       /* the kernel says EBADF */
    if (off < 0 && (off = REAL(lseek)(fd, 0, SEEK_CUR)) < 0)
        return 0;
    return pcache_fill(v, off, n, 0);
}

static size_t iov_len(const struct iovec *iov, int cnt)
{
    size_t n = 0;
    for (int i = 0; i < cnt && iov; i++)
        n += iov[i].iov_len;
    return n;
}

/* One buffer as long as the vector (*n), for the calls that pass it to the FS whole; NULL
 * and errno (EINVAL as the kernel's for a bad count) on failure. */
static char *iov_buffer(const struct iovec *iov, int cnt, size_t *n)
{
    if (cnt < 0 || cnt > IOV_MAX) {
        errno = EINVAL;
        return NULL;
    }
    *n = iov_len(iov, cnt);
    char *buf = malloc(*n ? *n : 1);
    if (buf == NULL)
        errno = ENOMEM;
    return buf;
}

/* direct_io: the FS reads into one buffer, scattered over the vector after. */
static ssize_t direct_readv(struct vfile *v, int fd, const struct iovec *iov, int cnt, off_t off)
{
    size_t n;
    char *buf = iov_buffer(iov, cnt, &n);
    if (buf == NULL)
        return -1;
    ssize_t r = direct_read(v, fd, buf, n, off);
    int e = errno;
    for (size_t at = 0, i = 0; r > 0 && at < (size_t)r; i++) {
        size_t part = iov[i].iov_len < (size_t)r - at ? iov[i].iov_len : (size_t)r - at;
        memcpy(iov[i].iov_base, buf + at, part);
        at += part;
    }
    free(buf);
    errno = e;
    return r;
}

/* read() of a cache filled whole (pcache_whole) is the kernel's wherever the offset is: it
 * is tried first, and a read that meets the end (0) is the end when the attribute cache
 * says the file is no longer than the cache (pcache_whole_end); else it goes on to
 * before_read, which asks whether the file grew. */
ssize_t read(int fd, void *buf, size_t n)
{
    struct vfile *v = cached(fd);
    if (LIKELY(v == NULL))
        return REAL(read)(fd, buf, n);
    if (v->direct_io)
        return direct_read(v, fd, buf, n, -1);
    ssize_t r;
    if (n > 0 && pcache_whole(v) &&
        ((r = REAL(read)(fd, buf, n)) != 0 || pcache_whole_end(v)))
        return r;
    if (before_read(fd, v, -1, n) == 0)
        return REAL(read)(fd, buf, n);
    return -1;
}

ssize_t __read_chk(int fd, void *buf, size_t n, size_t buflen)
{
    struct vfile *v = cached(fd);
    if (LIKELY(v == NULL))
        return REAL(__read_chk)(fd, buf, n, buflen);
    if (v->direct_io && n <= buflen)
        return direct_read(v, fd, buf, n, -1);
    ssize_t r;
    if (n > 0 && n <= buflen && pcache_whole(v) &&
        ((r = REAL(read)(fd, buf, n)) != 0 || pcache_whole_end(v)))
        return r;       /* as read() */
    if (before_read(fd, v, -1, n) == 0)
        return REAL(__read_chk)(fd, buf, n, buflen);
    return -1;
}

ssize_t pread(int fd, void *buf, size_t n, off_t off)
{
    struct vfile *v = cached(fd);
    if (UNLIKELY(v != NULL && v->direct_io) && off >= 0)
        return direct_read(v, fd, buf, n, off);
    ssize_t r;
    if (UNLIKELY(v != NULL) && n > 0 && off >= 0 && pcache_whole(v) &&
        ((r = REAL(pread)(fd, buf, n, off)) != 0 || pcache_whole_end(v)))
        return r;       /* as read() */
    if (LIKELY(v == NULL) || off < 0 || before_read(fd, v, off, n) == 0)
        return REAL(pread)(fd, buf, n, off);
    return -1;
}

ssize_t pread64(int fd, void *buf, size_t n, off64_t off)
{
    struct vfile *v = cached(fd);
    if (UNLIKELY(v != NULL && v->direct_io) && off >= 0)
        return direct_read(v, fd, buf, n, off);
    ssize_t r;
    if (UNLIKELY(v != NULL) && n > 0 && off >= 0 && pcache_whole(v) &&
        ((r = REAL(pread64)(fd, buf, n, off)) != 0 || pcache_whole_end(v)))
        return r;       /* as read() */
    if (LIKELY(v == NULL) || off < 0 || before_read(fd, v, off, n) == 0)
        return REAL(pread64)(fd, buf, n, off);
    return -1;
}

ssize_t __pread_chk(int fd, void *buf, size_t n, off_t off, size_t buflen)
{
    struct vfile *v = cached(fd);
    if (UNLIKELY(v != NULL && v->direct_io) && off >= 0 && n <= buflen)
        return direct_read(v, fd, buf, n, off);
    ssize_t r;
    if (UNLIKELY(v != NULL) && n > 0 && n <= buflen && off >= 0 && pcache_whole(v) &&
        ((r = REAL(pread)(fd, buf, n, off)) != 0 || pcache_whole_end(v)))
        return r;       /* as read() */
    if (LIKELY(v == NULL) || off < 0 || before_read(fd, v, off, n) == 0)
        return REAL(__pread_chk)(fd, buf, n, off, buflen);
    return -1;
}

ssize_t __pread64_chk(int fd, void *buf, size_t n, off64_t off, size_t buflen)
{
    struct vfile *v = cached(fd);
    if (UNLIKELY(v != NULL && v->direct_io) && off >= 0 && n <= buflen)
        return direct_read(v, fd, buf, n, off);
    ssize_t r;
    if (UNLIKELY(v != NULL) && n > 0 && n <= buflen && off >= 0 && pcache_whole(v) &&
        ((r = REAL(pread64)(fd, buf, n, off)) != 0 || pcache_whole_end(v)))
        return r;       /* as read() */
    if (LIKELY(v == NULL) || off < 0 || before_read(fd, v, off, n) == 0)
        return REAL(__pread64_chk)(fd, buf, n, off, buflen);
    return -1;
}

ssize_t readv(int fd, const struct iovec *iov, int cnt)
{
    struct vfile *v = cached(fd);
    if (UNLIKELY(v != NULL && v->direct_io))
        return direct_readv(v, fd, iov, cnt, -1);
    if (LIKELY(v == NULL) || before_read(fd, v, -1, iov_len(iov, cnt)) == 0)
        return REAL(readv)(fd, iov, cnt);
    return -1;
}

ssize_t preadv(int fd, const struct iovec *iov, int cnt, off_t off)
{
    struct vfile *v = cached(fd);
    if (UNLIKELY(v != NULL && v->direct_io) && off >= 0)
        return direct_readv(v, fd, iov, cnt, off);
    if (LIKELY(v == NULL) || off < 0 || before_read(fd, v, off, iov_len(iov, cnt)) == 0)
        return REAL(preadv)(fd, iov, cnt, off);
    return -1;
}

ssize_t preadv64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
    struct vfile *v = cached(fd);
    if (UNLIKELY(v != NULL && v->direct_io) && off >= 0)
        return direct_readv(v, fd, iov, cnt, off);
    if (LIKELY(v == NULL) || off < 0 || before_read(fd, v, off, iov_len(iov, cnt)) == 0)
        return REAL(preadv64)(fd, iov, cnt, off);
    return -1;
}

/* preadv2 with RWF_NOWAIT: data not in memory is EAGAIN, as on a disk file whose pages
 * are not cached (the caller reads again without the flag, which fills). A memfd refuses
 * the flag (EOPNOTSUPP, as kernel FUSE does): the kernel reads without it, from pages
 * that are there. */
static ssize_t nowait_readv(int fd, struct vfile *v, const struct iovec *iov, int cnt, off_t off, int flags)
{
    flags &= ~RWF_NOWAIT;
    if ((v->flags & O_ACCMODE) == O_WRONLY)
        return REAL(preadv2)(fd, iov, cnt, off, flags);     /* the kernel says EBADF */
    off_t at = off;
    if (at < 0 && (at = REAL(lseek)(fd, 0, SEEK_CUR)) < 0)
        return REAL(preadv2)(fd, iov, cnt, off, flags);
    int in = pcache_filled(v, at, iov_len(iov, cnt));
    if (in == 0) {
        errno = EAGAIN;
        return -1;
    }
    if (in < 0 && before_read(fd, v, off, iov_len(iov, cnt)) < 0)
        return -1;      /* at the end: whether the file grew is asked, as a read does */
    return REAL(preadv2)(fd, iov, cnt, off, flags);
}

ssize_t preadv2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
    struct vfile *v = cached(fd);
    if (UNLIKELY(v != NULL && v->direct_io) && off >= -1)
        return direct_readv(v, fd, iov, cnt, off);
    if (UNLIKELY(v != NULL) && (flags & RWF_NOWAIT))
        return nowait_readv(fd, v, iov, cnt, off, flags);
    if (LIKELY(v == NULL) || before_read(fd, v, off, iov_len(iov, cnt)) == 0)
        return REAL(preadv2)(fd, iov, cnt, off, flags);
    return -1;
}

ssize_t preadv64v2(int fd, const struct iovec *iov, int cnt, off64_t off, int flags)
{
    struct vfile *v = cached(fd);
    if (UNLIKELY(v != NULL && v->direct_io) && off >= -1)
        return direct_readv(v, fd, iov, cnt, off);
    if (UNLIKELY(v != NULL) && (flags & RWF_NOWAIT))
        return nowait_readv(fd, v, iov, cnt, off, flags);
    if (LIKELY(v == NULL) || before_read(fd, v, off, iov_len(iov, cnt)) == 0)
        return REAL(preadv64v2)(fd, iov, cnt, off, flags);
    return -1;
}

/* ---- writes */

static ssize_t cached_write(int fd, struct vfile *v, const void *buf, size_t n, off_t off, int positional)
{
    if ((v->flags & O_ACCMODE) == O_RDONLY) {
        errno = EBADF;
        return -1;
    }
    if (positional == 1 && off < 0) {
        errno = EINVAL;
        return -1;
    }
    if (n == 0)
        return 0;
    return pcache_write(v, fd, buf, n, off, positional);
}

static ssize_t cached_writev(int fd, struct vfile *v, const struct iovec *iov, int cnt, off_t off,
                             int positional)
{
    size_t n;
    char *buf = iov_buffer(iov, cnt, &n);
    if (buf == NULL)
        return -1;
    size_t at = 0;
    for (int i = 0; i < cnt; i++) {
        memcpy(buf + at, iov[i].iov_base, iov[i].iov_len);
        at += iov[i].iov_len;
    }
    ssize_t r = cached_write(fd, v, buf, n, off, positional);
    int e = errno;
    free(buf);
    errno = e;
    return r;
}

ssize_t write(int fd, const void *buf, size_t n)
{
    struct vfile *v = cached(fd);
    if (LIKELY(v == NULL))
        return REAL(write)(fd, buf, n);
    return cached_write(fd, v, buf, n, 0, 0);
}

ssize_t pwrite(int fd, const void *buf, size_t n, off_t off)
{
    struct vfile *v = cached(fd);
    if (LIKELY(v == NULL))
        return REAL(pwrite)(fd, buf, n, off);
    return cached_write(fd, v, buf, n, off, 1);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off64_t off)
{
    struct vfile *v = cached(fd);
    if (LIKELY(v == NULL))
        return REAL(pwrite64)(fd, buf, n, off);
    return cached_write(fd, v, buf, n, off, 1);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    struct vfile *v = cached(fd);
    if (LIKELY(v == NULL))
        return REAL(writev)(fd, iov, cnt);
    return cached_writev(fd, v, iov, cnt, 0, 0);
}

ssize_t pwritev(int fd, const struct iovec *iov, int cnt, off_t off)
{
    struct vfile *v = cached(fd);
    if (LIKELY(v == NULL))
        return REAL(pwritev)(fd, iov, cnt, off);
    return cached_writev(fd, v, iov, cnt, off, 1);
}

ssize_t pwritev64(int fd, const struct iovec *iov, int cnt, off64_t off)
{
    struct vfile *v = cached(fd);
    if (LIKELY(v == NULL))
        return REAL(pwritev64)(fd, iov, cnt, off);
    return cached_writev(fd, v, iov, cnt, off, 1);
}

/* pwritev2's offset and flags as pcache_write's positional: RWF_APPEND appends whatever the
 * offset (which says only whether the fd's offset moves: -1) and the fd's flags. */
static int rwf_positional(off_t off, int flags)
{
    if (flags & RWF_APPEND)
        return off == -1 ? PCACHE_APPEND : PCACHE_APPEND_KEEP;
    return off != -1;
}

ssize_t pwritev2(int fd, const struct iovec *iov, int cnt, off_t off, int flags)
{
    struct vfile *v = cached(fd);
    if (LIKELY(v == NULL))
        return REAL(pwritev2)(fd, iov, cnt, off, flags);
    return cached_writev(fd, v, iov, cnt, off, rwf_positional(off, flags));
}

ssize_t pwritev64v2(int fd, const struct iovec *iov, int cnt, off64_t off, int flags)
{
    struct vfile *v = cached(fd);
    if (LIKELY(v == NULL))
        return REAL(pwritev64v2)(fd, iov, cnt, off, flags);
    return cached_writev(fd, v, iov, cnt, off, rwf_positional(off, flags));
}

/* ---- seeking and size */

/* SEEK_DATA/SEEK_HOLE would show the cache's unfilled ranges: the file has no holes. */
static off_t cached_seek(int fd, off_t off, int whence)
{
    struct stat k;
    if (REAL(fstat)(fd, &k) < 0)
        return -1;
    if (off < 0 || off >= k.st_size) {
        errno = ENXIO;
        return -1;
    }
    return REAL(lseek)(fd, whence == SEEK_DATA ? off : k.st_size, SEEK_SET);
}

off_t lseek(int fd, off_t off, int whence)
{
    if (LIKELY(whence != SEEK_DATA && whence != SEEK_HOLE) || cached(fd) == NULL)
        return REAL(lseek)(fd, off, whence);
    return cached_seek(fd, off, whence);
}

off64_t lseek64(int fd, off64_t off, int whence)
{
    if (LIKELY(whence != SEEK_DATA && whence != SEEK_HOLE) || cached(fd) == NULL)
        return REAL(lseek64)(fd, off, whence);
    return cached_seek(fd, off, whence);
}

static int cached_ftruncate(struct vfile *v, off_t len)
{
    if ((v->flags & O_ACCMODE) == O_RDONLY || len < 0) {
        errno = EINVAL;
        return -1;
    }
    return pcache_ftruncate(v, len);
}

int ftruncate(int fd, off_t len)
{
    struct vfile *v = cached(fd);
    if (LIKELY(v == NULL))
        return (int)vfs_changed_through(fd, REAL(ftruncate)(fd, len));
    return cached_ftruncate(v, len);
}

int ftruncate64(int fd, off64_t len)
{
    struct vfile *v = cached(fd);
    if (LIKELY(v == NULL))
        return (int)vfs_changed_through(fd, REAL(ftruncate64)(fd, len));
    return cached_ftruncate(v, len);
}

/* ---- copies between fds: a cached source is filled for the span copied (at most
 * COPY_CHUNK per call: the caller loops on a short count); a cached destination is
 * written through, so the copy goes through a buffer. */

static ssize_t copy_through(int in, off64_t *in_off, int out, struct vfile *vout, off64_t *out_off, size_t len)
{
    if (len > COPY_CHUNK)
        len = COPY_CHUNK;
    char *buf = malloc(len ? len : 1);
    if (buf == NULL) {
        errno = ENOMEM;
        return -1;
    }
    ssize_t n = in_off ? pread64(in, buf, len, *in_off) : read(in, buf, len);
    ssize_t w = n;
    if (n > 0) {
        w = cached_write(out, vout, buf, (size_t)n, out_off ? *out_off : 0, out_off != NULL);
        if (w > 0 && in_off)
            *in_off += w;
        else if (w >= 0 && w < n && !in_off)
            REAL(lseek)(in, w - n, SEEK_CUR);   /* give back what was not written */
        if (w > 0 && out_off)
            *out_off += w;
    }
    int e = errno;
    free(buf);
    errno = e;
    return w;
}

static int before_copy(int in, struct vfile *vin, const off64_t *in_off, size_t *len)
{
    if (*len > COPY_CHUNK)
        *len = COPY_CHUNK;
    return before_read(in, vin, in_off ? (off_t)*in_off : -1, *len);
}

ssize_t copy_file_range(int in, off64_t *in_off, int out, off64_t *out_off, size_t len, unsigned flags)
{
    struct vfile *vin = cached(in), *vout = cached(out);
    if (LIKELY(vin == NULL && vout == NULL))
        return REAL(copy_file_range)(in, in_off, out, out_off, len, flags);
    if (vout)
        return copy_through(in, in_off, out, vout, out_off, len);
    if (before_copy(in, vin, in_off, &len) < 0)
        return -1;
    return REAL(copy_file_range)(in, in_off, out, out_off, len, flags);
}

ssize_t sendfile(int out, int in, off_t *off, size_t count)
{
    struct vfile *vin = cached(in), *vout = cached(out);
    if (LIKELY(vin == NULL && vout == NULL))
        return REAL(sendfile)(out, in, off, count);
    off64_t o = off ? *off : 0;
    if (vout) {
        ssize_t r = copy_through(in, off ? &o : NULL, out, vout, NULL, count);
        if (off)
            *off = (off_t)o;
        return r;
    }
    if (before_copy(in, vin, off ? &o : NULL, &count) < 0)
        return -1;
    return REAL(sendfile)(out, in, off, count);
}

ssize_t sendfile64(int out, int in, off64_t *off, size_t count)
{
    return sendfile(out, in, (off_t *)off, count);
}

ssize_t splice(int in, off64_t *in_off, int out, off64_t *out_off, size_t len, unsigned flags)
{
    struct vfile *vin = cached(in), *vout = cached(out);
    if (LIKELY(vin == NULL && vout == NULL))
        return REAL(splice)(in, in_off, out, out_off, len, flags);
    if (vout)
        return copy_through(in, in_off, out, vout, out_off, len);
    if (before_copy(in, vin, in_off, &len) < 0)
        return -1;
    return REAL(splice)(in, in_off, out, out_off, len, flags);
}
