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
 * Every other candidate ld.so would open inside a mount (along an RPATH or RUNPATH that
 * names a mount, a build tree's absolute RUNPATH; LD_LIBRARY_PATH's directories in a
 * mount are not given to ld.so at all, exec_libs.c) is skipped, with no system call: the
 * exec wrapper found no library there (or none it could open), so the kernel, which does
 * not see the mount, has nothing to answer. A name with a '/' in a mount that is not in
 * the table (dlopen's are handed over as /proc/self/fd/N) fails the same way. A
 * skipped candidate makes ld.so stat its directory (dl-load.c's open_path, to mark it
 * missing): that name is ld.so's own search buffer, the one la_objsearch is given, and
 * it is emptied first, so the stat is of "" (ENOENT, no lookup) and the directory is
 * missing for every later name. The rest of that directory's candidates (its hwcaps
 * subdirectories) then come as "" and are skipped too.
 *
 * An audit library lives in a link-map namespace of its own: this one has no libc at all
 * (sys.h).
 */
#include <link.h>
#include <stdint.h>
#include "in_mount.h"
#include "sys.h"

#define SLOTS 64

unsigned int la_version(unsigned int version)
{
    return version < LAV_CURRENT ? version : LAV_CURRENT;
}

/* The decimal number at *p; *p moved past it. */
static unsigned long long number(const char **p)
{
    unsigned long long n = 0;
    while (**p >= '0' && **p <= '9')
        n = n * 10 + (unsigned long long)(*(*p)++ - '0');
    return n;
}

/* "/proc/self/fd/" fd into out (32 bytes) */
static void fd_name(char *out, int fd)
{
    char digits[12];
    int k = 0;
    do
        digits[k++] = (char)('0' + fd % 10);
    while ((fd /= 10) > 0 && k < 11);
    memcpy(out, "/proc/self/fd/", 14);
    for (int i = 0; i < k; i++)
        out[14 + i] = digits[k - 1 - i];
    out[14 + k] = '\0';
}

/* A name ld.so opens as it is (with a '/') inside a mount. */
static int in_a_mount(const char *name)
{
    return strchr(name, '/') != NULL && audit_in_mount(name);
}

char *la_objsearch(const char *name, uintptr_t *cookie, unsigned int flag)
{
    static char answers[SLOTS][32];     /* the loader may keep the name it was given */
    static int used;
    (void)cookie;
    if (name == NULL)
        return NULL;
    if (flag != LA_SER_ORIG) {
        if (name[0] != '\0' && !in_a_mount(name))
            return (char *)name;
        ((char *)name)[0] = '\0';
        return NULL;
    }
    const char *table = audit_env("LDPFUSE_LIBRARY_FDS");
    if (table == NULL)
        return in_a_mount(name) ? NULL : (char *)name;
    size_t len = strlen(name);
    for (const char *p = table; *p; ) {
        const char *sep = strchr(p, '\x1f');
        if (sep == NULL)
            break;
        const char *end = strchr(sep, '\x1e');
        if ((size_t)(sep - p) == len && memcmp(p, name, len) == 0 && used < SLOTS) {
            const char *rest = sep + 1;
            unsigned long long fd = number(&rest), dev, ino;
            struct stat st;
            if (*rest++ != '\x1f' || (dev = number(&rest), *rest++ != ':') ||
                (ino = number(&rest), (*rest != '\x1e' && *rest != '\0')) ||
                sys_fstat((int)fd, &st) != 0 || st.st_dev != dev || st.st_ino != ino)
                return in_a_mount(name) ? NULL : (char *)name;
            char *answer = answers[used++];
            fd_name(answer, (int)fd);
            return answer;
        }
        if (end == NULL)
            break;
        p = end + 1;
    }
    return in_a_mount(name) ? NULL : (char *)name;
}
