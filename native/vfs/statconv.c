/* struct stat -> struct statx, struct statvfs -> struct statfs. */
#include "../ldpfuse.h"
#include <string.h>
#include <sys/sysmacros.h>

/* fstatfs/statfs's f_type for a mount. FUSE's own type numbers (fuseblk, fusectl) are ones
 * programs take for a remote file system, whose changes inotify does not report: coreutils'
 * tail then polls once a second. Watches on a mount do report its changes (vfs/notify.c),
 * so the type is tmpfs's, a local one (what the kernel says of a cached file's memfd too;
 * a passthrough fd's is its lower file system's, the kernel's answer). */
#define LDPFUSE_FS_MAGIC 0x01021994

void stat_to_statx(const struct stat *st, unsigned mask, struct statx *stx)
{
    (void)mask;
    memset(stx, 0, sizeof *stx);
    stx->stx_mask = STATX_BASIC_STATS;
    stx->stx_blksize = (uint32_t)st->st_blksize;
    stx->stx_nlink = (uint32_t)st->st_nlink;
    stx->stx_uid = st->st_uid;
    stx->stx_gid = st->st_gid;
    stx->stx_mode = (uint16_t)st->st_mode;
    stx->stx_ino = st->st_ino;
    stx->stx_size = (uint64_t)st->st_size;
    stx->stx_blocks = (uint64_t)st->st_blocks;
    stx->stx_atime.tv_sec = st->st_atim.tv_sec;
    stx->stx_atime.tv_nsec = (uint32_t)st->st_atim.tv_nsec;
    stx->stx_mtime.tv_sec = st->st_mtim.tv_sec;
    stx->stx_mtime.tv_nsec = (uint32_t)st->st_mtim.tv_nsec;
    stx->stx_ctime.tv_sec = st->st_ctim.tv_sec;
    stx->stx_ctime.tv_nsec = (uint32_t)st->st_ctim.tv_nsec;
    stx->stx_rdev_major = major(st->st_rdev);
    stx->stx_rdev_minor = minor(st->st_rdev);
    stx->stx_dev_major = major(st->st_dev);
    stx->stx_dev_minor = minor(st->st_dev);
}

void statvfs_to_statfs(const struct statvfs *sv, struct statfs *sf)
{
    memset(sf, 0, sizeof *sf);
    sf->f_type = LDPFUSE_FS_MAGIC;
    sf->f_bsize = (long)sv->f_bsize;
    sf->f_frsize = (long)sv->f_frsize;
    sf->f_blocks = sv->f_blocks;
    sf->f_bfree = sv->f_bfree;
    sf->f_bavail = sv->f_bavail;
    sf->f_files = sv->f_files;
    sf->f_ffree = sv->f_ffree;
    memcpy(&sf->f_fsid, &sv->f_fsid, sizeof sf->f_fsid < sizeof sv->f_fsid ? sizeof sf->f_fsid : sizeof sv->f_fsid);
    sf->f_namelen = (long)sv->f_namemax;
    sf->f_flags = (long)sv->f_flag;
}
