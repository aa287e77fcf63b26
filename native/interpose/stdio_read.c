/*
 * stdio reads of a cached file by a FILE of glibc's own: one made past the wrappers of
 * stdio.c (whose read-only streams read through read() and need nothing here; see its
 * header). glibc's FILE reads its fd with internal calls no wrapper sees, so the range a
 * stdio read function is about to read is put into the page cache (vfs/pagecache.c)
 * before glibc reads it from the memfd:
 *
 *   fread(n), fgets(n), fgetc, getc, __uflow (getc's macro when the buffer is empty)
 *       the fd's offset onward, for what is asked plus one refill of the stream's buffer
 *       (running past the cache's end: whether the file grew is asked, as a read there asks;
 *       fgets: nothing when its line is in the buffer already)
 *   getline, getdelim
 *       from the fd's offset until the delimiter, or the end
 *   the scanf family, the wide-character readers, getw
 *       the whole file (what they read cannot be told in advance; they are rare on files)
 *
 * Only streams that cannot write are filled this way (stdio.c opens them without filling):
 * a stream that writes may write part of a page past the wrappers, which needs the page
 * filled first, so it is filled whole when opened. The stream's lock is held from the
 * fill to the read, so another thread of the program cannot move the offset between.
 */
#include "../ldpfuse.h"
#include <stdarg.h>
#include <string.h>
#include <limits.h>
#include <wchar.h>

#undef getc
#undef fread_unlocked
#undef fgetc
#undef getline
#undef getc_unlocked
#undef fgetc_unlocked
#undef getwc
#undef getwc_unlocked

#define REFILL_MIN (64u << 10)      /* at least one stream buffer (glibc: st_blksize, 4 KiB) */
#define SCAN_CHUNK (64u << 10)

enum { LINE_OR_WANT = -3, TO_END = -2, NO_DELIM = -1 };     /* LINE_OR_WANT: fgets's */

static struct vfile *stream_cached(FILE *f)
{
    if (LIKELY(__atomic_load_n(&ldp_nvfds, __ATOMIC_RELAXED) == 0) || ldp_guard || f == NULL)
        return NULL;
    int fd = f->_fileno;
    struct vfile *v = fd >= 0 ? fdtable_get(fd) : NULL;
    if (v == NULL || v->kind != VF_FILE || v->pc == NULL || v->direct_io || (v->flags & O_ACCMODE) == O_WRONLY)
        return NULL;
    return stdio_reads_through(f) ? NULL : v;
}

/* Is the delimiter in the cache's bytes [from, to)? Sets *found to where it ends. */
static int delim_in(int fd, off_t from, off_t to, int delim, off_t *found)
{
    char buf[4096];
    while (from < to) {
        size_t n = (size_t)(to - from) < sizeof buf ? (size_t)(to - from) : sizeof buf;
        ssize_t got = REAL(pread)(fd, buf, n, from);
        if (got <= 0)
            return 0;
        char *p = memchr(buf, delim, (size_t)got);
        if (p) {
            *found = from + (p - buf) + 1;
            return 1;
        }
        from += got;
    }
    return 0;
}

/* Before a read of f that needs `want` more bytes than its buffer holds (delim >= 0: up to
 * that byte; LINE_OR_WANT: through a newline, or want - 1 bytes; TO_END: all). Returns 0, or
 * -1 with errno (the read then fails as a read() would). */
static int stream_fill(FILE *f, struct vfile *v, size_t want, int delim)
{
    int fd = f->_fileno;
    if (delim == TO_END) {
        /* from the offset to the end, through the fill's own quick look (a call per
         * character must not take the cache's lock each time) */
        struct stat k;
        int e = errno;
        off_t pos = REAL(lseek)(fd, 0, SEEK_CUR);
        errno = e;
        if (pos < 0 || REAL(fstat)(fd, &k) < 0)
            return pcache_fill(v, 0, 0, 1);
        return pos < k.st_size ? pcache_fill(v, pos, (size_t)(k.st_size - pos), 0) : 0;
    }
    size_t have = f->_IO_read_ptr && f->_IO_read_end > f->_IO_read_ptr ? (size_t)(f->_IO_read_end - f->_IO_read_ptr) : 0;
    if (delim == NO_DELIM && have >= want)
        return 0;
    if (delim == LINE_OR_WANT && (have + 1 >= want || (have && memchr(f->_IO_read_ptr, '\n', have))))
        return 0;       /* the line is in the buffer: no refill (no look at the offset a line) */
    if (delim >= 0 && have && memchr(f->_IO_read_ptr, delim, have))
        return 0;
    int e = errno;
    off_t pos = REAL(lseek)(fd, 0, SEEK_CUR);
    errno = e;
    if (pos < 0)
        return 0;       /* not seekable: glibc's read gives the error */
    size_t bufsize = f->_IO_buf_base && f->_IO_buf_end > f->_IO_buf_base ? (size_t)(f->_IO_buf_end - f->_IO_buf_base) : 0;
    size_t refill = bufsize > REFILL_MIN ? bufsize : REFILL_MIN;
    if (delim == NO_DELIM || delim == LINE_OR_WANT) {
        /* a range that runs past the cache's end: glibc reads on to that end past the
         * wrappers, and takes it for the file's; the file may have grown (another process
         * appended: a cache of its own in the embedded mode), which the fill then asks */
        return pcache_fill_stream(v, pos, (want > have ? want - have : 0) + refill);
    }
    /* a line: fill and look, window by window, until the delimiter or the end */
    off_t from = pos;
    for (size_t win = REFILL_MIN;; win = win < (64u << 20) ? win * 2 : win) {
        if (pcache_fill(v, from, win, 0) < 0)
            return -1;
        struct stat k;
        off_t size = REAL(fstat)(fd, &k) == 0 ? k.st_size : from;
        off_t to = from + (off_t)win < size ? from + (off_t)win : size;
        off_t end;
        if (delim_in(fd, from, to, delim, &end))
            return pcache_fill(v, end, refill, 0);     /* and the refill that reads it */
        if (to >= size)
            return 0;
        from = to;
    }
}

/* The wrapper's body: fill (holding the stream's lock unless unlocked), then the real call. */
#define LOCKED_READ(f, want, delim, call, fail_value) do { \
        struct vfile *v_ = stream_cached(f); \
        if (LIKELY(v_ == NULL)) \
            return call; \
        flockfile(f); \
        if (stream_fill(f, v_, want, delim) < 0) { \
            f->_flags |= _IO_ERR_SEEN; \
            funlockfile(f); \
            return fail_value; \
        } \
        __typeof__(call) r_ = call; \
        funlockfile(f); \
        return r_; \
    } while (0)

#define UNLOCKED_READ(f, want, delim, call, fail_value) do { \
        struct vfile *v_ = stream_cached(f); \
        if (LIKELY(v_ == NULL)) \
            return call; \
        if (stream_fill(f, v_, want, delim) < 0) { \
            f->_flags |= _IO_ERR_SEEN; \
            return fail_value; \
        } \
        return call; \
    } while (0)

size_t fread(void *p, size_t size, size_t n, FILE *f)
{
    LOCKED_READ(f, size * n, NO_DELIM, REAL(fread)(p, size, n, f), 0);
}

size_t fread_unlocked(void *p, size_t size, size_t n, FILE *f)
{
    UNLOCKED_READ(f, size * n, NO_DELIM, REAL(fread_unlocked)(p, size, n, f), 0);
}

char *fgets(char *s, int n, FILE *f)
{
    LOCKED_READ(f, n > 0 ? (size_t)n : 0, LINE_OR_WANT, REAL(fgets)(s, n, f), NULL);
}

char *fgets_unlocked(char *s, int n, FILE *f)
{
    UNLOCKED_READ(f, n > 0 ? (size_t)n : 0, LINE_OR_WANT, REAL(fgets_unlocked)(s, n, f), NULL);
}

ssize_t getline(char **line, size_t *n, FILE *f)
{
    LOCKED_READ(f, 0, '\n', REAL(getline)(line, n, f), -1);
}

ssize_t getdelim(char **line, size_t *n, int delim, FILE *f)
{
    LOCKED_READ(f, 0, delim & 0xff, REAL(getdelim)(line, n, delim, f), -1);
}

ssize_t __getdelim(char **line, size_t *n, int delim, FILE *f)
{
    LOCKED_READ(f, 0, delim & 0xff, REAL(__getdelim)(line, n, delim, f), -1);
}

int fgetc(FILE *f)
{
    LOCKED_READ(f, 1, NO_DELIM, REAL(fgetc)(f), EOF);
}

int getc(FILE *f)
{
    LOCKED_READ(f, 1, NO_DELIM, REAL(getc)(f), EOF);
}

int _IO_getc(FILE *f)
{
    LOCKED_READ(f, 1, NO_DELIM, REAL(_IO_getc)(f), EOF);
}

int fgetc_unlocked(FILE *f)
{
    UNLOCKED_READ(f, 1, NO_DELIM, REAL(fgetc_unlocked)(f), EOF);
}

int getc_unlocked(FILE *f)
{
    UNLOCKED_READ(f, 1, NO_DELIM, REAL(getc_unlocked)(f), EOF);
}

int __uflow(FILE *f)
{
    UNLOCKED_READ(f, 1, NO_DELIM, REAL(__uflow)(f), EOF);
}

int __underflow(FILE *f)
{
    UNLOCKED_READ(f, 1, NO_DELIM, REAL(__underflow)(f), EOF);
}

int getw(FILE *f)
{
    LOCKED_READ(f, 0, TO_END, REAL(getw)(f), EOF);
}

/* <stdio.h> renames fscanf and vfscanf to their __isoc99_ versions: the old names are
 * defined under their own symbols here. */
int plain_vfscanf(FILE *f, const char *fmt, va_list ap) __asm__("vfscanf");
int plain_fscanf(FILE *f, const char *fmt, ...) __asm__("fscanf");

int plain_vfscanf(FILE *f, const char *fmt, va_list ap)
{
    LOCKED_READ(f, 0, TO_END, REAL(vfscanf)(f, fmt, ap), EOF);
}

int __isoc99_vfscanf(FILE *f, const char *fmt, va_list ap)
{
    LOCKED_READ(f, 0, TO_END, REAL(__isoc99_vfscanf)(f, fmt, ap), EOF);
}

int plain_fscanf(FILE *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = plain_vfscanf(f, fmt, ap);
    va_end(ap);
    return r;
}

int __isoc99_fscanf(FILE *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = __isoc99_vfscanf(f, fmt, ap);
    va_end(ap);
    return r;
}

/*
 * A read-only stream of stdio.c is a glibc cookie stream, which glibc makes byte-oriented
 * with no wide buffer (its wide readers would dereference none): on such a stream the
 * wide readers are made of byte reads and mbrtowc, one character at a time (the stream's
 * bytes are read through read(), so nothing needs filling).
 */
static wint_t cookie_getwc(FILE *f)
{
    mbstate_t st;
    memset(&st, 0, sizeof st);
    char b[MB_LEN_MAX];
    for (size_t n = 0; n < sizeof b;) {
        int c = getc_unlocked(f);
        if (c == EOF) {
            if (n > 0) {
                errno = EILSEQ;
                f->_flags |= _IO_ERR_SEEN;
            }
            return WEOF;
        }
        b[n++] = (char)c;
        wchar_t w;
        mbstate_t s2 = st;
        size_t r = mbrtowc(&w, b, n, &s2);
        if (r == (size_t)-2)
            continue;
        if (r == (size_t)-1) {
            errno = EILSEQ;
            f->_flags |= _IO_ERR_SEEN;
            return WEOF;
        }
        return (wint_t)w;
    }
    errno = EILSEQ;
    f->_flags |= _IO_ERR_SEEN;
    return WEOF;
}

static wchar_t *cookie_getws(wchar_t *s, int n, FILE *f)
{
    if (n <= 0)
        return NULL;
    int i = 0;
    while (i < n - 1) {
        wint_t w = cookie_getwc(f);
        if (w == WEOF)
            break;
        s[i++] = (wchar_t)w;
        if (w == L'\n')
            break;
    }
    if (i == 0)
        return NULL;
    s[i] = L'\0';
    return s;
}

#define OURS(f) (f != NULL && stdio_reads_through(f))

wint_t ungetwc(wint_t w, FILE *f)
{
    if (LIKELY(!OURS(f)))
        return REAL(ungetwc)(w, f);
    char b[MB_LEN_MAX];
    mbstate_t st;
    memset(&st, 0, sizeof st);
    size_t n = w == WEOF ? (size_t)-1 : wcrtomb(b, (wchar_t)w, &st);
    if (n == (size_t)-1)
        return WEOF;
    flockfile(f);
    while (n > 0)
        if (ungetc((unsigned char)b[--n], f) == EOF) {
            funlockfile(f);
            return WEOF;
        }
    funlockfile(f);
    return w;
}

int fwide(FILE *f, int mode)
{
    if (LIKELY(!OURS(f)))
        return REAL(fwide)(f, mode);
    return mode > 0 ? 1 : mode < 0 ? -1 : 0;      /* either, as its readers are ours */
}

wint_t fgetwc(FILE *f)
{
    if (OURS(f)) {
        flockfile(f);
        wint_t w = cookie_getwc(f);
        funlockfile(f);
        return w;
    }
    LOCKED_READ(f, 0, TO_END, REAL(fgetwc)(f), WEOF);
}

wint_t getwc(FILE *f)
{
    if (OURS(f))
        return fgetwc(f);
    LOCKED_READ(f, 0, TO_END, REAL(getwc)(f), WEOF);
}

wint_t fgetwc_unlocked(FILE *f)
{
    if (OURS(f))
        return cookie_getwc(f);
    UNLOCKED_READ(f, 0, TO_END, REAL(fgetwc_unlocked)(f), WEOF);
}

wint_t getwc_unlocked(FILE *f)
{
    if (OURS(f))
        return cookie_getwc(f);
    UNLOCKED_READ(f, 0, TO_END, REAL(getwc_unlocked)(f), WEOF);
}

wchar_t *fgetws(wchar_t *s, int n, FILE *f)
{
    if (OURS(f)) {
        flockfile(f);
        wchar_t *r = cookie_getws(s, n, f);
        funlockfile(f);
        return r;
    }
    LOCKED_READ(f, 0, TO_END, REAL(fgetws)(s, n, f), NULL);
}

wchar_t *fgetws_unlocked(wchar_t *s, int n, FILE *f)
{
    if (OURS(f))
        return cookie_getws(s, n, f);
    UNLOCKED_READ(f, 0, TO_END, REAL(fgetws_unlocked)(s, n, f), NULL);
}

wint_t __wuflow(FILE *f)
{
    if (OURS(f))
        return cookie_getwc(f);
    UNLOCKED_READ(f, 0, TO_END, REAL(__wuflow)(f), WEOF);
}

wint_t __wunderflow(FILE *f)
{
    if (OURS(f))
        return cookie_getwc(f);
    UNLOCKED_READ(f, 0, TO_END, REAL(__wunderflow)(f), WEOF);
}

/* The wide scanf family on such a stream: glibc's would read a wide buffer the stream
 * lacks; it fails instead, with ENOTSUP, as a read error (docs/cache.md). */
int plain_vfwscanf(FILE *f, const wchar_t *fmt, va_list ap) __asm__("vfwscanf");
int plain_fwscanf(FILE *f, const wchar_t *fmt, ...) __asm__("fwscanf");

static int no_wide_scan(FILE *f)
{
    errno = ENOTSUP;
    f->_flags |= _IO_ERR_SEEN;
    return EOF;
}

int plain_vfwscanf(FILE *f, const wchar_t *fmt, va_list ap)
{
    return OURS(f) ? no_wide_scan(f) : REAL(vfwscanf)(f, fmt, ap);
}

int __isoc99_vfwscanf(FILE *f, const wchar_t *fmt, va_list ap)
{
    return OURS(f) ? no_wide_scan(f) : REAL(__isoc99_vfwscanf)(f, fmt, ap);
}

int plain_fwscanf(FILE *f, const wchar_t *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = plain_vfwscanf(f, fmt, ap);
    va_end(ap);
    return r;
}

int __isoc99_fwscanf(FILE *f, const wchar_t *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int r = __isoc99_vfwscanf(f, fmt, ap);
    va_end(ap);
    return r;
}
