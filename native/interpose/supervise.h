/* The exec side of the supervisor (supervise.c, docs/supervisor.md). */
#ifndef LDPFUSE_SUPERVISE_H
#define LDPFUSE_SUPERVISE_H
/* Right before a real execve of path: if the run supervises it (LDPFUSE_SUPERVISE: a
 * statically linked or Go program, or every program), install the seccomp filter and hand its
 * listener to the supervisor. 1 if the program will be supervised (or already was: an
 * ancestor's filter covers it), else 0. errno is kept. */
int supervise_exec(const char *path) __attribute__((visibility("hidden")));
/* For posix_spawn, whose child execs from inside libc (no wrapper runs there): if path
 * (searched in PATH when `search`, posix_spawnp of a bare name) is to be supervised, the
 * argv that spawns ldpfuse-supervisor's exec-as role instead (its exec goes through this
 * library): one malloc'd block (free it); else NULL. */
char **supervise_spawn_argv(const char *path, char *const argv[], int search) __attribute__((visibility("hidden")));
/* At a process's start, under a supervisor's filter: the working directory in a mount the
 * kernel's cannot be (its shadow, or where a supervised parent chdir'd: supervisor/cwd.c)
 * into out; 1 if there is one, else 0. */
int supervise_cwd_inherited(char *out, size_t size) __attribute__((visibility("hidden")));
#endif
