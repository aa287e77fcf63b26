/*
 * Every operation runs with the caller's fsuid, fsgid and groups, set on the thread that
 * runs it (raw system calls: glibc's setgroups would change every thread). Who the caller
 * is comes from the kernel (SO_PEERCRED, SO_PEERGROUPS at connect), never from what the
 * client writes; only a client that connected as root, who may become anyone anyway, is
 * taken at its word for the identity it has now (a root process that dropped to a user
 * after it connected), its groups read from /proc.
 */
#include "server.h"
#include <stdio.h>
#include <sys/syscall.h>

int switch_creds;            /* the server may (it runs as root) */
uid_t own_uid;
gid_t own_gid;
static __thread int t_switched;
static __thread uid_t t_uid;
static __thread gid_t t_gid;
static __thread int t_ngroups = -1;
static __thread gid_t *t_groups;

void become(uid_t uid, gid_t gid, int ngroups, const gid_t *groups)
{
    if (!switch_creds)
        return;
    if (t_switched && t_uid == uid && t_gid == gid && t_ngroups == ngroups &&
        (ngroups == 0 || memcmp(t_groups, groups, (size_t)ngroups * sizeof *groups) == 0))
        return;
    syscall(SYS_setgroups, (size_t)ngroups, groups);
    syscall(SYS_setfsgid, gid);
    syscall(SYS_setfsuid, uid);
    gid_t *copy = ngroups ? malloc((size_t)ngroups * sizeof *groups) : NULL;
    if (ngroups && copy == NULL) {
        t_switched = 0;
        return;
    }
    if (copy)
        memcpy(copy, groups, (size_t)ngroups * sizeof *groups);
    free(t_groups);
    t_groups = copy;
    t_uid = uid;
    t_gid = gid;
    t_ngroups = ngroups;
    t_switched = 1;
}

/* The launcher's own rights again (destroy, at the end). */
void become_self(void)
{
    if (switch_creds && t_switched) {
        gid_t g[1] = { own_gid };
        become(own_uid, own_gid, 0, g);
    }
}

/* Supplementary groups of a process that changed identity since it connected (a root
 * process dropping to another user): /proc says. */
int proc_groups(pid_t pid, gid_t **out)
{
    char buf[8192];
    if (!read_proc(pid, "status", buf, sizeof buf))
        return 0;
    char *g = strstr(buf, "\nGroups:");
    if (g == NULL)
        return 0;
    g += 8;
    int cap = 16, k = 0;
    gid_t *v = malloc(cap * sizeof *v);
    while (v && *g && *g != '\n') {
        char *end;
        unsigned long x = strtoul(g, &end, 10);
        if (end == g) {
            g++;
            continue;
        }
        if (k == cap) {
            gid_t *nv = realloc(v, (size_t)(cap *= 2) * sizeof *v);
            if (nv == NULL)
                break;
            v = nv;
        }
        v[k++] = (gid_t)x;
        g = end;
    }
    *out = v;
    return v ? k : 0;
}

/* Who this request runs as: the kernel's word for the connection; a root client (who may
 * become anyone anyway) is taken at its word for the identity it has now. */
void request_identity(struct client *cl, const struct wire_req *rq)
{
    int peer = cl->uid != 0 || (rq->uid == cl->uid && rq->gid == cl->gid);
    if (!peer && cl->as_proc && cl->as_uid == rq->uid && cl->as_gid == rq->gid)
        return;
    if (cl->as_proc)
        free(cl->as_groups);
    cl->as_proc = !peer;
    if (peer) {
        cl->as_uid = cl->uid;
        cl->as_gid = cl->gid;
        cl->as_ngroups = cl->ngroups;
        cl->as_groups = cl->groups;
    } else {
        cl->as_groups = NULL;
        cl->as_ngroups = proc_groups(cl->pid, &cl->as_groups);
        cl->as_uid = rq->uid;
        cl->as_gid = rq->gid;
    }
}

