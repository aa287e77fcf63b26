/* The mount table, read once from LDPFUSE_MOUNTPOINTS (newline-separated absolute paths,
 * written by ldpfuse-run), and the question every wrapper asks: is this path mine? */
#include "../ldpfuse.h"
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <sys/sysmacros.h>

struct mount *ldp_mounts;
int ldp_nmounts;

void mounts_init(void)
{
    const char *env = getenv("LDPFUSE_MOUNTPOINTS");
    if (env == NULL || *env == '\0')
        return;
    int cap = 1;
    for (const char *p = env; *p; p++)
        cap += *p == '\n';
    struct mount *m = calloc((size_t)cap, sizeof *m);
    int n = 0;
    const char *p = env;
    while (*p) {
        const char *e = strchr(p, '\n');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        if (len > 0 && p[0] == '/') {
            char tmp[PATH_MAX], norm[PATH_MAX];
            if (len < sizeof tmp) {
                memcpy(tmp, p, len);
                tmp[len] = '\0';
                if (path_normalize("/", tmp, norm, sizeof norm, NULL) > 1) {
                    m[n].point = strdup(norm);
                    m[n].len = strlen(norm);
                    /* a device number of our own per mount, unused by real block devices */
                    m[n].dev = makedev(0x4c44, n);
                    m[n].last = strrchr(m[n].point, '/') + 1;
                    n++;
                }
            }
        }
        if (!e)
            break;
        p = e + 1;
    }
    /* The launcher writes nested mounts longest first, so the first match wins; the
     * backend indexes mounts in this same order. */
    ldp_mounts = m;
    __atomic_store_n(&ldp_nmounts, n, __ATOMIC_RELEASE);
}

/* abs, whose length is len, is in mount i: its path there into vp (if not NULL). 1. */
static int in_mount(int i, const char *abs, size_t len, struct vpath *vp)
{
    if (vp) {
        const struct mount *m = &ldp_mounts[i];
        size_t rl = len - m->len;
        if (rl == 0) {
            vp->path[0] = '/';
            vp->path[1] = '\0';
        } else {
            memcpy(vp->path, abs + m->len, rl + 1);
        }
        vp->mnt = i;
    }
    return 1;
}

int mount_match(const char *abs, struct vpath *vp)
{
    size_t len = strlen(abs);
    for (int i = 0; i < ldp_nmounts; i++) {
        const struct mount *m = &ldp_mounts[i];
        if (len >= m->len && memcmp(abs, m->point, m->len) == 0 && (abs[m->len] == '/' || abs[m->len] == '\0'))
            return in_mount(i, abs, len, vp);
    }
    return 0;
}

/* A path is clean when lexical normalisation would not change it. */
static int path_is_clean_bytes(const char *p)
{
    for (; *p; p++) {
        if (*p != '/')
            continue;
        char c = p[1];
        if (c == '/' || c == '\0')
            return 0;           /* "//", or a trailing '/' that demands a directory */
        if (c == '.') {
            char d = p[2];
            if (d == '/' || d == '\0')
                return 0;
            if (d == '.' && (p[3] == '/' || p[3] == '\0'))
                return 0;
        }
    }
    return 1;
}

/* The bytes of word w equal to c's (c repeated in every byte): 0x80 in each, exactly (no
 * borrow from a lower byte, unlike the shorter has-zero test). */
static inline uint64_t bytes_equal(uint64_t w, uint64_t c)
{
    uint64_t x = w ^ c;
    return ~(((x & 0x7f7f7f7f7f7f7f7fULL) + 0x7f7f7f7f7f7f7f7fULL) | x | 0x7f7f7f7f7f7f7f7fULL);
}

#define ONES 0x0101010101010101ULL
#define CLEAN_NOT ((size_t)-1)

/* The length of path p if it is clean, else CLEAN_NOT: one pass, eight bytes at a time
 * (every lookup of an absolute path in a mount makes it: a byte loop was 225 instructions a
 * path of 40 bytes, a seventh of the preload's work in a create cycle). A word where a '/'
 * is followed by a '/', a '.' or the end, or that ends in a '/', is decided by the byte loop.
 * The loads are aligned, so the word that holds the NUL lies in the NUL's page (one
 * path_readable found mapped) and nothing past it is read beyond that word: little-endian
 * only, as the preload is (x86-64, aarch64). */
__attribute__((no_sanitize_address))
static size_t clean_length(const char *p)
{
#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    const uint64_t *w = (const uint64_t *)((uintptr_t)p & ~(uintptr_t)7);
    unsigned skip = (unsigned)((uintptr_t)p & 7);
    uint64_t before = ~(uint64_t)0 << (8 * skip);   /* the bytes of the first word that are p's */
    uint64_t carry = 0;         /* the last word ended in a '/' */
    for (;; w++) {
        uint64_t v = *w;
        uint64_t slash = bytes_equal(v, '/' * ONES) & before;
        uint64_t end = bytes_equal(v, 0) & before;
        uint64_t dot = bytes_equal(v, '.' * ONES);
        before = ~(uint64_t)0;
        /* a byte after a '/' (this word's, shifted up one byte, or the last word's) that is
         * a '/', a '.' or the NUL */
        uint64_t after = (slash << 8) | carry;
        if (after & (slash | dot | end)) {
            if (end) {
                uint64_t first = end & (~end + 1);      /* the NUL; past it is not the path's */
                if (after & (slash | dot | end) & ((first << 1) - 1))
                    return path_is_clean_bytes(p) ? strlen(p) : CLEAN_NOT;
            } else {
                return path_is_clean_bytes(p) ? strlen(p) : CLEAN_NOT;
            }
        }
        if (end)
            return (size_t)((const char *)w - p) + (size_t)(__builtin_ctzll(end) >> 3);
        carry = slash >> 56;
    }
#else
    return path_is_clean_bytes(p) ? strlen(p) : CLEAN_NOT;
#endif
}


static int probe_mount(const char *abs)
{
    return mount_match(abs, NULL);
}

/* Has p a ".." component? */
int path_has_dotdot(const char *p)
{
    for (const char *s = p; (s = strstr(s, "..")) != NULL; s += 2)
        if ((s == p || s[-1] == '/') && (s[2] == '/' || s[2] == '\0'))
            return 1;
    return 0;
}

/* The kernel resolves "dir/.." only if dir exists and is a directory; lexical
 * normalisation would not notice. For a path that touches a mount, check each component
 * before a "..": if one fails, point *pathp at it (with a '/') so the real call fails with
 * the kernel's own errno. Returns 0 then, 1 when every such component is a directory. */
__attribute__((noinline))     /* its buffers on the stack only for a path with ".." */
static int check_dotdot(const char *base, const char **pathp, struct vpath *vp, char *prefix)
{
    const char *rel = *pathp;
    snprintf(prefix, VPATH_MAX, "%s", rel[0] == '/' ? "/" : base);
    const char *p = rel;
    while (*p) {
        while (*p == '/')
            p++;
        const char *e = strchr(p, '/');
        size_t cl = e ? (size_t)(e - p) : strlen(p);
        if (cl == 2 && p[0] == '.' && p[1] == '.' && strcmp(prefix, "/") != 0) {
            struct stat st;
            struct vpath pv;
            int virt = mount_match(prefix, &pv);
            int ok = virt ? (pv.trailing_slash = 0, vfs_getattr(&pv, 0, &st) == 0) : REAL(stat)(prefix, &st) == 0;
            if (ok && virt && S_ISLNK(st.st_mode)) {
                /* ".." after a symlink is the parent of its target, as in the kernel */
                char phys[PATH_MAX];
                if (realpath(prefix, phys) == NULL) {
                    ok = 0;
                } else {
                    memcpy(prefix, phys, strlen(phys) + 1);
                    ok = (mount_match(prefix, &pv) ? (pv.trailing_slash = 0, vfs_getattr(&pv, 1, &st) == 0)
                                                   : REAL(stat)(prefix, &st) == 0);
                }
            }
            if (!ok || !S_ISDIR(st.st_mode)) {
                /* the real call must fail, with the errno the kernel would give: a real
                 * prefix fails by itself; for a virtual one, a path that fails the same way */
                int e = ok ? ENOTDIR : errno;
                if (mount_match(prefix, NULL))
                    snprintf(vp->path, sizeof vp->path, "%s", e == ENOTDIR ? "/dev/null/" : "/proc/self/ldpfuse-no-such-file");
                else
                    snprintf(vp->path, sizeof vp->path, "%.4094s/", prefix);
                *pathp = vp->path;
                return 0;
            }
        }
        char comp[NAME_MAX + 1], next[VPATH_MAX];
        if (cl > NAME_MAX)
            return 1;
        memcpy(comp, p, cl);
        comp[cl] = '\0';
        if (cl > 0 && path_normalize(prefix, comp, next, sizeof next, NULL) >= 0)
            memcpy(prefix, next, strlen(next) + 1);
        if (!e)
            break;
        p = e + 1;
    }
    return 1;
}

static int refuse_too_long(const char **pathp);

/* normalise base+rel; in a mount -> 1; through one and out -> rewrite *pathp; else 0 */
static int resolve(const char *base, const char **pathp, struct vpath *vp)
{
    if (strnlen(*pathp, PATH_MAX) >= PATH_MAX)
        return refuse_too_long(pathp);  /* the kernel refuses the string itself */
    char norm[VPATH_MAX];
    int visited = 0;
    if (path_normalize_probe(base, *pathp, norm, sizeof norm, &vp->trailing_slash, probe_mount, &visited) < 0)
        return (visited || mount_match(base, NULL)) ? refuse_too_long(pathp) : 0;
    int in = mount_match(norm, NULL);
    if ((in || visited) && path_has_dotdot(*pathp)) {
        if (!check_dotdot(base, pathp, vp, norm))
            return 0;
        in = mount_match(norm, NULL);
        if (!in) {
            memcpy(vp->path, norm, strlen(norm) + 1);
            *pathp = vp->path;
            return 0;
        }
    }
    if (in) {
        int trailing = vp->trailing_slash;
        mount_match(norm, vp);
        vp->trailing_slash = trailing;
        return 1;
    }
    if (visited) {
        size_t len = strlen(norm);
        if (vp->trailing_slash && len + 1 < sizeof vp->path)
            norm[len++] = '/', norm[len] = '\0';
        memcpy(vp->path, norm, len + 1);
        *pathp = vp->path;
    }
    return 0;
}

/* Lexical normalisation only removes components, so a path that does not contain a mount
 * point's last component anywhere can neither lead into that mount nor through it. One
 * vectorised strstr per mount rejects almost every path that is not ours. */
static int may_touch_a_mount(const char *path)
{
    for (int i = 0; i < ldp_nmounts; i++)
        if (strstr(path, ldp_mounts[i].last) != NULL)
            return 1;
    return 0;
}

/* The mount a path begins with (its point, then '/' or the path's end), or -1: such a path
 * touches that mount, what may_touch_a_mount would say for the paths that are in a mount,
 * without its strstr (a hundred instructions a lookup); and for a clean path it is the mount
 * mount_match finds (the same test, in the same order), so a lookup need not ask again. A
 * path elsewhere costs a compare of its second byte per mount. */
static int mount_starting(const char *path)
{
    for (int i = 0; i < ldp_nmounts; i++) {
        const struct mount *m = &ldp_mounts[i];
        if (path[1] == m->point[1] && strncmp(path, m->point, m->len) == 0 &&
            (path[m->len] == '/' || path[m->len] == '\0'))
            return i;
    }
    return -1;
}

int mount_named_in(const char *s)
{
    return may_touch_a_mount(s);
}

/* A path the program passes may point anywhere: the kernel answers EFAULT for memory that
 * is not mapped, and so must we rather than fault in the program's stead. mincore() says
 * whether a page is mapped; each thread remembers the last pages it found mapped, so a
 * path on the same stack or heap page as the last one costs a compare. */
#define PAGE_OF(p) ((uintptr_t)(p) & ~(uintptr_t)4095)
static TLS uintptr_t mapped_page[2];

static int page_mapped(uintptr_t page)
{
    if (page < 4096 || page >= ((uintptr_t)1 << 47))
        return 0;   /* first: the remembered pages start as 0 */
    if (page == mapped_page[0] || page == mapped_page[1])
        return 1;
    unsigned char vec;
    int saved = errno;
    int ok = syscall(SYS_mincore, (void *)page, 1, &vec) == 0;
    errno = saved;
    if (ok) {
        mapped_page[1] = mapped_page[0];
        mapped_page[0] = page;
    }
    return ok;
}

/* Can the whole string at path, up to its NUL or PATH_MAX bytes, be read? */
static int path_readable(const char *path)
{
    uintptr_t page = PAGE_OF(path);
    for (size_t scanned = 0; scanned <= PATH_MAX; page += 4096) {
        if (!page_mapped(page))
            return 0;
        const char *from = page > (uintptr_t)path ? (const char *)page : path;
        size_t left = page + 4096 - (uintptr_t)from;
        if (memchr(from, '\0', left) != NULL)
            return 1;
        scanned += left;
    }
    return 1;
}

static int lookup(int dirfd, const char **pathp, struct vpath *vp);

/* A path the kernel refuses with ENAMETOOLONG wherever it is resolved. */
static char too_long[NAME_MAX + 3];

/* A name in a mount longer than NAME_MAX, or a path into a mount that no longer fits in
 * PATH_MAX once joined to its directory: ENAMETOOLONG, as the kernel says (the FS would
 * say ENOENT, or be asked about a path cut short). */
static int refuse_too_long(const char **pathp)
{
    if (too_long[0] == '\0') {
        memset(too_long + 1, 'x', NAME_MAX + 1);
        too_long[0] = '/';
    }
    *pathp = too_long;
    return 0;
}

int vfs_lookup_refused(const char *path)
{
    if (path == NULL || !path_readable(path))
        return EFAULT;
    return path == too_long ? ENAMETOOLONG : 0;
}

int vfs_lookup_slow(int dirfd, const char **pathp, struct vpath *vp)
{
    if (UNLIKELY(!path_readable(*pathp)))
        return 0;       /* the real call fails with EFAULT, as natively */
    int in = lookup(dirfd, pathp, vp);
    if (in && UNLIKELY(vpath_name_too_long(vp->path)))
        return refuse_too_long(pathp);
    return in;
}

/* A real directory fd and a relative path that leads into a mount: the mount point's
 * parent opened by rsync's component-by-component walk ("/", then "tmp", then "mnt"), or
 * find -execdir's. Such a path names the mount point's last component, so any other costs
 * one strstr per mount; one that does pays a readlink of /proc/self/fd/N for the
 * directory's path (the kernel's, with symlinks resolved). */
static int real_dirfd_into_mount(int dirfd, const char **pathp, struct vpath *vp)
{
    if (LIKELY(!may_touch_a_mount(*pathp)))
        return 0;
    char link[32], base[PATH_MAX];
    snprintf(link, sizeof link, "/proc/self/fd/%d", dirfd);
    int saved = errno;
    ssize_t n = REAL(readlink)(link, base, sizeof base - 1);
    errno = saved;
    if (n <= 0 || base[0] != '/')
        return 0;       /* not an fd (the real call says EBADF), or not a directory's */
    base[n] = '\0';
    return resolve(base, pathp, vp);
}

static int lookup(int dirfd, const char **pathp, struct vpath *vp)
{
    const char *path = *pathp;
    if (path[0] == '/') {
        int mnt = mount_starting(path);
        if (mnt < 0 && LIKELY(!may_touch_a_mount(path)))
            return 0;
        size_t len = clean_length(path);
        if (len != CLEAN_NOT) {
            if (len >= PATH_MAX)
                return 0;
            vp->trailing_slash = 0;
            /* clean: in the mount it begins with, or in none */
            return mnt >= 0 ? in_mount(mnt, path, len, vp) : 0;
        }
        return resolve("/", pathp, vp);
    }
    if (path[0] == '\0')
        return 0;       /* "" with AT_EMPTY_PATH is the caller's business */
    if (dirfd == AT_FDCWD) {
        if (!ldp_cwd_virtual && !ldp_cwd_above_mount && !path_has_dotdot(path))
            return 0;
        if (ldp_cwd == NULL)
            return 0;
        return resolve(ldp_cwd, pathp, vp);
    }
    struct vfile *v = fdtable_get(dirfd);
    if (v == NULL)
        return real_dirfd_into_mount(dirfd, pathp, vp);
    if (v->kind != VF_DIR)
        return 0;
    char base[VPATH_MAX];
    if (mount_fullpath(v->mnt, v->path, base, sizeof base) < 0)
        return refuse_too_long(pathp);
    return resolve(base, pathp, vp);
}

int mount_fullpath(int mnt, const char *path, char *out, size_t size)
{
    const struct mount *m = &ldp_mounts[mnt];
    int n = snprintf(out, size, "%s%s", m->point, strcmp(path, "/") == 0 ? "" : path);
    if (n < 0 || (size_t)n >= size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    return 0;
}

int vfs_fullpath(const struct vpath *vp, char *out, size_t size)
{
    return mount_fullpath(vp->mnt, vp->path, out, size);
}
