/* The working directory and canonical names: a virtual cwd lives in ldp_cwd (the kernel
 * cannot enter a directory it does not have); realpath resolves symlinks in the mount. */
#include "../ldpfuse.h"
#include <stdlib.h>
#include <string.h>

static void refresh_real_cwd(void)
{
    char buf[PATH_MAX];
    if (REAL(getcwd)(buf, sizeof buf))
        cwd_set(buf);
}

int chdir(const char *path)
{
    struct vpath vp;
    if (UNLIKELY(ldp_vfork_child) && path && ldp_nmounts && !ldp_guard)
        return ldp_vfork_child_chdir(path);
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp))) {
        int r = REAL(chdir)(path);
        if (r == 0 && ldp_nmounts && !ldp_guard)
            refresh_real_cwd();
        if (r == 0 || errno != ENOENT || !vfs_lookup_outside_link(AT_FDCWD, path, 1, &vp))
            return r;
    }
    struct stat st;
    char out[PATH_MAX], full[VPATH_MAX];
    struct vpath target;
    vpath_copy(&target, &vp);
    int f = vfs_follow(&target, out, sizeof out);
    if (f < 0)
        return -1;
    if (f == 0)
        return chdir(out);
    if (vfs_getattr(&target, 0, &st) < 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    /* search permission on it, as the kernel's chdir needs: FUSE asks the file system's
     * access(X_OK) (with -o default_permissions the server checks the mode first) */
    if (vfs_access(&target, X_OK, 0) < 0)
        return -1;
    /* the program's view keeps the name it used (as the kernel would after following a
     * link it keeps the target): use the resolved target */
    if (vfs_fullpath(&target, full, sizeof full) < 0)
        return -1;
    cwd_set(full);
    return 0;
}

int fchdir(int fd)
{
    struct vfile *v = vfd_served(fd);
    if (LIKELY(v == NULL)) {
        int r = REAL(fchdir)(fd);
        if (r == 0 && ldp_nmounts && !ldp_guard)
            refresh_real_cwd();
        return r;
    }
    if (v->kind != VF_DIR) {
        errno = ENOTDIR;
        return -1;
    }
    char full[VPATH_MAX];
    if (mount_fullpath(v->mnt, v->path, full, sizeof full) < 0)
        return -1;
    cwd_set(full);
    return 0;
}

char *getcwd(char *buf, size_t size)
{
    if (LIKELY(!ldp_cwd_virtual) || ldp_guard)
        return REAL(getcwd)(buf, size);
    size_t need = strlen(ldp_cwd) + 1;
    if (buf == NULL) {
        size_t n = size > need ? size : need;
        buf = malloc(n);
        if (buf == NULL)
            return NULL;
        memcpy(buf, ldp_cwd, need);
        return buf;
    }
    if (size < need) {
        errno = size == 0 ? EINVAL : ERANGE;
        return NULL;
    }
    memcpy(buf, ldp_cwd, need);
    return buf;
}

char *__getcwd_chk(char *buf, size_t size, size_t buflen)
{
    (void)buflen;
    return getcwd(buf, size);
}

char *get_current_dir_name(void)
{
    if (LIKELY(!ldp_cwd_virtual) || ldp_guard)
        return REAL(get_current_dir_name)();
    return strdup(ldp_cwd);
}

char *getwd(char *buf)
{
    if (LIKELY(!ldp_cwd_virtual) || ldp_guard)
        return REAL(getwd)(buf);
    return getcwd(buf, PATH_MAX);
}

/* Resolve every symlink on the way, component by component, inside the mount. */
static char *vrealpath(const struct vpath *vp0, char *resolved)
{
    char full[PATH_MAX], done[PATH_MAX], rest[PATH_MAX];
    if (vfs_fullpath(vp0, full, sizeof full) < 0)
        return NULL;    /* ENAMETOOLONG, as realpath() says of a name past PATH_MAX */
    snprintf(rest, sizeof rest, "%s", full);
    strcpy(done, "/");
    int links = 0;
    char *p = rest;
    while (*p) {
        while (*p == '/')
            p++;
        if (!*p)
            break;
        char *e = strchr(p, '/');
        size_t cl = e ? (size_t)(e - p) : strlen(p);
        char comp[NAME_MAX + 1];
        if (cl > NAME_MAX) {
            errno = ENAMETOOLONG;
            return NULL;
        }
        memcpy(comp, p, cl);
        comp[cl] = '\0';
        p += cl;
        char next[PATH_MAX];
        if (path_normalize(done, comp, next, sizeof next, NULL) < 0) {
            errno = ENAMETOOLONG;
            return NULL;
        }
        struct vpath vp;
        struct stat st;
        int in = mount_match(next, &vp);
        if (in) {
            vp.trailing_slash = 0;
            if (vfs_getattr(&vp, 0, &st) < 0)
                return NULL;
        } else if (REAL(lstat)(next, &st) < 0) {
            return NULL;
        }
        if (S_ISLNK(st.st_mode)) {
            if (++links > 40) {
                errno = ELOOP;
                return NULL;
            }
            char target[PATH_MAX];
            ssize_t n = in ? vfs_readlink(&vp, target, sizeof target - 1)
                           : REAL(readlink)(next, target, sizeof target - 1);
            if (n < 0)
                return NULL;
            target[n] = '\0';
            char joined[PATH_MAX];
            if (snprintf(joined, sizeof joined, "%s%s", target, p) >= (int)sizeof joined) {
                errno = ENAMETOOLONG;
                return NULL;
            }
            if (target[0] == '/')
                strcpy(done, "/");
            snprintf(rest, sizeof rest, "%s", joined);
            p = rest;
            continue;
        }
        if (*p == '/' && !S_ISDIR(st.st_mode)) {
            errno = ENOTDIR;
            return NULL;
        }
        strcpy(done, next);
    }
    if (resolved == NULL)
        return strdup(done);
    strcpy(resolved, done);
    return resolved;
}

char *realpath(const char *path, char *resolved)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &path, &vp)))
        return REAL(realpath)(path, resolved);
    return vrealpath(&vp, resolved);
}

char *__realpath_chk(const char *path, char *resolved, size_t reslen)
{
    (void)reslen;
    return realpath(path, resolved);
}

char *canonicalize_file_name(const char *path)
{
    return realpath(path, NULL);
}

mode_t umask(mode_t mask)
{
    mode_t old = REAL(umask)(mask);
    if (!ldp_vfork_child)       /* a vfork child's umask is its own (and the kernel's) */
        ldp_umask = mask & 0777;
    return old;
}
