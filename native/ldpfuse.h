/*
 * The VFS core shared by every wrapper: mounts, paths, the fd table, virtual files and
 * directories, and the seam to the backend that runs the user's file system.
 * Layers call downwards only: interpose/ -> vfs/ -> backend.
 */
#ifndef LDPFUSE_H
#define LDPFUSE_H
#include "real.h"
#include "backend/backend.h"
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <string.h>

#define LIKELY(x) __builtin_expect(!!(x), 1)
#define UNLIKELY(x) __builtin_expect(!!(x), 0)
#define TLS __thread __attribute__((tls_model("initial-exec")))
/* A function of the core that interpose/ defines: never exported (only libc's names are) */
#define CORE __attribute__((visibility("hidden")))

/* ---- guard: while set, this thread is inside the file system (or Python) and every
 * wrapper goes straight to libc. Python's own imports and the FS's lower-directory I/O
 * must never recurse into the mount. */
extern TLS int ldp_guard;
/* Signals stay blocked while the FS runs: a handler that touches the mount then runs after
 * the call, instead of re-entering locks (ours, the GIL, the FS's own) that the interrupted
 * call holds. A program that never installed a handler has nothing to re-enter: it pays
 * nothing (two syscalls per FS call otherwise). Code that takes no such lock and calls
 * nothing that could need one runs without the guard: a backing tree's operations
 * (vfs/backing.c: backing_getattr_here, and the methods the core calls through
 * BACKEND_CALL, which take the guard for what reaches the class), and a union's stat of a
 * merged name (vfs/union.c union_getattr_here). */
extern TLS sigset_t ldp_guard_mask;
extern TLS int ldp_guard_blocked;
extern int ldp_handlers;    /* the program has installed a signal handler (interpose/signal.c) */
static inline void guard_enter(void)
{
    if (ldp_guard == 0 && (ldp_guard_blocked = ldp_handlers)) {
        /* block first: a handler between the two steps must still see the guard down */
        sigset_t all;
        sigfillset(&all);
        pthread_sigmask(SIG_BLOCK, &all, &ldp_guard_mask);
    }
    ldp_guard++;
}
static inline void guard_leave(void)
{
    if (--ldp_guard == 0 && ldp_guard_blocked)
        pthread_sigmask(SIG_SETMASK, &ldp_guard_mask, NULL);
}

/* ---- logging (never through a wrapped function) */
enum { LOG_ERROR = 0, LOG_WARNING = 1, LOG_INFO = 2, LOG_DEBUG = 3 };
extern int ldp_log_level;
void ldp_log(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void ldp_log_raw(const char *msg, size_t len);

/* ---- mounts (vfs/mount.c) */
struct mount {
    char *point;    /* absolute, normalised, no trailing slash */
    size_t len;
    dev_t dev;      /* st_dev reported when the FS does not give one */
    const char *last;   /* its last component: a path without it cannot lead into the mount */
};
extern struct mount *ldp_mounts;
extern int ldp_nmounts;

/* The longest path resolved for a mount, and the deepest working directory in one. The
 * kernel limits the string a program passes to PATH_MAX, not the path it resolves to nor
 * the depth of a working directory (`mkdir -p` and `rm -r` chdir down one component at a
 * time): a relative path of PATH_MAX - 1 bytes from a working directory in a mount must
 * still reach the FS whole. Past this, chdir and the lookup answer ENAMETOOLONG; nothing
 * is cut short. A vpath lives on the caller's stack, so no more than this: copy one with
 * vpath_copy, and keep a second one (a link's target) in a frame of its own, so that a
 * thread with a 48 KiB stack can still open a file of a mount. */
#define VPATH_MAX (2 * PATH_MAX)        /* = WIRE_PATH_MAX (backend/wire.h) */

/* A location inside a mount: the mount and the path the FS sees ("/" is its root). */
struct vpath {
    int mnt;
    int trailing_slash;     /* the caller wrote "dir/": the object must be a directory */
    char path[VPATH_MAX];
};

/* now + ttl (both normalised): when an answer kept at now for ttl expires */
static inline struct timespec timespec_after(struct timespec now, struct timespec ttl)
{
    struct timespec t = { now.tv_sec + ttl.tv_sec, now.tv_nsec + ttl.tv_nsec };
    if (t.tv_nsec >= 1000000000L) {
        t.tv_sec++;
        t.tv_nsec -= 1000000000L;
    }
    return t;
}

/* A vpath is VPATH_MAX bytes: a struct copy or a designated initializer writes every one
 * of them (12 KiB on each stat of a mount path). These copy and begin one by its path. */
static inline void vpath_copy(struct vpath *to, const struct vpath *from)
{
    to->mnt = from->mnt;
    to->trailing_slash = from->trailing_slash;
    memcpy(to->path, from->path, strlen(from->path) + 1);
}
static inline void vpath_begin(struct vpath *vp, int mnt)
{
    vp->mnt = mnt;
    vp->trailing_slash = 0;
    vp->path[0] = '\0';
}

/* Is (dirfd, *path) inside a mount? Fills vp and returns 1 if so. Costs a few ns and
 * touches nothing when it is not (no syscall, no lock, no allocation).
 * A path that walks through a mount and out again ("/mnt/x/..", ".." from a virtual cwd)
 * is not the kernel's to resolve: *path is then pointed at its normalised form (stored in
 * vp->path) and 0 returned, so the caller's real call gets a path the kernel can use. */
int vfs_lookup_slow(int dirfd, const char **path, struct vpath *vp);
static inline int vfs_lookup(int dirfd, const char **path, struct vpath *vp)
{
    if (LIKELY(ldp_nmounts == 0) || ldp_guard || *path == NULL)
        return 0;
    return vfs_lookup_slow(dirfd, path, vp);
}
/* After a real call on a path answered ENOENT: does a symlink outside the mounts on the way
 * lead into one (vfs/outside_link.c)? Fills vp and returns 1 if so; errno is kept. */
int vfs_lookup_outside_link(int dirfd, const char *path, int follow_last, struct vpath *vp);
/* Why the kernel will refuse a path vfs_lookup passed on: EFAULT (not readable),
 * ENAMETOOLONG (a name in a mount over NAME_MAX), or 0. For calls with two paths,
 * whose errors come before EXDEV. */
int vfs_lookup_refused(const char *path);
int path_has_dotdot(const char *p);     /* a ".." component? (vfs/mount.c) */
/* The absolute path of a vpath as the program sees it (mountpoint + path); -1 (errno
 * ENAMETOOLONG, out cut short) when it does not fit in size bytes. mount_fullpath: the
 * same for a mount index and a path (an open file's, with no vpath to make). */
int vfs_fullpath(const struct vpath *vp, char *out, size_t size);
int mount_fullpath(int mnt, const char *path, char *out, size_t size);
/* Map an absolute normalised path to a mount; 1 if inside one. */
int mount_match(const char *abs, struct vpath *vp);
void mounts_init(void);
/* Does s contain some mount point's last component? If not, no path in s can lead into a
 * mount (lexical normalisation only removes components). */
int mount_named_in(const char *s);

/* ---- path normalisation (vfs/path.c) */
/* Join base (absolute) and rel, then resolve ".", ".." and "//" lexically.
 * Returns the length, or -1 (ENAMETOOLONG). *trailing set if rel ended in '/'. */
int path_normalize(const char *base, const char *rel, char *out, size_t size, int *trailing);
/* The same, setting *visited when probe() was true of some prefix on the way. */
int path_normalize_probe(const char *base, const char *rel, char *out, size_t size, int *trailing,
                         int (*probe)(const char *), int *visited);

/* ---- working directory (vfs/cwd.c) */
extern char *ldp_cwd;           /* the process's cwd as we know it (virtual or real) */
extern int ldp_cwd_virtual;     /* cwd is inside a mount */
extern int ldp_cwd_above_mount; /* cwd is an ancestor of some mount point */
void cwd_init(void);
void cwd_set(const char *abs);

/* ---- the fd table (vfs/fdtable.c): fd -> what the FS said about it. */
/* VF_PASSTHROUGH: a passthrough fd (the lower file itself, the kernel's), read-only or not,
 * tracked only to keep the attribute cache honest: the kernel changes the file behind the
 * backend (vfs/passthrough.c). */
enum vfile_kind { VF_FILE = 1, VF_DIR = 2, VF_PATH = 3, VF_PASSTHROUGH = 4 };
struct vdir;
struct vfile {
    int refs;               /* fds of this process that point here (atomic) */
    int kind;
    int mnt;
    int flags;              /* open flags */
    uint64_t fh;
    int fh_valid;           /* 1: release/releasedir owed at the last close; 2: a handle
                             * inherited through fork (usable, the parent releases it) */
    char *path;             /* FS path; rename of an open file updates it */
    /* VF_FILE (cached): the fd is an open file description of the file's page cache */
    struct pcache *pc;
    off_t ra_next;          /* readahead: where the next sequential read would start */
    size_t ra_win;          /* and the window it would get */
    off_t filled_lo, filled_hi; /* a range of the cache seen filled, while filled_gen */
    unsigned filled_gen;        /* is the cache's generation (holes made since: +1) */
    uint64_t whole_stamp;       /* the cache was seen filled whole at this attrcache_stamp of */
    unsigned whole_gen;         /* the name (0: never; stamps are not) and this generation */
    off_t whole_size;           /* and the cache's size then */
    off_t seq_small, seq_next;  /* bytes read in a row by small reads found filled page by
                                 * page (pcache_fill), and where the next would start */
    off_t data_looks;           /* small reads found filled by a look each since the last
                                 * walk from the start (pcache_fill: random readers) */
    off_t seek_reach;           /* a stream that writes on it found the cache this long
                                 * (stdio.c before_seek: a seek within needs no look) */
    int unlinked;
    int direct_io;          /* the FS's FileInfo.direct_io: reads go to it, past the cache */
    int noflush;            /* the class has no flush(): close() does not ask (OPEN_NOFLUSH) */
    int holdable;           /* a read-only open of this process whose handle its last close
                             * may hold for a re-open (OPEN_HOLD, vfs/pagecache.c) */
    struct vdir *dir;       /* VF_DIR: the stream opened on it by fdopendir, if any */
    int lock_fd1;           /* VF_FILE: 1 + the fd of its locks' stand-in (vfs/locks.c), 0: none */
    int class_locked;       /* the class's lock took a record lock through it: F_UNLCK at close */
    int class_flocked;      /* the class's flock holds one: LOCK_UN at the last close */
};
struct vfile *fdtable_get(int fd);
void fdtable_set(int fd, struct vfile *v);
struct vfile *fdtable_take(int fd);
int fdtable_max(void);
void fdtable_fork(int phase);    /* 0: before fork (lock), 1: after, in either process */
void vfs_names_fork(int phase);  /* 0: before fork (lock), 1: after, in either process */
extern int ldp_nvfds;       /* entries in use; 0 = every fd is a plain kernel fd */
extern int ldp_nvfds_passive;   /* of them, read-only passthrough fds (fdtable.c) */

/* The program's view of an fd (NULL inside the FS, whose calls are never virtual):
 * vfd() any entry; vfd_served() one whose metadata the FS serves (a passthrough fd's are
 * the kernel's, its entry only keeps the attribute cache honest). */
static inline struct vfile *vfd(int fd)
{
    return UNLIKELY(ldp_guard) ? NULL : fdtable_get(fd);
}
static inline struct vfile *vfd_served(int fd)
{
    struct vfile *v = vfd(fd);
    return v && v->kind != VF_PASSTHROUGH ? v : NULL;
}

void vfile_ref(struct vfile *v);
void vfile_unref(struct vfile *v);     /* release to the FS on the last one */

/* ---- VFS operations (vfs/): libc conventions, -1 and errno on failure. */
struct backend_ops *backend_get(void); /* starts the backend on first use; NULL = EIO */
int vfs_getattr(const struct vpath *vp, int follow, struct stat *st);
int vfs_resolve_parents(struct vpath *vp);  /* symlinks among the directories: 1 changed, 0, -1 ELOOP */
void vfs_keep_attr(const struct vpath *vp, struct stat *st, uint64_t stamp);     /* a lookup made elsewhere */
int vfs_fgetattr(int fd, struct vfile *v, struct stat *st);
int vfs_open(const struct vpath *vp, int flags, mode_t mode);
/* The same on the caller's own vpath, which it changes (links followed): one path buffer
 * less on the stack of open() and openat(). */
int vfs_open_in_place(struct vpath *vp, int flags, mode_t mode);
int vfs_close(int fd, struct vfile *v);
int vfs_flush(int fd, struct vfile *v);
void vfs_renamed(int mnt, const char *from, const char *to);
void vfs_unlinked(int mnt, const char *path);
ssize_t be_errno(ssize_t r);    /* backend result -> libc convention */
int fs_fd(int fd);      /* an fd the FS opened for itself: moved out of the program's way */
int fs_fd_cloexec(int fd);  /* the same, made close-on-exec by the move */
int fs_fd_base(void);   /* where such fds live: from this number up */
int vpath_name_too_long(const char *path);   /* a component over NAME_MAX */
int path_last_is_dot(const char *path);      /* last component "." (1), ".." (2), else 0 */
void vfs_patch_open_size(const struct vpath *vp, struct stat *st);
/* An fd this process got without opening it (exec, a unix socket), as a vfile; fh: the
 * handle it may use (received: claimed, released at its last close), NULL: one is opened
 * when needed.
 * 0, or -1 if it is not the cache this process holds of that file. */
int vfs_adopt(int fd, int kind, const struct vpath *vp, int flags, const uint64_t *fh);
/* vfs/passthrough.c: the kernel changed a passthrough file (through v, or through fd with
 * the call's result r, returned): every process hears of it before the call returns */
void vfs_passthrough_changed(const struct vfile *v);
long vfs_changed_through(int fd, long r);
static inline int vfile_writes(const struct vfile *v)
{
    return (v->flags & O_ACCMODE) != O_RDONLY;
}
int vfile_ensure_fh(struct vfile *v);
int vfs_sync(int fd, struct vfile *v, int datasync);
int vfs_ioctl(int fd, struct vfile *v, unsigned long request, void *arg);

/* ---- the page cache of cached files (vfs/pagecache.c) */
struct pcache;
/* size_known: 0 size from getattr (0 may mean unknown: procfs), 1 created or truncated */
/* st, stamp: the file's attributes as the open found them (NULL: none, a file just made)
 * and the name's attrcache_stamp before that lookup */
struct pcache *pcache_open(const struct vpath *vp, off_t size, int size_known, const uint64_t *fh, uint64_t ino,
                           const struct stat *st, uint64_t stamp, int *fresh);
void pcache_opened(struct pcache *pc, unsigned open_flags);
struct pcache *pcache_local(const struct vpath *vp, const struct stat *st, int flags, unsigned *open_flags,
                            uint64_t *fh, int *fh_valid);
void pcache_whole_to(struct vfile *v);
void pcache_kept_closing(unsigned first, unsigned last);
void pcache_holds_end(void);    /* before exec: held handles released */
int pcache_held(int mnt, const char *path);
struct pcache *pcache_adopt(int fd, const struct vpath *vp);
void pcache_unref(struct pcache *pc);
/* pcache_unref at the last close of v (whose handle is still to be released): if that was
 * the cache's last reference, the backend's release_cached does both in one request and 1
 * is returned; 0: the caller releases v's handle */
int pcache_unref_releasing(struct pcache *pc, const struct vfile *v);
int pcache_new_fd(struct pcache *pc, int flags);
off_t pcache_size_of(int mnt, const char *path, uint64_t ino);    /* -1: not cached here */
void pcache_set_mapped(struct pcache *pc);
/* make [off, off+len) readable from the fd (to_end: the whole file) */
int pcache_fill(struct vfile *v, off_t off, size_t len, int to_end);
/* pcache_fill for a stream of glibc's own, which reads on to the cache's end: a range that
 * runs past that end also asks whether the file grew, as a read() at the end does */
int pcache_fill_stream(struct vfile *v, off_t off, size_t len);
/* Is [off, off+len) in the cache, nothing to ask the FS? 1 yes, 0 a hole in it, -1 it
 * reaches the cache's end (preadv2's RWF_NOWAIT: a hole is data not in memory) */
int pcache_filled(const struct vfile *v, off_t off, size_t len);
/* Is v's cache known filled whole, and unchanged since (no hole anywhere: a read at any
 * offset is served from it)? Only where every process hears of every change (the shared
 * mode); a read at the end still asks pcache_fill whether the file grew. */
int pcache_whole(const struct vfile *v);
/* A 0 from the kernel's read of a cache seen whole: the end of the file, nothing to ask? */
int pcache_whole_end(const struct vfile *v);
/* v's open brought its new cache filled whole (backend.h cache_whole_stamp): note it whole */
void pcache_brought_whole(struct vfile *v);
/* write through: the FS first, then the cache; positional = pwrite at `at` */
#define PCACHE_APPEND 2         /* pcache_write's positional: RWF_APPEND, the fd's offset moved */
#define PCACHE_APPEND_KEEP 3    /* RWF_APPEND with an offset: the fd's stays */
ssize_t pcache_write(struct vfile *v, int fd, const void *buf, size_t len, off_t at, int positional);
int pcache_ftruncate(struct vfile *v, off_t len);
/* a stream of glibc's own moves past the cache's end: the cache grows to the FS's end */
int pcache_grow_to_fs_end(struct vfile *v);
/* such a stream was made on it: a write past the cache's end fills, leaving no hole */
void pcache_stream_made(struct vfile *v);
/* O_TRUNC and truncate(path): the FS and the cache under the entry's lock; 0 or -errno */
int pcache_truncate_open(struct pcache *pc, const char *path, const uint64_t *fh);
int pcache_truncate_path(const struct vpath *vp, off_t len);
void pcache_renamed(int mnt, const char *from, const char *to);
void pcache_unlinked(int mnt, const char *path);
int pcache_sync_untracked(struct vfile *v);
/* direct_io: read through the FS at off (-1: the fd's offset, which then moves) */
ssize_t direct_read(struct vfile *v, int fd, void *buf, size_t len, off_t off);
void pcache_fork(int phase);
void pcache_fork_child(void);     /* in a forked child, before pcache_fork(1) */
/* vfs/cache_turn.c: the order of one cache's fills and writes between threads and processes */
uint64_t cache_turn_key(int mfd);
void cache_turn_take(uint64_t key);
void cache_turn_give(uint64_t key);
void cache_turn_fork_child(void);
int vfs_access(const struct vpath *vp, int mode, int flags);
int vfs_mkdir(const struct vpath *vp, mode_t mode);
int vfs_mknod(const struct vpath *vp, mode_t mode, dev_t dev);
int vfs_rmdir(const struct vpath *vp);
int vfs_unlink(const struct vpath *vp);
int vfs_rename(const struct vpath *from, const struct vpath *to, unsigned flags);
int vfs_link(const struct vpath *from, const struct vpath *to);
int vfs_symlink(const char *target, const struct vpath *vp);
ssize_t vfs_readlink(const struct vpath *vp, char *buf, size_t size);
int vfs_chmod(const struct vpath *vp, mode_t mode, int follow);
int vfs_chown(const struct vpath *vp, uid_t uid, gid_t gid, int follow);
int vfs_truncate(const struct vpath *vp, off_t len);
int vfs_utimens(const struct vpath *vp, const struct timespec ts[2], int follow);
int vfs_statvfs(const struct vpath *vp, struct statvfs *sv);
ssize_t vfs_getxattr(const struct vpath *vp, const char *name, void *val, size_t size, int follow);
int vfs_setxattr(const struct vpath *vp, const char *name, const void *val, size_t size, int flags, int follow);
ssize_t vfs_listxattr(const struct vpath *vp, char *list, size_t size, int follow);
int vfs_removexattr(const struct vpath *vp, const char *name, int follow);
/* The vpath an fd stands for (virtual fds only). */
int vfs_fd_vpath(int fd, struct vpath *vp);
/* Follow symlinks in the last component: vp becomes the target; returns 1 if the target is
 * still in a mount, 0 if it left every mount (out gets the absolute real path), -1 on error. */
int vfs_follow(struct vpath *vp, char *out, size_t size);
/* The same, keeping what the last lookup found: *state is LOOKED_FOUND (st filled, not a
 * symlink) or LOOKED_MISSING (ENOENT), so the caller need not ask the FS again. */
enum { LOOKED_UNKNOWN, LOOKED_FOUND, LOOKED_MISSING };
int vfs_follow_stat(struct vpath *vp, char *out, size_t size, struct stat *st, int *state);

/* ---- directory streams (vfs/vdir.c) */
DIR *vdir_open(const struct vpath *vp);
DIR *vdir_fdopen(int fd, struct vfile *v);
struct vdir *vdir_of(DIR *d);           /* NULL if d is glibc's own */
struct dirent64 *vdir_read(struct vdir *d);
void vdir_rewind(struct vdir *d);
long vdir_tell(struct vdir *d);
void vdir_seek(struct vdir *d, long pos);
int vdir_close(struct vdir *d);
int vdir_fd(struct vdir *d);

/* ---- FNV-1a over paths: synthetic inode numbers and the attribute cache's slots.
 * Start from fnv1a_seed(mnt); *end (if not NULL) gets the end of s. */
static inline uint64_t fnv1a_seed(int mnt)
{
    return 1469598103934665603ULL ^ (uint64_t)mnt;
}
static inline uint64_t fnv1a(uint64_t h, const char *s, const char **end)
{
    for (; *s; s++) {
        h ^= (unsigned char)*s;
        h *= 1099511628211ULL;
    }
    if (end)
        *end = s;
    return h;
}

/* ---- attribute cache (vfs/attrcache.c) */
#define ATTRCACHE_PATH_MAX 256      /* longer paths are not kept */
/* 1: st filled; -1: known missing (ENOENT); 0: not known */
int attrcache_get(int mnt, const char *path, struct stat *st);
/* stamp: attrcache_stamp() of the path before the FS was asked; st NULL: missing */
void attrcache_put(int mnt, const char *path, const struct stat *st, uint64_t stamp);
int attrcache_timeout(struct timespec *t);     /* attr_timeout in *t; 0: the caches are off */
/* What a cached answer about path depends on (path NULL: this process's own changes only);
 * shared.c stamps its open decisions and listings with it too. */
uint64_t attrcache_change_stamp(int mnt, const char *path);
uint64_t attrcache_stamp(int mnt, const char *path);
uint64_t attrcache_stamp_from(uint64_t backend_part);
int attrcache_coherent(void);       /* the backend tells every process of every change */
void attrcache_invalidate(void);    /* a change no backend tells of: forget everything */
void attrcache_changed(void);       /* this process changed something through the backend */
void attrcache_changed_in(int mnt);  /* the same, on mnt: nothing for a backed or union mount */
void attrcache_fork(int phase);
/* A passthrough file open for writing here (delta 1) or closed (-1) under path, or a
 * rename moved it (-1 from the old name, 1 to the new). */
void attrcache_writer(int mnt, const char *path, int delta);

/* ---- locks on files the FS serves where no kernel file is shared (vfs/locks.c) */
int vfs_lock_standin_needed(const struct vfile *v);
int vfs_lock_fd(struct vfile *v);
int vfs_lock_fcntl(int fd, struct vfile *v, int cmd, struct flock *arg);
int vfs_lock_flock(int fd, struct vfile *v, int op);
void vfs_lock_closed(struct vfile *v);
void vfs_lock_last_close(struct vfile *v);
void vfs_lock_release(struct vfile *v);

/* ---- backing trees (vfs/backing.c): directories of a mount that the preload serves from
 * a lower directory, in the calling process, for every operation the class did not ask to
 * see. The bits of what it asks (ldpfuse_py/operations.py Backing.OPERATIONS, same order). */
enum {
    BK_GETATTR = 1u << 0, BK_READLINK = 1u << 1, BK_MKNOD = 1u << 2, BK_MKDIR = 1u << 3,
    BK_UNLINK = 1u << 4, BK_RMDIR = 1u << 5, BK_SYMLINK = 1u << 6, BK_RENAME = 1u << 7,
    BK_LINK = 1u << 8, BK_CHMOD = 1u << 9, BK_CHOWN = 1u << 10, BK_TRUNCATE = 1u << 11,
    BK_OPEN = 1u << 12, BK_OPEN_WRITE = 1u << 13, BK_CREATE = 1u << 14, BK_STATFS = 1u << 15,
    BK_READDIR = 1u << 16, BK_ACCESS = 1u << 17, BK_UTIMENS = 1u << 18, BK_GETXATTR = 1u << 19,
    BK_SETXATTR = 1u << 20, BK_LISTXATTR = 1u << 21, BK_REMOVEXATTR = 1u << 22,
};
/* the backend's table with the trees' methods over it (be itself when there are none) */
struct backend_ops *backing_over(struct backend_ops *be);
/* mnt has a backing tree or is a union (vfs/union.c): no answer about its names is kept
 * (attrcache.c), no writer counted */
int backing_uncached(int mnt);
/* mnt's tree methods may be called without the guard (they take it for the class) */
int backing_guard_free(int mnt);
/* A call into the backend for a name on mnt: under the guard, unless backing_guard_free */
#define BACKEND_CALL(mnt, call) ({ \
    int free_ = backing_guard_free(mnt); \
    if (!free_) \
        guard_enter(); \
    __typeof__(call) rc_ = (call); \
    if (!free_) \
        guard_leave(); \
    rc_; })
void backing_served_init(void);     /* whom backed and union mounts serve (the launcher's env) */
int backing_caller_served(void);    /* this process's caller, asked again at a credentials change */
/* A stat of a backed name done in the calling process without the guard (no signal
 * blocked): 1 and *r (0 or -errno), or 0: ask the backend as usual */
int backing_getattr_here(int mnt, const char *path, struct stat *st, int *r);
/* open() of a name a tree opens in one system call (for writing, a regular file opened a
 * moment ago, a new file): the lower file's fd, -1 with errno, or -2 (the core's way) */
int backing_open_here(const struct vpath *vp, int flags, mode_t mode);
/* a tree looks path up itself (create_open): a missing name it finds is final */
int backing_looks_up(int mnt, const char *path);
extern TLS const char *ldp_backing_miss;   /* vfs/backing.c: a tree's own final miss (names.c) */
extern int ldp_backing_low_fd;      /* the lowest fd of a tree's lower directory */
void backing_fds_lost(unsigned first, unsigned last);   /* the program closed or replaced them */
/* vfs/proc_fd.c: a new description of fd (as by /proc/self/fd/N) through a kept dirfd */
int proc_fd_reopen(int fd, int flags);
extern int ldp_proc_fd_dir;     /* that dirfd, -1 when none: the close/dup2 wrappers */
void proc_fd_lost(int fd);      /* the program closed or replaced it */
void proc_fd_range_lost(unsigned first, unsigned last);
void proc_fd_fork_child(void);
/* ---- union backing (vfs/union.c): a mount that is an overlay's merged view, whose reads
 * (lookups, stat, readlink, access, open for reading, readdir) the preload serves from
 * the layers; every change goes to the class */
struct backend_ops *union_over(struct backend_ops *be);
int union_mount(int mnt);                           /* uncached as a backed mount */
int union_fds_lost(unsigned first, unsigned last);  /* the lowest layer fd left */
/* A stat of a merged name without the guard (vfs/union.c): 1 and *r, or 0: ask the backend */
int union_getattr_here(int mnt, const char *path, struct stat *st, int *r);
/* vfs/backing_dirs.c: the trees' directories, kept open */
void backing_dirs_over(struct backend_ops *be);
long backing_dir_get(int mnt, const char *dir, int tfd, const char *rel, int *slot);
void backing_dir_put(int slot, int fd);
int backing_dirs_lost(unsigned first, unsigned last);
/* vfs/backing_regular.c: names this process opened as regular files a moment ago */
int backing_regular_known(int mnt, const char *path);
void backing_regular_seen(int mnt, const char *path);
void backing_regular_forget(int mnt, const char *path);
void backing_regular_forget_all(void);
/* interpose/creds.c: bumped when this process changes its uids, gids or groups */
extern unsigned ldp_creds_gen;
void ldp_creds_changed(void);

/* ---- inotify watches on mount paths (vfs/notify.c) */
void notify_fork_child(void);
void notify_quiesce(void);

/* ---- stat conversions (vfs/statconv.c) */
void stat_to_statx(const struct stat *st, unsigned mask, struct statx *stx);
void statvfs_to_statfs(const struct statvfs *sv, struct statfs *sf);

/* ---- vfork (interpose/vfork.c): set while this thread's memory is a vfork child's */
extern TLS int ldp_vfork_child;
extern TLS char *ldp_vfork_cwd;     /* the cwd a vfork child set, for its parent to undo */
CORE int ldp_vfork_child_chdir(const char *path);
CORE int ldp_vfork_child_execve(const char *path, char *const argv[], char *const envp[]);
CORE pid_t ldp_vfork_as_fork(void);
/* exec's environment (interpose/process.c): envp with our variables put back, into out,
 * which has room for exec_env_room(envp) pointers */
CORE size_t exec_env_room(char *const envp[]);
CORE char **exec_env_into(char *const envp[], char **out, char *cwdbuf, char *realbuf);
/* "NAME=value" added to that environment from now on (once per process) */
CORE void exec_env_keep(const char *entry);

/* io_uring's system calls (interpose/uring.c), from syscall() and the safety net: each
 * returns the kernel's answer or -1 with errno, and fills every cached fd the ring could
 * read first (SQPOLL rings and, under --strict, every ring refused) */
CORE long uring_setup(unsigned entries, void *params);
CORE long uring_enter(int ring, unsigned to_submit, unsigned min_complete, unsigned flags, const void *arg,
                      size_t argsz);
CORE long uring_register(int ring, unsigned op, void *arg, unsigned n);

/* umask, tracked so that create/mkdir apply it as the kernel would */
extern mode_t ldp_umask;

/* process-wide init (constructor) and exit (destructor) */
void ldp_sync_all(void);
void ldp_before_exec(int every_fd);
void stdio_fd_changed(int fd, int cached);   /* fd 1 became (or stopped being) a cached file */
int stdio_reads_through(FILE *f);              /* a stream whose reads are all the fd's read() */

#endif
