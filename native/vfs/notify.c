/*
 * inotify watches on mount paths. The kernel never sees a change made through a mount, so
 * the events of a watch on a mount path are made here, and delivered through the program's
 * own inotify fd, which becomes, at its first watch on a mount path (never before: a
 * program that watches only real paths keeps the kernel's fd and pays nothing):
 *
 *   - a packet pipe (O_DIRECT) in the fd's number, with the fd's O_NONBLOCK and
 *     close-on-exec, so read, poll, select and epoll work on it; one struct inotify_event
 *     a packet, so a read of one event's room gets one whole event, as from the kernel;
 *   - the kernel's inotify fd itself, moved out of the program's way: watches on real
 *     paths are still the kernel's, and their events are passed on into the pipe;
 *   - a thread that does both: it waits on the kernel's fd, and every NOTIFY_TICK_MS looks
 *     at what the mount watches name. In the shared mode it reads the table of change
 *     counters every process maps (backend/coherence.h), and asks the file system only
 *     about a name whose counters moved; in the embedded mode, which has no such table,
 *     it asks the file system each time (getattr, and a listing for a directory).
 *
 * What changed is told from what the file system answers, before and after: a file's size
 * or mtime (IN_MODIFY), its mode, owner, links or ctime (IN_ATTRIB), its disappearance
 * (IN_DELETE_SELF, IN_IGNORED); a directory's names made (IN_CREATE), removed (IN_DELETE),
 * renamed within it, over another name too (IN_MOVED_FROM and IN_MOVED_TO with one cookie,
 * when the file system gives inode numbers), and its entries' changes (IN_MODIFY, IN_ATTRIB
 * with the name, for up to NOTIFY_KIDS_MAX entries; of a subdirectory only its mode and
 * owner, as the kernel). A name's change is told once its answer held still for a look
 * (struct settle: one write(2) is one IN_MODIFY). Opens, reads and closes are not seen
 * (IN_OPEN, IN_ACCESS, IN_CLOSE_*): docs/limitations.md.
 */
#include "../ldpfuse.h"
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/syscall.h>
#include <sys/inotify.h>

#define NOTIFY_TICK_MS 10           /* shared mode: a look at the counters */
#define NOTIFY_TICK_EMBEDDED_MS 40  /* embedded mode: a getattr per watch through the FS */
#define NOTIFY_SETTLE_MS 10         /* the next look, while a change waits to be told */
#define NOTIFY_SETTLE_MAX_MS 100    /* a file that never holds still is told this often */
#define NOTIFY_KIDS_MAX 1024        /* entries of a watched directory whose changes are told */
#define NOTIFY_KIDS_MAX_EMBEDDED 256
#define NOTIFY_WD_BASE (1 << 20)    /* mount watches' numbers: above the kernel's */
#define NOTIFY_QUEUE_MAX (16384 * 32)   /* bytes queued before IN_Q_OVERFLOW (max_queued_events) */
#define NOTIFY_ALL (IN_ALL_EVENTS)

/* A change seen but not told yet. One write(2) is seen in parts by the looks: the kernel
 * sets mtime before it copies, and the size grows page by page, so a look in between sees a
 * new mtime and the old size, and a long write many sizes; the kernel tells IN_MODIFY once,
 * when the write is done. So a change of a name's answer is told once two looks in a row
 * agree on it (the answer held still for NOTIFY_SETTLE_MS), with what changed from the last
 * answer told to this one; or, if it keeps changing, every NOTIFY_SETTLE_MAX_MS. A write
 * seen before it is done all the same (held up between the two longer than a look: its
 * inode's journal entry waits on a loaded disk; or longer than NOTIFY_SETTLE_MAX_MS) was
 * told at its new mtime; the size it reaches later, with that mtime and ctime, is the same
 * write's and is not told again (a later write has another mtime: the kernel takes a
 * fine-grained one once the last was looked at, and a coarse one has moved on since the
 * two looks). */
struct settle {
    int on;
    struct stat st;
    uint64_t stamp;
    int64_t since;          /* ms, CLOCK_MONOTONIC: when the change was first seen */
    int64_t seen;           /* ... and when the look saw st first */
    int mtime_told;         /* the last IN_MODIFY told came with a new mtime */
};

struct nkid {
    char *name;
    uint64_t ino;
    int is_dir;
    int told;               /* already told as the end of a rename */
    uint64_t stamp;         /* stamp and st: as last told (or as first seen) */
    int have_st;
    struct stat st;
    struct settle settle;
};

struct nwatch {
    struct nwatch *next;
    int wd;
    uint32_t mask;
    int mnt;
    char *path;
    int is_dir;
    struct stat st;         /* a file: as last told; a directory: as last seen */
    uint64_t stamp;         /* shared mode: coherence stamp before st was asked (0: none) */
    struct settle settle;
    struct nkid *kids;
    size_t nkids;
};

struct notify {
    struct notify *next;
    int fd;                 /* the program's number: now the pipe's read end */
    dev_t dev;              /* the pipe, to know that the number still is it */
    ino_t ino;
    int real;               /* the kernel's inotify fd, out of the program's way */
    int out;                /* the pipe's write end (non-blocking) */
    int wake;               /* an eventfd: a watch was added, or the process ends */
    pid_t pid;
    pthread_mutex_t lock;
    struct nwatch *watches;
    int next_wd;
    uint32_t cookie;
    int stop;
    int settling;           /* some change waits for its next look (struct settle) */
    char *q;                /* events not yet in the pipe, one record after another */
    size_t qlen, qcap;
    int overflow;
};

int ldp_notify_any;                 /* some fd of this process was turned (read racily) */
static struct notify *instances;
static pthread_mutex_t instances_lock = PTHREAD_MUTEX_INITIALIZER;

/* ---- the queue of events */

static void queue_raw(struct notify *n, const void *rec, size_t len)
{
    if (n->overflow)
        return;
    if (n->qlen + len > NOTIFY_QUEUE_MAX) {
        n->overflow = 1;
        return;
    }
    if (n->qlen + len > n->qcap) {
        size_t cap = n->qcap ? n->qcap * 2 : 4096;
        while (cap < n->qlen + len)
            cap *= 2;
        char *q = realloc(n->q, cap);
        if (q == NULL) {
            n->overflow = 1;
            return;
        }
        n->q = q;
        n->qcap = cap;
    }
    memcpy(n->q + n->qlen, rec, len);
    n->qlen += len;
}

/* One event as the kernel lays it out: the name NUL-padded to a multiple of the header. */
static void emit(struct notify *n, int wd, uint32_t mask, uint32_t cookie, const char *name)
{
    union {
        struct inotify_event ev;
        char bytes[sizeof(struct inotify_event) + NAME_MAX + 1 + sizeof(struct inotify_event)];
    } u;
    memset(&u, 0, sizeof u);
    size_t nl = name ? strlen(name) : 0;
    if (nl > NAME_MAX)
        return;
    uint32_t len = nl ? (uint32_t)((nl + 1 + sizeof(struct inotify_event) - 1) /
                                   sizeof(struct inotify_event) * sizeof(struct inotify_event)) : 0;
    u.ev.wd = wd;
    u.ev.mask = mask;
    u.ev.cookie = cookie;
    u.ev.len = len;
    if (nl)
        memcpy(u.ev.name, name, nl);
    queue_raw(n, &u, sizeof(struct inotify_event) + len);
}

/* Into the pipe, one event a packet, as far as it takes them. */
static void flush_queue(struct notify *n)
{
    size_t off = 0;
    while (off + sizeof(struct inotify_event) <= n->qlen) {
        struct inotify_event ev;
        memcpy(&ev, n->q + off, sizeof ev);
        size_t len = sizeof ev + ev.len;
        ssize_t w = REAL(write)(n->out, n->q + off, len);
        if (w < 0 && errno == EINTR)
            continue;
        if (w != (ssize_t)len)
            break;
        off += len;
    }
    if (off) {
        memmove(n->q, n->q + off, n->qlen - off);
        n->qlen -= off;
    }
    if (n->qlen == 0 && n->overflow) {
        struct inotify_event ev = { .wd = -1, .mask = IN_Q_OVERFLOW };
        if (REAL(write)(n->out, &ev, sizeof ev) == (ssize_t)sizeof ev)
            n->overflow = 0;
    }
}

/* ---- what the file system says about a watched name */

static int kid_path(const struct nwatch *w, const char *name, char *out, size_t size)
{
    int r = snprintf(out, size, "%s%s%s", w->path, strcmp(w->path, "/") ? "/" : "", name);
    return r > 0 && (size_t)r < size ? 0 : -1;
}

static int fresh_getattr(struct backend_ops *be, int mnt, const char *path, struct stat *st)
{
    return be->getattr(mnt, path, NULL, st);
}

static int kids_max(struct backend_ops *be)
{
    return be->stamp ? NOTIFY_KIDS_MAX : NOTIFY_KIDS_MAX_EMBEDDED;
}

static int wants_kid_attrs(const struct nwatch *w)
{
    return (w->mask & (IN_MODIFY | IN_ATTRIB)) != 0;
}

static void kids_free(struct nkid *k, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(k[i].name);
    free(k);
}

/* The directory's entries now (not "." and ".."), with their stamps and, where wanted,
 * their attributes. -errno if it cannot be listed. */
static int list_kids(struct backend_ops *be, struct nwatch *w, struct nkid **out, size_t *nout)
{
    uint64_t fh = 0;
    struct dirlist l = { 0 };
    int r = be->opendir(w->mnt, w->path, &fh);
    if (r < 0)
        return r;
    r = be->readdir(w->mnt, w->path, fh, &l);
    be->releasedir(w->mnt, w->path, fh);
    if (r < 0) {
        dirlist_free(&l);
        return r;
    }
    struct nkid *k = calloc(l.n ? l.n : 1, sizeof *k);
    size_t n = 0;
    if (k == NULL) {
        dirlist_free(&l);
        return -ENOMEM;
    }
    int attrs = wants_kid_attrs(w);
    for (size_t i = 0; i < l.n; i++) {
        const char *name = l.names + l.ents[i].name_off;
        if (!strcmp(name, ".") || !strcmp(name, ".."))
            continue;
        struct nkid *c = &k[n];
        if ((c->name = strdup(name)) == NULL)
            break;
        c->ino = l.ents[i].ino;
        c->is_dir = l.ents[i].type == DT_DIR;
        char p[VPATH_MAX];
        if ((attrs || c->ino == 0 || l.ents[i].type == DT_UNKNOWN) && (int)n < kids_max(be) &&
            kid_path(w, name, p, sizeof p) == 0) {
            c->stamp = be->stamp ? be->stamp(w->mnt, p) : 0;
            if (fresh_getattr(be, w->mnt, p, &c->st) == 0) {
                c->have_st = 1;
                if (c->ino == 0)
                    c->ino = c->st.st_ino;
                c->is_dir = S_ISDIR(c->st.st_mode);
            }
        }
        n++;
    }
    dirlist_free(&l);
    *out = k;
    *nout = n;
    return 0;
}

static int watch_snapshot(struct backend_ops *be, struct nwatch *w)
{
    w->stamp = be->stamp ? be->stamp(w->mnt, w->path) : 0;
    int r = fresh_getattr(be, w->mnt, w->path, &w->st);
    if (r < 0)
        return r;
    w->is_dir = S_ISDIR(w->st.st_mode);
    if (w->is_dir && (w->mask & (IN_CREATE | IN_DELETE | IN_MOVE | IN_MODIFY | IN_ATTRIB)))
        list_kids(be, w, &w->kids, &w->nkids);     /* none: every entry is new next time */
    return 0;
}

static int content_changed(const struct stat *a, const struct stat *b)
{
    return a->st_size != b->st_size || a->st_mtim.tv_sec != b->st_mtim.tv_sec ||
           a->st_mtim.tv_nsec != b->st_mtim.tv_nsec;
}

static int attrs_changed(const struct stat *a, const struct stat *b)
{
    return a->st_mode != b->st_mode || a->st_uid != b->st_uid || a->st_gid != b->st_gid ||
           a->st_nlink != b->st_nlink || a->st_ctim.tv_sec != b->st_ctim.tv_sec ||
           a->st_ctim.tv_nsec != b->st_ctim.tv_nsec;
}

static int same_answer(const struct stat *a, const struct stat *b)
{
    return !content_changed(a, b) && !attrs_changed(a, b);
}

static int owner_or_mode_changed(const struct stat *a, const struct stat *b)
{
    return a->st_mode != b->st_mode || a->st_uid != b->st_uid || a->st_gid != b->st_gid;
}

static int64_t now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000 + t.tv_nsec / 1000000;
}

/* A look answered (st, stamp), not what was told last: 1 if the change is to be told now
 * (struct settle), 0 to wait for the next look. */
static int settled(struct settle *s, const struct stat *st, uint64_t stamp)
{
    int64_t now = now_ms();
    if (s->on && s->stamp == stamp && same_answer(&s->st, st)) {
        /* a look sooner than a tick (the thread woke for a kernel event) waits */
        if (now - s->seen < NOTIFY_SETTLE_MS - 1 && now - s->since < NOTIFY_SETTLE_MAX_MS)
            return 0;
        s->on = 0;
        return 1;
    }
    if (!s->on) {
        s->on = 1;
        s->since = now;
    }
    s->seen = now;
    s->st = *st;
    s->stamp = stamp;
    if (now - s->since >= NOTIFY_SETTLE_MAX_MS) {
        s->on = 0;
        return 1;
    }
    return 0;
}

/* What a name's change from the answer told (a, as) to the settled one (b, bs) is told as,
 * as the kernel would: IN_MODIFY for its data (size, mtime; in the shared mode a write
 * through the mount that changed neither, on a file system that keeps no mtime (it answers
 * 0), still moved the counter; where there is an mtime, the counter also moves for what
 * changes nothing, a rename onto itself), IN_ATTRIB for its attributes (beside
 * IN_MODIFY only for what a write does not change). A directory's own entries changing is no news to its parent's watch: only
 * its mode and owner are. */
static uint32_t change_of(struct backend_ops *be, struct settle *s, const struct stat *a,
                          uint64_t as, const struct stat *b, uint64_t bs)
{
    int same_times = a->st_mtim.tv_sec == b->st_mtim.tv_sec && a->st_mtim.tv_nsec == b->st_mtim.tv_nsec &&
                     a->st_ctim.tv_sec == b->st_ctim.tv_sec && a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
    if (s->mtime_told && as == bs && same_times && !owner_or_mode_changed(a, b) &&
        a->st_nlink == b->st_nlink)
        return 0;           /* the size of a write told at its mtime (struct settle) */
    s->mtime_told = S_ISREG(b->st_mode) &&
                    (a->st_mtim.tv_sec != b->st_mtim.tv_sec || a->st_mtim.tv_nsec != b->st_mtim.tv_nsec);
    if (S_ISDIR(b->st_mode))
        return owner_or_mode_changed(a, b) ? IN_ATTRIB | IN_ISDIR : 0;
    int no_mtime = b->st_mtim.tv_sec == 0 && b->st_mtim.tv_nsec == 0;
    if (content_changed(a, b) || (be->stamp && as != bs && !attrs_changed(a, b) && no_mtime))
        return IN_MODIFY | (owner_or_mode_changed(a, b) || a->st_nlink != b->st_nlink ? IN_ATTRIB : 0);
    return attrs_changed(a, b) ? IN_ATTRIB : 0;
}

/* One event for the watch, if its mask asks for it; 1 if the watch is gone (IN_ONESHOT). */
static int tell(struct notify *n, struct nwatch *w, uint32_t what, uint32_t cookie, const char *name)
{
    uint32_t ev = what & ~IN_ISDIR;
    if (!(w->mask & ev))
        return 0;
    emit(n, w->wd, what, cookie, name);
    if (w->mask & IN_ONESHOT) {
        emit(n, w->wd, IN_IGNORED, 0, NULL);
        return 1;
    }
    return 0;
}

/* The events of change_of(): IN_MODIFY first. 1: the watch is gone. */
static int tell_change(struct notify *n, struct nwatch *w, uint32_t what, const char *name)
{
    uint32_t dir = what & IN_ISDIR;
    return ((what & IN_MODIFY) && tell(n, w, IN_MODIFY | dir, 0, name)) ||
           ((what & IN_ATTRIB) && tell(n, w, IN_ATTRIB | dir, 0, name));
}

static struct nkid *kid_find(struct nkid *k, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (!strcmp(k[i].name, name))
            return &k[i];
    return NULL;
}

/* Is the entry of the same name another file now (both inode numbers known)? */
static int other_file(const struct nkid *then, const struct nkid *now)
{
    return then->ino && now->ino && then->ino != now->ino;
}

/* Is the file now under a name one that left another name of the directory (a rename over
 * the name: the file it replaces is not told as removed)? */
static int moved_in(const struct nwatch *w, const struct nkid *c, struct nkid *now, size_t nnow)
{
    for (size_t i = 0; c->ino && i < w->nkids; i++) {
        const struct nkid *k = &w->kids[i];
        if (k->ino == c->ino && strcmp(k->name, c->name)) {
            struct nkid *there = kid_find(now, nnow, k->name);
            if (!there || other_file(k, there))
                return 1;
        }
    }
    return 0;
}

/* The directory's entries then and now, told as events. 1: the watch is gone. now becomes
 * the watch's entries: an entry whose change is not told yet keeps the answer last told. */
static int kids_compare(struct notify *n, struct backend_ops *be, struct nwatch *w, struct nkid *now,
                        size_t nnow)
{
    /* names whose file left them: removed, or renamed to a name that is new or was
     * another file's (a rename over it: the kernel tells no removal of that one) */
    for (size_t i = 0; i < w->nkids; i++) {
        struct nkid *old = &w->kids[i], *same = kid_find(now, nnow, old->name);
        if (same && (!other_file(old, same) || moved_in(w, same, now, nnow)))
            continue;
        uint32_t dir = old->is_dir ? IN_ISDIR : 0;
        struct nkid *moved = NULL;
        for (size_t j = 0; old->ino && j < nnow && !moved; j++) {
            struct nkid *was = kid_find(w->kids, w->nkids, now[j].name);
            if (now[j].ino == old->ino && &now[j] != same && !now[j].told && (!was || other_file(was, &now[j])))
                moved = &now[j];
        }
        if (moved) {
            uint32_t cookie = ++n->cookie;
            if (tell(n, w, IN_MOVED_FROM | dir, cookie, old->name) ||
                tell(n, w, IN_MOVED_TO | dir, cookie, moved->name))
                return 1;
            moved->told = 1;        /* not a creation below */
        } else if (tell(n, w, IN_DELETE | dir, 0, old->name)) {
            return 1;
        }
    }
    for (size_t j = 0; j < nnow; j++) {
        struct nkid *c = &now[j];
        struct nkid *old = kid_find(w->kids, w->nkids, c->name);
        if (old && other_file(old, c))
            old = NULL;
        if (old == NULL) {
            if (c->told)
                continue;
            if (tell(n, w, IN_CREATE | (c->is_dir ? IN_ISDIR : 0), 0, c->name))
                return 1;
            /* made and written since the last look: the kernel would have told both; the
             * write is told as a change from empty, once it holds still */
            if (c->have_st && S_ISREG(c->st.st_mode) && c->st.st_size > 0) {
                int64_t now = now_ms();
                c->settle = (struct settle){ .on = 1, .st = c->st, .stamp = c->stamp, .since = now, .seen = now };
                c->st.st_size = 0;
            }
            continue;
        }
        c->settle = old->settle;
        if (!c->have_st || !old->have_st) {
            c->settle.on = 0;
            continue;
        }
        /* the counter has not moved: nothing changed since the answer told, but the
         * write of a file new at the last look, which waits to be told */
        int moved = be->stamp ? c->stamp != old->stamp : 0;
        if ((be->stamp && !moved && c->stamp && !c->settle.on) ||
            (!moved && same_answer(&old->st, &c->st))) {
            c->settle.on = 0;
            c->st = old->st;
            continue;
        }
        if (!settled(&c->settle, &c->st, c->stamp)) {
            c->st = old->st;        /* still the answer told */
            c->stamp = old->stamp;
            continue;
        }
        if (tell_change(n, w, change_of(be, &c->settle, &old->st, old->stamp, &c->st, c->stamp), c->name))
            return 1;
    }
    return 0;
}

static int watch_settling(const struct nwatch *w)
{
    for (size_t i = 0; i < w->nkids; i++)
        if (w->kids[i].settle.on)
            return 1;
    return w->settle.on;
}

/* Has anything the watch depends on moved since its snapshot? (shared mode: the table) */
static int watch_moved(struct backend_ops *be, struct nwatch *w)
{
    if (!be->stamp || w->stamp == 0 || watch_settling(w))
        return 1;
    if (be->stamp(w->mnt, w->path) != w->stamp)
        return 1;
    char p[VPATH_MAX];
    for (size_t i = 0; i < w->nkids; i++)
        if (w->kids[i].stamp && kid_path(w, w->kids[i].name, p, sizeof p) == 0 &&
            be->stamp(w->mnt, p) != w->kids[i].stamp)
            return 1;
    return 0;
}

/* Look at one watch again and tell what changed. 1: the watch is gone (removed by it). */
static int watch_check(struct notify *n, struct backend_ops *be, struct nwatch *w)
{
    if (!watch_moved(be, w))
        return 0;
    struct nwatch now = *w;
    now.kids = NULL;
    now.nkids = 0;
    uint64_t stamp = be->stamp ? be->stamp(w->mnt, w->path) : 0;
    int r = fresh_getattr(be, w->mnt, w->path, &now.st);
    if (r == -ENOENT || r == -ENOTDIR || (r == 0 && S_ISDIR(now.st.st_mode) != w->is_dir)) {
        if (!be->stamp)
            attrcache_invalidate();
        if (w->mask & IN_DELETE_SELF)
            emit(n, w->wd, IN_DELETE_SELF, 0, NULL);
        emit(n, w->wd, IN_IGNORED, 0, NULL);
        return 1;
    }
    if (r < 0)
        return 0;       /* the file system failed: ask again next time */
    int gone = 0;
    size_t queued_before = n->qlen;
    if (w->is_dir) {
        if (w->mask & (IN_CREATE | IN_DELETE | IN_MOVE | IN_MODIFY | IN_ATTRIB)) {
            if (list_kids(be, &now, &now.kids, &now.nkids) < 0)
                return 0;
            gone = kids_compare(n, be, w, now.kids, now.nkids);
        }
        if (!gone && attrs_changed(&w->st, &now.st) && (w->mask & IN_ATTRIB) &&
            (w->st.st_mode != now.st.st_mode || w->st.st_uid != now.st.st_uid || w->st.st_gid != now.st.st_gid))
            gone = tell(n, w, IN_ATTRIB | IN_ISDIR, 0, NULL);
    } else {
        if (same_answer(&w->st, &now.st) && !(be->stamp && stamp != w->stamp)) {
            w->settle.on = 0;
        } else if (settled(&w->settle, &now.st, stamp)) {
            gone = tell_change(n, w, change_of(be, &w->settle, &w->st, w->stamp, &now.st, stamp), NULL);
            w->st = now.st;
            w->stamp = stamp;
        }
    }
    /* the embedded mode's caches hear only of this process's own changes: what is told
     * here was made by another, and the program will look (fstat, a new listing) */
    if (!be->stamp && n->qlen != queued_before)
        attrcache_invalidate();
    kids_free(w->kids, w->nkids);
    w->kids = now.kids;
    w->nkids = now.nkids;
    if (w->is_dir) {
        w->st = now.st;
        w->stamp = stamp;
    }
    return gone;
}

static void watch_free(struct nwatch *w)
{
    kids_free(w->kids, w->nkids);
    free(w->path);
    free(w);
}

/* ---- the thread */

static void instance_remove(struct notify *n)
{
    pthread_mutex_lock(&instances_lock);
    for (struct notify **pp = &instances; *pp; pp = &(*pp)->next)
        if (*pp == n) {
            *pp = n->next;
            break;
        }
    pthread_mutex_unlock(&instances_lock);
}

static void *notify_thread(void *arg)
{
    struct notify *n = arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    ldp_guard = 1;          /* its own I/O never enters a mount */
    char buf[65536] __attribute__((aligned(8)));
    for (;;) {
        pthread_mutex_lock(&n->lock);
        int mount_watches = n->watches != NULL, queued = n->qlen > 0 || n->overflow, stop = n->stop;
        int settling = n->settling;
        pthread_mutex_unlock(&n->lock);
        if (stop)
            return NULL;
        struct backend_ops *be = mount_watches ? backend_get() : NULL;
        struct pollfd p[3] = {
            { .fd = queued ? -1 : n->real, .events = POLLIN },
            { .fd = n->out, .events = queued ? POLLOUT : 0 },
            { .fd = n->wake, .events = POLLIN },
        };
        int tick = be && be->stamp ? NOTIFY_TICK_MS : NOTIFY_TICK_EMBEDDED_MS;
        if (settling && tick > NOTIFY_SETTLE_MS)
            tick = NOTIFY_SETTLE_MS;
        int r = poll(p, 3, mount_watches ? tick : -1);
        if (r < 0 && errno != EINTR)
            break;
        if (p[1].revents & (POLLERR | POLLHUP | POLLNVAL))
            break;          /* the program closed every copy of its fd */
        if (p[2].revents & POLLIN) {
            uint64_t v;
            (void)!REAL(read)(n->wake, &v, sizeof v);
        }
        pthread_mutex_lock(&n->lock);
        if (n->stop) {
            pthread_mutex_unlock(&n->lock);
            return NULL;
        }
        if (p[0].revents & POLLIN) {
            ssize_t got = REAL(read)(n->real, buf, sizeof buf);
            for (ssize_t off = 0; got > 0 && off + (ssize_t)sizeof(struct inotify_event) <= got;) {
                struct inotify_event ev;
                memcpy(&ev, buf + off, sizeof ev);
                queue_raw(n, buf + off, sizeof ev + ev.len);
                off += (ssize_t)(sizeof ev + ev.len);
            }
        }
        if (be) {
            n->settling = 0;
            for (struct nwatch **pp = &n->watches; *pp;) {
                struct nwatch *w = *pp;
                if (watch_check(n, be, w)) {
                    *pp = w->next;
                    watch_free(w);
                } else {
                    n->settling |= watch_settling(w);
                    pp = &w->next;
                }
            }
        }
        flush_queue(n);
        pthread_mutex_unlock(&n->lock);
    }
    /* the program's fd is closed everywhere: nothing can read these events any more */
    instance_remove(n);
    pthread_mutex_lock(&n->lock);
    REAL(close)(n->real);
    REAL(close)(n->out);
    REAL(close)(n->wake);
    while (n->watches) {
        struct nwatch *w = n->watches;
        n->watches = w->next;
        watch_free(w);
    }
    pthread_mutex_unlock(&n->lock);
    free(n->q);
    free(n);
    return NULL;
}

/* ---- the program's inotify fd */

/* The instance the program's fd is, if it is one (the number may have been closed and
 * reused since: the pipe's identity is checked). */
static struct notify *instance_of(int fd)
{
    struct notify *found = NULL;
    pthread_mutex_lock(&instances_lock);
    for (struct notify *n = instances; n; n = n->next)
        if (n->fd == fd && n->pid == getpid())
            found = n;
    pthread_mutex_unlock(&instances_lock);
    struct stat st;
    if (found && (REAL(fstat)(fd, &st) < 0 || st.st_dev != found->dev || st.st_ino != found->ino))
        return NULL;
    return found;
}

int notify_real_fd(int fd)
{
    struct notify *n = instance_of(fd);
    return n ? n->real : fd;
}

static int is_inotify_fd(int fd)
{
    char link[64], target[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t l = REAL(readlink)(link, target, sizeof target - 1);
    if (l < 0)
        return -1;
    target[l] = '\0';
    return strcmp(target, "anon_inode:inotify") == 0;
}

/* The epoll sets that hold the program's fd (the kernel names them in /proc/self/fdinfo):
 * their entries are on the kernel's inotify file, which the fd stops being; each is moved
 * onto the pipe with its events and data (a program that made its epoll set before its
 * first watch on a mount path: sd-event, many C event loops). At most max of them. */
struct ep_entry {
    int epfd;
    uint32_t events;
    uint64_t data;
};

static int epoll_entries(int fd, struct ep_entry *out, int max)
{
    int dir = REAL(open)("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dir < 0)
        return 0;
    int n = 0;
    char buf[4096] __attribute__((aligned(8)));
    long got;
    while (n < max && (got = syscall(SYS_getdents64, dir, buf, sizeof buf)) > 0) {
        for (long off = 0; off < got && n < max;) {
            struct dirent64 *d = (struct dirent64 *)(buf + off);
            off += d->d_reclen;
            char *end;
            long e = strtol(d->d_name, &end, 10);
            if (*end || end == d->d_name || e == dir || e == fd)
                continue;
            char link[64], target[64];
            snprintf(link, sizeof link, "/proc/self/fd/%ld", e);
            ssize_t l = REAL(readlink)(link, target, sizeof target - 1);
            if (l < 0)
                continue;
            target[l] = '\0';
            if (strcmp(target, "anon_inode:[eventpoll]") != 0)
                continue;
            char info[64], text[8192];
            snprintf(info, sizeof info, "/proc/self/fdinfo/%ld", e);
            int f = REAL(open)(info, O_RDONLY | O_CLOEXEC);
            if (f < 0)
                continue;
            ssize_t tl = REAL(read)(f, text, sizeof text - 1);
            REAL(close)(f);
            if (tl <= 0)
                continue;
            text[tl] = '\0';
            for (char *line = strstr(text, "tfd:"); line && n < max; line = strstr(line + 4, "tfd:")) {
                int tfd;
                unsigned events;
                unsigned long long data;
                if (sscanf(line, "tfd: %d events: %x data: %llx", &tfd, &events, &data) == 3 && tfd == fd)
                    out[n++] = (struct ep_entry){ (int)e, events, data };
            }
        }
    }
    REAL(close)(dir);
    return n;
}

/* Turn the program's inotify fd into a pipe fed by a thread (the comment at the top). */
static struct notify *instance_make(int fd)
{
    int fl = REAL(fcntl)(fd, F_GETFL), fdfl = REAL(fcntl)(fd, F_GETFD);
    if (fl < 0 || fdfl < 0)
        return NULL;
    struct notify *n = calloc(1, sizeof *n);
    int pp[2] = { -1, -1 };
    if (n == NULL)
        return NULL;
    n->real = n->out = n->wake = -1;
    if ((n->real = fs_fd(REAL(fcntl)(fd, F_DUPFD_CLOEXEC, 0))) < 0 ||
        (n->wake = fs_fd(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK))) < 0 ||
        pipe2(pp, O_DIRECT | O_CLOEXEC) < 0)
        goto fail;
    REAL(fcntl)(n->real, F_SETFL, O_NONBLOCK);
    REAL(fcntl)(pp[1], F_SETPIPE_SZ, 1 << 20);     /* room for 256 events before the queue */
    REAL(fcntl)(pp[1], F_SETFL, O_NONBLOCK);
    if ((n->out = fs_fd(pp[1])) < 0)
        goto fail;
    pp[1] = -1;
    if (fl & O_NONBLOCK)
        REAL(fcntl)(pp[0], F_SETFL, O_NONBLOCK);
    struct ep_entry eps[16];
    int neps = epoll_entries(fd, eps, 16);
    for (int i = 0; i < neps; i++)
        epoll_ctl(eps[i].epfd, EPOLL_CTL_DEL, fd, NULL);
    if (REAL(dup3)(pp[0], fd, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0) < 0)
        goto fail;
    for (int i = 0; i < neps; i++) {
        struct epoll_event ev = { .events = eps[i].events, .data.u64 = eps[i].data };
        epoll_ctl(eps[i].epfd, EPOLL_CTL_ADD, fd, &ev);
    }
    REAL(close)(pp[0]);
    pp[0] = -1;
    struct stat st;
    REAL(fstat)(fd, &st);
    n->fd = fd;
    n->dev = st.st_dev;
    n->ino = st.st_ino;
    n->pid = getpid();
    n->next_wd = NOTIFY_WD_BASE;
    pthread_mutex_init(&n->lock, NULL);
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    int e = pthread_create(&t, &attr, notify_thread, n);
    pthread_attr_destroy(&attr);
    if (e != 0) {
        /* the fd is the pipe already: put the kernel's back */
        REAL(dup3)(n->real, fd, (fdfl & FD_CLOEXEC) ? O_CLOEXEC : 0);
        errno = e;
        goto fail;
    }
    pthread_mutex_lock(&instances_lock);
    n->next = instances;
    instances = n;
    __atomic_store_n(&ldp_notify_any, 1, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&instances_lock);
    return n;
fail:;
    int saved = errno;
    if (pp[0] >= 0) REAL(close)(pp[0]);
    if (pp[1] >= 0) REAL(close)(pp[1]);
    if (n->real >= 0) REAL(close)(n->real);
    if (n->out >= 0) REAL(close)(n->out);
    if (n->wake >= 0) REAL(close)(n->wake);
    free(n);
    errno = saved;
    return NULL;
}

/* inotify_add_watch(fd, a path in a mount, mask): vp is found (its symlinks followed unless
 * IN_DONT_FOLLOW, by the caller) and st is what the file system said about it. */
int notify_add(int fd, const struct vpath *vp, const struct stat *st, uint32_t mask)
{
    if (!(mask & NOTIFY_ALL) || ((mask & IN_MASK_ADD) && (mask & IN_MASK_CREATE))) {
        errno = EINVAL;
        return -1;
    }
    struct notify *n = instance_of(fd);
    if (n == NULL) {
        int k = is_inotify_fd(fd);
        if (k <= 0) {
            errno = k < 0 ? EBADF : EINVAL;
            return -1;
        }
        if ((n = instance_make(fd)) == NULL)
            return -1;
    }
    struct backend_ops *be = backend_get();
    if (be == NULL) {
        errno = EIO;
        return -1;
    }
    struct nwatch *w = calloc(1, sizeof *w);
    if (w == NULL || (w->path = strdup(vp->path)) == NULL) {
        free(w);
        errno = ENOMEM;
        return -1;
    }
    w->mnt = vp->mnt;
    w->mask = mask;
    w->is_dir = S_ISDIR(st->st_mode);
    w->st = *st;
    guard_enter();
    watch_snapshot(be, w);
    guard_leave();
    pthread_mutex_lock(&n->lock);
    struct nwatch *same = NULL;
    for (struct nwatch *o = n->watches; o; o = o->next)
        if (o->mnt == w->mnt && !strcmp(o->path, w->path))
            same = o;
    int wd;
    if (same && (mask & IN_MASK_CREATE)) {
        pthread_mutex_unlock(&n->lock);
        watch_free(w);
        errno = EEXIST;
        return -1;
    }
    if (same) {
        same->mask = (mask & IN_MASK_ADD) ? same->mask | mask : mask;
        same->mask &= ~(IN_MASK_ADD | IN_MASK_CREATE);
        wd = same->wd;
        watch_free(w);
    } else {
        w->mask &= ~(IN_MASK_ADD | IN_MASK_CREATE);
        w->wd = wd = n->next_wd++;
        w->next = n->watches;
        n->watches = w;
    }
    pthread_mutex_unlock(&n->lock);
    uint64_t one = 1;
    (void)!REAL(write)(n->wake, &one, sizeof one);
    return wd;
}

/* inotify_rm_watch on a turned fd: a mount watch goes with IN_IGNORED, a kernel watch is
 * the kernel's. Returns -2 if fd is not one of ours. */
int notify_rm(int fd, int wd)
{
    struct notify *n = instance_of(fd);
    if (n == NULL)
        return -2;
    if (wd < NOTIFY_WD_BASE)
        return REAL(inotify_rm_watch)(n->real, wd);
    pthread_mutex_lock(&n->lock);
    struct nwatch **pp = &n->watches;
    while (*pp && (*pp)->wd != wd)
        pp = &(*pp)->next;
    struct nwatch *w = *pp;
    if (w) {
        *pp = w->next;
        emit(n, wd, IN_IGNORED, 0, NULL);
        flush_queue(n);
    }
    pthread_mutex_unlock(&n->lock);
    if (w == NULL) {
        errno = EINVAL;
        return -1;
    }
    watch_free(w);
    uint64_t one = 1;
    (void)!REAL(write)(n->wake, &one, sizeof one);
    return 0;
}

/* A forked child has no thread: its copies of the fds are closed (the program's own fd, a
 * pipe now, stays: the parent's thread still feeds it, as the kernel's inotify file is
 * shared by both). */
void notify_fork_child(void)
{
    for (struct notify *n = instances; n; n = n->next) {
        REAL(close)(n->real);
        REAL(close)(n->out);
        REAL(close)(n->wake);
    }
    instances = NULL;
    pthread_mutex_init(&instances_lock, NULL);
}

/* The process ends: no thread may call the file system once it is being torn down. Waits
 * at most 100 ms for a thread in a call. */
void notify_quiesce(void)
{
    if (!__atomic_load_n(&ldp_notify_any, __ATOMIC_ACQUIRE))
        return;
    pthread_mutex_lock(&instances_lock);
    for (struct notify *n = instances; n; n = n->next) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_nsec += 100 * 1000000L;
        if (until.tv_nsec >= 1000000000L) {
            until.tv_sec++;
            until.tv_nsec -= 1000000000L;
        }
        if (pthread_mutex_timedlock(&n->lock, &until) == 0)
            n->stop = 1;    /* and kept locked: the thread stops at its next turn */
    }
    pthread_mutex_unlock(&instances_lock);
}
