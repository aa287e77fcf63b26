/*
 * A symlink outside every mount that points into one (`ln -s /mnt/x/dir ~/link`): the
 * kernel follows it and finds nothing, so the path reaches no wrapper as a mount path.
 * Looking at every path's symlinks would cost every call a walk; instead a call whose real
 * answer was ENOENT asks here, after the fact, whether a symlink on the way leads into a
 * mount. Calls that succeed pay nothing; a call that fails with ENOENT pays two readlinks
 * in the common case (the name is missing from a real directory).
 *
 * The walk: readlink of the path itself (when its last component is followed), then of
 * each parent upwards until one exists as a real directory. A symlink found on the way is
 * replaced by its target and the result looked up again (through further links, up to
 * the kernel's limit of 40).
 */
#include "../ldpfuse.h"
#include <string.h>

/* Split abs at its last '/': dir gets what comes before (or "/"). */
static void parent_of(const char *abs, char *dir, size_t size)
{
    const char *slash = strrchr(abs, '/');
    size_t len = slash && slash != abs ? (size_t)(slash - abs) : 1;
    if (len >= size)
        len = size - 1;
    memcpy(dir, abs, len);
    dir[len] = '\0';
}

/* abs (normalised, absolute): 1 and vp filled when a symlink on it leads into a mount */
static int through_links(const char *abs, int follow_last, struct vpath *vp, int depth)
{
    char prefix[PATH_MAX], target[PATH_MAX], next[PATH_MAX], joined[PATH_MAX];
    if (depth > 40)
        return 0;
    snprintf(prefix, sizeof prefix, "%s", abs);
    int last = 1;
    while (strcmp(prefix, "/") != 0) {
        if (!last || follow_last) {
            ssize_t n = REAL(readlink)(prefix, target, sizeof target - 1);
            if (n > 0) {
                target[n] = '\0';
                /* the link's target, then what followed the link in abs */
                const char *rest = abs + strlen(prefix);
                char dir[PATH_MAX];
                parent_of(prefix, dir, sizeof dir);
                if (snprintf(joined, sizeof joined, "%s%s", target, rest) >= (int)sizeof joined ||
                    path_normalize(target[0] == '/' ? "/" : dir, joined, next, sizeof next, NULL) < 0)
                    return 0;
                if (mount_match(next, vp)) {
                    vp->trailing_slash = 0;
                    return 1;
                }
                return through_links(next, follow_last, vp, depth + 1);
            }
            if (errno != ENOENT)
                return 0;       /* EINVAL: it exists and is no link, so what follows is missing */
        }
        last = 0;
        parent_of(prefix, next, sizeof next);
        memcpy(prefix, next, strlen(next) + 1);
    }
    return 0;
}

int vfs_lookup_outside_link(int dirfd, const char *path, int follow_last, struct vpath *vp)
{
    if (ldp_nmounts == 0 || ldp_guard || path == NULL || path[0] == '\0')
        return 0;
    if (path[0] != '/' && (dirfd != AT_FDCWD || ldp_cwd == NULL || ldp_cwd_virtual))
        return 0;       /* relative to a directory fd: not looked at */
    int saved = errno;
    char abs[PATH_MAX];
    int in = path_normalize(path[0] == '/' ? "/" : ldp_cwd, path, abs, sizeof abs, NULL) >= 0 &&
             through_links(abs, follow_last, vp, 0);
    errno = saved;
    return in;
}
