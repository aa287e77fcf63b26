/*
 * syscall(): libc's variadic way to make a system call by number. Programs use it for calls
 * their libc had no wrapper for when they were written (libuv's statx, gnulib's renameat2,
 * openat2, faccessat2). Each number that names a path or an fd is one row below, handed to
 * the wrapper of the same call, so a mount path gets the same answer as through libc; every
 * other number goes to the real syscall() with all six arguments, as it would have.
 *
 * The conventions stay the kernel's, as from the real syscall(): -1 and errno on failure,
 * and for getcwd the length of the name (the libc function returns the buffer).
 * A raw `syscall` instruction never comes here (see limitations.md).
 *
 * The wrappers called are this library's own definitions: the library is linked with
 * -Bsymbolic-functions, so a call by name binds to them even when the program defines the
 * function itself (GNU patch's gnulib renameat2 calls syscall(SYS_renameat2), and its
 * own function would call syscall() again). Nothing is looked up at the first call: an
 * allocator (jemalloc, tcmalloc) may call syscall() from inside its first malloc, holding
 * its init lock, and a dlopen there would call malloc and wait on that lock for ever.
 */
#include "../ldpfuse.h"
#include <linux/openat2.h>
#include <stdarg.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/xattr.h>

#ifndef OPEN_HOW_SIZE_VER0
#define OPEN_HOW_SIZE_VER0 24      /* the first struct open_how: flags, mode, resolve */
#endif

/* openat2 in a mount: the open_how's flags and mode, checked as the kernel checks them.
 * Of the resolve flags only RESOLVE_NO_SYMLINKS has a meaning here (as O_NOFOLLOW on the
 * last component); a mount has no magic links nor crossings to refuse. */
static long openat2_call(int dirfd, const char *path, const struct open_how *how, size_t size)
{
    struct vpath vp;
    const char *p = path;
    if (LIKELY(!vfs_lookup(dirfd, &p, &vp)))
        return REAL(syscall)(SYS_openat2, (long)dirfd, p, how, size);
    if (size < OPEN_HOW_SIZE_VER0) {
        errno = EINVAL;
        return -1;
    }
    uint64_t flags = how->flags, mode = how->mode;
    if ((flags >> 32) != 0 || (mode & ~(uint64_t)07777) != 0 ||
        (mode != 0 && !(flags & (O_CREAT | __O_TMPFILE))) ||
        (how->resolve & ~(uint64_t)(RESOLVE_NO_XDEV | RESOLVE_NO_MAGICLINKS | RESOLVE_NO_SYMLINKS |
                                    RESOLVE_BENEATH | RESOLVE_IN_ROOT | RESOLVE_CACHED))) {
        errno = EINVAL;
        return -1;
    }
    if (how->resolve & RESOLVE_NO_SYMLINKS)
        flags |= O_NOFOLLOW;
    return openat(dirfd, path, (int)flags, (mode_t)mode);
}

static long getcwd_call(char *buf, size_t size)
{
    if (buf == NULL || !ldp_cwd_virtual)
        return REAL(syscall)(SYS_getcwd, buf, size);
    return getcwd(buf, size) ? (long)strlen(buf) + 1 : -1;
}

#define ROW(nr, call) case nr: return (long)(call);

long syscall(long nr, ...)
{
    va_list ap;
    va_start(ap, nr);
    long a0 = va_arg(ap, long), a1 = va_arg(ap, long), a2 = va_arg(ap, long);
    long a3 = va_arg(ap, long), a4 = va_arg(ap, long), a5 = va_arg(ap, long);
    va_end(ap);
#define P(i) ((const char *)a##i)
#define I(i) ((int)a##i)
#define V(i) ((void *)a##i)
    switch (nr) {
    /* names and attributes by path */
    ROW(SYS_open, open(P(0), I(1), (mode_t)a2))
    ROW(SYS_openat, openat(I(0), P(1), I(2), (mode_t)a3))
    ROW(SYS_openat2, openat2_call(I(0), P(1), V(2), (size_t)a3))
    ROW(SYS_creat, creat(P(0), (mode_t)a1))
    ROW(SYS_stat, stat(P(0), V(1)))
    ROW(SYS_lstat, lstat(P(0), V(1)))
    ROW(SYS_newfstatat, fstatat(I(0), P(1), V(2), I(3)))
    ROW(SYS_statx, statx(I(0), P(1), I(2), (unsigned)a3, V(4)))
    ROW(SYS_access, access(P(0), I(1)))
    ROW(SYS_faccessat, faccessat(I(0), P(1), I(2), 0))
    ROW(SYS_faccessat2, faccessat(I(0), P(1), I(2), I(3)))
    ROW(SYS_statfs, statfs(P(0), V(1)))
    ROW(SYS_mkdir, mkdir(P(0), (mode_t)a1))
    ROW(SYS_mkdirat, mkdirat(I(0), P(1), (mode_t)a2))
    ROW(SYS_mknod, mknod(P(0), (mode_t)a1, (dev_t)a2))
    ROW(SYS_mknodat, mknodat(I(0), P(1), (mode_t)a2, (dev_t)a3))
    ROW(SYS_rmdir, rmdir(P(0)))
    ROW(SYS_unlink, unlink(P(0)))
    ROW(SYS_unlinkat, unlinkat(I(0), P(1), I(2)))
    ROW(SYS_rename, rename(P(0), P(1)))
    ROW(SYS_renameat, renameat(I(0), P(1), I(2), P(3)))
    ROW(SYS_renameat2, renameat2(I(0), P(1), I(2), P(3), (unsigned)a4))
    ROW(SYS_link, link(P(0), P(1)))
    ROW(SYS_linkat, linkat(I(0), P(1), I(2), P(3), I(4)))
    ROW(SYS_symlink, symlink(P(0), P(1)))
    ROW(SYS_symlinkat, symlinkat(P(0), I(1), P(2)))
    ROW(SYS_readlink, readlink(P(0), V(1), (size_t)a2))
    ROW(SYS_readlinkat, readlinkat(I(0), P(1), V(2), (size_t)a3))
    ROW(SYS_chmod, chmod(P(0), (mode_t)a1))
    ROW(SYS_fchmodat, fchmodat(I(0), P(1), (mode_t)a2, 0))
    ROW(SYS_chown, chown(P(0), (uid_t)a1, (gid_t)a2))
    ROW(SYS_lchown, lchown(P(0), (uid_t)a1, (gid_t)a2))
    ROW(SYS_fchownat, fchownat(I(0), P(1), (uid_t)a2, (gid_t)a3, I(4)))
    ROW(SYS_truncate, truncate(P(0), (off_t)a1))
    ROW(SYS_utime, utime(P(0), V(1)))
    ROW(SYS_utimes, utimes(P(0), V(1)))
    ROW(SYS_futimesat, futimesat(I(0), P(1), V(2)))
    ROW(SYS_utimensat, utimensat(I(0), P(1), V(2), I(3)))
    ROW(SYS_getxattr, getxattr(P(0), P(1), V(2), (size_t)a3))
    ROW(SYS_lgetxattr, lgetxattr(P(0), P(1), V(2), (size_t)a3))
    ROW(SYS_setxattr, setxattr(P(0), P(1), V(2), (size_t)a3, I(4)))
    ROW(SYS_lsetxattr, lsetxattr(P(0), P(1), V(2), (size_t)a3, I(4)))
    ROW(SYS_listxattr, listxattr(P(0), V(1), (size_t)a2))
    ROW(SYS_llistxattr, llistxattr(P(0), V(1), (size_t)a2))
    ROW(SYS_removexattr, removexattr(P(0), P(1)))
    ROW(SYS_lremovexattr, lremovexattr(P(0), P(1)))
    ROW(SYS_chdir, chdir(P(0)))
    ROW(SYS_getcwd, getcwd_call(V(0), (size_t)a1))
    ROW(SYS_execve, execve(P(0), V(1), V(2)))
    ROW(SYS_inotify_add_watch, inotify_add_watch(I(0), P(1), (uint32_t)a2))
    ROW(SYS_inotify_rm_watch, inotify_rm_watch(I(0), I(1)))
    /* fds that may be virtual: a cached file fills its pages, a close releases it */
    ROW(SYS_close, close(I(0)))
    ROW(SYS_close_range, close_range((unsigned)a0, (unsigned)a1, I(2)))
    ROW(SYS_dup, dup(I(0)))
    ROW(SYS_dup2, dup2(I(0), I(1)))
    ROW(SYS_dup3, dup3(I(0), I(1), I(2)))
    ROW(SYS_fcntl, fcntl(I(0), I(1), a2))
    ROW(SYS_flock, flock(I(0), I(1)))
    ROW(SYS_fstat, fstat(I(0), V(1)))
    ROW(SYS_fstatfs, fstatfs(I(0), V(1)))
    ROW(SYS_fchdir, fchdir(I(0)))
    ROW(SYS_fchmod, fchmod(I(0), (mode_t)a1))
    ROW(SYS_fchown, fchown(I(0), (uid_t)a1, (gid_t)a2))
    ROW(SYS_ftruncate, ftruncate(I(0), (off_t)a1))
    ROW(SYS_fsync, fsync(I(0)))
    ROW(SYS_fdatasync, fdatasync(I(0)))
    ROW(SYS_fallocate, fallocate(I(0), I(1), (off_t)a2, (off_t)a3))
    ROW(SYS_fgetxattr, fgetxattr(I(0), P(1), V(2), (size_t)a3))
    ROW(SYS_fsetxattr, fsetxattr(I(0), P(1), V(2), (size_t)a3, I(4)))
    ROW(SYS_flistxattr, flistxattr(I(0), V(1), (size_t)a2))
    ROW(SYS_fremovexattr, fremovexattr(I(0), P(1)))
    ROW(SYS_read, read(I(0), V(1), (size_t)a2))
    ROW(SYS_write, write(I(0), V(1), (size_t)a2))
    ROW(SYS_pread64, pread(I(0), V(1), (size_t)a2, (off_t)a3))
    ROW(SYS_pwrite64, pwrite(I(0), V(1), (size_t)a2, (off_t)a3))
    ROW(SYS_readv, readv(I(0), V(1), I(2)))
    ROW(SYS_writev, writev(I(0), V(1), I(2)))
    ROW(SYS_lseek, lseek(I(0), (off_t)a1, I(2)))
    ROW(SYS_sendfile, sendfile(I(0), I(1), V(2), (size_t)a3))
    ROW(SYS_preadv, preadv(I(0), V(1), I(2), (off_t)a3))     /* x86-64: the offset whole in pos_l */
    ROW(SYS_preadv2, preadv2(I(0), V(1), I(2), (off_t)a3, I(5)))
    ROW(SYS_splice, splice(I(0), V(1), I(2), V(3), (size_t)a4, (unsigned)a5))
    ROW(SYS_sendmsg, sendmsg(I(0), V(1), I(2)))
    ROW(SYS_sendmmsg, sendmmsg(I(0), V(1), (unsigned)a2, I(3)))
    ROW(SYS_io_uring_setup, uring_setup((unsigned)a0, V(1)))
    ROW(SYS_io_uring_enter, uring_enter(I(0), (unsigned)a1, (unsigned)a2, (unsigned)a3, V(4), (size_t)a5))
    ROW(SYS_io_uring_register, uring_register(I(0), (unsigned)a1, V(2), (unsigned)a3))
    ROW(SYS_munmap, munmap(V(0), (size_t)a1))
    ROW(SYS_mremap, mremap(V(0), (size_t)a1, (size_t)a2, I(3), V(4)))
    ROW(SYS_copy_file_range, copy_file_range(I(0), V(1), I(2), V(3), (size_t)a4, (unsigned)a5))
    ROW(SYS_mmap, mmap(V(0), (size_t)a1, I(2), I(3), I(4), (off_t)a5))
    case SYS_setuid: case SYS_setreuid: case SYS_setresuid: case SYS_setfsuid:
    case SYS_setgid: case SYS_setregid: case SYS_setresgid: case SYS_setfsgid: case SYS_setgroups: {
        long r = REAL(syscall)(nr, a0, a1, a2, a3, a4, a5);
        ldp_creds_changed();    /* interpose/creds.c (this thread's alone, but all forget) */
        return r;
    }
    default:
        return REAL(syscall)(nr, a0, a1, a2, a3, a4, a5);
    }
#undef P
#undef I
#undef V
}
