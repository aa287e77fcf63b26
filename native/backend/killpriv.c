/*
 * Set-user-ID and set-group-ID bits cleared on write, truncate and chown, for every class,
 * as kernel FUSE does for every fusepy file system (docs/operations.md, "Set-ID bits").
 *
 * Kernel FUSE without FUSE_HANDLE_KILLPRIV (fusepy never asks for it) sends a SETATTR of
 * the mode itself: before a write or a truncation by a caller without CAP_FSETID, and at
 * every chown of a file that is not a directory. It clears S_ISUID, and S_ISGID when the
 * group may execute (without it the bit marks mandatory locking), or, as Linux's own
 * file systems do (setattr_should_drop_sgid), when the caller, not root, is not in the
 * file's group: what a native write gives, which the tests compare with. Here the
 * backend's method table is wrapped: the class's own chmod is called with that mode, so a
 * class that stores modes (memory, sqlitefs) needs no code of its own; one that does not
 * (its chmod fails) is left as it is, and a loopback's lower kernel file clears its bits
 * itself.
 *
 * The write path must stay cheap: a write asks the class nothing more unless its name is
 * one this instance has seen with a set-ID bit (a getattr answer, a chmod, a create or
 * mknod asked for one). Those names are few; with none a write pays one load.
 */
#include "backend.h"
#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SETID (S_ISUID | S_ISGID)
#define BUCKETS 256

struct setid_name {
    struct setid_name *next;
    int mnt;
    char path[];
};

static struct setid_name *names[BUCKETS];
static int nnames;
/* held only around the list's own reads and updates */
static pthread_mutex_t names_lock = PTHREAD_MUTEX_INITIALIZER;

static struct backend_ops inner;    /* the class's methods as the backend calls them */
static void (*caller)(uid_t *uid, gid_t *gid);

static unsigned bucket(int mnt, const char *path)
{
    unsigned h = 2166136261u ^ (unsigned)mnt;
    for (const unsigned char *c = (const unsigned char *)path; *c; c++)
        h = (h ^ *c) * 16777619u;
    return h % BUCKETS;
}

static struct setid_name **find(int mnt, const char *path)
{
    struct setid_name **p = &names[bucket(mnt, path)];
    while (*p && ((*p)->mnt != mnt || strcmp((*p)->path, path) != 0))
        p = &(*p)->next;
    return p;
}

static void add_locked(int mnt, const char *path)
{
    struct setid_name **p = find(mnt, path);
    if (*p)
        return;
    size_t len = strlen(path);
    struct setid_name *n = malloc(sizeof *n + len + 1);
    if (n == NULL)
        return;
    n->mnt = mnt;
    memcpy(n->path, path, len + 1);
    n->next = NULL;
    *p = n;
    __atomic_store_n(&nnames, nnames + 1, __ATOMIC_RELEASE);
}

static void remove_locked(int mnt, const char *path)
{
    struct setid_name **p = find(mnt, path);
    if (*p == NULL)
        return;
    struct setid_name *n = *p;
    *p = n->next;
    free(n);
    __atomic_store_n(&nnames, nnames - 1, __ATOMIC_RELEASE);
}

/* What the class said of path's mode: remembered if it carries a set-ID bit. */
static void note(int mnt, const char *path, mode_t mode)
{
    int setid = (mode & SETID) && !S_ISDIR(mode) && !S_ISLNK(mode);
    if (!setid && __atomic_load_n(&nnames, __ATOMIC_ACQUIRE) == 0)
        return;
    pthread_mutex_lock(&names_lock);
    if (setid)
        add_locked(mnt, path);
    else
        remove_locked(mnt, path);
    pthread_mutex_unlock(&names_lock);
}

static int maybe_setid(int mnt, const char *path)
{
    if (__atomic_load_n(&nnames, __ATOMIC_ACQUIRE) == 0)
        return 0;
    pthread_mutex_lock(&names_lock);
    int found = *find(mnt, path) != NULL;
    pthread_mutex_unlock(&names_lock);
    return found;
}

static int caller_is_root(void)
{
    uid_t uid;
    gid_t gid;
    caller(&uid, &gid);
    return uid == 0;
}

/* Is the caller (not root) in group g? Its groups are this thread's (a server thread takes
 * the client's: server/credentials.c). */
static int caller_in_group(gid_t g)
{
    uid_t uid;
    gid_t gid;
    caller(&uid, &gid);
    if (uid == 0 || gid == g)
        return 1;
    gid_t groups[256];
    int n = getgroups(256, groups);
    for (int i = 0; i < n; i++)
        if (groups[i] == g)
            return 1;
    return 0;
}

/* The mode Linux leaves st with: S_ISUID gone, S_ISGID gone when the group may execute or
 * the caller is not in the file's group. */
static mode_t without_privileges(const struct stat *st)
{
    mode_t mode = st->st_mode & 07777;
    mode &= ~(mode_t)S_ISUID;
    if ((mode & S_ISGID) && ((mode & S_IXGRP) || !caller_in_group(st->st_gid)))
        mode &= ~(mode_t)S_ISGID;
    return mode;
}

/* Clear path's set-ID bits through the class's chmod, if it has them (the file's mode
 * asked again, as FUSE refreshes it before its SETATTR): a regular file's at a write or
 * truncation, any file's but a directory's at a chown. */
static void kill_privileges(int mnt, const char *path, const uint64_t *fh, int at_chown)
{
    struct stat st;
    if (inner.getattr(mnt, path, fh, &st) != 0)
        return;
    int kind_ok = at_chown ? !S_ISDIR(st.st_mode) && !S_ISLNK(st.st_mode) : S_ISREG(st.st_mode);
    if (!kind_ok || !(st.st_mode & SETID)) {
        note(mnt, path, st.st_mode);
        return;
    }
    mode_t now = without_privileges(&st);
    if (now != (st.st_mode & 07777) && inner.chmod && inner.chmod(mnt, path, now) == 0)
        note(mnt, path, (st.st_mode & S_IFMT) | now);
}

/* ---- the wrapped methods */

static int kp_getattr(int mnt, const char *path, const uint64_t *fh, struct stat *st)
{
    int r = inner.getattr(mnt, path, fh, st);
    if (r == 0)
        note(mnt, path, st->st_mode);
    return r;
}

static int kp_chmod(int mnt, const char *path, mode_t mode)
{
    int r = inner.chmod(mnt, path, mode);
    if (r == 0)
        note(mnt, path, S_IFREG | (mode & 07777));     /* a directory's is checked at use */
    return r;
}

static int kp_create(int mnt, const char *path, mode_t mode, int flags, struct open_result *res)
{
    int r = inner.create(mnt, path, mode, flags, res);
    if (r >= 0 && (mode & SETID))
        note(mnt, path, S_IFREG | (mode & 07777));
    return r;
}

static int kp_mknod(int mnt, const char *path, mode_t mode, dev_t dev)
{
    int r = inner.mknod(mnt, path, mode, dev);
    if (r == 0 && (mode & SETID))
        note(mnt, path, (mode & S_IFMT) ? mode : S_IFREG | mode);
    return r;
}

static ssize_t kp_write(int mnt, const char *path, const char *buf, size_t size, off_t off, uint64_t fh)
{
    if (maybe_setid(mnt, path) && !caller_is_root())
        kill_privileges(mnt, path, &fh, 0);
    return inner.write(mnt, path, buf, size, off, fh);
}

static ssize_t kp_append(int mnt, const char *path, const char *buf, size_t size, uint64_t fh, off_t *at)
{
    if (maybe_setid(mnt, path) && !caller_is_root())
        kill_privileges(mnt, path, &fh, 0);
    return inner.append(mnt, path, buf, size, fh, at);
}

static int kp_truncate(int mnt, const char *path, off_t len, const uint64_t *fh)
{
    if (maybe_setid(mnt, path) && !caller_is_root())
        kill_privileges(mnt, path, fh, 0);
    return inner.truncate(mnt, path, len, fh);
}

/* chown: whoever the caller is, as Linux's chown_common asks for a file that is not a
 * directory (the kill applies to root too) */
static int kp_chown(int mnt, const char *path, uid_t uid, gid_t gid)
{
    int r = inner.chown(mnt, path, uid, gid);
    if (r == 0 && maybe_setid(mnt, path))
        kill_privileges(mnt, path, NULL, 1);
    return r;
}

static int kp_unlink(int mnt, const char *path)
{
    int r = inner.unlink(mnt, path);
    if (r == 0 && __atomic_load_n(&nnames, __ATOMIC_ACQUIRE) > 0) {
        pthread_mutex_lock(&names_lock);
        remove_locked(mnt, path);
        pthread_mutex_unlock(&names_lock);
    }
    return r;
}

/* A rename carries the names under from (a file, or a directory's files) to to. */
static int kp_rename(int mnt, const char *from, const char *to)
{
    int r = inner.rename(mnt, from, to);
    if (r != 0 || __atomic_load_n(&nnames, __ATOMIC_ACQUIRE) == 0)
        return r;
    size_t fl = strlen(from), tl = strlen(to);
    pthread_mutex_lock(&names_lock);
    remove_locked(mnt, to);
    struct setid_name *moved = NULL;
    for (int b = 0; b < BUCKETS; b++)
        for (struct setid_name **p = &names[b]; *p;) {
            struct setid_name *n = *p;
            if (n->mnt != mnt || strncmp(n->path, from, fl) != 0 || (n->path[fl] != '\0' && n->path[fl] != '/')) {
                p = &n->next;
                continue;
            }
            *p = n->next;
            n->next = moved;
            moved = n;
        }
    while (moved) {
        struct setid_name *n = moved;
        moved = n->next;
        size_t rest = strlen(n->path + fl);
        char *np = malloc(tl + rest + 1);
        if (np) {
            memcpy(np, to, tl);
            memcpy(np + tl, n->path + fl, rest + 1);
            remove_locked(mnt, np);     /* a name under to that is gone now */
            struct setid_name **slot = find(mnt, np);
            struct setid_name *m = malloc(sizeof *m + tl + rest + 1);
            if (m) {
                m->mnt = mnt;
                memcpy(m->path, np, tl + rest + 1);
                m->next = NULL;
                *slot = m;
            } else {
                __atomic_store_n(&nnames, nnames - 1, __ATOMIC_RELEASE);
            }
            free(np);
        } else {
            __atomic_store_n(&nnames, nnames - 1, __ATOMIC_RELEASE);
        }
        free(n);
    }
    pthread_mutex_unlock(&names_lock);
    return r;
}

/* fork: taken across it, so that a child never finds the list half changed by a thread it
 * does not have (nothing but memory is touched under it) */
static void fork_prepare(void)
{
    pthread_mutex_lock(&names_lock);
}

static void fork_after(void)
{
    pthread_mutex_unlock(&names_lock);
}

void killpriv_wrap(struct backend_ops *ops, void (*who)(uid_t *uid, gid_t *gid))
{
    inner = *ops;
    caller = who;
    if (ops->getattr == NULL || ops->chmod == NULL)
        return;
    ops->getattr = kp_getattr;
    ops->chmod = kp_chmod;
    if (ops->create)
        ops->create = kp_create;
    if (ops->mknod)
        ops->mknod = kp_mknod;
    if (ops->write)
        ops->write = kp_write;
    if (ops->append)
        ops->append = kp_append;
    if (ops->truncate)
        ops->truncate = kp_truncate;
    if (ops->chown)
        ops->chown = kp_chown;
    if (ops->unlink)
        ops->unlink = kp_unlink;
    if (ops->rename)
        ops->rename = kp_rename;
    pthread_atfork(fork_prepare, fork_after, fork_after);
}
