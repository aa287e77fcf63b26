/*
 * Attribute coherence for passthrough files, as kernel FUSE gives it: the kernel changes a
 * passthrough file behind the backend (its data through a writable fd; its size, mode,
 * owner, times or extended attributes through any fd, read-only too), so whoever made
 * the change tells every process's caches of the name before the call that made it
 * returns. The rule is one, for every call that can change the file through a mount fd:
 *
 *   - an attribute call on a passthrough fd (fchmod, fchown, futimens, ftruncate,
 *     fallocate, fsetxattr and their spellings) tells at once, after the kernel's call;
 *   - data written through a writable passthrough fd is told at its last close (and at
 *     exit or exec for a file still open), close-to-open as NFS; meanwhile this process
 *     uses and keeps no answer about the name (attrcache_writer), and every other process
 *     sees the writes at its next call after that close.
 *
 * "Tells" is a round trip in the shared mode (the server bumps the name's written[]
 * counter before it answers, backend/coherence.h), so no process, this one included, can
 * use an answer from before the change once the call has returned; a notice only posted
 * would leave everyone the old answer until the server got to it. The embedded mode has no
 * table: the process forgets every answer it had (attrcache_invalidate), other processes
 * hear after attr_timeout as of any change there (docs/processes-and-modes.md).
 */
#include "../ldpfuse.h"

void vfs_passthrough_changed(const struct vfile *v)
{
    struct backend_ops *be = backend_get();
    guard_enter();
    int told = be && be->written && be->written(v->mnt, v->path);
    guard_leave();
    if (!told)
        attrcache_invalidate();
}

long vfs_changed_through(int fd, long r)
{
    if (r < 0)
        return r;
    struct vfile *v = vfd(fd);
    if (v && v->kind == VF_PASSTHROUGH) {
        int e = errno;
        vfs_passthrough_changed(v);
        errno = e;
    }
    return r;
}
