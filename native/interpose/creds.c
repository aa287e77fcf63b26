/* The set*id family: a process that changes its uids, gids or groups bumps ldp_creds_gen,
 * so that what was decided for its old credentials is decided again (vfs/backing.c: whether
 * the backing trees serve it; vfs/backing_dirs.c: the directories it walked with the old
 * search rights). glibc's wrappers change every thread; a raw syscall() of them is seen
 * too (interpose/syscall.c); an inline system call is not. */
#include "../ldpfuse.h"
#include <grp.h>

unsigned ldp_creds_gen = 1;

static int changed(int r)
{
    __atomic_add_fetch(&ldp_creds_gen, 1, __ATOMIC_ACQ_REL);
    return r;
}

void ldp_creds_changed(void)
{
    changed(0);
}

int setuid(uid_t u) { return changed(REAL(setuid)(u)); }
int seteuid(uid_t u) { return changed(REAL(seteuid)(u)); }
int setreuid(uid_t r, uid_t e) { return changed(REAL(setreuid)(r, e)); }
int setresuid(uid_t r, uid_t e, uid_t s) { return changed(REAL(setresuid)(r, e, s)); }
int setgid(gid_t g) { return changed(REAL(setgid)(g)); }
int setegid(gid_t g) { return changed(REAL(setegid)(g)); }
int setregid(gid_t r, gid_t e) { return changed(REAL(setregid)(r, e)); }
int setresgid(gid_t r, gid_t e, gid_t s) { return changed(REAL(setresgid)(r, e, s)); }
int setgroups(size_t n, const gid_t *list) { return changed(REAL(setgroups)(n, list)); }
