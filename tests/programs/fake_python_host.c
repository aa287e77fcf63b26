/* A program that looks like a CPython 3.12 host to the preload: it exports
 * Py_IsInitialized and Py_GetVersion (built with -rdynamic), then stats its argument.
 * Prints "ok" or the errno name. */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>

int Py_IsInitialized(void) { return 1; }
const char *Py_GetVersion(void) { return "3.12.1 (main, fake) [GCC]"; }

int main(int argc, char **argv)
{
    struct stat st;
    if (argc < 2)
        return 2;
    if (stat(argv[1], &st) == 0)
        printf("ok\n");
    else
        printf("%s\n", errno == EIO ? "EIO" : strerror(errno));
    return 0;
}
