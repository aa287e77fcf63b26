/*
 * The LD_AUDIT library that hands the dynamic loader the libraries an exec found in a
 * mount (ldpfuse_py/libldpfuse_audit.so; interpose/exec_libs.c decides when it is used).
 * ld.so opens DT_NEEDED libraries with its own system calls, before any constructor of
 * the new program runs, so the exec wrapper resolves them first, as ld.so would, opens
 * each one through the mount and passes its fd across the exec, by the name ld.so asks
 * for: LDPFUSE_LIBRARY_FDS="NAME\x1fFD\x1fDEV:INO\x1e...". For each name in that table
 * whose fd is still that file, la_objsearch answers /proc/self/fd/FD, which ld.so opens
 * instead of searching (a program without ldpfuse, which cannot take the variables out,
 * hands them to its children, whose fds are others: the device and inode tell). The new
 * program's ldpfuse (process_init) then closes the fds and takes both variables out of
 * its environment, so its children do not inherit them.
 *
 * An audit library lives in a link-map namespace of its own: this one uses nothing but
 * getenv and string functions of its own libc.
 */
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define SLOTS 64

unsigned int la_version(unsigned int version)
{
    return version < LAV_CURRENT ? version : LAV_CURRENT;
}

char *la_objsearch(const char *name, uintptr_t *cookie, unsigned int flag)
{
    static char answers[SLOTS][32];     /* the loader may keep the name it was given */
    static int used;
    (void)cookie;
    const char *table = getenv("LDPFUSE_LIBRARY_FDS");
    if (flag != LA_SER_ORIG || table == NULL || name == NULL)
        return (char *)name;
    size_t len = strlen(name);
    for (const char *p = table; *p; ) {
        const char *sep = strchr(p, '\x1f');
        if (sep == NULL)
            break;
        const char *end = strchr(sep, '\x1e');
        if ((size_t)(sep - p) == len && memcmp(p, name, len) == 0 && used < SLOTS) {
            char *rest;
            int fd = (int)strtol(sep + 1, &rest, 10);
            unsigned long long dev = 0, ino = 0;
            struct stat st;
            if (*rest != '\x1f' || sscanf(rest + 1, "%llu:%llu", &dev, &ino) != 2 ||
                fstat(fd, &st) != 0 || st.st_dev != dev || st.st_ino != ino)
                return (char *)name;
            char *answer = answers[used++];
            snprintf(answer, sizeof answers[0], "/proc/self/fd/%d", fd);
            return answer;
        }
        if (end == NULL)
            break;
        p = end + 1;
    }
    return (char *)name;
}
