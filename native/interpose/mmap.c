/* mmap: the kernel maps the virtual fd's memfd by itself. Only one thing is ours: stores
 * through a shared writable mapping leave no trace in the memfd's ctime, so such a file is
 * written back at every close from then on. */
#include "../ldpfuse.h"
#include <sys/mman.h>

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (UNLIKELY(fd >= 0 && (prot & PROT_WRITE) && (flags & MAP_SHARED)) && !ldp_guard) {
        struct vfile *v = fdtable_get(fd);
        if (v && v->kind == VF_FILE)
            v->mapped = 1;
    }
    return REAL(mmap)(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
    return mmap(addr, len, prot, flags, fd, (off_t)off);
}
