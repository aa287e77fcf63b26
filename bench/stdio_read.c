/*
 * stdio_read.c - a file read to its end through stdio, the way a program's fread or fgets
 * loop reads it, on each kind of stream stdio.c and stdio_read.c give a served file:
 *
 *   stdio_read FILE MB OP HOW ROUNDS [--make]
 *       OP     fread   64 KiB freads to the end
 *              fgets   lines (about 60 bytes) into a 4 KiB buffer, to the end
 *       HOW    r       fopen(FILE, "r"): on a cached file a cookie stream whose refills are
 *                      the fd's read() (stdio.c)
 *              rplus   fopen(FILE, "r+"): glibc's own stream over the memfd, filled whole at
 *                      the open; stdio_read.c's stream_fill runs before each read function
 *              stdin   FILE opened and put on fd 0 (dup2), read through stdin: glibc's own
 *                      stream, filled whole when it became 0, stream_fill as for rplus
 *       ROUNDS reads of the whole file (rewind between), one stream
 *       --make write FILE first (MB MiB: text lines for fgets, bytes for fread), in this
 *              process: for the memory example, whose files last as long as the command
 *              (the embedded mode: as long as the process)
 *
 * One line: "OP HOW ns/MiB X" (the median round). Run natively and in a mount
 * (ldpfuse-run ... examples/memory.py:Memory, examples/loopback.py:Loopback LOWER) in
 * interleaved rounds; under `strace -c -f` for the system calls a round makes.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static int make(const char *path, long size, int text)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0)
        return -1;
    static char block[1 << 16];
    for (size_t i = 0; i < sizeof block; i++)
        block[i] = text ? (i % 61 == 60 ? '\n' : (char)('a' + i % 26)) : (char)(i * 7);
    for (long done = 0; done < size; done += (long)sizeof block)
        if (write(fd, block, sizeof block) != (ssize_t)sizeof block) {
            close(fd);
            return -1;
        }
    return close(fd);
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 6) {
        fprintf(stderr, "usage: stdio_read FILE MB fread|fgets r|rplus|stdin ROUNDS [--make]\n");
        return 2;
    }
    const char *path = argv[1], *op = argv[3], *how = argv[4];
    long size = atol(argv[2]) << 20;
    int rounds = atoi(argv[5]), fgets_op = strcmp(op, "fgets") == 0;
    if (size <= 0 || rounds <= 0 || rounds > 100 || (!fgets_op && strcmp(op, "fread") != 0)) {
        fprintf(stderr, "stdio_read: bad MB, OP or ROUNDS\n");
        return 2;
    }
    if (argc > 6 && strcmp(argv[6], "--make") == 0 && make(path, size, fgets_op) < 0) {
        perror(path);
        return 1;
    }
    FILE *f;
    if (strcmp(how, "stdin") == 0) {
        int fd = open(path, O_RDONLY);
        f = fd >= 0 && dup2(fd, 0) == 0 ? stdin : NULL;
        if (fd > 0)
            close(fd);
    } else {
        f = fopen(path, strcmp(how, "rplus") == 0 ? "r+" : "r");
    }
    if (f == NULL) {
        perror(path);
        return 1;
    }
    static char buf[1 << 16];
    double t[100];
    for (int r = 0; r < rounds; r++) {
        rewind(f);
        long got = 0;
        double t0 = now();
        if (fgets_op) {
            char line[4096];
            while (fgets(line, sizeof line, f))
                got += (long)strlen(line);
        } else {
            size_t n;
            while ((n = fread(buf, 1, sizeof buf, f)) > 0)
                got += (long)n;
        }
        t[r] = now() - t0;
        if (got != size || ferror(f)) {
            fprintf(stderr, "stdio_read: read %ld bytes of %ld\n", got, size);
            return 1;
        }
    }
    qsort(t, (size_t)rounds, sizeof t[0], cmp);
    printf("%s %s ns/MiB %.0f\n", op, how, t[rounds / 2] * 1e9 / (double)(size >> 20));
    return 0;
}
