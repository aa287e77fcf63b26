/*
 * Libraries stored in a mount that a new program needs at its start (DT_NEEDED through
 * LD_LIBRARY_PATH, RPATH or RUNPATH, $ORIGIN of a program in a mount). ld.so opens them
 * with its own system calls before any constructor runs, where no wrapper is. So the
 * exec wrapper looks for them first, as ld.so would: each DT_NEEDED name along the
 * object's RPATH (without RUNPATH), LD_LIBRARY_PATH, then its RUNPATH, $ORIGIN being the
 * object's directory in the mount; the first directory that holds the name decides, and
 * only a library found in a mount is ours (its own DT_NEEDED are looked for in turn).
 * Each one is opened through the mount and passed across the exec as an fd, with the
 * audit library (audit/library_fds.c) that makes ld.so open that fd for the name.
 * ld.so's own search must not reach a mount either (the kernel would answer ENOENT by
 * luck, or a real directory under the mount point):
 *   - LD_LIBRARY_PATH: ld.so is given it without its directories in a mount, and the new
 *     image's ldpfuse puts the caller's back (exec_libs_adopt). What ld.so would have
 *     found there is in the table above, and the rest was not there (cargo's
 *     target/debug/deps, searched for libc.so.6 by every rustc);
 *   - an RPATH or RUNPATH that names a mount (a build tree's absolute RUNPATH; $ORIGIN
 *     is taken by ld.so from the file the kernel ran, never a mount path): the audit
 *     library is used even with no library found, and skips every candidate there.
 * The audit library is not used otherwise: with one, ld.so sets up TLS before it loads
 * the program's libraries, so all of theirs must fit its static surplus (rustc's does
 * not: "cannot allocate memory in static TLS block").
 * The new program's ldpfuse closes the fds and takes the variables out (exec_libs_adopt).
 */
#include "../ldpfuse.h"
#include "exec_libs.h"
#include <dlfcn.h>
#include <elf.h>
#include <stdlib.h>
#include <string.h>

#define AUDIT_LIB "libldpfuse_audit.so"

/* What a program's dynamic section says about its libraries. */
struct deps {
    int n;
    char needed[32][256];
    char rpath[1024], runpath[1024];
};

/* The file offset of a virtual address, through the PT_LOAD segments. */
static off_t file_offset(const Elf64_Phdr *ph, int n, Elf64_Addr addr)
{
    for (int i = 0; i < n; i++)
        if (ph[i].p_type == PT_LOAD && addr >= ph[i].p_vaddr && addr < ph[i].p_vaddr + ph[i].p_filesz)
            return (off_t)(addr - ph[i].p_vaddr + ph[i].p_offset);
    return -1;
}

static void read_string(int fd, off_t off, char *out, size_t size)
{
    ssize_t n = off < 0 ? -1 : REAL(pread)(fd, out, size - 1, off);
    out[n > 0 ? n : 0] = '\0';
    out[strnlen(out, size - 1)] = '\0';
}

/* 0 with d filled, -1 if fd is not a dynamic 64-bit ELF file. */
static int elf_deps(int fd, struct deps *d)
{
    Elf64_Ehdr eh;
    d->n = 0;
    d->rpath[0] = d->runpath[0] = '\0';
    if (REAL(pread)(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 64)
        return -1;
    Elf64_Phdr ph[64];
    size_t phsize = sizeof ph[0] * eh.e_phnum;
    if (REAL(pread)(fd, ph, phsize, (off_t)eh.e_phoff) != (ssize_t)phsize)
        return -1;
    const Elf64_Phdr *dyn = NULL;
    for (int i = 0; i < eh.e_phnum; i++)
        if (ph[i].p_type == PT_DYNAMIC)
            dyn = &ph[i];
    if (dyn == NULL)
        return -1;
    Elf64_Dyn entries[256];
    size_t size = dyn->p_filesz < sizeof entries ? dyn->p_filesz : sizeof entries;
    ssize_t got = REAL(pread)(fd, entries, size, (off_t)dyn->p_offset);
    if (got <= 0)
        return -1;
    int count = (int)(got / (ssize_t)sizeof entries[0]);
    Elf64_Addr strtab = 0;
    for (int i = 0; i < count && entries[i].d_tag != DT_NULL; i++)
        if (entries[i].d_tag == DT_STRTAB)
            strtab = entries[i].d_un.d_ptr;
    off_t base = file_offset(ph, eh.e_phnum, strtab);
    if (base < 0)
        return -1;
    for (int i = 0; i < count && entries[i].d_tag != DT_NULL; i++) {
        off_t at = base + (off_t)entries[i].d_un.d_val;
        if (entries[i].d_tag == DT_NEEDED && d->n < 32)
            read_string(fd, at, d->needed[d->n++], sizeof d->needed[0]);
        else if (entries[i].d_tag == DT_RPATH)
            read_string(fd, at, d->rpath, sizeof d->rpath);
        else if (entries[i].d_tag == DT_RUNPATH)
            read_string(fd, at, d->runpath, sizeof d->runpath);
    }
    return 0;
}

/* dir with $ORIGIN / ${ORIGIN} made origin, then /name */
int exec_libs_needs(const char *path, const char *prefix)
{
    int fd = REAL(open)(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    struct deps *d = malloc(sizeof *d);
    int found = 0;
    if (d != NULL && elf_deps(fd, d) == 0)
        for (int i = 0; i < d->n && !found; i++)
            found = strncmp(d->needed[i], prefix, strlen(prefix)) == 0;
    free(d);
    REAL(close)(fd);
    return found;
}

static int candidate(char *out, size_t size, const char *dir, size_t dl, const char *origin,
                     const char *name)
{
    size_t k = 0;
    for (size_t i = 0; i < dl; ) {
        size_t skip = strncmp(dir + i, "${ORIGIN}", 9) == 0 ? 9 : strncmp(dir + i, "$ORIGIN", 7) == 0 ? 7 : 0;
        const char *add = skip ? origin : dir + i;
        size_t al = skip ? strlen(origin) : 1;
        if (k + al + 1 >= size)
            return -1;
        memcpy(out + k, add, al);
        k += al;
        i += skip ? skip : 1;
    }
    int n = snprintf(out + k, size - k, "%s%s", k ? "/" : "", name);
    return n < 0 || (size_t)n >= size - k ? -1 : 0;
}

/* Where ld.so would find name along dirs (':'-separated): 1 and found filled if that is
 * in a mount, 0 if elsewhere or nowhere along them (done: 1 when the search is over). */
static int search_dirs(const char *dirs, const char *origin, const char *name, char *found,
                       size_t size, int *done)
{
    for (const char *p = dirs; p && *p && !*done; ) {
        const char *end = strpbrk(p, ":;");
        size_t dl = end ? (size_t)(end - p) : strlen(p);
        if (dl > 0 && candidate(found, size, p, dl, origin, name) == 0) {
            struct stat st;
            if (stat(found, &st) == 0 && S_ISREG(st.st_mode)) {
                *done = 1;
                struct vpath vp;
                const char *q = found;
                return vfs_lookup(AT_FDCWD, &q, &vp);
            }
        }
        p = end ? end + 1 : NULL;
    }
    return 0;
}

static const char *env_get(char *const envp[], const char *key)
{
    size_t kl = strlen(key);
    for (char *const *e = envp; e && *e; e++)
        if (strncmp(*e, key, kl) == 0 && (*e)[kl] == '=')
            return *e + kl + 1;
    return NULL;
}

int exec_libs_path_in_mount(char *const envp[])
{
    const char *lp = env_get(envp, "LD_LIBRARY_PATH");
    if (lp == NULL || *lp == '\0')
        return 0;
    for (int i = 0; i < ldp_nmounts; i++)
        if (strstr(lp, ldp_mounts[i].point) != NULL)
            return 1;
    if (ldp_cwd_virtual)
        for (const char *p = lp; p; p = strpbrk(p, ":;") ? strpbrk(p, ":;") + 1 : NULL)
            if (*p != '/')
                return 1;   /* relative (or empty: the working directory) */
    return 0;
}

/* Does a directory of dirs (':'-separated) lie in a mount? $ORIGIN ones are left out: ld.so
 * takes the origin from the file the kernel ran, never a mount path. */
static int dirs_in_mount(const char *dirs)
{
    for (const char *p = dirs; p && *p; ) {
        const char *end = strpbrk(p, ":;");
        size_t dl = end ? (size_t)(end - p) : strlen(p);
        char dir[PATH_MAX];
        if (dl < sizeof dir && memchr(p, '$', dl) == NULL) {
            memcpy(dir, p, dl);
            dir[dl] = '\0';
            struct vpath vp;
            const char *q = dl ? dir : ".";
            if (vfs_lookup(AT_FDCWD, &q, &vp))
                return 1;
        }
        p = end ? end + 1 : NULL;
    }
    return 0;
}

static int known(const struct exec_libs *l, const char *name)
{
    for (int i = 0; i < l->n; i++)
        if (strcmp(l->name[i], name) == 0)
            return 1;
    return 0;
}

/* The libraries of the object (fd, its path) found in a mount, added to l; recursive. */
static void add_deps(struct exec_libs *l, int fd, const char *path, const char *exe_rpath,
                     const char *library_path, int depth)
{
    struct deps *d = malloc(sizeof *d);
    if (d == NULL || depth > 8 || elf_deps(fd, d) < 0) {
        free(d);
        return;
    }
    if (!l->rpath_in_mount && (dirs_in_mount(d->runpath[0] ? "" : d->rpath) || dirs_in_mount(d->runpath)))
        l->rpath_in_mount = 1;
    char origin[PATH_MAX];
    snprintf(origin, sizeof origin, "%s", path);
    char *slash = strrchr(origin, '/');
    if (slash == NULL)
        snprintf(origin, sizeof origin, ".");
    else if (slash == origin)
        origin[1] = '\0';
    else
        *slash = '\0';
    for (int i = 0; i < d->n && l->n < EXEC_LIBS_MAX; i++) {
        const char *name = d->needed[i];
        if (known(l, name))
            continue;
        char found[PATH_MAX];
        int done = 0, ours = 0;
        if (strchr(name, '/')) {
            struct vpath vp;
            const char *q = name;
            snprintf(found, sizeof found, "%s", name);
            ours = vfs_lookup(AT_FDCWD, &q, &vp);
        } else {
            const char *order[] = { d->runpath[0] ? "" : d->rpath, exe_rpath, library_path, d->runpath };
            for (int k = 0; k < 4 && !done && !ours; k++)
                ours = search_dirs(order[k], origin, name, found, sizeof found, &done);
        }
        if (!ours)
            continue;
        struct vpath vp;
        const char *q = found;
        if (!vfs_lookup(AT_FDCWD, &q, &vp))
            continue;
        int lib = loadable_fd(&vp);
        if (lib < 0)
            continue;
        int slot = l->n++;
        l->fd[slot] = lib;
        l->path[slot] = strdup(found);
        snprintf(l->name[slot], sizeof l->name[0], "%s", name);
        add_deps(l, lib, found, exe_rpath, library_path, depth + 1);
    }
    free(d);
}

int exec_libs_find(struct exec_libs *l, int fd, const char *path, char *const envp[])
{
    l->n = 0;
    l->rpath_in_mount = l->path_in_mount = 0;
    l->library_path = NULL;
    struct deps *exe = malloc(sizeof *exe);
    if (exe == NULL)
        return 0;
    const char *exe_rpath = "";
    if (elf_deps(fd, exe) == 0 && exe->runpath[0] == '\0')
        exe_rpath = exe->rpath;
    const char *library_path = env_get(envp, "LD_LIBRARY_PATH");
    l->path_in_mount = library_path && dirs_in_mount(library_path);
    add_deps(l, fd, path, exe_rpath, library_path ? library_path : "", 0);
    free(exe);
    return l->n;
}

/* This library's directory + the audit library's name. */
static int audit_path(char *out, size_t size)
{
    Dl_info info;
    if (dladdr((void *)audit_path, &info) == 0 || info.dli_fname == NULL)
        return -1;
    const char *slash = strrchr(info.dli_fname, '/');
    size_t dl = slash ? (size_t)(slash - info.dli_fname) : 0;
    int n = snprintf(out, size, "%.*s/%s", (int)dl, info.dli_fname, AUDIT_LIB);
    return n < 0 || (size_t)n >= size || REAL(access)(out, R_OK) != 0 ? -1 : 0;
}

#define STRIP_ROOM(lp) (2 * strlen(lp) + 48)

/* "LD_LIBRARY_PATH=" lp without its directories in a mount, then "LDPFUSE_LIBRARY_PATH=" lp,
 * into buf (STRIP_ROOM(lp)); the second string's start. No allocation. */
static char *strip_into(const char *lp, char *buf)
{
    memcpy(buf, "LD_LIBRARY_PATH=", 16);
    size_t k = 16;
    for (const char *p = lp; p; ) {
        const char *end = strpbrk(p, ":;");
        size_t dl = end ? (size_t)(end - p) : strlen(p);
        char dir[PATH_MAX];
        int drop = 0;
        if (dl < sizeof dir && memchr(p, '$', dl) == NULL) {
            memcpy(dir, p, dl);
            dir[dl] = '\0';
            struct vpath vp;
            const char *q = dl ? dir : ".";
            drop = vfs_lookup(AT_FDCWD, &q, &vp);
        }
        if (!drop) {
            if (k > 16)
                buf[k++] = ':';
            memcpy(buf + k, p, dl);
            k += dl;
        }
        p = end ? end + 1 : NULL;
    }
    buf[k++] = '\0';
    memcpy(buf + k, "LDPFUSE_LIBRARY_PATH=", 21);
    memcpy(buf + k + 21, lp, strlen(lp) + 1);
    return buf + k;
}

size_t exec_libs_strip_room(char *const env[])
{
    const char *lp = env_get(env, "LD_LIBRARY_PATH");
    return STRIP_ROOM(lp ? lp : "");
}

char **exec_libs_strip(char *const env[], char **out, char *buf)
{
    const char *lp = env_get(env, "LD_LIBRARY_PATH");
    if (lp == NULL)
        return (char **)env;
    char *keep = strip_into(lp, buf);
    size_t j = 0;
    for (char *const *e = env; e && *e; e++)
        if (strncmp(*e, "LD_LIBRARY_PATH=", 16) != 0 && strncmp(*e, "LDPFUSE_LIBRARY_PATH=", 21) != 0)
            out[j++] = *e;
    out[j++] = buf;
    out[j++] = keep;
    out[j] = NULL;
    return out;
}

char **exec_libs_env(struct exec_libs *l, char *const env[])
{
    int audit = l->n > 0 || l->rpath_in_mount;
    const char *lp = env_get(env, "LD_LIBRARY_PATH");
    int strip = l->path_in_mount && lp != NULL &&
                (l->library_path = malloc(STRIP_ROOM(lp))) != NULL;
    char lib[PATH_MAX];
    if (audit && audit_path(lib, sizeof lib) < 0)
        audit = 0;
    if (!audit && !strip)
        return NULL;
    if (audit) {
        size_t k = (size_t)snprintf(l->table, sizeof l->table, "LDPFUSE_LIBRARY_FDS=");
        for (int i = 0; i < l->n; i++) {
            struct stat st;
            if (REAL(fstat)(l->fd[i], &st) != 0 || REAL(fcntl)(l->fd[i], F_SETFD, 0) != 0)
                continue;   /* left to ld.so's own search */
            int n = snprintf(l->table + k, sizeof l->table - k, "%s%s\x1f%d\x1f%llu:%llu", k > 20 ? "\x1e" : "",
                         l->name[i], l->fd[i], (unsigned long long)st.st_dev, (unsigned long long)st.st_ino);
            if (n < 0 || (size_t)n >= sizeof l->table - k)
                break;
            k += (size_t)n;
        }
        const char *other = env_get(env, "LD_AUDIT");
        snprintf(l->audit, sizeof l->audit, "LD_AUDIT=%s%s%s", lib, other && *other ? ":" : "", other ? other : "");
    }
    size_t count = 0;
    while (env && env[count])
        count++;
    char **out = malloc(sizeof *out * (count + 5));
    if (out == NULL)
        return NULL;
    size_t j = 0;
    for (size_t i = 0; i < count; i++)
        if (!(audit && (strncmp(env[i], "LD_AUDIT=", 9) == 0 || strncmp(env[i], "LDPFUSE_LIBRARY_FDS=", 20) == 0)) &&
            !(strip && (strncmp(env[i], "LD_LIBRARY_PATH=", 16) == 0 ||
                        strncmp(env[i], "LDPFUSE_LIBRARY_PATH=", 21) == 0)))
            out[j++] = env[i];
    if (audit) {
        out[j++] = l->audit;
        out[j++] = l->table;
    }
    if (strip) {
        out[j++] = l->library_path;
        out[j++] = strip_into(lp, l->library_path);
    }
    out[j] = NULL;
    return out;
}

void exec_libs_done(struct exec_libs *l)
{
    int e = errno;
    for (int i = 0; i < l->n; i++) {
        close(l->fd[i]);
        free(l->path[i]);
    }
    l->n = 0;
    free(l->library_path);
    l->library_path = NULL;
    errno = e;
}

/* environ changed in place, not with setenv/unsetenv: a program may define its own (bash
 * does, and binds shell variables with them, which it then sets from main's envp: the
 * array environ still is at this point). */
static void env_drop(const char *key)
{
    extern char **environ;
    size_t kl = strlen(key);
    char **w = environ;
    for (char **e = environ; e && *e; e++)
        if (!(strncmp(*e, key, kl) == 0 && (*e)[kl] == '='))
            *w++ = *e;
    if (w)
        *w = NULL;
}

static void env_replace(const char *key, const char *value)
{
    extern char **environ;
    size_t kl = strlen(key);
    for (char **e = environ; e && *e; e++)
        if (strncmp(*e, key, kl) == 0 && (*e)[kl] == '=') {
            char *entry = malloc(kl + strlen(value) + 2);
            if (entry == NULL)
                return;
            sprintf(entry, "%s=%s", key, value);
            *e = entry;     /* the old one is the exec's (the stack's) */
            return;
        }
}

void exec_libs_adopt(void)
{
    const char *lp = getenv("LDPFUSE_LIBRARY_PATH");
    if (lp != NULL) {
        env_replace("LD_LIBRARY_PATH", lp);
        env_drop("LDPFUSE_LIBRARY_PATH");
    }
    const char *table = getenv("LDPFUSE_LIBRARY_FDS");
    if (table == NULL)
        return;
    for (const char *p = table; *p; ) {
        const char *sep = strchr(p, '\x1f');
        if (sep == NULL)
            break;
        REAL(close)(atoi(sep + 1));
        const char *end = strchr(sep, '\x1e');
        if (end == NULL)
            break;
        p = end + 1;
    }
    env_drop("LDPFUSE_LIBRARY_FDS");
    char lib[PATH_MAX];
    const char *audit = getenv("LD_AUDIT");
    if (audit == NULL || audit_path(lib, sizeof lib) < 0)
        return;
    size_t ll = strlen(lib);
    if (strncmp(audit, lib, ll) == 0 && (audit[ll] == '\0' || audit[ll] == ':')) {
        if (audit[ll] == '\0')
            env_drop("LD_AUDIT");
        else
            env_replace("LD_AUDIT", audit + ll + 1);
    }
}
