/*
 * Is a name ld.so is about to open inside a mount? Then the kernel must not be given it
 * (it would answer ENOENT by luck, or a real directory under the mount point).
 * The mount points are LDPFUSE_MOUNTPOINTS (newline-separated absolute paths), a
 * relative name is taken from the working directory in a mount the exec passed
 * (LDPFUSE_CWD, set only when it is in one); both are read at the first question, as
 * the exec made them: a later chdir of the program does not move a relative LD_LIBRARY_PATH
 * entry for this library. Names are compared lexically ("." and ".." folded), as ld.so
 * passes them (no symlink is followed).
 */
#include <limits.h>
#include "in_mount.h"
#include "sys.h"

static char points[8192];       /* LDPFUSE_MOUNTPOINTS, or "" */
static char cwd[2 * PATH_MAX];  /* LDPFUSE_CWD (up to VPATH_MAX), or "" */
static int read_once;

static void read_env(void)
{
    const char *p = audit_env("LDPFUSE_MOUNTPOINTS");
    const char *c = audit_env("LDPFUSE_CWD");
    if (p && strlen(p) < sizeof points)
        memcpy(points, p, strlen(p) + 1);
    if (c && c[0] == '/' && strlen(c) < sizeof cwd)
        memcpy(cwd, c, strlen(c) + 1);
    read_once = 1;
}

/* name made absolute (from cwd) with ".", ".." and "//" folded into out; 0, or -1 */
static int fold(const char *name, char *out, size_t size)
{
    char joined[4 * PATH_MAX + 2];
    size_t nl = strlen(name), cl = strlen(cwd);
    if (name[0] == '/') {
        if (nl >= sizeof joined)
            return -1;
        memcpy(joined, name, nl + 1);
    } else {
        if (cl == 0 || cl + nl + 2 > sizeof joined)
            return -1;
        memcpy(joined, cwd, cl);
        joined[cl] = '/';
        memcpy(joined + cl + 1, name, nl + 1);
    }
    size_t k = 0;
    for (const char *p = joined; *p; ) {
        while (*p == '/')
            p++;
        const char *end = strchr(p, '/');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len == 0 || (len == 1 && p[0] == '.')) {
            /* nothing */
        } else if (len == 2 && p[0] == '.' && p[1] == '.') {
            while (k > 0 && out[--k] != '/')
                ;
        } else {
            if (k + len + 2 > size)
                return -1;
            out[k++] = '/';
            memcpy(out + k, p, len);
            k += len;
        }
        p += len;
    }
    if (k == 0)
        out[k++] = '/';
    out[k] = '\0';
    return 0;
}

int audit_in_mount(const char *name)
{
    if (!read_once)
        read_env();
    if (points[0] == '\0' || name == NULL || name[0] == '\0')
        return 0;
    char path[2 * PATH_MAX + 2];
    if (fold(name, path, sizeof path) < 0)
        return 0;
    size_t pl = strlen(path);
    for (const char *m = points; *m; ) {
        const char *end = strchr(m, '\n');
        size_t ml = end ? (size_t)(end - m) : strlen(m);
        if (ml > 0 && ml <= pl && memcmp(path, m, ml) == 0 && (path[ml] == '/' || path[ml] == '\0'))
            return 1;
        if (end == NULL)
            break;
        m = end + 1;
    }
    return 0;
}
