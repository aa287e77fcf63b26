/* Walkers that glibc implements on its private syscalls: glob runs with GLOB_ALTDIRFUNC
 * over our directory and stat wrappers; nftw/ftw are walked here on the public
 * functions when the root is in a mount. */
#include "../ldpfuse.h"
#include <stdlib.h>
#include <string.h>

static int any_mount_reachable(void)
{
    return ldp_nmounts > 0 && !ldp_guard;
}

static void *alt_opendir(const char *p) { return opendir(p); }
static void alt_closedir(void *d) { closedir(d); }
static void *alt_readdir(void *d) { return readdir(d); }
static int alt_stat(const char *p, void *st) { return stat(p, st); }
static int alt_lstat(const char *p, void *st) { return lstat(p, st); }

int glob(const char *pattern, int flags, int (*errfunc)(const char *, int), glob_t *g)
{
    if (LIKELY(!any_mount_reachable()) || (flags & GLOB_ALTDIRFUNC))
        return REAL(glob)(pattern, flags, errfunc, g);
    g->gl_opendir = alt_opendir;
    g->gl_closedir = alt_closedir;
    g->gl_readdir = (struct dirent *(*)(void *))alt_readdir;
    g->gl_stat = (int (*)(const char *, struct stat *))alt_stat;
    g->gl_lstat = (int (*)(const char *, struct stat *))alt_lstat;
    return REAL(glob)(pattern, flags | GLOB_ALTDIRFUNC, errfunc, g);
}

int glob64(const char *pattern, int flags, int (*errfunc)(const char *, int), glob64_t *g)
{
    return glob(pattern, flags, errfunc, (glob_t *)g);
}

/* ---- nftw */
typedef int (*nftw_fn)(const char *, const struct stat *, int, struct FTW *);

struct walk {
    nftw_fn fn;
    int flags;
    dev_t dev;
};

static int walk(struct walk *w, char *path, size_t len, int level, int base)
{
    struct stat st;
    int type, r;
    int statted = (w->flags & FTW_PHYS) ? lstat(path, &st) : stat(path, &st);
    if (statted < 0) {
        if (!(w->flags & FTW_PHYS) && lstat(path, &st) == 0 && S_ISLNK(st.st_mode))
            type = FTW_SLN;
        else
            type = FTW_NS;
    } else if (S_ISDIR(st.st_mode)) {
        type = FTW_D;
    } else if (S_ISLNK(st.st_mode)) {
        type = FTW_SL;
    } else {
        type = FTW_F;
    }
    if ((w->flags & FTW_MOUNT) && type == FTW_D && level > 0 && st.st_dev != w->dev)
        return 0;
    struct FTW ftw = { .base = base, .level = level };
    if (type != FTW_D) {
        return w->fn(path, &st, type, &ftw);
    }
    DIR *d = opendir(path);
    if (d == NULL) {
        return w->fn(path, &st, FTW_DNR, &ftw);
    }
    if (!(w->flags & FTW_DEPTH)) {
        r = w->fn(path, &st, FTW_D, &ftw);
        if (r != 0) {
            closedir(d);
            if ((w->flags & FTW_ACTIONRETVAL) && r == FTW_SKIP_SUBTREE)
                return 0;
            return r;
        }
    }
    /* names first, so that the stream is closed before descending */
    char **names = NULL;
    size_t n = 0, cap = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 16;
            char **nn = realloc(names, cap * sizeof *nn);
            if (nn == NULL)
                break;
            names = nn;
        }
        names[n++] = strdup(e->d_name);
    }
    closedir(d);
    r = 0;
    for (size_t i = 0; i < n; i++) {
        if (r == 0) {
            size_t nl = strlen(names[i]);
            if (len + 1 + nl < PATH_MAX) {
                path[len] = '/';
                memcpy(path + len + 1, names[i], nl + 1);
                r = walk(w, path, len + 1 + nl, level + 1, (int)len + 1);
                path[len] = '\0';
                if ((w->flags & FTW_ACTIONRETVAL) && r == FTW_SKIP_SIBLINGS)
                    r = -1000;  /* stop this directory only */
            }
        }
        free(names[i]);
    }
    free(names);
    if (r == -1000)
        r = 0;
    if (r == 0 && (w->flags & FTW_DEPTH))
        r = w->fn(path, &st, FTW_DP, &ftw);
    return r;
}

int nftw(const char *dir, nftw_fn fn, int nopenfd, int flags)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &dir, &vp)))
        return REAL(nftw)(dir, fn, nopenfd, flags);
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s", dir);
    size_t len = strlen(path);
    while (len > 1 && path[len - 1] == '/')
        path[--len] = '\0';
    struct walk w = { .fn = fn, .flags = flags };
    struct stat st;
    if (stat(path, &st) == 0)
        w.dev = st.st_dev;
    const char *slash = strrchr(path, '/');
    int base = slash && slash[1] ? (int)(slash - path + 1) : 0;
    int r = walk(&w, path, len, 0, base);
    if ((flags & FTW_ACTIONRETVAL) && (r == FTW_SKIP_SUBTREE || r == FTW_SKIP_SIBLINGS))
        r = 0;
    return r;
}

int nftw64(const char *dir, int (*fn)(const char *, const struct stat64 *, int, struct FTW *), int nopenfd,
           int flags)
{
    return nftw(dir, (nftw_fn)fn, nopenfd, flags);
}

/* ftw is nftw with a callback that has no struct FTW */
static TLS int (*ftw_cb)(const char *, const struct stat *, int);
static int ftw_adapter(const char *p, const struct stat *st, int type, struct FTW *f)
{
    (void)f;
    if (type == FTW_DP)
        type = FTW_D;
    if (type == FTW_SLN)
        type = FTW_NS;
    return ftw_cb(p, st, type);
}

int ftw(const char *dir, int (*fn)(const char *, const struct stat *, int), int nopenfd)
{
    struct vpath vp;
    if (LIKELY(!vfs_lookup(AT_FDCWD, &dir, &vp)))
        return REAL(ftw)(dir, fn, nopenfd);
    int (*saved)(const char *, const struct stat *, int) = ftw_cb;
    ftw_cb = fn;
    int r = nftw(dir, ftw_adapter, nopenfd, 0);
    ftw_cb = saved;
    return r;
}

int ftw64(const char *dir, int (*fn)(const char *, const struct stat64 *, int), int nopenfd)
{
    return ftw(dir, (int (*)(const char *, const struct stat *, int))fn, nopenfd);
}
