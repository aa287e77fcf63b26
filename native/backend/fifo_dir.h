/*
 * The command's FIFO directory (embedded mode): the launcher makes one private directory
 * for the command and names it in LDPFUSE_FIFO_DIR. A FIFO node of the FS is, for every
 * process of the command, the real FIFO named from its mount and path there, so processes
 * that each run their own instance of the FS (and those the launcher serves) meet in one
 * kernel pipe, and each opens it itself: blocking, signals and EINTR as natively. Shared
 * by embedded.c and server/fifos.c; no state.
 */
#ifndef LDPFUSE_FIFO_DIR_H
#define LDPFUSE_FIFO_DIR_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* The directory, or NULL when the launcher made none (a fusepy script's embedded run). */
static inline const char *fifo_dir_of_command(void)
{
    const char *d = getenv("LDPFUSE_FIFO_DIR");
    return d && d[0] == '/' ? d : NULL;
}

/* The real FIFO of (mnt, path): "<dir>/<mnt>-<FNV-1a 64 of path>"; -1 if it does not fit. */
static inline int fifo_dir_name(char *out, size_t size, const char *dir, int mnt, const char *path)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)path; *p; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    int n = snprintf(out, size, "%s/%d-%016llx", dir, mnt, (unsigned long long)h);
    return n > 0 && (size_t)n < size ? 0 : -1;
}
#endif
