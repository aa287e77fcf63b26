/*
 * stdio_writes: a stream that writes, in lockstep on a served file and natively, while
 * another process appends (fsx's idea). Seeded random fseek (SEEK_SET/CUR/END, fsetpos),
 * fwrite of sizes below and above the stream's buffer (glibc writes the larger ones into
 * the fd itself: past every wrapper on a served file), fread, ftell, fflush and reopen on
 * an "r+" stream of each file; between them another process, exec'd (a cache of its own
 * in the embedded mode), appends to both files, and with LOWER given the loopback's lower
 * file is appended to behind the mount (natively: the same file). Every result is
 * compared at once; the files are compared whole at the end.
 *
 *   stdio_writes SERVED NATIVE SEED OPS [LOWER]      exit 0: the same; 1: the first difference
 *   stdio_writes --appender SERVED NATIVE            (the other process: "N TAG" lines)
 *
 * What is compared is what a program can rely on natively: another process's appends are
 * made after this stream's fflush (the bytes of an fwrite on a served file reach the file
 * system at fflush: docs/cache.md), and never while the stream stands past the file's end
 * (an fseek past the end grows the cache to the file system's end: an append between it
 * and the fwrite is left, docs/cache.md); see STDIO_WRITES_ONE_MEMFD below.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define BIG (400 << 10)

static unsigned long long rng;
static long op_now;
static const char *served_path, *native_path;

static unsigned long pick(unsigned long n)
{
    rng = rng * 6364136223846793005ULL + 1442695040888963407ULL;
    return (unsigned long)(rng >> 33) % n;
}

static void fail(const char *what, const char *fmt, long a, long b)
{
    printf("op %ld: %s: ", op_now, what);
    printf(fmt, a, b);
    printf("\n");
    exit(1);
}

static void same(const char *what, long ra, int ea, long rb, int eb)
{
    if (ra != rb)
        fail(what, "served %ld, native %ld", ra, rb);
    if (rb < 0 && ea != eb)
        fail(what, "errno served %ld, native %ld", ea, eb);
}

static void same_bytes(const char *what, const char *a, const char *b, size_t n, long at)
{
    for (size_t i = 0; i < n; i++)
        if (a[i] != b[i]) {
            printf("op %ld: %s: byte %ld differs: served 0x%02x, native 0x%02x\n", op_now, what,
                   at + (long)i, (unsigned char)a[i], (unsigned char)b[i]);
            exit(1);
        }
}

static int appender(const char *served, const char *native)
{
    int fa = open(served, O_WRONLY | O_APPEND), fb = open(native, O_WRONLY | O_APPEND);
    if (fa < 0 || fb < 0) {
        perror("appender: open");
        return 2;
    }
    static char buf[BIG];
    long n;
    int tag;
    while (scanf("%ld %d", &n, &tag) == 2) {
        memset(buf, tag, (size_t)n);
        long ra = write(fa, buf, (size_t)n), rb = write(fb, buf, (size_t)n);
        printf("%ld %ld\n", ra, rb);
        fflush(stdout);
    }
    return 0;
}

struct pair {
    FILE *a, *b;
    size_t bufsize;
};

static void open_pair(struct pair *p)
{
    static const size_t sizes[] = { 1024, 4096, 8192 };
    p->a = fopen(served_path, "r+");
    p->b = fopen(native_path, "r+");
    if (p->a == NULL || p->b == NULL) {
        perror("fopen");
        exit(2);
    }
    p->bufsize = sizes[pick(3)];
    setvbuf(p->a, NULL, _IOFBF, p->bufsize);
    setvbuf(p->b, NULL, _IOFBF, p->bufsize);
}

static void flush_pair(struct pair *p)
{
    errno = 0;
    long ra = fflush(p->a);
    int ea = errno;
    errno = 0;
    long rb = fflush(p->b);
    same("fflush", ra, ea, rb, errno);
}

/* The same fseeko on both streams, compared; `trace` prints it. */
static void seek_pair(struct pair *p, off_t off, int whence, const char *what, int trace)
{
    errno = 0;
    long ra = fseeko(p->a, off, whence);
    int ea = errno;
    errno = 0;
    long rb = fseeko(p->b, off, whence);
    int eb = errno;
    if (trace)
        fprintf(stderr, "%ld %s %ld -> %ld\n", op_now, what, (long)off, rb);
    same(what, ra, ea, rb, eb);
}

int main(int argc, char **argv)
{
    if (argc == 4 && strcmp(argv[1], "--appender") == 0)
        return appender(argv[2], argv[3]);
    if (argc != 5 && argc != 6) {
        fprintf(stderr, "usage: stdio_writes SERVED NATIVE SEED OPS [LOWER]\n");
        return 2;
    }
    served_path = argv[1];
    native_path = argv[2];
    rng = strtoull(argv[3], NULL, 10) * 0x9e3779b97f4a7c15ULL + 1;
    long ops = strtol(argv[4], NULL, 10);
    const char *lower = argc == 6 ? argv[5] : NULL;
    int trace = getenv("STDIO_WRITES_TRACE") != NULL;
    /* STDIO_WRITES_ONE_MEMFD: the other process writes the same memfd (the shared mode):
     * once the file grew behind the mount, its appends through the mount would give the
     * granules past the memfd's end back as holes under this stream, which glibc's own
     * writes fill in part with zeros (what is left, docs/cache.md): it appends behind too */
    int one_memfd = getenv("STDIO_WRITES_ONE_MEMFD") != NULL, behind_only = 0;

    int to_b[2], from_b[2];
    if (pipe(to_b) < 0 || pipe(from_b) < 0)
        return 2;
    pid_t pid = fork();
    if (pid == 0) {
        dup2(to_b[0], 0);
        dup2(from_b[1], 1);
        close(to_b[1]);
        close(from_b[0]);
        execl("/proc/self/exe", argv[0], "--appender", served_path, native_path, (char *)NULL);
        _exit(127);
    }
    close(to_b[0]);
    close(from_b[1]);
    FILE *to = fdopen(to_b[1], "w"), *from = fdopen(from_b[0], "r");

    static char wa[BIG], ra_buf[BIG], rb_buf[BIG];
    static const long sizes[] = { 1, 100, 1000, 3000, 4096, 5000, 9000, 70000, 300000 };
    struct pair p;
    open_pair(&p);
    int writing = 0, reading = 0;
    for (op_now = 0; op_now < ops; op_now++) {
        struct stat st;
        off_t end = stat(native_path, &st) == 0 ? st.st_size : 0;
        int op = (int)pick(16);
        long ra, rb;
        int ea, eb;
        /* C asks for an fflush or a seek between a write and a read */
        if ((op == 9 || op == 10) && writing) {
            flush_pair(&p);
            writing = 0;
        }
        if (op >= 6 && op <= 8 && reading) {
            seek_pair(&p, 0, SEEK_CUR, "fseeko SEEK_CUR", trace);
            reading = 0;
        }
        errno = 0;
        switch (op) {
        case 0: case 1: case 2: {
            off_t off = pick(4) == 0 ? (off_t)pick((unsigned long)end + 1)
                                     : end + (off_t)(pick(2) ? pick(100) : pick(20000));
            seek_pair(&p, off, SEEK_SET, "fseeko SEEK_SET", trace);
            writing = reading = 0;
            break;
        }
        case 3: {
            off_t d = (off_t)pick(30000) - 10000;
            seek_pair(&p, d, SEEK_CUR, "fseeko SEEK_CUR", trace);
            writing = reading = 0;
            break;
        }
        case 4: {
            off_t d = (off_t)pick(10000) - (pick(2) ? 5000 : 0);
            seek_pair(&p, d, SEEK_END, "fseeko SEEK_END", trace);
            writing = reading = 0;
            break;
        }
        case 5: {
            fpos_t pa, pb;
            off_t off = end + (off_t)pick(9000);
            fgetpos(p.a, &pa);
            fgetpos(p.b, &pb);
            pa.__pos = pb.__pos = off;
            ra = fsetpos(p.a, &pa); ea = errno;
            errno = 0;
            rb = fsetpos(p.b, &pb); eb = errno;
            if (trace)
                fprintf(stderr, "%ld fsetpos %ld -> %ld\n", op_now, (long)off, rb);
            same("fsetpos", ra, ea, rb, eb);
            writing = reading = 0;
            break;
        }
        case 6: case 7: case 8: {
            size_t n = (size_t)sizes[pick(9)];
            memset(wa, 'A' + (int)(op_now % 26), n);
            ra = (long)fwrite(wa, 1, n, p.a);
            rb = (long)fwrite(wa, 1, n, p.b);
            if (trace)
                fprintf(stderr, "%ld fwrite %zu -> %ld\n", op_now, n, rb);
            same("fwrite", ra, 0, rb, 0);
            writing = 1;
            break;
        }
        case 9: case 10: {
            size_t n = (size_t)sizes[pick(9)];
            ra = (long)fread(ra_buf, 1, n, p.a);
            rb = (long)fread(rb_buf, 1, n, p.b);
            if (trace)
                fprintf(stderr, "%ld fread %zu -> %ld\n", op_now, n, rb);
            same("fread", ra, 0, rb, 0);
            same_bytes("fread", ra_buf, rb_buf, (size_t)rb, ftello(p.b) - rb);
            reading = 1;
            break;
        }
        case 11:
            ra = (long)ftello(p.a);
            rb = (long)ftello(p.b);
            same("ftello", ra, 0, rb, 0);
            break;
        case 12:
            flush_pair(&p);
            writing = 0;
            break;
        case 13: case 14: {
            /* another process appends, after this stream's fflush, while the stream is not
             * past the file's end (then its next fwrite is one past a stale end with no
             * fseek between: what is left, docs/cache.md) */
            flush_pair(&p);
            writing = 0;
            if (stat(native_path, &st) == 0 && ftello(p.b) > st.st_size)
                break;
            long n = sizes[pick(8)];
            int tag = 'a' + (int)(op_now % 26);
            if (lower && (op == 14 || behind_only)) {
                /* behind the mount: the loopback's lower file (natively, the same file) */
                memset(wa, tag, (size_t)n);
                int fa = open(lower, O_WRONLY | O_APPEND), fb = open(native_path, O_WRONLY | O_APPEND);
                ra = write(fa, wa, (size_t)n);
                rb = write(fb, wa, (size_t)n);
                close(fa);
                close(fb);
            } else {
                fprintf(to, "%ld %d\n", n, tag);
                fflush(to);
                if (fscanf(from, "%ld %ld", &ra, &rb) != 2) {
                    printf("op %ld: the appender is gone\n", op_now);
                    return 1;
                }
            }
            if (trace)
                fprintf(stderr, "%ld append %ld%s -> %ld %ld\n", op_now, n, lower && (op == 14 || behind_only) ? " behind" : "", ra, rb);
            if (lower && op == 14 && one_memfd)
                behind_only = 1;
            same("append", ra, 0, rb, 0);
            break;
        }
        case 15: {
            ra = fclose(p.a);
            rb = fclose(p.b);
            same("fclose", ra, 0, rb, 0);
            open_pair(&p);
            if (trace)
                fprintf(stderr, "%ld reopen buf %zu\n", op_now, p.bufsize);
            writing = reading = 0;
            break;
        }
        }
    }
    same("fclose", fclose(p.a), 0, fclose(p.b), 0);
    fclose(to);
    waitpid(pid, NULL, 0);
    /* the files whole */
    int fa = open(served_path, O_RDONLY), fb = open(native_path, O_RDONLY);
    long at = 0;
    for (;;) {
        ssize_t na = 0, nb = 0, r;
        while (na < BIG && (r = read(fa, ra_buf + na, BIG - (size_t)na)) > 0)
            na += r;
        while (nb < BIG && (r = read(fb, rb_buf + nb, BIG - (size_t)nb)) > 0)
            nb += r;
        same("read of the whole file", na, 0, nb, 0);
        same_bytes("the whole file", ra_buf, rb_buf, (size_t)nb, at);
        if (nb == 0)
            break;
        at += nb;
    }
    printf("same: %ld ops, %ld bytes\n", ops, at);
    return 0;
}
