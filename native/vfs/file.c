/*
 * Opening and closing files in a mount. Every virtual fd is a real kernel fd:
 *  - passthrough: the FS returned a lower fd (ldpfuse_py.Passthrough); that fd is the
 *    caller's fd and nothing of ours stands between the program and the kernel;
 *  - cached: an open file description of the file's page cache, a memfd filled lazily by
 *    range through the FS's read() and written through by range (vfs/pagecache.c). stdio,
 *    mmap, sendfile and exec work on it because the kernel serves them;
 *  - directories and O_PATH opens: an O_PATH fd standing in, with the table saying what it is.
 */
#include "../ldpfuse.h"
#include "../run_dir.h"
#include <stdlib.h>
#include <string.h>
#include <linux/fs.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/resource.h>

mode_t ldp_umask = 022;

void vfile_ref(struct vfile *v)
{
    __atomic_add_fetch(&v->refs, 1, __ATOMIC_ACQ_REL);
}

/* Renames and unlinks walk the fd table under this lock; the last unref of a vfile (no
 * longer in the table) waits for a walk that may still be looking at it. */
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;

/* fork: no other thread may hold it at the instant of the fork (interpose/init.c takes it
 * before the attribute cache's lock, the order writer_counted and vfs_renamed take them) */
void vfs_names_fork(int phase)
{
    if (phase == 0)
        pthread_mutex_lock(&names_lock);
    else
        pthread_mutex_unlock(&names_lock);
}

/* A passthrough writer v opened (1) or let go of (-1), counted under its name
 * (attrcache_writer), not while a rename moves the name. */
static void writer_counted(const struct vfile *v, int delta)
{
    guard_enter();      /* names_lock: no handler's rename may wait for it on this thread */
    pthread_mutex_lock(&names_lock);
    attrcache_writer(v->mnt, v->path, delta);
    pthread_mutex_unlock(&names_lock);
    guard_leave();
}

void vfile_unref(struct vfile *v)
{
    if (__atomic_sub_fetch(&v->refs, 1, __ATOMIC_ACQ_REL) != 0)
        return;
    struct backend_ops *be = backend_get();
    if (v->kind == VF_PASSTHROUGH && vfile_writes(v)) {
        /* the kernel wrote it behind the backend: told before close() returns, while this
         * process still keeps no answer about it */
        vfs_passthrough_changed(v);
        writer_counted(v, -1);
    }
    if (v->kind == VF_FILE)
        vfs_lock_last_close(v);     /* the class's flock goes before its release */
    int release = be && v->fh_valid == 1;      /* 2: inherited through fork, the parent's */
    if (v->pc && pcache_unref_releasing(v->pc, release && v->kind == VF_FILE ? v : NULL))
        release = 0;        /* the page cache's last close carried the release */
    if (release) {
        guard_enter();
        if (v->kind == VF_FILE)
            be->release(v->mnt, v->path, v->flags, v->fh);
        else if (v->kind == VF_DIR)
            be->releasedir(v->mnt, v->path, v->fh);
        guard_leave();
    }
    vfs_lock_release(v);
    guard_enter();      /* a handler's rename on this thread would wait for names_lock forever */
    pthread_mutex_lock(&names_lock);
    pthread_mutex_unlock(&names_lock);
    guard_leave();
    free(v->path);
    free(v);
}

static struct vfile *vfile_new(int kind, const struct vpath *vp, int flags, uint64_t fh, int fh_valid)
{
    struct vfile *v = calloc(1, sizeof *v);
    if (v == NULL)
        return NULL;
    v->refs = 1;
    v->kind = kind;
    v->mnt = vp->mnt;
    v->flags = flags;
    v->fh = fh;
    v->fh_valid = fh_valid;
    v->path = strdup(vp->path);
    return v;
}

/* What stands for a virtual directory in the kernel: a real, empty, read-only directory
 * of ours ("empty-UID" in the command's private directory, run_dir.h, made once), so that
 * read() on it fails with EISDIR and getdents finds nothing, as for an empty directory.
 * O_PATH opens and, failing that directory, an O_PATH fd on "/" stand in: there read()
 * fails with EBADF. */
/* The empty directory last found good, kept open at a high number (close-on-exec): a
 * placeholder is then its "." opened through that fd, checked to be the same directory (the
 * program may have closed the number and opened something else there), two system calls
 * where finding the directory again by name took six (find and git open a directory per
 * directory they walk). Replaced, never freed, when credentials change. */
struct empty_dir {
    int fd;
    dev_t dev;
    ino_t ino;
    unsigned creds;     /* ldp_creds_gen when it was found: the directory is per euid */
};
static struct empty_dir *empty_kept;

static int placeholder_kept(int flags)
{
    struct empty_dir *e = __atomic_load_n(&empty_kept, __ATOMIC_ACQUIRE);
    if (e == NULL || e->creds != __atomic_load_n(&ldp_creds_gen, __ATOMIC_ACQUIRE))
        return -1;
    int fd = REAL(openat)(e->fd, ".", O_RDONLY | O_DIRECTORY | (flags & O_CLOEXEC));
    if (fd < 0)
        return -1;
    struct stat st;
    if (REAL(fstat)(fd, &st) == 0 && st.st_dev == e->dev && st.st_ino == e->ino && (st.st_mode & 0777) == 0555)
        return fd;
    REAL(close)(fd);
    return -1;
}

static void placeholder_keep(int fd, const struct stat *st)
{
    struct empty_dir *e = ldp_vfork_child ? NULL : malloc(sizeof *e);
    if (e == NULL)
        return;
    e->fd = REAL(fcntl)(fd, F_DUPFD_CLOEXEC, fs_fd_base());
    e->dev = st->st_dev;
    e->ino = st->st_ino;
    e->creds = __atomic_load_n(&ldp_creds_gen, __ATOMIC_ACQUIRE);
    if (e->fd < 0) {
        free(e);
        return;
    }
    struct empty_dir *old = __atomic_exchange_n(&empty_kept, e, __ATOMIC_ACQ_REL);
    struct stat ost;
    /* the one it replaces: closed if its number is still that directory (ours) */
    if (old && REAL(fstat)(old->fd, &ost) == 0 && ost.st_dev == old->dev && ost.st_ino == old->ino)
        REAL(close)(old->fd);
}

static int placeholder_fd(int flags)
{
    char dir[PATH_MAX];
    int saved = errno;
    int kept = flags & O_PATH ? -1 : placeholder_kept(flags);
    errno = saved;
    if (kept >= 0)
        return kept;
    if (!(flags & O_PATH) && run_dir_get(dir, sizeof dir - 32) == 0) {
        snprintf(dir + strlen(dir), 32, "/empty-%u", (unsigned)geteuid());
        for (int attempt = 0; attempt < 2; attempt++) {
            int fd = REAL(open)(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | (flags & O_CLOEXEC));
            if (fd >= 0) {
                struct stat st;
                if (REAL(fstat)(fd, &st) == 0 && st.st_uid == geteuid() && (st.st_mode & 0777) == 0555) {
                    placeholder_keep(fd, &st);
                    errno = saved;
                    return fd;
                }
                REAL(close)(fd);
                break;
            }
            if (errno != ENOENT)
                break;
            /* whatever the umask; by name only after our own mkdir made it: with -o
             * allow_other the directory is sticky and everyone's, and a name another user
             * made first (a symlink) must not be followed (the open above checks it) */
            if (REAL(mkdir)(dir, 0555) == 0)
                REAL(chmod)(dir, 0555);
            else if (errno != EEXIST)
                break;
        }
    }
    return REAL(open)("/", O_PATH | O_DIRECTORY | (flags & O_CLOEXEC));
}

static int open_dir(const struct vpath *vp, int flags)
{
    struct backend_ops *be = backend_get();
    uint64_t fh = 0;
    int fh_valid = 0;
    /* under one guard, as a directory's close (vfs_close): the opendir and the fd table's
     * lock each took one, a pair of rt_sigprocmask in a program with a handler (git) */
    guard_enter();
    if (!(flags & O_PATH)) {
        int r = be->opendir(vp->mnt, vp->path, &fh);
        if (r < 0) {
            guard_leave();
            return be_errno(r);
        }
        fh_valid = 1;
    }
    int fd = placeholder_fd(flags);
    struct vfile *v = fd >= 0 ? vfile_new(VF_DIR, vp, flags, fh, fh_valid) : NULL;
    if (v == NULL) {
        int e = errno;
        if (fd >= 0)
            REAL(close)(fd);
        if (fh_valid)
            be->releasedir(vp->mnt, vp->path, fh);
        guard_leave();
        errno = e;
        return -1;
    }
    fdtable_set(fd, v);
    guard_leave();
    return fd;
}

static void release_fh(const struct vpath *vp, int flags, uint64_t fh)
{
    struct backend_ops *be = backend_get();
    guard_enter();
    be->release(vp->mnt, vp->path, flags, fh);
    guard_leave();
}

/* A cached file: a new open file description of the file's page cache (one per file in
 * this process: writes through one fd are seen through the others at once, and
 * flock/fcntl locks between them conflict as they should). */
static int open_cached(const struct vpath *vp, int flags, const struct open_result *res, off_t size,
                       int size_known, int trunc, uint64_t ino, const struct stat *st, uint64_t stamp)
{
    uint64_t fh = res->fh;
    int fresh;
    struct pcache *pc = pcache_open(vp, size, size_known, &fh, ino, st, stamp, &fresh);
    if (pc)
        pcache_opened(pc, res->open_flags);
    if (pc && trunc) {
        /* O_TRUNC: the FS and the cache together, under the cache's lock */
        int r = pcache_truncate_open(pc, vp->path, &fh);
        if (r < 0) {
            pcache_unref(pc);
            release_fh(vp, flags, fh);
            errno = -r;
            return -1;
        }
    }
    int fd = pc ? pcache_new_fd(pc, flags) : -1;
    struct vfile *v = fd >= 0 ? vfile_new(VF_FILE, vp, flags, fh, 1) : NULL;
    if (v == NULL) {
        int e = errno;
        if (fd >= 0)
            REAL(close)(fd);
        if (pc)
            pcache_unref(pc);
        release_fh(vp, flags, fh);
        errno = e;
        return -1;
    }
    v->pc = pc;
    if (fresh && !trunc)
        pcache_brought_whole(v);
    else if (!trunc)
        pcache_whole_to(v);
    v->direct_io = (res->open_flags & OPEN_DIRECT_IO) != 0;
    v->noflush = (res->open_flags & OPEN_NOFLUSH) != 0;
    v->holdable = (res->open_flags & OPEN_HOLD) && (flags & O_ACCMODE) == O_RDONLY && !(flags & O_TRUNC);
    if ((flags & O_APPEND) && size > 0 && (flags & O_ACCMODE) != O_RDONLY)
        pcache_fill(v, size - 1, 1, 0);     /* stdio appends past the wrappers, into this page */
    fdtable_set(fd, v);
    return fd;
}

/* stat(path) of a file this process holds open cached: its size is the cache's (a write
 * through another fd may be newer than the attribute cache). */
void vfs_patch_open_size(const struct vpath *vp, struct stat *st)
{
    if (!S_ISREG(st->st_mode) || __atomic_load_n(&ldp_nvfds, __ATOMIC_RELAXED) == 0)
        return;
    off_t size = pcache_size_of(vp->mnt, vp->path, (uint64_t)st->st_ino);
    if (size >= 0) {
        st->st_size = size;
        st->st_blocks = (size + 511) / 512;
    }
}

/*
 * fds the file system opens for itself live high (from fs_fd_base up): a program that
 * dup2()s onto a number it chose (the shell's `exec 3>f`, bash's fd 255) must not land on
 * the FS's database or lower file. A passthrough fd comes back down to the lowest free
 * number, where the program expects a new fd to be.
 */
static int fs_fd_base_value;

int fs_fd_base(void)
{
    if (fs_fd_base_value == 0) {
        struct rlimit rl;
        int base = 512;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < 1024)
            base = (int)rl.rlim_cur / 2;
        fs_fd_base_value = base > 16 ? base : 16;
    }
    return fs_fd_base_value;
}

int fs_fd(int fd)
{
    if (fd < 0 || fd >= fs_fd_base())
        return fd;
    int saved = errno;
    /* keep the fd's close-on-exec setting (Python asks for it; a C library may not) */
    int fdflags = REAL(fcntl)(fd, F_GETFD);
    int high = REAL(fcntl)(fd, fdflags >= 0 && !(fdflags & FD_CLOEXEC) ? F_DUPFD : F_DUPFD_CLOEXEC, fs_fd_base());
    if (high < 0) {
        errno = saved;
        return fd;          /* no room up there: keep it where it is */
    }
    REAL(close)(fd);
    errno = saved;
    return high;
}

/* fs_fd of an fd that is to be close-on-exec whatever it was (a page cache's memfd): the
 * dup sets it, with no F_GETFD before nor F_SETFD after */
int fs_fd_cloexec(int fd)
{
    if (fd < 0)
        return fd;
    int saved = errno;
    int high = fd < fs_fd_base() ? REAL(fcntl)(fd, F_DUPFD_CLOEXEC, fs_fd_base()) : -1;
    if (high >= 0)
        REAL(close)(fd);
    else
        REAL(fcntl)(high = fd, F_SETFD, FD_CLOEXEC);
    errno = saved;
    return high;
}

static int open_passthrough(const struct vpath *vp, int pfd, int fd_flags_set, int flags)
{
    int cmd = (flags & O_CLOEXEC) ? F_DUPFD_CLOEXEC : F_DUPFD;
    if (pfd >= fs_fd_base()) {
        int low = REAL(fcntl)(pfd, cmd, 0);
        if (low < 0)
            return -1;      /* not an fd at all: EBADF */
        REAL(close)(pfd);
        pfd = low;
    } else if (!fd_flags_set && REAL(fcntl)(pfd, F_SETFD, (flags & O_CLOEXEC) ? FD_CLOEXEC : 0) < 0) {
        /* opened low on purpose (Passthrough.open): Python's os.open makes fds
         * close-on-exec (PEP 446), so give the caller what it asked */
        return -1;
    }
    /* read-only too: a change of its attributes through it must be told (but a backed
     * mount's names are in no cache: vfs/backing.c) */
    struct vfile *v = backing_uncached(vp->mnt) ? NULL : vfile_new(VF_PASSTHROUGH, vp, flags, 0, 0);
    if (v) {
        if (vfile_writes(v))
            writer_counted(v, 1);
        fdtable_set(pfd, v);
    }
    return pfd;
}

/* A cached file this process holds or keeps, unchanged, of a class that keeps
 * Operations' open and release (OPEN_LOCAL): an open for reading is made here, with no
 * request and no handle (vfile_ensure_fh opens one for the calls that need it), and its
 * close says nothing. Or of a class whose open only pins the file (OPEN_HOLD), the cache
 * holding the handle of an earlier open: the new open takes it, and its close holds it
 * again. st: the open's lookup. Returns the fd, or -2: ask the FS. */
static int local_open(const struct vpath *vp, int flags, const struct stat *st)
{
    unsigned open_flags;
    uint64_t fh;
    int fh_valid;
    struct pcache *pc;
    if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC) ||
        (pc = pcache_local(vp, st, flags, &open_flags, &fh, &fh_valid)) == NULL)
        return -2;
    int fd = pcache_new_fd(pc, flags);
    struct vfile *v = fd >= 0 ? vfile_new(VF_FILE, vp, flags, fh, fh_valid) : NULL;
    if (v == NULL) {
        int e = errno;
        if (fd >= 0)
            REAL(close)(fd);
        if (fh_valid)
            release_fh(vp, flags, fh);
        pcache_unref(pc);
        errno = e;
        return -1;
    }
    v->pc = pc;
    v->holdable = fh_valid;
    v->noflush = (open_flags & OPEN_NOFLUSH) != 0;
    pcache_whole_to(v);
    fdtable_set(fd, v);
    return fd;
}

/* The FS created (exists 0) or opened (exists 1, st its attributes, fs_st as the FS gave
 * them: not patched with a held cache's size) the file: give the program its fd. */
static int open_made(const struct vpath *vp, int flags, int exists, const struct stat *st,
                     struct open_result *res, const struct stat *fs_st, uint64_t stamp)
{
    if (!exists || (flags & O_TRUNC))
        attrcache_changed_in(vp->mnt);
    if (res->passthrough_fd >= 0)
        return open_passthrough(vp, res->passthrough_fd, res->fd_flags_set, flags);
    int trunc = exists && (flags & O_TRUNC) && (flags & O_ACCMODE) != O_RDONLY;
    /* size_known: 1 created (empty, unless another process got there first) or truncated */
    /* the file's inode number (unknown for one just made): its cache is that file's */
    return open_cached(vp, flags, res, exists && !trunc ? st->st_size : 0, trunc || !exists, trunc,
                       exists ? (uint64_t)st->st_ino : 0, exists ? fs_st : NULL, stamp);
}

/* open() of a name the attribute cache knows nothing about: the lookup and the open (or,
 * O_CREAT, the create) in one backend call (backend.h create_open), what the lookup found
 * kept as a lookup's answer. Returns the fd or -1 with errno, or -2: look up as usual. */
/* Does a symlink among vp's directories change where it leads? (a copy of vp: its own
 * frame, on the stack only when asked) */
__attribute__((noinline)) static int parents_have_links(const struct vpath *vp)
{
    struct vpath up;
    vpath_copy(&up, vp);
    return vfs_resolve_parents(&up) != 0;
}

static int lookup_open_asked(const struct vpath *vp, int flags, mode_t mode, int parent_is_dir);

static int lookup_open(const struct vpath *vp, int flags, mode_t mode)
{
    struct backend_ops *be = backend_get();
    struct stat st;
    if (be->create_open == NULL || (flags & (O_PATH | O_DIRECTORY)) || vp->trailing_slash)
        return -2;
    /* a backing tree's names are in no cache (backing_uncached): nothing to look at first,
     * and its calls keep their own guard (vfs/backing.c: they run without one) */
    if (backing_uncached(vp->mnt))
        return vpath_name_too_long(vp->path) ? -2 : lookup_open_asked(vp, flags, mode, 0);
    if (attrcache_get(vp->mnt, vp->path, &st) != 0 || vpath_name_too_long(vp->path))
        return -2;
    /* the directory as the cache knows it: a directory, or let the server look */
    char dir[ATTRCACHE_PATH_MAX];
    const char *slash = strrchr(vp->path, '/');
    size_t dl = slash && slash != vp->path ? (size_t)(slash - vp->path) : 1;
    int parent_is_dir = 0;
    if (dl < sizeof dir) {
        memcpy(dir, vp->path, dl);
        dir[dl] = '\0';
        parent_is_dir = attrcache_get(vp->mnt, dir, &st) > 0 && S_ISDIR(st.st_mode);
    }
    /* one guard for the whole open of a served file: its request, its page cache's
     * (table_lock, the entry's lock), the fd table's lock each took one, a Python reader
     * paid an rt_sigprocmask pair for each (bench/NOTES.md). Nothing in it waits but its
     * requests, which were guarded anyway. A backing tree's calls keep their own (they
     * run without one where they can: vfs/backing.c). */
    int whole = !backing_uncached(vp->mnt);
    if (whole)
        guard_enter();
    int fd = lookup_open_asked(vp, flags, mode, parent_is_dir);
    if (whole)
        guard_leave();
    return fd;
}

/* lookup_open's request and what follows it */
static int lookup_open_asked(const struct vpath *vp, int flags, mode_t mode, int parent_is_dir)
{
    struct backend_ops *be = backend_get();
    struct stat st;
    struct open_result res = { .passthrough_fd = -1 };
    int outcome;
    uint64_t stamp = attrcache_stamp(vp->mnt, vp->path), changes = attrcache_change_stamp(vp->mnt, vp->path);
    /* a backing tree's create or open blocks no signal: vfs/backing.c CLASS */
    int r = BACKEND_CALL(vp->mnt, be->create_open(vp->mnt, vp->path, S_IFREG | (mode & 07777 & ~ldp_umask),
                                                  flags & ~O_NOCTTY, parent_is_dir, &res, &st, &outcome));
    if (be->answer_stamp) {
        /* a first request, made before this process had the table of changes: the
         * server's stamp of the name stands for the one it could not take */
        uint64_t server = be->answer_stamp();
        if (server) {
            stamp = attrcache_stamp_from(server);
            changes = server;
        }
    }
    /* kept as a lookup's answer; not a tree's or a union's passthrough file, which no cache
     * keeps (attrcache_put) and nothing below reads: the fix-up's hash of the path was 3%
     * of a backed open+read+close (bench/NOTES.md) */
    if ((outcome == CO_EXISTS || outcome == CO_OPENED) &&
        (res.passthrough_fd < 0 || !backing_uncached(vp->mnt)))
        vfs_keep_attr(vp, &st, stamp);
    if (outcome == CO_MISSING) {
        /* a backing tree's walk followed the symlinks among the directories, and nothing
         * of it is kept: no look for them (its buffers are malloc's, which a handler's
         * open of a missing name must not call while its thread is inside malloc) */
        if (backing_looks_up(vp->mnt, vp->path)) {
            errno = ENOENT;
            return -1;
        }
        /* kept as missing where a lookup would keep it: no symlink among its directories
         * (a name reached through one is not told of by its own name) */
        if (parents_have_links(vp))
            return -2;
        attrcache_put(vp->mnt, vp->path, NULL, stamp);
        errno = ENOENT;
        return -1;
    }
    if (outcome == CO_EXISTS && (flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL)) {
        errno = EEXIST;
        return -1;
    }
    if (outcome != CO_CREATED && outcome != CO_OPENED)
        return -2;
    if (r == -ENOENT && outcome == CO_OPENED)
        return -2;      /* removed between the server's lookup and its open */
    if (r < 0)
        return be_errno(r);
    struct stat fs_st = st;
    if (outcome == CO_OPENED)
        vfs_patch_open_size(vp, &st);
    return open_made(vp, flags, outcome == CO_OPENED, &st, &res, &fs_st, changes);
}

/* open() of a passthrough file this process opened before with these flags, the name
 * unchanged since (backend.h open_decided): no lookup, no round trip. O_CREAT asks
 * nothing of a file that exists. Returns the fd, or -2: look up as usual. */
static int decided_open(struct backend_ops *be, const struct vpath *vp, int flags)
{
    if (be->open_decided == NULL || (flags & (O_EXCL | O_PATH | O_DIRECTORY | __O_TMPFILE)) ||
        vp->trailing_slash)
        return -2;
    int pfd = be->open_decided(vp->mnt, vp->path, flags & ~(O_CREAT | O_NOCTTY));
    if (pfd < 0)
        return -2;      /* errno as it was (backend.h) */
    struct open_result res = { .passthrough_fd = pfd, .fd_flags_set = 1 };
    return open_made(vp, flags, 1, NULL, &res, NULL, 0);
}

/* The open of a regular file that exists (st, fs_st: vfs_open_in_place's lookup): made
 * here when it can (local_open), else asked of the FS; O_CREAT makes it again if another
 * process removed it meanwhile. */
static int open_regular(struct backend_ops *be, struct vpath *vp, int flags, mode_t mode, struct stat *st,
                        const struct stat *fs_st, uint64_t stamp)
{
    int fd = local_open(vp, flags, fs_st);
    if (fd != -2)
        return fd;
    struct open_result res = { .passthrough_fd = -1 };
    int exists = 1;
    int r = BACKEND_CALL(vp->mnt, be->open(vp->mnt, vp->path, flags & ~(O_CREAT | O_EXCL | O_NOCTTY), &res));
    if (r == -ENOENT && (flags & O_CREAT)) {
        /* another process removed it since we looked (sqlite's journal): O_CREAT makes it
         * again, as the kernel would */
        attrcache_invalidate();
        exists = 0;
        r = BACKEND_CALL(vp->mnt, be->create(vp->mnt, vp->path, S_IFREG | (mode & 07777 & ~ldp_umask),
                                             flags & ~O_NOCTTY, &res));
    }
    if (r < 0)
        return be_errno(r);
    return open_made(vp, flags, exists, st, &res, fs_st, stamp);
}

int vfs_open(const struct vpath *vp0, int flags, mode_t mode)
{
    struct vpath vp;
    vpath_copy(&vp, vp0);
    return vfs_open_in_place(&vp, flags, mode);
}

int vfs_open_in_place(struct vpath *vp, int flags, mode_t mode)
{
    struct backend_ops *be = backend_get();
    if (be == NULL) {
        errno = EIO;
        return -1;
    }
    int fd = backing_open_here(vp, flags, mode);
    if (fd != -2)
        return fd < 0 ? fd : open_passthrough(vp, fd, 1, flags);
    fd = decided_open(be, vp, flags);
    if (fd != -2)
        return fd;
    fd = lookup_open(vp, flags, mode);
    if (fd != -2)
        return fd;
    int excl = (flags & (O_CREAT | O_EXCL)) == (O_CREAT | O_EXCL);
    struct stat st, fs_st;
    int looked = LOOKED_UNKNOWN;
    int had_table = attrcache_coherent();
    uint64_t stamp = attrcache_change_stamp(vp->mnt, vp->path);  /* before the lookup */
    if (!(flags & O_NOFOLLOW) && !excl) {
        char out[PATH_MAX];
        int r = vfs_follow_stat(vp, out, sizeof out, &st, &looked);
        if (r < 0)
            return -1;
        if (r == 0)
            return REAL(open)(out, flags, mode);
    }
    int exists;
    if (looked == LOOKED_FOUND) {
        exists = !vp->trailing_slash || S_ISDIR(st.st_mode) || (errno = ENOTDIR, 0);
        if (!exists)
            return -1;
        fs_st = st;
        vfs_patch_open_size(vp, &st);
    } else if (looked == LOOKED_MISSING) {
        exists = 0;
        errno = ENOENT;
    } else {
        exists = vfs_getattr(vp, 0, &st) == 0;
        if (!exists && errno != ENOENT)
            return -1;
        fs_st = st;
    }
    if (!had_table && attrcache_coherent())
        stamp = attrcache_change_stamp(vp->mnt, vp->path);  /* the lookup was the process's first
                                                         * request: no stamp before it */
    struct open_result res = { .passthrough_fd = -1 };
    int r;
    if (exists) {
        if (excl) {
            errno = EEXIST;
            return -1;
        }
        if (S_ISLNK(st.st_mode) && !(flags & O_PATH)) {
            errno = ELOOP;
            return -1;
        }
        if (S_ISDIR(st.st_mode)) {
            if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_CREAT)) {
                errno = EISDIR;
                return -1;
            }
            return open_dir(vp, flags);
        }
        if ((flags & O_DIRECTORY) || vp->trailing_slash) {
            errno = ENOTDIR;
            return -1;
        }
        if (flags & O_PATH) {
            int fd = placeholder_fd(flags);
            struct vfile *v = fd >= 0 ? vfile_new(VF_PATH, vp, flags, 0, 0) : NULL;
            if (v)
                fdtable_set(fd, v);
            return fd;
        }
        if (be->open_special && !S_ISREG(st.st_mode) && !S_ISLNK(st.st_mode)) {
            r = be->open_special(vp->mnt, vp->path, &st, flags & ~(O_CREAT | O_EXCL));
            return r < 0 ? be_errno(r) : r;
        }
        if (S_ISREG(st.st_mode)) {
            /* a served file's under one guard, as lookup_open above */
            int whole = !backing_uncached(vp->mnt);
            if (whole)
                guard_enter();
            int fd = open_regular(be, vp, flags, mode, &st, &fs_st, stamp);
            if (whole)
                guard_leave();
            return fd;
        }
        r = BACKEND_CALL(vp->mnt, be->open(vp->mnt, vp->path, flags & ~(O_CREAT | O_EXCL | O_NOCTTY), &res));
        if (r == -ENOENT && (flags & O_CREAT)) {
            attrcache_invalidate();     /* removed since we looked: as open_regular */
            exists = 0;
            r = BACKEND_CALL(vp->mnt, be->create(vp->mnt, vp->path, S_IFREG | (mode & 07777 & ~ldp_umask),
                                                 flags & ~O_NOCTTY, &res));
        }
        if (r < 0)
            return be_errno(r);
    } else {
        if (!(flags & O_CREAT)) {
            errno = ENOENT;
            return -1;
        }
        if (vp->trailing_slash || (flags & O_DIRECTORY)) {
            errno = EISDIR;
            return -1;
        }
        r = BACKEND_CALL(vp->mnt, be->create(vp->mnt, vp->path, S_IFREG | (mode & 07777 & ~ldp_umask),
                                             flags & ~O_NOCTTY, &res));
        if (r < 0)
            return be_errno(r);
    }
    return open_made(vp, flags, exists, &st, &res, &fs_st, stamp);
}

/* What close() of one duplicate does: flush (the data is already in the FS, but for stores
 * through a shared mapping); the last one releases. */
int vfs_flush(int fd, struct vfile *v)
{
    if (v->kind != VF_FILE)
        return 0;
    int ret = pcache_sync_untracked(v);
    int e = errno;
    struct backend_ops *be = backend_get();
    if (be && v->fh_valid && !v->noflush) {
        guard_enter();
        int r = be->flush(v->mnt, v->path, v->fh);
        guard_leave();
        if (r < 0 && ret == 0) {
            ret = -1;
            e = -r;
        }
    }
    errno = e;
    return ret;
}

int vfs_close(int fd, struct vfile *v)
{
    /* a cached file's close under one guard, as its open (vfs_open_in_place): the flush,
     * the fd table's lock, the page cache's let-go and the release each took one; none
     * of it waits but on the server, which was guarded anyway. A directory's too (the fd
     * table's lock, the releasedir, the names' lock), as its open (open_dir) */
    int whole = v->kind == VF_FILE || v->kind == VF_DIR;
    if (whole)
        guard_enter();
    int ret = vfs_flush(fd, v);
    int e = errno;
    fdtable_take(fd);
    vfs_lock_closed(v);     /* POSIX: any close of the file lets go of the process's locks */
    REAL(close)(fd);
    vfile_unref(v);
    if (whole)
        guard_leave();
    errno = e;
    return ret;
}

int vfs_sync(int fd, struct vfile *v, int datasync)
{
    if (v->kind != VF_FILE)
        return 0;
    if (pcache_sync_untracked(v) < 0 || vfile_ensure_fh(v) < 0)
        return -1;
    struct backend_ops *be = backend_get();
    guard_enter();
    int r = be->fsync(v->mnt, v->path, datasync, v->fh);
    guard_leave();
    return be_errno(r);
}

/* ioctl on a file the FS serves: its ioctl() answers (ENOTTY by default), as FUSE's; the
 * requests below are the kernel's VFS's for every regular file, answered on the fd. */
int vfs_ioctl(int fd, struct vfile *v, unsigned long request, void *arg)
{
    struct backend_ops *be = backend_get();
    if (be->ioctl == NULL || request == FIOCLEX || request == FIONCLEX || request == FIONBIO ||
        request == FIOASYNC || request == FIONREAD || request == FIOQSIZE || request == FIGETBSZ)
        return REAL(ioctl)(fd, request, arg);
    if (vfile_ensure_fh(v) < 0)
        return -1;
    guard_enter();
    int r = be->ioctl(v->mnt, v->path, (unsigned int)request, arg, v->fh, 0,
                      _IOC_SIZE(request) ? arg : NULL);
    guard_leave();
    return (int)be_errno(r);
}

/* A virtual fd inherited through exec: the record comes from the old image, the FS
 * handle does not (this process has its own FS object); one is opened when needed. Or one
 * received over a unix socket (interpose/pass_fd.c): with the handle the server let this
 * process use (fh), or, with no server, one opened when needed. */
int vfs_adopt(int fd, int kind, const struct vpath *vp, int flags, const uint64_t *fh)
{
    /* a claimed handle: this process's last close says so (W_RELEASE: the server counts
     * the claimant's hold down, the handle staying its opener's while it holds it) */
    struct vfile *v = vfile_new(kind, vp, flags, fh ? *fh : 0, fh ? 1 : 0);
    if (v == NULL)
        return -1;
    if (kind == VF_FILE && (v->pc = pcache_adopt(fd, vp)) == NULL) {
        ldp_log(LOG_WARNING, "fd %d (%s): no cache of it here", fd, vp->path);
        free(v->path);
        free(v);
        return -1;
    }
    if (kind == VF_FILE && fd == 0 && (flags & O_ACCMODE) != O_WRONLY)
        pcache_fill(v, 0, 0, 1);    /* stdin: glibc's stdio reads it past every wrapper */
    if (kind == VF_PASSTHROUGH && vfile_writes(v))
        writer_counted(v, 1);
    fdtable_set(fd, v);
    return 0;
}

/* Give an adopted vfile an FS handle of this process. */
int vfile_ensure_fh(struct vfile *v)
{
    if (v->fh_valid || (v->kind != VF_FILE && v->kind != VF_DIR))
        return 0;
    struct backend_ops *be = backend_get();
    if (be == NULL) {
        errno = EIO;
        return -1;
    }
    int r;
    guard_enter();
    if (v->kind == VF_DIR) {
        r = be->opendir(v->mnt, v->path, &v->fh);
    } else {
        struct open_result res = { .passthrough_fd = -1 };
        r = be->open(v->mnt, v->path, v->flags & ~(O_CREAT | O_EXCL | O_TRUNC | O_NOCTTY), &res);
        if (r == 0 && res.passthrough_fd >= 0)
            REAL(close)(res.passthrough_fd);    /* the fd is our cache's */
        v->fh = res.fh;
    }
    guard_leave();
    if (r < 0)
        return be_errno(r);
    v->fh_valid = 1;
    return 0;
}

/* Keep open files' paths right when their names change under them. Another thread may
 * be using an open file's old path (in an FS call) while it is renamed, so old paths are
 * not freed at once: they wait in a ring of the last RETIRED ones (a thread would have to
 * stay in one call while that many open files are renamed to see one freed). Renames and
 * unlinks walk the fd table one at a time. */
#define RETIRED 4096
static char *retired[RETIRED];
static unsigned retired_next;
static void retire_path(char *old)
{
    unsigned i = retired_next++ % RETIRED;
    free(retired[i]);
    retired[i] = old;
}

/* Both walk the fd table under names_lock, with signals blocked (a handler's rename or
 * unlink on this thread would wait for the lock forever); a process with no entry in the
 * table (every file of a backing tree is the kernel's: open_passthrough keeps none) has
 * nothing to walk and blocks nothing. An entry another thread adds meanwhile is an open
 * that raced this change, as it could have taken the lock just after the walk. */
void vfs_renamed(int mnt, const char *from, const char *to)
{
    if (__atomic_load_n(&ldp_nvfds, __ATOMIC_ACQUIRE) == 0) {
        pcache_renamed(mnt, from, to);
        return;
    }
    guard_enter();
    pthread_mutex_lock(&names_lock);
    size_t fl = strlen(from);
    for (int fd = 0; fd <= fdtable_max(); fd++) {
        struct vfile *v = fdtable_get(fd);
        if (v == NULL || v->mnt != mnt || strncmp(v->path, from, fl) != 0 ||
            (v->path[fl] != '\0' && v->path[fl] != '/'))
            continue;
        char *np = malloc(strlen(to) + strlen(v->path + fl) + 1);
        if (np == NULL)
            continue;
        strcpy(np, to);
        strcat(np, v->path + fl);
        if (v->kind == VF_PASSTHROUGH && vfile_writes(v)) {
            attrcache_writer(mnt, v->path, -1);
            attrcache_writer(mnt, np, 1);
        }
        retire_path(__atomic_exchange_n(&v->path, np, __ATOMIC_ACQ_REL));
    }
    pthread_mutex_unlock(&names_lock);
    guard_leave();
    pcache_renamed(mnt, from, to);
}

void vfs_unlinked(int mnt, const char *path)
{
    if (__atomic_load_n(&ldp_nvfds, __ATOMIC_ACQUIRE) != 0) {
        guard_enter();
        pthread_mutex_lock(&names_lock);
        for (int fd = 0; fd <= fdtable_max(); fd++) {
            struct vfile *v = fdtable_get(fd);
            if (v && v->mnt == mnt && strcmp(v->path, path) == 0)
                v->unlinked = 1;
        }
        pthread_mutex_unlock(&names_lock);
        guard_leave();
    }
    pcache_unlinked(mnt, path);
}

/* At exit, and before exec: stores through shared mappings reach the FS, and every
 * process hears that the passthrough files still open for writing here were written (a
 * program that exits without closing its output, `prog > f`, tells at its exit). */
void ldp_sync_all(void)
{
    if (__atomic_load_n(&ldp_nvfds, __ATOMIC_ACQUIRE) == 0)
        return;
    for (int fd = 0; fd <= fdtable_max(); fd++) {
        struct vfile *v = fdtable_get(fd);
        if (v && v->kind == VF_FILE)
            pcache_sync_untracked(v);
        if (v && v->kind == VF_PASSTHROUGH && vfile_writes(v))
            vfs_passthrough_changed(v);
    }
}

/* Before exec (and posix_spawn, whose file actions may dup2 any fd of ours onto a number
 * the child keeps): what the new image inherits is filled whole. The new image may run
 * without the interposer (static, setuid, LD_PRELOAD dropped) or read through stdio, and
 * then must not read the cache's unfilled holes as zeros. */
void ldp_before_exec(int every_fd)
{
    if (__atomic_load_n(&ldp_nvfds, __ATOMIC_ACQUIRE) == 0)
        return;
    for (int fd = 0; fd <= fdtable_max(); fd++) {
        struct vfile *v = fdtable_get(fd);
        if (v == NULL || v->kind != VF_FILE || v->pc == NULL)
            continue;
        pcache_sync_untracked(v);
        int fdflags = REAL(fcntl)(fd, F_GETFD);
        if (fdflags >= 0 && (every_fd || !(fdflags & FD_CLOEXEC)) && (v->flags & O_ACCMODE) != O_WRONLY)
            pcache_fill(v, 0, 0, 1);
    }
}
