/*
 * POSIX aio on cached files. glibc's aio (in libc since 2.34) runs each request on a
 * helper thread that calls its internal pread/pwrite, past every wrapper: the range a
 * request names is put into the page cache (vfs/pagecache.c) when it is submitted, as
 * read() would, so the helper finds it filled. A write request's range is filled too (a
 * write of part of a page past the wrappers needs the page filled); what it writes
 * reaches the memfd only, and the FS at the next flush, as a stdio write does
 * (pcache_sync_untracked). io_uring has no such entry point: see docs/cache.md.
 */
#include "../ldpfuse.h"
#include <aio.h>

/* Before a request on fd: 0, or -1 with errno (the submission then fails with it). */
static int before_request(int fd, int op, off_t off, size_t n)
{
    struct vfile *v = vfd(fd);
    if (LIKELY(v == NULL) || v->kind != VF_FILE || v->pc == NULL)
        return 0;
    if ((op == LIO_READ && (v->flags & O_ACCMODE) == O_WRONLY) || (op != LIO_READ && op != LIO_WRITE))
        return 0;       /* the helper's read fails with EBADF; a no-op request reads nothing */
    if (v->flags & O_APPEND && op == LIO_WRITE) {
        /* appended where the helper finds the end: the file's last page */
        struct stat k;
        if (REAL(fstat)(fd, &k) < 0)
            return 0;
        off = k.st_size;
    }
    return off >= 0 ? pcache_fill(v, off, n, 0) : 0;
}

int aio_read(struct aiocb *cb)
{
    if (before_request(cb->aio_fildes, LIO_READ, cb->aio_offset, cb->aio_nbytes) < 0)
        return -1;
    return REAL(aio_read)(cb);
}

int aio_read64(struct aiocb64 *cb)
{
    if (before_request(cb->aio_fildes, LIO_READ, (off_t)cb->aio_offset, cb->aio_nbytes) < 0)
        return -1;
    return REAL(aio_read64)(cb);
}

int aio_write(struct aiocb *cb)
{
    if (before_request(cb->aio_fildes, LIO_WRITE, cb->aio_offset, cb->aio_nbytes) < 0)
        return -1;
    return REAL(aio_write)(cb);
}

int aio_write64(struct aiocb64 *cb)
{
    if (before_request(cb->aio_fildes, LIO_WRITE, (off_t)cb->aio_offset, cb->aio_nbytes) < 0)
        return -1;
    return REAL(aio_write64)(cb);
}

int lio_listio(int mode, struct aiocb *const list[], int n, struct sigevent *sig)
{
    for (int i = 0; i < n; i++)
        if (list[i] && before_request(list[i]->aio_fildes, list[i]->aio_lio_opcode, list[i]->aio_offset,
                                      list[i]->aio_nbytes) < 0)
            return -1;
    return REAL(lio_listio)(mode, list, n, sig);
}

int lio_listio64(int mode, struct aiocb64 *const list[], int n, struct sigevent *sig)
{
    for (int i = 0; i < n; i++)
        if (list[i] && before_request(list[i]->aio_fildes, list[i]->aio_lio_opcode,
                                      (off_t)list[i]->aio_offset, list[i]->aio_nbytes) < 0)
            return -1;
    return REAL(lio_listio64)(mode, list, n, sig);
}
