/*
 * posix_spawn file actions that open a path in a mount. glibc runs the actions in the
 * child, between its clone and its execve, with private system calls that no wrapper
 * sees. So the opens that name a mount are done here, in the parent, before the spawn:
 * each becomes a dup2 of the fd opened here onto the fd the action named, in a copy of the
 * program's actions, at the same place in the sequence. The fds opened here are close-on-
 * exec and closed after the spawn; the child's copies are described to its ldpfuse by
 * number (LDPFUSE_FDS), as fds inherited through exec are.
 *
 * glibc keeps the actions in a private array (spawn_int.h); its layout is read here, for
 * glibc 2.34 to 2.36 (checked by the test of posix_spawn's file actions).
 * An open whose relative path follows an fchdir action, and a chdir action into a mount,
 * are left to the child (ENOENT there, as before).
 */
#include "../ldpfuse.h"
#include "spawn_plan.h"
#include <stdlib.h>
#include <string.h>

/* glibc's struct __spawn_action */
struct glibc_spawn_action {
    enum { DO_CLOSE, DO_DUP2, DO_OPEN, DO_CHDIR, DO_FCHDIR, DO_CLOSEFROM, DO_TCSETPGRP } tag;
    union {
        struct { int fd; } close_action;
        struct { int fd; int newfd; } dup2_action;
        struct { int fd; char *path; int oflag; mode_t mode; } open_action;
        struct { char *path; } chdir_action;
        struct { int fd; } fchdir_action;
        struct { int from; } closefrom_action;
        struct { int fd; } setpgrp_action;
    } action;
};
_Static_assert(sizeof(struct glibc_spawn_action) == 32, "glibc's spawn action layout");

int posix_spawn_file_actions_addclosefrom_np(posix_spawn_file_actions_t *, int);
int posix_spawn_file_actions_addtcsetpgrp_np(posix_spawn_file_actions_t *, int);

/* Does any open action name a mount? Only then is a copy made. */
static int names_a_mount(const struct glibc_spawn_action *a, int n)
{
    int moved = 0;      /* a chdir action came first: relative paths start elsewhere */
    for (int i = 0; i < n; i++) {
        if (a[i].tag == DO_CHDIR || a[i].tag == DO_FCHDIR)
            moved = 1;
        if (a[i].tag == DO_DUP2 && fdtable_get(a[i].action.dup2_action.fd) != NULL)
            return 1;   /* the child's new number must be described to it */
        if (a[i].tag != DO_OPEN)
            continue;
        const char *p = a[i].action.open_action.path;
        struct vpath vp;
        if ((p[0] != '/' && moved) || vfs_lookup(AT_FDCWD, &p, &vp))
            return 1;
    }
    return 0;
}

/* The child's fds that stand for a mount file, as the actions leave them: fd -> vfile. */
struct child_fds {
    int n;
    int fd[64];
    struct vfile *v[64];
    int touched[64];    /* fd numbers the actions replaced or closed (their parent's */
    int ntouched;       /* entry no longer describes them) */
};

static void child_set(struct child_fds *c, int fd, struct vfile *v)
{
    for (int i = 0; i < c->n; i++)
        if (c->fd[i] == fd) {
            c->fd[i] = c->fd[c->n - 1];
            c->v[i] = c->v[c->n - 1];
            c->n--;
            break;
        }
    if (c->ntouched < 64)
        c->touched[c->ntouched++] = fd;
    if (v != NULL && c->n < 64) {
        c->fd[c->n] = fd;
        c->v[c->n++] = v;
    }
}

/* What fd is in the child, as far as mounts go, at this point of the actions. */
static struct vfile *child_get(const struct child_fds *c, int fd)
{
    for (int i = 0; i < c->n; i++)
        if (c->fd[i] == fd)
            return c->v[i];
    for (int i = 0; i < c->ntouched; i++)
        if (c->touched[i] == fd)
            return NULL;
    return fdtable_get(fd);     /* inherited from the parent as it is */
}

static int records_of(struct spawn_plan *plan, const struct child_fds *c)
{
    size_t cap = 1, len = 0;
    for (int i = 0; i < c->n; i++)
        cap += strlen(c->v[i]->path) + 64;
    if (c->n == 0)
        return 0;
    plan->records = malloc(cap);
    if (plan->records == NULL)
        return -1;
    plan->records[0] = '\0';
    for (int i = 0; i < c->n; i++)
        len += (size_t)snprintf(plan->records + len, cap - len, "%s%d:%d:%d:%d:%s", len ? "\x1e" : "",
                                c->fd[i], c->v[i]->kind, c->v[i]->mnt, c->v[i]->flags, c->v[i]->path);
    return 0;
}

/* Copy one action of the program's, unchanged. */
static int copy_action(posix_spawn_file_actions_t *fa, const struct glibc_spawn_action *a)
{
    switch (a->tag) {
    case DO_CLOSE:
        return posix_spawn_file_actions_addclose(fa, a->action.close_action.fd);
    case DO_DUP2:
        return posix_spawn_file_actions_adddup2(fa, a->action.dup2_action.fd, a->action.dup2_action.newfd);
    case DO_OPEN:
        return posix_spawn_file_actions_addopen(fa, a->action.open_action.fd, a->action.open_action.path,
                                                a->action.open_action.oflag, a->action.open_action.mode);
    case DO_CHDIR:
        return posix_spawn_file_actions_addchdir_np(fa, a->action.chdir_action.path);
    case DO_FCHDIR:
        return posix_spawn_file_actions_addfchdir_np(fa, a->action.fchdir_action.fd);
    case DO_CLOSEFROM:
        return posix_spawn_file_actions_addclosefrom_np(fa, a->action.closefrom_action.from);
    case DO_TCSETPGRP:
        return posix_spawn_file_actions_addtcsetpgrp_np(fa, a->action.setpgrp_action.fd);
    }
    return EINVAL;
}

int spawn_plan_make(struct spawn_plan *plan, const posix_spawn_file_actions_t *fa)
{
    memset(plan, 0, sizeof *plan);
    if (fa == NULL || ldp_nmounts == 0 || ldp_guard || fa->__used <= 0)
        return 0;
    const struct glibc_spawn_action *a = (const struct glibc_spawn_action *)fa->__actions;
    int n = fa->__used;
    if (!names_a_mount(a, n))
        return 0;
    posix_spawn_file_actions_init(&plan->fa);
    plan->active = 1;
    /* where relative paths start, after the chdir actions so far ("" = the cwd; NULL =
     * unknown, after an fchdir) */
    char base[PATH_MAX] = "";
    int base_known = 1;
    int err = 0;
    struct child_fds child = { 0 };
    for (int i = 0; i < n && err == 0; i++) {
        if (a[i].tag == DO_DUP2)
            child_set(&child, a[i].action.dup2_action.newfd, child_get(&child, a[i].action.dup2_action.fd));
        else if (a[i].tag == DO_CLOSE)
            child_set(&child, a[i].action.close_action.fd, NULL);
        else if (a[i].tag == DO_CLOSEFROM)
            for (int k = child.n - 1; k >= 0; k--)
                if (child.fd[k] >= a[i].action.closefrom_action.from)
                    child_set(&child, child.fd[k], NULL);
        if (a[i].tag == DO_CHDIR) {
            const char *p = a[i].action.chdir_action.path;
            char next[PATH_MAX];
            if (p[0] == '/' || base[0] == '\0')
                snprintf(next, sizeof next, "%s", p);
            else
                snprintf(next, sizeof next, "%s/%s", base, p);
            memcpy(base, next, sizeof base);
        } else if (a[i].tag == DO_FCHDIR) {
            base_known = 0;
        }
        if (a[i].tag != DO_OPEN) {
            err = copy_action(&plan->fa, &a[i]);
            continue;
        }
        const char *p = a[i].action.open_action.path;
        char full[PATH_MAX];
        if (p[0] != '/' && base[0] != '\0') {
            snprintf(full, sizeof full, "%s/%s", base, p);
            p = full;
        }
        struct vpath vp;
        if ((p[0] != '/' && !base_known) || !vfs_lookup(AT_FDCWD, &p, &vp)) {
            child_set(&child, a[i].action.open_action.fd, NULL);
            err = copy_action(&plan->fa, &a[i]);
            continue;
        }
        if (plan->nopened == (int)(sizeof plan->opened / sizeof plan->opened[0])) {
            err = ENOMEM;
            break;
        }
        int fd = vfs_open(&vp, a[i].action.open_action.oflag | O_CLOEXEC, a[i].action.open_action.mode);
        if (fd < 0) {
            err = errno;        /* what posix_spawn returns when the child's open fails */
            break;
        }
        plan->opened[plan->nopened++] = fd;
        child_set(&child, a[i].action.open_action.fd, fdtable_get(fd));
        err = posix_spawn_file_actions_adddup2(&plan->fa, fd, a[i].action.open_action.fd);
    }
    if (err == 0 && records_of(plan, &child) < 0)
        err = ENOMEM;
    if (err != 0) {
        spawn_plan_done(plan);
        errno = err;
        return -1;
    }
    return 1;
}

char **spawn_plan_env(struct spawn_plan *plan, char **env)
{
    if (plan->records == NULL)
        return env;
    int n = 0;
    for (char **e = env; e && *e; e++)
        n++;
    char **out = malloc(sizeof *out * (size_t)(n + 2));
    if (out == NULL)
        return env;
    const char *had = "";
    int k = 0;
    for (char **e = env; e && *e; e++) {
        if (strncmp(*e, "LDPFUSE_FDS=", 12) == 0)
            had = *e + 12;
        else
            out[k++] = *e;
    }
    /* the program's actions come after the exec's inheritance: their records win (last) */
    size_t need = strlen(had) + strlen(plan->records) + 16;
    plan->env_fds = malloc(need);
    if (plan->env_fds == NULL) {
        free(out);
        return env;
    }
    snprintf(plan->env_fds, need, "LDPFUSE_FDS=%s%s%s", had, had[0] ? "\x1e" : "", plan->records);
    out[k++] = plan->env_fds;
    out[k] = NULL;
    plan->env = out;
    return out;
}

void spawn_plan_done(struct spawn_plan *plan)
{
    if (!plan->active)
        return;
    int e = errno;
    for (int i = 0; i < plan->nopened; i++)
        close(plan->opened[i]);
    posix_spawn_file_actions_destroy(&plan->fa);
    free(plan->records);
    free(plan->env_fds);
    free(plan->env);
    plan->active = 0;
    errno = e;
}
