/*
 * A random-operation checker of one file, in the spirit of fsx (none of its code): reads,
 * writes, truncations, fallocate in each mode the kernel's page cache keeps a model of
 * (grow, keep size, punch hole, zero range), posix_fallocate, mmap reads and stores, and
 * close + reopen (a cache let go of and read again from the file system), each checked
 * against a model of the file's bytes after every step: the size from fstat, and every
 * byte through pread. Built with -D_FILE_OFFSET_BITS=64 (tests/test_random_ops.py), as
 * fsx and most distributions' programs are: fallocate is then fallocate64.
 *
 * Usage: random_ops FILE SEED STEPS [pollute]. With "pollute", stores through a mapping
 * past the end of the file's last page come before some steps (fsx -e): tmpfs keeps them,
 * ext4 does not, and a file that grows must read zeros there. Prints "ok STEPS" and exits
 * 0, or prints the step that went wrong with the last operations done and exits 1.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAXLEN (256 * 1024)
#define HISTORY 12

static unsigned char model[MAXLEN], got[MAXLEN];
static off_t size;
static int fd;
static const char *path;
static int pollute;
static char history[HISTORY][96];
static int nhist;

#include <stdarg.h>
__attribute__((format(printf, 1, 2))) static void note(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(history[nhist++ % HISTORY], sizeof history[0], fmt, ap);
    va_end(ap);
}

static void fail(long step, const char *what)
{
    printf("step %ld: %s (%s)\nlast operations:\n", step, what, strerror(errno));
    int first = nhist > HISTORY ? nhist - HISTORY : 0;
    for (int i = first; i < nhist; i++)
        printf("  %s\n", history[i % HISTORY]);
    exit(1);
}

static long rnd(long n)
{
    return n > 0 ? random() % n : 0;
}

static void check(long step)
{
    struct stat st;
    if (fstat(fd, &st) < 0)
        fail(step, "fstat");
    if (st.st_size != size) {
        printf("size %lld, model %lld\n", (long long)st.st_size, (long long)size);
        fail(step, "wrong size");
    }
    ssize_t n = pread(fd, got, MAXLEN, 0);
    if (n != size) {
        printf("pread gave %zd of %lld\n", n, (long long)size);
        fail(step, "short read");
    }
    for (off_t i = 0; i < size; i++)
        if (got[i] != model[i]) {
            printf("byte %lld: %#x, model %#x\n", (long long)i, got[i], model[i]);
            fail(step, "wrong bytes");
        }
}

static void op_write(long step)
{
    off_t off = rnd(MAXLEN - 1);
    size_t len = 1 + rnd(MAXLEN - off < 65536 ? MAXLEN - off : 65536);
    unsigned char buf[65536];
    for (size_t i = 0; i < len; i++)
        buf[i] = (unsigned char)(step + i * 7 + 1);
    note("write %ld %ld", (long)off, (long)len);
    if (pwrite(fd, buf, len, off) != (ssize_t)len)
        fail(step, "pwrite");
    if (off > size)
        memset(model + size, 0, off - size);     /* the gap reads as zeros */
    memcpy(model + off, buf, len);
    if (off + (off_t)len > size)
        size = off + len;
}

static void op_truncate(long step)
{
    off_t len = rnd(MAXLEN);
    note("truncate %ld", (long)len);
    if (ftruncate(fd, len) < 0)
        fail(step, "ftruncate");
    if (len > size)
        memset(model + size, 0, len - size);
    size = len;
}

static void op_fallocate(long step)
{
    static const int modes[] = { 0, FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE,
                                 FALLOC_FL_ZERO_RANGE, FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE };
    int mode = modes[rnd(5)];
    off_t off = rnd(MAXLEN - 1);
    off_t len = 1 + rnd(MAXLEN - off);
    note("fallocate mode %#x %ld %ld", mode, (long)off, (long)len);
    if (fallocate(fd, mode, off, len) < 0)
        fail(step, "fallocate");
    off_t end = off + len;
    if (mode & (FALLOC_FL_PUNCH_HOLE | FALLOC_FL_ZERO_RANGE))
        memset(model + off, 0, (end < size ? end : size) > off ? (end < size ? end : size) - off : 0);
    if (!(mode & FALLOC_FL_KEEP_SIZE) && end > size) {
        memset(model + size, 0, end - size);
        size = end;
    }
}

static void op_posix_fallocate(long step)
{
    off_t off = rnd(MAXLEN - 1);
    off_t len = 1 + rnd(MAXLEN - off);
    note("posix_fallocate %ld %ld", (long)off, (long)len);
    if ((errno = posix_fallocate(fd, off, len)) != 0)
        fail(step, "posix_fallocate");
    if (off + len > size) {
        memset(model + size, 0, off + len - size);
        size = off + len;
    }
}

static void op_mmap(long step, int store)
{
    if (size == 0)
        return;
    off_t page = sysconf(_SC_PAGESIZE);
    off_t off = rnd(size - 1);
    off_t base = off - off % page;
    size_t len = 1 + rnd(size - off < 16384 ? size - off : 16384);
    note("mmap %s %ld %ld", store ? "store" : "read", (long)off, (long)len);
    unsigned char *m = mmap(NULL, off - base + len, store ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd,
                            base);
    if (m == MAP_FAILED)
        fail(step, "mmap");
    if (store) {
        for (size_t i = 0; i < len; i++)
            model[off + i] = m[off - base + i] = (unsigned char)(step * 3 + i);
    } else if (memcmp(m + (off - base), model + off, len) != 0) {
        errno = 0;
        fail(step, "mmap read: wrong bytes");
    }
    if (munmap(m, off - base + len) < 0)
        fail(step, "munmap");
}

/* Stores through a mapping past the end, in the file's last page (fsx -e): never part of
 * the file; a later growth must read zeros there. */
static void op_pollute(long step)
{
    off_t page = sysconf(_SC_PAGESIZE);
    if (!pollute || size % page == 0)
        return;
    off_t base = size - size % page;
    note("pollute past the end at %ld", (long)size);
    unsigned char *m = mmap(NULL, page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, base);
    if (m == MAP_FAILED)
        fail(step, "mmap");
    memset(m + size % page, 0xa5, page - size % page);
    if (munmap(m, page) < 0)
        fail(step, "munmap");
}

static void op_reopen(long step)
{
    note("close and reopen");
    if (close(fd) < 0)
        fail(step, "close");
    if ((fd = open(path, O_RDWR)) < 0)
        fail(step, "reopen");
}

int main(int argc, char **argv)
{
    if (argc != 4 && !(argc == 5 && strcmp(argv[4], "pollute") == 0)) {
        fprintf(stderr, "usage: random_ops FILE SEED STEPS [pollute]\n");
        return 2;
    }
    pollute = argc == 5;
    path = argv[1];
    srandom((unsigned)atol(argv[2]));
    long steps = atol(argv[3]);
    if ((fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0644)) < 0)
        fail(0, "open");
    for (long step = 1; step <= steps; step++) {
        switch (rnd(16)) {
        case 0: case 1: case 2: case 3: case 4: op_write(step); break;
        case 5: case 6: op_truncate(step); break;
        case 7: case 8: case 9: op_fallocate(step); break;
        case 10: op_posix_fallocate(step); break;
        case 11: case 12: op_mmap(step, 0); break;
        case 13: op_mmap(step, 1); break;
        case 14: op_reopen(step); op_pollute(step); break;
        default: {
            off_t off = rnd(size + 1);
            size_t len = rnd(MAXLEN);
            note("read %ld %ld", (long)off, (long)len);
            ssize_t n = pread(fd, got, len, off);
            ssize_t want = off + (off_t)len <= size ? (ssize_t)len : (ssize_t)(size - off);
            if (n != want || memcmp(got, model + off, (size_t)want) != 0)
                fail(step, "read: wrong count or bytes");
        }
        }
        check(step);
    }
    close(fd);
    printf("ok %ld\n", steps);
    return 0;
}
