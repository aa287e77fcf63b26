/*
 * The seam between the VFS core and whatever runs the user's Operations object
 * (shared/STYLE.md: one method table per layer, as SQLite's sqlite3_vfs).
 * The embedded backend (backend/embedded.c, inside the Python extension module) calls the
 * object in this process; a shared backend would send the same calls to a server.
 *
 * Every function returns >= 0 on success and -errno on failure. `mnt` is the index in
 * the mount table; `path` is the FS path ("/" = the mount's root), NUL-terminated.
 */
#ifndef LDPFUSE_BACKEND_H
#define LDPFUSE_BACKEND_H
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/types.h>
#include <fcntl.h>
#include <time.h>

#define LDP_BACKEND_ABI 1

/* What open/create answered. */
struct open_result {
    int passthrough_fd;     /* >= 0: serve the file from this kernel fd (now ours) */
    int fd_flags_set;       /* its close-on-exec is already what the open asked (O_CLOEXEC) */
    uint64_t fh;            /* the FS's handle, passed back to read/write/flush/release */
    unsigned open_flags;    /* OPEN_*: what the FS set in its FileInfo */
};
#define OPEN_DIRECT_IO  1u  /* reads go to the FS at the offset asked, past the page cache */
#define OPEN_KEEP_CACHE 2u  /* the page cache may outlive the last close */
#define OPEN_NOFLUSH    4u  /* the class has no flush(): close() asks nothing (FUSE's FOPEN_NOFLUSH) */
#define OPEN_LOCAL      8u  /* the class keeps Operations' open and release (handle 0, nothing
                             * to release) and the mount checks no permissions: a process
                             * that keeps the file's page cache may open it again for reading,
                             * unchanged, with no request (vfs/pagecache.c, pcache_local) */
#define OPEN_HOLD      16u  /* the class keeps its own open and release but says they only pin
                             * the file (Operations.open_only_pins) and the mount checks no
                             * permissions: the handle of a read-only open may be held past
                             * its last close while the process keeps the file's page cache,
                             * and a re-open for reading of the unchanged file takes it with
                             * no request (vfs/pagecache.c, held handles) */

/* One directory entry as readdir produced it. */
struct dirent_rec {
    uint64_t ino;           /* 0 = the FS gave none */
    unsigned char type;     /* DT_* */
    unsigned short namelen;
    unsigned char plus;     /* dirlist.attrs holds the entry's attributes (readdirplus) */
    size_t name_off;        /* into dirlist.names */
};
/* One entry of getdents64's answer (the kernel's layout; glibc 2.36 has no declaration):
 * the backed and union listings read lower directories with it. */
struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

struct dirlist {
    struct dirent_rec *ents;
    size_t n, cap;
    char *names;
    size_t names_len, names_cap;
    /* What the FS's readdir said of each entry (fusepy's (name, attrs, offset) with the
     * attributes given in full: docs/operations.md), as getattr would; NULL when none did.
     * The core keeps them as getattr answers, as FUSE's readdirplus does (vfs/dir.c). */
    struct stat *attrs;
    size_t attrs_cap;
};
/* Filled by a backend, read and freed by the core (one malloc arena: same libc). */
static inline int dirlist_add(struct dirlist *l, const char *name, size_t len, uint64_t ino,
                              unsigned char type)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 64;
        void *p = realloc(l->ents, cap * sizeof *l->ents);
        if (!p)
            return -1;
        l->ents = (struct dirent_rec *)p;
        l->cap = cap;
    }
    if (l->names_len + len + 1 > l->names_cap) {
        size_t cap = l->names_cap ? l->names_cap * 2 : 4096;
        while (cap < l->names_len + len + 1)
            cap *= 2;
        void *p = realloc(l->names, cap);
        if (!p)
            return -1;
        l->names = (char *)p;
        l->names_cap = cap;
    }
    memcpy(l->names + l->names_len, name, len);
    l->names[l->names_len + len] = '\0';
    struct dirent_rec *e = &l->ents[l->n++];
    e->ino = ino;
    e->type = type;
    e->namelen = (unsigned short)len;
    e->plus = 0;
    e->name_off = l->names_len;
    l->names_len += len + 1;
    return 0;
}

/* The attributes of the entry dirlist_add added last. */
static inline int dirlist_attr(struct dirlist *l, const struct stat *st)
{
    if (l->n == 0)
        return -1;
    if (l->attrs_cap < l->cap) {
        void *p = realloc(l->attrs, l->cap * sizeof *l->attrs);
        if (!p)
            return -1;
        l->attrs = (struct stat *)p;
        l->attrs_cap = l->cap;
    }
    l->attrs[l->n - 1] = *st;
    l->ents[l->n - 1].plus = 1;
    return 0;
}

static inline void dirlist_free(struct dirlist *l)
{
    free(l->ents);
    free(l->names);
    free(l->attrs);
    memset(l, 0, sizeof *l);
}

struct backend_ops {
    int abi;
    int (*getattr)(int mnt, const char *path, const uint64_t *fh, struct stat *st);
    int (*readlink)(int mnt, const char *path, char *buf, size_t size);  /* length */
    int (*mknod)(int mnt, const char *path, mode_t mode, dev_t dev);
    int (*mkdir)(int mnt, const char *path, mode_t mode);
    int (*unlink)(int mnt, const char *path);
    int (*rmdir)(int mnt, const char *path);
    int (*symlink)(int mnt, const char *linkpath, const char *target);
    int (*rename)(int mnt, const char *from, const char *to);
    int (*link)(int mnt, const char *newpath, const char *oldpath);
    int (*chmod)(int mnt, const char *path, mode_t mode);
    int (*chown)(int mnt, const char *path, uid_t uid, gid_t gid);
    int (*truncate)(int mnt, const char *path, off_t len, const uint64_t *fh);
    int (*open)(int mnt, const char *path, int flags, struct open_result *res);
    int (*create)(int mnt, const char *path, mode_t mode, int flags, struct open_result *res);
    /* read fills buf (returns bytes, 0 = EOF); write returns bytes written */
    ssize_t (*read)(int mnt, const char *path, char *buf, size_t size, off_t off, uint64_t fh);
    ssize_t (*write)(int mnt, const char *path, const char *buf, size_t size, off_t off, uint64_t fh);
    int (*statfs)(int mnt, const char *path, struct statvfs *sv);
    int (*flush)(int mnt, const char *path, uint64_t fh);
    int (*release)(int mnt, const char *path, int flags, uint64_t fh);
    int (*fsync)(int mnt, const char *path, int datasync, uint64_t fh);
    int (*opendir)(int mnt, const char *path, uint64_t *fh);
    int (*readdir)(int mnt, const char *path, uint64_t fh, struct dirlist *out);
    int (*releasedir)(int mnt, const char *path, uint64_t fh);
    int (*access)(int mnt, const char *path, int mode);
    /* ts never holds UTIME_NOW/UTIME_OMIT: the core resolves them */
    int (*utimens)(int mnt, const char *path, const struct timespec ts[2]);    /* ts NULL: now */
    int (*setxattr)(int mnt, const char *path, const char *name, const void *value, size_t size, int flags);
    ssize_t (*getxattr)(int mnt, const char *path, const char *name, void *value, size_t size);
    ssize_t (*listxattr)(int mnt, const char *path, char *list, size_t size);
    int (*removexattr)(int mnt, const char *path, const char *name);
    /* process exit: the FS's destroy() */
    void (*destroy)(void);
    /* O_APPEND: write at the FS's end of file, atomically with finding it (*at gets the
     * offset written at); the shared server does it under one lock for every process */
    ssize_t (*append)(int mnt, const char *path, const char *buf, size_t size, uint64_t fh, off_t *at);
    /* The page cache of a file, owned by the backend for every process (the shared server;
     * NULL in the embedded mode): *fd gets an O_RDWR fd of its memfd, created sized `size`
     * if there was none (*fresh = 1), for a caller that opened the file (fh: its open's
     * handle) or, fh NULL, may open it for writing (a truncate). Every cache_open is paired
     * with one cache_close of the token it gave. */
    int (*cache_open)(int mnt, const char *path, off_t size, const uint64_t *fh, int *fd, int *fresh,
                      uint64_t *token);
    void (*cache_close)(int mnt, const char *path, uint64_t token);
    /* After a cache_open that gave a new cache: the attrcache_stamp of the name at which
     * the backend knows it filled with the file whole (the open that brought it read the
     * file into it), taken before that open's request; 0 if not (or unknown). Read once.
     * NULL: never known. */
    uint64_t (*cache_whole_stamp)(void);
    /* After a cache_open that gave a new cache: the known state (vfs/pagecache.c,
     * KNOWN_XATTR) the backend noted on the memfd when it made and filled it, its size and
     * mtime then: 0, or -1 if it did not (the caller notes it). Read once. NULL: never. */
    int (*cache_known)(int64_t *size, struct timespec *mtime);
    /* release and then cache_close of token, as one request: a file's last close in the
     * process that was also its page cache's (NULL: the two calls) */
    void (*release_cached)(int mnt, const char *path, int flags, uint64_t fh, uint64_t token);
    /* Wait until what this thread posted was served (NULL: nothing is posted): a last close
     * of a page cache whose file changed returns only once the server kept or dropped it
     * (server/page_caches.c, scache_close_id), so a change behind the mount made after the
     * close is one the kept cache is checked against. */
    void (*settle)(void);
    /* A FIFO, socket or device node of the FS, opened as the kernel opens one of a FUSE
     * mount: without the FS's open (NULL: call open as for a file, the embedded mode,
     * where the process itself may block). Returns a kernel fd, or -errno. */
    int (*open_special)(int mnt, const char *path, const struct stat *st, int flags);
    /* FUSE's ioctl on an open file: data is the caller's buffer when the request carries
     * one (_IOC_SIZE), else NULL (the shared backend carries those bytes to the server and
     * back); returns >= 0 or -errno. NULL: the kernel answers, on the file the fd holds */
    int (*ioctl)(int mnt, const char *path, unsigned int cmd, void *arg, uint64_t fh,
                 unsigned int flags, void *data);
    /* What an answer about path depends on, as a number that grows whenever any process
     * changes it through the mount (backend/coherence.h): the core's caches stamp their
     * answers with it. 0: the backend cannot tell (NULL: the embedded mode, where each
     * process has its own FS and hears only of its own changes). Called outside
     * guard_enter (it is on every cached lookup and open): a backend guards what of it a
     * signal handler must not enter. */
    uint64_t (*stamp)(int mnt, const char *path);
    /* A passthrough file this process had open for writing was closed: tell every
     * process's caches (the kernel wrote it, past the backend). 0: cannot (NULL too). */
    int (*written)(int mnt, const char *path);
    /* open() of a name the core knows nothing about, lookup and open in one call where the
     * backend can (the shared server looks it up itself): a missing name whose directory
     * exists is created with O_CREAT (CO_CREATED), or else missing (CO_MISSING: -ENOENT);
     * an existing regular file is opened unless O_EXCL (CO_OPENED, st holds what getattr
     * said before the open); anything else is left to the core, which looks up and creates
     * or opens as usual (CO_EXISTS with st, or CO_ASK). mode has the umask applied;
     * parent_is_dir: the core knows the name's directory is one. Returns the open's result
     * (>= 0, OPEN_* in res) or -errno for CO_CREATED/CO_OPENED/CO_MISSING. NULL: the core
     * always looks up first. */
    int (*create_open)(int mnt, const char *path, mode_t mode, int flags, int parent_is_dir,
                       struct open_result *res, struct stat *st, int *outcome);
    /* open() of a name this process opened before with the same flags, when the backend
     * knows which lower file that open gave and nothing has changed the name since: that
     * file opened here (flags less O_CREAT), or -1 with errno kept. Called with no
     * guard_enter and before any lookup. NULL: no such knowledge. */
    int (*open_decided)(int mnt, const char *path, int flags);
    /* The stamp (backend stamp part) the last create_open's answer on this thread was
     * taken at, for a process that had no stamps yet when it asked (its first request):
     * 0 if none. NULL: the backend has none to give. */
    uint64_t (*answer_stamp)(void);
    /* truncate(path) of a file whose page cache no process holds, in one call: returns
     * TRUNCATE_CACHED, having done nothing, if a process holds it (the core then truncates
     * through the cache). NULL: the core cannot tell (cache_open tells it) */
    int (*truncate_uncached)(int mnt, const char *path, off_t len);
    /* FUSE's lock on an open file (fusepy's lock(path, fh, cmd, lock), lock the address of
     * a struct flock): cmd F_GETLK or F_SETLK (never F_SETLKW: the core waits, so that a
     * signal ends the wait), lk whole from l_whence SEEK_SET, l_pid the caller's; F_GETLK's
     * answer is written into lk. -ENOSYS: the class takes no locks (the kernel's alone
     * then, as FUSE without FUSE_POSIX_LOCKS). NULL: the same. */
    int (*lock)(int mnt, const char *path, uint64_t fh, int cmd, struct flock *lk);
    /* FUSE's flock (mfusepy's flock(path, fh, op)): op LOCK_SH, LOCK_EX or LOCK_UN, with
     * LOCK_NB for the first two (the core waits). -ENOSYS, NULL: as lock. */
    int (*flock)(int mnt, const char *path, uint64_t fh, int op);
    /* A number that grows at every change any process makes through the mount (the shared
     * server's count of them, coherence.h), read before and after a call whose answer
     * speaks of names the caller could not stamp before it asked (readdir's attributes of
     * each entry): unchanged, nothing changed during the call. NULL: the backend hears of
     * no other process's changes (the embedded mode: attrcache's own generation says it). */
    uint64_t (*changes)(void);
    /* coherence_stamp_below of a directory's path (coherence.h: which directory it leads to
     * and who may reach it), for vfs/backing_dirs.c; connect: map the table even if that
     * makes this process's first connection. 0: cannot tell. NULL: the same. */
    uint64_t (*below_stamp)(int mnt, const char *path, int connect);
    /* A directory of a backing tree was removed, renamed (path to path2) or had its
     * permissions changed by this process past the backend (vfs/backing.c): every
     * process's kept directories there are forgotten before this returns. NULL: none kept. */
    int (*moved)(int mnt, const char *path, const char *path2);
    /* An fd of the open file fh is about to be sent over a unix socket (SCM_RIGHTS): noted,
     * for its receiver to claim (interpose/pass_fd.c). NULL: handles are the process's own. */
    int (*pass)(int mnt, uint64_t fh, int fd);
    /* fd came over a unix socket: the open file it is, if some process passed it (pass):
     * its mount, open flags, path (size bytes) and handle (*fh), which this process may
     * use from now on; -errno if it is none. NULL: the same as pass. */
    int (*claim)(int fd, int *mnt, int *flags, char *path, size_t size, uint64_t *fh);
    /* An operation of a backing tree done past the class (vfs/backing.c), which the class
     * asked to be told of after it (Backing(after=...)): op is its BK_* bit (ldpfuse.h),
     * result 0 or -errno, path2 the second name (rename's new name, link's existing file,
     * a symlink's content, an xattr's name) or NULL. For BK_GETATTR st holds the lower
     * file's attributes and comes back as the class adjusted them (0, or -errno: the
     * stat's answer); for a change st is NULL and the answer is 0 whatever the class did
     * (the operation is done). NULL: nothing is told. */
    int (*after)(int mnt, unsigned op, const char *path, const char *path2, int result, struct stat *st);
    /* read, its bytes written into fd at off (a page cache's memfd) from the method's own
     * result, with no buffer between, only when the method gave all size bytes asked
     * (a short read writes nothing): the count, or -errno, as read's. NULL: read into a
     * buffer, then pwrite (dispatch.c, fill_first_window). */
    ssize_t (*read_to_fd)(int mnt, const char *path, int fd, size_t size, off_t off, uint64_t fh);
};
#define TRUNCATE_CACHED 1
enum { CO_ASK = 0, CO_CREATED = 1, CO_OPENED = 2, CO_EXISTS = 3, CO_MISSING = 4 };

/* What the core lends a backend (the backend must not call wrapped libc functions
 * for its own work other than inside the guard, which the core holds during calls). */
struct core_api {
    int abi;
    void (*log)(int level, const char *msg);
    /* open(2) for an fd that will be handed back as a passthrough fd: not moved out of
     * the program's way like the FS's own fds (NULL: plain open) */
    int (*open_passthrough)(const char *path, int flags, mode_t mode);
    /* make the calling thread the FS's own for good: its I/O never enters the mount
     * (a fusepy script's thread); NULL where there is no interposer */
    void (*guard_thread)(void);
};

/* Exported by the embedded backend's shared object. */
typedef struct backend_ops *(*backend_init_fn)(const struct core_api *core, int host_owns_python,
                                              char *err, size_t errsize);
#endif
