/*
 * vfork. A shell runs each command as vfork + exec (dash does); under the preload a fork
 * instead costs every command ~0.15 ms of page-table copies and copy-on-write faults, a
 * third of what a short process costs natively. So the real vfork is used whenever the
 * child cannot disturb what this process knows, and fork otherwise.
 *
 * A vfork child runs on its parent's memory (and on the calling thread's TLS) until it
 * execs or exits, while the parent thread waits. Whatever the child records in our state
 * (the fd table, the cwd, the backend's connection) would be wrong for the parent
 * afterwards. Hence:
 * - the real vfork only when this process has no virtual fds but read-only passthrough
 *   ones (the kernel's files: the child's close, dup2 or close_range of one leaves the
 *   fd table, which is its parent's, alone, interpose/fd.c), its cwd is not in a mount,
 *   and its PATH leads into no mount; fork otherwise;
 * - in the child (ldp_vfork_child, set in the caller's TLS, which the child shares), the
 *   FS is not started (backend_get fails with EIO and says why). A chdir or an exec that
 *   may lead into a mount asks a forked copy of the child (memory of its own) to do the
 *   lookup, so errors come back as natively (a PATH search goes on past a missing
 *   name); the chdir then only records the directory, and a program stored in a mount
 *   is exec'ed through `/bin/sh -c 'p=$1; shift; exec "$p" "$@"' sh PATH ARGS`, a
 *   fresh image that opens it in full (the program's argv[0] is then its path). That is
 *   all POSIX lets a vfork child do (exec or _exit), and what shells, gcc and Python's
 *   subprocess do;
 * - the child's chdir and umask leave our record of them alone (a chdir keeps the
 *   parent's string), and the parent, when its thread runs again, puts its cwd back.
 * Under the safety net (--watch-escapes, --strict, and in a process that maps liburing)
 * vfork is fork: the net would trap the syscall instruction below, which is not libc's.
 * Other architectures fork.
 */
#include "../ldpfuse.h"
#include "escape.h"
#include "supervise.h"
#include "exec_libs.h"
#include <paths.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>

TLS int ldp_vfork_child;
TLS char *ldp_vfork_cwd;
static TLS struct {
    char *cwd;
    int cwd_virtual, cwd_above_mount;
} saved;

pid_t ldp_vfork_as_fork(void)
{
    return REAL(fork)();
}

#if defined(__x86_64__)
/* No "//", "." or ".." component: mount_match can judge it as it is. */
static int clean(const char *p)
{
    for (; *p; p++)
        if (p[0] == '/' && (p[1] == '/' || (p[1] == '.' && (p[2] == '/' || p[2] == '\0' ||
                                                           (p[2] == '.' && (p[3] == '/' || p[3] == '\0'))))))
            return 0;
    return 1;
}

/* Could a PATH search (which a shell does in its vfork child) reach a program in a mount?
 * Only through an entry in a mount; entries that name no mount are quickly out, and
 * relative or unclean ones that do are taken as yes. */
static int path_leads_into_a_mount(const char *path)
{
    if (!mount_named_in(path))
        return 0;
    for (const char *p = path;; ) {
        const char *e = strchr(p, ':');
        size_t len = e ? (size_t)(e - p) : strlen(p);
        char entry[PATH_MAX];
        if (len >= sizeof entry)
            return 1;
        memcpy(entry, p, len);
        entry[len] = '\0';
        if (mount_named_in(entry) && (entry[0] != '/' || !clean(entry) || mount_match(entry, NULL)))
            return 1;
        if (!e)
            return 0;
        p = e + 1;
    }
}

__attribute__((used)) static int vfork_prepare(void)
{
    if (ldp_nmounts == 0)
        return 1;
    if (ldp_escapes != ESCAPES_OFF)
        return 0;   /* the net would trap our own syscall instruction, on the parent's memory */
    if (__atomic_load_n(&ldp_nvfds, __ATOMIC_ACQUIRE) > __atomic_load_n(&ldp_nvfds_passive, __ATOMIC_ACQUIRE) ||
        ldp_cwd_virtual)
        return 0;
    const char *path = getenv("PATH");
    if (path && path_leads_into_a_mount(path))
        return 0;
    saved.cwd = ldp_cwd;
    saved.cwd_virtual = ldp_cwd_virtual;
    saved.cwd_above_mount = ldp_cwd_above_mount;
    ldp_vfork_cwd = NULL;
    ldp_vfork_child = 1;
    return 1;
}

/* The parent's side, once the child has exec'ed or exited: r is the syscall's result. */
__attribute__((used)) static pid_t vfork_parent(long r)
{
    if (ldp_vfork_child) {
        ldp_vfork_child = 0;
        /* unless another thread has chdir'ed since (its cwd is then the right one) */
        if (ldp_vfork_cwd != NULL && ldp_cwd == ldp_vfork_cwd) {
            free(ldp_cwd);
            ldp_cwd = saved.cwd;
            ldp_cwd_virtual = saved.cwd_virtual;
            ldp_cwd_above_mount = saved.cwd_above_mount;
        }
        ldp_vfork_cwd = NULL;
    }
    if (r < 0) {
        errno = (int)-r;
        return -1;
    }
    return (pid_t)r;
}

/* The return address cannot stay on the stack the child will write over: as glibc's own
 * vfork, keep it in %rdi (the kernel preserves it) across the syscall. */
__asm__(
    ".text\n"
    ".globl vfork\n"
    ".type vfork, @function\n"
    "vfork:\n"
    "    .cfi_startproc\n"
    "    subq $8, %rsp\n"
    "    .cfi_adjust_cfa_offset 8\n"
    "    call vfork_prepare\n"
    "    addq $8, %rsp\n"
    "    .cfi_adjust_cfa_offset -8\n"
    "    testl %eax, %eax\n"
    "    jz ldp_vfork_as_fork\n"
    "    popq %rdi\n"
    "    .cfi_adjust_cfa_offset -8\n"
    "    .cfi_register %rip, %rdi\n"
    "    movl $" "58" ", %eax\n"     /* SYS_vfork */
    "    syscall\n"
    "    pushq %rdi\n"
    "    .cfi_adjust_cfa_offset 8\n"
    "    .cfi_rel_offset %rip, 0\n"
    "    testq %rax, %rax\n"
    "    jz 1f\n"
    "    movq %rax, %rdi\n"
    "    jmp vfork_parent\n"
    "1:  ret\n"
    "    .cfi_endproc\n"
    ".size vfork, .-vfork\n");
_Static_assert(SYS_vfork == 58, "x86_64 vfork number");
#else
pid_t vfork(void)
{
    return REAL(fork)();
}
#endif

/* What a vfork child cannot ask the FS itself, a forked copy of it can: the copy has
 * memory of its own (the FS may start there, connect, fill caches), runs fn and sends
 * back fn's errno and a string. It costs what the fork that vfork saved costs, and is
 * made only for a chdir or an exec that may lead into a mount. */
static int in_a_copy(int (*fn)(const char *arg, char *out, size_t size), const char *arg,
                     char *out, size_t size)
{
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return errno;
    pid_t pid = REAL(fork)();
    if (pid < 0) {
        int e = errno;
        REAL(close)(p[0]);
        REAL(close)(p[1]);
        return e;
    }
    if (pid == 0) {
        ldp_vfork_child = 0;    /* this copy's memory is its own: an ordinary process */
        REAL(close)(p[0]);
        struct { int err; char s[PATH_MAX]; } msg = { 0, "" };
        msg.err = fn(arg, msg.s, sizeof msg.s);
        size_t len = sizeof msg.err + strlen(msg.s) + 1;
        (void)!REAL(write)(p[1], &msg, len);
        REAL(_exit)(0);
    }
    REAL(close)(p[1]);
    struct { int err; char s[PATH_MAX]; } msg;
    size_t got = 0;
    for (;;) {
        ssize_t n = REAL(read)(p[0], (char *)&msg + got, sizeof msg - got);
        if (n > 0 && (got += (size_t)n) < sizeof msg)
            continue;
        if (n < 0 && errno == EINTR)
            continue;
        break;
    }
    REAL(close)(p[0]);
    while (REAL(waitpid)(pid, NULL, 0) < 0 && errno == EINTR)
        ;
    if (got <= sizeof msg.err)
        return EIO;     /* the copy died before it answered */
    msg.s[sizeof msg.s - 1] = '\0';
    snprintf(out, size, "%s", msg.s);
    return msg.err;
}

/* Could path, resolved from our cwd, lead into a mount? (No FS call: a lexical guess that
 * is never wrong when it says no.) */
static int may_lead_into_a_mount(const char *path)
{
    if (path[0] != '/' && (ldp_cwd_virtual || ldp_cwd_above_mount))
        return 1;
    return mount_named_in(path);
}

/* In the copy: chdir as the program would, and say where it went. */
static int chdir_in_copy(const char *path, char *out, size_t size)
{
    if (chdir(path) < 0)
        return errno;
    snprintf(out, size, "%s", ldp_cwd ? ldp_cwd : "");
    return 0;
}

int ldp_vfork_child_chdir(const char *path)
{
    char where[PATH_MAX];
    if (!may_lead_into_a_mount(path)) {
        int r = REAL(chdir)(path);
        if (r == 0 && REAL(getcwd)(where, sizeof where))
            cwd_set(where);
        return r;
    }
    int e = in_a_copy(chdir_in_copy, path, where, sizeof where);
    if (e == 0 && where[0] != '/')
        e = EIO;
    if (e == 0 && !mount_match(where, NULL) && REAL(chdir)(where) < 0)
        e = errno;      /* the copy went to a real directory: so do we */
    if (e != 0) {
        errno = e;
        return -1;
    }
    cwd_set(where);
    return 0;
}

/* In the copy: would execve(path) find an executable file? "M" when it is in a mount,
 * else "R" and the path for the kernel (one that passed through a mount, normalised). */
static int exec_check_in_copy(const char *path, char *out, size_t size)
{
    struct stat st;
    if (stat(path, &st) < 0)
        return errno;
    if (!S_ISREG(st.st_mode))
        return EACCES;
    if (access(path, X_OK) < 0)
        return errno;
    struct vpath vp;
    const char *p = path;
    if (vfs_lookup(AT_FDCWD, &p, &vp))
        snprintf(out, size, "M");
    else
        snprintf(out, size, "R%s", p);
    return 0;
}

/* execve in a vfork child: no allocation (it would stay in the parent's heap). A path
 * that may lead into a mount is checked in a copy (so that a PATH search goes on past
 * a missing name as natively), and a program stored in a mount, or one whose libraries
 * may be in one, is exec'ed by /bin/sh, a fresh image that opens it in full. */
int ldp_vfork_child_execve(const char *path, char *const argv[], char *const envp[])
{
    char cwdbuf[VPATH_MAX + 16], realbuf[PATH_MAX + 24];
    char **env = alloca(sizeof *env * exec_env_room(envp));
    exec_env_into(envp, env, cwdbuf, realbuf);
    /* LD_LIBRARY_PATH into a mount: the program's libraries may be there, which only an
     * execve outside a vfork child can hand over (exec_libs.c): through the shell too */
    int libraries = exec_libs_path_in_mount(env);
    if (path == NULL || path[0] == '\0' || (!libraries && !may_lead_into_a_mount(path))) {
        if (path && strchr(path, '/') && !supervise_exec(path) && escape_check_exec(path, argv) < 0)
            return -1;  /* a static or set-ID program: named (stack only), refused under --strict */
        return REAL(execve)(path, argv, env);
    }
    char found[PATH_MAX];
    int e = in_a_copy(exec_check_in_copy, path, found, sizeof found);
    if (e != 0) {
        errno = e;
        return -1;
    }
    if (found[0] == 'R' && !libraries) {
        if (!supervise_exec(found + 1) && escape_check_exec(found + 1, argv) < 0)
            return -1;
        return REAL(execve)(found + 1, argv, env);
    }
    /* "$p" without a slash would be looked up in PATH */
    char *self = (char *)path;
    if (strchr(path, '/') == NULL) {
        self = alloca(strlen(path) + 3);
        memcpy(self, "./", 2);
        memcpy(self + 2, path, strlen(path) + 1);
    }
    int argc = 0;
    while (argv && argv[argc])
        argc++;
    char **sargv = alloca(sizeof *sargv * (size_t)(argc + 5));
    int k = 0;
    sargv[k++] = (char *)"sh";
    sargv[k++] = (char *)"-c";
    sargv[k++] = (char *)"p=$1; shift; exec \"$p\" \"$@\"";
    sargv[k++] = (char *)"sh";
    sargv[k++] = self;
    for (int i = 1; i < argc; i++)
        sargv[k++] = argv[i];
    sargv[k] = NULL;
    if (libraries) {
        /* the shell's own ld.so is not to search LD_LIBRARY_PATH's directories in a mount */
        char **stripped = alloca(sizeof *stripped * (exec_env_room(envp) + 3));
        env = exec_libs_strip(env, stripped, alloca(exec_libs_strip_room(env)));
    }
    return REAL(execve)(_PATH_BSHELL, sargv, env);
}
