/* mmap: the kernel maps a cached file's memfd by itself; the range mapped is filled first
 * (a page fault cannot call the FS). Stores through a shared writable mapping bypass
 * write(): the file is then passed to the FS at every flush (vfs/pagecache.c).
 * mremap that grows a mapping of a cached file maps pages the first mmap did not fill: the
 * range it will map is filled first, found through /proc/self/maps (the mapping's offset
 * and memfd) and an open fd of that memfd; with none open (the program closed its fds
 * after mapping) nothing can fill it, and the growth fails with ENOMEM as when the kernel
 * cannot grow a mapping: never a hole. Only processes that mapped a cached file look. */
#include "../ldpfuse.h"
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>

static int mapped_cache;    /* this process mapped a cached file: its mremaps are looked at */

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (UNLIKELY(fd >= 0) && !(flags & MAP_ANONYMOUS) && !ldp_guard) {
        struct vfile *v = fdtable_get(fd);
        if (v && v->kind == VF_FILE && v->pc) {
            if ((v->flags & O_ACCMODE) != O_WRONLY && off >= 0 && pcache_fill(v, off, len, 0) < 0)
                return MAP_FAILED;
            if ((prot & PROT_WRITE) && (flags & MAP_SHARED))
                pcache_set_mapped(v->pc);
            __atomic_store_n(&mapped_cache, 1, __ATOMIC_RELAXED);
        }
    }
    return REAL(mmap)(addr, len, prot, flags, fd, off);
}

void *mmap64(void *addr, size_t len, int prot, int flags, int fd, off64_t off)
{
    return mmap(addr, len, prot, flags, fd, (off_t)off);
}

/* The mapping that holds addr, from /proc/self/maps: its file offset at addr, device and
 * inode. 1: a page cache's memfd ("ldpfuse:PATH", vfs/pagecache.c); 0: another file;
 * -1: no file (anonymous memory, or nothing mapped there). */
static int mapping_of(uintptr_t addr, off_t *off, dev_t *dev, ino_t *ino)
{
    int fd = REAL(open)("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    char buf[8192];
    size_t have = 0;
    int found = -1;
    for (;;) {
        ssize_t r = REAL(read)(fd, buf + have, sizeof buf - 1 - have);
        if (r <= 0)
            break;
        have += (size_t)r;
        buf[have] = '\0';
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n')) != NULL) {
            *nl = '\0';
            unsigned long lo, hi, pgoff, maj, min, inode;
            int name = 0;
            if (sscanf(line, "%lx-%lx %*s %lx %lx:%lx %lu %n", &lo, &hi, &pgoff, &maj, &min, &inode, &name) >= 6 &&
                addr >= lo && addr < hi) {
                if (inode != 0) {
                    *off = (off_t)(pgoff + (addr - lo));
                    *dev = makedev(maj, min);
                    *ino = (ino_t)inode;
                    found = name > 0 && strncmp(line + name, "/memfd:ldpfuse:", 15) == 0;
                }
                REAL(close)(fd);
                return found;
            }
            line = nl + 1;
        }
        have = (size_t)(buf + have - line);
        memmove(buf, line, have);
        if (have == sizeof buf - 1)
            have = 0;       /* a line longer than the buffer: no mapping line is */
    }
    REAL(close)(fd);
    return found;
}

/* A cached fd of this process open on the memfd (dev, ino) and readable, or NULL. */
static struct vfile *cached_fd_of(dev_t dev, ino_t ino)
{
    for (int fd = 0; fd <= fdtable_max(); fd++) {
        struct vfile *v = fdtable_get(fd);
        struct stat st;
        if (v && v->kind == VF_FILE && v->pc && (v->flags & O_ACCMODE) != O_WRONLY &&
            REAL(fstat)(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino)
            return v;
    }
    return NULL;
}

/* Before mremap grows [old, old+old_len) to new_len: 0, or -1 with errno (ENOMEM: a
 * cached file's mapping that no open fd can fill). */
static int before_growth(void *old, size_t new_len)
{
    off_t off;
    dev_t dev;
    ino_t ino;
    if (mapping_of((uintptr_t)old, &off, &dev, &ino) <= 0)
        return 0;
    struct vfile *v = cached_fd_of(dev, ino);
    if (v != NULL)
        return pcache_fill(v, off, new_len, 0);
    errno = ENOMEM;
    return -1;
}

void *mremap(void *old, size_t old_len, size_t new_len, int flags, ...)
{
    void *to = NULL;
    if (flags & MREMAP_FIXED) {
        va_list ap;
        va_start(ap, flags);
        to = va_arg(ap, void *);
        va_end(ap);
    }
    if (UNLIKELY(__atomic_load_n(&mapped_cache, __ATOMIC_RELAXED)) && new_len > old_len && !ldp_guard &&
        before_growth(old, new_len) < 0)
        return MAP_FAILED;
    return REAL(mremap)(old, old_len, new_len, flags, to);
}
