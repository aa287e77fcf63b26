/*
 * What the audit library uses instead of a libc: it is linked with none (-nostdlib), so
 * that ld.so loads nothing for it. A libc of its own (a second copy, in the audit
 * namespace) would be looked up along LD_LIBRARY_PATH and the RPATHs there, where
 * la_objsearch is not asked: in a mount, by ld.so's own system calls.
 * Raw system calls (x86_64, aarch64) and the few string functions it needs (sys.c).
 */
#ifndef LDPFUSE_AUDIT_SYS_H
#define LDPFUSE_AUDIT_SYS_H
#include <stddef.h>
#include <sys/stat.h>

#define AUDIT_HIDDEN __attribute__((visibility("hidden")))

AUDIT_HIDDEN long sys_open(const char *path);             /* O_RDONLY | O_CLOEXEC; fd or -errno */
AUDIT_HIDDEN long sys_read(int fd, void *buf, size_t n);
AUDIT_HIDDEN long sys_close(int fd);
AUDIT_HIDDEN long sys_fstat(int fd, struct stat *st);

AUDIT_HIDDEN size_t strlen(const char *s);
AUDIT_HIDDEN char *strchr(const char *s, int c);
AUDIT_HIDDEN int memcmp(const void *a, const void *b, size_t n);
AUDIT_HIDDEN void *memcpy(void *d, const void *s, size_t n);
AUDIT_HIDDEN void *memset(void *d, int c, size_t n);

/* A variable of the environment the process started with (/proc/self/environ, read once),
 * one of LDPFUSE_MOUNTPOINTS, LDPFUSE_CWD, LDPFUSE_LIBRARY_FDS; NULL when unset. */
AUDIT_HIDDEN const char *audit_env(const char *key);

#endif
