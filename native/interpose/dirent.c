/* Directory streams: a DIR of ours for virtual directories, glibc's for the rest.
 * readdir and readdir64 share one struct layout on 64-bit Linux. */
#include "../ldpfuse.h"
#include <stdlib.h>
#include <string.h>

DIR *opendir(const char *path)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp))) {
        DIR *d = REAL(opendir)(path);
        if (LIKELY(d != NULL) || errno != ENOENT || !vfs_lookup_outside_link(AT_FDCWD, path, 1, &vp))
            return d;
    }
    return vdir_open(&vp);
}

DIR *fdopendir(int fd)
{
    struct vfile *v = vfd_served(fd);
    if (LIKELY(v == NULL))
        return REAL(fdopendir)(fd);
    return vdir_fdopen(fd, v);
}

struct dirent64 *readdir64(DIR *d)
{
    struct vdir *vd = vdir_of(d);
    if (LIKELY(vd == NULL))
        return REAL(readdir64)(d);
    return vdir_read(vd);
}

struct dirent *readdir(DIR *d)
{
    struct vdir *vd = vdir_of(d);
    if (LIKELY(vd == NULL))
        return REAL(readdir)(d);
    return (struct dirent *)vdir_read(vd);
}

int readdir64_r(DIR *d, struct dirent64 *entry, struct dirent64 **result)
{
    struct vdir *vd = vdir_of(d);
    if (LIKELY(vd == NULL))
        return REAL(readdir64_r)(d, entry, result);
    errno = 0;
    struct dirent64 *e = vdir_read(vd);
    if (e == NULL) {
        *result = NULL;
        return errno;
    }
    memcpy(entry, e, e->d_reclen <= sizeof *entry ? e->d_reclen : sizeof *entry);
    *result = entry;
    return 0;
}

int readdir_r(DIR *d, struct dirent *entry, struct dirent **result)
{
    return readdir64_r(d, (struct dirent64 *)entry, (struct dirent64 **)result);
}

int closedir(DIR *d)
{
    struct vdir *vd = vdir_of(d);
    if (LIKELY(vd == NULL))
        return REAL(closedir)(d);
    return vdir_close(vd);
}

void rewinddir(DIR *d)
{
    struct vdir *vd = vdir_of(d);
    if (LIKELY(vd == NULL))
        REAL(rewinddir)(d);
    else
        vdir_rewind(vd);
}

long telldir(DIR *d)
{
    struct vdir *vd = vdir_of(d);
    if (LIKELY(vd == NULL))
        return REAL(telldir)(d);
    return vdir_tell(vd);
}

void seekdir(DIR *d, long pos)
{
    struct vdir *vd = vdir_of(d);
    if (LIKELY(vd == NULL))
        REAL(seekdir)(d, pos);
    else
        vdir_seek(vd, pos);
}

int dirfd(DIR *d)
{
    struct vdir *vd = vdir_of(d);
    if (LIKELY(vd == NULL))
        return REAL(dirfd)(d);
    return vdir_fd(vd);
}

/* scandir on a virtual directory, through the stream above */
typedef int (*scan_filter)(const struct dirent64 *);
typedef int (*scan_compar)(const struct dirent64 **, const struct dirent64 **);

static int vscandir(const struct vpath *vp, struct dirent64 ***out, scan_filter filter, scan_compar compar)
{
    DIR *d = vdir_open(vp);
    if (d == NULL)
        return -1;
    struct vdir *vd = vdir_of(d);
    struct dirent64 **list = NULL, *e;
    size_t n = 0, cap = 0;
    errno = 0;
    while ((e = vdir_read(vd)) != NULL) {
        if (filter && !filter(e))
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 32;
            struct dirent64 **nl = realloc(list, cap * sizeof *nl);
            if (nl == NULL)
                goto nomem;
            list = nl;
        }
        struct dirent64 *copy = malloc(e->d_reclen);
        if (copy == NULL)
            goto nomem;
        memcpy(copy, e, e->d_reclen);
        list[n++] = copy;
    }
    vdir_close(vd);
    if (compar && n > 1)
        qsort(list, n, sizeof *list, (int (*)(const void *, const void *))compar);
    *out = list;
    return (int)n;
nomem:
    while (n > 0)
        free(list[--n]);
    free(list);
    vdir_close(vd);
    errno = ENOMEM;
    return -1;
}

int scandirat64(int dirfd, const char *path, struct dirent64 ***out, scan_filter filter, scan_compar compar)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(dirfd, &path, &vp)))
        return REAL(scandirat64)(dirfd, path, out, filter, compar);
    return vscandir(&vp, out, filter, compar);
}
int scandirat(int dirfd, const char *path, struct dirent ***out, int (*filter)(const struct dirent *),
              int (*compar)(const struct dirent **, const struct dirent **))
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(dirfd, &path, &vp)))
        return REAL(scandirat)(dirfd, path, out, filter, compar);
    return vscandir(&vp, (struct dirent64 ***)out, (scan_filter)filter, (scan_compar)compar);
}
int scandir64(const char *path, struct dirent64 ***out, scan_filter filter, scan_compar compar)
{
    return scandirat64(AT_FDCWD, path, out, filter, compar);
}
int scandir(const char *path, struct dirent ***out, int (*filter)(const struct dirent *),
            int (*compar)(const struct dirent **, const struct dirent **))
{
    return scandirat(AT_FDCWD, path, out, filter, compar);
}
