/* mmap: the kernel maps a cached file's memfd by itself; the range mapped is filled first
 * (a page fault cannot call the FS). Stores through a shared writable mapping bypass
 * write(): the file is then passed to the FS at every flush (vfs/pagecache.c). */
#include "../ldpfuse.h"
#include <sys/mman.h>

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (UNLIKELY(fd >= 0) && !(flags & MAP_ANONYMOUS) && !ldp_guard) {
        struct vfile *v = fdtable_get(fd);
        if (v && v->kind == VF_FILE && v->pc) {
            if ((v->flags & O_ACCMODE) != O_WRONLY && off >= 0 && pcache_fill(v, off, len, 0) < 0)
                return MAP_FAILED;
            if ((prot & PROT_WRITE) && (flags & MAP_SHARED))
                pcache_set_mapped(v->pc);
        }
    }
    return REAL(mmap)(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
    return mmap(addr, len, prot, flags, fd, (off_t)off);
}
