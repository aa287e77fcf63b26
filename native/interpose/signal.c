/* Signal dispositions pass through untouched; we only note that the program installed a
 * handler of its own, since only then can one run in the middle of a file system call and
 * touch the mount (see guard_enter). Exec resets handlers, so a new image starts clean. */
#include "../ldpfuse.h"
#include "escape.h"

int ldp_handlers;

static void note(void (*h)(int))
{
    if (h != SIG_DFL && h != SIG_IGN && h != SIG_ERR)
        __atomic_store_n(&ldp_handlers, 1, __ATOMIC_RELAXED);
}

int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    if (act && (act->sa_flags & SA_SIGINFO)) {
        if (act->sa_sigaction != NULL)
            __atomic_store_n(&ldp_handlers, 1, __ATOMIC_RELAXED);
    } else if (act) {
        note(act->sa_handler);
    }
    if (UNLIKELY(ldp_escapes))
        return escape_sigaction(sig, act, old);
    return REAL(sigaction)(sig, act, old);
}

__sighandler_t signal(int sig, __sighandler_t h)
{
    note(h);
    if (UNLIKELY(ldp_escapes) && sig == SIGSYS)
        return escape_signal(h);
    return REAL(signal)(sig, h);
}

__sighandler_t sysv_signal(int sig, __sighandler_t h)
{
    note(h);
    if (UNLIKELY(ldp_escapes) && sig == SIGSYS)
        return escape_signal(h);
    return REAL(sysv_signal)(sig, h);
}

__sighandler_t bsd_signal(int sig, __sighandler_t h)
{
    note(h);
    if (UNLIKELY(ldp_escapes) && sig == SIGSYS)
        return escape_signal(h);
    return REAL(bsd_signal)(sig, h);
}
