/* Libraries in a mount that a program's dynamic loader will look for (exec_libs.c). */
#ifndef LDPFUSE_EXEC_LIBS_H
#define LDPFUSE_EXEC_LIBS_H
#include <limits.h>
#include <stddef.h>

#define EXEC_LIBS_MAX 64

struct exec_libs {
    int n;
    int fd[EXEC_LIBS_MAX];          /* open across the exec, closed by the new image */
    char name[EXEC_LIBS_MAX][256];  /* the name ld.so searches for (DT_NEEDED) */
    char *path[EXEC_LIBS_MAX];      /* where it was found in the mount (malloc'd) */
    char table[EXEC_LIBS_MAX * 300 + 32];   /* LDPFUSE_LIBRARY_FDS=... */
    char audit[PATH_MAX + 16];      /* LD_AUDIT=... */
};

#define LIBS_HIDDEN __attribute__((visibility("hidden")))   /* not a libc name: not exported */
/* The program at path (fd: its bytes) is about to be exec'd with envp: find the libraries
 * its DT_NEEDED entries, and theirs, would be found in a mount. The number found. */
LIBS_HIDDEN int exec_libs_find(struct exec_libs *l, int fd, const char *path, char *const envp[]);
/* Does envp's LD_LIBRARY_PATH name a directory in a mount? */
LIBS_HIDDEN int exec_libs_path_in_mount(char *const envp[]);
/* env with LD_AUDIT and LDPFUSE_LIBRARY_FDS for the new image (malloc'd), or NULL */
LIBS_HIDDEN char **exec_libs_env(struct exec_libs *l, char *const env[]);
LIBS_HIDDEN void exec_libs_done(struct exec_libs *l);
/* The new image's side (process_init): close the fds, take the variables out. */
LIBS_HIDDEN void exec_libs_adopt(void);
/* dlopen.c: a real fd (close-on-exec) that holds the bytes of the mount file at vp */
LIBS_HIDDEN int loadable_fd(const struct vpath *vp);

#endif
