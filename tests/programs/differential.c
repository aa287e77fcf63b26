/*
 * A differential checker (fsx's idea, for every way of reading a file): a seeded random
 * sequence of operations of one API family, run in lockstep on a file in the mount and on
 * a native file with the same bytes; every result (return value, errno, bytes, position)
 * is compared at once, and the first mismatch is printed with the seed and the op's index.
 *
 *   differential FAMILY SERVED NATIVE FIRST_SEED SEEDS OPS
 *
 * FAMILY: stdio    fseek/fseeko/fsetpos/rewind/fread/fgetc/getc/getc_unlocked/fgets/
 *                  getline/getdelim/ungetc/ftell/fgetpos/fscanf/fflush, streams of several
 *                  buffer sizes, fopen and fdopen, reopened now and then
 *         syscalls read/pread/readv/preadv/preadv2/lseek, and pread of a reopen through
 *                  /proc/self/fd/N
 *         mmap     private and shared mappings of random ranges
 *         copy     sendfile, copy_file_range and splice into a pipe or a native file
 *         child    children (with and without LD_PRELOAD) reading the inherited fd from
 *                  its offset, the parent reading and seeking between: long-lived ones
 *                  that inherit it once (fork and exec at the seed's start), and now and
 *                  then one forked and exec'd for a single read (this program, or sh+head)
 *         aio      aio_read and lio_listio (glibc's helper threads pread past the wrappers)
 *         hints    readahead, posix_fadvise (every advice) and preadv2 with RWF flags
 *                  between reads
 *         pass     the fd sent over a Unix socket (SCM_RIGHTS, sendmsg and sendmmsg) to a
 *                  preloaded and a bare process, and to this one under a new number
 *         mremap   mappings grown by mremap, in place or moved, read over their new length
 *         uring    IORING_OP_READ through a ring made with syscall(), of the fd and of a
 *                  registered file; exits 3 where the kernel refuses rings. Built with
 *                  -DDIFFERENTIAL_LIBURING the ring is liburing's (its calls are inline):
 *                  linked with -luring (-DDIFFERENTIAL_LIBURING_LINKED), or else loaded
 *                  with dlopen("liburing.so.2") once the served file is open (by another
 *                  thread with DIFFERENTIAL_DLOPEN_THREAD)
 * Each seed opens both files anew (a fresh page cache when the mount keeps none); pass,
 * uring and mremap open the served one anew about 25 times a seed besides.
 * SCRATCH_SERVED: where copy_file_range of the served file writes (default: beside the
 * native file, another file system, where it fails with EXDEV as over kernel FUSE); the
 * scratch files' names end in the checker's pid, so that several can run at once on
 * parts of the seeds. DIFFERENTIAL_CREATE: the served file is written first, by the
 * checker that creates it (the others wait until it is whole).
 * Prints "ok FAMILY SEEDS OPS" and exits 0, or the mismatch and exits 1; bad usage or a
 * native failure exits 2.
 */
#define _GNU_SOURCE
#include <aio.h>
#include <errno.h>
#include <stdarg.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef DIFFERENTIAL_LIBURING
#include <dlfcn.h>
#include <liburing.h>
#include <pthread.h>
#endif
#include <linux/io_uring.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

static uint64_t rng;
static const char *family;
static long seed_now, op_now;

static uint64_t next(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static long pick(long n)
{
    return n > 0 ? (long)(next() % (uint64_t)n) : 0;
}

/* a size: mostly small, sometimes around a buffer or a cache window, sometimes large */
static size_t some_size(void)
{
    switch (pick(6)) {
    case 0: return 1 + pick(16);
    case 1: return 1 + pick(4096);
    case 2: return 4096 * (1 + pick(4)) + pick(3) - 1;
    case 3: return 60000 + pick(140000);
    case 4: return 1 + pick(300000);
    default: return 1 + pick(1 << 20);
    }
}

static off_t file_size;

/* an offset: anywhere, near the end, past it, or near a 4 KiB/64 KiB/128 KiB boundary */
static off_t some_offset(void)
{
    switch (pick(5)) {
    case 0: return file_size - pick(5000);
    case 1: return file_size + pick(3);
    case 2: { off_t b = (off_t)(1 + pick(file_size / 131072 + 1)) * (pick(2) ? 131072 : 65536);
              return b + pick(9) - 4; }
    case 3: return (off_t)(pick(file_size / 4096 + 1)) * 4096 + pick(3) - 1;
    default: return pick(file_size + 1);
    }
}

static void fail(const char *what, const char *fmt, ...) __attribute__((format(printf, 2, 3), noreturn));
static void fail(const char *what, const char *fmt, ...)
{
    va_list ap;
    printf("mismatch family=%s seed=%ld op=%ld %s: ", family, seed_now, op_now, what);
    va_start(ap, fmt);
    vprintf(fmt, ap);
    va_end(ap);
    printf("\n");
    exit(1);
}

static void die(const char *what)
{
    printf("differential: %s: %s (seed %ld op %ld)\n", what, strerror(errno), seed_now, op_now);
    exit(2);
}

static int trace;

static void same_long(const char *what, long served, int e_served, long native, int e_native)
{
    if (trace)
        fprintf(stderr, "%ld %s %ld %ld\n", op_now, what, served, native);
    if (served != native)
        fail(what, "served %ld (errno %d), native %ld (errno %d)", served, e_served, native, e_native);
    if (native < 0 && e_served != e_native)
        fail(what, "errno served %d, native %d", e_served, e_native);
}

static void same_bytes(const char *what, const char *served, const char *native, size_t n, long at)
{
    if (memcmp(served, native, n) == 0)
        return;
    size_t i = 0;
    while (served[i] == native[i])
        i++;
    fail(what, "%zu bytes from %ld differ first at +%zu: served 0x%02x, native 0x%02x", n, at, i,
         (unsigned char)served[i], (unsigned char)native[i]);
}

static char *buf_a, *buf_b;
#define BUF (2u << 20)

/* the native file's bytes, read once: what a mapping of it shows (the mapping families
 * still map the native file, for mmap's and mremap's results, but compare the served
 * mapping with these rather than fault the native one in at every op) */
static char *native_bytes;

/* n bytes of a mapping at file offset off, as many as the file holds there */
static size_t in_file(off_t off, size_t n)
{
    return off + (off_t)n <= file_size ? n : off < file_size ? (size_t)(file_size - off) : 0;
}

/* ------------------------------------------------------------------ stdio */

struct stream { FILE *f; char *vbuf; int unbuffered; };

static void open_stream(struct stream *s, const char *path, int how, int vb, size_t vsize)
{
    if (how == 0) {
        s->f = fopen(path, "r");
    } else {
        int fd = open(path, O_RDONLY);
        s->f = fd < 0 ? NULL : fdopen(fd, "r");
    }
    if (s->f == NULL)
        die(path);
    s->vbuf = NULL;
    s->unbuffered = vb == 3;
    if (vb == 1) {
        s->vbuf = malloc(vsize);
        setvbuf(s->f, s->vbuf, _IOFBF, vsize);
    } else if (vb == 2) {
        setvbuf(s->f, NULL, _IOFBF, vsize);
    } else if (vb == 3) {
        setvbuf(s->f, NULL, _IONBF, 0);
    }
}

static void close_stream(struct stream *s)
{
    fclose(s->f);
    free(s->vbuf);
}

static void open_pair(struct stream *a, struct stream *b, const char *served, const char *native)
{
    int how = (int)pick(2), vb = (int)pick(4);
    if (vb == 3 && pick(2))
        vb = 0;                 /* unbuffered now and then */
    size_t sizes[] = { 1024, 4096, 8192, 65536, 200000, 1 << 20 };
    size_t vsize = sizes[pick(6)];
    open_stream(a, served, how, vb, vsize);
    open_stream(b, native, how, vb, vsize);
    if (trace)
        fprintf(stderr, "open how %d vb %d size %zu\n", how, vb, vsize);
}

static void stdio_family(const char *served, const char *native, long ops)
{
    struct stream a, b;
    open_pair(&a, &b, served, native);
    fpos_t pos_a, pos_b;
    int have_pos = 0, pushed = 0;
    char *line_a = NULL, *line_b = NULL;
    size_t cap_a = 0, cap_b = 0;
    for (op_now = 0; op_now < ops; op_now++) {
        long ra, rb;
        int ea, eb;
        int op = (int)pick(22);
        if (pushed)
            op = 7 + (int)pick(8);      /* what ungetc gave back is read next: after it glibc's
                                         * fflush and seeks answer by its buffer's layout */
        pushed = 0;
        if (a.unbuffered && (op == 12 || op == 13 || op == 14 || op == 18))
            op = 11;    /* a line by a read() per byte: seconds a line through a mount; kept to getc */
        errno = 0;
        switch (op) {
        case 0: case 1: {
            off_t off = some_offset();
            ra = fseek(a.f, off, SEEK_SET); ea = errno;
            rb = fseek(b.f, off, SEEK_SET); eb = errno;
            same_long("fseek SEEK_SET", ra, ea, rb, eb);
            break;
        }
        case 2: {
            off_t d = pick(2) ? pick(300000) - 150000 : pick(40) - 20;
            ra = fseeko(a.f, d, SEEK_CUR); ea = errno;
            rb = fseeko(b.f, d, SEEK_CUR); eb = errno;
            same_long("fseeko SEEK_CUR", ra, ea, rb, eb);
            break;
        }
        case 3: {
            off_t d = -pick(300000);
            ra = fseeko(a.f, d, SEEK_END); ea = errno;
            rb = fseeko(b.f, d, SEEK_END); eb = errno;
            same_long("fseeko SEEK_END", ra, ea, rb, eb);
            break;
        }
        case 4:
            ra = fgetpos(a.f, &pos_a); ea = errno;
            rb = fgetpos(b.f, &pos_b); eb = errno;
            same_long("fgetpos", ra, ea, rb, eb);
            have_pos = ra == 0;
            break;
        case 5:
            if (!have_pos)
                break;
            ra = fsetpos(a.f, &pos_a); ea = errno;
            rb = fsetpos(b.f, &pos_b); eb = errno;
            same_long("fsetpos", ra, ea, rb, eb);
            break;
        case 6:
            rewind(a.f);
            rewind(b.f);
            same_long("rewind", 0, 0, 0, 0);
            break;
        case 7: case 8: case 9: {
            size_t n = some_size();
            if (n > BUF)
                n = BUF;
            if (a.unbuffered)
                n %= 5000;      /* a cookie stream's unbuffered fread is a read() per byte */
            size_t size = pick(4) ? 1 : 1 + pick(7), cnt = n / size;
            ra = (long)fread(buf_a, size, cnt, a.f); ea = errno;
            rb = (long)fread(buf_b, size, cnt, b.f); eb = errno;
            same_long("fread", ra, ea, rb, eb);
            same_bytes("fread", buf_a, buf_b, (size_t)rb * size, ftell(b.f));
            break;
        }
        case 10: {
            size_t n = some_size() % (a.unbuffered ? 5000 : 70000);
            ra = (long)fread_unlocked(buf_a, 1, n, a.f);
            rb = (long)fread_unlocked(buf_b, 1, n, b.f);
            same_long("fread_unlocked", ra, 0, rb, 0);
            same_bytes("fread_unlocked", buf_a, buf_b, (size_t)rb, ftell(b.f));
            break;
        }
        case 11: {
            long n = 1 + pick(pick(2) || a.unbuffered ? 8 : 9000);
            for (long i = 0; i < n; i++) {
                int k = (int)pick(3);
                ra = k == 0 ? fgetc(a.f) : k == 1 ? getc(a.f) : getc_unlocked(a.f);
                rb = k == 0 ? fgetc(b.f) : k == 1 ? getc(b.f) : getc_unlocked(b.f);
                same_long(k == 0 ? "fgetc" : k == 1 ? "getc" : "getc_unlocked", ra, 0, rb, 0);
                if (rb == EOF)
                    break;
            }
            break;
        }
        case 12: {
            int n = (int)(1 + pick(pick(2) ? 200 : 100000));
            char *pa = fgets(buf_a, n, a.f), *pb = fgets(buf_b, n, b.f);
            same_long("fgets", pa != NULL, 0, pb != NULL, 0);
            if (pb && strcmp(pa, pb) != 0)
                fail("fgets", "lines differ at %ld: served \"%.40s\", native \"%.40s\"", ftell(b.f), pa, pb);
            break;
        }
        case 13: case 14: {
            int delim = op == 13 ? '\n' : ' ' + (int)pick(95);    /* bytes the test's files hold */
            ra = op == 13 ? getline(&line_a, &cap_a, a.f) : getdelim(&line_a, &cap_a, delim, a.f);
            rb = op == 13 ? getline(&line_b, &cap_b, b.f) : getdelim(&line_b, &cap_b, delim, b.f);
            same_long(op == 13 ? "getline" : "getdelim", ra, 0, rb, 0);
            if (rb > 0)
                same_bytes("getline", line_a, line_b, (size_t)rb, ftell(b.f));
            break;
        }
        case 15: {
            int c = pick(2) ? 'x' : (int)pick(256);
            ra = ungetc(c, a.f);
            rb = ungetc(c, b.f);
            same_long("ungetc", ra, 0, rb, 0);
            pushed = rb != EOF;
            break;
        }
        case 16: case 17:
            ra = ftell(a.f); ea = errno;
            rb = ftell(b.f); eb = errno;
            same_long("ftell", ra, ea, rb, eb);
            break;
        case 18: {
            char wa[8] = "", wb[8] = "";
            ra = fscanf(a.f, "%7s", wa);
            rb = fscanf(b.f, "%7s", wb);
            same_long("fscanf", ra, 0, rb, 0);
            if (strcmp(wa, wb) != 0)
                fail("fscanf", "served \"%s\", native \"%s\"", wa, wb);
            break;
        }
        case 19:
            ra = fflush(a.f);
            rb = fflush(b.f);
            same_long("fflush", ra, 0, rb, 0);
            break;
        case 20:
            same_long("feof", feof(a.f) != 0, 0, feof(b.f) != 0, 0);
            same_long("ferror", ferror(a.f) != 0, 0, ferror(b.f) != 0, 0);
            if (pick(2)) {
                clearerr(a.f);
                clearerr(b.f);
            }
            break;
        default:
            if (pick(8) == 0) {         /* now and then a new stream, at the file's start */
                close_stream(&a);
                close_stream(&b);
                open_pair(&a, &b, served, native);
                same_long("reopen", 0, 0, 0, 0);
                have_pos = 0;
            }
            break;
        }
    }
    close_stream(&a);
    close_stream(&b);
    free(line_a);
    free(line_b);
}

/* --------------------------------------------------------------- syscalls */

static int open_or_die(const char *path)
{
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        die(path);
    return fd;
}

static void same_offset(int a, int b)
{
    off_t oa = lseek(a, 0, SEEK_CUR), ob = lseek(b, 0, SEEK_CUR);
    same_long("offset", (long)oa, errno, (long)ob, errno);
}

/* steps the fd families share between their own */

static void step_lseek(int a, int b, off_t off)
{
    errno = 0;
    long ra = lseek(a, off, SEEK_SET);
    int ea = errno;
    long rb = lseek(b, off, SEEK_SET);
    int eb = errno;
    same_long("lseek", ra, ea, rb, eb);
}

/* a plain read of n bytes from each fd's offset */
static void step_read(int a, int b, size_t n)
{
    errno = 0;
    long ra = read(a, buf_a, n);
    int ea = errno;
    long rb = read(b, buf_b, n);
    int eb = errno;
    same_long("read", ra, ea, rb, eb);
    if (rb > 0)
        same_bytes("read", buf_a, buf_b, (size_t)rb, -1);
}

/* the served file opened anew at the native one's offset: its cache starts again from
 * holes (the mount keeps no idle cache). Now and then only: the next step that fills
 * whole (a submission to a ring, an fd sent away) costs a 4 MiB fill */
#define ANEW_EVERY 80   /* of the steps that may: 1 in 480 ops of pass and uring */
static void step_anew(int *a, const char *served, int b)
{
    off_t keep = lseek(b, 0, SEEK_CUR);
    close(*a);
    *a = open_or_die(served);
    lseek(*a, keep, SEEK_SET);
}

/* the steps between those of a family of its own (pass, uring): k 0, now and then anew
 * (else as 1); 1, an lseek to off; 2 and on, a read of at most 20,000 bytes */
static void step_between(int k, int *a, const char *served, int b, off_t off, size_t n)
{
    if (k == 0 && pick(ANEW_EVERY) == 0)
        step_anew(a, served, b);
    else if (k <= 1)
        step_lseek(*a, b, off);
    else
        step_read(*a, b, n % 20000);
}

static void vec(struct iovec *iov, int *cnt, char *base)
{
    *cnt = 1 + (int)pick(4);
    size_t at = 0;
    for (int i = 0; i < *cnt; i++) {
        size_t n = some_size() / (size_t)*cnt;
        if (at + n > BUF)
            n = BUF - at;
        iov[i].iov_base = base + at;
        iov[i].iov_len = n;
        at += n;
    }
}

static void syscalls_family(const char *served, const char *native, long ops)
{
    int a = open_or_die(served), b = open_or_die(native);
    for (op_now = 0; op_now < ops; op_now++) {
        long ra, rb;
        int ea, eb;
        size_t n = some_size();
        off_t off = some_offset();
        struct iovec va[4], vb[4];
        int cnt;
        errno = 0;
        switch (pick(8)) {
        case 7: {   /* a new open file description of the same file through /proc */
            char pa[64], pb[64];
            snprintf(pa, sizeof pa, "/proc/self/fd/%d", a);
            snprintf(pb, sizeof pb, "/proc/self/fd/%d", b);
            int ra_fd = open(pa, O_RDONLY), rb_fd = open(pb, O_RDONLY);
            if (ra_fd < 0 || rb_fd < 0)
                die("/proc/self/fd");
            ra = pread(ra_fd, buf_a, n, off); ea = errno;
            rb = pread(rb_fd, buf_b, n, off); eb = errno;
            close(ra_fd);
            close(rb_fd);
            same_long("pread of /proc/self/fd/N", ra, ea, rb, eb);
            break;
        }
        case 0:
            ra = read(a, buf_a, n); ea = errno;
            rb = read(b, buf_b, n); eb = errno;
            same_long("read", ra, ea, rb, eb);
            break;
        case 1:
            ra = pread(a, buf_a, n, off); ea = errno;
            rb = pread(b, buf_b, n, off); eb = errno;
            same_long("pread", ra, ea, rb, eb);
            break;
        case 2:
            vec(va, &cnt, buf_a);
            memcpy(vb, va, sizeof va);
            for (int i = 0; i < cnt; i++)
                vb[i].iov_base = buf_b + ((char *)va[i].iov_base - buf_a);
            ra = readv(a, va, cnt); ea = errno;
            rb = readv(b, vb, cnt); eb = errno;
            same_long("readv", ra, ea, rb, eb);
            break;
        case 3: case 4: {
            vec(va, &cnt, buf_a);
            memcpy(vb, va, sizeof va);
            for (int i = 0; i < cnt; i++)
                vb[i].iov_base = buf_b + ((char *)va[i].iov_base - buf_a);
            off_t at = pick(3) ? off : -1;      /* preadv2 at -1: the fd's offset */
            if (pick(8) == 0) {     /* by number: syscall() reaches the kernel's preadv2 */
                ra = syscall(SYS_preadv2, a, va, cnt, (long)at, 0L, 0); ea = errno;
                rb = syscall(SYS_preadv2, b, vb, cnt, (long)at, 0L, 0); eb = errno;
                same_long("syscall(SYS_preadv2)", ra, ea, rb, eb);
            } else if (pick(2) || at < 0) {
                ra = preadv2(a, va, cnt, at, 0); ea = errno;
                rb = preadv2(b, vb, cnt, at, 0); eb = errno;
                same_long("preadv2", ra, ea, rb, eb);
            } else {
                ra = preadv(a, va, cnt, at); ea = errno;
                rb = preadv(b, vb, cnt, at); eb = errno;
                same_long("preadv", ra, ea, rb, eb);
            }
            break;
        }
        default: {
            int whence = (int)pick(3);
            off_t to = whence == SEEK_SET ? off : whence == SEEK_CUR ? pick(400000) - 200000 : -pick(400000);
            ra = lseek(a, to, whence); ea = errno;
            rb = lseek(b, to, whence); eb = errno;
            same_long("lseek", ra, ea, rb, eb);
            continue;
        }
        }
        if (rb > 0)
            same_bytes("bytes read", buf_a, buf_b, (size_t)rb, (long)off);
        same_offset(a, b);
    }
    close(a);
    close(b);
}

/* ------------------------------------------------------------------- mmap */

static void mmap_family(const char *served, const char *native, long ops)
{
    int a = open_or_die(served), b = open_or_die(native);
    long page = sysconf(_SC_PAGESIZE);
    for (op_now = 0; op_now < ops; op_now++) {
        off_t off = (off_t)pick(file_size / page + 1) * page;
        size_t len = 1 + pick(pick(4) ? 70000 : 1 << 20);
        int flags = pick(2) ? MAP_PRIVATE : MAP_SHARED;
        char *ma = mmap(NULL, len, PROT_READ, flags, a, off);
        int ea = errno;
        char *mb = mmap(NULL, len, PROT_READ, flags, b, off);
        int eb = errno;
        same_long("mmap", ma == MAP_FAILED ? -1 : 0, ea, mb == MAP_FAILED ? -1 : 0, eb);
        if (mb == MAP_FAILED)
            continue;
        same_bytes(flags == MAP_PRIVATE ? "mmap private" : "mmap shared", ma, native_bytes + off,
                   in_file(off, len), (long)off);
        munmap(ma, len);
        munmap(mb, len);
    }
    close(a);
    close(b);
}

/* ------------------------------------------------------------------- copy */

/* all a pipe holds, at most n bytes (the writer wrote at most the pipe's size) */
static size_t drain(int fd, char *to, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, to + got, n - got);
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    return got;
}

static void copy_family(const char *served, const char *native, const char *scratch_a, const char *scratch_b,
                        long ops)
{
    int a = open_or_die(served), b = open_or_die(native);
    int pa[2], pb[2];
    if (pipe2(pa, O_NONBLOCK) < 0 || pipe2(pb, O_NONBLOCK) < 0)
        die("pipe");
    int pipe_size = 1 << 20;
    if (fcntl(pa[1], F_SETPIPE_SZ, pipe_size) < 0 || fcntl(pb[1], F_SETPIPE_SZ, pipe_size) < 0)
        pipe_size = 65536;
    const char *sa = scratch_a, *sb = scratch_b;
    int oa = open(sa, O_RDWR | O_CREAT | O_TRUNC, 0600), ob = open(sb, O_RDWR | O_CREAT | O_TRUNC, 0600);
    char native_dest[4300];
    snprintf(native_dest, sizeof native_dest, "%s.native-dest", sb);
    int on = open(native_dest, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (oa < 0 || ob < 0 || on < 0)
        die("scratch file");
    for (op_now = 0; op_now < ops; op_now++) {
        long ra, rb;
        int ea, eb;
        size_t n = some_size();
        if (n > (size_t)pipe_size)
            n = (size_t)pipe_size;
        off_t off = some_offset(), offa = off, offb = off;
        int positional = (int)pick(2);
        const char *what;
        int to_pipe = 1;
        errno = 0;
        switch (pick(5)) {
        case 0:
            what = "sendfile";
            ra = sendfile(pa[1], a, positional ? &offa : NULL, n); ea = errno;
            rb = sendfile(pb[1], b, positional ? &offb : NULL, n); eb = errno;
            break;
        case 1:
            what = "splice";
            ra = splice(a, positional ? &offa : NULL, pa[1], NULL, n, 0); ea = errno;
            rb = splice(b, positional ? &offb : NULL, pb[1], NULL, n, 0); eb = errno;
            break;
        case 2:
            what = "copy_file_range";
            to_pipe = 0;
            if (pick(3) == 0) {
                /* to a native file: another file system, EXDEV as over kernel FUSE */
                what = "copy_file_range to a native file";
                ra = copy_file_range(a, positional ? &offa : NULL, on, NULL, n, 0); ea = errno;
                rb = copy_file_range(b, positional ? &offb : NULL, ob, NULL, n, 0); eb = errno;
                if (ra < 0 && ea == EXDEV)
                    break;
                same_long(what, ra, ea, rb, eb);    /* a kernel that copies across: the bytes */
                if (ra > 0) {
                    off_t at = lseek(on, 0, SEEK_CUR) - ra;
                    if (pread(on, buf_a, (size_t)ra, at) != ra)
                        die("native destination");
                    lseek(ob, -rb, SEEK_CUR);
                    if (read(ob, buf_b, (size_t)rb) != rb)
                        die("native destination");
                    same_bytes(what, buf_a, buf_b, (size_t)rb, positional ? (long)off : -1);
                }
                same_offset(a, b);
                continue;
            }
            ra = copy_file_range(a, positional ? &offa : NULL, oa, NULL, n, 0); ea = errno;
            rb = copy_file_range(b, positional ? &offb : NULL, ob, NULL, n, 0); eb = errno;
            break;
        case 3:
            step_lseek(a, b, off);
            continue;
        default:
            step_read(a, b, n % 9000);
            continue;
        }
        if (ra < 0 && ea == EXDEV && rb >= 0 && !to_pipe) {
            /* a copy from the mount to another file system, as over kernel FUSE: the
             * caller copies by read() and write() (cp does); nothing moved */
            if (rb > 0 && !positional)
                lseek(b, -rb, SEEK_CUR);
            same_offset(a, b);
            continue;
        }
        same_long(what, ra, ea, rb, eb);
        same_long("offset passed", (long)offa, 0, (long)offb, 0);
        if (rb > 0) {
            size_t ga, gb;
            if (to_pipe) {
                ga = drain(pa[0], buf_a, (size_t)ra);
                gb = drain(pb[0], buf_b, (size_t)rb);
            } else {
                off_t ea_ = lseek(oa, 0, SEEK_CUR), eb_ = lseek(ob, 0, SEEK_CUR);
                ga = (size_t)pread(oa, buf_a, (size_t)ra, ea_ - ra);
                gb = (size_t)pread(ob, buf_b, (size_t)rb, eb_ - rb);
                if (ea_ > (off_t)(8 << 20)) {       /* keep the scratch files small */
                    ftruncate(oa, 0); lseek(oa, 0, SEEK_SET);
                    ftruncate(ob, 0); lseek(ob, 0, SEEK_SET);
                }
            }
            same_long("bytes moved", (long)ga, 0, (long)gb, 0);
            same_bytes(what, buf_a, buf_b, gb, positional ? (long)off : -1);
        }
        same_offset(a, b);
    }
    close(a);
    close(b);
    close(oa);
    close(ob);
    close(on);
    unlink(sa);
    unlink(sb);
    unlink(native_dest);
    close(pa[0]); close(pa[1]); close(pb[0]); close(pb[1]);
}

/* -------------------------------------------------------------------- aio */

/* one request (or a list of them, LIO_WAIT) on fd: what aio_return gives, bytes in `to` */
static long aio_op(int fd, int list, off_t off, size_t n, char *to)
{
    struct aiocb cb[3];
    struct aiocb *l[3];
    memset(cb, 0, sizeof cb);
    for (int i = 0; i < 3; i++) {
        cb[i].aio_fildes = fd;
        cb[i].aio_offset = off + (off_t)(i * n);
        cb[i].aio_buf = to + i * n;
        cb[i].aio_nbytes = n;
        cb[i].aio_lio_opcode = LIO_READ;
        l[i] = &cb[i];
    }
    if (list) {
        if (lio_listio(LIO_WAIT, l, 3, NULL) < 0 && errno != EIO)
            return -1000 - errno;
    } else {
        if (aio_read(&cb[0]) < 0)
            return -1000 - errno;
        const struct aiocb *w[1] = { &cb[0] };
        while (aio_error(&cb[0]) == EINPROGRESS)
            aio_suspend(w, 1, NULL);
    }
    long total = 0;
    for (int i = 0; i < (list ? 3 : 1); i++) {
        ssize_t r = aio_return(&cb[i]);
        if (r < 0)
            return -2000 - aio_error(&cb[i]);
        total = total * 10000000 + r;   /* each count, in one number to compare */
    }
    return total;
}

static void aio_family(const char *served, const char *native, long ops)
{
    int a = open_or_die(served), b = open_or_die(native);
    for (op_now = 0; op_now < ops; op_now++) {
        int list = (int)pick(2);
        size_t n = some_size() / (list ? 3 : 1);
        off_t off = some_offset();
        long ra = aio_op(a, list, off, n, buf_a), rb = aio_op(b, list, off, n, buf_b);
        same_long(list ? "lio_listio" : "aio_read", ra, 0, rb, 0);
        if (rb >= 0)    /* the requests' spans: what each read is where it was asked */
            for (int i = 0; i < (list ? 3 : 1); i++) {
                off_t at = off + (off_t)(i * n);
                size_t len = at >= file_size ? 0 : (size_t)(file_size - at) < n ? (size_t)(file_size - at) : n;
                same_bytes(list ? "lio_listio" : "aio_read", buf_a + i * n, buf_b + i * n, len, (long)at);
            }
    }
    close(a);
    close(b);
}

/* ------------------------------------------------------------------ child */

static char *self;

static long full_read(int fd, char *to, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = read(fd, to + got, n - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return (long)got;
}

/* a process of ours (this program run as `differential MODE`), preloaded or not, on a
 * socket of ours: its fd 3, or its fd 4 when it inherits fd as its 3 */
struct receiver { int sock; pid_t pid; };

static void start_helper(struct receiver *rc, int preloaded, char *mode, int fd)
{
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        die("socketpair");
    rc->pid = fork();
    if (rc->pid < 0)
        die("fork");
    if (rc->pid == 0) {
        if (fd >= 0) {
            dup2(fd, 3);
            dup2(sv[1], 4);
        } else {
            dup2(sv[1], 3);
        }
        static char *bare[] = { "PATH=/usr/bin:/bin", NULL };
        char *argv[] = { self, mode, NULL };
        execve(self, argv, preloaded ? environ : bare);
        _exit(127);
    }
    close(sv[1]);
    rc->sock = sv[0];
}

static void stop_receiver(struct receiver *rc)
{
    close(rc->sock);
    waitpid(rc->pid, NULL, 0);
}

/* differential child-read LEN: what fd 3 gives from its offset, at most LEN bytes, to
 * stdout; the offset moves as a reader's does */
static int child_read(long len)
{
    char b[65536];
    while (len > 0) {
        ssize_t r = read(3, b, (size_t)len < sizeof b ? (size_t)len : sizeof b);
        if (r <= 0)
            return r < 0 ? 3 : 0;
        if (write(1, b, (size_t)r) != r)
            return 4;
        len -= r;
    }
    return 0;
}

/* a child reading fd (as its 3) LEN bytes into buf: with the interposer or without */
static long run_child(int fd, long len, int preloaded, int by_shell, char *into)
{
    int p[2];
    if (pipe(p) < 0)
        die("pipe");
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        close(p[0]);
        dup2(p[1], 1);
        dup2(fd, 3);
        char **env = environ;
        if (!preloaded) {
            static char *bare[] = { "PATH=/usr/bin:/bin", NULL };
            env = bare;
        }
        char n[32];
        snprintf(n, sizeof n, "%ld", len);
        if (by_shell) {
            char *argv[] = { "sh", "-c", "exec head -c \"$1\" <&3", "sh", n, NULL };
            execve("/bin/sh", argv, env);
        } else {
            char *argv[] = { self, "child-read", n, NULL };
            execve(self, argv, env);
        }
        _exit(127);
    }
    close(p[1]);
    long got = 0;
    for (;;) {
        ssize_t r = read(p[0], into + got, (size_t)(BUF - got));
        if (r <= 0)
            break;
        got += r;
    }
    close(p[0]);
    int st;
    waitpid(pid, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0)
        return -1000 - (WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st));
    return got;
}

/* differential child-serve: fd 3 inherited, fd 4 a socket; for each count LEN read from
 * fd 4, what fd 3 gives from its offset (as child-read), after its count (a read's
 * error: -1000 - errno): a child that lives through the parent's reads and seeks */
static int child_serve(void)
{
    char *b = malloc(BUF);
    long len;
    while (full_read(4, (char *)&len, sizeof len) == sizeof len) {
        long got = 0;
        while (got < len) {
            size_t want = (size_t)(len - got) < 65536 ? (size_t)(len - got) : 65536;
            ssize_t r = read(3, b + got, want);
            if (r < 0)
                got = -1000 - errno;
            if (r <= 0)
                break;
            got += r;
        }
        if (write(4, &got, sizeof got) != sizeof got || (got > 0 && write(4, b, (size_t)got) != got))
            return 4;
    }
    return 0;
}

/* what a long-lived child read of its fd 3, at most len bytes, into `into` */
static long ask_child(struct receiver *rc, long len, char *into)
{
    if (write(rc->sock, &len, sizeof len) != sizeof len)
        die("child");
    long r;
    if (full_read(rc->sock, (char *)&r, sizeof r) < 0)
        die("child");
    if (r > 0 && full_read(rc->sock, into, (size_t)r) < 0)
        die("child");
    return r;
}

/* children reading the fd they inherited, between the parent's reads and seeks: each
 * seed's four long-lived ones (the fd inherited once across fork and exec, preloaded and
 * bare, for each side), and now and then one that is forked and exec'd for a single read
 * (by this program or by sh and head) */
#define ONE_SHOT_EVERY 1000
static void child_family(const char *served, const char *native, long ops)
{
    int a = open_or_die(served), b = open_or_die(native);
    struct receiver ca_pre, ca_bare, cb_pre, cb_bare;
    start_helper(&ca_pre, 1, "child-serve", a);
    start_helper(&ca_bare, 0, "child-serve", a);
    start_helper(&cb_pre, 1, "child-serve", b);
    start_helper(&cb_bare, 0, "child-serve", b);
    for (op_now = 0; op_now < ops; op_now++) {
        long ra, rb;
        size_t n = some_size() % 300000;
        switch (pick(4)) {
        case 0: {
            int preloaded = (int)pick(2);
            if (pick(ONE_SHOT_EVERY) == 0) {
                int shell = (int)pick(2);
                ra = run_child(a, (long)n, preloaded, shell, buf_a);
                rb = run_child(b, (long)n, preloaded, shell, buf_b);
                same_long(preloaded ? (shell ? "child sh+head" : "child") : (shell ? "bare child sh+head" : "bare child"),
                          ra, 0, rb, 0);
            } else {
                ra = ask_child(preloaded ? &ca_pre : &ca_bare, (long)n, buf_a);
                rb = ask_child(preloaded ? &cb_pre : &cb_bare, (long)n, buf_b);
                same_long(preloaded ? "long-lived child" : "long-lived bare child", ra, 0, rb, 0);
            }
            if (rb > 0)
                same_bytes("child", buf_a, buf_b, (size_t)rb, -1);
            break;
        }
        case 1:
            step_lseek(a, b, some_offset());
            break;
        default:
            step_read(a, b, n % 20000);
            break;
        }
        same_offset(a, b);
    }
    stop_receiver(&ca_pre);
    stop_receiver(&ca_bare);
    stop_receiver(&cb_pre);
    stop_receiver(&cb_bare);
    close(a);
    close(b);
}

/* ------------------------------------------------------------------ hints */

/* readahead, posix_fadvise (every advice, DONTNEED included) and preadv2 with RWF flags,
 * between plain reads: hints return no data, but must not leave the cache unfilled or
 * change what the next read gives */
static void hints_family(const char *served, const char *native, long ops)
{
    int a = open_or_die(served), b = open_or_die(native);
    static const int advice[] = { POSIX_FADV_NORMAL, POSIX_FADV_SEQUENTIAL, POSIX_FADV_RANDOM,
                                  POSIX_FADV_NOREUSE, POSIX_FADV_WILLNEED, POSIX_FADV_DONTNEED };
    static const int rwf[] = { 0, RWF_HIPRI, RWF_NOWAIT, RWF_DSYNC, RWF_SYNC, RWF_HIPRI | RWF_NOWAIT };
    for (op_now = 0; op_now < ops; op_now++) {
        long ra, rb;
        int ea, eb;
        size_t n = some_size();
        if (n > BUF)
            n = BUF;
        off_t off = some_offset();
        errno = 0;
        switch (pick(6)) {
        case 0:
            ra = readahead(a, off, n); ea = errno;
            rb = readahead(b, off, n); eb = errno;
            same_long("readahead", ra, ea, rb, eb);
            break;
        case 1: {
            int adv = advice[pick(6)];
            off_t len = pick(3) ? (off_t)n : 0;     /* 0: to the end */
            ra = posix_fadvise(a, off, len, adv);
            rb = posix_fadvise(b, off, len, adv);
            same_long("posix_fadvise", ra, ra, rb, rb);
            break;
        }
        case 2: case 3: {
            int flags = rwf[pick(6)];
            off_t at = pick(3) ? off : -1;
            struct iovec va = { buf_a, n }, vb = { buf_b, n };
            ra = preadv2(a, &va, 1, at, flags); ea = errno;
            rb = preadv2(b, &vb, 1, at, flags); eb = errno;
            if ((flags & RWF_NOWAIT) && ((ra < 0 && ea == EAGAIN) || (rb < 0 && eb == EAGAIN) ||
                                         (ra >= 0 && rb >= 0 && ra != rb))) {
                /* not in memory yet on one side (a native page not read yet, a memfd
                 * page the fill just made): NOWAIT may answer EAGAIN or read less there;
                 * the caller reads again without it, as the man page says */
                if (at < 0) {
                    if (ra > 0) lseek(a, -ra, SEEK_CUR);
                    if (rb > 0) lseek(b, -rb, SEEK_CUR);
                }
                ra = preadv2(a, &va, 1, at, flags & ~RWF_NOWAIT); ea = errno;
                rb = preadv2(b, &vb, 1, at, flags & ~RWF_NOWAIT); eb = errno;
            }
            same_long("preadv2 flags", ra, ea, rb, eb);
            if (rb > 0)
                same_bytes("preadv2 flags", buf_a, buf_b, (size_t)rb, (long)at);
            break;
        }
        case 4:
            step_lseek(a, b, off);
            break;
        default:
            step_read(a, b, n % 70000);
            break;
        }
        same_offset(a, b);
    }
    close(a);
    close(b);
}

/* ------------------------------------------------------------------- pass */

/* fd over a Unix socket (SCM_RIGHTS): by sendmsg or sendmmsg */
static int send_fd(int sock, int fd, long off, long len, int many)
{
    long body[2] = { off, len };
    struct iovec iov = { body, sizeof body };
    union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } ctl;
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b };
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    if (many) {
        struct mmsghdr mm = { .msg_hdr = m };
        return sendmmsg(sock, &mm, 1, 0) == 1 ? 0 : -1;
    }
    return sendmsg(sock, &m, 0) == (ssize_t)sizeof body ? 0 : -1;
}

static int recv_fd(int sock, long *off, long *len)
{
    long body[2];
    struct iovec iov = { body, sizeof body };
    union { char b[CMSG_SPACE(sizeof(int))]; struct cmsghdr align; } ctl;
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl.b, .msg_controllen = sizeof ctl.b };
    if (recvmsg(sock, &m, 0) != (ssize_t)sizeof body)
        return -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&m);
    if (c == NULL || c->cmsg_type != SCM_RIGHTS)
        return -1;
    int fd;
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
    *off = body[0];
    *len = body[1];
    return fd;
}

/* differential recv-read: receives fds on fd 3 until it closes; for each, pread LEN bytes
 * at OFF (OFF < 0: read from the fd's offset) and writes them to fd 3 after their count */
static int recv_read(void)
{
    char *b = malloc(BUF);
    for (;;) {
        long off, len;
        int fd = recv_fd(3, &off, &len);
        if (fd < 0)
            return 0;
        long r = off < 0 ? read(fd, b, (size_t)len) : pread(fd, b, (size_t)len, off);
        close(fd);
        if (write(3, &r, sizeof r) != sizeof r || (r > 0 && write(3, b, (size_t)r) != r))
            return 4;
    }
}



/* what the receiver read of fd at off (-1: its offset), len bytes at most, into `into` */
static long pass_to(struct receiver *rc, int fd, long off, long len, int many, char *into)
{
    if (send_fd(rc->sock, fd, off, len, many) < 0)
        return -1000 - errno;
    long r;
    if (full_read(rc->sock, (char *)&r, sizeof r) < 0)
        die("receiver");
    if (r > 0 && full_read(rc->sock, into, (size_t)r) < 0)
        die("receiver");
    return r;
}

/* to this process itself, over its socket pair sv: the fd comes back under a new number
 * that no wrapper knows */
static long pass_to_self(int sv[2], int fd, long off, long len, int many, char *into)
{
    long r = -1000;
    if (send_fd(sv[0], fd, off, len, many) == 0) {
        long o, l;
        int got = recv_fd(sv[1], &o, &l);
        if (got < 0)
            die("recvmsg");
        r = off < 0 ? read(got, into, (size_t)len) : pread(got, into, (size_t)len, off);
        close(got);
    } else {
        r = -1000 - errno;
    }
    return r;
}

/* a cached fd sent over a Unix socket: read by a preloaded and a bare process and by this
 * one under a new number; the file is opened anew now and then (a fresh cache of holes) */
static void pass_family(const char *served, const char *native, long ops)
{
    int a = open_or_die(served), b = open_or_die(native);
    struct receiver ra_bare, rb_bare, ra_pre, rb_pre;
    start_helper(&ra_bare, 0, "recv-read", -1);
    start_helper(&rb_bare, 0, "recv-read", -1);
    start_helper(&ra_pre, 1, "recv-read", -1);
    start_helper(&rb_pre, 1, "recv-read", -1);
    int self_a[2], self_b[2];
    if (socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, self_a) < 0 ||
        socketpair(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0, self_b) < 0)
        die("socketpair");
    for (op_now = 0; op_now < ops; op_now++) {
        long ra, rb;
        size_t n = some_size();
        if (n > BUF)
            n = BUF;
        off_t off = some_offset();
        long at = pick(3) ? (long)off : -1;
        int many = (int)pick(2);
        int k = (int)pick(6);
        switch (k) {
        case 0:
            ra = pass_to_self(self_a, a, at, (long)n, many, buf_a);
            rb = pass_to_self(self_b, b, at, (long)n, many, buf_b);
            same_long("passed to itself", ra, 0, rb, 0);
            if (rb > 0)
                same_bytes("passed to itself", buf_a, buf_b, (size_t)rb, at);
            break;
        case 1: case 2: {
            int pre = (int)pick(2);
            ra = pass_to(pre ? &ra_pre : &ra_bare, a, at, (long)n, many, buf_a);
            rb = pass_to(pre ? &rb_pre : &rb_bare, b, at, (long)n, many, buf_b);
            same_long(pre ? "passed to a preloaded process" : "passed to a bare process", ra, 0, rb, 0);
            if (rb > 0)
                same_bytes("passed", buf_a, buf_b, (size_t)rb, at);
            break;
        }
        default:
            step_between(k - 3, &a, served, b, off, n);
            break;
        }
        same_offset(a, b);
    }
    stop_receiver(&ra_bare);
    stop_receiver(&rb_bare);
    stop_receiver(&ra_pre);
    stop_receiver(&rb_pre);
    close(self_a[0]); close(self_a[1]); close(self_b[0]); close(self_b[1]);
    close(a);
    close(b);
}

/* ----------------------------------------------------------------- mremap */

/* a mapping of a range, grown by mremap (in place or moved), read over its new length;
 * now and then with the fd closed before the growth (then nothing can fill the growth:
 * the served side may refuse it with ENOMEM, never show a hole) */
static void mremap_family(const char *served, const char *native, long ops)
{
    int a = open_or_die(served), b = open_or_die(native);
    long page = sysconf(_SC_PAGESIZE);
    for (op_now = 0; op_now < ops; op_now++) {
        off_t off = (off_t)pick(file_size / page + 1) * page;
        size_t len = 1 + pick(pick(4) ? 70000 : 1 << 20);
        size_t grown = len + 1 + pick(pick(2) ? 300000 : 2 << 20);
        int flags = pick(2) ? MAP_PRIVATE : MAP_SHARED;
        char *ma = mmap(NULL, len, PROT_READ, flags, a, off);
        int ea = errno;
        char *mb = mmap(NULL, len, PROT_READ, flags, b, off);
        int eb = errno;
        same_long("mmap", ma == MAP_FAILED ? -1 : 0, ea, mb == MAP_FAILED ? -1 : 0, eb);
        if (mb == MAP_FAILED)
            continue;
        int closed = pick(400) == 0;    /* a fresh cache after: 25 a seed */
        if (closed) {
            close(a);
            close(b);
        }
        int how = (int)pick(2) ? MREMAP_MAYMOVE : 0;
        char *ga = mremap(ma, len, grown, how);
        ea = errno;
        char *gb = mremap(mb, len, grown, how);
        eb = errno;
        if (closed && ga == MAP_FAILED && ea == ENOMEM) {
            /* refused, not a hole: what the served side promises with no fd to fill from */
        } else {
            if (how == 0 && (ga == MAP_FAILED) != (gb == MAP_FAILED)) {
                /* in place: whether the next pages are free is the address space's */
            } else {
                same_long("mremap", ga == MAP_FAILED ? -1 : 0, ea, gb == MAP_FAILED ? -1 : 0, eb);
            }
            if (ga != MAP_FAILED)
                same_bytes(flags == MAP_PRIVATE ? "mremap private" : "mremap shared", ga, native_bytes + off,
                           in_file(off, grown), (long)off);
        }
        munmap(ga != MAP_FAILED ? ga : ma, ga != MAP_FAILED ? grown : len);
        munmap(gb != MAP_FAILED ? gb : mb, gb != MAP_FAILED ? grown : len);
        if (closed) {
            a = open_or_die(served);
            b = open_or_die(native);
        }
    }
    close(a);
    close(b);
}

/* ------------------------------------------------------------------ uring */

/* a ring made with libc's syscall() (as libuv and the io-uring crate make theirs), or with
 * inline system calls as liburing makes them (DIFFERENTIAL_INLINE: seen only by the safety
 * net): one IORING_OP_READ at a time, of an fd or of a registered file */
static int inline_calls;

static long ring_call(long nr, long a, long b, long c, long d, long e, long f)
{
    if (!inline_calls)
        return syscall(nr, a, b, c, d, e, f);
#if defined(__x86_64__)
    long r;
    register long r10 __asm__("r10") = d, r8 __asm__("r8") = e, r9 __asm__("r9") = f;
    __asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    if (r < 0 && r > -4096) {
        errno = (int)-r;
        return -1;
    }
    return r;
#else
    return syscall(nr, a, b, c, d, e, f);
#endif
}

struct ring {
    int fd;
    unsigned *sq_tail, *sq_mask, *sq_array, *cq_head, *cq_tail, *cq_mask;
    struct io_uring_sqe *sqes;
    struct io_uring_cqe *cqes;
};

#ifdef DIFFERENTIAL_LIBURING
/* liburing's functions: linked, or found by dlsym after a dlopen made while a served file
 * is open (the preload must notice the library the loader brings in) */
static struct {
    int (*queue_init)(unsigned, struct io_uring *, unsigned);
    struct io_uring_sqe *(*get_sqe)(struct io_uring *);
    int (*submit)(struct io_uring *);
    int (*get_cqe)(struct io_uring *, struct io_uring_cqe **, unsigned, unsigned, sigset_t *);
    int (*register_files)(struct io_uring *, const int *, unsigned);
    int (*unregister_files)(struct io_uring *);
} lib;
static struct io_uring lring;

static void *load_in_thread(void *unused)
{
    (void)unused;
    return dlopen("liburing.so.2", RTLD_NOW);
}

static void liburing_load(void)
{
#ifdef DIFFERENTIAL_LIBURING_LINKED
    lib.queue_init = io_uring_queue_init;
    lib.get_sqe = io_uring_get_sqe;
    lib.submit = io_uring_submit;
    lib.get_cqe = __io_uring_get_cqe;
    lib.register_files = io_uring_register_files;
    lib.unregister_files = io_uring_unregister_files;
#else
    if (lib.queue_init)
        return;
    void *h;
    if (getenv("DIFFERENTIAL_DLOPEN_THREAD")) {  /* loaded by another thread than the ring's */
        pthread_t t;
        if (pthread_create(&t, NULL, load_in_thread, NULL) != 0 || pthread_join(t, &h) != 0)
            die("pthread");
    } else {
        h = dlopen("liburing.so.2", RTLD_NOW);
    }
    if (h == NULL) {
        fprintf(stderr, "differential: %s\n", dlerror());
        exit(2);
    }
    *(void **)&lib.queue_init = dlsym(h, "io_uring_queue_init");
    *(void **)&lib.get_sqe = dlsym(h, "io_uring_get_sqe");
    *(void **)&lib.submit = dlsym(h, "io_uring_submit");
    *(void **)&lib.get_cqe = dlsym(h, "__io_uring_get_cqe");
    *(void **)&lib.register_files = dlsym(h, "io_uring_register_files");
    *(void **)&lib.unregister_files = dlsym(h, "io_uring_unregister_files");
    if (!lib.queue_init || !lib.get_sqe || !lib.submit || !lib.get_cqe || !lib.register_files ||
        !lib.unregister_files) {
        fprintf(stderr, "differential: liburing.so.2 lacks a function\n");
        exit(2);
    }
#endif
}
#endif

static int ring_setup(struct ring *r)
{
#ifdef DIFFERENTIAL_LIBURING
    static int made;
    liburing_load();
    if (made)
        return 0;
    int e = lib.queue_init(4, &lring, 0);
    if (e < 0) {
        errno = -e;
        return -1;
    }
    made = 1;
    r->fd = lring.ring_fd;
    return 0;
#endif
    {
    struct io_uring_params p;
    memset(&p, 0, sizeof p);
    r->fd = (int)ring_call(SYS_io_uring_setup, 4, (long)&p, 0, 0, 0, 0);
    if (r->fd < 0)
        return -1;
    size_t sq_len = p.sq_off.array + p.sq_entries * sizeof(unsigned);
    size_t cq_len = p.cq_off.cqes + p.cq_entries * sizeof(struct io_uring_cqe);
    char *sq = mmap(NULL, sq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQ_RING);
    char *cq = mmap(NULL, cq_len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_CQ_RING);
    r->sqes = mmap(NULL, p.sq_entries * sizeof(struct io_uring_sqe), PROT_READ | PROT_WRITE,
                   MAP_SHARED | MAP_POPULATE, r->fd, IORING_OFF_SQES);
    if (sq == MAP_FAILED || cq == MAP_FAILED || r->sqes == MAP_FAILED)
        die("io_uring mmap");
    r->sq_tail = (unsigned *)(sq + p.sq_off.tail);
    r->sq_mask = (unsigned *)(sq + p.sq_off.ring_mask);
    r->sq_array = (unsigned *)(sq + p.sq_off.array);
    r->cq_head = (unsigned *)(cq + p.cq_off.head);
    r->cq_tail = (unsigned *)(cq + p.cq_off.tail);
    r->cq_mask = (unsigned *)(cq + p.cq_off.ring_mask);
    r->cqes = (struct io_uring_cqe *)(cq + p.cq_off.cqes);
    return 0;
    }
}

/* register fd as the ring's file 0 (fd < 0: unregister): 0, or -1 with errno */
static long ring_register(struct ring *r, int fd)
{
#ifdef DIFFERENTIAL_LIBURING
    (void)r;
    int e = fd < 0 ? lib.unregister_files(&lring) : lib.register_files(&lring, &fd, 1);
    if (e < 0) {
        errno = -e;
        return -1;
    }
    return 0;
#else
    if (fd < 0)
        return ring_call(SYS_io_uring_register, r->fd, IORING_UNREGISTER_FILES, 0, 0, 0, 0);
    return ring_call(SYS_io_uring_register, r->fd, IORING_REGISTER_FILES, (long)&fd, 1, 0, 0);
#endif
}

/* read n bytes at off (-1: the fd's offset) of fd (fixed: registered file 0): the cqe's res */
static long ring_read(struct ring *r, int fd, int fixed, off_t off, size_t n, char *to)
{
#ifdef DIFFERENTIAL_LIBURING
    {
        struct io_uring_sqe *e = lib.get_sqe(&lring);
        struct io_uring_cqe *c;
        io_uring_prep_read(e, fixed ? 0 : fd, to, (unsigned)n, (uint64_t)off);
        if (fixed)
            e->flags |= IOSQE_FIXED_FILE;
        int k = lib.submit(&lring);
        if (k < 0)
            return -1000 + k;
        k = lib.get_cqe(&lring, &c, 0, 1, NULL);
        if (k < 0)
            return -2000 + k;
        long res = c->res;
        io_uring_cqe_seen(&lring, c);
        return res;
    }
#endif
    unsigned tail = *r->sq_tail, i = tail & *r->sq_mask;
    struct io_uring_sqe *e = &r->sqes[i];
    memset(e, 0, sizeof *e);
    e->opcode = IORING_OP_READ;
    e->fd = fixed ? 0 : fd;
    e->flags = fixed ? IOSQE_FIXED_FILE : 0;
    e->off = (uint64_t)off;
    e->addr = (uint64_t)(uintptr_t)to;
    e->len = (unsigned)n;
    r->sq_array[i] = i;
    __atomic_store_n(r->sq_tail, tail + 1, __ATOMIC_RELEASE);
    if (ring_call(SYS_io_uring_enter, r->fd, 1, 1, IORING_ENTER_GETEVENTS, 0, 0) < 0)
        return -1000 - errno;
    unsigned head = *r->cq_head;
    if (head == __atomic_load_n(r->cq_tail, __ATOMIC_ACQUIRE))
        return -3000;
    long res = r->cqes[head & *r->cq_mask].res;
    __atomic_store_n(r->cq_head, head + 1, __ATOMIC_RELEASE);
    return res;
}

static void uring_family(const char *served, const char *native, long ops)
{
    struct ring r;
    int a = open_or_die(served), b = open_or_die(native);
    if (ring_setup(&r) < 0) {
        printf("differential: io_uring_setup: %s: the family cannot run here\n", strerrorname_np(errno));
        exit(3);
    }
    for (op_now = 0; op_now < ops; op_now++) {
        long ra, rb;
        int ea, eb;
        size_t n = some_size();
        if (n > BUF)
            n = BUF;
        off_t off = some_offset();
        int k = (int)pick(6);
        switch (k) {
        case 0: case 1: {
            off_t at = pick(3) ? off : -1;
            ra = ring_read(&r, a, 0, at, n, buf_a);
            rb = ring_read(&r, b, 0, at, n, buf_b);
            same_long("io_uring read", ra, 0, rb, 0);
            if (rb > 0)
                same_bytes("io_uring read", buf_a, buf_b, (size_t)rb, (long)at);
            break;
        }
        case 2: {       /* a registered file, closed before the read: the ring keeps it */
            int fa = open_or_die(served), fb = open_or_die(native);
            ra = ring_register(&r, fa); ea = errno;
            close(fa);
            if (ra == 0)
                ra = ring_read(&r, -1, 1, off, n, buf_a);
            ring_register(&r, -1);
            rb = ring_register(&r, fb); eb = errno;
            close(fb);
            if (rb == 0)
                rb = ring_read(&r, -1, 1, off, n, buf_b);
            ring_register(&r, -1);
            same_long("io_uring read of a registered file", ra, ea, rb, eb);
            if (rb > 0)
                same_bytes("io_uring read of a registered file", buf_a, buf_b, (size_t)rb, (long)off);
            break;
        }
        default:
            step_between(k - 3, &a, served, b, off, n);
            break;
        }
        same_offset(a, b);
    }
    close(a);
    close(b);
#ifndef DIFFERENTIAL_LIBURING
    close(r.fd);        /* liburing's ring serves every seed */
#endif
}

/* DIFFERENTIAL_CREATE: the served file is written first, by this process (a memory file
 * system of the embedded mode lives in the process) */
static void copy_into(const char *served, const char *native)
{
    int out = open(served, O_WRONLY | O_CREAT | O_EXCL, 0644);
    if (out < 0 && errno == EEXIST) {
        /* another checker of the same run (shared mode: one file system) writes it: its
         * size is whole once the last write is done */
        struct stat st;
        for (int i = 0; i < 6000 && stat(served, &st) == 0 && st.st_size < file_size; i++)
            usleep(10000);
        return;
    }
    if (out < 0)
        die(served);
    int in = open_or_die(native);
    char b[65536];
    ssize_t n;
    while ((n = read(in, b, sizeof b)) > 0)
        if (write(out, b, (size_t)n) != n)
            die(served);
    if (n < 0 || close(out) < 0)
        die(served);
    close(in);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "child-read") == 0)
        return child_read(atol(argv[2]));
    if (argc == 2 && strcmp(argv[1], "recv-read") == 0)
        return recv_read();
    if (argc == 2 && strcmp(argv[1], "child-serve") == 0)
        return child_serve();
    if (argc != 7 && argc != 8) {
        fprintf(stderr, "usage: differential stdio|syscalls|mmap|copy|child|aio|hints|pass|mremap|uring SERVED NATIVE FIRST_SEED SEEDS OPS "
                "[SCRATCH_SERVED]\n");
        return 2;
    }
    self = realpath("/proc/self/exe", NULL);
    trace = getenv("DIFFERENTIAL_TRACE") != NULL;
    inline_calls = getenv("DIFFERENTIAL_INLINE") != NULL;
    family = argv[1];
    const char *served = argv[2], *native = argv[3];
    long first = atol(argv[4]), seeds = atol(argv[5]), ops = atol(argv[6]);
    struct stat st;
    if (stat(native, &st) < 0)
        die(native);
    file_size = st.st_size;
    if (getenv("DIFFERENTIAL_CREATE"))
        copy_into(served, native);
    if (stat(served, &st) < 0)
        die(served);
    if (st.st_size != file_size) {
        printf("mismatch family=%s: size served %lld, native %lld\n", family, (long long)st.st_size,
               (long long)file_size);
        return 1;
    }
    buf_a = malloc(BUF);
    buf_b = malloc(BUF);
    native_bytes = malloc((size_t)file_size + 1);
    int nfd = open_or_die(native);
    for (off_t got = 0; got < file_size;) {
        ssize_t r = pread(nfd, native_bytes + got, (size_t)(file_size - got), got);
        if (r <= 0)
            die(native);
        got += r;
    }
    close(nfd);
    /* copy_file_range's destinations: a file beside each (in the mount, when given) */
    char scratch_a[4200], scratch_b[4200];
    /* each checker its own (the test runs several at once, on parts of the seeds) */
    snprintf(scratch_b, sizeof scratch_b, "%s.scratch.%d", native, (int)getpid());
    if (argc == 8)
        snprintf(scratch_a, sizeof scratch_a, "%s.%d", argv[7], (int)getpid());
    else
        snprintf(scratch_a, sizeof scratch_a, "%s.scratch-served.%d", native, (int)getpid());
    for (seed_now = first; seed_now < first + seeds; seed_now++) {
        rng = 0x9E3779B97F4A7C15ull ^ (uint64_t)seed_now * 0x2545F4914F6CDD1Dull;
        next();
        if (strcmp(family, "stdio") == 0)
            stdio_family(served, native, ops);
        else if (strcmp(family, "syscalls") == 0)
            syscalls_family(served, native, ops);
        else if (strcmp(family, "mmap") == 0)
            mmap_family(served, native, ops);
        else if (strcmp(family, "copy") == 0)
            copy_family(served, native, scratch_a, scratch_b, ops);
        else if (strcmp(family, "child") == 0)
            child_family(served, native, ops);
        else if (strcmp(family, "aio") == 0)
            aio_family(served, native, ops);
        else if (strcmp(family, "hints") == 0)
            hints_family(served, native, ops);
        else if (strcmp(family, "pass") == 0)
            pass_family(served, native, ops);
        else if (strcmp(family, "mremap") == 0)
            mremap_family(served, native, ops);
        else if (strcmp(family, "uring") == 0)
            uring_family(served, native, ops);
        else {
            fprintf(stderr, "differential: unknown family %s\n", family);
            return 2;
        }
    }
    printf("ok %s %ld %ld\n", family, seeds, ops);
    return 0;
}
