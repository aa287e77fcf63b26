/*
 * stdio_seek_write.c - fseek + fwrite on a stream that writes ("r+"), within the file: what
 * BFD (as, ld) does when it places sections. The stdio.c seek wrappers look at nothing for
 * a seek within what an earlier look found (before_seek's seek_reach), so a loop of them
 * should cost what it costs without the wrappers.
 *
 *   stdio_seek_write FILE MB N      FILE made MB MiB long, then N rounds of fseek to a
 *                                   random offset within it and a 16-byte fwrite
 *
 * One line: "ns/op X". Run in a mount (ldpfuse-run ... examples/memory.py:Memory) against
 * an older build, in interleaved rounds, medians; the loop under `strace -c` for its
 * system calls.
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

int main(int argc, char **argv)
{
    if (argc != 4) {
        fprintf(stderr, "usage: stdio_seek_write FILE MB N\n");
        return 2;
    }
    long size = atol(argv[2]) << 20, n = atol(argv[3]);
    if (size <= 0 || n <= 0) {
        fprintf(stderr, "stdio_seek_write: MB and N must be positive\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "w");
    static char block[1 << 16];
    memset(block, 'x', sizeof block);
    for (long done = 0; f && done < size; done += (long)sizeof block)
        fwrite(block, 1, sizeof block, f);
    if (f == NULL || fclose(f) != 0 || (f = fopen(argv[1], "r+")) == NULL) {
        perror(argv[1]);
        return 1;
    }
    unsigned long long r = 88172645463325252ULL;
    double t0 = now();
    for (long i = 0; i < n; i++) {
        r ^= r << 13, r ^= r >> 7, r ^= r << 17;
        if (fseek(f, (long)(r % (unsigned long long)(size - 16)), SEEK_SET) != 0 ||
            fwrite("0123456789abcdef", 1, 16, f) != 16) {
            perror("fseek/fwrite");
            return 1;
        }
    }
    double t = now() - t0;
    if (fclose(f) != 0) {
        perror("fclose");
        return 1;
    }
    printf("ns/op %.0f\n", t / (double)n * 1e9);
    return 0;
}
