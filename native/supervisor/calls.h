/*
 * The system calls the supervisor traps (docs/supervisor.md), one row each, as strace's
 * table: which argument is a directory fd, which a path, and which operation of the
 * supervisor serves it. The preload builds the seccomp filter from the numbers
 * (interpose/supervise.c); the supervisor decodes a notification with the row
 * (supervisor/serve.c). Calls on fds (read, write, fstat, getdents64, close, ...) are
 * never trapped: every fd the supervisor hands out is a real kernel fd the kernel serves.
 * x86-64 only (the filter lets every call of another architecture through: the
 * supervisor does not run there).
 */
#ifndef LDPFUSE_SUPERVISOR_CALLS_H
#define LDPFUSE_SUPERVISOR_CALLS_H
#include <sys/syscall.h>

enum sv_op {
    SV_OPEN,        /* flags, mode at (flags_arg, mode_arg); creat: flags_arg -1 */
    SV_OPENAT2,     /* struct open_how at arg 2 */
    SV_STAT,        /* struct stat at buf_arg; flags_arg: AT_* flags, or -1 (follow); -2 nofollow */
    SV_STATX,       /* flags 2, mask 3, struct statx at 4 */
    SV_ACCESS,      /* mode at mode_arg, AT_* flags at flags_arg (-1: none) */
    SV_READLINK,    /* buffer at buf_arg, size after it */
    SV_MKDIR,       /* mode at mode_arg */
    SV_UNLINK,      /* AT_REMOVEDIR at flags_arg (-1: none) */
    SV_RMDIR,
    SV_RENAME,      /* two paths; RENAME_* at flags_arg (-1: none) */
    SV_LINK,        /* two paths; AT_SYMLINK_FOLLOW at flags_arg (-1: none) */
    SV_SYMLINK,     /* the target (never resolved) at buf_arg, the new name is the path */
    SV_CHMOD,       /* mode at mode_arg */
    SV_CHOWN,       /* uid at mode_arg, gid after it; flags_arg; chown of lchown: -2 */
    SV_TRUNCATE,    /* length at mode_arg */
    SV_UTIMENS,     /* struct timespec[2] at buf_arg, flags_arg */
    SV_UNSERVED,    /* not served on a mount path: the kernel answers (ENOENT), or under
                     * --strict EIO; named once per call in the log */
    SV_EXIT,        /* no path: the process ends; what it closed for writing is written to
                     * the file system first (writeback.c), so whoever waits for it sees it */
    SV_CHDIR,       /* into a mount: a virtual cwd (cwd.c); elsewhere the kernel's */
    SV_FCHDIR,      /* no path: the kernel's (a shadow's fd, or a real directory) */
    SV_GETCWD,      /* no path: a virtual cwd or a shadow's mount path, written at buf_arg
                     * (size after it) */
};

struct sv_call {
    int nr;
    const char *name;
    int op;
    signed char dirfd, path;        /* -1: AT_FDCWD */
    signed char dirfd2, path2;      /* the second path (rename, link): -1 none */
    signed char flags_arg, mode_arg, buf_arg;
};

#define SV_NONE (-1)
static const struct sv_call sv_calls[] = {
    /* nr               name            op           dirfd path dirfd2 path2 flags mode buf */
    { SYS_open,        "open",        SV_OPEN,     -1, 0, -1, -1,  1,  2, -1 },
    { SYS_creat,       "creat",       SV_OPEN,     -1, 0, -1, -1, -1,  1, -1 },
    { SYS_openat,      "openat",      SV_OPEN,      0, 1, -1, -1,  2,  3, -1 },
    { SYS_openat2,     "openat2",     SV_OPENAT2,   0, 1, -1, -1, -1, -1,  2 },
    { SYS_stat,        "stat",        SV_STAT,     -1, 0, -1, -1, -1, -1,  1 },
    { SYS_lstat,       "lstat",       SV_STAT,     -1, 0, -1, -1, -2, -1,  1 },
    { SYS_newfstatat,  "newfstatat",  SV_STAT,      0, 1, -1, -1,  3, -1,  2 },
    { SYS_statx,       "statx",       SV_STATX,     0, 1, -1, -1,  2,  3,  4 },
    { SYS_access,      "access",      SV_ACCESS,   -1, 0, -1, -1, -1,  1, -1 },
    { SYS_faccessat,   "faccessat",   SV_ACCESS,    0, 1, -1, -1, -1,  2, -1 },
    { SYS_faccessat2,  "faccessat2",  SV_ACCESS,    0, 1, -1, -1,  3,  2, -1 },
    { SYS_readlink,    "readlink",    SV_READLINK, -1, 0, -1, -1, -1, -1,  1 },
    { SYS_readlinkat,  "readlinkat",  SV_READLINK,  0, 1, -1, -1, -1, -1,  2 },
    { SYS_mkdir,       "mkdir",       SV_MKDIR,    -1, 0, -1, -1, -1,  1, -1 },
    { SYS_mkdirat,     "mkdirat",     SV_MKDIR,     0, 1, -1, -1, -1,  2, -1 },
    { SYS_unlink,      "unlink",      SV_UNLINK,   -1, 0, -1, -1, -1, -1, -1 },
    { SYS_unlinkat,    "unlinkat",    SV_UNLINK,    0, 1, -1, -1,  2, -1, -1 },
    { SYS_rmdir,       "rmdir",       SV_RMDIR,    -1, 0, -1, -1, -1, -1, -1 },
    { SYS_rename,      "rename",      SV_RENAME,   -1, 0, -1,  1, -1, -1, -1 },
    { SYS_renameat,    "renameat",    SV_RENAME,    0, 1,  2,  3, -1, -1, -1 },
    { SYS_renameat2,   "renameat2",   SV_RENAME,    0, 1,  2,  3,  4, -1, -1 },
    { SYS_link,        "link",        SV_LINK,     -1, 0, -1,  1, -1, -1, -1 },
    { SYS_linkat,      "linkat",      SV_LINK,      0, 1,  2,  3,  4, -1, -1 },
    { SYS_symlink,     "symlink",     SV_SYMLINK,  -1, 1, -1, -1, -1, -1,  0 },
    { SYS_symlinkat,   "symlinkat",   SV_SYMLINK,   1, 2, -1, -1, -1, -1,  0 },
    { SYS_chmod,       "chmod",       SV_CHMOD,    -1, 0, -1, -1, -1,  1, -1 },
    { SYS_fchmodat,    "fchmodat",    SV_CHMOD,     0, 1, -1, -1, -1,  2, -1 },
    { SYS_chown,       "chown",       SV_CHOWN,    -1, 0, -1, -1, -1,  1, -1 },
    { SYS_lchown,      "lchown",      SV_CHOWN,    -1, 0, -1, -1, -2,  1, -1 },
    { SYS_fchownat,    "fchownat",    SV_CHOWN,     0, 1, -1, -1,  4,  2, -1 },
    { SYS_truncate,    "truncate",    SV_TRUNCATE, -1, 0, -1, -1, -1,  1, -1 },
    { SYS_utimensat,   "utimensat",   SV_UTIMENS,   0, 1, -1, -1,  3, -1,  2 },
    { SYS_chdir,       "chdir",       SV_CHDIR,    -1, 0, -1, -1, -1, -1, -1 },
    { SYS_fchdir,      "fchdir",      SV_FCHDIR,   -1, -1, -1, -1, -1, -1, -1 },
    { SYS_getcwd,      "getcwd",      SV_GETCWD,   -1, -1, -1, -1, -1, -1,  0 },
    { SYS_execve,      "execve",      SV_UNSERVED, -1, 0, -1, -1, -1, -1, -1 },
    { SYS_mknod,       "mknod",       SV_UNSERVED, -1, 0, -1, -1, -1, -1, -1 },
    { SYS_mknodat,     "mknodat",     SV_UNSERVED,  0, 1, -1, -1, -1, -1, -1 },
    { SYS_statfs,      "statfs",      SV_UNSERVED, -1, 0, -1, -1, -1, -1, -1 },
    { SYS_getxattr,    "getxattr",    SV_UNSERVED, -1, 0, -1, -1, -1, -1, -1 },
    { SYS_lgetxattr,   "lgetxattr",   SV_UNSERVED, -1, 0, -1, -1, -1, -1, -1 },
    { SYS_setxattr,    "setxattr",    SV_UNSERVED, -1, 0, -1, -1, -1, -1, -1 },
    { SYS_lsetxattr,   "lsetxattr",   SV_UNSERVED, -1, 0, -1, -1, -1, -1, -1 },
    { SYS_listxattr,   "listxattr",   SV_UNSERVED, -1, 0, -1, -1, -1, -1, -1 },
    { SYS_llistxattr,  "llistxattr",  SV_UNSERVED, -1, 0, -1, -1, -1, -1, -1 },
    { SYS_removexattr, "removexattr", SV_UNSERVED, -1, 0, -1, -1, -1, -1, -1 },
    { SYS_lremovexattr, "lremovexattr", SV_UNSERVED, -1, 0, -1, -1, -1, -1, -1 },
    { SYS_exit_group,  "exit_group",  SV_EXIT,     -1, -1, -1, -1, -1, -1, -1 },
};
#define SV_NCALLS (sizeof sv_calls / sizeof sv_calls[0])

static inline const struct sv_call *sv_call_of(int nr)
{
    for (unsigned i = 0; i < SV_NCALLS; i++)
        if (sv_calls[i].nr == nr)
            return &sv_calls[i];
    return 0;
}

/* The handshake on the supervisor's socket: the run's secret (32 bytes, LDPFUSE_SECRET)
 * with the listener fd (SCM_RIGHTS); the answer is one byte, 1 = taken. */
#define SV_SECRET_LEN 32
#endif
