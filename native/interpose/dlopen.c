/*
 * dlopen()/dlmopen() of a library in a mount (ctypes.CDLL, Python's C extensions, plugins):
 * the dynamic loader opens, reads and maps the file with its own system calls, past every
 * wrapper. So the library is opened here, through the mount, and the loader is handed a
 * real file that holds its bytes, by the name /proc/self/fd/N:
 *   - a passthrough file: the lower file itself;
 *   - a cached file: its page cache, filled to the end first;
 *   - a direct_io file: a memfd copy of what the file system reads.
 * The loader then knows the library by that name; the name the program asked for is put
 * back in the link map (what dladdr, dl_iterate_phdr and /proc/PID/maps-less tools show),
 * best effort. A second dlopen of the same path finds the one already loaded, by that
 * name (RTLD_NOLOAD): the fd, and so the loader's idea of the file, may be another. The
 * loader is asked by that name only when a loaded object has it (dl_iterate_phdr): one
 * it does not know, it would open, a mount path; RTLD_NOLOAD of a library not loaded by
 * that name asks it by the fd (the file may be loaded by another name).
 *
 * A name without '/' is searched by the loader along LD_LIBRARY_PATH and the rest; the
 * LD_LIBRARY_PATH directories in a mount are searched here, in their turn. The library's
 * own dependencies that are in a mount are loaded first (load_dependencies).
 *
 * dlopen looks at its caller (RUNPATH of the calling object, its link-map namespace), so
 * the call that is not ours must leave with a jump, not a call: these two functions are
 * built with sibling calls on, whatever the rest of the library is built with. So nothing
 * runs here after the loader: a library that brings liburing (its name, or a DT_NEEDED of
 * the file named) puts the safety net up before it is loaded (escape_before_dlopen).
 */
#include "../ldpfuse.h"
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include "exec_libs.h"
#include "escape.h"

/* A real fd that holds the bytes of the mount file at vp, or -1 (errno set). */
int loadable_fd(const struct vpath *vp)
{
    int fd = vfs_open(vp, O_RDONLY | O_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct vfile *v = fdtable_get(fd);
    if (v == NULL || v->kind == VF_PASSTHROUGH)
        return fd;      /* passthrough: the lower file */
    if (v->kind != VF_FILE) {
        close(fd);
        errno = v->kind == VF_DIR ? EISDIR : EACCES;
        return -1;
    }
    if (v->pc != NULL && !v->direct_io)
        return pcache_fill(v, 0, 0, 1) < 0 ? (close(fd), -1) : fd;
    /* read through the FS into a private copy */
    int copy = memfd_create("ldpfuse-dlopen", MFD_CLOEXEC);
    if (copy < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    char buf[65536];
    ssize_t n;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        if (REAL(write)(copy, buf, (size_t)n) != n) {
            n = -1;
            break;
        }
    int e = errno;
    close(fd);
    if (n < 0) {
        REAL(close)(copy);
        errno = e;
        return -1;
    }
    return copy;
}

/* Is a LD_LIBRARY_PATH directory in a mount? Then a bare name is searched here. */
static int library_path_in_mount(void)
{
    static int answer = -1;
    if (answer < 0) {
        const char *lp = getenv("LD_LIBRARY_PATH");
        answer = 0;
        for (int i = 0; lp && i < ldp_nmounts; i++)
            if (strstr(lp, ldp_mounts[i].point) != NULL)
                answer = 1;
    }
    return answer;
}

/* The loader's search along LD_LIBRARY_PATH, for a name without '/': the first directory
 * that holds it decides. Fills vp and returns 1 if that directory is in a mount. */
static int search_library_path(const char *name, struct vpath *vp)
{
    const char *lp = getenv("LD_LIBRARY_PATH");
    while (lp && *lp) {
        const char *end = strpbrk(lp, ":;");
        size_t len = end ? (size_t)(end - lp) : strlen(lp);
        char cand[PATH_MAX];
        if (len > 0 && len + strlen(name) + 2 < sizeof cand) {
            memcpy(cand, lp, len);
            cand[len] = '/';
            strcpy(cand + len + 1, name);
            const char *p = cand;
            struct stat st;
            if (vfs_lookup(AT_FDCWD, &p, vp)) {
                if (vfs_getattr(vp, 1, &st) == 0 && !S_ISDIR(st.st_mode))
                    return 1;
            } else if (REAL(stat)(p, &st) == 0) {
                return 0;
            }
        }
        lp = end ? end + 1 : NULL;
    }
    return 0;
}

/* 1 if file names a library in a mount: *fd then holds its bytes (or -1, errno set). */
static int library_in_mount(const char *file, int *fd, char *asked, size_t size)
{
    struct vpath vp;
    if (file == NULL || ldp_nmounts == 0 || ldp_guard)
        return 0;
    if (strchr(file, '/') == NULL) {
        if (!library_path_in_mount() || !search_library_path(file, &vp))
            return 0;
    } else {
        const char *p = file;
        if (LIKELY(!vfs_lookup(AT_FDCWD, &p, &vp)))
            return 0;
    }
    vfs_fullpath(&vp, asked, size);
    *fd = loadable_fd(&vp);
    return 1;
}

/* dl_iterate_phdr's objects named name: an address inside each (up to 8) */
struct named {
    const char *name;
    int n;
    void *at[8];
};

static int collect_named(struct dl_phdr_info *info, size_t size, void *arg)
{
    struct named *w = arg;
    (void)size;
    if (info->dlpi_name == NULL || strcmp(info->dlpi_name, w->name) != 0 || w->n >= 8)
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD) {
            w->at[w->n++] = (void *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
            break;
        }
    return 0;
}

/* Does the namespace (lmid < 0: the base one, dlopen's) hold an object the loader knows by
 * the name asked (its link map's name, which loaded() put there)? */
static int loaded_as(long lmid, const char *asked)
{
    struct named w = { .name = asked };
    dl_iterate_phdr(collect_named, &w);
    for (int i = 0; i < w.n; i++) {
        Dl_info info;
        struct link_map *lm = NULL;
        Lmid_t id;
        if (dladdr1(w.at[i], &info, (void **)&lm, RTLD_DL_LINKMAP) != 0 && lm != NULL &&
            dlinfo(lm, RTLD_DI_LMID, &id) == 0 && id == (lmid < 0 ? LM_ID_BASE : lmid))
            return 1;
    }
    return 0;
}

/* The loader named the library /proc/self/fd/N: give it the name the program asked for. */
static void *loaded(void *handle, int fd, const char *asked)
{
    int e = errno;
    struct link_map *lm;
    if (handle != NULL && dlinfo(handle, RTLD_DI_LINKMAP, &lm) == 0 &&
        strncmp(lm->l_name, "/proc/self/fd/", 14) == 0) {
        char *name = strdup(asked);
        if (name != NULL)
            lm->l_name = name;     /* the loader's own string stays allocated: it may still
                                    * point at it (its list of names) */
    }
    close(fd);
    errno = e;
    return handle;
}

/* A library in a mount that could not be opened through it: the loader is not asked (it
 * would open the mount path), and dlerror() gives its message as the loader words it,
 * until another dl* call fails or a dlopen is made. */
static TLS int failed;
static TLS char *failure;       /* malloc'd: this library's static TLS must stay small (with
                                 * an audit library, ld.so sets it up before loading us) */

static void *fail(const char *asked, int e)
{
    (void)REAL(dlerror)();      /* an older error is over */
    size_t size = strlen(asked) + 96;
    char *message = malloc(size);
    if (message == NULL)
        return NULL;
    snprintf(message, size, "%s: cannot open shared object file: %s", asked, strerror(e));
    free(failure);
    failure = message;
    failed = 1;
    return NULL;
}

/* The real dlerror is found before any program's dl* call can fail: found lazily, by
 * dlsym, it would be found by a successful dl* call, which clears the error the program
 * is about to ask for (ctypes passes dlerror()'s NULL to PyErr_SetString: a crash). */
__attribute__((constructor)) static void dlerror_resolve(void)
{
    (void)REAL(dlerror);
}

char *dlerror(void)
{
    char *real = REAL(dlerror)();
    if (LIKELY(!failed) || real != NULL) {
        failed = 0;
        return real;
    }
    failed = 0;
    return failure;
}

/* The cheap question, asked in a frame of its own so that the caller's stays empty. */
static __attribute__((noinline)) int may_be_in_mount(const char *file)
{
    if (UNLIKELY(failed))
        failed = 0;
    if (file == NULL || LIKELY(ldp_nmounts == 0) || ldp_guard)
        return 0;
    /* liburing: its inline ring calls need the net (a file in a mount: by its name only,
     * the loader's look at its bytes is made through the mount) */
    if (strchr(file, '/') == NULL) {
        escape_before_dlopen(file, 0);
        return library_path_in_mount();
    }
    struct vpath vp;
    const char *p = file;
    if (vfs_lookup(AT_FDCWD, &p, &vp)) {
        escape_before_dlopen(file, 0);
        return 1;
    }
    escape_before_dlopen(file, 1);
    return 0;
}

/* The name the loader is given for fd: /proc/self/fd/N, with one more '/' before N each
 * time N comes again. The loader knows a library by every name it was opened with, so a
 * second library handed over by a reused fd number under the same name would be taken
 * for the first one. */
static void name_of_fd(int fd, char *out, size_t size)
{
    static unsigned short uses[1024];
    static unsigned total;
    unsigned k = fd >= 0 && fd < 1024 ? __atomic_fetch_add(&uses[fd], 1, __ATOMIC_RELAXED)
                                      : __atomic_fetch_add(&total, 1, __ATOMIC_RELAXED);
    size_t at = (size_t)snprintf(out, size, "/proc/self/fd/");
    for (unsigned i = 0; i < k && at + 16 < size; i++)
        out[at++] = '/';
    snprintf(out + at, size - at, "%d", fd);
}

/* The libraries in a mount that the library (fd, its path) needs (DT_NEEDED along its
 * RPATH, LD_LIBRARY_PATH, RUNPATH, $ORIGIN its directory in the mount: exec_libs.c),
 * loaded first, the deepest first, each by its fd: the loader, which would look for them
 * itself and not find them, then finds each already loaded, by its SONAME. */
static void load_dependencies(long lmid, int fd, const char *asked, int mode)
{
    extern char **environ;
    struct exec_libs *l = malloc(sizeof *l);
    if (l == NULL)
        return;
    int n = exec_libs_find(l, fd, asked, environ);
    for (int i = n - 1; i >= 0; i--) {
        if (l->path[i] != NULL && loaded_as(lmid, l->path[i]))
            continue;   /* loaded before */
        char byfd[PATH_MAX];
        name_of_fd(l->fd[i], byfd, sizeof byfd);
        int dep_mode = RTLD_LAZY | (mode & RTLD_GLOBAL);
        void *h = lmid < 0 ? REAL(dlopen)(byfd, dep_mode) : REAL(dlmopen)(lmid, byfd, dep_mode);
        struct link_map *lm;
        if (h != NULL && l->path[i] != NULL && dlinfo(h, RTLD_DI_LINKMAP, &lm) == 0 &&
            strncmp(lm->l_name, "/proc/self/fd/", 14) == 0) {
            char *name = strdup(l->path[i]);
            if (name != NULL)
                lm->l_name = name;
        }
    }
    exec_libs_done(l);
    free(l);
}

/* lmid < 0: dlopen, else dlmopen in that namespace */
static __attribute__((noinline)) void *open_from_mount(long lmid, const char *file, int mode)
{
    int fd;
    char asked[PATH_MAX], byfd[PATH_MAX];
    if (!library_in_mount(file, &fd, asked, sizeof asked))
        return lmid < 0 ? REAL(dlopen)(file, mode) : REAL(dlmopen)(lmid, file, mode);
    if (fd < 0)
        return fail(asked, errno);
    /* loaded before: the loader knows it by the name put back in its link map. It is asked
     * only when that name is there: a name it does not know, it opens (a mount path). */
    void *again = NULL;
    if (loaded_as(lmid, asked))
        again = lmid < 0 ? REAL(dlopen)(asked, mode | RTLD_NOLOAD)
                         : REAL(dlmopen)(lmid, asked, mode | RTLD_NOLOAD);
    name_of_fd(fd, byfd, sizeof byfd);
    if (again == NULL && (mode & RTLD_NOLOAD))
        /* loaded by another name? The loader compares the fd's file with the loaded ones
         * (device and inode); none: NULL with no error, as for a file natively */
        again = lmid < 0 ? REAL(dlopen)(byfd, mode) : REAL(dlmopen)(lmid, byfd, mode);
    if (again != NULL || (mode & RTLD_NOLOAD)) {
        close(fd);
        return again;
    }
    if (!(mode & RTLD_NOLOAD))
        load_dependencies(lmid, fd, asked, mode);
    void *handle = lmid < 0 ? REAL(dlopen)(byfd, mode) : REAL(dlmopen)(lmid, byfd, mode);
    return loaded(handle, fd, asked);
}

__attribute__((optimize("optimize-sibling-calls")))
void *dlopen(const char *file, int mode)
{
    if (LIKELY(!may_be_in_mount(file)))
        return REAL(dlopen)(file, mode);
    return open_from_mount(-1, file, mode);
}

__attribute__((optimize("optimize-sibling-calls")))
void *dlmopen(Lmid_t lmid, const char *file, int mode)
{
    if (LIKELY(!may_be_in_mount(file)))
        return REAL(dlmopen)(lmid, file, mode);
    return open_from_mount(lmid, file, mode);
}
