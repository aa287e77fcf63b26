/*
 * Programs stored in a mount, as the kernel would run them. The kernel never sees a mount
 * path, so what it does at exec is done here: a file starting with "#!" is a script whose
 * interpreter runs with the script's own path (so `$0`, autoconf's helper files and
 * Python's venv find what lies beside it), and an interpreter that is itself in a mount
 * is followed in turn, to the kernel's depth. The last program is either a kernel fd of
 * a file in a mount (exec'd by fd) or a path outside every mount (exec'd by path, where
 * the kernel takes over, #! lines included).
 *
 * The #! line is parsed as fs/binfmt_script.c does: at most 256 bytes are read; the
 * interpreter is the first word after "#!" (spaces and tabs skipped), the rest of the
 * line, trimmed, is one optional argument; a line without its newline in 256 bytes is cut
 * at 255, and keeps its interpreter only if a space or tab ends it before that. The new argv is the interpreter, the argument if
 * any, the script's path, then the caller's argv without its argv[0].
 */
#include "../ldpfuse.h"
#include "exec_plan.h"
#include <stdlib.h>
#include <string.h>

static int blank(char c)
{
    return c == ' ' || c == '\t';
}

int exec_shebang(char *line, size_t n, char **name, char **arg)
{
    if (n < 2 || line[0] != '#' || line[1] != '!')
        return 0;
    if (n > EXEC_LINE_MAX)
        n = EXEC_LINE_MAX;
    line[n] = '\0';
    char *end = memchr(line, '\n', n);
    if (end == NULL && n == EXEC_LINE_MAX) {
        /* cut where the kernel's buffer ends (its last byte is made the NUL): the
         * interpreter must be followed by a space, a tab or a NUL before that, or it may
         * itself be cut. A shorter file ends in the buffer's NUL padding. */
        end = line + EXEC_LINE_MAX - 1;
        char *p = line + 2;
        while (p < end && blank(*p))
            p++;
        if (p == end)
            goto refused;
        while (p < end && *p && !blank(*p))
            p++;
        if (p == end)
            goto refused;
    } else if (end == NULL) {
        end = line + n;
    }
    *end = '\0';
    while (end > line + 2 && blank(end[-1]))
        *--end = '\0';
    char *p = line + 2;
    while (blank(*p))
        p++;
    if (*p == '\0')
        goto refused;
    *name = p;
    while (*p && !blank(*p))
        p++;
    while (blank(*p))
        *p++ = '\0';
    *arg = *p ? p : NULL;
    return 1;
refused:
    errno = ENOEXEC;
    return -1;
}

/* [name, arg?, script, argv[1]...] */
static char **script_argv(struct exec_plan *p, char *name, char *arg, const char *script,
                          char *const argv[])
{
    int argc = 0;
    while (argv && argv[argc])
        argc++;
    char **out = malloc(sizeof *out * (size_t)(argc + 4));
    if (out == NULL)
        return NULL;
    p->built[p->nbuilt++] = (char *)out;
    int k = 0;
    out[k++] = name;
    if (arg)
        out[k++] = arg;
    out[k++] = (char *)script;
    for (int i = 1; i < argc; i++)
        out[k++] = argv[i];
    out[k] = NULL;
    return out;
}

int exec_plan_make(struct exec_plan *p, const char *path, char *const argv[])
{
    p->fd = -1;
    p->path = NULL;
    p->argv = (char **)argv;
    p->nbuilt = 0;
    const char *cur = path;
    for (int scripts = 0;; scripts++) {
        struct vpath vp;
        const char *target = cur;
        if (!vfs_lookup(AT_FDCWD, &target, &vp)) {
            p->path = target;   /* outside every mount: the kernel runs it */
            return 0;
        }
        if (access(cur, X_OK) < 0)
            return -1;
        /* a regular file with no execute bit at all is not run, even by root, as FUSE's
         * exec check has it (the class's access() may say yes to anything) */
        struct stat st;
        if (vfs_getattr(&vp, 1, &st) == 0 && S_ISREG(st.st_mode) && !(st.st_mode & 0111)) {
            errno = EACCES;
            return -1;
        }
        int fd = vfs_open(&vp, O_RDONLY | O_CLOEXEC, 0);
        if (fd < 0)
            return -1;
        struct vfile *v = fdtable_get(fd);
        if (v && v->kind == VF_FILE && v->pc && pcache_fill(v, 0, 0, 1) < 0) {
            int e = errno;
            close(fd);
            errno = e;
            return -1;
        }
        char line[EXEC_LINE_MAX + 1];
        ssize_t n = REAL(pread)(fd, line, EXEC_LINE_MAX, 0);
        if (n < 2 || line[0] != '#' || line[1] != '!') {
            p->fd = fd;         /* a binary (or what the kernel will refuse by fd) */
            p->program = cur;
            return 0;
        }
        close(fd);
        if (scripts == EXEC_SCRIPTS_MAX) {
            errno = ELOOP;
            return -1;
        }
        char *name, *arg;
        memcpy(p->lines[scripts], line, (size_t)n);
        if (exec_shebang(p->lines[scripts], (size_t)n, &name, &arg) < 0)
            return -1;
        p->argv = script_argv(p, name, arg, cur, p->argv);
        if (p->argv == NULL)
            return -1;
        cur = name;
    }
}

void exec_plan_done(struct exec_plan *p)
{
    int e = errno;
    if (p->fd >= 0)
        close(p->fd);
    p->fd = -1;
    for (int i = 0; i < p->nbuilt; i++)
        free(p->built[i]);
    p->nbuilt = 0;
    errno = e;
}
