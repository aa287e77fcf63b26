/* The audit library's system calls and string functions (sys.h says why it has no libc).
 * Built with -ffreestanding -fno-tree-loop-distribute-patterns: these loops must not be
 * turned into calls of themselves. */
#include <fcntl.h>
#include <sys/syscall.h>
#include "sys.h"

static long call3(long n, long a, long b, long c)
{
#if defined(__x86_64__)
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(n), "D"(a), "S"(b), "d"(c) : "rcx", "r11", "memory");
    return r;
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = n;
    register long x0 __asm__("x0") = a;
    register long x1 __asm__("x1") = b;
    register long x2 __asm__("x2") = c;
    __asm__ volatile("svc 0" : "+r"(x0) : "r"(x8), "r"(x1), "r"(x2) : "memory");
    return x0;
#else
#error "the audit library's system calls are written for x86_64 and aarch64"
#endif
}

long sys_open(const char *path)
{
    return call3(SYS_openat, AT_FDCWD, (long)path, O_RDONLY | O_CLOEXEC);
}

long sys_read(int fd, void *buf, size_t n)
{
    return call3(SYS_read, fd, (long)buf, (long)n);
}

long sys_close(int fd)
{
    return call3(SYS_close, fd, 0, 0);
}

long sys_fstat(int fd, struct stat *st)
{
    return call3(SYS_fstat, fd, (long)st, 0);
}

size_t strlen(const char *s)
{
    size_t n = 0;
    while (s[n])
        n++;
    return n;
}

char *strchr(const char *s, int c)
{
    for (;; s++) {
        if (*s == (char)c)
            return (char *)s;
        if (*s == '\0')
            return NULL;
    }
}

int memcmp(const void *a, const void *b, size_t n)
{
    const unsigned char *p = a, *q = b;
    for (size_t i = 0; i < n; i++)
        if (p[i] != q[i])
            return p[i] < q[i] ? -1 : 1;
    return 0;
}

void *memcpy(void *d, const void *s, size_t n)
{
    unsigned char *p = d;
    const unsigned char *q = s;
    for (size_t i = 0; i < n; i++)
        p[i] = q[i];
    return d;
}

void *memset(void *d, int c, size_t n)
{
    unsigned char *p = d;
    for (size_t i = 0; i < n; i++)
        p[i] = (unsigned char)c;
    return d;
}
