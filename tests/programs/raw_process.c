/* Process and signal calls made with inline `syscall` instructions, as Go's runtime makes
 * them, which the net (docs/escapes.md) cannot simply make again from libc:
 *   raw_process fork FILE     a raw fork; the child stats FILE with an inline call
 *   raw_process signals FILE  a handler installed by a raw rt_sigaction with a trampoline
 *                             of its own, signals blocked and unblocked by raw
 *                             rt_sigprocmask (every signal: SIGSYS too), FILE stat'ed
 *                             inline while they are blocked
 *   raw_process uring         a raw io_uring_setup
 * Prints what a native run prints. Used by tests/test_escapes.py. */
#define _GNU_SOURCE
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <fcntl.h>
#include <unistd.h>

static long raw(long nr, long a, long b, long c, long d)
{
    long r;
    register long r10 __asm__("r10") = d;
    __asm__ volatile("syscall" : "=a"(r) : "a"(nr), "D"(a), "S"(b), "d"(c), "r"(r10)
                     : "rcx", "r11", "memory");
    return r;
}

static void stat_inline(const char *who, const char *path)
{
    struct stat st;
    long r = raw(SYS_newfstatat, AT_FDCWD, (long)path, (long)&st, 0);
    if (r == 0)
        printf("%s: size %lld\n", who, (long long)st.st_size);
    else
        printf("%s: %s\n", who, strerror((int)-r));
    fflush(stdout);
}

/* the kernel's sigaction, with a trampoline of our own as Go's runtime has */
struct ksigaction { void (*handler)(int); unsigned long flags; void (*restorer)(void); unsigned long mask; };
void own_restorer(void);
__asm__(".text\n.globl own_restorer\nown_restorer:\n\tmov $15, %rax\n\tsyscall\n\thlt\n");

static volatile int caught;
static void on_usr1(int sig)
{
    (void)sig;
    caught++;
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "fork") == 0) {
        fflush(stdout);
        long pid = raw(SYS_fork, 0, 0, 0, 0);
        if (pid == 0) {
            stat_inline("child of a raw fork", argv[2]);
            raw(SYS_exit_group, 0, 0, 0, 0);
        }
        int st;
        waitpid((pid_t)pid, &st, 0);
        stat_inline("parent", argv[2]);
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "signals") == 0) {
        struct ksigaction ka = { on_usr1, 0x04000000UL /* SA_RESTORER */, own_restorer, 0 }, old;
        long r = raw(SYS_rt_sigaction, SIGUSR1, (long)&ka, (long)&old, 8);
        printf("rt_sigaction: %ld\n", r);
        unsigned long all = ~0UL, before = 0, during = 0;
        raw(SYS_rt_sigprocmask, SIG_BLOCK, (long)&all, (long)&before, 8);
        raw(SYS_kill, getpid(), SIGUSR1, 0, 0);
        raw(SYS_rt_sigprocmask, SIG_BLOCK, 0, (long)&during, 8);
        printf("SIGUSR1 blocked: %d, caught while blocked: %d\n",
               (int)((during >> (SIGUSR1 - 1)) & 1), caught);
        stat_inline("inline stat with every signal blocked", argv[2]);
        raw(SYS_rt_sigprocmask, SIG_SETMASK, (long)&before, 0, 8);
        printf("caught after unblocking: %d\n", caught);
        raw(SYS_kill, getpid(), SIGUSR1, 0, 0);
        printf("caught again: %d\n", caught);
        stat_inline("inline stat after the handlers", argv[2]);
        return 0;
    }
    if (argc >= 2 && strcmp(argv[1], "uring") == 0) {
        char params[120];
        memset(params, 0, sizeof params);
        long fd = raw(SYS_io_uring_setup, 4, (long)params, 0, 0);
        printf("io_uring_setup: %s\n", fd >= 0 ? "a ring" : strerror((int)-fd));
        return 0;
    }
    return 2;
}
