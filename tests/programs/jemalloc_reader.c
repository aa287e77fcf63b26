/*
 * A program linked against jemalloc, the allocator of rustc, cargo and many servers:
 * jemalloc's first malloc holds its init lock while it reads /proc/sys/vm/overcommit_memory
 * with syscall(SYS_open), so a preload whose syscall() wrapper calls ld.so or malloc on its
 * first call waits on that lock for ever. Then it reads the file named on its command line.
 * Built by tests/test_allocators.py with -ljemalloc.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    char *copy = strdup(argc > 1 ? argv[1] : "(none)");
    FILE *f = fopen(copy, "r");
    if (f == NULL) {
        perror(copy);
        return 1;
    }
    char line[256];
    while (fgets(line, sizeof line, f))
        printf("read: %s", line);
    fclose(f);
    free(copy);
    return 0;
}
