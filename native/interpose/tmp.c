/* mkstemp and friends create in the template's directory through glibc's private open:
 * in a mount they are done here, with O_CREAT|O_EXCL through vfs_open. */
#include "../ldpfuse.h"
#include <string.h>
#include <time.h>

static const char letters[] = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789";

static int fill_x(char *tmpl, int suffixlen, uint64_t *seed)
{
    size_t len = strlen(tmpl);
    if (suffixlen < 0 || len < 6 + (size_t)suffixlen ||
        memcmp(tmpl + len - 6 - suffixlen, "XXXXXX", 6) != 0) {
        errno = EINVAL;
        return -1;
    }
    char *x = tmpl + len - 6 - suffixlen;
    for (int i = 0; i < 6; i++) {
        *seed = *seed * 6364136223846793005ULL + 1442695040888963407ULL;
        x[i] = letters[(*seed >> 33) % (sizeof letters - 1)];
    }
    return 0;
}

static uint64_t seed0(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20) ^ ((uint64_t)getpid() << 40);
}

/* 1 = handled (result in *out), 0 = not in a mount */
static int vmkstemp(char *tmpl, int suffixlen, int flags, int *out)
{
    struct vpath vp;
    const char *t = tmpl;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &t, &vp)))
        return 0;
    uint64_t seed = seed0();
    for (int tries = 0; tries < 1000; tries++) {
        if (fill_x(tmpl, suffixlen, &seed) < 0) {
            *out = -1;
            return 1;
        }
        t = tmpl;
        if (!vfs_lookup(AT_FDCWD, &t, &vp)) {
            errno = EINVAL;
            *out = -1;
            return 1;
        }
        int fd = vfs_open(&vp, O_RDWR | O_CREAT | O_EXCL | (flags & ~O_ACCMODE), 0600);
        if (fd >= 0 || errno != EEXIST) {
            *out = fd;
            return 1;
        }
    }
    errno = EEXIST;
    *out = -1;
    return 1;
}

#define MKSTEMP(name, args, suffixlen, flags, call) \
    int name args \
    { \
        int fd; \
        if (vmkstemp(tmpl, suffixlen, flags, &fd)) \
            return fd; \
        return call; \
    }

MKSTEMP(mkstemp, (char *tmpl), 0, 0, REAL(mkstemp)(tmpl))
MKSTEMP(mkstemp64, (char *tmpl), 0, 0, REAL(mkstemp64)(tmpl))
MKSTEMP(mkostemp, (char *tmpl, int flags), 0, flags, REAL(mkostemp)(tmpl, flags))
MKSTEMP(mkostemp64, (char *tmpl, int flags), 0, flags, REAL(mkostemp64)(tmpl, flags))
MKSTEMP(mkstemps, (char *tmpl, int sl), sl, 0, REAL(mkstemps)(tmpl, sl))
MKSTEMP(mkstemps64, (char *tmpl, int sl), sl, 0, REAL(mkstemps64)(tmpl, sl))
MKSTEMP(mkostemps, (char *tmpl, int sl, int flags), sl, flags, REAL(mkostemps)(tmpl, sl, flags))
MKSTEMP(mkostemps64, (char *tmpl, int sl, int flags), sl, flags, REAL(mkostemps64)(tmpl, sl, flags))

char *mkdtemp(char *tmpl)
{
    struct vpath vp;
    const char *t = tmpl;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &t, &vp)))
        return REAL(mkdtemp)(tmpl);
    uint64_t seed = seed0();
    for (int tries = 0; tries < 1000; tries++) {
        t = tmpl;
        if (fill_x(tmpl, 0, &seed) < 0 || !vfs_lookup(AT_FDCWD, &t, &vp))
            return NULL;
        if (vfs_mkdir(&vp, 0700) == 0)
            return tmpl;
        if (errno != EEXIST)
            return NULL;
    }
    return NULL;
}
