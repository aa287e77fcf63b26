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
 * symlink. So nothing here goes by a name twice: the directory is opened O_NOFOLLOW and
 * checked (run_dir_trusted), the FIFO made and then opened O_PATH|O_NOFOLLOW in it, checked
 * to be a FIFO of a trusted owner, and its owner and mode changed through that fd; the
 * process that uses it opens it O_NOFOLLOW and checks it is a FIFO (fifo_dir_open).
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
 * (the launcher) nor the FS's owner of the node made, is not the FS's: -ENXIO. 0 or -errno. */
static inline int fifo_dir_settle(const char *real, const struct stat *want)
{
    const char *slash = strrchr(real, '/');
    char dir[PATH_MAX], proc[64];
    if (slash == NULL || slash == real || (size_t)(slash - real) >= sizeof dir)
        return -EINVAL;
    memcpy(dir, real, (size_t)(slash - real));
    dir[slash - real] = '\0';
    struct stat ds, rs;
    int r = 0, fd = -1;
    int dfd = (int)syscall(SYS_openat, AT_FDCWD, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dfd < 0)
        return -errno;
    if (syscall(SYS_newfstatat, dfd, "", &ds, AT_EMPTY_PATH) < 0 || !run_dir_trusted(&ds)) {
        r = -EACCES;
        goto out;
    }
    if (syscall(SYS_mknodat, dfd, slash + 1, S_IFIFO | 0600, 0) < 0 && errno != EEXIST) {
        r = -errno;
        goto out;
    }
    fd = (int)syscall(SYS_openat, dfd, slash + 1, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0 || syscall(SYS_newfstatat, fd, "", &rs, AT_EMPTY_PATH) < 0) {
        r = -ENXIO;
        goto out;
    }
    uid_t me = geteuid();
    if (!S_ISFIFO(rs.st_mode) ||
        (rs.st_uid != me && rs.st_uid != 0 && rs.st_uid != ds.st_uid && rs.st_uid != want->st_uid)) {
        r = -ENXIO;
        goto out;
    }
    /* who may open it is what the FS says now */
    if (me == 0 && (rs.st_uid != want->st_uid || rs.st_gid != want->st_gid) &&
        syscall(SYS_fchownat, fd, "", want->st_uid, want->st_gid, AT_EMPTY_PATH) < 0) {
        r = -errno;
        goto out;
    }
    /* an O_PATH fd takes no fchmod: its /proc/self/fd link names the inode itself */
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    if ((me == 0 || rs.st_uid == me) && (rs.st_mode & 07777) != (want->st_mode & 07777) &&
        syscall(SYS_fchmodat, AT_FDCWD, proc, want->st_mode & 07777) < 0)
        r = -errno;
out:
    if (fd >= 0)
        syscall(SYS_close, fd);
    syscall(SYS_close, dfd);
    return r;
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
