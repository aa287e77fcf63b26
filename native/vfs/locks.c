/*
 * flock, fcntl and lockf locks on files the file system serves itself. Where every process
 * of the command opens one kernel file for the file, the kernel's locks already are the
 * file system's: a passthrough fd is the lower file, and a cached file in the shared mode
 * is an open of the one page cache memfd the server hands to every process (docs/cache.md),
 * so locks conflict between processes, go with the close of any fd (POSIX) or of the last
 * fd of the open file description (flock, OFD locks), and with the process.
 *
 * Where it does not (a cached file in the embedded mode, whose processes each have their
 * own page cache; a direct_io file, whose fd is no one else's), the locks are taken on a
 * stand-in instead: a file per (mount point, path) in the command's private directory
 * (run_dir.h), opened once per open file description (vfile), so that the kernel applies
 * its own rules between every process of the command: conflicts, l_pid in F_GETLK,
 * deadlock detection, EINTR for a wait a signal interrupts, release at close and exit.
 *
 * A class that has a lock method (fusepy's lock(path, fh, cmd, lock)) or a flock method
 * (mfusepy's) is offered every lock too, as kernel FUSE offers them to a file system that
 * takes them: once the command's own lock is held, the class is asked with F_SETLK (flock:
 * LOCK_NB), and a refusal takes the lock back and is the caller's error; a blocking request
 * the class refuses with EAGAIN or EACCES is asked again every 20 ms, the wait made here with
 * the program's signal mask (a handler ends it with EINTR, as natively); F_GETLK asks the
 * class when the command holds no conflicting lock. The class hears F_UNLCK at each close of
 * an fd it locked through (POSIX), and LOCK_UN at the last close of a description it flocked
 * (as libfuse's flush and release do). ENOSYS (Operations' answer, lock = None) is
 * remembered per mount: the class is not asked again.
 */
#include "../ldpfuse.h"
#include "../run_dir.h"
#include <stdio.h>
#include <stdlib.h>
#include <sys/file.h>
#include <time.h>

int vfs_lock_standin_needed(const struct vfile *v)
{
    if (v->kind != VF_FILE)
        return 0;
    if (v->direct_io)
        return 1;
    struct backend_ops *be = backend_get();
    return be == NULL || be->cache_open == NULL;
}

/* The stand-in's fd for this open file description, opened at its first lock. */
int vfs_lock_fd(struct vfile *v)
{
    int fd = __atomic_load_n(&v->lock_fd1, __ATOMIC_ACQUIRE) - 1;
    if (fd >= 0)
        return fd;
    char dir[PATH_MAX], name[PATH_MAX + 64];
    if (run_dir_get(dir, sizeof dir - 64) < 0) {
        errno = ENOLCK;
        return -1;
    }
    uint64_t h = fnv1a(fnv1a(fnv1a_seed(0), ldp_mounts[v->mnt].point, NULL), v->path, NULL);
    snprintf(name, sizeof name, "%s/lock-%016llx", dir, (unsigned long long)h);
    fd = REAL(open)(name, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        errno = ENOLCK;
        return -1;
    }
    struct stat st;
    if (REAL(fstat)(fd, &st) == 0 && st.st_uid == geteuid())
        fchmod(fd, 0666);       /* -o allow_other: the command's other users lock it too */
    fd = fs_fd(fd);
    int expected = 0;
    if (!__atomic_compare_exchange_n(&v->lock_fd1, &expected, fd + 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        REAL(close)(fd);        /* another thread was first */
        fd = expected - 1;
    }
    return fd;
}

/* l_whence SEEK_CUR and SEEK_END are the program's fd's offset and the file's size, not the
 * stand-in's (empty): made SEEK_SET. */
static int lock_absolute(int fd, struct vfile *v, const struct flock *in, struct flock *out)
{
    *out = *in;
    off_t base = 0;
    if (in->l_whence == SEEK_CUR) {
        base = REAL(lseek)(fd, 0, SEEK_CUR);
    } else if (in->l_whence == SEEK_END) {
        struct stat st;
        base = vfs_fgetattr(fd, v, &st) < 0 ? -1 : st.st_size;
    } else if (in->l_whence != SEEK_SET) {
        errno = EINVAL;
        return -1;
    }
    if (base < 0)
        return -1;
    out->l_whence = SEEK_SET;
    out->l_start = in->l_start + base;
    if (out->l_len < 0) {       /* POSIX: the bytes before l_start */
        out->l_start += out->l_len;
        out->l_len = -out->l_len;
    }
    if (out->l_start < 0) {
        errno = EINVAL;
        return -1;
    }
    return 0;
}

/* The class's answers: which mounts' classes said ENOSYS (bit 0: lock, bit 1: flock). */
static unsigned char *no_class;
static int no_class_n;

static int class_may(const struct vfile *v, int which)
{
    struct backend_ops *be = backend_get();
    if (be == NULL || (which == 0 ? be->lock == NULL : be->flock == NULL))
        return 0;
    unsigned char *nc = __atomic_load_n(&no_class, __ATOMIC_ACQUIRE);
    return !(nc && v->mnt < no_class_n && (nc[v->mnt] >> which) & 1);
}

static void class_says_enosys(const struct vfile *v, int which)
{
    if (__atomic_load_n(&no_class, __ATOMIC_ACQUIRE) == NULL) {
        unsigned char *nc = calloc((size_t)ldp_nmounts + 1, 1);
        unsigned char *expected = NULL;
        if (nc == NULL)
            return;
        no_class_n = ldp_nmounts;
        if (!__atomic_compare_exchange_n(&no_class, &expected, nc, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            free(nc);
    }
    if (v->mnt < no_class_n)
        __atomic_or_fetch(&no_class[v->mnt], (unsigned char)(1u << which), __ATOMIC_ACQ_REL);
}

/* One call of the class's lock (which 0: cmd, lk) or flock (which 1: op): 0 or -errno. */
static int class_call(struct vfile *v, int which, int cmd, struct flock *lk)
{
    if (!class_may(v, which))
        return -ENOSYS;
    if (vfile_ensure_fh(v) < 0)
        return -errno;
    struct backend_ops *be = backend_get();
    guard_enter();
    int r = which == 0 ? be->lock(v->mnt, v->path, v->fh, cmd, lk) : be->flock(v->mnt, v->path, v->fh, cmd);
    guard_leave();
    if (r == -ENOSYS)
        class_says_enosys(v, which);
    return r;
}

/* A blocking request the class refused: wait a little, as natively with the program's
 * signal mask. 0 to ask again, -1 (EINTR) when a handler ran. */
static int class_wait(void)
{
    struct timespec ts = { 0, 20 * 1000000L };
    if (nanosleep(&ts, NULL) < 0 && errno == EINTR)
        return -1;
    return 0;
}

/* The command's own lock: on the kernel file every process shares, or on the stand-in. */
static int local_fcntl(int fd, struct vfile *v, int cmd, struct flock *fl)
{
    if (!vfs_lock_standin_needed(v))
        return REAL(fcntl)(fd, cmd, fl);
    int acc = v->flags & O_ACCMODE;
    if ((cmd == F_SETLK || cmd == F_SETLKW || cmd == F_OFD_SETLK || cmd == F_OFD_SETLKW) &&
        ((fl->l_type == F_WRLCK && acc == O_RDONLY) || (fl->l_type == F_RDLCK && acc == O_WRONLY))) {
        errno = EBADF;      /* the stand-in is open for both: the program's fd is not */
        return -1;
    }
    int lfd = vfs_lock_fd(v);
    return lfd < 0 ? -1 : REAL(fcntl)(lfd, cmd, fl);
}

static int local_flock(int fd, struct vfile *v, int op)
{
    if (!vfs_lock_standin_needed(v))
        return REAL(flock)(fd, op);
    int lfd = vfs_lock_fd(v);
    return lfd < 0 ? -1 : REAL(flock)(lfd, op);
}

/* fcntl(fd, F_SETLK/F_SETLKW/F_GETLK and the OFD ones, arg) on a file the FS serves. */
int vfs_lock_fcntl(int fd, struct vfile *v, int cmd, struct flock *arg)
{
    struct flock fl;
    if (lock_absolute(fd, v, arg, &fl) < 0)
        return -1;
    if (cmd == F_GETLK || cmd == F_OFD_GETLK) {
        struct flock q = fl;
        if (local_fcntl(fd, v, cmd, &q) < 0)
            return -1;
        if (q.l_type == F_UNLCK && class_may(v, 0)) {
            struct flock c = fl;
            c.l_pid = getpid();
            int r = class_call(v, 0, F_GETLK, &c);
            if (r < 0 && r != -ENOSYS) {
                errno = -r;
                return -1;
            }
            if (r == 0 && c.l_type != F_UNLCK) {
                q = c;
                q.l_whence = SEEK_SET;
            }
        }
        *arg = q;
        return 0;
    }
    if (local_fcntl(fd, v, cmd, &fl) < 0)
        return -1;
    if (fl.l_type == F_UNLCK) {
        if (v->class_locked) {
            struct flock c = fl;
            c.l_pid = getpid();
            class_call(v, 0, F_SETLK, &c);
        }
        return 0;
    }
    if (!class_may(v, 0))
        return 0;
    int wait = cmd == F_SETLKW || cmd == F_OFD_SETLKW;
    for (;;) {
        struct flock c = fl;
        c.l_pid = getpid();
        int r = class_call(v, 0, F_SETLK, &c);
        if (r == 0) {
            v->class_locked = 1;
            return 0;
        }
        if (r == -ENOSYS)
            return 0;
        if (!wait || (r != -EAGAIN && r != -EACCES) || class_wait() < 0) {
            int e = r == -EAGAIN || r == -EACCES ? (wait ? EINTR : -r) : -r;
            struct flock undo = fl;
            undo.l_type = F_UNLCK;
            local_fcntl(fd, v, cmd == F_OFD_SETLKW || cmd == F_OFD_SETLK ? F_OFD_SETLK : F_SETLK, &undo);
            errno = e;
            return -1;
        }
    }
}

int vfs_lock_flock(int fd, struct vfile *v, int op)
{
    if (local_flock(fd, v, op) < 0)
        return -1;
    if (op & LOCK_UN) {
        if (v->class_flocked) {
            class_call(v, 1, LOCK_UN, NULL);
            v->class_flocked = 0;
        }
        return 0;
    }
    if (!class_may(v, 1))
        return 0;
    for (;;) {
        int r = class_call(v, 1, (op & ~LOCK_NB) | LOCK_NB, NULL);
        if (r == 0) {
            v->class_flocked = 1;
            return 0;
        }
        if (r == -ENOSYS)
            return 0;
        if ((op & LOCK_NB) || r != -EWOULDBLOCK || class_wait() < 0) {
            int e = r == -EWOULDBLOCK && !(op & LOCK_NB) ? EINTR : -r;
            local_flock(fd, v, LOCK_UN);
            errno = e;
            return -1;
        }
    }
}

/* An fd of the file is closed: the process's POSIX locks on it go (not its flock and OFD
 * locks: those go with the stand-in's description, at the vfile's last close), and the
 * class hears it (libfuse's flush unlocks the owner's locks). */
void vfs_lock_closed(struct vfile *v)
{
    int e = errno;
    int fd = __atomic_load_n(&v->lock_fd1, __ATOMIC_ACQUIRE) - 1;
    if (fd >= 0) {
        struct flock all = { .l_type = F_UNLCK, .l_whence = SEEK_SET };
        REAL(fcntl)(fd, F_SETLK, &all);
    }
    if (v->class_locked) {
        struct flock all = { .l_type = F_UNLCK, .l_whence = SEEK_SET, .l_pid = getpid() };
        class_call(v, 0, F_SETLK, &all);
        v->class_locked = 0;
    }
    errno = e;
}

/* The last fd of the description is closed: the class's flock on it goes (libfuse's
 * release with FUSE_RELEASE_FLOCK_UNLOCK). */
void vfs_lock_last_close(struct vfile *v)
{
    if (v->class_flocked && v->fh_valid == 1) {
        int e = errno;
        class_call(v, 1, LOCK_UN, NULL);
        errno = e;
    }
    v->class_flocked = 0;
}

void vfs_lock_release(struct vfile *v)
{
    int fd = v->lock_fd1 - 1;
    if (fd >= 0)
        REAL(close)(fd);
    v->lock_fd1 = 0;
}
