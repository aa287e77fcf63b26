/*
 * Threads of one process opening, reading, writing, closing and renaming cached files at
 * once (tests/test_cache.py). Each worker owns a 4 KiB slot of the shared file "shared"
 * and a private file "own.N": it writes a pattern into its slot through its own open,
 * reads it back through another open, and renames its private file back and forth while
 * the others do the same. Any byte that is not the owner's pattern, or any error, is
 * printed and makes the exit status 1. Usage: cache_threads DIR
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define WORKERS 6
#define ROUNDS 150
#define SLOT 4096

static const char *dir;
static int failed;

static void fail(int w, const char *what)
{
    fprintf(stderr, "worker %d: %s: %s\n", w, what, strerror(errno));
    __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
}

static void *worker(void *arg)
{
    int w = (int)(long)arg;
    char shared[4096], a[4096], b[4096], buf[SLOT], got[SLOT];
    snprintf(shared, sizeof shared, "%s/shared", dir);
    snprintf(a, sizeof a, "%s/own.%d", dir, w);
    snprintf(b, sizeof b, "%s/own.%d.renamed", dir, w);
    for (int r = 0; r < ROUNDS && !__atomic_load_n(&failed, __ATOMIC_RELAXED); r++) {
        memset(buf, 'a' + (w + r) % 26, sizeof buf);
        int fd = open(shared, O_RDWR);
        if (fd < 0) { fail(w, "open shared"); break; }
        if (pwrite(fd, buf, SLOT, (off_t)w * SLOT) != SLOT) fail(w, "pwrite shared");
        int fd2 = open(shared, O_RDONLY);
        if (fd2 < 0) { fail(w, "open shared again"); close(fd); break; }
        if (pread(fd2, got, SLOT, (off_t)w * SLOT) != SLOT || memcmp(got, buf, SLOT) != 0) {
            errno = EIO;
            fail(w, "read back own slot");
        }
        close(fd2);
        close(fd);
        /* a private file, written, renamed, read under its new name, renamed back */
        fd = open(a, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) { fail(w, "create own"); break; }
        if (write(fd, buf, 100) != 100) fail(w, "write own");
        if (rename(a, b) < 0) fail(w, "rename own");
        fd2 = open(b, O_RDONLY);
        if (fd2 < 0 || read(fd2, got, sizeof got) != 100 || memcmp(got, buf, 100) != 0) {
            errno = errno ? errno : EIO;
            fail(w, "read renamed own");
        }
        if (fd2 >= 0) close(fd2);
        close(fd);
        if (rename(b, a) < 0) fail(w, "rename back");
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: cache_threads DIR\n");
        return 2;
    }
    dir = argv[1];
    char shared[4096];
    snprintf(shared, sizeof shared, "%s/shared", dir);
    int fd = open(shared, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, (off_t)WORKERS * SLOT) < 0) {
        perror("shared");
        return 1;
    }
    close(fd);
    pthread_t t[WORKERS];
    for (long i = 0; i < WORKERS; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(t[i], NULL);
    if (!failed)
        printf("ok\n");
    return failed;
}
