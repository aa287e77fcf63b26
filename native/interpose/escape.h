/* The safety net for calls that never pass through a libc function (docs/escapes.md):
 * system calls made outside libc (inline `syscall` instructions, ld.so, liburing) caught
 * with Syscall User Dispatch, and programs the loader will not preload us into, named at
 * exec. */
#ifndef LDPFUSE_ESCAPE_H
#define LDPFUSE_ESCAPE_H
#include <signal.h>

/* not exported: a program's own function of the same name must not replace these */
#define ESCAPE_HIDDEN __attribute__((visibility("hidden")))

/* ESCAPES_RING: the net is off, but the process maps liburing, whose ring calls are
 * inline: the net is up and acts on io_uring_setup/enter/register only */
enum { ESCAPES_OFF = 0, ESCAPES_WATCH = 1, ESCAPES_STRICT = 2, ESCAPES_RING = 3 };
extern int ldp_escapes ESCAPE_HIDDEN;         /* LDPFUSE_ESCAPES: off, watch or strict; or ring */

void escape_init(void) ESCAPE_HIDDEN;         /* process start (the constructor): arm this thread */
void escape_after_fork(void) ESCAPE_HIDDEN;
/* The net up for liburing's inline ring calls (ESCAPES_RING), when it is off */
void escape_arm_for_rings(void) ESCAPE_HIDDEN;
/* dlopen(name) is about to load: when it brings liburing (its name; the DT_NEEDED of the
 * file when read_file, a path outside the mounts), the net goes up first */
void escape_before_dlopen(const char *name, int read_file) ESCAPE_HIDDEN;   /* in a forked child: the kernel did not carry the net over */
/* sigaction() while the net is up: SIGSYS stays ours (the program's handler is kept aside
 * and called for SIGSYS that is not ours), and no handler's mask may block SIGSYS. */
int escape_sigaction(int sig, const struct sigaction *act, struct sigaction *old) ESCAPE_HIDDEN;
/* Before an exec through libc: 0 to go on, -1 (errno EPERM) when --strict refuses a
 * program that cannot be served (statically linked, set-ID); a line names it either way. */
int escape_check_exec(const char *path, char *const argv[]) ESCAPE_HIDDEN;
/* signal(), sysv_signal(), bsd_signal() of SIGSYS while the net is up */
__sighandler_t escape_signal(__sighandler_t h) ESCAPE_HIDDEN;

#endif
