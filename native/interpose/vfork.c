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
 * - the real vfork only when this process has no virtual fds, its cwd is not in a mount,
 *   and PATH names no mount (a shell's PATH search runs in the child); fork otherwise;
 * - in the child (ldp_vfork_child, set in the caller's TLS, which the child shares), the
 *   FS is not started (backend_get fails with EIO and says why); chdir into a mount only
 *   records the path; an exec of a program in a mount, or from a cwd in a mount, goes
 *   through `/bin/sh -c 'cd . && p=$1 && shift && exec "$p" "$@"' sh PATH ARGS`, a fresh image that does it in full
 *   (the program's argv[0] is then its path). That is all POSIX lets a vfork child do
 *   (exec or _exit), and what shells, gcc and Python's subprocess do;
 * - the child's chdir and umask leave our record of them alone (a chdir keeps the
 *   parent's string), and the parent, when its thread runs again, puts its cwd back.
 * Other architectures fork.
 */
#include "../ldpfuse.h"
#include <paths.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

TLS int ldp_vfork_child;
TLS char *ldp_vfork_cwd;
static TLS int cwd_unchecked;   /* the child chdir'ed into a mount (not verified) */
static TLS struct {
    char *cwd;
    int cwd_virtual, cwd_above_mount;
} saved;

pid_t ldp_vfork_as_fork(void)
{
    return REAL(fork)();
}

#if defined(__x86_64__)
__attribute__((used)) static int vfork_prepare(void)
{
    if (ldp_nmounts == 0)
        return 1;
    if (__atomic_load_n(&ldp_nvfds, __ATOMIC_ACQUIRE) > 0 || ldp_cwd_virtual)
        return 0;
    const char *path = getenv("PATH");
    if (path && mount_named_in(path))
        return 0;
    saved.cwd = ldp_cwd;
    saved.cwd_virtual = ldp_cwd_virtual;
    saved.cwd_above_mount = ldp_cwd_above_mount;
    ldp_vfork_cwd = NULL;
    cwd_unchecked = 0;
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

/* chdir into a mount in a vfork child: the FS cannot be asked, so the path is taken as
 * it is (lexically normalised); the exec that follows has the new image check it. */
int ldp_vfork_child_chdir(const struct vpath *vp)
{
    char full[PATH_MAX];
    vfs_fullpath(vp, full, sizeof full);
    cwd_set(full);
    cwd_unchecked = 1;
    return 0;
}

/* execve in a vfork child: no allocation (it would stay in the parent's heap), and a
 * program in a mount is left to a fresh image. */
int ldp_vfork_child_execve(const char *path, char *const argv[], char *const envp[])
{
    char cwdbuf[PATH_MAX + 16], realbuf[PATH_MAX + 24];
    char **env = alloca(sizeof *env * (exec_env_room(envp) + 1));
    exec_env_into(envp, env, cwdbuf, realbuf);
    if (cwd_unchecked) {
        /* the new image verifies the cwd before the program runs (interpose/init.c) */
        char **e = env;
        while (*e)
            e++;
        e[0] = (char *)"LDPFUSE_CWD_CHECK=1";
        e[1] = NULL;
    }
    /* Which paths are in a mount: ".." needs the FS to resolve (is its left side a
     * directory?), so such a path that may lead into a mount goes to the fresh image. */
    struct vpath vp;
    const char *p = path;
    int maybe = p != NULL && ((p[0] != '/' && ldp_cwd_virtual) || mount_named_in(p));
    if (!(maybe && strstr(p, "..") != NULL) && !vfs_lookup(AT_FDCWD, &p, &vp))
        return REAL(execve)(p, argv, env);
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
    return REAL(execve)(_PATH_BSHELL, sargv, env);
}
