/* File calls on a mount from a thread with a small stack (argv[2] bytes): the library's
 * path buffers live on the caller's stack, and a program may give its threads little
 * (PTHREAD_STACK_MIN is 16 KiB; some runtimes use 64 KiB). Prints "stack N: ok". */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

static const char *dir;

static void *work(void *unused)
{
    (void)unused;
    char a[512], b[512];
    struct stat st;
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    int fd = open(a, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd < 0 || write(fd, "x", 1) != 1 || close(fd) < 0)
        return "open/write/close";
    if (stat(a, &st) < 0 || st.st_size != 1)
        return "stat";
    if (rename(a, b) < 0)
        return "rename";
    if (link(b, a) < 0)
        return "link";
    if (unlink(a) < 0 || unlink(b) < 0)
        return "unlink";
    if (symlink("b", a) < 0 || lstat(a, &st) < 0 || unlink(a) < 0)
        return "symlink";
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc != 3)
        return 2;
    dir = argv[1];
    size_t size = strtoul(argv[2], NULL, 0);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (pthread_attr_setstacksize(&attr, size) != 0)
        return 2;
    pthread_t t;
    void *failed;
    if (pthread_create(&t, &attr, work, NULL) != 0 || pthread_join(t, &failed) != 0)
        return 2;
    printf("stack %zu: %s\n", size, failed ? (const char *)failed : "ok");
    return failed != NULL;
}
