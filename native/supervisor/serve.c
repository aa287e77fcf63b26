/*
 * One notification: decode the call with calls.h, read its paths, and either let the
 * kernel run it (no path in a mount: SECCOMP_USER_NOTIF_FLAG_CONTINUE, the common case,
 * which reads one string and compares prefixes) or serve it by making the same call on
 * the mount path here, where the preload answers it, and give the caller the result: the
 * return value, the bytes the call writes (a struct stat, a link's target) written into
 * its memory, or for an open the fd installed in it (SECCOMP_IOCTL_NOTIF_ADDFD).
 *
 * A call is served only for a caller acting with our fsuid and fsgid and every effective
 * capability we have (the launcher's: the caller then could do natively all that the file
 * system does for it; root with capabilities dropped could not); any other gets
 * EACCES on mount paths (docs/supervisor.md). The notification is checked to be still
 * pending after its memory was read and before anything is done.
 */
#include "supervisor.h"
#include "calls.h"
#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <linux/audit.h>
#include <linux/openat2.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

static char scratch[1 << 20];

/* A file the preload serves from a page cache: the fd is a memfd. */
static int is_cached(int fd)
{
    char link[64], to[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(link, to, sizeof to - 1);
    return n >= 7 && memcmp(to, "/memfd:", 7) == 0;
}

/* Fill the whole page cache through the preload's reads (which fill missing ranges from
 * the file system): the caller's reads go to the kernel, past any wrapper. */
static int fill(int fd)
{
    off_t off = 0;
    for (;;) {
        ssize_t r = pread(fd, scratch, sizeof scratch, off);
        if (r < 0)
            return -errno;
        if (r == 0)
            return 0;
        off += r;
    }
}

/* The fd a caller gets for a cached file (fd: ours, filled): a reader, a read-only
 * description of the page cache itself (it must not write the cache others read); a
 * writer, a private memfd with the file's bytes, whose bytes writeback.c writes through fd
 * when the caller has closed it (fd is then writeback.c's). -errno on failure. */
static int handed_fd(int fd, const char *abs, int flags)
{
    char self[64];
    if ((flags & O_ACCMODE) == O_RDONLY) {
        snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
        int mine = open(self, O_RDONLY | O_CLOEXEC);
        return mine < 0 ? -errno : mine;
    }
    int priv = memfd_create("ldpfuse-supervised-writer", MFD_CLOEXEC);
    if (priv < 0)
        return -errno;
    int r = 0;
    if (!(flags & O_TRUNC) && (fcntl(fd, F_GETFL) & O_ACCMODE) != O_WRONLY) {
        for (off_t off = 0;;) {
            ssize_t n = pread(fd, scratch, sizeof scratch, off);
            if (n <= 0) {
                r = n < 0 ? -errno : 0;
                break;
            }
            if (pwrite(priv, scratch, (size_t)n, off) != n) {
                r = -EIO;
                break;
            }
            off += n;
        }
    }
    snprintf(self, sizeof self, "/proc/self/fd/%d", priv);
    int ro = r < 0 ? -1 : open(self, O_RDONLY | O_CLOEXEC);
    int mine = ro < 0 ? -1 : open(self, (flags & (O_ACCMODE | O_APPEND)) | O_CLOEXEC);
    if (r == 0 && mine < 0)
        r = -errno;
    close(priv);    /* before the watch: its close is no writer's */
    if (r < 0) {
        if (ro >= 0)
            close(ro);
        return r;
    }
    if (writeback_watch(fd, ro, abs) < 0) {
        close(mine);
        return -EIO;
    }
    return mine;
}

/* open(2) and its family on a mount path: returns 1 if the answer was sent (ADDFD_FLAG_SEND),
 * else -errno to answer. */
static int serve_open(struct sv_target *t, const char *abs, int flags, mode_t mode)
{
    struct stat st;
    int sr = (flags & O_NOFOLLOW) ? lstat(abs, &st) : stat(abs, &st);
    int fd;
    if (sr == 0 && S_ISDIR(st.st_mode)) {
        if ((flags & O_CREAT) && (flags & O_EXCL))
            return -EEXIST;
        if ((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC))
            return -EISDIR;
        /* a mount's directory: its shadow; a real one reached from a virtual cwd: itself */
        fd = mount_of(abs) >= 0 ? shadow_open(abs, 1) : open(abs, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        if (fd < 0)
            return mount_of(abs) >= 0 ? fd : -errno;
    } else {
        if (sr == 0 && (flags & O_DIRECTORY))
            return -ENOTDIR;
        /* a writer's fd here can read too, if the caller may: the cache is filled through
         * it, and the caller's partial writes are written back whole */
        int ours = (flags & ~O_CLOEXEC) | O_CLOEXEC;
        fd = -1;
        if ((flags & O_ACCMODE) == O_WRONLY)
            fd = open(abs, (ours & ~O_ACCMODE) | O_RDWR, mode);
        if (fd < 0)
            fd = open(abs, ours, mode);
        if (fd < 0)
            return -errno;
        if (is_cached(fd)) {
            int r = (fcntl(fd, F_GETFL) & O_ACCMODE) == O_WRONLY ? 0 : fill(fd);
            int mine = r < 0 ? r : handed_fd(fd, abs, flags);
            if (mine < 0) {
                close(fd);
                return mine;
            }
            if ((flags & O_ACCMODE) == O_RDONLY)
                close(fd);      /* a writer's fd is kept by writeback.c */
            fd = mine;
        }
    }
    struct seccomp_notif_addfd add = {
        .id = t->n->id,
        .flags = SECCOMP_ADDFD_FLAG_SEND,
        .srcfd = (unsigned)fd,
        .newfd = 0,
        .newfd_flags = (unsigned)(flags & O_CLOEXEC),
    };
    int r = ioctl(t->listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
    int e = errno;
    close(fd);
    return r >= 0 ? 1 : -e;
}

static long arg(const struct seccomp_notif *n, int i)
{
    return i >= 0 ? (long)n->data.args[i] : 0;
}

/* the answer of a call made here: its result, or -errno */
#define RESULT(call) ((call) < 0 ? -errno : 0)

static long serve_call(struct sv_target *t, const struct sv_call *c, const char *a1, const char *a2, mode_t umask_of)
{
    const struct seccomp_notif *n = t->n;
    long flags = c->flags_arg >= 0 ? arg(n, c->flags_arg) : 0;
    switch (c->op) {
    case SV_OPEN: {
        int fl = c->flags_arg >= 0 ? (int)flags : O_CREAT | O_WRONLY | O_TRUNC;
        return serve_open(t, a1, fl, (mode_t)arg(n, c->mode_arg) & 07777);
    }
    case SV_OPENAT2: {
        struct open_how how;
        if ((size_t)arg(n, 3) < sizeof how || target_read(t, (uint64_t)arg(n, 2), &how, sizeof how) < 0)
            return -EFAULT;
        if (how.resolve != 0)
            return -EOPNOTSUPP;
        return serve_open(t, a1, (int)how.flags, (mode_t)how.mode & 07777);
    }
    case SV_STAT: {
        struct stat st;
        int nofollow = c->flags_arg == -2 || (c->flags_arg >= 0 && (flags & AT_SYMLINK_NOFOLLOW));
        if ((nofollow ? lstat(a1, &st) : stat(a1, &st)) < 0)
            return -errno;
        return target_write(t, (uint64_t)arg(n, c->buf_arg), &st, sizeof st);
    }
    case SV_STATX: {
        struct statx sx;
        if (statx(AT_FDCWD, a1, (int)(flags & ~AT_EMPTY_PATH), (unsigned)arg(n, c->mode_arg), &sx) < 0)
            return -errno;
        return target_write(t, (uint64_t)arg(n, c->buf_arg), &sx, sizeof sx);
    }
    case SV_ACCESS:
        return RESULT(faccessat(AT_FDCWD, a1, (int)arg(n, c->mode_arg), (int)flags & AT_EACCESS));
    case SV_READLINK: {
        size_t size = (size_t)arg(n, c->buf_arg + 1);
        if ((long)size <= 0)
            return -EINVAL;
        char buf[PATH_MAX];
        ssize_t r = readlink(a1, buf, size < sizeof buf ? size : sizeof buf);
        if (r < 0)
            return -errno;
        int w = target_write(t, (uint64_t)arg(n, c->buf_arg), buf, (size_t)r);
        return w < 0 ? w : r;
    }
    case SV_MKDIR:
        return RESULT(mkdir(a1, (mode_t)arg(n, c->mode_arg) & 07777));
    case SV_UNLINK:
        return RESULT((flags & AT_REMOVEDIR) ? rmdir(a1) : unlink(a1));
    case SV_RMDIR:
        return RESULT(rmdir(a1));
    case SV_RENAME:
        return RESULT(flags ? renameat2(AT_FDCWD, a1, AT_FDCWD, a2, (unsigned)flags) : rename(a1, a2));
    case SV_LINK:
        return RESULT(linkat(AT_FDCWD, a1, AT_FDCWD, a2, (int)flags & AT_SYMLINK_FOLLOW));
    case SV_SYMLINK: {
        char target[PATH_MAX];
        ssize_t l = target_read_string(t, (uint64_t)arg(n, c->buf_arg), target, sizeof target);
        if (l < 0)
            return l;
        return RESULT(symlink(target, a1));
    }
    case SV_CHMOD:
        return RESULT(chmod(a1, (mode_t)arg(n, c->mode_arg) & 07777));
    case SV_CHOWN: {
        uid_t u = (uid_t)arg(n, c->mode_arg);
        gid_t g = (gid_t)arg(n, c->mode_arg + 1);
        int nofollow = c->flags_arg == -2 || (c->flags_arg >= 0 && (flags & AT_SYMLINK_NOFOLLOW));
        return RESULT(nofollow ? lchown(a1, u, g) : chown(a1, u, g));
    }
    case SV_TRUNCATE:
        return RESULT(truncate(a1, (off_t)arg(n, c->mode_arg)));
    case SV_UTIMENS: {
        struct timespec ts[2];
        uint64_t at = (uint64_t)arg(n, c->buf_arg);
        if (at && target_read(t, at, ts, sizeof ts) < 0)
            return -EFAULT;
        return RESULT(utimensat(AT_FDCWD, a1, at ? ts : NULL, (int)flags & AT_SYMLINK_NOFOLLOW));
    }
    }
    return -ENOSYS;
}

/* getcwd(2) of a caller whose cwd is in a mount (virtual, or a shadow): the mount path;
 * any other is continued */
static void serve_getcwd(struct sv_target *t, struct seccomp_notif_resp *resp)
{
    char dir[SV_PATH_MAX], link[64];
    if (!cwd_virtual(t->pid, dir, sizeof dir)) {
        snprintf(link, sizeof link, "/proc/%d/cwd", (int)t->pid);
        ssize_t n = readlink(link, dir, sizeof dir - 1);
        if (n <= 0)
            return;
        dir[n] = '\0';
        if (!shadow_unmap(dir, sizeof dir))
            return;
    }
    size_t len = strlen(dir) + 1, size = (size_t)t->n->data.args[1];
    if (!target_valid(t))
        return;
    resp->flags = 0;
    if (len > size)
        resp->error = -ERANGE;
    else if (target_write(t, t->n->data.args[0], dir, len) < 0)
        resp->error = -EFAULT;
    else
        resp->val = (long long)len;
}

static void send_resp(int listener, struct seccomp_notif_resp *resp)
{
    ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, resp);    /* ENOENT: the caller has gone */
}

/* --strict: one line in the launcher's record of escapes (ldpfuse_py/escapes.py reads it
 * at the end, names it and exits nonzero), as the preload's escape.c writes them */
static void record_refusal(pid_t pid, const char *call, const char *where)
{
    const char *file = getenv("LDPFUSE_ESCAPES_LOG");
    if (file == NULL || *file == '\0')
        return;
    char comm[64] = "?", name[64];
    snprintf(name, sizeof name, "/proc/%d/comm", (int)pid);
    int fd = open(name, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, comm, sizeof comm - 1);
        close(fd);
        comm[n > 0 ? n - 1 : 0] = '\0';
    }
    char line[SV_PATH_MAX + 256];
    int n = snprintf(line, sizeof line, "%d\t%s (supervised)\t%s\t%s\trefused with EIO (--strict)\n", (int)pid,
                     comm, call, where);
    if (n <= 0 || (size_t)n >= sizeof line)
        return;
    fd = open(file, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd >= 0) {
        (void)!write(fd, line, (size_t)n);
        close(fd);
    }
}


/* A call that names a mount path, under sv_serving (one at a time: the umask, the
 * preload's state and writeback.c are this process's). */
static void serve_mount_call(struct sv_target *tp, const struct sv_call *c, int m1, int m2, const char *a1,
                             const char *a2, int forced, struct seccomp_notif_resp *resp)
{
    struct sv_target t = *tp;
    int listener = t.listener;
    resp->flags = 0;
    mode_t umask_of = 022;
    long r;
    if (!target_is_us(&t, &umask_of)) {
        sv_log_once(1000 + c->nr, "pid %d made %s on %s as another user than the launcher's: refused (EACCES)",
                    (int)t.pid, c->name, m1 >= 0 ? a1 : a2);
        r = -EACCES;
    } else if (c->op == SV_CHDIR) {
        struct stat st;
        if (stat(a1, &st) < 0)
            r = -errno;
        else if (!S_ISDIR(st.st_mode))
            r = -ENOTDIR;
        else if (access(a1, X_OK) < 0)
            r = -errno;
        else {
            cwd_enter(t.pid, a1);
            r = 0;
        }
    } else if (c->op == SV_UNSERVED) {
        sv_log_once(c->nr, "pid %d made %s on %s: not served by the supervisor%s", (int)t.pid, c->name,
                    m1 >= 0 ? a1 : a2, sv_strict ? ": refused with EIO (--strict)" : "");
        if (!sv_strict && forced) {
            r = -ENOENT;    /* the kernel would look for the name elsewhere */
        } else if (!sv_strict) {
            resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
            send_resp(listener, resp);
            return;
        }
        record_refusal(t.pid, c->name, m1 >= 0 ? a1 : a2);
        r = -EIO;
    } else if (c->path2 >= 0 && m1 != m2) {
        r = -EXDEV;
    } else {
        umask(umask_of);
        r = serve_call(&t, c, a1, a2, umask_of);
        umask(0);
        if (r == 1 && (c->op == SV_OPEN || c->op == SV_OPENAT2))
            return;     /* ADDFD sent the answer */
    }
    if (r < 0) {
        resp->error = (int)r;
        resp->val = 0;
    } else {
        resp->error = 0;
        resp->val = r;
    }
    send_resp(listener, resp);
}

void serve_notification(int listener, struct seccomp_notif *n, struct seccomp_notif_resp *resp)
{
    memset(resp, 0, sizeof *resp);
    resp->id = n->id;
    resp->flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    const struct sv_call *c = sv_call_of(n->data.nr);
    struct sv_target t = { listener, n, (pid_t)n->pid };
    char p1[PATH_MAX], p2[PATH_MAX], a1[SV_PATH_MAX], a2[SV_PATH_MAX];
    if (c != NULL && c->op == SV_EXIT) {
        /* its closes for writing (a shell's redirection) are written before its parent's
         * wait returns; fds its exit closes are written just after */
        pthread_mutex_lock(&sv_serving);
        writeback_events();
        pthread_mutex_unlock(&sv_serving);
        cwd_leave(t.pid);
        send_resp(listener, resp);
        return;
    }
    if (c != NULL && c->op == SV_FCHDIR) {
        cwd_leave(t.pid);   /* the kernel's cwd again: a real directory or a shadow */
        send_resp(listener, resp);
        return;
    }
    if (c != NULL && c->op == SV_GETCWD) {
        serve_getcwd(&t, resp);
        send_resp(listener, resp);
        return;
    }
    if (c != NULL && c->nr == SYS_execve)
        cwd_hand_down(t.pid);   /* a preloaded program it becomes starts in its virtual cwd */
    if (c == NULL || n->data.arch != AUDIT_ARCH_X86_64 || (c->op == SV_UTIMENS && n->data.args[c->path] == 0)) {
        send_resp(listener, resp);
        return;
    }
    /* unreadable, too long or empty (AT_EMPTY_PATH): the kernel gives the caller its answer */
    ssize_t l1 = target_read_string(&t, n->data.args[c->path], p1, sizeof p1);
    int m1 = -1, m2 = -1, forced = 0, v;
    if (l1 > 0 && (v = target_resolve(&t, c->dirfd >= 0 ? (long)(int)n->data.args[c->dirfd] : AT_FDCWD, p1, a1, sizeof a1)) >= 0) {
        m1 = mount_of(a1);
        forced |= v;
    }
    if (c->path2 >= 0) {
        ssize_t l2 = target_read_string(&t, n->data.args[c->path2], p2, sizeof p2);
        if (l2 > 0 && (v = target_resolve(&t, c->dirfd2 >= 0 ? (long)(int)n->data.args[c->dirfd2] : AT_FDCWD, p2, a2, sizeof a2)) >= 0) {
            m2 = mount_of(a2);
            forced |= v;
        }
    }
    if (c->op == SV_CHDIR && m1 < 0 && !forced)
        cwd_leave(t.pid);   /* the kernel's chdir, to where the name says */
    if (m1 < 0 && m2 < 0 && !forced) {
        send_resp(listener, resp);
        return;
    }
    if (!target_valid(&t))
        return;     /* the caller was interrupted or has gone: nothing to answer */
    pthread_mutex_lock(&sv_serving);
    writeback_events();     /* a writer's close before this call reaches the file system first */
    serve_mount_call(&t, c, m1, m2, a1, a2, forced, resp);
    pthread_mutex_unlock(&sv_serving);
}
