/*
 * The safety net (docs/escapes.md): system calls that never pass through a libc function
 * (an inline `syscall` instruction in the program or a library, ld.so's own opens,
 * liburing), caught with Syscall User Dispatch (SUD, Linux >= 5.11, no privilege).
 *
 * The allowed range is libc's text: every libc function, and so every wrapper's REAL
 * call, reaches the kernel as before, untrapped (+10-15 ns: the kernel's slower entry
 * path for an armed thread). A system call from anywhere else stops
 * with SIGSYS before the kernel runs it; on_sigsys decodes it from the registers and:
 *  - if it names a path in a mount or a virtual fd, calls this library's own wrapper
 *    for it (the same code that serves the libc call), reports it once per call and
 *    program, and under --strict fails it with EIO instead;
 *  - otherwise makes the same call from libc's syscall() and puts the result in rax.
 * A few calls cannot be made from a signal handler in the caller's stead (a thread's
 * clone on a new stack, a sigreturn from a trampoline outside libc): for those the net
 * steps aside in that thread (the call is run where it was made, unwatched from then on).
 *
 * SUD is per thread and not inherited: it is armed at process start, in every thread
 * started with pthread_create, and in the child of a fork. SIGSYS must never be blocked
 * while it is armed (the kernel kills a process whose trapped call finds it blocked):
 * the masks a program sets (sigprocmask, pthread_sigmask, a handler's sa_mask, a raw
 * rt_sigprocmask) are kept free of it, and a program's own SIGSYS handler (seccomp
 * users) is kept aside and called for every SIGSYS that is not the net's.
 *
 * At exec (always, net or not), a program the loader will not preload us into
 * (statically linked, set-ID) is named in one line; --strict refuses to start it.
 */
#include "../ldpfuse.h"
#include "escape.h"
#include "exec_libs.h"
#include <dlfcn.h>
#include <link.h>
#include <sched.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/inotify.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/xattr.h>
#include <ucontext.h>
#include <elf.h>
#include <dirent.h>
#include <time.h>

#ifndef PR_SET_SYSCALL_USER_DISPATCH
#define PR_SET_SYSCALL_USER_DISPATCH 59
#define PR_SYS_DISPATCH_OFF 0
#define PR_SYS_DISPATCH_ON 1
#endif
#define SUD_ALLOW 0
#define SUD_BLOCK 1
#ifndef SYS_USER_DISPATCH
#define SYS_USER_DISPATCH 2     /* si_code of a SIGSYS raised by SUD */
#endif

extern char *program_invocation_name;

int ldp_escapes;
static TLS char selector;               /* SUD_ALLOW / SUD_BLOCK, read by the kernel */
static TLS int armed;
static unsigned long libc_start, libc_len;
static long (*libc_syscall)(long, ...);
static int (*real_pthread_sigmask)(int, const sigset_t *, sigset_t *);
/* libc's own sigaction, past any other interposer (a sanitizer's runtime wraps SIGSYS's
 * handler in one of its own that blocks every signal and makes raw system calls) */
static int (*libc_sigaction)(int, const struct sigaction *, struct sigaction *);
static struct sigaction program_sigsys;  /* what the program asked SIGSYS to do */
static unsigned char reported[512];      /* per system call number: reported once */

/* ---- arming */

static int find_libc_text(struct dl_phdr_info *info, size_t size, void *data)
{
    unsigned long fn = (unsigned long)data;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        unsigned long lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X) && fn >= lo && fn < lo + ph->p_memsz) {
            libc_start = lo;
            libc_len = ph->p_memsz;
            return 1;
        }
    }
    return 0;
}

static void arm_thread(void)
{
    if (libc_len == 0)
        return;
    sigset_t sys;
    sigemptyset(&sys);
    sigaddset(&sys, SIGSYS);
    real_pthread_sigmask(SIG_UNBLOCK, &sys, NULL);  /* an exec may have left it blocked */
    selector = SUD_ALLOW;
    if (prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_ON, libc_start, libc_len, &selector) == 0) {
        armed = 1;
        selector = SUD_BLOCK;
    }
}

/* The net steps aside in this thread: the call at hand is run where it was made. */
static void disarm_thread(void)
{
    prctl(PR_SET_SYSCALL_USER_DISPATCH, PR_SYS_DISPATCH_OFF, 0, 0, 0);
    armed = 0;
}

static void on_sigsys(int sig, siginfo_t *si, void *ctx);

/* The net up in this thread (and, from now on, in every thread pthread_create starts and
 * in forked children), acting as mode says: 0, or -1 when it cannot be armed here. */
static int install(int mode, const char *why)
{
    /* libc's own functions, past any other interposer: libc's syscall() anchors the
     * allowed range (another library's would make that library's text the range) */
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    libc_syscall = libc ? (long (*)(long, ...))dlsym(libc, "syscall") : NULL;
    libc_sigaction = libc ? (int (*)(int, const struct sigaction *, struct sigaction *))dlsym(libc, "sigaction") : NULL;
    if (libc_syscall == NULL)
        real_resolve("syscall", (void **)&libc_syscall);
    if (libc_sigaction == NULL)
        libc_sigaction = REAL(sigaction);
    dl_iterate_phdr(find_libc_text, (void *)libc_syscall);
    if (libc_len == 0) {
        ldp_log(LOG_WARNING, "%s: libc's text was not found; the net is off", why);
        return -1;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigsys;
    /* SA_NODEFER: a seccomp SIGSYS raised by a call made for the program must reach
     * the program's handler while this one runs */
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART | SA_ONSTACK;
    libc_sigaction(SIGSYS, &sa, &program_sigsys);
    ldp_escapes = mode;
    arm_thread();
    if (!armed)     /* Linux < 5.11, or a seccomp policy that refuses the prctl */
        ldp_log(LOG_WARNING, "%s: Syscall User Dispatch is not available here (%s): "
                "system calls made outside libc are not watched", why, strerror(errno));
    return armed ? 0 : -1;
}

/* Is liburing among the objects loaded (liburing.so.2, liburing-ffi.so.2, any version)? */
static int is_liburing(const char *name)
{
    const char *base = name ? strrchr(name, '/') : NULL;
    base = base ? base + 1 : name;
    return base != NULL && strncmp(base, "liburing", 8) == 0 && strstr(base, ".so") != NULL;
}

static int find_liburing(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    (void)data;
    return is_liburing(info->dlpi_name);
}

/* liburing makes io_uring_setup, io_uring_enter and io_uring_register inline (its 2.3
 * imports only calloc and free from libc), so no wrapper sees its rings: in a process
 * that maps it, the net is put up with the net off too, acting on the ring's calls only
 * (ESCAPES_RING: interpose/uring.c fills every cached fd whole before each submission;
 * every other trapped call is made as it was, unreported). */
void escape_arm_for_rings(void)
{
    static int done;
    if (ldp_escapes != ESCAPES_OFF || __atomic_exchange_n(&done, 1, __ATOMIC_RELAXED))
        return;
    install(ESCAPES_RING, "liburing");
}

/* A SIGSYS this library sends its own threads: arm the net in the thread that takes it. */
#define ARM_PLEASE 0x6c647066
static int arms_pending;

static int arm_request(const siginfo_t *si)
{
    return si->si_code == SI_QUEUE && si->si_pid == getpid() && si->si_value.sival_int == ARM_PLEASE;
}

/* The threads already running when the net goes up for a dlopen (SUD is per thread): each
 * is sent a SIGSYS that arms it, and waited for, 50 ms at most (a thread that blocks
 * SIGSYS is armed when it unblocks it), before the loader brings liburing in. */
static void arm_other_threads(void)
{
    int dir = REAL(open)("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return;
    long self = libc_syscall(SYS_gettid), pid = getpid();
    char buf[4096];
    long n;
    while ((n = libc_syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0)
        for (long at = 0; at < n;) {
            struct dirent64 *e = (struct dirent64 *)(buf + at);
            at += e->d_reclen;
            long tid = atol(e->d_name);
            if (tid <= 0 || tid == self)
                continue;
            siginfo_t si;
            memset(&si, 0, sizeof si);
            si.si_signo = SIGSYS;
            si.si_code = SI_QUEUE;
            si.si_pid = (pid_t)pid;
            si.si_uid = getuid();
            si.si_value.sival_int = ARM_PLEASE;
            __atomic_add_fetch(&arms_pending, 1, __ATOMIC_RELAXED);
            if (libc_syscall(SYS_rt_tgsigqueueinfo, pid, tid, SIGSYS, &si) < 0)
                __atomic_sub_fetch(&arms_pending, 1, __ATOMIC_RELAXED);
        }
    REAL(close)(dir);
    for (int i = 0; i < 500 && __atomic_load_n(&arms_pending, __ATOMIC_ACQUIRE) > 0; i++) {
        struct timespec tick = { 0, 100000 };
        nanosleep(&tick, NULL);
    }
}

void escape_init(void)
{
    const char *mode = getenv("LDPFUSE_ESCAPES");
    real_resolve("pthread_sigmask", (void **)&real_pthread_sigmask);
    if (mode != NULL && (strcmp(mode, "watch") == 0 || strcmp(mode, "strict") == 0)) {
        install(strcmp(mode, "strict") == 0 ? ESCAPES_STRICT : ESCAPES_WATCH, "--watch-escapes");
        return;
    }
    if (dl_iterate_phdr(find_liburing, NULL))
        escape_arm_for_rings();
}

/* dlopen() of name, before the loader runs: does it bring liburing (its own name, or a
 * DT_NEEDED of the file it names, read when read_file: a path outside the mounts)? Then
 * the net is put up first (escape_arm_for_rings). */
void escape_before_dlopen(const char *name, int read_file)
{
    /* files whose DT_NEEDED were read and name no liburing, by a hash of their name: a
     * dlopen of a loaded library again (ctypes, plugins) is not made to read it again */
    static unsigned long long checked[64];
    if (LIKELY(ldp_escapes != ESCAPES_OFF) || name == NULL)
        return;
    if (is_liburing(name)) {
        escape_arm_for_rings();
        if (ldp_escapes == ESCAPES_RING)
            arm_other_threads();
        return;
    }
    if (!read_file || strchr(name, '/') == NULL)
        return;     /* found by the loader's search, or in a mount: only its name tells */
    unsigned long long h = 14695981039346656037ULL;     /* FNV-1a */
    for (const char *c = name; *c; c++)
        h = (h ^ (unsigned char)*c) * 1099511628211ULL;
    h |= 1;
    unsigned slot = (unsigned)(h % 64);
    if (__atomic_load_n(&checked[slot], __ATOMIC_RELAXED) == h)
        return;
    if (exec_libs_needs(name, "liburing")) {
        escape_arm_for_rings();
        if (ldp_escapes == ESCAPES_RING)
            arm_other_threads();
    } else
        __atomic_store_n(&checked[slot], h, __ATOMIC_RELAXED);
}

void escape_after_fork(void)
{
    if (ldp_escapes && armed)
        arm_thread();
}

struct start {
    void *(*fn)(void *);
    void *arg;
};

static void *start_armed(void *p)
{
    struct start s = *(struct start *)p;
    free(p);
    arm_thread();
    return s.fn(s.arg);
}

int pthread_create(pthread_t *t, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    static int (*real)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
    if (real == NULL)
        real_resolve("pthread_create", (void **)&real);
    struct start *s;
    if (LIKELY(ldp_escapes == 0) || (s = malloc(sizeof *s)) == NULL)
        return real(t, attr, fn, arg);
    s->fn = fn;
    s->arg = arg;
    int r = real(t, attr, start_armed, s);
    if (r != 0)
        free(s);
    return r;
}

/* ---- SIGSYS stays deliverable, and the program's SIGSYS handler is kept aside */

static const sigset_t *without_sigsys(int how, const sigset_t *set, sigset_t *copy)
{
    if (ldp_escapes == 0 || set == NULL || how == SIG_UNBLOCK || !sigismember(set, SIGSYS))
        return set;
    *copy = *set;
    sigdelset(copy, SIGSYS);
    return copy;
}

int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
    if (UNLIKELY(real_pthread_sigmask == NULL))
        real_resolve("pthread_sigmask", (void **)&real_pthread_sigmask);
    sigset_t copy;
    return real_pthread_sigmask(how, without_sigsys(how, set, &copy), old);
}

int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
    static int (*real)(int, const sigset_t *, sigset_t *);
    if (real == NULL)
        real_resolve("sigprocmask", (void **)&real);
    sigset_t copy;
    return real(how, without_sigsys(how, set, &copy), old);
}

int escape_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (sig == SIGSYS) {
        if (old)
            *old = program_sigsys;
        if (act) {
            program_sigsys = *act;
            sigdelset(&program_sigsys.sa_mask, SIGSYS);
        }
        return 0;
    }
    if (act && sigismember(&act->sa_mask, SIGSYS)) {
        struct sigaction copy = *act;
        sigdelset(&copy.sa_mask, SIGSYS);
        return REAL(sigaction)(sig, &copy, old);
    }
    return REAL(sigaction)(sig, act, old);
}

__sighandler_t escape_signal(__sighandler_t h)
{
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sa.sa_flags = SA_RESTART;
    escape_sigaction(SIGSYS, &sa, &old);
    return old.sa_handler;
}

/* A SIGSYS that is not ours (seccomp's SECCOMP_RET_TRAP, a kill): the program's. */
static void chain(int sig, siginfo_t *si, void *ctx)
{
    struct sigaction pa = program_sigsys;
    if (pa.sa_flags & SA_SIGINFO) {
        if (pa.sa_sigaction)
            pa.sa_sigaction(sig, si, ctx);
    } else if (pa.sa_handler == SIG_IGN) {
        return;
    } else if (pa.sa_handler != SIG_DFL) {
        pa.sa_handler(sig);
    } else {
        struct sigaction dfl;
        memset(&dfl, 0, sizeof dfl);
        dfl.sa_handler = SIG_DFL;
        libc_sigaction(SIGSYS, &dfl, NULL);
        raise(SIGSYS);      /* the default: end with a core dump, as without us */
    }
}

/* ---- reporting */

/* One line in the log (when `logged`), and one in the launcher's record under --strict. */
static void record(const char *call, const char *where, const char *outcome, int logged)
{
    const char *name = program_invocation_name ? program_invocation_name : "?";
    int level = strncmp(outcome, "refused", 7) == 0 ? LOG_ERROR : LOG_WARNING;
    if (logged)
        ldp_log(level, "%s made %s on %s outside libc: %s", name, call, where, outcome);
    const char *file = getenv("LDPFUSE_ESCAPES_LOG");
    if (file == NULL || *file == '\0' || strncmp(outcome, "answered", 8) == 0)
        return;     /* under --strict, what was answered in the program's favour is no escape */
    char line[PATH_MAX + 512];
    int n = snprintf(line, sizeof line, "%d\t%s\t%s\t%s\t%s\n", (int)getpid(), name, call, where, outcome);
    if (n <= 0)
        return;
    if ((size_t)n >= sizeof line)
        n = sizeof line - 1;
    int fd = REAL(open)(file, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd >= 0) {
        (void)!REAL(write)(fd, line, (size_t)n);
        REAL(close)(fd);
    }
}

static void report_once(long nr, const char *call, const char *where, const char *outcome)
{
    if (nr >= 0 && nr < (long)sizeof reported && __atomic_exchange_n(&reported[nr], 1, __ATOMIC_RELAXED))
        return;
    record(call, where, outcome, 1);
}

/* ---- what a trapped call names */

enum {
    NOT_OURS = 0,   /* make the call as it was */
    OURS = 1,       /* it names a mount: report, and serve (or refuse under --strict) */
    QUIET = 2,      /* the wrapper must see it (a path through a mount and out), silently */
};

static int fd_names(long fd, char *where, size_t n)
{
    if (fd < 0 || fd > INT32_MAX)
        return NOT_OURS;
    struct vfile *v = fdtable_get((int)fd);
    if (v == NULL)
        return NOT_OURS;
    if (v->kind == VF_PASSTHROUGH)
        return QUIET;       /* a passthrough file: the kernel serves it, the wrapper keeps count */
    mount_fullpath(v->mnt, v->path, where, n);
    return OURS;
}

static int path_names(long dirfd, long path, char *where, size_t n)
{
    const char *p = (const char *)path;
    if (p == NULL)
        return fd_names(dirfd, where, n);
    if (vfs_lookup_refused(p) == EFAULT)
        return NOT_OURS;    /* the kernel answers EFAULT */
    if (*p == '\0')
        return fd_names(dirfd, where, n);
    struct vpath vp;
    const char *q = p;
    if (vfs_lookup((int)dirfd, &q, &vp)) {
        vfs_fullpath(&vp, where, n);
        return OURS;
    }
    return q != p ? QUIET : NOT_OURS;
}

static int worst(int a, int b)
{
    return a == OURS || b == OURS ? OURS : a > b ? a : b;
}

/* Which arguments name a file: one letter per argument, in order.
 * 'p' a path (AT_FDCWD), 'd' a dirfd and the path after it (one letter, two arguments:
 * renameat's "dd" is olddirfd, oldpath, newdirfd, newpath), 'f' an fd, '-' anything else. */
static int names_mount(const char *args, const long *a, char *where, size_t n)
{
    int r = NOT_OURS;
    for (int j = 0, i = 0; args[j] && i < 6; j++, i++) {
        char w[PATH_MAX];
        int k = NOT_OURS;
        if (args[j] == 'p')
            k = path_names(AT_FDCWD, a[i], w, sizeof w);
        else if (args[j] == 'd' && i + 1 < 6) {
            k = path_names(a[i], a[i + 1], w, sizeof w);
            i++;
        } else if (args[j] == 'f')
            k = fd_names(a[i], w, sizeof w);
        if (k == OURS && r != OURS)
            snprintf(where, n, "%s", w);
        r = worst(r, k);
    }
    return r;
}

/* ---- the calls served through this library's wrappers */

static long result(long r)
{
    return r == -1 ? -errno : r;
}

typedef long (*serve_fn)(const long *a);
#define SERVE(name, expr) \
    static long serve_##name(const long *a) { return result((long)(expr)); }
#define P(i) ((const char *)a[i])
#define I(i) ((int)a[i])
#define V(i) ((void *)a[i])

SERVE(read, read(I(0), V(1), (size_t)a[2]))
SERVE(write, write(I(0), V(1), (size_t)a[2]))
SERVE(open, open(P(0), I(1), (mode_t)a[2]))
SERVE(stat, stat(P(0), V(1)))
SERVE(fstat, fstat(I(0), V(1)))
SERVE(lstat, lstat(P(0), V(1)))
SERVE(lseek, lseek(I(0), (off_t)a[1], I(2)))
SERVE(mmap, mmap(V(0), (size_t)a[1], I(2), I(3), I(4), (off_t)a[5]))
SERVE(pread64, pread(I(0), V(1), (size_t)a[2], (off_t)a[3]))
SERVE(pwrite64, pwrite(I(0), V(1), (size_t)a[2], (off_t)a[3]))
SERVE(readv, readv(I(0), V(1), I(2)))
SERVE(writev, writev(I(0), V(1), I(2)))
SERVE(access, access(P(0), I(1)))
SERVE(dup, dup(I(0)))
SERVE(dup2, dup2(I(0), I(1)))
SERVE(sendfile, sendfile(I(0), I(1), V(2), (size_t)a[3]))
SERVE(fcntl, fcntl(I(0), I(1), a[2]))
SERVE(fsync, fsync(I(0)))
SERVE(fdatasync, fdatasync(I(0)))
SERVE(truncate, truncate(P(0), (off_t)a[1]))
SERVE(ftruncate, ftruncate(I(0), (off_t)a[1]))
SERVE(chdir, chdir(P(0)))
SERVE(fchdir, fchdir(I(0)))
SERVE(rename, rename(P(0), P(1)))
SERVE(mkdir, mkdir(P(0), (mode_t)a[1]))
SERVE(rmdir, rmdir(P(0)))
SERVE(creat, creat(P(0), (mode_t)a[1]))
SERVE(link, link(P(0), P(1)))
SERVE(unlink, unlink(P(0)))
SERVE(symlink, symlink(P(0), P(1)))
SERVE(readlink, readlink(P(0), V(1), (size_t)a[2]))
SERVE(chmod, chmod(P(0), (mode_t)a[1]))
SERVE(fchmod, fchmod(I(0), (mode_t)a[1]))
SERVE(chown, chown(P(0), (uid_t)a[1], (gid_t)a[2]))
SERVE(fchown, fchown(I(0), (uid_t)a[1], (gid_t)a[2]))
SERVE(lchown, lchown(P(0), (uid_t)a[1], (gid_t)a[2]))
SERVE(umask, umask((mode_t)a[0]))
SERVE(statfs, statfs(P(0), V(1)))
SERVE(fstatfs, fstatfs(I(0), V(1)))
SERVE(mknod, mknod(P(0), (mode_t)a[1], (dev_t)a[2]))
SERVE(utime, utime(P(0), V(1)))
SERVE(utimes, utimes(P(0), V(1)))
SERVE(setxattr, setxattr(P(0), P(1), V(2), (size_t)a[3], I(4)))
SERVE(lsetxattr, lsetxattr(P(0), P(1), V(2), (size_t)a[3], I(4)))
SERVE(fsetxattr, fsetxattr(I(0), P(1), V(2), (size_t)a[3], I(4)))
SERVE(getxattr, getxattr(P(0), P(1), V(2), (size_t)a[3]))
SERVE(lgetxattr, lgetxattr(P(0), P(1), V(2), (size_t)a[3]))
SERVE(fgetxattr, fgetxattr(I(0), P(1), V(2), (size_t)a[3]))
SERVE(listxattr, listxattr(P(0), V(1), (size_t)a[2]))
SERVE(llistxattr, llistxattr(P(0), V(1), (size_t)a[2]))
SERVE(flistxattr, flistxattr(I(0), V(1), (size_t)a[2]))
SERVE(removexattr, removexattr(P(0), P(1)))
SERVE(lremovexattr, lremovexattr(P(0), P(1)))
SERVE(fremovexattr, fremovexattr(I(0), P(1)))
SERVE(inotify_add_watch, inotify_add_watch(I(0), P(1), (uint32_t)a[2]))
SERVE(openat, openat(I(0), P(1), I(2), (mode_t)a[3]))
SERVE(mkdirat, mkdirat(I(0), P(1), (mode_t)a[2]))
SERVE(mknodat, mknodat(I(0), P(1), (mode_t)a[2], (dev_t)a[3]))
SERVE(fchownat, fchownat(I(0), P(1), (uid_t)a[2], (gid_t)a[3], I(4)))
SERVE(newfstatat, fstatat(I(0), P(1), V(2), I(3)))
SERVE(unlinkat, unlinkat(I(0), P(1), I(2)))
SERVE(renameat, renameat(I(0), P(1), I(2), P(3)))
SERVE(linkat, linkat(I(0), P(1), I(2), P(3), I(4)))
SERVE(symlinkat, symlinkat(P(0), I(1), P(2)))
SERVE(readlinkat, readlinkat(I(0), P(1), V(2), (size_t)a[3]))
SERVE(fchmodat, fchmodat(I(0), P(1), (mode_t)a[2], 0))
SERVE(faccessat, faccessat(I(0), P(1), I(2), 0))
SERVE(faccessat2, faccessat(I(0), P(1), I(2), I(3)))
SERVE(utimensat, utimensat(I(0), P(1), V(2), I(3)))
SERVE(fallocate, fallocate(I(0), I(1), (off_t)a[2], (off_t)a[3]))
SERVE(dup3, dup3(I(0), I(1), I(2)))
SERVE(preadv, preadv(I(0), V(1), I(2), (off_t)a[3]))
SERVE(pwritev, pwritev(I(0), V(1), I(2), (off_t)a[3]))
SERVE(preadv2, preadv2(I(0), V(1), I(2), (off_t)a[3], I(5)))
SERVE(pwritev2, pwritev2(I(0), V(1), I(2), (off_t)a[3], I(5)))
SERVE(renameat2, renameat2(I(0), P(1), I(2), P(3), (unsigned)a[4]))
SERVE(copy_file_range, copy_file_range(I(0), V(1), I(2), V(3), (size_t)a[4], (unsigned)a[5]))
SERVE(splice, splice(I(0), V(1), I(2), V(3), (size_t)a[4], (unsigned)a[5]))
SERVE(statx, statx(I(0), P(1), I(2), (unsigned)a[3], V(4)))
SERVE(close_range, close_range((unsigned)a[0], (unsigned)a[1], I(2)))
SERVE(bind, bind(I(0), V(1), (socklen_t)a[2]))
SERVE(connect, connect(I(0), V(1), (socklen_t)a[2]))

/* a virtual directory whose entries getdents64 served holds a listing: closedir frees it */
static long serve_close(const long *a)
{
    struct vfile *v = fdtable_get(I(0));
    if (v && v->kind == VF_DIR && v->dir)
        return result(closedir((DIR *)v->dir));
    return result(close(I(0)));
}

/* getcwd(2) answers the length, libc's getcwd the buffer */
static long serve_getcwd(const long *a)
{
    char *r = getcwd(V(0), (size_t)a[1]);
    return r ? (long)strlen(r) + 1 : -errno;
}

/* getdents64 on a virtual directory: its entries, as readdir64 gives them, packed as
 * the kernel packs them (glibc's struct dirent64 is the kernel's linux_dirent64). */
static long serve_getdents64(const long *a)
{
    struct vfile *v = fdtable_get(I(0));
    if (v == NULL || v->kind != VF_DIR)
        return result(libc_syscall(SYS_getdents64, a[0], a[1], a[2]));
    DIR *d = v->dir ? (DIR *)v->dir : fdopendir(I(0));
    if (d == NULL)
        return -errno;
    char *buf = V(1);
    size_t len = (size_t)a[2], used = 0;
    for (;;) {
        long pos = telldir(d);
        errno = 0;
        struct dirent64 *e = readdir64(d);
        if (e == NULL) {
            if (errno != 0 && used == 0)
                return -errno;
            break;
        }
        if (used + e->d_reclen > len) {
            seekdir(d, pos);
            if (used == 0)
                return -EINVAL;
            break;
        }
        memcpy(buf + used, e, e->d_reclen);
        used += e->d_reclen;
    }
    return (long)used;
}

/* openat2 with no RESOLVE_* restriction is openat; with one, it is not served */
struct how { unsigned long long flags, mode, resolve; };
static long serve_openat2(const long *a)
{
    const struct how *h = V(2);
    if (h == NULL || (size_t)a[3] < sizeof *h || h->resolve != 0)
        return -EOPNOTSUPP;
    return result(openat(I(0), P(1), (int)h->flags, (mode_t)h->mode));
}

struct row {
    const char *name;
    const char *args;       /* which arguments name a file (see names_mount) */
    serve_fn serve;         /* NULL: not served, the kernel answers */
    int always;             /* through the wrapper even when nothing is ours: it keeps state */
};

/* A switch, not a table indexed by call number: such a table of pointers would be
 * relocated, page by page, at every start of every process (four pages copied on write),
 * for a net that is seldom on. */
#define ROW(name, args) case SYS_##name: return (struct row){ #name, args, serve_##name, 0 };
#define KEEP(name, args) case SYS_##name: return (struct row){ #name, args, serve_##name, 1 };
#define SEEN(name, args) case SYS_##name: return (struct row){ #name, args, NULL, 0 };

static struct row row_of(long nr)
{
    switch (nr) {
    ROW(read, "f") ROW(write, "f") ROW(open, "p") KEEP(close, "f") ROW(stat, "p")
    ROW(fstat, "f") ROW(lstat, "p") ROW(lseek, "f") ROW(mmap, "----f")
    ROW(pread64, "f") ROW(pwrite64, "f") ROW(readv, "f") ROW(writev, "f")
    ROW(access, "p") KEEP(dup, "f") KEEP(dup2, "ff") KEEP(sendfile, "ff")
    KEEP(fcntl, "f") ROW(fsync, "f") ROW(fdatasync, "f") ROW(truncate, "p")
    ROW(ftruncate, "f") SEEN(getdents, "f") KEEP(getcwd, "") KEEP(chdir, "p")
    KEEP(fchdir, "f") ROW(rename, "pp") ROW(mkdir, "p") ROW(rmdir, "p")
    ROW(creat, "p") ROW(link, "pp") ROW(unlink, "p") ROW(symlink, "-p")
    ROW(readlink, "p") ROW(chmod, "p") ROW(fchmod, "f") ROW(chown, "p")
    ROW(fchown, "f") ROW(lchown, "p") KEEP(umask, "") ROW(statfs, "p")
    ROW(fstatfs, "f") ROW(mknod, "p") ROW(utime, "p") ROW(utimes, "p")
    SEEN(chroot, "p") SEEN(mount, "-p") SEEN(umount2, "p")
    ROW(setxattr, "p") ROW(lsetxattr, "p") ROW(fsetxattr, "f") ROW(getxattr, "p")
    ROW(lgetxattr, "p") ROW(fgetxattr, "f") ROW(listxattr, "p") ROW(llistxattr, "p")
    ROW(flistxattr, "f") ROW(removexattr, "p") ROW(lremovexattr, "p")
    ROW(fremovexattr, "f") ROW(getdents64, "f") ROW(inotify_add_watch, "-p")
    ROW(openat, "d") ROW(mkdirat, "d") ROW(mknodat, "d") ROW(fchownat, "d")
    SEEN(futimesat, "d") ROW(newfstatat, "d") ROW(unlinkat, "d") ROW(renameat, "dd")
    ROW(linkat, "dd") ROW(symlinkat, "-d") ROW(readlinkat, "d") ROW(fchmodat, "d")
    ROW(faccessat, "d") ROW(utimensat, "d") ROW(fallocate, "f") KEEP(dup3, "ff")
    ROW(preadv, "f") ROW(pwritev, "f") SEEN(fanotify_mark, "---d")
    SEEN(name_to_handle_at, "d") ROW(renameat2, "dd") ROW(preadv2, "f")
    ROW(pwritev2, "f") KEEP(copy_file_range, "f-f") KEEP(splice, "f-f")
    ROW(statx, "d") KEEP(close_range, "") ROW(openat2, "d") ROW(faccessat2, "d")
    SEEN(execveat, "d") KEEP(bind, "") KEEP(connect, "")
    }
    return (struct row){ NULL, NULL, NULL, 0 };
}

/* ---- calls that the signal handler must make differently */

#define BIT(sig) (1UL << ((sig) - 1))

/* The mask the program sets is the one sigreturn restores: change it in the frame. */
static long sigprocmask_in_frame(const long *a, ucontext_t *uc)
{
    if (a[3] != 8)
        return -EINVAL;
    unsigned long *cur = (unsigned long *)&uc->uc_sigmask;
    unsigned long old = *cur, set;
    if (a[1]) {
        memcpy(&set, V(1), sizeof set);
        if (a[0] == SIG_BLOCK)
            *cur |= set;
        else if (a[0] == SIG_UNBLOCK)
            *cur &= ~set;
        else if (a[0] == SIG_SETMASK)
            *cur = set;
        else
            return -EINVAL;
        *cur &= ~(BIT(SIGSYS) | BIT(SIGKILL) | BIT(SIGSTOP));
    }
    if (a[2])
        memcpy(V(2), &old, sizeof old);
    return 0;
}

/* rt_sigaction through libc's sigaction: the handler then returns through libc's
 * trampoline (inside the allowed range), and SIGSYS stays ours. */
struct ksigaction { void *handler; unsigned long flags; void *restorer; unsigned long mask; };
static long sigaction_through_libc(const long *a)
{
    if (a[3] != 8)
        return -EINVAL;
    const struct ksigaction *k = V(1);
    struct ksigaction *ko = V(2);
    struct sigaction sa, old;
    memset(&sa, 0, sizeof sa);
    if (k) {
        sa.sa_handler = (__sighandler_t)k->handler;
        sa.sa_flags = (int)(k->flags & ~0x04000000UL);     /* SA_RESTORER: libc's own */
        memcpy(&sa.sa_mask, &k->mask, sizeof k->mask);
    }
    if (sigaction(I(0), k ? &sa : NULL, &old) < 0)
        return -errno;
    if (ko) {
        ko->handler = (void *)old.sa_handler;
        ko->flags = (unsigned long)old.sa_flags | 0x04000000UL;
        ko->restorer = (void *)old.sa_restorer;
        memcpy(&ko->mask, &old.sa_mask, sizeof ko->mask);
    }
    return 0;
}

static const char *call_name(long nr)
{
    switch (nr) {
    case SYS_rt_sigreturn: return "rt_sigreturn";
    case SYS_clone: return "clone";
    case SYS_execve: return "execve";
    case SYS_io_uring_setup: return "io_uring_setup";
    case SYS_prctl: return "prctl";
    }
    const char *name = row_of(nr).name;
    return name ? name : "a system call";
}

/* Run the call where it was made, this thread unwatched from now on. */
static long step_aside(long nr, ucontext_t *uc, const char *why)
{
    char what[128];
    snprintf(what, sizeof what, "this thread (%s)", why);
    report_once(nr, call_name(nr), what, "not served: the net steps aside in this thread");
    disarm_thread();
    uc->uc_mcontext.gregs[REG_RIP] -= 2;    /* `syscall` is two bytes: run it again */
    return nr;
}

static long fork_like(long nr, const long *a)
{
    long r = libc_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
    if (r == 0 && !(nr == SYS_clone && (a[0] & CLONE_THREAD)))
        arm_thread();   /* the child: SUD is not inherited */
    return result(r);
}

/* sigaltstack made outside libc (Go's threads set their signal stack so): the kernel puts
 * back, at this handler's sigreturn, the signal stack the thread had when the call trapped
 * (uc_stack), so a real call here would be undone. The call reads and writes uc_stack
 * instead, with the kernel's rules. */
#ifndef SS_AUTODISARM
#define SS_AUTODISARM (1U << 31)     /* linux/signal.h */
#endif
static long sigaltstack_in_frame(const long *a, ucontext_t *uc)
{
    const stack_t *ss = (const stack_t *)a[0];
    stack_t *old = (stack_t *)a[1];
    stack_t cur = uc->uc_stack;
    uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
    int disabled = (cur.ss_flags & SS_DISABLE) || cur.ss_size == 0;
    int on = !disabled && sp > (uintptr_t)cur.ss_sp && sp - (uintptr_t)cur.ss_sp <= cur.ss_size;
    stack_t now = cur;
    if (ss) {
        int mode = ss->ss_flags & ~SS_AUTODISARM;
        if (on)
            return -EPERM;
        if (mode != 0 && mode != SS_ONSTACK && mode != SS_DISABLE)
            return -EINVAL;
        if (mode == SS_DISABLE) {
            now.ss_sp = NULL;
            now.ss_size = 0;
            now.ss_flags = SS_DISABLE;
        } else {
            if (ss->ss_size < 2048)     /* the kernel's MINSIGSTKSZ (glibc's may be the CPU's, larger) */
                return -ENOMEM;
            now.ss_sp = ss->ss_sp;
            now.ss_size = ss->ss_size;
            now.ss_flags = ss->ss_flags & SS_AUTODISARM;
        }
    }
    if (old) {
        *old = cur;
        old->ss_flags = disabled ? SS_DISABLE : (on ? SS_ONSTACK : 0) | (cur.ss_flags & SS_AUTODISARM);
        if (disabled) {
            old->ss_sp = NULL;
            old->ss_size = 0;
        }
    }
    uc->uc_stack = now;
    return 0;
}

static long dispatch(long nr, const long *a, ucontext_t *uc)
{
    switch (nr) {
    case SYS_rt_sigprocmask:
        return sigprocmask_in_frame(a, uc);
    case SYS_rt_sigaction:
        return sigaction_through_libc(a);
    case SYS_sigaltstack:
        return sigaltstack_in_frame(a, uc);
    case SYS_rt_sigreturn:
        return step_aside(nr, uc, "a signal handler that returns through a trampoline outside libc");
    case SYS_vfork:
        return fork_like(SYS_fork, a);   /* a vfork child would run on our frame: fork */
    case SYS_fork:
        return fork_like(nr, a);
    case SYS_clone:
        if ((a[0] & CLONE_VM) && a[1] != 0)
            return step_aside(nr, uc, "a thread started with a raw clone");
        if ((a[0] & CLONE_VM) && (a[0] & CLONE_VFORK)) {
            long b[6] = { a[0] & ~(long)(CLONE_VM | CLONE_VFORK), a[1], a[2], a[3], a[4], a[5] };
            return fork_like(nr, b);
        }
        return fork_like(nr, a);
    case SYS_clone3:
        return -ENOSYS;     /* callers fall back to clone, which is handled above */
    case SYS_execve: {
        /* the new image keeps the mask: the program's, not this handler's */
        sigset_t m = uc->uc_sigmask;
        sigdelset(&m, SIGSYS);
        real_pthread_sigmask(SIG_SETMASK, &m, NULL);
        return result(execve(P(0), V(1), V(2)));
    }
    case SYS_execveat: {
        sigset_t m = uc->uc_sigmask;
        sigdelset(&m, SIGSYS);
        real_pthread_sigmask(SIG_SETMASK, &m, NULL);
        break;
    }
    case SYS_io_uring_setup:
        if (ldp_escapes == ESCAPES_STRICT) {
            report_once(nr, "io_uring_setup", "a ring", "answered ENOSYS (--strict): what a "
                        "ring submits is not seen, so the program must fall back to calls");
            return -ENOSYS;
        }
        if (ldp_escapes != ESCAPES_RING)
            report_once(nr, "io_uring_setup", "a ring", "served: but what it submits is not seen "
                    "(opens of mount paths through it fail; cached files are filled whole "
                    "before each submission)");
        return result(uring_setup((unsigned)a[0], (void *)a[1]));
    case SYS_io_uring_enter:    /* a cached fd the ring reads is filled whole first */
        return result(uring_enter((int)a[0], (unsigned)a[1], (unsigned)a[2], (unsigned)a[3], (const void *)a[4],
                                  (size_t)a[5]));
    case SYS_io_uring_register:
        return result(uring_register((int)a[0], (unsigned)a[1], (void *)a[2], (unsigned)a[3]));
    case SYS_prctl:
        if (a[0] == PR_SET_SYSCALL_USER_DISPATCH) {
            report_once(nr, "prctl", "PR_SET_SYSCALL_USER_DISPATCH",
                        "not served: the program's own dispatch replaces the net in this thread");
            armed = 0;
        }
        break;
    }
    const struct row r = ldp_escapes == ESCAPES_RING ? (struct row){ NULL, NULL, NULL, 0 } : row_of(nr);
    if (r.name == NULL || ldp_guard)
        return result(libc_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]));
    char where[PATH_MAX] = "";
    int k = names_mount(r.args, a, where, sizeof where);
    if (k == OURS) {
        if (ldp_escapes == ESCAPES_STRICT) {
            report_once(nr, r.name, where, "refused with EIO (--strict)");
            return -EIO;
        }
        report_once(nr, r.name, where, r.serve ? "served" : "not served (the kernel answers for it)");
    }
    if (r.serve && (k != NOT_OURS || r.always))
        return r.serve(a);
    return result(libc_syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]));
}

/* The handler serves on a stack of its own: the interrupted one may be a goroutine's few
 * kilobytes (Go makes its system calls there, and its stacks have no guard page), and
 * serving may start an interpreter. The handler itself starts on the thread's signal stack
 * if it has one (SA_ONSTACK: Go gives every thread one), which a nested signal (Go's
 * SIGURG preemption, arriving while we serve) would start again from its top, over our
 * frame: so while serving, the serve stack is the thread's signal stack (a nested signal
 * then stays below us), and the program's comes back after. Signals are blocked for the
 * few instructions of each switch. */
#define SERVE_STACK (1 << 20)
static TLS char *serve_stack;
long escape_on_stack(long (*fn)(void *), void *arg, void *top) ESCAPE_HIDDEN;
__asm__(".text\n"
        ".p2align 4\n"
        ".type escape_on_stack, @function\n"
        "escape_on_stack:\n"
        "\tpush %rbp\n"
        "\tmov %rsp, %rbp\n"
        "\tmov %rdi, %rax\n"
        "\tmov %rsi, %rdi\n"
        "\tmov %rdx, %rsp\n"
        "\tcall *%rax\n"
        "\tmov %rbp, %rsp\n"
        "\tpop %rbp\n"
        "\tret\n"
        ".size escape_on_stack, .-escape_on_stack\n");

struct job {
    long nr;
    const long *a;
    ucontext_t *uc;
    sigset_t mask;          /* the handler's mask, put back while serving */
    stack_t program;        /* the thread's signal stack before */
    int swapped;
};

static long run_job(void *p)
{
    struct job *j = p;
    stack_t ours = { .ss_sp = serve_stack, .ss_size = SERVE_STACK, .ss_flags = 0 };
    j->swapped = sigaltstack(&ours, &j->program) == 0;
    real_pthread_sigmask(SIG_SETMASK, &j->mask, NULL);
    long r = dispatch(j->nr, j->a, j->uc);
    sigset_t all;
    sigfillset(&all);
    real_pthread_sigmask(SIG_SETMASK, &all, NULL);
    return r;
}

static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
    if (arm_request(si)) {
        if (!armed) {
            arm_thread();
            sigdelset(&((ucontext_t *)ctx)->uc_sigmask, SIGSYS);  /* what sigreturn puts back */
        }
        __atomic_sub_fetch(&arms_pending, 1, __ATOMIC_RELEASE);
        return;
    }
    if (si->si_code != SYS_USER_DISPATCH) {
        chain(sig, si, ctx);
        return;
    }
    ucontext_t *uc = ctx;
    greg_t *g = uc->uc_mcontext.gregs;
    char was = selector;
    selector = SUD_ALLOW;   /* what we do here (ld.so included) runs unwatched */
    int saved = errno;
    long a[6] = { g[REG_RDI], g[REG_RSI], g[REG_RDX], g[REG_R10], g[REG_R8], g[REG_R9] };
    if (serve_stack == NULL) {
        void *m = REAL(mmap)(NULL, SERVE_STACK, PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK, -1, 0);
        serve_stack = m == MAP_FAILED ? (char *)-1 : m;
    }
    char *sp = (char *)&a;
    int on_ours = serve_stack != (char *)-1 && sp > serve_stack && sp <= serve_stack + SERVE_STACK;
    /* the program's own sigaltstack (Go's threads set theirs with a raw call) is made where
     * it was asked: swapping ours in and back around it would undo it */
    if (serve_stack != (char *)-1 && !on_ours && si->si_syscall != SYS_sigaltstack) {
        struct job job = { si->si_syscall, a, uc, .swapped = 0 };
        sigset_t all;
        sigfillset(&all);
        real_pthread_sigmask(SIG_SETMASK, &all, &job.mask);
        g[REG_RAX] = escape_on_stack(run_job, &job, serve_stack + SERVE_STACK);
        if (job.swapped) {
            job.program.ss_flags &= SS_DISABLE;
            sigaltstack(&job.program, NULL);
        }
        real_pthread_sigmask(SIG_SETMASK, &job.mask, NULL);
    } else {
        g[REG_RAX] = dispatch(si->si_syscall, a, uc);   /* nested, sigaltstack, or no stack */
    }
    errno = saved;
    if (armed)
        selector = was;
}

/* ---- programs the loader will not preload us into */

/* statically linked, set-user-ID or set-group-ID for someone else, or NULL */
static const char *unservable(const char *path)
{
    int fd = REAL(open)(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    const char *why = NULL;
    Elf64_Ehdr eh;
    struct stat st;
    if (REAL(pread)(fd, &eh, sizeof eh, 0) != (ssize_t)sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || REAL(fstat)(fd, &st) != 0)
        goto out;
    if ((st.st_mode & S_ISUID) && st.st_uid != geteuid()) {
        why = "set-user-ID";
        goto out;
    }
    if ((st.st_mode & S_ISGID) && st.st_gid != getegid()) {
        gid_t groups[256];
        int n = getgroups(256, groups), member = 0;
        for (int i = 0; i < n; i++)
            member |= groups[i] == st.st_gid;
        if (!member) {
            why = "set-group-ID";
            goto out;
        }
    }
    if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum > 64)
        goto out;
    Elf64_Phdr ph[64];
    size_t len = sizeof(Elf64_Phdr) * eh.e_phnum;
    if (REAL(pread)(fd, ph, len, (off_t)eh.e_phoff) != (ssize_t)len)
        goto out;
    int interp = 0;
    for (int i = 0; i < eh.e_phnum; i++)
        interp |= ph[i].p_type == PT_INTERP;
    if (!interp)
        why = "statically linked";
out:
    REAL(close)(fd);
    return why;
}

/* Does the program about to run seem to need a mount: a mount path among its arguments,
 * a working directory in a mount, virtual fds it would inherit? */
static int seems_to_need_a_mount(char *const argv[])
{
    if (ldp_cwd_virtual || __atomic_load_n(&ldp_nvfds, __ATOMIC_ACQUIRE) > 0)
        return 1;
    for (int i = 1; argv && argv[i] && i < 256; i++) {
        struct vpath vp;
        const char *p = argv[i];
        if ((p[0] == '/' || p[0] == '.') && vfs_lookup(AT_FDCWD, &p, &vp))
            return 1;
    }
    return 0;
}

int escape_check_exec(const char *path, char *const argv[])
{
    if (path == NULL || vfs_lookup_refused(path) == EFAULT)
        return 0;
    const char *why = unservable(path);
    if (why == NULL)
        return 0;
    const char *name = program_invocation_name ? program_invocation_name : "?";
    if (ldp_escapes == ESCAPES_STRICT) {
        ldp_log(LOG_ERROR, "%s is %s: ldpfuse cannot be loaded into it, so it would not see the "
                "mounts; --strict refuses to run it (EPERM)", path, why);
        char where[PATH_MAX + 32];
        snprintf(where, sizeof where, "%s (%s)", path, why);
        record("execve", where, "refused with EPERM (--strict)", 0);
        errno = EPERM;
        return -1;
    }
    /* a warning when it seems to need a mount; otherwise (ldconfig run by Python's
     * ctypes.util) a line for --log-level info */
    ldp_log(seems_to_need_a_mount(argv) ? LOG_WARNING : LOG_INFO, "%s is %s: ldpfuse cannot be "
            "loaded into it, so it does not see the mounts (%s started it)", path, why, name);
    return 0;
}
