/*
 * O_TMPFILE on a directory in a mount: an unnamed file, as ext4 and tmpfs give. fusepy's
 * API has no such operation, so the file is created under a hidden name in that directory
 * (".ldpfuse-tmpfile-PID-N") and unlinked at once: the fd stays usable, as any open file
 * whose name was removed, and the name is gone before the program sees the fd.
 * linkat(fd, "", dir, name, AT_EMPTY_PATH) and linkat(AT_FDCWD, "/proc/self/fd/N", ...,
 * AT_SYMLINK_FOLLOW) give it a name: a new file made through the FS with the fd's bytes
 * and mode (the FS cannot link a name to a file it has forgotten). O_EXCL makes it
 * unlinkable, as natively.
 */
#include "../ldpfuse.h"
#include "tmpfile.h"
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The unnamed files this process made: fd, and the kernel's identity of that fd (a reused
 * number is not mistaken for one). */
#define MAX_TMPFILES 64
static struct tmpfile {
    int fd;
    int mnt;
    int excl;
    dev_t dev;
    ino_t ino;
} tmpfiles[MAX_TMPFILES];
static int ntmpfiles;
static pthread_mutex_t tmpfiles_lock = PTHREAD_MUTEX_INITIALIZER;

/* fork: taken across it (interpose/init.c), so the child never finds the table half
 * written by a thread it does not have; nothing else is locked under it */
void tmpfile_fork(int phase)
{
    if (phase == 0)
        pthread_mutex_lock(&tmpfiles_lock);
    else
        pthread_mutex_unlock(&tmpfiles_lock);
}

static void remember(int fd, int mnt, int excl)
{
    struct stat st;
    if (REAL(fstat)(fd, &st) < 0)
        return;
    pthread_mutex_lock(&tmpfiles_lock);
    /* an entry with the same number is of a closed fd (whose inode may be reused) */
    int slot = -1;
    for (int i = 0; i < ntmpfiles && slot < 0; i++)
        if (tmpfiles[i].fd == fd)
            slot = i;
    if (slot < 0)
        slot = ntmpfiles < MAX_TMPFILES ? ntmpfiles++ : (int)(st.st_ino % MAX_TMPFILES);
    tmpfiles[slot] = (struct tmpfile){ fd, mnt, excl, st.st_dev, st.st_ino };
    pthread_mutex_unlock(&tmpfiles_lock);
}

/* The entry of fd if it is an unnamed file of ours, else NULL (copied to *out). */
static int recall(int fd, struct tmpfile *out)
{
    struct stat st;
    if (fd < 0 || REAL(fstat)(fd, &st) < 0)
        return 0;
    int found = 0;
    pthread_mutex_lock(&tmpfiles_lock);
    for (int i = 0; i < ntmpfiles && !found; i++)
        if (tmpfiles[i].fd == fd && tmpfiles[i].dev == st.st_dev && tmpfiles[i].ino == st.st_ino) {
            *out = tmpfiles[i];
            found = 1;
        }
    pthread_mutex_unlock(&tmpfiles_lock);
    return found;
}

int tmpfile_open(const struct vpath *dir, int flags, mode_t mode)
{
    int acc = flags & O_ACCMODE;
    if (acc != O_WRONLY && acc != O_RDWR) {
        errno = EINVAL;
        return -1;
    }
    struct stat st;
    if (vfs_getattr(dir, 1, &st) < 0)
        return -1;
    if (!S_ISDIR(st.st_mode)) {
        errno = ENOTDIR;
        return -1;
    }
    static unsigned counter;
    struct vpath vp;
    vpath_copy(&vp, dir);
    vp.trailing_slash = 0;
    size_t len = strlen(dir->path);
    int fd = -1;
    for (int tries = 0; tries < 100 && fd < 0; tries++) {
        unsigned n = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
        if ((size_t)snprintf(vp.path, sizeof vp.path, "%s/.ldpfuse-tmpfile-%d-%u",
                             len == 1 ? "" : dir->path, (int)getpid(), n) >= sizeof vp.path) {
            errno = ENAMETOOLONG;
            return -1;
        }
        int oflags = (flags & ~(__O_TMPFILE | O_EXCL)) | O_CREAT | O_EXCL;
        fd = vfs_open(&vp, oflags, mode);
        if (fd < 0 && errno != EEXIST)
            return -1;
    }
    if (fd < 0)
        return -1;
    if (vfs_unlink(&vp) < 0) {
        int e = errno;
        close(fd);
        errno = e;
        return -1;
    }
    remember(fd, dir->mnt, flags & O_EXCL);
    return fd;
}

/* linkat of an unnamed file into a mount: 1 if fd is one (result in *r), 0 if not. */
int tmpfile_link(int fd, const struct vpath *to, int *r)
{
    struct tmpfile t;
    if (!recall(fd, &t))
        return 0;
    *r = -1;
    if (t.excl) {
        errno = ENOENT;
        return 1;
    }
    if (t.mnt != to->mnt) {
        errno = EXDEV;
        return 1;
    }
    struct stat st;
    if (fstat(fd, &st) < 0)
        return 1;
    int out = vfs_open(to, O_WRONLY | O_CREAT | O_EXCL, st.st_mode & 07777);
    if (out < 0)
        return 1;
    /* the fd may be write-only: read its bytes through a second open of the same file */
    char self[32], buf[65536];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    int in = REAL(open)(self, O_RDONLY | O_CLOEXEC);
    ssize_t n = in < 0 ? -1 : 0;
    off_t off = 0;
    while (in >= 0 && (n = REAL(pread)(in, buf, sizeof buf, off)) > 0) {
        if (write(out, buf, (size_t)n) != n) {
            n = -1;
            break;
        }
        off += n;
    }
    int e = errno;
    if (in >= 0)
        REAL(close)(in);
    if (close(out) < 0 && n >= 0) {
        e = errno;
        n = -1;
    }
    if (n < 0) {
        errno = e;
        return 1;
    }
    *r = 0;
    return 1;
}
