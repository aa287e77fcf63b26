/* mmap: the kernel maps a cached file's memfd by itself; the range mapped is filled first
 * (a page fault cannot call the FS). Stores through a shared writable mapping bypass
 * write(): the file is then passed to the FS at every flush (vfs/pagecache.c).
 * mremap that grows a mapping of a cached file maps pages the first mmap did not fill: the
 * range it will map is filled first, found through /proc/self/maps (the mapping's offset
 * and memfd) and an open fd of that memfd; with none open (the program closed its fds
 * after mapping) nothing can fill it, and the growth fails with ENOMEM as when the kernel
 * cannot grow a mapping: never a hole. The mappings of cached files are kept in a small
 * table (munmap takes them out), so that a growth of other memory (glibc's realloc of a
 * large block) is looked at in /proc/self/maps only when it starts inside one. */
#include "../ldpfuse.h"
#include <stdarg.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <sys/stat.h>

#define MAPS 64
/* no lock (a fork in another thread must leave none held): a slot is taken by moving its
 * hi from 0 to 1, then filled; hi 0 is a free slot */
static struct { uintptr_t lo, hi; } maps[MAPS];
static int nmaps;               /* slots in use */
static int overflowed;          /* more than MAPS at once: every growth is looked at */

static void maps_add(void *at, size_t len)
{
    for (int i = 0; i < MAPS; i++) {
        uintptr_t free_ = 0;
        if (__atomic_compare_exchange_n(&maps[i].hi, &free_, 1, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED)) {
            __atomic_store_n(&maps[i].lo, (uintptr_t)at, __ATOMIC_RELAXED);
            __atomic_store_n(&maps[i].hi, (uintptr_t)at + len, __ATOMIC_RELEASE);
            __atomic_add_fetch(&nmaps, 1, __ATOMIC_RELEASE);
            return;
        }
    }
    __atomic_store_n(&overflowed, 1, __ATOMIC_RELAXED);
}

/* [at, at+len) unmapped (or moved away): the entries it covers whole go; one it only cuts
 * stays (looked at again for nothing, never missed) */
static void maps_drop(void *at, size_t len)
{
    uintptr_t lo = (uintptr_t)at, hi = lo + len;
    for (int i = 0; i < MAPS; i++) {
        uintptr_t h = __atomic_load_n(&maps[i].hi, __ATOMIC_ACQUIRE);
        if (h > 1 && __atomic_load_n(&maps[i].lo, __ATOMIC_RELAXED) >= lo && h <= hi &&
            __atomic_compare_exchange_n(&maps[i].hi, &h, 0, 0, __ATOMIC_ACQ_REL, __ATOMIC_RELAXED))
            __atomic_sub_fetch(&nmaps, 1, __ATOMIC_RELEASE);
    }
}

static int maps_has(void *at)
{
    uintptr_t a = (uintptr_t)at;
    if (__atomic_load_n(&overflowed, __ATOMIC_RELAXED))
        return 1;
    for (int i = 0; i < MAPS; i++) {
        uintptr_t h = __atomic_load_n(&maps[i].hi, __ATOMIC_ACQUIRE);
        if (h > 1 && a >= __atomic_load_n(&maps[i].lo, __ATOMIC_RELAXED) && a < h)
            return 1;
    }
    return 0;
}

void *mmap(void *addr, size_t len, int prot, int flags, int fd, off_t off)
{
    if (UNLIKELY(fd >= 0) && !(flags & MAP_ANONYMOUS) && !ldp_guard) {
        struct vfile *v = fdtable_get(fd);
        if (v && v->kind == VF_FILE && v->pc) {
            if ((v->flags & O_ACCMODE) != O_WRONLY && off >= 0 && pcache_fill(v, off, len, 0) < 0)
                return MAP_FAILED;
            if ((prot & PROT_WRITE) && (flags & MAP_SHARED))
                pcache_set_mapped(v->pc);
            void *m = REAL(mmap)(addr, len, prot, flags, fd, off);
            if (m != MAP_FAILED)
                maps_add(m, len);
            return m;
        }
    }
    return REAL(mmap)(addr, len, prot, flags, fd, off);
}

int munmap(void *addr, size_t len)
{
    int r = REAL(munmap)(addr, len);
    if (UNLIKELY(__atomic_load_n(&nmaps, __ATOMIC_RELAXED) != 0) && r == 0)
        maps_drop(addr, len);
    return r;
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
    int ours = UNLIKELY(__atomic_load_n(&nmaps, __ATOMIC_RELAXED) != 0 ||
                        __atomic_load_n(&overflowed, __ATOMIC_RELAXED)) && !ldp_guard && maps_has(old);
    if (ours && new_len > old_len && before_growth(old, new_len) < 0)
        return MAP_FAILED;
    void *m = REAL(mremap)(old, old_len, new_len, flags, to);
    if (ours && m != MAP_FAILED) {
        maps_drop(old, old_len);
        maps_add(m, new_len);
    }
    return m;
}
