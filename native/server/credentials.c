/*
 * Every operation runs as its caller, on the thread that runs it: effective (and so file
 * system) uid and gid, supplementary groups and effective capabilities are the caller's
 * for the whole call, so that nothing the class does in it (a setxattr of
 * security.capability, a chown, an open of root's file) uses a right the caller lacks,
 * with or without -o default_permissions. Raw system calls (setresuid, setresgid,
 * setgroups, capset), which change the calling thread only: glibc's wrappers change every
 * thread. The real and saved uid stay the launcher's (root): the saved one is how the
 * thread comes back, the real one keeps the caller from signalling the serving thread
 * (the kernel lets a process signal one whose real or saved uid is its own); a class must
 * therefore ask access(2) questions with effective ids (faccessat AT_EACCESS,
 * os.access(effective_ids=True)), and its permitted set (unused by file operations) stays
 * the launcher's.
 *
 * Who the caller is comes from the kernel (SO_PEERCRED, SO_PEERGROUPS at connect; its
 * capabilities from /proc/PID/status while a pidfd of the peer shows it is still the
 * process that connected), never from what the client writes; only a client that
 * connected as root, who may become anyone anyway, is taken at its word for the uid and
 * gid it has now (a root process that dropped to a user after it connected), its groups
 * and capabilities then read from /proc. Each thread remembers who it last was: a request
 * of the same caller as the one before costs no system call.
 */
#include "server.h"
#include <stdio.h>
#include <linux/capability.h>
#include <sys/syscall.h>

#ifndef SO_PEERPIDFD
#define SO_PEERPIDFD 77
#endif

int switch_creds;            /* the server may (it runs as root) */
uid_t own_uid;
gid_t own_gid;
static uint64_t own_permitted, own_inheritable;     /* the launcher's capabilities */
static __thread int t_switched;
static __thread uid_t t_uid;
static __thread gid_t t_gid;
static __thread uint64_t t_caps;
static __thread int t_ngroups = -1;
static __thread gid_t *t_groups;

/* The capability sets of process pid (0: this thread), as 64-bit masks; -1 if it has ended. */
static int capget_of(pid_t pid, uint64_t *eff, uint64_t *prm, uint64_t *inh)
{
    struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, pid };
    struct __user_cap_data_struct d[2];
    if (syscall(SYS_capget, &h, d) < 0)
        return -1;
    *eff = d[0].effective | (uint64_t)d[1].effective << 32;
    *prm = d[0].permitted | (uint64_t)d[1].permitted << 32;
    *inh = d[0].inheritable | (uint64_t)d[1].inheritable << 32;
    return 0;
}

/* This thread's effective set (within the launcher's permitted one, which stays). */
static int caps_set(uint64_t eff)
{
    struct __user_cap_header_struct h = { _LINUX_CAPABILITY_VERSION_3, 0 };
    struct __user_cap_data_struct d[2] = {
        { (uint32_t)eff, (uint32_t)own_permitted, (uint32_t)own_inheritable },
        { (uint32_t)(eff >> 32), (uint32_t)(own_permitted >> 32), (uint32_t)(own_inheritable >> 32) },
    };
    return (int)syscall(SYS_capset, &h, d);
}

/* At start: whether requests can run as their callers (the server is root), and the
 * launcher's own rights to come back to. */
int creds_init(void)
{
    uint64_t eff;
    own_uid = geteuid();
    own_gid = getegid();
    if (own_uid != 0 || capget_of(0, &eff, &own_permitted, &own_inheritable) < 0)
        return 0;
    return 1;
}

#define T_UNKNOWN ((uid_t)-2)     /* a switch failed half way: restore everything */

/* The launcher's rights again, on this thread: every change below needs them. */
static int back_to_self(void)
{
    if (!t_switched)
        return 0;
    /* a thread whose euid leaves and comes back to 0 gets its permitted set as effective;
     * one whose euid stayed 0 gets it from capset */
    if (t_uid != own_uid && syscall(SYS_setresuid, -1, own_uid, -1) < 0)
        return -1;
    if ((t_uid == T_UNKNOWN || (t_uid == own_uid && t_caps != own_permitted)) && caps_set(own_permitted) < 0)
        return -1;
    t_uid = own_uid;
    t_caps = own_permitted;
    return 0;
}

/* Run this thread as uid, gid, groups with effective capabilities caps (of those the
 * launcher has); 0, or -1 (EPERM for the request: the thread is left with no capability,
 * and the next switch starts again from the launcher's rights). */
int become(uid_t uid, gid_t gid, int ngroups, const gid_t *groups, uint64_t caps)
{
    if (!switch_creds)
        return 0;
    caps &= own_permitted;
    if (t_switched && t_uid == uid && t_gid == gid && t_caps == caps && t_ngroups == ngroups &&
        (ngroups == 0 || memcmp(t_groups, groups, (size_t)ngroups * sizeof *groups) == 0))
        return 0;
    gid_t *copy = ngroups ? malloc((size_t)ngroups * sizeof *groups) : NULL;
    if ((ngroups && copy == NULL) || back_to_self() < 0 ||
        syscall(SYS_setgroups, (size_t)ngroups, groups) < 0 ||
        syscall(SYS_setresgid, -1, gid, -1) < 0 ||
        syscall(SYS_setresuid, -1, uid, -1) < 0 ||
        /* a euid other than 0 took every effective capability; 0 kept them all */
        ((uid != 0 ? caps != 0 : caps != own_permitted) && caps_set(caps) < 0)) {
        free(copy);
        caps_set(0);
        t_switched = 1;
        t_uid = T_UNKNOWN;
        t_caps = 0;
        t_ngroups = -1;
        return -1;
    }
    if (copy)
        memcpy(copy, groups, (size_t)ngroups * sizeof *groups);
    free(t_groups);
    t_groups = copy;
    t_uid = uid;
    t_gid = gid;
    t_caps = caps;
    t_ngroups = ngroups;
    t_switched = 1;
    return 0;
}

/* The launcher's own rights again (destroy, at the end). */
void become_self(void)
{
    if (switch_creds && t_switched) {
        gid_t g[1] = { own_gid };
        become(own_uid, own_gid, 0, g, own_permitted);
    }
}

/* Who this thread runs as now (workers.c sends it along with a call): *switched 0, the
 * launcher itself. A switch that failed half way is a uid of no one, with no capability. */
void creds_now(int *switched, uid_t *uid, gid_t *gid, int *ngroups, gid_t **groups, uint64_t *caps)
{
    *switched = switch_creds && t_switched;
    *uid = t_uid;
    *gid = t_gid;
    *ngroups = t_ngroups < 0 ? 0 : t_ngroups;
    *groups = t_groups;
    *caps = t_caps;
}

/* The effective capabilities in /proc/PID/status, if its uids are all `uid` (a process
 * that is not the one we mean, its pid reused, shows its own): else none. */
static uint64_t proc_caps(pid_t pid, uid_t uid)
{
    char buf[8192];
    unsigned long r, e, s, f;
    char *p;
    if (!read_proc(pid, "status", buf, sizeof buf) || (p = strstr(buf, "\nUid:")) == NULL ||
        sscanf(p + 5, "%lu %lu %lu %lu", &r, &e, &s, &f) != 4 || e != uid || f != uid ||
        (p = strstr(buf, "\nCapEff:")) == NULL)
        return 0;
    return strtoull(p + 8, NULL, 16);
}

/* The effective capabilities of the process behind connection fd (pid, uid at connect):
 * read from /proc, and trusted only if a pidfd of the peer taken before the read shows it
 * alive after it (its pid cannot have been reused meanwhile). None if anything fails. */
uint64_t peer_caps(int fd, pid_t pid, uid_t uid)
{
    int pidfd = -1;
    socklen_t len = sizeof pidfd;
    if (getsockopt(fd, SOL_SOCKET, SO_PEERPIDFD, &pidfd, &len) < 0)
        pidfd = -1;
    uint64_t caps = proc_caps(pid, uid);
    if (pidfd >= 0) {
        /* ESRCH: it has ended, its pid may be another's (EPERM: alive, not ours to signal,
         * a server that is not root) */
        if (syscall(SYS_pidfd_send_signal, pidfd, 0, NULL, 0) < 0 && errno == ESRCH)
            caps = 0;
        close(pidfd);
    }
    return caps;
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

/* The effective capabilities the process pid has now (capget of its main thread, the
 * one glibc's capset changes with every other), within those it connected with: a
 * process may drop them while connected (a daemon before it reads untrusted input) and
 * must then be served without them; one that raises them again from its permitted set
 * is served with what it had at connect only. */
static uint64_t caps_now(pid_t pid, uint64_t at_connect, uint64_t before)
{
    uint64_t eff, prm, inh;
    if (capget_of(pid, &eff, &prm, &inh) < 0)
        return before;      /* it has ended: what it last had releases what it held */
    return eff & at_connect;
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
        /* its capabilities may have gone since (a system call a request, for clients
         * that had any) */
        cl->as_caps = cl->caps ? caps_now(cl->pid, cl->caps, cl->as_caps) : 0;
    } else {
        cl->as_groups = NULL;
        cl->as_ngroups = proc_groups(cl->pid, &cl->as_groups);
        cl->as_caps = proc_caps(cl->pid, rq->uid);
        cl->as_uid = rq->uid;
        cl->as_gid = rq->gid;
    }
}

