/* A program that owns SIGSYS, as seccomp sandboxes do: its handler emulates getppid()
 * trapped by its own seccomp filter (SECCOMP_RET_TRAP), and sigaction() gives its handler
 * back. Then it blocks every signal, SIGSYS included, and stats a file with an inline
 * system call: under --watch-escapes the call must still be served (a trapped call that
 * finds SIGSYS blocked would kill the process). Used by tests/test_escapes.py.
 * Usage: sigsys_owner FILE */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>
#include <fcntl.h>

static volatile int trapped;

static void on_sigsys(int sig, siginfo_t *si, void *ctx)
{
    ucontext_t *uc = ctx;
    (void)sig;
    if (si->si_code == 1 /* SYS_SECCOMP */ && si->si_syscall == SYS_getppid) {
        trapped++;
        uc->uc_mcontext.gregs[REG_RAX] = 4242;
    }
}

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    struct sigaction sa, back;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigsys;
    sa.sa_flags = SA_SIGINFO;
    if (sigaction(SIGSYS, &sa, NULL) != 0 || sigaction(SIGSYS, NULL, &back) != 0)
        return 3;
    printf("handler given back: %s\n", back.sa_sigaction == on_sigsys ? "yes" : "no");

    struct sock_filter filter[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getppid, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_TRAP),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = { sizeof filter / sizeof filter[0], filter };
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) != 0) {
        perror("seccomp");
        return 4;
    }
    long ppid = syscall(SYS_getppid);
    printf("getppid through the program's own handler: %ld (trapped %d)\n", ppid, trapped);

    sigset_t all;
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &all, NULL);
    struct stat st;
    long r;
    register long flags __asm__("r10") = 0;
    __asm__ volatile("syscall" : "=a"(r) : "a"(SYS_newfstatat), "D"(AT_FDCWD), "S"(argv[1]), "d"(&st),
                     "r"(flags) : "rcx", "r11", "memory");
    if (r == 0)
        printf("inline newfstatat with every signal blocked: size %lld\n", (long long)st.st_size);
    else
        printf("inline newfstatat with every signal blocked: %s\n", strerror((int)-r));
    return 0;
}
