/* Process start and exit. Start reads the mount table (no syscall when there is none);
 * exit writes back what cached files still hold and gives the FS its destroy(). */
#include "../ldpfuse.h"
#include "escape.h"
#include <stdlib.h>
#include <pthread.h>
#include <string.h>

TLS int ldp_guard;
TLS sigset_t ldp_guard_mask;
TLS int ldp_guard_blocked;
void process_init(void);
void backend_destroy(void);
int backend_unreachable_at_exit(void);
void backend_loader_init(void);
void tmpfile_fork(int phase);
void fts_fork(int phase);

/* A fork while another thread holds one of our locks would leave it held forever in the
 * child: take them around fork. */
static void fork_prepare(void)
{
    vfs_names_fork(0);      /* first: held around attrcache_writer, which takes attrcache's */
    attrcache_fork(0);
    fdtable_fork(0);
    pcache_fork(0);
    tmpfile_fork(0);
    fts_fork(0);
}
static void fork_after(void);
static void fork_child(void)
{
    pcache_fork_child();
    proc_fd_fork_child();
    notify_fork_child();
    fork_after();
    escape_after_fork();
}
static void fork_after(void)
{
    fts_fork(1);
    tmpfile_fork(1);
    pcache_fork(1);
    fdtable_fork(1);
    attrcache_fork(1);
    vfs_names_fork(1);
}

__attribute__((constructor)) static void ldp_init(void)
{
    const char *lvl = getenv("LDPFUSE_LOG_LEVEL");
    if (lvl) {
        if (strcasecmp(lvl, "debug") == 0) ldp_log_level = LOG_DEBUG;
        else if (strcasecmp(lvl, "info") == 0) ldp_log_level = LOG_INFO;
        else if (strcasecmp(lvl, "error") == 0 || strcasecmp(lvl, "critical") == 0) ldp_log_level = LOG_ERROR;
    }
    mounts_init();
    if (ldp_nmounts == 0)
        return;
    mode_t m = REAL(umask)(022);
    REAL(umask)(m);
    ldp_umask = m;
    cwd_init();
    process_init();
    pthread_atfork(fork_prepare, fork_after, fork_child);
    backend_loader_init();
    escape_init();
}

__attribute__((destructor)) static void ldp_fini(void)
{
    if (ldp_nmounts == 0 || ldp_vfork_child)
        return;         /* a vfork child that exit()s: the state is its parent's */
    notify_quiesce();   /* no inotify thread calls the file system from here on */
    if (__atomic_load_n(&ldp_nvfds, __ATOMIC_ACQUIRE) > 0 && !backend_unreachable_at_exit()) {
        /* destructors run before exit() flushes stdio: flush it into the memfds first */
        fflush(NULL);
        ldp_sync_all();
    }
    backend_destroy();
}

/* _exit skips destructors, so a process that leaves that way (dash's exit does) would
 * never write back what it wrote to a cached file: as the kernel keeps a file's dirty
 * pages past _exit, write them back here. Nothing to do when no cached file is open. */
void _exit(int status)
{
    if (UNLIKELY(__atomic_load_n(&ldp_nvfds, __ATOMIC_ACQUIRE) > 0) && !ldp_guard)
        ldp_sync_all();
    REAL(_exit)(status);
    __builtin_unreachable();
}

void _Exit(int status)
{
    _exit(status);
}
