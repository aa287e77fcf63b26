/*
 * A new open file description of one of this process's fds, the way /proc/self/fd/N
 * gives one (a page cache's memfd reopened with the program's access mode: each open of a
 * served file has its own description). Through a kept dirfd of /proc/self/fd, opened
 * at the first use: openat(dir, "N") walks one name instead of four (bench/NOTES.md, the
 * per-file floor: 1.6-1.8 us against 2.3-3.1 us a reopen).
 *
 * The dirfd is one of the FS's own (fs_fd_base and up, close-on-exec), hidden from the
 * program as the shared mode's channels are: a close, dup2/dup3 onto it, close_range or
 * closefrom over it (interpose/fd.c) forgets it first, and the next reopen opens another.
 * It names this process's /proc/PID/fd: a forked child forgets (and closes) the parent's
 * (proc_fd_fork_child), and a vfork child, which shares the parent's memory, reopens by
 * the full name, neither using the parent's number nor leaving one of its own there.
 */
#include "../ldpfuse.h"

int ldp_proc_fd_dir = -1;
static int no_room;     /* the fds from fs_fd_base up were all taken: reopen by name */

/* the decimal digits of fd into out (12 bytes) */
static void digits(char *out, int fd)
{
    char rev[12];
    int k = 0;
    do
        rev[k++] = (char)('0' + fd % 10);
    while ((fd /= 10) > 0 && k < 11);
    for (int i = 0; i < k; i++)
        out[i] = rev[k - 1 - i];
    out[k] = '\0';
}

static int by_name(int fd, int flags)
{
    char proc[32] = "/proc/self/fd/";
    digits(proc + 14, fd);
    return REAL(open)(proc, flags);
}

static int dir_fd(void)
{
    int dir = __atomic_load_n(&ldp_proc_fd_dir, __ATOMIC_ACQUIRE);
    if (dir >= 0)
        return dir;
    if (__atomic_load_n(&no_room, __ATOMIC_RELAXED))
        return -1;
    dir = fs_fd_cloexec(REAL(open)("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (dir >= 0 && dir < fs_fd_base()) {
        /* no free number up there: not one of the program's kept for ever, by name */
        REAL(close)(dir);
        __atomic_store_n(&no_room, 1, __ATOMIC_RELAXED);
        return -1;
    }
    if (dir < 0)
        return -1;
    int none = -1;
    if (!__atomic_compare_exchange_n(&ldp_proc_fd_dir, &none, dir, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        REAL(close)(dir);       /* another thread's came first */
        return none;
    }
    return dir;
}

int proc_fd_reopen(int fd, int flags)
{
    int dir = ldp_vfork_child ? -1 : dir_fd();
    if (dir < 0)
        return by_name(fd, flags);
    char name[12];
    digits(name, fd);
    int r = REAL(openat)(dir, name, flags);
    if (r < 0 && errno == EBADF)
        return by_name(fd, flags);      /* the program took the number away just now */
    return r;
}

void proc_fd_lost(int fd)
{
    int dir = fd;
    __atomic_compare_exchange_n(&ldp_proc_fd_dir, &dir, -1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED);
}

void proc_fd_range_lost(unsigned first, unsigned last)
{
    int dir = __atomic_load_n(&ldp_proc_fd_dir, __ATOMIC_RELAXED);
    if (dir >= 0 && (unsigned)dir >= first && (unsigned)dir <= last)
        proc_fd_lost(dir);
}

void proc_fd_fork_child(void)
{
    no_room = 0;
    int dir = __atomic_exchange_n(&ldp_proc_fd_dir, -1, __ATOMIC_RELAXED);
    if (dir >= 0)
        REAL(close)(dir);
}
