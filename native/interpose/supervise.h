/* The exec side of the supervisor (supervise.c, docs/supervisor.md). */
#ifndef LDPFUSE_SUPERVISE_H
#define LDPFUSE_SUPERVISE_H
/* Right before a real execve of path: if the run supervises it (LDPFUSE_SUPERVISE: a
 * statically linked or Go program, or every program), install the seccomp filter and hand its
 * listener to the supervisor. 1 if the program will be supervised (or already was: an
 * ancestor's filter covers it), else 0. errno is kept. */
int supervise_exec(const char *path) __attribute__((visibility("hidden")));
#endif
