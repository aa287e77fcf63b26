/*
 * The launcher's signals, forwarded to the command (ldpfuse_py/shared_mode.py
 * forward_signals): SIGTERM and SIGHUP sent to ldpfuse-run go to the command, and so do
 * SIGINT and SIGQUIT sent by a process (kill, a CI's timeout); those the terminal sends
 * (Ctrl-C, Ctrl-\, si_code SI_KERNEL) reach the command itself, which is in the
 * launcher's process group, so they are not sent twice: the command decides.
 *
 * The handler is C, not Python's: a Python handler runs only on the main thread, between
 * bytecodes, and the main thread is the FS thread of a class that is not thread_safe; one
 * stuck in a method that does not return to the interpreter (a C library that waits on a
 * lock, or retries EINTR itself) would hold every signal back, and `kill` of the launcher
 * would not reach the command. This one runs at once in whichever thread the kernel picks
 * and only sends the signal on (async-signal-safe). The command is named by a pidfd where
 * the kernel has them (Linux 5.3), so a signal that comes after the command was waited
 * for cannot reach another process that took its pid; without, by pid.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

static volatile pid_t command_pid;
static volatile int command_pidfd = -1;

static void forward(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    if ((sig == SIGINT || sig == SIGQUIT) && si && si->si_code == SI_KERNEL)
        return;     /* the terminal's: the command has its own */
    int saved = errno;
    int fd = command_pidfd;
#ifdef SYS_pidfd_send_signal
    if (fd >= 0)
        syscall(SYS_pidfd_send_signal, fd, sig, NULL, 0);
    else
#endif
    if (command_pid > 0)
        kill(command_pid, sig);
    errno = saved;
}

/* forward_signals(pid): from now on SIGTERM, SIGHUP, SIGINT and SIGQUIT sent to this
 * process go to pid as said above; callable from any thread. */
PyObject *ldp_forward_signals(PyObject *self, PyObject *args)
{
    (void)self;
    int pid;
    if (!PyArg_ParseTuple(args, "i", &pid))
        return NULL;
    int fd = -1;
#ifdef SYS_pidfd_open
    fd = (int)syscall(SYS_pidfd_open, pid, 0);     /* close-on-exec; -1: no pidfds here */
#endif
    command_pid = pid;
    command_pidfd = fd;
    struct sigaction sa = { .sa_sigaction = forward, .sa_flags = SA_SIGINFO | SA_RESTART | SA_ONSTACK };
    sigfillset(&sa.sa_mask);
    static const int sigs[] = { SIGTERM, SIGHUP, SIGINT, SIGQUIT };
    for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
        if (sigaction(sigs[i], &sa, NULL) < 0)
            return PyErr_SetFromErrno(PyExc_OSError);
    Py_RETURN_NONE;
}
