/*
 * stdio_killed FILE COMMAND: opens FILE "r+" as a line-buffered stream, runs COMMAND (a
 * change of FILE through the mount while this process holds its page cache), writes a
 * line over the file's start and is killed (SIGKILL) before it can close. glibc writes
 * the line itself, past the wrappers: it reaches the page cache, never the file system
 * (docs/cache.md, what a stream writes). tests/test_cache_keep.py.
 */
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: stdio_killed FILE COMMAND\n");
        return 2;
    }
    FILE *f = fopen(argv[1], "r+");
    if (f == NULL) {
        perror(argv[1]);
        return 1;
    }
    setvbuf(f, NULL, _IOLBF, 0);
    if (system(argv[2]) != 0)
        return 1;
    fputs("HELLO\n", f);
    raise(SIGKILL);
    return 1;
}
