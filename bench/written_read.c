/*
 * written_read.c - 4 KiB reads of a file written by another process (issue 34: reads of
 * cached data at the kernel's speed). The file is written whole by one process, then read
 * by others of the same command, as a program reads what an earlier step wrote:
 *
 *   written_read write FILE MB               write FILE, MB MiB, page p full of byte p%251
 *   written_read seq FILE MB [SECONDS]       4 KiB read()s, from the start, again at the end
 *   written_read rand FILE MB [SECONDS]      4 KiB pread()s at random 4 KiB-aligned offsets
 *
 * Every page read is checked. One line "seq|rand N MB/s". bench/NOTES.md (issue 34) runs
 *
 *   ldpfuse-run --mountpoint M examples/memory.py:Memory -- sh -c \
 *       'written_read write M/f 64 && written_read seq M/f 64 1 && written_read rand M/f 64 1'
 *
 * against the same three steps on /dev/shm, in interleaved rounds, and the reads under
 * `strace -c` for the system calls each costs.
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

int main(int argc, char **argv)
{
    if (argc < 4 || atol(argv[3]) <= 0 ||
        (strcmp(argv[1], "write") && strcmp(argv[1], "seq") && strcmp(argv[1], "rand"))) {
        fprintf(stderr, "usage: written_read write|seq|rand FILE MB [SECONDS]\n");
        return 2;
    }
    const char *how = argv[1], *path = argv[2];
    long pages = atol(argv[3]) << 8;
    double secs = argc > 4 ? atof(argv[4]) : 1.0;
    static char buf[4096];
    if (strcmp(how, "write") == 0) {
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        for (long p = 0; fd >= 0 && p < pages; p++) {
            memset(buf, (int)(p % 251), sizeof buf);
            if (write(fd, buf, sizeof buf) != (ssize_t)sizeof buf) {
                perror(path);
                return 1;
            }
        }
        if (fd < 0 || close(fd) < 0) {
            perror(path);
            return 1;
        }
        return 0;
    }
    int fd = open(path, O_RDONLY);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    int rand_reads = strcmp(how, "rand") == 0;
    unsigned seed = 1;
    long n = 0, at = 0;
    double t0 = now(), t;
    do {
        for (int k = 0; k < 256; k++, n++) {
            long p;
            ssize_t r;
            if (rand_reads) {
                seed = seed * 1103515245u + 12345u;
                p = (long)(seed >> 8) % pages;
                r = pread(fd, buf, sizeof buf, p * 4096);
            } else {
                if (at == pages) {
                    lseek(fd, 0, SEEK_SET);
                    at = 0;
                }
                p = at++;
                r = read(fd, buf, sizeof buf);
            }
            if (r != (ssize_t)sizeof buf || buf[0] != (char)(p % 251) || buf[4095] != (char)(p % 251)) {
                fprintf(stderr, "%s: page %ld: read %zd, wrong bytes\n", path, p, r);
                return 1;
            }
        }
        t = now() - t0;
    } while (t < secs);
    printf("%s %.0f MB/s\n", how, (double)n * 4096 / t / 1e6);
    return 0;
}
