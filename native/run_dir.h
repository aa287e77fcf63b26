/*
 * The command's private directory (docs/security.md): what ldpfuse must keep on disk for a
 * run (the stand-ins of unix sockets bound in a mount, FIFOs, the append lock, the
 * --strict record) lives in a directory the launcher made for the run (mkdtemp, named in
 * LDPFUSE_RUN_DIR, removed when the command ends), never at a fixed name in /tmp that
 * another user could make first. It is 0700, or, with -o allow_other, 01733 inside a 0711
 * parent (the command's other users make entries there, none lists or removes another's,
 * and nobody outside the command knows its random name).
 *
 * A process without it (a fusepy script's embedded run: the launcher exec'd it) uses
 * /tmp/ldpfuse-UID, made 0700 and trusted only while it is a directory (not a symlink)
 * of its own user that nobody else may write. Used by the preload and by the extension
 * (the server, the embedded backend): raw system calls, no interposed function.
 */
#ifndef LDPFUSE_RUN_DIR_H
#define LDPFUSE_RUN_DIR_H
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

static inline int run_dir_lstat(const char *path, struct stat *st)
{
    return (int)syscall(SYS_newfstatat, AT_FDCWD, path, st, AT_SYMLINK_NOFOLLOW);
}

/* Is st a directory that its owner (us, the launcher's user, or root) alone may change,
 * or a sticky one (where nobody removes another's entries)? */
static inline int run_dir_trusted(const struct stat *st)
{
    const char *o = getenv("LDPFUSE_OWNER_UID");
    uid_t owner = o && *o ? (uid_t)strtoul(o, NULL, 10) : geteuid();
    if (!S_ISDIR(st->st_mode))
        return 0;
    if (st->st_uid != geteuid() && st->st_uid != owner && st->st_uid != 0)
        return 0;
    return (st->st_mode & 022) == 0 || (st->st_mode & S_ISVTX);
}

/* The directory into out; 0, or -1 with errno (EACCES: the fallback is someone else's). */
static inline int run_dir_get(char *out, size_t size)
{
    struct stat st;
    const char *d = getenv("LDPFUSE_RUN_DIR");
    if (d && d[0] == '/' && strlen(d) < size && run_dir_lstat(d, &st) == 0 && run_dir_trusted(&st)) {
        strcpy(out, d);
        return 0;
    }
    int n = snprintf(out, size, "/tmp/ldpfuse-%u", (unsigned)geteuid());
    if (n < 0 || (size_t)n >= size) {
        errno = ENAMETOOLONG;
        return -1;
    }
    syscall(SYS_mkdirat, AT_FDCWD, out, 0700);
    if (run_dir_lstat(out, &st) < 0)
        return -1;
    if (!S_ISDIR(st.st_mode) || st.st_uid != geteuid() || (st.st_mode & 077)) {
        errno = EACCES;     /* made by another user first, or opened up: not ours to trust */
        return -1;
    }
    return 0;
}
#endif
