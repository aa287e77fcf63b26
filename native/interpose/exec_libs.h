/* Libraries in a mount that a program's dynamic loader will look for (exec_libs.c). */
#ifndef LDPFUSE_EXEC_LIBS_H
#define LDPFUSE_EXEC_LIBS_H
#include <limits.h>
#include <stddef.h>

#define EXEC_LIBS_MAX 64

struct exec_libs {
    int n;
    int rpath_in_mount;     /* an RPATH or RUNPATH ld.so will search names a mount */
    int path_in_mount;      /* so does LD_LIBRARY_PATH */
    int fd[EXEC_LIBS_MAX];          /* open across the exec, closed by the new image */
    char name[EXEC_LIBS_MAX][256];  /* the name ld.so searches for (DT_NEEDED) */
    char *path[EXEC_LIBS_MAX];      /* where it was found in the mount (malloc'd) */
    char table[EXEC_LIBS_MAX * 300 + 32];   /* LDPFUSE_LIBRARY_FDS=... */
    char audit[PATH_MAX + 16];      /* LD_AUDIT=... */
    char *library_path;             /* LD_LIBRARY_PATH= without the mount's directories,
                                     * then LDPFUSE_LIBRARY_PATH= the caller's (malloc'd) */
};

#define LIBS_HIDDEN __attribute__((visibility("hidden")))   /* not a libc name: not exported */
/* The program at path (fd: its bytes) is about to be exec'd with envp: find the libraries
 * its DT_NEEDED entries, and theirs, would be found in a mount. The number found; also
 * says whether ld.so's own search would pass through a mount directory (rpath_in_mount,
 * path_in_mount). */
LIBS_HIDDEN int exec_libs_find(struct exec_libs *l, int fd, const char *path, char *const envp[]);
/* May envp's LD_LIBRARY_PATH name a directory in a mount (a mount point in it, or a
 * relative entry while the working directory is in one)? A cheap test, made at every
 * exec: exec_libs_find says for sure. */
LIBS_HIDDEN int exec_libs_path_in_mount(char *const envp[]);
/* Does the ELF file at path (outside the mounts) name a DT_NEEDED library whose name
 * starts with prefix? */
LIBS_HIDDEN int exec_libs_needs(const char *path, const char *prefix);
/* env for the new image (malloc'd), or NULL when it needs nothing: LD_AUDIT and
 * LDPFUSE_LIBRARY_FDS when a library was found in a mount or an RPATH/RUNPATH names one,
 * LD_LIBRARY_PATH without its directories in a mount (LDPFUSE_LIBRARY_PATH keeps the
 * caller's, put back by exec_libs_adopt) when it names one. */
LIBS_HIDDEN char **exec_libs_env(struct exec_libs *l, char *const env[]);
LIBS_HIDDEN void exec_libs_done(struct exec_libs *l);
/* env with LD_LIBRARY_PATH's directories in a mount left out (ld.so is given the rest) and
 * LDPFUSE_LIBRARY_PATH= the caller's, for exec_libs_adopt to put back: written into out
 * (room for env's entries + 3) and buf (exec_libs_strip_room(env) bytes); env itself when
 * it has no LD_LIBRARY_PATH. No allocation: a vfork child's exec uses it. */
LIBS_HIDDEN size_t exec_libs_strip_room(char *const env[]);
LIBS_HIDDEN char **exec_libs_strip(char *const env[], char **out, char *buf);
/* The new image's side (process_init): close the fds, take the variables out, put
 * LD_LIBRARY_PATH back. */
LIBS_HIDDEN void exec_libs_adopt(void);
/* dlopen.c: a real fd (close-on-exec) that holds the bytes of the mount file at vp */
LIBS_HIDDEN int loadable_fd(const struct vpath *vp);

#endif
