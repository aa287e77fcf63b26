/* The working directory as the program sees it. The kernel cannot enter a virtual
 * directory, so when the program chdirs into a mount the kernel's cwd stays where it was
 * and relative paths are resolved here against ldp_cwd. */
#include "../ldpfuse.h"
#include "../interpose/supervise.h"
#include <stdlib.h>
#include <string.h>

char *ldp_cwd;
int ldp_cwd_virtual;
int ldp_cwd_above_mount;

void cwd_set(const char *abs)
{
    char *old = ldp_cwd;
    ldp_cwd = strdup(abs);
    if (!ldp_vfork_child || old == ldp_vfork_cwd)
        free(old);
    if (ldp_vfork_child)
        ldp_vfork_cwd = ldp_cwd;    /* the parent's own is kept for it (interpose/vfork.c) */
    ldp_cwd_virtual = mount_match(abs, NULL);
    size_t al = strlen(abs);
    int above = 0;
    for (int i = 0; i < ldp_nmounts; i++) {
        const struct mount *m = &ldp_mounts[i];
        if (al == 1 || (m->len > al && strncmp(m->point, abs, al) == 0 && m->point[al] == '/'))
            above = 1;
    }
    ldp_cwd_above_mount = above;
}

void cwd_init(void)
{
    /* A virtual cwd inherited through exec (the kernel's cwd cannot hold it). */
    const char *inherited = getenv("LDPFUSE_CWD");
    char buf[PATH_MAX];
    if (REAL(getcwd)(buf, sizeof buf) == NULL)
        buf[0] = '\0';
    if (inherited && inherited[0] == '/' && mount_match(inherited, NULL) &&
        strcmp(buf, getenv("LDPFUSE_CWD_REAL") ? getenv("LDPFUSE_CWD_REAL") : "") == 0) {
        cwd_set(inherited);
        return;
    }
    char shadowed[PATH_MAX];
    if (UNLIKELY(getenv("LDPFUSE_SUPERVISOR") != NULL) && supervise_cwd_inherited(shadowed, sizeof shadowed) &&
        mount_match(shadowed, NULL)) {
        cwd_set(shadowed);
        return;
    }
    if (buf[0] == '/')
        cwd_set(buf);
}
