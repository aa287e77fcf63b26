/*
 * Processes: the file system follows every exec (even with a cleared environment), data
 * written to cached files is written back before the image is replaced, and programs
 * stored in a mount can be executed. vfork (interpose/vfork.c) is the real one only when
 * the child cannot disturb our state.
 * glibc's exec* and posix_spawn* call a private execve, so each spelling is wrapped.
 */
#include "../ldpfuse.h"
#include "escape.h"
#include "supervise.h"
#include "exec_plan.h"
#include "exec_libs.h"
#include <paths.h>
#include <spawn.h>
#include "spawn_plan.h"
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/mman.h>

extern char **environ;
static void adopt_fds(void);
static char **saved_env;        /* LD_PRELOAD and LDPFUSE_* as the launcher set them */
static int nsaved;

void process_init(void)
{
    exec_libs_adopt();      /* before the environment is saved: those are this image's */
    int n = 0;
    for (char **e = environ; e && *e; e++)
        n += strncmp(*e, "LDPFUSE_", 8) == 0 || strncmp(*e, "LD_PRELOAD=", 11) == 0;
    saved_env = calloc((size_t)n + 2, sizeof *saved_env);     /* + exec_env_keep()'s */
    if (saved_env == NULL)
        return;
    for (char **e = environ; e && *e; e++)
        if ((strncmp(*e, "LDPFUSE_", 8) == 0 && strncmp(*e, "LDPFUSE_CWD", 11) != 0 &&
             strncmp(*e, "LDPFUSE_FDS=", 12) != 0) ||
            strncmp(*e, "LD_PRELOAD=", 11) == 0)
            saved_env[nsaved++] = strdup(*e);
    adopt_fds();
}

/* One more variable for every image this process execs, set once (the loader's choice of
 * backend, which children inherit): a slot was kept for it, so exec in another thread
 * sees the array either without it or with it whole. */
void exec_env_keep(const char *entry)
{
    if (saved_env == NULL || strchr(entry, '=') == NULL)
        return;
    for (int i = 0; i < nsaved; i++)
        if (strncmp(saved_env[i], entry, (size_t)(strchr(entry, '=') - entry) + 1) == 0)
            return;     /* this process inherited it */
    static int kept;    /* the one slot is taken */
    char *copy = kept ? NULL : strdup(entry);
    if (copy == NULL)
        return;
    kept = 1;
    saved_env[nsaved] = copy;
    __atomic_store_n(&nsaved, nsaved + 1, __ATOMIC_RELEASE);
}

/* LDPFUSE_FDS: the virtual fds that survive exec, for the new image's table:
 * "fd:kind:mnt:flags:path" records separated by \x1e. */
static char *inherited_fds(void)
{
    if (__atomic_load_n(&ldp_nvfds, __ATOMIC_ACQUIRE) == 0)
        return NULL;
    size_t cap = 256, len = 0;
    char *out = malloc(cap);
    if (out == NULL)
        return NULL;
    len = (size_t)snprintf(out, cap, "LDPFUSE_FDS=");
    for (int fd = 0; fd <= fdtable_max(); fd++) {
        struct vfile *v = fdtable_get(fd);
        if (v == NULL)
            continue;
        int fdflags = REAL(fcntl)(fd, F_GETFD);
        if (fdflags < 0 || (fdflags & FD_CLOEXEC))
            continue;
        size_t need = len + strlen(v->path) + 64;
        if (need > cap) {
            cap = need * 2;
            char *n = realloc(out, cap);
            if (n == NULL)
                break;
            out = n;
        }
        len += (size_t)snprintf(out + len, cap - len, "%s%d:%d:%d:%d:%s", len > 12 ? "\x1e" : "", fd,
                                v->kind, v->mnt, v->flags, v->path);
    }
    if (len == 12) {
        free(out);
        return NULL;
    }
    return out;
}

/* The new image's side: rebuild the table from LDPFUSE_FDS, trusting only fds that are
 * still what the record says (a memfd of ours, an O_PATH stand-in, a passthrough fd). */
static void adopt_fds(void)
{
    const char *env = getenv("LDPFUSE_FDS");
    if (env == NULL)
        return;
    const char *p = env;
    while (*p) {
        const char *end = strchr(p, '\x1e');
        size_t rl = end ? (size_t)(end - p) : strlen(p);
        int fd, kind, mnt, flags, off = 0;
        if (sscanf(p, "%d:%d:%d:%d:%n", &fd, &kind, &mnt, &flags, &off) == 4 && off > 0 &&
            (size_t)off <= rl && mnt >= 0 && mnt < ldp_nmounts && REAL(fcntl)(fd, F_GETFD) >= 0) {
            char link[64], target[64] = "";
            snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
            ssize_t n = REAL(readlink)(link, target, sizeof target - 1);
            target[n > 0 ? n : 0] = '\0';
            struct stat st;
            int isdir = REAL(fstat)(fd, &st) == 0 && S_ISDIR(st.st_mode);
            int ok = (kind == VF_FILE && strncmp(target, "/memfd:ldpfuse:", 15) == 0) ||
                     ((kind == VF_DIR || kind == VF_PATH) && isdir) || kind == VF_PASSTHROUGH;
            if (ok) {
                struct vpath vp;
                vpath_begin(&vp, mnt);
                size_t pl = rl - (size_t)off;
                if (pl < sizeof vp.path) {
                    memcpy(vp.path, p + off, pl);
                    vp.path[pl] = '\0';
                    vfs_adopt(fd, kind, &vp, flags, NULL);
                }
            }
        }
        if (!end)
            break;
        p = end + 1;
    }
}

/* Whether envp describes other mounts than ours: another mount table, or the same mount
 * points served by other file systems or another server (a nested ldpfuse-run at the
 * same mount point). Only the variables that say what is served are compared: a program
 * that drops them (env -i) gets ours back. */
static int serves_what(const char *e)
{
    return strncmp(e, "LDPFUSE_MOUNTPOINTS=", 20) == 0 || strncmp(e, "LDPFUSE_FS_", 11) == 0 ||
           strncmp(e, "LDPFUSE_SOCKET=", 15) == 0 || strncmp(e, "LDPFUSE_MODE=", 13) == 0 ||
           strncmp(e, "LDPFUSE_FIFO_DIR=", 17) == 0;
}

static int launcher_changed(char *const envp[])
{
    int theirs = 0, same = 0, ours = 0;
    for (int i = 0; i < nsaved; i++)
        ours += serves_what(saved_env[i]);
    for (char *const *e = envp; e && *e; e++) {
        if (!serves_what(*e))
            continue;
        theirs++;
        for (int i = 0; i < nsaved; i++)
            if (strcmp(*e, saved_env[i]) == 0) {
                same++;
                break;
            }
    }
    return theirs > 0 && ours > 0 && (same != theirs || theirs != ours);
}

size_t exec_env_room(char *const envp[])
{
    size_t n = 0;
    for (char *const *e = envp; e && *e; e++)
        n++;
    return n + (size_t)nsaved + 5;     /* + 1: an exec_env_keep() between this and exec_env_into() */
}

/* envp with our variables put back (and the virtual cwd, which the kernel cannot carry) */
char **exec_env_into(char *const envp[], char **out, char *cwdbuf, char *realbuf)
{
    /* A nested ldpfuse-run hands its command a mount table of its own: that one wins,
     * and our fds (indexed by our table) are not passed on. */
    int nested = launcher_changed(envp);
    char *fds = nested ? NULL : inherited_fds();    /* freed by the exec (or leaked once) */
    int k = 0;
    for (char *const *e = envp; e && *e; e++) {
        int mine = strncmp(*e, "LDPFUSE_", 8) == 0 || strncmp(*e, "LD_PRELOAD=", 11) == 0;
        int per_process = strncmp(*e, "LDPFUSE_CWD", 11) == 0 || strncmp(*e, "LDPFUSE_FDS=", 12) == 0;
        if (!mine || (nested && !per_process))
            out[k++] = *e;
    }
    for (int i = 0; i < nsaved && !nested; i++)
        out[k++] = saved_env[i];
    if (ldp_cwd_virtual) {
        snprintf(cwdbuf, VPATH_MAX + 16, "LDPFUSE_CWD=%s", ldp_cwd);
        out[k++] = cwdbuf;
        char real[PATH_MAX];
        if (REAL(getcwd)(real, sizeof real)) {
            snprintf(realbuf, PATH_MAX + 24, "LDPFUSE_CWD_REAL=%s", real);
            out[k++] = realbuf;
        }
    }
    if (fds)
        out[k++] = fds;
    out[k] = NULL;
    return out;
}

static char **fix_env(char *const envp[], char *cwdbuf, char *realbuf)
{
    if (saved_env == NULL || ldp_nmounts == 0)
        return (char **)envp;
    char **out = malloc(sizeof *out * exec_env_room(envp));
    if (out == NULL)
        return (char **)envp;
    return exec_env_into(envp, out, cwdbuf, realbuf);
}

static int exec_fd(int fd, char *const argv[], char *const envp[])
{
    char self[40];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    supervise_exec(self);   /* a static or Go program stored in a mount */
    return (int)syscall(SYS_execveat, fd, "", argv, envp, AT_EMPTY_PATH);
}

/* A cached file is a page cache other processes (the shared server) hold open for
 * writing, and the kernel will not exec a file open for writing (ETXTBSY): a copy is
 * exec'd. Returns the copy's fd (close-on-exec), or -1 with errno ETXTBSY. */
static int exec_copy_of(int fd)
{
    int copy = memfd_create("ldpfuse-exec", MFD_CLOEXEC);
    if (copy < 0) {
        errno = ETXTBSY;
        return -1;
    }
    char buf[65536];
    off_t off = 0;
    for (;;) {
        ssize_t n = REAL(pread)(fd, buf, sizeof buf, off);
        if (n <= 0)
            break;
        if (REAL(write)(copy, buf, (size_t)n) != n)
            break;
        off += n;
    }
    return copy;
}

static int exec_copy(int fd, char *const argv[], char *const envp[])
{
    int copy = exec_copy_of(fd);
    if (copy < 0)
        return -1;
    int r = exec_fd(copy, argv, envp);
    int e = errno;
    REAL(close)(copy);
    errno = e;
    return r;
}

/* The libraries in a mount the program (fd, its path) needs at its start, passed across
 * the exec (exec_libs.c): env with what the new image needs to load them (and to skip
 * the mount directories ld.so would search), or NULL when there are none and ld.so
 * searches no mount. */
static TLS struct exec_libs *pending_libs;   /* this thread's exec, until it returns */
static char **libraries_env(int fd, const char *program, char **env)
{
    struct exec_libs *l = malloc(sizeof *l);
    if (l == NULL)
        return NULL;
    char **out = NULL;
    exec_libs_find(l, fd, program, env);
    out = exec_libs_env(l, env);
    if (out == NULL) {
        exec_libs_done(l);
        free(l);
        return NULL;
    }
    pending_libs = l;
    return out;
}

static void libraries_done(char **env)
{
    if (env == NULL)
        return;
    int e = errno;
    free(env);
    if (pending_libs) {
        exec_libs_done(pending_libs);
        free(pending_libs);
        pending_libs = NULL;
    }
    errno = e;
}

int execve(const char *path, char *const argv[], char *const envp[])
{
    if (ldp_nmounts == 0 || ldp_guard)
        return REAL(execve)(path, argv, envp);
    if (UNLIKELY(ldp_vfork_child) && saved_env != NULL)
        return ldp_vfork_child_execve(path, argv, envp);
    struct vpath vp;
    const char *target = path;
    if (!vfs_lookup(AT_FDCWD, &target, &vp) && !supervise_exec(target) && escape_check_exec(target, argv) < 0)
        return -1;
    char cwdbuf[VPATH_MAX + 16], realbuf[PATH_MAX + 24];
    char **env = fix_env(envp, cwdbuf, realbuf);
    pcache_holds_end();
    ldp_before_exec(0);
    int r;
    const char *inside = path;
    if (vfs_lookup(AT_FDCWD, &inside, &vp)) {
        /* a program stored in the mount: run what the kernel would (exec_plan.c), a
         * binary by the kernel fd that stands for it, a script's interpreter by path */
        struct exec_plan plan;
        r = exec_plan_make(&plan, path, argv);
        if (r == 0 && plan.fd >= 0) {
            char **with_libs = libraries_env(plan.fd, plan.program, env);
            char **use = with_libs ? with_libs : env;
            r = exec_fd(plan.fd, plan.argv, use);
            if (r < 0 && errno == ETXTBSY)
                r = exec_copy(plan.fd, plan.argv, use);
            libraries_done(with_libs);
        } else if (r == 0) {
            r = escape_check_exec(plan.path, plan.argv);
            if (r == 0)
                r = REAL(execve)(plan.path, plan.argv, env);
        }
        exec_plan_done(&plan);
    } else if (UNLIKELY(exec_libs_path_in_mount(env))) {
        /* LD_LIBRARY_PATH into a mount: the program's libraries may be there */
        int fd = REAL(open)(path, O_RDONLY | O_CLOEXEC);
        char **with_libs = libraries_env(fd, path, env);    /* fd -1: LD_LIBRARY_PATH only */
        if (fd >= 0)
            REAL(close)(fd);
        r = REAL(execve)(path, argv, with_libs ? with_libs : env);
        libraries_done(with_libs);
    } else {
        r = REAL(execve)(path, argv, env);
    }
    if (env != envp) {
        int e = errno;
        free(env);
        errno = e;
    }
    return r;
}

int execv(const char *path, char *const argv[])
{
    return execve(path, argv, environ);
}

/* execvp's PATH search, on our execve (so that PATH entries in a mount work too) */
int execvpe(const char *file, char *const argv[], char *const envp[])
{
    if (ldp_nmounts == 0 || ldp_guard) {
        static int (*real)(const char *, char *const[], char *const[]);
        if (real == NULL)
            real = (int (*)(const char *, char *const[], char *const[]))real_resolve("execvpe", (void **)&real);
        return real(file, argv, envp);
    }
    if (file == NULL || *file == '\0') {
        errno = ENOENT;
        return -1;
    }
    if (strchr(file, '/')) {
        execve(file, argv, envp);
        goto noexec;
    }
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/bin:/usr/bin";
    int saw_eacces = 0;
    for (const char *p = path;; ) {
        const char *e = strchr(p, ':');
        size_t dl = e ? (size_t)(e - p) : strlen(p);
        char full[PATH_MAX];
        if (dl + 1 + strlen(file) < sizeof full) {
            if (dl == 0)
                snprintf(full, sizeof full, "%s", file);
            else
                snprintf(full, sizeof full, "%.*s/%s", (int)dl, p, file);
            execve(full, argv, envp);
            if (errno == EACCES)
                saw_eacces = 1;
            else if (errno == ENOEXEC)
                goto noexec;
            else if (errno != ENOENT && errno != ENOTDIR && errno != ESTALE && errno != ENODEV &&
                     errno != ETIMEDOUT)
                return -1;
        }
        if (!e)
            break;
        p = e + 1;
    }
    if (saw_eacces)
        errno = EACCES;
    return -1;
noexec:
    if (errno == ENOEXEC) {
        /* POSIX: a file without a recognised format is run by the shell */
        int argc = 0;
        while (argv[argc])
            argc++;
        char **sargv = malloc(sizeof *sargv * (size_t)(argc + 2));
        if (sargv == NULL)
            return -1;
        sargv[0] = (char *)"sh";
        sargv[1] = (char *)file;
        for (int i = 1; i <= argc; i++)
            sargv[i + 1] = argv[i];
        execve(_PATH_BSHELL, sargv, envp);
        free(sargv);
    }
    return -1;
}

int execvp(const char *file, char *const argv[])
{
    return execvpe(file, argv, environ);
}

#define COLLECT_ARGS(first, ap, argv) \
    int argc_ = 1; \
    va_list cp_; \
    va_copy(cp_, ap); \
    while (va_arg(cp_, char *) != NULL) \
        argc_++; \
    va_end(cp_); \
    char **argv = alloca(sizeof(char *) * (size_t)(argc_ + 1)); \
    argv[0] = (char *)(first); \
    for (int i_ = 1; i_ <= argc_; i_++) \
        argv[i_] = va_arg(ap, char *);

int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    COLLECT_ARGS(arg, ap, argv);
    va_end(ap);
    return execve(path, argv, environ);
}

int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    COLLECT_ARGS(arg, ap, argv);
    va_end(ap);
    return execvpe(file, argv, environ);
}

int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    COLLECT_ARGS(arg, ap, argv);
    char **envp = va_arg(ap, char **);
    va_end(ap);
    return execve(path, argv, envp);
}

int fexecve(int fd, char *const argv[], char *const envp[])
{
    char cwdbuf[VPATH_MAX + 16], realbuf[PATH_MAX + 24];
    char **env = fix_env(envp, cwdbuf, realbuf);
    if (!ldp_vfork_child)
        pcache_holds_end();
    ldp_before_exec(0);
    struct vfile *v = vfd(fd);
    if (v && v->kind == VF_FILE && v->pc)
        pcache_fill(v, 0, 0, 1);
    int r = exec_fd(fd, argv, env);
    if (env != envp) {
        int e = errno;
        free(env);
        errno = e;
    }
    return r;
}

/* posix_spawn's child runs glibc's private execve: give it our environment. A program
 * in a mount is found here (posix_spawnp's search of PATH entries in a mount) and handed
 * to the real posix_spawn as the kernel can run it (exec_plan.c): a binary as
 * /proc/self/fd/N of its close-on-exec fd (the kernel opens it before it closes the
 * child's close-on-exec fds), a script as its interpreter with the script's path. */
typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                        const posix_spawnattr_t *, char *const[], char *const[]);

/* posix_spawnp's search, for PATH entries in a mount: the first executable regular file
 * named file in a PATH directory, copied to found, if it is in a mount; NULL when the
 * first one is outside every mount (or there is none): glibc's own search finds it. */
static const char *search_path_in_mount(const char *file, char *found, size_t size)
{
    const char *path = getenv("PATH");
    if (path == NULL)
        path = "/bin:/usr/bin";
    for (const char *p = path;; ) {
        const char *e = strchr(p, ':');
        size_t dl = e ? (size_t)(e - p) : strlen(p);
        if (dl + 2 + strlen(file) <= size) {
            snprintf(found, size, "%.*s%s%s", (int)dl, p, dl ? "/" : "", file);
            struct vpath vp;
            const char *inside = found;
            struct stat st;
            int mine = vfs_lookup(AT_FDCWD, &inside, &vp);
            if (stat(found, &st) == 0 && S_ISREG(st.st_mode) && access(found, X_OK) == 0)
                return mine ? found : NULL;
        }
        if (!e)
            return NULL;
        p = e + 1;
    }
}

static int spawn_common(const char *name, spawn_fn *slot, pid_t *pid, const char *path,
                        const posix_spawn_file_actions_t *fa, const posix_spawnattr_t *attr,
                        char *const argv[], char *const envp[])
{
    static spawn_fn by_path;    /* the real posix_spawn, for what is found here */
    if (*slot == NULL)
        real_resolve(name, (void **)slot);
    if (ldp_nmounts == 0 || ldp_guard)
        return (*slot)(pid, path, fa, attr, argv, envp);
    if (by_path == NULL)
        real_resolve("posix_spawn", (void **)&by_path);
    spawn_fn spawn = *slot;
    char found[PATH_MAX];
    if (path && *path && strchr(path, '/') == NULL && strcmp(name, "posix_spawnp") == 0 &&
        search_path_in_mount(path, found, sizeof found) != NULL) {
        path = found;
        spawn = by_path;
    }
    struct exec_plan plan = { .fd = -1 };
    int planned_exec = 0;
    struct vpath vp;
    const char *inside = path;
    if (path && strchr(path, '/') && vfs_lookup(AT_FDCWD, &inside, &vp)) {
        if (exec_plan_make(&plan, path, argv) < 0) {
            int e = errno;
            exec_plan_done(&plan);
            return e;
        }
        planned_exec = 1;
        spawn = by_path;
        argv = plan.argv;
        path = plan.path;
    }
    /* a static or Go program: spawned through the supervisor's exec-as role */
    char **supervised = NULL;
    if (path && plan.fd < 0 &&
        (supervised = supervise_spawn_argv(path, argv, strcmp(name, "posix_spawnp") == 0)) != NULL) {
        path = supervised[0];
        argv = supervised;
        spawn = by_path;
    }
    if (!supervised && path && strchr(path, '/') && plan.fd < 0 && escape_check_exec(path, argv) < 0) {
        int e = errno;
        exec_plan_done(&plan);
        return e;
    }
    struct spawn_plan fplan;    /* file actions that open mount paths: done here */
    int planned = spawn_plan_make(&fplan, fa);
    if (planned < 0) {
        int e = errno;
        exec_plan_done(&plan);
        free(supervised);
        return e;
    }
    char cwdbuf[VPATH_MAX + 16], realbuf[PATH_MAX + 24];
    char **env = fix_env(envp, cwdbuf, realbuf);
    /* the libraries the program needs from a mount, and ld.so kept out of the mounts, as
     * for execve (their fds are inheritable until the spawn returns) */
    char **with_libs = NULL;
    if (plan.fd >= 0) {
        with_libs = libraries_env(plan.fd, plan.program, env);
    } else if (UNLIKELY(exec_libs_path_in_mount(env))) {
        int fd = path && strchr(path, '/') ? REAL(open)(path, O_RDONLY | O_CLOEXEC) : -1;
        with_libs = libraries_env(fd, path, env);   /* fd -1: LD_LIBRARY_PATH only */
        if (fd >= 0)
            REAL(close)(fd);
    }
    char **lib_env = with_libs ? with_libs : env;
    ldp_before_exec(fa != NULL);
    const posix_spawn_file_actions_t *use_fa = planned ? &fplan.fa : fa;
    char **use_env = planned ? spawn_plan_env(&fplan, lib_env) : lib_env;
    char byfd[64];
    int r;
    if (plan.fd >= 0) {
        snprintf(byfd, sizeof byfd, "/proc/self/fd/%d", plan.fd);
        r = spawn(pid, byfd, use_fa, attr, argv, use_env);
        if (r == ETXTBSY) {
            int copy = exec_copy_of(plan.fd);
            if (copy >= 0) {
                snprintf(byfd, sizeof byfd, "/proc/self/fd/%d", copy);
                r = spawn(pid, byfd, use_fa, attr, argv, use_env);
                REAL(close)(copy);
            }
        }
    } else {
        r = spawn(pid, path, use_fa, attr, argv, use_env);
    }
    if (planned)
        spawn_plan_done(&fplan);
    libraries_done(with_libs);
    if (env != envp)
        free(env);
    if (planned_exec)
        exec_plan_done(&plan);
    free(supervised);
    return r;
}

int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    static spawn_fn real;
    return spawn_common("posix_spawn", &real, pid, path, fa, attr, argv, envp);
}

int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                 const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    static spawn_fn real;
    return spawn_common("posix_spawnp", &real, pid, file, fa, attr, argv, envp);
}
