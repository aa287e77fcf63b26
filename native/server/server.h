/*
 * The file system process of the shared mode (and of the embedded mode's launcher, for the
 * processes that cannot run Python themselves): answers backend/wire.h requests from every
 * thread of every process of the command tree by calling the embedded backend's
 * operations, the same code (and so the same conversions and error rules) as the embedded
 * mode uses in-process.
 *
 * The server is a service and its trust boundary is the connection (docs/security.md).
 * One file per duty, in the order a request meets them:
 *
 *   peers.c        who may connect: the accept thread, the run's secret, the uid rule
 *                  (allow_other, allow_root), connections per uid, the region handed over
 *   request.c      what a request may say: the header read once out of shared memory,
 *                  every field checked against the connection (mount, sizes, offsets,
 *                  names), the answer written back without blocking the serving thread
 *   handles.c      the handles a process was given (unguessable tokens, never the file
 *                  system's own fh), released when it ends
 *   permissions.c  -o default_permissions: the caller's rights checked from getattr
 *   credentials.c  each request runs with its caller's uid, gid, groups and capabilities
 *   dispatch.c     the call of the class's method for one checked request
 *   page_caches.c  the memfd page caches of cached files, one per file, for every client
 *   fifos.c        FIFOs of the file system, real FIFOs in a private directory
 *   coherence.c    the table of change counters every client maps read-only
 *   workers.c      -o workers=N: the class's calls sent to N instances (worker processes),
 *                  each open file's to the instance that opened it
 *   serve.c        the threads: the FS thread's loop (a class that is not thread_safe),
 *                  a thread per connection (thread_safe), the watcher, Python entry points
 *
 * Nothing a client writes into shared memory is trusted: the header is copied out of the
 * region once, and the tables every client maps (coherence.h) are sealed so that only the
 * server can write them.
 */
#ifndef LDPFUSE_SERVER_H
#define LDPFUSE_SERVER_H
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "../backend/backend.h"
#include "../backend/coherence.h"
#include "../backend/wire.h"
#include "../backend/channel.h"
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/ioctl.h>
#include <sys/types.h>
#include <unistd.h>

extern struct backend_ops *fs_ops;      /* the embedded backend's operations */
extern int serialise;                   /* one FS thread: a class that is not thread_safe */
extern int fs_nmounts;                  /* mounts the requests may name: 0 .. fs_nmounts - 1 */

/* ---- who may connect (peers.c) */
struct peer_policy {
    uid_t owner;            /* the launcher's uid: always served */
    int allow_other;        /* -o allow_other: every uid of the command */
    int allow_root;         /* -o allow_root: root's processes too */
    int default_permissions;    /* -o default_permissions (permissions.c) */
    unsigned char secret[32];   /* held by the command's processes only (LDPFUSE_SECRET) */
    int max_conns_per_uid;
    int max_conns;          /* of every uid: the fds but a reserve for the server's own work */
};
extern struct peer_policy policy;
int peer_uid_allowed(uid_t uid);
/* May a process running as uid, whose open of a file has access mode flags, get the
 * file's shared page cache (writable: clients fill it themselves)? Not a reader of
 * another user than the launcher's (-o allow_other): it would write what the others read.
 * It gets a page cache of its own (vfs/pagecache.c). */
int peer_may_share_cache(uid_t uid, int flags);

struct uid_quota;

/* A process of the command and its parents up to the launcher (peers.c, in_command): pid
 * and start time (clock ticks since boot) of each, the process first. Who may use a
 * handle (handles.c): its opener and the processes below it. */
#define LINEAGE_MAX 16
struct lineage {
    int n;
    pid_t pid[LINEAGE_MAX];
    unsigned long long start[LINEAGE_MAX];
};

/* A handle a process was given (handles.c): the client knows it by `token` only. */
#define HANDLE_GRANTS 8
struct handle {
    struct handle *next;        /* in its process's list */
    struct handle *hnext;       /* in the table of tokens */
    int kind;               /* W_OPEN (a file's fh), W_OPENDIR, W_CACHE_OPEN (a cache) */
    int mnt, flags;
    uint64_t fh;            /* the file system's own (for W_CACHE_OPEN: the cache's id) */
    uint64_t token;         /* what the client holds */
    char *path;
    int live;               /* still in the table (not released) */
    int inflight;           /* requests using it now (handle_get .. handle_put) */
    struct proc *owner;     /* the process it was given to */
    pid_t pid;              /* and its pid (the owner goes before its handles are released) */
    unsigned long long start;   /* and its start time: the opener, for good (lineage) */
    int locked;             /* the class's lock (1) or flock (2) took a lock through it: let go
                               of when the process goes without closing it (handle_release) */
    int passed_fd1;         /* 1 + the server's reference to the open file description a
                               holder sent over a unix socket (W_PASS), 0: none */
    int ngrants;            /* the processes that proved they received it (W_CLAIM), and */
    pid_t grant_pid[HANDLE_GRANTS];     /* may use it as its opener's descendants do */
    unsigned long long grant_start[HANDLE_GRANTS];
    int grant_holds[HANDLE_GRANTS];     /* its fds of it not yet released (W_RELEASE) */
    int lingering;          /* its opener let go of it while a passed description of it may
                               still be in flight or held by a claimant (handles.c) */
    uint64_t linger_until;  /* CLOCK_MONOTONIC ns: no claim by then, released */
    uid_t uid;              /* the opener's identity, for a release after it has gone */
    gid_t gid;
    uint64_t caps;
};

struct proc {
    struct proc *next;
    pid_t pid;
    int conns;              /* its connections that are still open */
    uid_t uid;              /* who it last was (its handles are released as that) */
    gid_t gid;
    uint64_t caps;
    struct handle *handles;
};

struct client {
    struct client *next;    /* the FS thread's list (a class that is not thread_safe) */
    int fd;
    struct chan_region *region;
    int gone;               /* its socket closed: drop it */
    int first;              /* its first request comes on the socket, not in the region */
    int ready;              /* client_setup() has run: who it is, what it holds, watched */
    int authed;             /* it proved it holds the run's secret */
    int want_coherence;     /* its first answer brings the table of change counters */
    int sending;            /* the sender still pushes its last answer's data (request.c) */
    unsigned stats_prev_op; /* --stats: its previous request, and its time in the server */
    uint64_t stats_prev_ns;
    struct uid_quota *quota;    /* its uid's count of connections */
    struct proc *proc;
    uid_t uid;              /* SO_PEERCRED at connect: what the kernel vouches for */
    gid_t gid;
    pid_t pid;
    int ngroups;
    gid_t *groups;          /* SO_PEERGROUPS */
    uint64_t caps;          /* its effective capabilities at connect (credentials.c) */
    struct lineage line;    /* its process and parents, read at connect (peers.c) */
    uid_t as_uid;           /* who the current request runs as */
    gid_t as_gid;
    int as_ngroups;
    gid_t *as_groups;
    uint64_t as_caps;
    int as_proc;            /* as_groups is ours (from /proc), not `groups` */
    /* the request being answered (checked: request.c) */
    struct wire_req *rq;
    char *body;
    char *path, *path2, *data;
    struct handle h;        /* a copy of the handle its fh names (has_fh), path not included */
    struct handle *href;    /* that handle, referenced while the request uses it */
    char hpath[WIRE_PATH_MAX];  /* its path: what the class gets for the request's */
    /* the answer */
    int64_t r;
    uint64_t fh;
    void *out;
    size_t out_len;
    int pass_fd;
    uint64_t added;         /* the token of the handle the request handed over, or 0 */
    int added_kind, added_mnt;
    uint64_t added_cache;   /* and of the page cache an open brought along (W_CREATE_OPEN) */
    char small[sizeof(struct stat) > sizeof(struct statvfs) ? sizeof(struct stat) : sizeof(struct statvfs)];
};

extern __thread struct client *srv_current;   /* the client whose request is being answered */

/* peers.c */
int client_setup(struct client *cl);
void client_gone(struct client *cl);
void spares_fill(void);
int spares_count(void);
void *accept_thread(void *arg);
int peers_init(void);

/* request.c */
int first_ready(struct client *cl);
int first_ready_fd(int fd);
int secret_ok(const unsigned char *s);
int serve_request(struct client *cl);
void sender_forget(struct client *cl);
extern int stats_enabled;          /* --stats (LDPFUSE_STATS) */

/* handles.c */
struct proc *proc_get(pid_t pid);
struct handle *proc_put(struct proc *p);
struct handle *handle_add(struct client *cl, int kind, int mnt, const char *path, int flags, uint64_t fh);
int handle_get(int kind, int mnt, uint64_t token, const struct lineage *line, struct handle *out,
               struct handle **ref, char *path_out);
void handle_put(struct handle **ref);
void handle_quiesce(struct handle *h);
int handle_names(int mnt, uint64_t token, const struct lineage *line, const char *path, int *flags);
struct handle *handle_take(int kind, int mnt, uint64_t token, const struct lineage *line);
void handle_free(struct handle *h);
void handle_release(struct handle *h);
void handles_renamed(int mnt, const char *from, const char *to);
void release_all(struct client *cl, struct handle *handles);
void answer_dropped(struct client *cl);
void orphans_sweep(void);
struct handle *handle_let_go(int mnt, uint64_t token, const struct lineage *line, int *kept);
void lingering_sweep(int all);
int lingering_pending(void);
int orphans_pending(void);
int read_proc(pid_t pid, const char *name, char *buf, size_t size);
int handle_pass(struct client *cl, struct handle *h, int fd);
int handle_claim(struct client *cl, int fd, struct wire_claim *out, uint64_t *token, char *path_out);

/* peers.c: ppid and start time (clock ticks since boot) of a live process, from /proc */
int proc_stat(pid_t pid, pid_t *ppid, unsigned long long *start);

/* credentials.c */
extern int switch_creds;
extern uid_t own_uid;
extern gid_t own_gid;
int creds_init(void);
int become(uid_t uid, gid_t gid, int ngroups, const gid_t *groups, uint64_t caps);
void become_self(void);
void creds_now(int *switched, uid_t *uid, gid_t *gid, int *ngroups, gid_t **groups, uint64_t *caps);
uint64_t peer_caps(int fd, pid_t pid, uid_t uid);
int proc_groups(pid_t pid, gid_t **out);
void request_identity(struct client *cl, const struct wire_req *rq);

/* permissions.c (-o default_permissions) */
int perm_check(struct client *cl, int op, int mnt, const char *path, const char *path2, int64_t a, int64_t b);
int perm_may_search_dir(struct client *cl, int mnt, const char *path);

/* dispatch.c */
void do_op(struct client *cl);
void server_log(int level, const char *msg);
void server_logf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
extern const struct core_api server_core;

/* page_caches.c */
int scache_held(int mnt, const char *path);
void scache_writing(int mnt, const char *path, int delta);   /* a write through the mount begins (1), ends (-1) */
int scache_open(int mnt, const char *path, off_t size, const uint64_t *fh, int *fresh, off_t *fresh_size,
                uint64_t *id);
int scache_open_sized(int mnt, const char *path, const struct stat *st, uint64_t st_stamp, int *fresh,
                      off_t *fresh_size, uint64_t *id);
int scache_open_to_fill(int mnt, const char *path, const struct stat *st, uint64_t st_stamp, int *fresh,
                        off_t *fresh_size, uint64_t *id);
void scache_filled(uint64_t id);
void scache_noted(uint64_t id, off_t size, const struct timespec *mtime);  /* page_caches.c */
int scache_known(int mnt, const char *path);

/* ---- -o workers=N (workers.c) */
/* What an open brought of its file, for its page cache: the attributes, and a small
 * file's data whole (the instance that opened it read it in the same call). */
struct open_window {
    int have_st;
    struct stat st;         /* getattr by name, right after the open */
    ssize_t len;            /* -1: no data */
    char *data;             /* the file's first len bytes, in buf */
    char *buf;              /* malloc'ed: free() it */
};
int workers_count(void);    /* instances serving (0: the class's own, no forwarding) */
int workers_open(int mnt, const char *path, int flags, size_t data, const struct stat *known, struct open_result *res,
                 struct open_window *w);
void scache_close_id(uint64_t id);
void scache_renamed(int mnt, const char *from, const char *to);
int scache_shed(void);         /* an open met EMFILE: idle caches let go of; how many */

/* fifos.c */
int sfifo_get(int mnt, const char *path, mode_t mode, uid_t uid, gid_t gid, char *out, size_t outsz);
void sfifo_renamed(int mnt, const char *from, const char *to);
void sfifo_cleanup(void);

/* coherence.c */
extern struct coherence *coh;
extern int coh_fd;
void coh_ensure(void);
int coh_reader_fd(void);
void *shared_memfd(const char *name, size_t size, int *fd);
void coh_fs_begin(void);
void coh_fs_served(void);
void coh_written(int mnt, const char *path);
void coh_moved(int mnt, const char *path, const char *path2);
uint64_t coh_changed(const struct wire_req *rq, int op, const char *path, const char *path2, int64_t r,
                     uint64_t before);

/* serve.c */
void fs_poke(void);
void fs_client_add(struct client *cl);
void pool_start(struct client *cl);
extern int watch_ep;
extern uint64_t last_connect_ns;

#endif
