/* stdio on virtual files. glibc's stdio reads, seeks and writes a FILE's fd with internal
 * calls no wrapper sees, so what a stream is made of depends on what it may reach:
 *
 * - a stream that only reads ("r", fopen or fdopen) on a cached file is a glibc cookie
 *   stream whose read and seek are the fd's read() and lseek(): every refill of its
 *   buffer, the block fseek reads to land on an aligned offset, an ungetc's backup and a
 *   scanf's look-ahead go through the read() wrapper, which fills the page cache first
 *   (vfs/pagecache.c), so no stdio path reaches a hole. Its fileno() is the fd (set in the
 *   FILE: glibc's cookie functions never use it), so fstat(fileno(f)), mmap and the fd's
 *   offset work as on a file stream;
 * - one that may write ("w", "a", "r+", ...) is glibc's own over the memfd, filled whole
 *   when opened (a write of part of a page past the wrappers needs the page filled); what
 *   stdio writes reaches the FS at fflush-by-close, fsync and exit (vfs/pagecache.c:
 *   pcache_sync_untracked); glibc leaves a gap past the cache's end only after a seek there
 *   (the fseek family: its own reads stop at the cache's end), and before such a seek the
 *   cache, whose end another process may have left stale, grows to the FS's end, what lies
 *   past its old end read from the FS (before_seek); what glibc wrote and the FS has not
 *   got yet is never read again from the FS; a write() past the end of a cache such a stream
 *   writes into reads the range from the old end from the FS instead of leaving holes,
 *   which glibc's own writes would fill in part with zeros (pcache_stream_made);
 * - a direct_io file's stream is a cookie stream whose reads and writes are the fd's;
 * - freopen's stream is glibc's own (it keeps the FILE), filled whole; freopen of a
 *   read-only cookie stream closes it and returns a new stream (glibc cannot reopen one).
 *
 * stdio_read.c fills by range for FILEs made past these wrappers (stdin on a cached fd is
 * filled whole too). */
#include "../ldpfuse.h"
#include <stdio_ext.h>
#include <string.h>

/* Does a stream of this mode ever write? ("r" does not: stdio_read.c fills it by range) */
static int stream_writes(const char *mode)
{
    return mode[0] != 'r' || strchr(mode, '+') != NULL;
}

static int mode_flags(const char *mode, int *flags)
{
    int f;
    switch (mode[0]) {
    case 'r': f = O_RDONLY; break;
    case 'w': f = O_WRONLY | O_CREAT | O_TRUNC; break;
    case 'a': f = O_WRONLY | O_CREAT | O_APPEND; break;
    default: errno = EINVAL; return -1;
    }
    for (const char *m = mode + 1; *m && *m != ','; m++) {
        if (*m == '+')
            f = (f & ~O_ACCMODE) | O_RDWR;
        else if (*m == 'x')
            f |= O_EXCL;
        else if (*m == 'e')
            f |= O_CLOEXEC;
    }
    *flags = f;
    return 0;
}

/* A direct_io file: a stream whose reads and writes are the fd's read()/write() (glibc's
 * would go to the memfd past the wrappers, and filling a live file whole never ends).
 * fileno() of it is -1, as of any cookie stream. */
static ssize_t direct_stream_read(void *c, char *buf, size_t n)
{
    return read((int)(intptr_t)c, buf, n);
}
static ssize_t direct_stream_write(void *c, const char *buf, size_t n)
{
    ssize_t r = write((int)(intptr_t)c, buf, n);
    return r < 0 ? 0 : r;       /* fopencookie: 0 is the error */
}
static int direct_stream_seek(void *c, off64_t *pos, int whence)
{
    off64_t r = lseek64((int)(intptr_t)c, *pos, whence);
    if (r < 0)
        return -1;
    *pos = r;
    return 0;
}
static int direct_stream_close(void *c)
{
    return close((int)(intptr_t)c);
}

static FILE *direct_stream(int fd, const char *mode)
{
    cookie_io_functions_t io = { direct_stream_read, direct_stream_write, direct_stream_seek,
                                 direct_stream_close };
    return fopencookie((void *)(intptr_t)fd, mode, io);
}

/* glibc's vtable of cookie streams: the word after a FILE (struct _IO_FILE_plus), the same
 * for every cookie stream */
static const void *cookie_vtable;

#define READ_STREAM_BUF (64u << 10)

void _IO_setb(FILE *, char *, char *, int);     /* exported by glibc since 2.0 */

static const void *vtable_of(FILE *f)
{
    return *(const void *const *)((const char *)f + sizeof(FILE));
}

/* A read-only stream on a cached file: a cookie stream over the fd's read() and lseek()
 * (the direct_io stream's functions, with no write), fileno() the fd. */
static FILE *read_stream(int fd)
{
    cookie_io_functions_t io = { direct_stream_read, NULL, direct_stream_seek, direct_stream_close };
    FILE *f = fopencookie((void *)(intptr_t)fd, "r", io);
    if (f == NULL)
        return NULL;
    f->_fileno = fd;
    __atomic_store_n(&cookie_vtable, vtable_of(f), __ATOMIC_RELAXED);
    /* A cookie stream's fread goes buffer by buffer (glibc's _IO_default_xsgetn), where a
     * file stream's reads a large request at once: a buffer of READ_STREAM_BUF (not the
     * BUFSIZ glibc would give) keeps a large fread to few read()s. glibc frees it as its
     * own (_IO_file_doallocate's way); setvbuf replaces it. */
    char *b = malloc(READ_STREAM_BUF);
    if (b)
        _IO_setb(f, b, b + READ_STREAM_BUF, 1);
    return f;
}

/* Is f a stream whose reads all go through read() (stdio_read.c need not fill for it)? */
int stdio_reads_through(FILE *f)
{
    const void *c = __atomic_load_n(&cookie_vtable, __ATOMIC_RELAXED);
    return c != NULL && vtable_of(f) == c;
}

/* A stream of glibc's own is made on v's cache (one that may write, or freopen's): glibc
 * reads and writes the memfd past the wrappers, so the file is filled whole first, and from
 * now on a write() past the cache's end reads the range from the old end from the FS, as
 * glibc's own writes may fill part of any granule there (pcache_stream_made). 0, or -1 with
 * errno. */
static int own_stream_on_cache(struct vfile *v)
{
    pcache_stream_made(v);
    return pcache_fill(v, 0, 0, 1);
}

static FILE *vfopen(const struct vpath *vp, const char *mode)
{
    int flags;
    if (mode_flags(mode, &flags) < 0)
        return NULL;
    int fd = vfs_open(vp, flags, 0666);
    if (fd < 0)
        return NULL;
    struct vfile *v = fdtable_get(fd);
    if (v && v->kind == VF_FILE && v->direct_io) {
        FILE *f = direct_stream(fd, mode);
        if (f == NULL) {
            int e = errno;
            close(fd);
            errno = e;
        }
        return f;
    }
    int cached = v && v->kind == VF_FILE && v->pc;
    if (cached && stream_writes(mode) && own_stream_on_cache(v) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return NULL;
    }
    char fmode[4] = { mode[0], 0, 0, 0 };
    if (strchr(mode, '+'))
        fmode[1] = '+';
    FILE *f = cached && !stream_writes(mode) ? read_stream(fd) : REAL(fdopen)(fd, fmode);
    if (f == NULL) {
        int e = errno;
        close(fd);
        errno = e;
    }
    return f;
}

FILE *fdopen(int fd, const char *mode)
{
    struct vfile *v = vfd(fd);
    if (LIKELY(v == NULL) || v->kind != VF_FILE || v->pc == NULL)
        return REAL(fdopen)(fd, mode);
    if (v->direct_io)
        return direct_stream(fd, mode);
    if (!stream_writes(mode)) {
        /* glibc's fdopen checks the mode against the fd's: so does this one */
        int fl = REAL(fcntl)(fd, F_GETFL);
        if (fl < 0)
            return NULL;
        if ((fl & O_ACCMODE) == O_WRONLY) {
            errno = EINVAL;
            return NULL;
        }
        return read_stream(fd);
    }
    if (own_stream_on_cache(v) < 0)
        return NULL;
    return REAL(fdopen)(fd, mode);
}

FILE *fopen(const char *path, const char *mode)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp))) {
        FILE *f = REAL(fopen)(path, mode);
        if (LIKELY(f != NULL) || errno != ENOENT || !vfs_lookup_outside_link(AT_FDCWD, path, 1, &vp))
            return f;
    }
    return vfopen(&vp, mode);
}

FILE *fopen64(const char *path, const char *mode)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp))) {
        FILE *f = REAL(fopen64)(path, mode);
        if (LIKELY(f != NULL) || errno != ENOENT || !vfs_lookup_outside_link(AT_FDCWD, path, 1, &vp))
            return f;
    }
    return vfopen(&vp, mode);
}

/* glibc's freopen cannot reopen a cookie stream (natively too it crashes: its close
 * leaves the FILE half a cookie stream). Ours, a read-only stream on a cached file, is
 * closed and a new stream made: the stream returned is then not the one passed, which a
 * program that uses freopen's result never sees (stdin, stdout and stderr are glibc's,
 * never ours). freopen(NULL, mode) reopens the same file, through a dup of its fd. */
static FILE *reopen_read_stream(const char *path, const char *mode, FILE *stream)
{
    int dupfd = -1;
    if (path == NULL && (dupfd = dup(fileno(stream))) < 0)
        return NULL;
    fclose(stream);
    if (path != NULL)
        return fopen(path, mode);
    FILE *f = fdopen(dupfd, mode);
    if (f == NULL) {
        int e = errno;
        close(dupfd);
        errno = e;
    }
    return f;
}

/* freopen closes the stream's old fd internally: account for it first. */
static FILE *vfreopen(FILE *(*real)(const char *, const char *, FILE *), const char *path,
                      const char *mode, FILE *stream)
{
    if (stream && stdio_reads_through(stream) && fileno(stream) >= 0 && vfd(fileno(stream)))
        return reopen_read_stream(path, mode, stream);
    struct vpath vp;
    int mine = vfs_lookup(AT_FDCWD, &path, &vp);
    int oldfd = stream ? fileno(stream) : -1;
    struct vfile *old = vfd(oldfd);
    if (LIKELY(!mine && old == NULL))
        return real(path, mode, stream);
    if (old) {
        fflush(stream);
        vfs_flush(oldfd, old);
    }
    FILE *f;
    struct vfile *keep = NULL;
    if (mine) {
        int flags;
        if (mode_flags(mode, &flags) < 0)
            return NULL;
        int fd = vfs_open(&vp, flags, 0666);
        if (fd < 0)
            return NULL;
        struct vfile *nv = fdtable_get(fd);
        if (nv && nv->kind == VF_FILE && nv->pc)
            own_stream_on_cache(nv);        /* freopen's stream is glibc's own, whatever its mode */
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        keep = fdtable_take(fd);
        f = real(proc, mode, stream);
        REAL(close)(fd);
    } else if (path == NULL) {
        keep = old;             /* same file, new mode: the vfile moves to the new fd */
        if (keep)
            vfile_ref(keep);
        if (keep && keep->kind == VF_FILE && keep->pc && !keep->direct_io)
            own_stream_on_cache(keep);      /* freopen's stream is glibc's own, whatever its mode */
        f = real(path, mode, stream);
    } else {
        f = real(path, mode, stream);
    }
    if (old && fdtable_get(oldfd) == old) {
        fdtable_take(oldfd);
        vfile_unref(old);
    }
    if (keep) {
        if (f)
            fdtable_set(fileno(f), keep);
        else
            vfile_unref(keep);
    }
    return f;
}

FILE *freopen(const char *path, const char *mode, FILE *stream)
{
    return vfreopen(REAL(freopen), path, mode, stream);
}

FILE *freopen64(const char *path, const char *mode, FILE *stream)
{
    return vfreopen(REAL(freopen64), path, mode, stream);
}

/* A stream's pending output, written by us through write() (the FS first, O_APPEND
 * atomic) rather than by glibc's internal write, which would reach the memfd only.
 * Only a plain write buffer is taken: anything else is left to glibc (and then to
 * pcache_sync_untracked). Returns 0, or -1 with errno (the bytes are dropped, as the FS
 * refused them). */
static int flush_through(FILE *f, int fd)
{
    int ret = 0;
    flockfile(f);
    if (f->_IO_write_ptr > f->_IO_write_base && f->_IO_write_base == f->_IO_buf_base &&
        f->_IO_read_ptr == f->_IO_read_end) {
        const char *p = f->_IO_write_base;
        size_t n = (size_t)(f->_IO_write_ptr - f->_IO_write_base);
        while (n > 0) {
            ssize_t w = write(fd, p, n);
            if (w < 0 && errno == EINTR)
                continue;
            if (w <= 0) {
                if (w == 0)
                    errno = EIO;
                ret = -1;
                break;
            }
            p += w;
            n -= (size_t)w;
        }
        f->_IO_write_ptr = f->_IO_write_base;
        f->_offset = -1;            /* glibc's cached position: unknown, ask the kernel */
    }
    funlockfile(f);
    return ret;
}

/*
 * The program's stdout on a cached file. A line-buffered stdout (bash sets it, and
 * flushes after each builtin) would have glibc write every line itself, past the
 * wrappers; made fully buffered, as stdout on a file natively is, its lines reach the FS
 * through fflush -> write() (O_APPEND then atomic with other processes' appends). The old
 * mode comes back when fd 1 leaves the file.
 */
/* glibc's flag for a line-buffered stream (libio.h, internal but stable since 2.0) */
#ifndef _IO_LINE_BUF
#define _IO_LINE_BUF 0x0200
#endif
static int stdout_was_line_buffered;

void stdio_fd_changed(int fd, int cached)
{
    if (fd != 1 || stdout == NULL)
        return;
    if (cached && (stdout->_flags & _IO_LINE_BUF)) {
        stdout->_flags &= ~_IO_LINE_BUF;
        stdout_was_line_buffered = 1;
    } else if (!cached && stdout_was_line_buffered) {
        stdout->_flags |= _IO_LINE_BUF;
        stdout_was_line_buffered = 0;
    }
}

static int stdout_is_cached(FILE *f)
{
    if (f != stdout || ldp_guard || __atomic_load_n(&ldp_nvfds, __ATOMIC_RELAXED) == 0)
        return 0;
    struct vfile *v = fdtable_get(1);
    return v && v->kind == VF_FILE && (v->flags & O_ACCMODE) != O_RDONLY;
}

/* bash asks for a line-buffered stdout at start: on a cached file it stays fully
 * buffered (see stdio_fd_changed), and gets line buffering back if fd 1 changes. */
int setvbuf(FILE *f, char *buf, int mode, size_t size)
{
    if (UNLIKELY(mode == _IOLBF) && stdout_is_cached(f)) {
        stdout_was_line_buffered = 1;
        mode = _IOFBF;
    }
    return REAL(setvbuf)(f, buf, mode, size);
}

void setlinebuf(FILE *f)
{
    if (UNLIKELY(stdout_is_cached(f))) {
        stdout_was_line_buffered = 1;
        return;
    }
    REAL(setlinebuf)(f);
}

/* What stdio wrote reaches the FS at fflush, so that a full FS is an error of fflush
 * (bash's echo checks it), not a silent loss, and appends from many processes stay
 * whole. */
int fflush(FILE *f)
{
    if (LIKELY(__atomic_load_n(&ldp_nvfds, __ATOMIC_RELAXED) == 0) || ldp_guard)
        return REAL(fflush)(f);
    if (f == NULL) {
        /* every stream: ours first (stdout and stderr are the ones a program keeps) */
        int r1 = fflush(stdout), r2 = fflush(stderr), r3 = REAL(fflush)(NULL);
        return r1 | r2 | r3;
    }
    int fd = fileno(f);
    struct vfile *v = fdtable_get(fd);
    if (LIKELY(v == NULL) || v->kind != VF_FILE || v->pc == NULL || (v->flags & O_ACCMODE) == O_RDONLY)
        return REAL(fflush)(f);
    if (flush_through(f, fd) < 0) {
        f->_flags |= _IO_ERR_SEEN;
        return EOF;
    }
    int r = REAL(fflush)(f);
    if (pcache_sync_untracked(v) < 0) {
        f->_flags |= _IO_ERR_SEEN;
        return EOF;
    }
    return r;
}

/* A stream that writes (glibc's own over the memfd) moving past the cache's end: glibc
 * writes there itself, and the cache's end may be stale (another process appended), so the
 * cache first grows to the FS's end (pcache_grow_to_fs_end). A seek back, or within what an
 * earlier look found (seek_reach: the memfd's end moves back only through a truncation,
 * which the FS's end followed), looks at nothing: no system call. A failure is the seek's
 * (-1, errno). */
static int before_seek(FILE *f, off64_t off, int whence)
{
    if (LIKELY(__atomic_load_n(&ldp_nvfds, __ATOMIC_RELAXED) == 0) || ldp_guard || f == NULL)
        return 0;
    int fd = f->_fileno;
    struct vfile *v = fd >= 0 ? fdtable_get(fd) : NULL;
    if (LIKELY(v == NULL) || v->kind != VF_FILE || v->pc == NULL || v->direct_io ||
        (v->flags & O_ACCMODE) == O_RDONLY || stdio_reads_through(f))
        return 0;
    if ((whence == SEEK_SET && off <= v->seek_reach) || (whence == SEEK_CUR && off <= 0))
        return 0;
    struct stat k;
    if (REAL(fstat)(fd, &k) < 0)
        return 0;
    off64_t to = -1;            /* SEEK_END: where glibc finds the end is the memfd's */
    if (whence == SEEK_SET) {
        to = off;
    } else if (whence == SEEK_CUR) {
        off64_t at = ftello64(f);
        to = at < 0 ? -1 : at + off;
    }
    if (to < 0 || to > k.st_size) {
        if (pcache_grow_to_fs_end(v) < 0) {
            f->_flags |= _IO_ERR_SEEN;
            return -1;
        }
        if (REAL(fstat)(fd, &k) < 0)
            return 0;
    }
    v->seek_reach = k.st_size;
    return 0;
}

int fseek(FILE *f, long off, int whence)
{
    return before_seek(f, off, whence) < 0 ? -1 : REAL(fseek)(f, off, whence);
}

int fseeko(FILE *f, off_t off, int whence)
{
    return before_seek(f, off, whence) < 0 ? -1 : REAL(fseeko)(f, off, whence);
}

int fseeko64(FILE *f, off64_t off, int whence)
{
    return before_seek(f, off, whence) < 0 ? -1 : REAL(fseeko64)(f, off, whence);
}

int fsetpos(FILE *f, const fpos_t *pos)
{
    return before_seek(f, pos->__pos, SEEK_SET) < 0 ? -1 : REAL(fsetpos)(f, pos);
}

int fsetpos64(FILE *f, const fpos64_t *pos)
{
    return before_seek(f, pos->__pos, SEEK_SET) < 0 ? -1 : REAL(fsetpos64)(f, pos);
}

int fclose(FILE *f)
{
    if (LIKELY(__atomic_load_n(&ldp_nvfds, __ATOMIC_RELAXED) == 0) || ldp_guard || f == NULL)
        return REAL(fclose)(f);
    int fd = fileno(f);
    struct vfile *v = fdtable_get(fd);
    if (LIKELY(v == NULL))
        return REAL(fclose)(f);
    int r1 = fflush(f);
    int r2 = vfs_flush(fd, v);
    int e = errno;
    fdtable_take(fd);
    int r3 = REAL(fclose)(f);
    vfile_unref(v);
    if (r1 == 0 && r2 < 0)
        errno = e;
    return (r1 == 0 && r2 == 0 && r3 == 0) ? 0 : EOF;
}
