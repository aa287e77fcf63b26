/* io_uring: a ring's reads reach a cached fd's memfd in the kernel, past every wrapper, and
 * no wrapper can see what a ring submits (shared memory). What can be seen is the ring's
 * system calls: through libc's syscall() (libuv, the io-uring Rust crate) always, and
 * made inline through the safety net (interpose/escape.c): with --watch-escapes, and in a
 * process that maps liburing (whose calls are inline) with the net off too.
 * Before each io_uring_enter and io_uring_register, every readable cached fd of the
 * process is filled whole: whatever the ring then reads (an fd opened after the setup, a
 * registered file) has no hole. A ring with a kernel thread that polls its queue
 * (IORING_SETUP_SQPOLL) submits with no system call at all: it is refused with EPERM, as
 * kernels before 5.11 refused it to unprivileged programs, and programs fall back to a
 * plain ring. --strict refuses every ring (ENOSYS). docs/cache.md says why (measured). */
#include "../ldpfuse.h"
#include "escape.h"
#include <linux/io_uring.h>
#include <sys/stat.h>
#include <sys/syscall.h>

/* Fill every readable cached fd of this process whole: 0, or -1 with the fill's errno. */
static int fill_every_cached_fd(void)
{
    if (LIKELY(__atomic_load_n(&ldp_nvfds, __ATOMIC_RELAXED) == 0) || ldp_guard)
        return 0;
    for (int fd = 0; fd <= fdtable_max(); fd++) {
        struct vfile *v = fdtable_get(fd);
        struct stat st;
        /* the memfd's size is the cache's: a range fill, whose check costs nothing once
         * this open file has seen it filled (pcache_fill's fast path) */
        if (v && v->kind == VF_FILE && v->pc && (v->flags & O_ACCMODE) != O_WRONLY && !pcache_whole(v) &&
            REAL(fstat)(fd, &st) == 0 && st.st_size > 0 && pcache_fill(v, 0, (size_t)st.st_size, 0) < 0)
            return -1;
    }
    return 0;
}

long uring_setup(unsigned entries, void *params)
{
    struct io_uring_params *p = params;
    if (ldp_escapes == ESCAPES_STRICT) {
        errno = ENOSYS;
        return -1;
    }
    if (ldp_nmounts > 0 && p && (p->flags & IORING_SETUP_SQPOLL)) {
        errno = EPERM;
        return -1;
    }
    return REAL(syscall)(SYS_io_uring_setup, entries, p);
}

long uring_enter(int ring, unsigned to_submit, unsigned min_complete, unsigned flags, const void *arg,
                 size_t argsz)
{
    if (to_submit > 0 && fill_every_cached_fd() < 0)
        return -1;
    return REAL(syscall)(SYS_io_uring_enter, ring, to_submit, min_complete, flags, arg, argsz);
}

long uring_register(int ring, unsigned op, void *arg, unsigned n)
{
    if (fill_every_cached_fd() < 0)
        return -1;
    return REAL(syscall)(SYS_io_uring_register, ring, op, arg, n);
}
