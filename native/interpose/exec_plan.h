/* What the kernel would run for a program stored in a mount (exec_plan.c). */
#ifndef LDPFUSE_EXEC_PLAN_H
#define LDPFUSE_EXEC_PLAN_H

#define EXEC_LINE_MAX 256       /* the kernel's BINPRM_BUF_SIZE: what it reads of a #! line */
#define EXEC_SCRIPTS_MAX 5      /* #! files in one exec: the 6th is ELOOP (measured, Linux 6.18) */

struct exec_plan {
    int fd;             /* >= 0: the kernel fd (close-on-exec) of the executable to run */
    const char *path;   /* fd < 0: the interpreter to run by path, outside every mount */
    const char *program;    /* fd >= 0: the path in the mount the fd stands for */
    char **argv;        /* the argv to run it with (the caller's, or built here) */
    char *built[EXEC_SCRIPTS_MAX];                  /* argv arrays built here */
    int nbuilt;
    char lines[EXEC_SCRIPTS_MAX][EXEC_LINE_MAX + 1];    /* the #! lines argv points into */
};

#define EXEC_HIDDEN __attribute__((visibility("hidden")))   /* not a libc name: not exported */
/* path names a file in a mount: follow its #! lines as the kernel does. 0, or -1 and
 * errno as execve would fail. */
EXEC_HIDDEN int exec_plan_make(struct exec_plan *p, const char *path, char *const argv[]);
EXEC_HIDDEN void exec_plan_done(struct exec_plan *p);
/* Does line (n bytes read from the start of a file) start a #! line the kernel takes?
 * 1 with *name and *arg (NULL when none) pointing into line, which is cut; 0 if it is
 * not a #! line; -1 (ENOEXEC) if it is one the kernel refuses. */
EXEC_HIDDEN int exec_shebang(char *line, size_t n, char **name, char **arg);

#endif
