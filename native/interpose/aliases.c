/*
 * glibc's second public names of functions wrapped elsewhere: `__open`, `__read`, ...
 * (GLIBC_2.2.5, still imported by some binaries and libraries), `llseek` (the old name of
 * lseek64), the fortified `__getwd_chk`, and libio's `_IO_fopen`/`_IO_fdopen` (a stream
 * made under them would be glibc's own over a page cache: stdio.c). Each is the wrapper under its other name;
 * tests/test_symbol_coverage.py keeps this list complete against what libc exports.
 */
#include "../ldpfuse.h"
#include <stdarg.h>
#include <sys/statfs.h>

int __open(const char *path, int flags, ...);
int __open64(const char *path, int flags, ...);
ssize_t __read(int fd, void *buf, size_t n);
ssize_t __write(int fd, const void *buf, size_t n);
ssize_t __pread64(int fd, void *buf, size_t n, off64_t off);
ssize_t __pwrite64(int fd, const void *buf, size_t n, off64_t off);
off_t __lseek(int fd, off_t off, int whence);
off64_t llseek(int fd, off64_t off, int whence);
int __close(int fd);
int __dup2(int fd, int fd2);
int __fcntl(int fd, int cmd, ...);
int __statfs(const char *path, struct statfs *buf);
char *__getwd_chk(char *buf, size_t buflen);
FILE *_IO_fopen(const char *path, const char *mode);
FILE *_IO_fdopen(int fd, const char *mode);
void __chk_fail(void) __attribute__((noreturn));

static mode_t mode_arg(int flags, va_list ap)
{
    return (flags & O_CREAT) || (flags & O_TMPFILE) == O_TMPFILE ? (mode_t)va_arg(ap, int) : 0;
}

int __open(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return open(path, flags, mode);
}

int __open64(const char *path, int flags, ...)
{
    va_list ap;
    va_start(ap, flags);
    mode_t mode = mode_arg(flags, ap);
    va_end(ap);
    return open64(path, flags, mode);
}

ssize_t __read(int fd, void *buf, size_t n)
{
    return read(fd, buf, n);
}

ssize_t __write(int fd, const void *buf, size_t n)
{
    return write(fd, buf, n);
}

ssize_t __pread64(int fd, void *buf, size_t n, off64_t off)
{
    return pread64(fd, buf, n, off);
}

ssize_t __pwrite64(int fd, const void *buf, size_t n, off64_t off)
{
    return pwrite64(fd, buf, n, off);
}

off_t __lseek(int fd, off_t off, int whence)
{
    return lseek(fd, off, whence);
}

off64_t llseek(int fd, off64_t off, int whence)
{
    return lseek64(fd, off, whence);
}

int __close(int fd)
{
    return close(fd);
}

int __dup2(int fd, int fd2)
{
    return dup2(fd, fd2);
}

int __fcntl(int fd, int cmd, ...)
{
    va_list ap;
    va_start(ap, cmd);
    void *arg = va_arg(ap, void *);
    va_end(ap);
    return fcntl(fd, cmd, arg);
}

int __statfs(const char *path, struct statfs *buf)
{
    return statfs(path, buf);
}

char *__getwd_chk(char *buf, size_t buflen)
{
    char *r = getcwd(buf, buflen);
    if (r == NULL && errno == ERANGE)
        __chk_fail();       /* as glibc's: the buffer is smaller than the program said */
    return r;
}

FILE *_IO_fopen(const char *path, const char *mode)
{
    return fopen(path, mode);
}

FILE *_IO_fdopen(int fd, const char *mode)
{
    return fdopen(fd, mode);
}
