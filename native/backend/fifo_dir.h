/*
 * The command's FIFO directory (embedded mode): the launcher makes one private directory
 * for the command and names it in LDPFUSE_FIFO_DIR. A FIFO node of the FS is, for every
 * process of the command, the real FIFO named from its mount and path there, so processes
 * that each run their own instance of the FS (and those the launcher serves) meet in one
 * kernel pipe, and each opens it itself: blocking, signals and EINTR as natively. Shared
 * by embedded.c and server/fifos.c; no state.
 *
 * With -o allow_other the directory is sticky and writable by the command's other users
 * (their processes make the FIFOs they meet in), and its names follow from the FS's
 * paths: another user may put anything at a name first, or swap its own entry for a
 * symlink. So no name is followed: the directory is checked (lstat, run_dir_trusted), the
 * FIFO made (mknod never follows) and checked (lstat: a FIFO of a trusted owner), its
 * owner and mode changed through an O_PATH|O_NOFOLLOW fd of that same inode; the process
 * that uses it opens it O_NOFOLLOW and checks it is a FIFO (fifo_dir_checked).
 */
#ifndef LDPFUSE_FIFO_DIR_H
#define LDPFUSE_FIFO_DIR_H
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include "../run_dir.h"

/* The directory, or NULL when the launcher made none (a fusepy script's embedded run). */
static inline const char *fifo_dir_of_command(void)
{
    const char *d = getenv("LDPFUSE_FIFO_DIR");
    return d && d[0] == '/' ? d : NULL;
}

/* The real FIFO of (mnt, path): "<dir>/<mnt>-<FNV-1a 64 of path>"; -1 if it does not fit. */
static inline int fifo_dir_name(char *out, size_t size, const char *dir, int mnt, const char *path)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    for (const unsigned char *p = (const unsigned char *)path; *p; p++)
        h = (h ^ *p) * 0x100000001b3ULL;
    int n = snprintf(out, size, "%s/%d-%016llx", dir, mnt, (unsigned long long)h);
    return n > 0 && (size_t)n < size ? 0 : -1;
}

/* The real FIFO at `real`, made if missing, with owner (where we are root) and mode as the
 * FS says (want); one that is not a FIFO, or that neither we, root, the directory's owner
 * (the launcher) nor the FS's owner of the node made, is not the FS's: -ENXIO. 0 or -errno.
 * One that is right already (each open after the first) costs a mknodat and an lstat, and
 * no fd: a program whose clone dup2()s over the next free fd meanwhile loses nothing. */
static inline int fifo_dir_settle(const char *real, const struct stat *want)
{
    const char *slash = strrchr(real, '/');
    char dir[PATH_MAX], proc[64];
    if (slash == NULL || slash == real || (size_t)(slash - real) >= sizeof dir)
        return -EINVAL;
    memcpy(dir, real, (size_t)(slash - real));
    dir[slash - real] = '\0';
    struct stat ds, rs, fs;
    if (run_dir_lstat(dir, &ds) < 0 || !run_dir_trusted(&ds))
        return -EACCES;
    /* EEXIST, made before, is the common answer: what is there is what the lstat shows
     * (errno is read only if that fails too: a clone sharing our TLS may change it) */
    if (syscall(SYS_mknodat, AT_FDCWD, real, S_IFIFO | 0600, 0) < 0 && run_dir_lstat(real, &rs) < 0)
        return errno == ENOENT ? -ENXIO : -errno;
    if (run_dir_lstat(real, &rs) < 0)
        return -ENXIO;
    uid_t me = geteuid();
    if (!S_ISFIFO(rs.st_mode) ||
        (rs.st_uid != me && rs.st_uid != 0 && rs.st_uid != ds.st_uid && rs.st_uid != want->st_uid))
        return -ENXIO;
    /* who may open it is what the FS says now */
    int chown_it = me == 0 && (rs.st_uid != want->st_uid || rs.st_gid != want->st_gid);
    int chmod_it = (me == 0 || rs.st_uid == me) && (rs.st_mode & 07777) != (want->st_mode & 07777);
    if (!chown_it && !chmod_it)
        return 0;
    /* changed through its own fd: the inode the lstat saw, whatever is at the name now. An
     * fd that is not that inode right after the open was taken over (a clone sharing the
     * fd table dup2()ed onto it): not ours to close; open again */
    for (int attempt = 0; attempt < 4; attempt++) {
        int r = 0, fd = (int)syscall(SYS_openat, AT_FDCWD, real, O_PATH | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0)
            return -ENXIO;
        if (syscall(SYS_newfstatat, fd, "", &fs, AT_EMPTY_PATH) < 0)
            continue;
        if (!S_ISFIFO(fs.st_mode)) {
            struct stat now;
            if (run_dir_lstat(real, &now) < 0 || now.st_dev != fs.st_dev || now.st_ino != fs.st_ino)
                continue;
            syscall(SYS_close, fd);     /* what is at the name now: not a FIFO */
            return -ENXIO;
        }
        if (fs.st_dev != rs.st_dev || fs.st_ino != rs.st_ino)
            r = -ENXIO;     /* another FIFO at the name now: not the one checked */
        else if (chown_it && syscall(SYS_fchownat, fd, "", want->st_uid, want->st_gid, AT_EMPTY_PATH) < 0)
            r = -errno;
        /* an O_PATH fd takes no fchmod: its /proc/self/fd link names the inode itself */
        else if (chmod_it && (snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd),
                              syscall(SYS_fchmodat, AT_FDCWD, proc, want->st_mode & 07777) < 0))
            r = -errno;
        syscall(SYS_close, fd);
        return r;
    }
    return -ENXIO;
}

/* What a process of the command opened at a real FIFO's name (with O_NOFOLLOW: a symlink
 * another user swapped in is not followed) kept only if it is a FIFO. fd or -errno. */
static inline int fifo_dir_checked(int fd)
{
    struct stat st;
    if (fd < 0)
        return errno == ENOENT || errno == ELOOP ? -ENXIO : -errno;
    if (syscall(SYS_newfstatat, fd, "", &st, AT_EMPTY_PATH) < 0 || !S_ISFIFO(st.st_mode)) {
        syscall(SYS_close, fd);
        return -ENXIO;
    }
    return fd;
}
#endif
