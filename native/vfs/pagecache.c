/*
 * The page cache of files the FS serves itself (not passthrough): one memfd per file,
 * shared by every fd of this process on the file (and, through fork and exec, by the
 * children that inherit it; with the shared server, by every process: server/page_caches.c
 * scache_*), as the kernel keeps one page cache per inode.
 *
 * The memfd is sized to the file at open and filled lazily, by range. Which ranges are
 * filled is kept by the memfd itself: tmpfs reports unwritten pages as holes
 * (lseek SEEK_HOLE/SEEK_DATA), so a hole is "not yet read from the FS" and data is "read
 * or written". Every process that holds the memfd sees the same state, with no shared
 * memory of ours. With shmem transparent huge pages on, holes are 2 MiB-grained: fills are
 * then aligned to that granule.
 *
 * Readers (the read-family wrappers, mmap, stdio's fopen) call pcache_fill() for the
 * range they will touch, then let the kernel serve it. Writers (pcache_write) pass the
 * bytes to the FS first, at the right offset, and keep in the memfd only what the FS took:
 * errors (ENOSPC) reach the program at write(), and nothing waits for close. A write or
 * truncation past the cache's end (which may be stale: another process's, or a change
 * behind the mount) leaves the bytes between to the FS, never zeros (grew_past_end).
 *
 * Locks: `table_lock` guards the table and reference counts; each entry's lock (the file's
 * turn, cache_turn.c, and a mutex: entry_lock) orders fills, writes and every change of the
 * memfd's size or holes (a fill must never put old bytes over a newer write). A truncation
 * (ftruncate, O_TRUNC, truncate(path)) calls the FS's truncate() inside that lock too, so
 * that a fill or write of another holder falls wholly before or after it.
 */
#include "../ldpfuse.h"
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/xattr.h>

#define RA_MIN (128u << 10)         /* first readahead window */
#define RA_MAX (4u << 20)           /* largest window on sequential access */
#define FS_CHUNK (1u << 20)         /* one FS read() at most */
#define GROW_MAX (1ull << 30)       /* what a size-0 (procfs-style) file may grow to */

struct pcache {
    struct pcache *next, **pprev;   /* in the table (every entry) */
    struct pcache *hnext;           /* in its bucket by (mnt, path) */
    unsigned bucket;
    int refs;                   /* vfiles pointing here; under table_lock */
    int mnt;
    char *path;                 /* under table_lock (rename) */
    uint64_t ino;               /* the file's inode number as the FS gave it (0: unknown) */
    int mfd;                    /* our own O_RDWR description of the memfd */
    uint64_t turn;              /* its key in the lock file of turns (cache_turn.c; 0: not
                                 * taken yet, entry_lock) */
    int unlinked;
    int size_unknown;           /* the FS said st_size 0: read until it gives nothing */
    int mapped;                 /* mapped shared and writable: stores bypass write() */
    int backend_ref;            /* the backend (shared server) holds the memfd for us */
    uint64_t backend_token;     /* its name for our hold on it (cache_close) */
    unsigned gen;               /* +1 whenever this process makes holes (truncate, punch) */
    uint64_t open_stamp;        /* the name's attrcache_stamp when this process got it */
    uint64_t brought_whole;     /* the backend filled it whole with the open, at this stamp:
                                 * for that open's vfile (pcache_brought_whole), then 0 */
    struct timespec known_mtime;    /* the memfd after our last fill or write: a change */
    off_t known_size;               /* since then came from past the wrappers (stdio) */
    int no_xattr;                   /* the memfd takes no user xattr: known is ours only */
    int untracked;                  /* changed past the wrappers before one of our own
                                     * writes moved `known` on: still owed to the FS */
    int streams;                    /* a stream of glibc's own that writes was made on it
                                     * here (stdio.c): a write past the end leaves no hole */
    /* The file as an open found it when this cache was last known to be its (the open's
     * attributes, under the name's stamp then): a new open whose attributes are others,
     * with no change through the mount to explain them, does not use it (the file changed
     * behind the mount: pcache_open); one that finds them unchanged may open it with no
     * request (pcache_local). */
    int fs_known;
    int written_here;           /* this process passed a change of it to the FS: its own
                                 * writes, not the file's, may explain other attributes */
    off_t fs_size;
    struct timespec fs_mtime;
    uint64_t valid_stamp;
    unsigned creds_gen;             /* ldp_creds_gen then */
    unsigned open_flags;            /* OPEN_* of the last open the FS answered */
    uint64_t whole_stamp;           /* seen filled whole (a vfile's whole_*, kept for the */
    unsigned whole_gen;             /* next opens of the file) */
    off_t whole_size;
    /* kept past its last close (refs 0, shared mode): in the idle list, least recently
     * used first, under table_lock */
    int idle;
    off_t idle_size;
    /* a handle held past its last close (OPEN_HOLD, below): the FS's open of the file is
     * still this process's, released when the hold ends (let_go) */
    int held;
    int held_flags;
    uint64_t held_fh;
    struct pcache *idle_prev, *idle_next;
    pthread_mutex_t lock;
};

static struct pcache *table;
/* Found by name at every open and stat of a file a process holds or keeps: hashed (a list
 * walked each time cost 5-7 us a stat with a thousand kept caches) */
#define PC_BUCKETS 4096         /* power of two */
static struct pcache *by_name[PC_BUCKETS];

static unsigned name_bucket(int mnt, const char *path)
{
    uint64_t h = 1469598103934665603ull ^ (unsigned)mnt;
    for (const unsigned char *c = (const unsigned char *)path; *c; c++)
        h = (h ^ *c) * 1099511628211ull;
    return (unsigned)(h ^ (h >> 32)) & (PC_BUCKETS - 1);
}

static void hash_add(struct pcache *pc)
{
    pc->bucket = name_bucket(pc->mnt, pc->path);
    pc->hnext = by_name[pc->bucket];
    by_name[pc->bucket] = pc;
}

static void hash_del(struct pcache *pc)
{
    for (struct pcache **p = &by_name[pc->bucket]; *p; p = &(*p)->hnext)
        if (*p == pc) {
            *p = pc->hnext;
            break;
        }
}
static pthread_mutex_t table_lock = PTHREAD_MUTEX_INITIALIZER;
static size_t granule;          /* what a hole is made of: a page, or a huge page */

static size_t hole_granule(void)
{
    if (granule)
        return granule;
    size_t g = 4096;
    int fd = REAL(open)("/sys/kernel/mm/transparent_hugepage/shmem_enabled", O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char buf[160];
        ssize_t n = read(fd, buf, sizeof buf - 1);
        REAL(close)(fd);
        buf[n > 0 ? n : 0] = '\0';
        /* the selected value is in brackets; never/deny/advise keep memfds on small pages */
        char *sel = strchr(buf, '[');
        if (sel && strncmp(sel, "[never]", 7) && strncmp(sel, "[deny]", 6) && strncmp(sel, "[advise]", 8))
            g = 2u << 20;
    }
    __atomic_store_n(&granule, g, __ATOMIC_RELAXED);
    return g;
}

static void table_enter(void)
{
    guard_enter();
    pthread_mutex_lock(&table_lock);
}

static void table_leave(void)
{
    pthread_mutex_unlock(&table_lock);
    guard_leave();
}

/* An entry's lock: the file's turn between processes and threads (vfs/cache_turn.c: never
 * a lock on the memfd, where the program's own locks are), taken as the caller's thread
 * stands, then a mutex for this process's view of the entry. */
static void entry_lock(struct pcache *pc)
{
    /* the key (an fstat of the memfd) at the first lock: a small file read whole from a
     * cache its open filled takes none */
    if (__atomic_load_n(&pc->turn, __ATOMIC_ACQUIRE) == 0)
        __atomic_store_n(&pc->turn, cache_turn_key(pc->mfd), __ATOMIC_RELEASE);
    cache_turn_take(__atomic_load_n(&pc->turn, __ATOMIC_ACQUIRE));
    guard_enter();
    pthread_mutex_lock(&pc->lock);
}

static void entry_unlock(struct pcache *pc)
{
    pthread_mutex_unlock(&pc->lock);
    guard_leave();
    cache_turn_give(__atomic_load_n(&pc->turn, __ATOMIC_ACQUIRE));
}

/* The memfd as our own fills and writes left it (under the entry's lock). */
/* The known state is kept on the memfd too (a user xattr, tmpfs >= 6.6), so that every
 * process holding it agrees on what has reached the FS: a child that passed its stdio
 * output on must not have its parent pass it on again. */
#define KNOWN_XATTR "user.ldpfuse.known"
static int load_known(struct pcache *pc);
struct known {
    int64_t size, sec, nsec;
};

static void note_known_as(struct pcache *pc, int xflags)
{
    struct stat k;
    if (REAL(fstat)(pc->mfd, &k) == 0) {
        pc->known_mtime = k.st_mtim;
        __atomic_store_n(&pc->known_size, k.st_size, __ATOMIC_RELAXED);     /* read unlocked: pcache_fill */
        struct known kn = { k.st_size, k.st_mtim.tv_sec, k.st_mtim.tv_nsec };
        if (!pc->no_xattr && REAL(fsetxattr)(pc->mfd, KNOWN_XATTR, &kn, sizeof kn, xflags) < 0) {
            if (errno == EEXIST)
                load_known(pc);
            else
                __atomic_store_n(&pc->no_xattr, 1, __ATOMIC_RELAXED);
        }
    }
}

static void note_known(struct pcache *pc)
{
    note_known_as(pc, 0);
}

/* A memfd no process has noted yet (the server just made it): the known state is the
 * memfd as it is now, unless another process noted one first. pcache_open runs without the
 * entry's lock, so between our fstat and our fsetxattr another process may have got the
 * same memfd, appended a line and noted the state after it: writing ours over that note
 * would say the line never reached the FS, and the next sync would append it again. */
static void note_known_first(struct pcache *pc)
{
    note_known_as(pc, XATTR_CREATE);
}

/* Before our own fill, write or truncation moves `known` on: was the memfd changed past
 * the wrappers since (stdio's internal write)? Then that is still owed to the FS. Returns
 * whether it was. */
static int check_untracked(struct pcache *pc)
{
    struct stat k;
    load_known(pc);
    if (REAL(fstat)(pc->mfd, &k) == 0 && (k.st_size != pc->known_size ||
        k.st_mtim.tv_sec != pc->known_mtime.tv_sec || k.st_mtim.tv_nsec != pc->known_mtime.tv_nsec)) {
        __atomic_store_n(&pc->untracked, 1, __ATOMIC_RELAXED);
        return 1;
    }
    return 0;
}

static int sync_appended(struct pcache *pc, struct vfile *v, off_t size, char *buf);

/* 0, or -1 if the memfd has no known state (or takes no xattr): ours stays. */
static int load_known(struct pcache *pc)
{
    struct known kn;
    if (pc->no_xattr || REAL(fgetxattr)(pc->mfd, KNOWN_XATTR, &kn, sizeof kn) != (ssize_t)sizeof kn)
        return -1;
    __atomic_store_n(&pc->known_size, (off_t)kn.size, __ATOMIC_RELAXED);     /* read unlocked: pcache_fill */
    pc->known_mtime.tv_sec = (time_t)kn.sec;
    pc->known_mtime.tv_nsec = (long)kn.nsec;
    return 0;
}

static void table_remove(struct pcache *pc)
{
    if (pc->pprev == NULL)
        return;
    __atomic_store_n(pc->pprev, pc->next, __ATOMIC_RELEASE);    /* table_empty reads the head unlocked */
    if (pc->next)
        pc->next->pprev = pc->pprev;
    pc->pprev = NULL;
    hash_del(pc);
}

/* ---- caches kept past their last close (the shared mode). A process keeps the page
 * caches of the files it closed last, while nothing changed them through the mount (the
 * name's stamp as it was when the cache was last the file's), of a class that keeps
 * Operations' open and release (OPEN_LOCAL): an open for reading of such a name uses it
 * again with no request at all (pcache_local), and one whose name moved lets go of it
 * first, as the last close did before (the server then checks it against the file:
 * server/page_caches.c). (Kept for every class, a reader of many files once each, the
 * archive example under bench/per_file.c, paid 8-10 us more a close, every close then
 * letting go of an older cache, for no open saved.) To
 * the server a kept cache is one this process holds, as if a file were open: its own bound
 * on kept caches (LDPFUSE_CACHE_KEEP_MB) counts those no process holds; each process keeps
 * LDPFUSE_CLIENT_KEEP files at most (default 1,024; 0, or LDPFUSE_CACHE_KEEP_MB=0, none; a 16th of RLIMIT_NOFILE at
 * most, as each keeps an fd: 64 under `ulimit -n 1024`) of 32 MiB in all (8 MiB a file),
 * the least recently used let go of first, and all at its exit or exec. The memory is the
 * server's memfds, shared by every process that holds them.
 *
 * Held handles. A class that keeps its own open and release but says that they only pin
 * the file (Operations.open_only_pins: OPEN_HOLD) gets no open without a request, as its
 * open must run once for the file to be readable through a handle; but the handle of a
 * read-only open (vfile.holdable) is not released at its close: the cache keeps it
 * (held, held_fh), and is kept past its last close as an OPEN_LOCAL one is. A re-open
 * for reading of the unchanged file, with the same flags, takes the held handle with no
 * request (pcache_local); its close holds it again. One cache holds one handle at most
 * (another read-only open's is released at its close, as before). The hold ends, with
 * the class's release (sent with the let-go of the cache, one request), wherever a kept
 * cache is let go of: at the eviction of the least recently used, when the name is
 * unlinked or renamed by this process (pcache_unlinked, pcache_renamed), when an open or
 * stat finds it changed through the mount since or the file changed behind it, when the
 * program closes its fd (close_range), and before exec (pcache_holds_end); at exit the
 * server releases what the process still holds, as it does for an open fd. A held handle
 * is never a write open's, and never one a forked child inherits (the parent's to
 * release). */
#define IDLE_BYTES (32 << 20)
#define IDLE_FILES 1024
static struct pcache *idle_head, *idle_tail;
static int idle_files;
static off_t idle_bytes;
static int idle_max = -1;

static int idle_max_files(void)
{
    if (idle_max < 0) {
        const char *e = getenv("LDPFUSE_CLIENT_KEEP"), *mb = getenv("LDPFUSE_CACHE_KEEP_MB");
        int n = e && *e ? atoi(e) : IDLE_FILES;
        if (mb && *mb && atol(mb) <= 0)
            n = 0;      /* no cache kept past its last close, here either */
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && (rlim_t)n > rl.rlim_cur / 16)
            n = (int)(rl.rlim_cur / 16);
        idle_max = n > 0 ? n : 0;
    }
    return idle_max;
}

static void idle_remove(struct pcache *pc)
{
    if (!pc->idle)
        return;
    if (pc->idle_prev)
        pc->idle_prev->idle_next = pc->idle_next;
    else
        idle_head = pc->idle_next;
    if (pc->idle_next)
        pc->idle_next->idle_prev = pc->idle_prev;
    else
        idle_tail = pc->idle_prev;
    pc->idle = 0;
    idle_files--;
    idle_bytes -= pc->idle_size;
}

static void idle_add(struct pcache *pc)
{
    pc->idle = 1;
    pc->open_stamp = attrcache_stamp(pc->mnt, pc->path);   /* kept unchanged: nothing to settle */
    pc->idle_size = __atomic_load_n(&pc->known_size, __ATOMIC_RELAXED);
    pc->idle_next = NULL;
    pc->idle_prev = idle_tail;
    if (idle_tail)
        idle_tail->idle_next = pc;
    else
        idle_head = pc;
    idle_tail = pc;
    idle_files++;
    idle_bytes += pc->idle_size;
}

/* Open flags that make no other open of a file that exists (the FS never sees the first
 * three; O_CREAT of an existing file opens it) */
#define SAME_OPEN_MASK (~(O_CLOEXEC | O_NOCTTY | O_LARGEFILE | O_CREAT))

/* May v's handle, at its close, be held by pc? (table_lock held) */
static int may_hold(const struct pcache *pc, const struct vfile *v)
{
    return v && v->holdable && v->fh_valid == 1 && !v->unlinked && pc->backend_ref && !pc->held && !pc->unlinked &&
           !(pc->open_flags & OPEN_DIRECT_IO);
}

/* Is the file unchanged through the mount since the cache was last the file's? */
static int unchanged(const struct pcache *pc)
{
    return pc->fs_known && attrcache_coherent() && attrcache_change_stamp(pc->mnt, pc->path) == pc->valid_stamp;
}

/* May pc, at its last close, be kept? (table_lock held) */
static int keepable(const struct pcache *pc)
{
    return pc->backend_ref && ((pc->open_flags & OPEN_LOCAL) || pc->held) && !(pc->open_flags & OPEN_DIRECT_IO) &&
           !pc->unlinked &&
           !pc->size_unknown && !__atomic_load_n(&pc->mapped, __ATOMIC_RELAXED) &&
           !__atomic_load_n(&pc->untracked, __ATOMIC_RELAXED) && idle_max_files() > 0 &&
           __atomic_load_n(&pc->known_size, __ATOMIC_RELAXED) <= IDLE_BYTES / 4 && unchanged(pc);
}

/* Did every change of the memfd reach the FS? (its known state, vfs: KNOWN_XATTR, is what
 * it holds) */
static int passed_on(struct pcache *pc)
{
    struct known kn;
    struct stat k;
    int e = errno;
    if (pc->no_xattr || REAL(fgetxattr)(pc->mfd, KNOWN_XATTR, &kn, sizeof kn) != (ssize_t)sizeof kn)
        kn = (struct known){ pc->known_size, pc->known_mtime.tv_sec, pc->known_mtime.tv_nsec };
    int r = !__atomic_load_n(&pc->mapped, __ATOMIC_RELAXED) && !__atomic_load_n(&pc->untracked, __ATOMIC_RELAXED) &&
            REAL(fstat)(pc->mfd, &k) == 0 && k.st_size == kn.size && k.st_mtim.tv_sec == kn.sec &&
            k.st_mtim.tv_nsec == kn.nsec;
    errno = e;
    return r;
}

static int same_attrs(const struct pcache *pc, const struct stat *st)
{
    return pc->fs_size == st->st_size && pc->fs_mtime.tv_sec == st->st_mtim.tv_sec &&
           pc->fs_mtime.tv_nsec == st->st_mtim.tv_nsec;
}

/* This process is about to pass a change of pc to the FS: from now on other attributes of
 * the file may be its own doing, not a change behind the mount (changed_behind). Set before
 * the FS call, so that an open that sees the change also sees this. */
static void wrote_here(struct pcache *pc)
{
    __atomic_store_n(&pc->written_here, 1, __ATOMIC_RELEASE);
}

/* The file (st, an open's attributes) changed behind the mount since pc was its: other
 * attributes, no change through the mount to explain them, nothing in the memfd that the
 * FS did not get (as the server's held_changed_behind, server/page_caches.c). */
static int changed_behind(struct pcache *pc, const struct stat *st)
{
    return st && S_ISREG(st->st_mode) && pc->fs_known && !__atomic_load_n(&pc->written_here, __ATOMIC_ACQUIRE) &&
           !same_attrs(pc, st) &&
           attrcache_change_stamp(pc->mnt, pc->path) == pc->valid_stamp && passed_on(pc);
}

/* The open's attributes are the file's as the cache holds it, at stamp. */
static void note_file(struct pcache *pc, const struct stat *st, uint64_t stamp)
{
    pc->fs_known = st && S_ISREG(st->st_mode) && stamp != 0;
    if (!pc->fs_known)
        return;
    pc->fs_size = st->st_size;
    pc->fs_mtime = st->st_mtim;
    pc->valid_stamp = stamp;
    pc->creds_gen = __atomic_load_n(&ldp_creds_gen, __ATOMIC_ACQUIRE);
}

static int let_go(struct pcache *pc, const struct vfile *v);
off_t pcache_size(struct pcache *pc);

static struct pcache *find(int mnt, const char *path)
{
    for (struct pcache *pc = by_name[name_bucket(mnt, path)]; pc; pc = pc->hnext)
        if (pc->mnt == mnt && !pc->unlinked && strcmp(pc->path, path) == 0)
            return pc;
    return NULL;
}

static struct pcache *entry_new(int mnt, const char *path, int mfd)
{
    struct pcache *pc = calloc(1, sizeof *pc);
    if (pc == NULL || (pc->path = strdup(path)) == NULL) {
        free(pc);
        errno = ENOMEM;
        return NULL;
    }
    pc->refs = 1;
    pc->mnt = mnt;
    pc->mfd = mfd;
    pthread_mutex_init(&pc->lock, NULL);
    pc->next = table;
    if (table)
        table->pprev = &pc->next;
    pc->pprev = &table;
    __atomic_store_n(&table, pc, __ATOMIC_RELEASE);     /* table_empty reads it unlocked */
    hash_add(pc);
    return pc;
}

/* Does this process hold the page cache of (mnt, path)? */
int pcache_held(int mnt, const char *path)
{
    table_enter();
    struct pcache *pc = find(mnt, path), *drop = NULL;
    if (pc && pc->idle && !unchanged(pc)) {
        /* kept, but changed through the mount since: let go of, as its last close would have */
        idle_remove(pc);
        table_remove(pc);
        drop = pc;
        pc = NULL;
    }
    table_leave();
    if (drop)
        let_go(drop, NULL);
    return pc != NULL;
}

/* pc is not this file's any more (another file under the name, or the file changed behind
 * the mount): kept, it is let go of (*drop); held, its holders keep it and the name is
 * another cache's. (table_lock held) */
static void detach(struct pcache *pc, struct pcache **drop)
{
    if (pc->idle) {
        idle_remove(pc);
        table_remove(pc);
        *drop = pc;
    } else {
        __atomic_store_n(&pc->unlinked, 1, __ATOMIC_RELAXED);
    }
}

/* The program closes [first, last] at once (close_range, closefrom): the caches kept
 * there are let go of first, their numbers not to be taken for theirs after. */
void pcache_kept_closing(unsigned first, unsigned last)
{
    if (__atomic_load_n(&idle_files, __ATOMIC_RELAXED) == 0)
        return;
    for (;;) {
        table_enter();
        struct pcache *pc = idle_head;
        while (pc && ((unsigned)pc->mfd < first || (unsigned)pc->mfd > last))
            pc = pc->idle_next;
        if (pc) {
            idle_remove(pc);
            table_remove(pc);
        }
        table_leave();
        if (pc == NULL)
            return;
        let_go(pc, NULL);
    }
}

/* Before exec: the handles this process holds are released now, not when the new image
 * ends (the server's rule for what a process that exec'd still holds), and the caches
 * that held them let go of (the new image has no table of them). */
void pcache_holds_end(void)
{
    if (__atomic_load_n(&idle_files, __ATOMIC_RELAXED) == 0)
        return;
    struct pcache *out = NULL;
    table_enter();
    for (struct pcache *n, *pc = idle_head; pc; pc = n) {
        n = pc->idle_next;
        if (!pc->held)
            continue;
        idle_remove(pc);
        table_remove(pc);
        pc->hnext = out;    /* out of its bucket: the link is free */
        out = pc;
    }
    table_leave();
    for (struct pcache *n; out; out = n) {
        n = out->hnext;
        let_go(out, NULL);
    }
}

/* A re-open for reading with no request (OPEN_LOCAL): the cache this process holds or
 * keeps of the file at vp, if the file is unchanged since it was the file's (the name's
 * stamp, and the open's attributes st, those of the cache; the same credentials), for a
 * class that keeps Operations' open and release and a mount that checks no permissions
 * (the server said so with the file's last open), or whose cache holds the handle of an
 * open with the same flags (OPEN_HOLD): *fh, *fh_valid 1, the handle now the caller's. A
 * reference for the caller, or NULL. */
struct pcache *pcache_local(const struct vpath *vp, const struct stat *st, int flags, unsigned *open_flags,
                            uint64_t *fh, int *fh_valid)
{
    table_enter();
    struct pcache *pc = find(vp->mnt, vp->path);
    if (pc && !(pc->backend_ref &&
                ((pc->open_flags & OPEN_LOCAL) ||
                 (pc->held && (pc->held_flags & SAME_OPEN_MASK) == (flags & SAME_OPEN_MASK))) &&
                !(pc->open_flags & OPEN_DIRECT_IO) &&
                !pc->size_unknown && S_ISREG(st->st_mode) && same_attrs(pc, st) &&
                (st->st_ino == 0 || pc->ino == 0 || (uint64_t)st->st_ino == pc->ino) &&
                pc->creds_gen == __atomic_load_n(&ldp_creds_gen, __ATOMIC_ACQUIRE) && unchanged(pc)))
        pc = NULL;
    if (pc) {
        idle_remove(pc);
        pc->refs++;
        *open_flags = pc->open_flags;
        /* a held handle is the new open's (OPEN_LOCAL: none, one is opened if needed) */
        *fh_valid = !(pc->open_flags & OPEN_LOCAL) && pc->held;
        *fh = *fh_valid ? pc->held_fh : 0;
        if (*fh_valid)
            pc->held = 0;
    }
    table_leave();
    return pc;
}

/* A new vfile of pc: what is known of the cache filled whole, for its reads. */
void pcache_whole_to(struct vfile *v)
{
    struct pcache *pc = v->pc;
    table_enter();
    v->whole_stamp = pc->whole_stamp;
    v->whole_gen = pc->whole_gen;
    v->whole_size = pc->whole_size;
    table_leave();
}

static void whole_from(struct pcache *pc, const struct vfile *v)
{
    table_enter();
    pc->whole_stamp = v->whole_stamp;
    pc->whole_gen = v->whole_gen;
    pc->whole_size = v->whole_size;
    table_leave();
}

/* What the FS answered the open that got pc (OPEN_*). */
void pcache_opened(struct pcache *pc, unsigned open_flags)
{
    table_enter();
    pc->open_flags = open_flags;
    table_leave();
}

/* The inode number of the file open at vp (through fh), as the FS gives it; 0 unknown. */
static uint64_t ino_of(const struct vpath *vp, const uint64_t *fh)
{
    struct backend_ops *be = backend_get();
    struct stat st;
    if (be == NULL)
        return 0;
    guard_enter();
    int r = be->getattr(vp->mnt, vp->path, fh, &st);
    guard_leave();
    return r == 0 && S_ISREG(st.st_mode) ? (uint64_t)st.st_ino : 0;
}

/* The cache of the file at vp: one per file, not per name. An entry found by the name is
 * this file's only if its inode number is the file's: another process may have removed
 * the name and made a new file under it (sqlite's -wal, an editor's save), and the old
 * file's cache (still held here) must not be read as the new one's. Then the old entry
 * is taken out of the table, as an unlink here would. FSes that give no inode numbers
 * (ldpfuse makes them from the path) keep one cache per name. */
struct pcache *pcache_open(const struct vpath *vp, off_t size, int size_known, const uint64_t *fh, uint64_t ino,
                           const struct stat *st, uint64_t stamp, int *fresh)
{
    struct pcache *drop = NULL;
    table_enter();
    struct pcache *pc = find(vp->mnt, vp->path);
    if (pc && pc->idle && !unchanged(pc)) {
        /* kept, changed through the mount since: let go of (the server checks it) */
        detach(pc, &drop);
        pc = NULL;
    }
    if (pc && ino == 0 && pc->ino != 0) {
        /* a file just made (O_CREAT) under a name this process holds: which one is it? */
        table_leave();
        ino = ino_of(vp, fh);
        table_enter();
        pc = find(vp->mnt, vp->path);
    }
    if (pc && ino != 0 && pc->ino != 0 && pc->ino != ino) {
        detach(pc, &drop);
        pc = NULL;
    }
    if (pc && changed_behind(pc, st)) {
        /* the file changed behind the mount since this process's cache was its: its
         * holders keep theirs, this open gets the file as it is now (as kernel FUSE's open
         * drops a page cache whose file changed) */
        detach(pc, &drop);
        pc = NULL;
    }
    if (pc) {
        idle_remove(pc);
        pc->refs++;
        if (pc->ino == 0)
            pc->ino = ino;
        if (st && stamp != pc->valid_stamp && S_ISREG(st->st_mode) && pcache_size(pc) == st->st_size &&
            passed_on(pc))
            note_file(pc, st, stamp);   /* changed through the mount, the memfd the file */
        table_leave();
        if (drop)
            let_go(drop, NULL);
        *fresh = 0;
        return pc;
    }
    if (drop) {
        table_leave();
        let_go(drop, NULL);
        table_enter();
    }
    /* the shared server's memfd, shared with every process of the mount, or our own */
    struct backend_ops *be = backend_get();
    int mfd = -1, server_fresh = 1, r = -1;
    uint64_t token = 0;
    if (be && be->cache_open) {
        guard_enter();
        r = be->cache_open(vp->mnt, vp->path, size, fh, &mfd, &server_fresh, &token);
        guard_leave();
    }
    if (r < 0) {
        char name[250];
        snprintf(name, sizeof name, "ldpfuse:%.240s", vp->path);
        mfd = memfd_create(name, MFD_CLOEXEC);
        if (mfd >= 0 && REAL(ftruncate)(mfd, size) < 0) {
            REAL(close)(mfd);
            mfd = -1;
        }
    }
    /* ours: an exec'd image has no use for it (the server's came as the open asked) */
    mfd = fs_fd_cloexec(mfd);
    if (mfd < 0 || (pc = entry_new(vp->mnt, vp->path, mfd)) == NULL) {
        int e = errno;
        if (mfd >= 0)
            REAL(close)(mfd);
        if (r == 0) {
            guard_enter();
            be->cache_close(vp->mnt, vp->path, token);
            guard_leave();
        }
        table_leave();
        errno = e;
        return NULL;
    }
    pc->backend_ref = r == 0;
    pc->backend_token = token;
    if (r == 0 && server_fresh && be->cache_whole_stamp)
        pc->brought_whole = be->cache_whole_stamp();
    pc->open_stamp = attrcache_stamp(vp->mnt, vp->path);
    note_file(pc, st, stamp);
    pc->ino = ino;
    pc->size_unknown = size == 0 && !size_known;
    /* fresh, or made by a process that has not noted it yet: a memfd without a known
     * state would look, to a sync, as if all of it were still owed to the FS. A new one the
     * server noted as it made it (and filled it) comes with that note: no fstat and
     * fsetxattr here (the server's is the same XATTR_CREATE, made before anyone else could
     * have the memfd or, with a thread_safe class, racing them as two clients would) */
    int64_t ksize;
    struct timespec kmtime;
    if (r == 0 && server_fresh && be->cache_known && be->cache_known(&ksize, &kmtime) == 0) {
        pc->known_mtime = kmtime;
        __atomic_store_n(&pc->known_size, (off_t)ksize, __ATOMIC_RELAXED);
    } else if (server_fresh || load_known(pc) < 0) {
        note_known_first(pc);
    }
    table_leave();
    *fresh = 1;
    return pc;
}

/* An fd inherited through exec, or received over a unix socket: this process's entry for
 * the file is that memfd. If it holds another cache of the file already (a private one),
 * NULL: fills of that one would not reach the fd. */
struct pcache *pcache_adopt(int fd, const struct vpath *vp)
{
    table_enter();
    struct pcache *pc = find(vp->mnt, vp->path), *drop = NULL;
    if (pc && pc->idle) {
        detach(pc, &drop);
        table_leave();
        let_go(drop, NULL);
        table_enter();
        pc = find(vp->mnt, vp->path);
    }
    if (pc) {
        struct stat a, b;
        if (REAL(fstat)(fd, &a) < 0 || REAL(fstat)(pc->mfd, &b) < 0 || a.st_ino != b.st_ino || a.st_dev != b.st_dev) {
            table_leave();
            errno = EXDEV;
            return NULL;
        }
        pc->refs++;
        table_leave();
        return pc;
    }
    int mfd = proc_fd_reopen(fd, O_RDWR | O_CLOEXEC);
    if (mfd >= 0)
        mfd = fs_fd(mfd);
    pc = mfd >= 0 ? entry_new(vp->mnt, vp->path, mfd) : NULL;
    if (pc == NULL && mfd >= 0)
        REAL(close)(mfd);
    if (pc)
        load_known(pc);
    table_leave();
    return pc;
}

void pcache_ref(struct pcache *pc)
{
    table_enter();
    pc->refs++;
    table_leave();
}

/* Drop a reference; at the last, let go of the memfd and tell the backend: with the release
 * of v's handle when v is given (the file's last close in the process), else alone. Returns
 * 1 if v's release went with it, 0 if the caller still has to release. */
int pcache_unref_releasing(struct pcache *pc, const struct vfile *v)
{
    int taken = 0;
    table_enter();
    if (may_hold(pc, v)) {
        /* v's handle is held by the cache (OPEN_HOLD): released when the hold ends */
        pc->held = 1;
        pc->held_fh = v->fh;
        pc->held_flags = v->flags;
        taken = 1;
        v = NULL;
    }
    if (--pc->refs > 0) {
        table_leave();
        return taken;
    }
    if (keepable(pc)) {
        /* kept: the least recently used one over the bound is let go of instead, with v's
         * release when both are of one mount (one request, as before) */
        idle_add(pc);
        struct pcache *old = NULL;
        if (idle_files > idle_max_files() || idle_bytes > IDLE_BYTES) {
            old = idle_head;
            idle_remove(old);
            table_remove(old);
        }
        table_leave();
        return (old ? let_go(old, v && v->mnt == old->mnt ? v : NULL) : 0) || taken;
    }
    table_remove(pc);
    table_leave();
    return let_go(pc, v) || taken;
}

/* pc, out of the table: its memfd closed, the backend told (with v's release if v, or
 * with the release of the handle pc holds: then v's is the caller's). */
static int let_go(struct pcache *pc, const struct vfile *v)
{
    REAL(close)(pc->mfd);
    struct backend_ops *be = backend_get();
    int released = 0;
    if (pc->backend_ref && be && be->cache_close) {
        guard_enter();
        if (pc->held && be->release_cached) {
            be->release_cached(pc->mnt, pc->path, pc->held_flags, pc->held_fh, pc->backend_token);
        } else if (pc->held) {
            be->release(pc->mnt, pc->path, pc->held_flags, pc->held_fh);
            be->cache_close(pc->mnt, pc->path, pc->backend_token);
        } else if (v && be->release_cached) {
            be->release_cached(v->mnt, v->path, v->flags, v->fh, pc->backend_token);
            released = 1;
        } else {
            be->cache_close(pc->mnt, pc->path, pc->backend_token);
        }
        if (be->settle && attrcache_stamp(pc->mnt, pc->path) != pc->open_stamp)
            be->settle();   /* changed since: the server asks its attributes now, not later */
        guard_leave();
    }
    pthread_mutex_destroy(&pc->lock);
    free(pc->path);
    free(pc);
    return released;
}

void pcache_unref(struct pcache *pc)
{
    pcache_unref_releasing(pc, NULL);
}

/* A new open file description of the cache with the caller's access mode and flags. */
int pcache_new_fd(struct pcache *pc, int flags)
{
    return proc_fd_reopen(pc->mfd, flags & (O_ACCMODE | O_APPEND | O_CLOEXEC | O_NONBLOCK));
}

off_t pcache_size(struct pcache *pc)
{
    struct stat k;
    return REAL(fstat)(pc->mfd, &k) == 0 ? k.st_size : -1;
}

off_t pcache_size_of(int mnt, const char *path, uint64_t ino)
{
    table_enter();
    struct pcache *pc = find(mnt, path);
    if (pc && ((ino && pc->ino && pc->ino != ino) || pc->idle))
        pc = NULL;          /* the name is another file's now; or no file is open */
    off_t size = pc ? pcache_size(pc) : -1;
    table_leave();
    return size;
}

void pcache_set_mapped(struct pcache *pc)
{
    __atomic_store_n(&pc->mapped, 1, __ATOMIC_RELAXED);
}

/* ---- filling */

/* Read [off, end) from the FS into the memfd. Returns the bytes stored; fewer than asked
 * means the FS's end of file (a short read ends the file, as in FUSE). */
static ssize_t fetch(struct pcache *pc, struct vfile *v, off_t off, off_t end, char *buf)
{
    struct backend_ops *be = backend_get();
    if (be == NULL || vfile_ensure_fh(v) < 0)
        return -EIO;
    uint64_t fh = v->fh;
    int own_fh = 0;
    off_t pos = off;
    ssize_t err = 0;
    while (pos < end) {
        size_t want = (size_t)(end - pos) < FS_CHUNK ? (size_t)(end - pos) : FS_CHUNK;
        guard_enter();
        ssize_t n = be->read(pc->mnt, v->path, buf, want, pos, fh);
        guard_leave();
        if ((n == -EBADF || n == -EACCES || n == -EPERM) && !own_fh && (v->flags & O_ACCMODE) == O_WRONLY) {
            /* a write-only handle may not read: as FUSE's writeback cache does, read the
             * old bytes through a read-only open of our own */
            struct open_result ro = { .passthrough_fd = -1 };
            guard_enter();
            int r = be->open(pc->mnt, v->path, O_RDONLY, &ro);
            guard_leave();
            if (r < 0) {
                err = r;
                break;
            }
            if (ro.passthrough_fd >= 0)
                REAL(close)(ro.passthrough_fd);     /* a passthrough answer: no use here */
            fh = ro.fh;
            own_fh = 1;
            continue;
        }
        if (n < 0) {
            err = n;
            break;
        }
        if ((size_t)n > want) {
            ldp_log(LOG_WARNING, "read(%s) returned more bytes than asked (%zd > %zu): cut", v->path, n, want);
            n = (ssize_t)want;
        }
        ssize_t done = 0;
        while (done < n) {
            ssize_t w = REAL(pwrite)(pc->mfd, buf + done, (size_t)(n - done), pos + done);
            if (w < 0)
                break;
            done += w;
        }
        if (done < n) {
            err = -errno;
            break;
        }
        pos += n;
        if ((size_t)n < want)
            break;
    }
    if (own_fh) {
        guard_enter();
        be->release(pc->mnt, v->path, O_RDONLY, fh);
        guard_leave();
    }
    return err < 0 ? err : pos - off;
}

/* The window to read ahead of a read at off of len bytes through v: grows on sequential
 * access, as the kernel's does, and starts small again after a seek. */
static size_t ra_window(struct vfile *v, off_t off, size_t len)
{
    if (v == NULL)
        return 0;
    size_t win = v->ra_win;
    if (off != v->ra_next || win == 0)
        win = RA_MIN;
    else if (win < RA_MAX)
        win *= 2;
    v->ra_win = win;
    v->ra_next = off + (off_t)len;
    return win;
}

static int is_hole(struct pcache *pc, off_t off);

/* The FS's attributes of v's file: the attribute cache's, else getattr's. 1 if known. */
static int fs_stat(struct pcache *pc, struct vfile *v, struct stat *st)
{
    struct backend_ops *be = backend_get();
    int have = attrcache_get(pc->mnt, v->path, st) > 0;
    if (!have && be) {
        guard_enter();
        have = be->getattr(pc->mnt, v->path, v->fh_valid ? &v->fh : NULL, st) == 0;
        guard_leave();
    }
    return have && S_ISREG(st->st_mode);
}

/* The file's end, after asking the FS when a read starts at the cache's end: a file that
 * grew (another process appended) or whose size was unknown (procfs style, st_size 0). */
static off_t grow_at_end(struct pcache *pc, struct vfile *v, off_t size, size_t want, char *buf)
{
    struct stat st;
    if (fs_stat(pc, v, &st) && st.st_size > size) {
        REAL(ftruncate)(pc->mfd, st.st_size);
        /* the granule that held the old end is filled, its part past that end with zeros
         * the FS never gave: those bytes are read now, else a read (or a mapping's
         * write-back) would take the zeros for the file's */
        off_t g = (off_t)hole_granule(), tail = size - size % g + g;
        if (size % g && !is_hole(pc, size - size % g))
            fetch(pc, v, size, tail < st.st_size ? tail : st.st_size, buf);
        return st.st_size;
    }
    if (!pc->size_unknown || (unsigned long long)size >= GROW_MAX)
        return size;
    if (want > FS_CHUNK)
        want = FS_CHUNK;
    ssize_t n = fetch(pc, v, size, size + (off_t)want, buf);
    return n > 0 ? size + n : size;
}

/* Read the holes of [off, end) from the FS, each with up to ra bytes after it, in whole
 * granules, never past the next filled range or the file's end. */
static int fill_range(struct pcache *pc, struct vfile *v, off_t off, off_t end, size_t ra, off_t size,
                      char **buf)
{
    size_t g = hole_granule();
    if (end > size)
        end = size;
    off_t pos = off - (off_t)((size_t)off % g);
    while (pos < end) {
        off_t h = REAL(lseek)(pc->mfd, pos, SEEK_HOLE);
        if (h < 0 || h >= end)
            break;
        off_t d = REAL(lseek)(pc->mfd, h, SEEK_DATA);
        if (d < 0 || d > size)
            d = size;
        off_t stop = end + (off_t)ra;
        if (stop % (off_t)g)
            stop += (off_t)g - stop % (off_t)g;
        if (stop > d)
            stop = d;
        if (*buf == NULL && (*buf = malloc(FS_CHUNK)) == NULL) {
            errno = ENOMEM;
            return -1;
        }
        ssize_t n = fetch(pc, v, h, stop, *buf);
        if (n < 0) {
            errno = (int)-n;
            return -1;
        }
        if (h + n < stop) {
            /* the FS's file ends here: so does the cache, unless it holds bytes written
             * past the wrappers that the FS has not got yet (stdio's own writes, passed on
             * at fflush: the FS lags, and the hole is a gap they left, zeros as natively);
             * cut, they were lost (BFD's objects, when a seek's write() met such a gap) */
            if (!__atomic_load_n(&pc->untracked, __ATOMIC_RELAXED)) {
                __atomic_add_fetch(&pc->gen, 1, __ATOMIC_RELEASE);
                REAL(ftruncate)(pc->mfd, h + n);
            }
            break;
        }
        pos = stop;
    }
    return 0;
}

/* *cache_end (if not NULL): set to the cache's end when [off, off+len) starts before it and
 * runs past it, with no question to the FS whether the file grew (see fill) */
static int fill_locked(struct pcache *pc, struct vfile *v, off_t off, size_t len, int to_end, off_t *cache_end)
{
    char *buf = NULL;
    off_t size = pcache_size(pc);
    if (size < 0)
        return -1;
    off_t end = to_end ? size : off + (off_t)len;
    size_t ra = to_end ? 0 : ra_window(v, off, len);
    if (!to_end && (off >= size || (pc->size_unknown && end > size))) {
        if ((buf = malloc(FS_CHUNK)) == NULL) {
            errno = ENOMEM;
            return -1;
        }
        size = grow_at_end(pc, v, size, len + ra, buf);
    } else if (!to_end && end > size && cache_end) {
        *cache_end = size;
    }
    int r = fill_range(pc, v, off, end, ra, size, &buf);
    if (r == 0 && to_end && pc->size_unknown && v) {
        /* procfs style: the whole file is what read() gives until it gives nothing */
        if (buf == NULL && (buf = malloc(FS_CHUNK)) == NULL) {
            errno = ENOMEM;
            return -1;
        }
        for (;;) {
            off_t grown = grow_at_end(pc, v, size, FS_CHUNK, buf);
            if (grown <= size)
                break;
            size = grown;
        }
    }
    int e = errno;
    free(buf);
    errno = e;
    return r;
}

/*
 * A cache filled whole needs no look at the fd's offset before a read (an lseek per read:
 * a third of a 4 KiB read of a warm memfd). Holes appear in a filled cache only through a
 * change every process hears of (the server bumps the name's counters before the memfd
 * is truncated, or an append's range given back), or through this process (its gen), so
 * the state holds while the name's stamp and the generation stay as they were when it was
 * seen. Noted when a walk found the range filled to the end; taken before the look, so a
 * change during it is a change.
 */
/* Is the hole SEEK_HOLE found at h the cache's end (not a hole inside the file)? */
static int hole_is_end(struct pcache *pc, off_t h)
{
    struct stat st;
    return REAL(fstat)(pc->mfd, &st) == 0 && st.st_size == h;
}

static void note_whole(struct pcache *pc, struct vfile *v, unsigned gen)
{
    if (pc->size_unknown || !attrcache_coherent())
        return;
    uint64_t stamp = attrcache_stamp(pc->mnt, v->path);
    int e = errno;
    off_t h = REAL(lseek)(pc->mfd, 0, SEEK_HOLE);
    int whole = h > 0 && hole_is_end(pc, h);
    errno = e;
    if (!whole)
        return;
    v->whole_gen = gen;
    v->whole_size = h;
    v->whole_stamp = stamp;
    whole_from(pc, v);
}

/* A small file's data came with its open (the server filled the new cache with the file
 * whole before it answered, server/dispatch.c fill_first_window): the cache is whole at
 * the stamp taken before that open's request, with no look at all (the first read() of
 * each small file looked at the fd's offset, the hole after it and the cache's size). */
void pcache_brought_whole(struct vfile *v)
{
    struct pcache *pc = v->pc;
    table_enter();
    uint64_t stamp = pc->brought_whole;
    pc->brought_whole = 0;
    table_leave();
    /* the memfd's size as this process received it (pcache_open: the server's note, or its own): what
     * the server filled */
    off_t size = __atomic_load_n(&pc->known_size, __ATOMIC_RELAXED);
    if (stamp == 0 || pc->size_unknown || size <= 0 || !attrcache_coherent())
        return;
    v->whole_gen = __atomic_load_n(&pc->gen, __ATOMIC_ACQUIRE);
    v->whole_size = size;
    v->whole_stamp = stamp;
    whole_from(pc, v);
}

int pcache_whole(const struct vfile *v)
{
    uint64_t s = v->whole_stamp;
    return s != 0 && v->whole_gen == __atomic_load_n(&v->pc->gen, __ATOMIC_ACQUIRE) &&
           attrcache_stamp(v->mnt, v->path) == s;
}

/* The kernel's read of a cache seen whole (pcache_whole) gave 0: is that the end of the
 * file, with nothing to ask? While the cache stays whole it only grows (holes, a shorter
 * size, come with a change of the stamp or of the generation), so the read's offset is at
 * least whole_size: the end, if the attribute cache says the file is no longer than that
 * (what pcache_fill finds with a look at the offset and at the hole past it, found here with
 * no system call). */
int pcache_whole_end(const struct vfile *v)
{
    struct stat st;
    return pcache_whole(v) && attrcache_get(v->mnt, v->path, &st) > 0 && S_ISREG(st.st_mode) &&
           st.st_size <= v->whole_size;
}

/* Is [off, off+len) in the memfd already, with nothing to ask the FS? 1 yes; 0 a part is a
 * hole; -1 the range reaches the cache's end (whether the file grew is the FS's to say). */
int pcache_filled(const struct vfile *v, off_t off, size_t len)
{
    struct pcache *pc = v->pc;
    struct stat st;
    int e = errno;
    if (REAL(fstat)(pc->mfd, &st) < 0 || off >= st.st_size || pc->size_unknown) {
        errno = e;
        return -1;
    }
    if (pcache_whole(v))
        return 1;
    off_t end = len < (size_t)(st.st_size - off) ? off + (off_t)len : st.st_size;
    off_t h = REAL(lseek)(pc->mfd, off, SEEK_HOLE);
    errno = e;
    return h >= end;
}

/* pcache_fill, which also says, in *cache_end (if not NULL), where the cache ends when the
 * range starts before that end and runs past it: the FS was not asked whether the file grew
 * there (a read() that runs past the end stops short at it and asks with its next read, which
 * starts there). Else *cache_end is left as it was. */
static int fill(struct vfile *v, off_t off, size_t len, int to_end, off_t *cache_end)
{
    struct pcache *pc = v->pc;
    if (to_end && pcache_whole_end(v))
        return 0;       /* the file whole in the cache (a small file's open brought it) */
    if (!to_end && len > 0 && off >= 0) {
        /* already filled (the common case): no lock. SEEK_HOLE costs the distance to the
         * next hole, so what it said is kept for the next reads of this open file. */
        unsigned gen = __atomic_load_n(&pc->gen, __ATOMIC_ACQUIRE);
        off_t end = off + (off_t)len;
        int filled = v->filled_gen == gen && off >= v->filled_lo && end <= v->filled_hi;
        if (!filled && len <= 4096) {
            /* A small sequential reader finds the range ahead with SEEK_HOLE once it has read
             * a 32nd of the file (what the walk would cost, 35 ns a page here, is then at most
             * what its SEEK_DATAs, 400 ns each, already cost), and reads on with no call. */
            off_t known = __atomic_load_n(&pc->known_size, __ATOMIC_RELAXED);     /* a hint only */
            if (off == v->seq_next && v->seq_small > 0 && v->seq_small >= known / 32)
                goto walk;
            /* two pages at most: SEEK_DATA at a filled page answers at once */
            filled = REAL(lseek)(pc->mfd, off, SEEK_DATA) == off &&
                     ((off ^ (end - 1)) < 4096 || REAL(lseek)(pc->mfd, end - 1, SEEK_DATA) == end - 1);
            if (filled) {
                v->seq_small = off == v->seq_next ? v->seq_small + (off_t)len : (off_t)len;
                v->seq_next = end;
                if (off == v->ra_next)
                    v->ra_next = end;
                /* A random reader pays a look per read where a cache seen whole pays none
                 * (pcache_whole): after a look for each 8th page of the file, the file is
                 * walked once from its start (35 ns a page against 400 ns a look: at most
                 * half of what the looks cost so far), and a cache found whole is read
                 * with no look from then on. */
                if (++v->data_looks >= (known >> 15 > 32 ? known >> 15 : 32)) {
                    v->data_looks = 0;
                    int e = errno;
                    note_whole(pc, v, gen);
                    errno = e;
                }
                return 0;
            }
        }
    walk:
        if (!filled) {
            int e = errno;
            off_t h = REAL(lseek)(pc->mfd, off, SEEK_HOLE);
            if (h >= end) {
                v->filled_lo = off;
                v->filled_hi = h;
                v->filled_gen = gen;
                filled = 1;
                if (!pcache_whole(v))
                    note_whole(pc, v, gen);
            } else if (!pc->size_unknown) {
                /* A read that runs past the end (a reader asks for more than is left, to
                 * see the end) or starts there: what the locked fill would find, found
                 * without the lock or a buffer. ENXIO: off is at or past the cache's end;
                 * nothing to fill unless the file grew past off. Else the hole at h is
                 * the end (h == the cache's size) and all before it is filled. */
                struct stat st;
                if (h < 0)
                    filled = errno == ENXIO && attrcache_get(pc->mnt, v->path, &st) > 0 &&
                             S_ISREG(st.st_mode) && st.st_size <= off;
                else if ((filled = h > off && hole_is_end(pc, h)) && cache_end)
                    *cache_end = h;
            }
            errno = e;
        }
        if (filled) {
            if (off == v->ra_next)
                v->ra_next = end;      /* still sequential for the next fill */
            return 0;
        }
    }
    entry_lock(pc);
    check_untracked(pc);
    int r = fill_locked(pc, v, off, len, to_end, cache_end);
    int e = errno;
    note_known(pc);
    entry_unlock(pc);
    errno = e;
    return r;
}

/* Make [off, off+len) of the file readable from the memfd (len 0 with to_end: all of it). */
int pcache_fill(struct vfile *v, off_t off, size_t len, int to_end)
{
    return fill(v, off, len, to_end, NULL);
}

/* pcache_fill for a stream of glibc's own (stdio_read.c), which reads on to the cache's end
 * past the wrappers and takes that end for the file's: a range that runs past the cache's end
 * also asks whether the file grew (another process appended: a cache of its own in the
 * embedded mode), as a read() that starts at the end asks. A range within the cache costs
 * what pcache_fill's costs (the stream looked at the file's size with an fstat per refill). */
int pcache_fill_stream(struct vfile *v, off_t off, size_t len)
{
    off_t cache_end = -1;
    if (fill(v, off, len, 0, &cache_end) < 0)
        return -1;
    if (cache_end > off && cache_end < off + (off_t)len)
        return fill(v, cache_end, (size_t)(off + (off_t)len - cache_end), 0, NULL);
    return 0;
}

/* A stream of glibc's own (one that may write: stdio.c) moves past the cache's end, where
 * glibc writes itself, past the wrappers: the page its write starts in would hold zeros
 * before it, read back by the stream and passed on to the FS at fflush. That end may be
 * stale (another process appended: a cache of its own in the embedded mode, or a change
 * behind the mount): the cache grows to the FS's end first, and what lies past its old end
 * is read from the FS now (grow_at_end reads the old end's granule, fill_range the rest),
 * as the stream was filled whole when it was made. Nothing before the old end is touched:
 * it may hold what glibc wrote and the FS has not got yet, with gaps (holes) the FS, which
 * lags, cannot fill. 0, or -1 with errno. */
int pcache_grow_to_fs_end(struct vfile *v)
{
    struct pcache *pc = v->pc;
    char *buf = malloc(FS_CHUNK);
    if (buf == NULL) {
        errno = ENOMEM;
        return -1;
    }
    entry_lock(pc);
    check_untracked(pc);
    off_t size = pcache_size(pc), end = size;
    int r = size < 0 ? -1 : 0;
    if (r == 0 && (end = grow_at_end(pc, v, size, 0, buf)) > size)
        r = fill_range(pc, v, size, end, 0, end, &buf);
    int e = errno;
    note_known(pc);
    entry_unlock(pc);
    free(buf);
    errno = e;
    return r;
}

/* A stream of glibc's own that writes was made on v (stdio.c): from now on a write past
 * this cache's end reads the range from the old end from the FS (pcache_write), as glibc's
 * own writes may fill part of any granule there. */
void pcache_stream_made(struct vfile *v)
{
    __atomic_store_n(&v->pc->streams, 1, __ATOMIC_RELAXED);
}

/* ---- writing */

/* Fill the granule around off if it is a hole inside the file: a write into part of it
 * would otherwise make the rest look filled with zeros. */
static int fill_edge(struct pcache *pc, struct vfile *v, off_t off, off_t size)
{
    size_t g = hole_granule();
    off_t start = off - (off_t)((size_t)off % g);
    if (start >= size || start == off)
        return 0;
    char *buf = NULL;
    int r = fill_range(pc, v, start, start + (off_t)g, 0, size, &buf);
    int e = errno;
    free(buf);
    errno = e;
    return r;
}

/* Is the granule at off a hole (never filled) of the memfd? */
static int is_hole(struct pcache *pc, off_t off)
{
    int e = errno;
    off_t d = REAL(lseek)(pc->mfd, off, SEEK_DATA);
    errno = e;
    return d != off;
}

/* The file grew from old to at least upto: tmpfs keeps what a mapping stored past the old
 * end in its last page (fsx -e), where the file system grew with zeros; so must the cache.
 * (A hole there holds nothing to clear.) */
static void zero_past_end(struct pcache *pc, off_t old, off_t upto)
{
    static const char zeros[4096];
    off_t end = old - old % 4096 + 4096;
    if (old < 0 || upto <= old || old % 4096 == 0 || is_hole(pc, old - old % (off_t)hole_granule()))
        return;
    REAL(pwrite)(pc->mfd, zeros, (size_t)((end < upto ? end : upto) - old), old);
}

/*
 * The cache's end was `old` and the FS's file now reaches `upto` past it: a write past that
 * end, a truncation up (every path that extends a cache: write, pwrite, writev, pwritev,
 * copies and fallocate's zeros through pcache_write; ftruncate, truncate, fallocate and
 * posix_fallocate through truncate_locked). `old` may be stale: another process (the
 * embedded mode: a cache of its own) or a change behind the mount grew the file, and the
 * bytes from `old` on are then the FS's, not zeros. Nothing here may make them zeros:
 *
 *  - the granules wholly past the granule of `old` are holes (the memfd grew there), read
 *    from the FS when someone asks: the FS's bytes, or the zeros of its own gap, as
 *    natively;
 *  - the granule that holds `old`, if filled, has zeros past `old` that the FS never gave
 *    (and what a mapping stored there, fsx -e): that part is read from the FS now, as
 *    grow_at_end reads it (the part before `old` may hold what stdio or a mapping stored
 *    and the FS has not got yet: not given back). With no vfile to read through
 *    (truncate(path)) it is given back when nothing there is owed to the FS, else cleared
 *    (zero_past_end: right when `old` was the FS's end);
 *  - the granule of a write's first byte, past the old end's granule, is left a hole by
 *    the caller (written_from), the write's bytes in it read back from the FS with the
 *    rest.
 *
 * Entry lock held. Bumps the generation: holes came back (pcache_whole).
 */
static void grew_past_end(struct pcache *pc, struct vfile *v, off_t old, off_t upto)
{
    off_t g = (off_t)hole_granule(), start = old - old % g, tail = start + g;
    if (old < 0 || upto <= old)
        return;
    __atomic_add_fetch(&pc->gen, 1, __ATOMIC_RELEASE);
    if (old % g == 0 || is_hole(pc, start))
        return;
    if (tail > upto)
        tail = upto;
    char *buf = v ? malloc((size_t)(tail - old)) : NULL;
    ssize_t n = buf ? fetch(pc, v, old, tail, buf) : -1;
    free(buf);
    if (n == tail - old)
        return;
    if (v || (!pc->mapped && !pc->untracked))
        REAL(fallocate)(pc->mfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, start, g);
    else
        zero_past_end(pc, old, upto);
}

/* Where a write at `at` past the old end (size) starts to go into the memfd: a granule
 * partly written and still a hole (past the old end's granule, grew_past_end) stays one,
 * else it would read as zeros before `at`. */
static off_t written_from(struct pcache *pc, off_t at, off_t size)
{
    off_t g = (off_t)hole_granule(), start = at - at % g;
    if (at <= size || at % g == 0 || !is_hole(pc, start))
        return at;
    return start + g;
}

/* A direct_io write reached the FS: keep the cache true for the other opens of the file
 * without reading anything from the FS (a live file's read may consume data). Granules
 * the write covers take its bytes; a partly covered one takes them only if it was filled
 * already, else it stays a hole, to be read when someone asks (past the old end too: the
 * bytes before the write there are the FS's, grew_past_end). */
static void direct_wrote(struct pcache *pc, const char *buf, off_t at, off_t n, off_t size)
{
    off_t g = (off_t)hole_granule(), lo = at, hi = at + n;
    off_t gl = at - at % g, gr = hi - hi % g;
    if (at > size)
        grew_past_end(pc, NULL, size, at + n);     /* nothing read from the FS here */
    if (gl < at && is_hole(pc, gl))
        lo = gl + g;
    if (gr < hi && hi < size && gr >= lo && is_hole(pc, gr))
        hi = gr;
    for (off_t done = lo; done < hi;) {
        ssize_t w = REAL(pwrite)(pc->mfd, buf + (done - at), (size_t)(hi - done), done);
        if (w <= 0)
            break;
        done += w;
    }
    if (at + n > size)
        REAL(ftruncate)(pc->mfd, at + n);
}

/* An append the FS put at `at`, past the cache's end (size): the bytes between are other
 * processes' appends that this memfd never got (a cache of this process's own: the
 * embedded mode, or another uid's; one made before them). They are the FS's, not zeros:
 * the granules from the one that holds the old end to the one that holds the new end are
 * given back, to be read from the FS, appended line included (as sync_appended gives back
 * a range the FS put elsewhere). Written into, the granule that holds `at` would read as
 * zeros before it, and the old end's would keep the zeros a fill put past it. Entry lock
 * held; 1 if so, 0 if the append was at the cache's end (or before it). */
static int append_past_end(struct pcache *pc, off_t size, off_t at, off_t n)
{
    if (at <= size)
        return 0;
    off_t g = (off_t)hole_granule(), lo = size - size % g, end = at + n;
    off_t hi = end + (g - end % g) % g;
    __atomic_add_fetch(&pc->gen, 1, __ATOMIC_RELEASE);
    REAL(ftruncate)(pc->mfd, end);
    REAL(fallocate)(pc->mfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, lo, hi - lo);
    return 1;
}

ssize_t direct_read(struct vfile *v, int fd, void *buf, size_t len, off_t off)
{
    if ((v->flags & O_ACCMODE) == O_WRONLY) {
        errno = EBADF;
        return -1;
    }
    struct backend_ops *be = backend_get();
    if (be == NULL || vfile_ensure_fh(v) < 0) {
        errno = EIO;
        return -1;
    }
    int positional = off >= 0;
    if (!positional && (off = REAL(lseek)(fd, 0, SEEK_CUR)) < 0)
        return -1;
    size_t done = 0;
    while (done < len) {
        /* as FUSE splits a direct read into requests and stops at a short one */
        size_t want = len - done < FS_CHUNK ? len - done : FS_CHUNK;
        guard_enter();
        ssize_t n = be->read(v->mnt, v->path, (char *)buf + done, want, off + (off_t)done, v->fh);
        guard_leave();
        if (n < 0) {
            if (done > 0)
                break;
            errno = (int)-n;
            return -1;
        }
        if ((size_t)n > want) {
            ldp_log(LOG_WARNING, "read(%s) returned more bytes than asked (%zd > %zu): cut", v->path, n, want);
            n = (ssize_t)want;
        }
        done += (size_t)n;
        if ((size_t)n < want)
            break;
    }
    if (!positional)
        REAL(lseek)(fd, off + (off_t)done, SEEK_SET);
    return (ssize_t)done;
}

ssize_t pcache_write(struct vfile *v, int fd, const void *buf, size_t len, off_t at, int positional)
{
    struct pcache *pc = v->pc;
    struct backend_ops *be = backend_get();
    if (be == NULL || vfile_ensure_fh(v) < 0) {
        errno = EIO;
        return -1;
    }
    entry_lock(pc);
    int changed = check_untracked(pc);
    ssize_t ret = -1;
    off_t size = pcache_size(pc);
    /* positional: 0 at the fd's offset, 1 at `at`, PCACHE_APPEND(_KEEP) pwritev2's
     * RWF_APPEND: at the end whatever the fd's flags (the fd's offset moved, or not) */
    int append = positional >= PCACHE_APPEND || (!positional && (v->flags & O_APPEND));
    int moves = positional == 0 || positional == PCACHE_APPEND;
    if (append && changed && size > pc->known_size && !pc->mapped) {
        /* appended past the wrappers (stdio of this or another fd) and not yet passed on:
         * those bytes go first, else ours would land at the FS's end, on top of them */
        char *buf = malloc(FS_CHUNK);
        int r = buf ? sync_appended(pc, v, size, buf) : (errno = ENOMEM, -1);
        free(buf);
        if (r < 0 || (size = pcache_size(pc)) < 0)
            goto out;
    }
    if (!positional && !append)
        at = REAL(lseek)(fd, 0, SEEK_CUR);
    if (size < 0 || (!append && at < 0))
        goto out;
    ssize_t n;
    if (v->direct_io) {
        wrote_here(pc);
        guard_enter();
        n = append ? be->append(pc->mnt, v->path, buf, len, v->fh, &at)
                   : be->write(pc->mnt, v->path, buf, len, at, v->fh);
        guard_leave();
        if (n < 0) {
            errno = (int)-n;
            goto out;
        }
        if (!append || !append_past_end(pc, size, at, n))
            direct_wrote(pc, buf, at, n, size);
        if (moves)
            REAL(lseek)(fd, at + n, SEEK_SET);
        ret = n;
        goto out;
    }
    if (append) {
        /* the FS decides where the end is (other processes append too) */
        if (fill_edge(pc, v, size, size) < 0)
            goto out;
        wrote_here(pc);
        guard_enter();
        n = be->append(pc->mnt, v->path, buf, len, v->fh, &at);
        guard_leave();
    } else {
        /* past the end (at > size), the old end's granule is the FS's: grew_past_end */
        if ((at <= size && fill_edge(pc, v, at, size) < 0) ||
            fill_edge(pc, v, at + (off_t)len, size) < 0)
            goto out;
        wrote_here(pc);
        guard_enter();
        n = be->write(pc->mnt, v->path, buf, len, at, v->fh);
        guard_leave();
    }
    if (n < 0) {
        errno = (int)-n;
        goto out;
    }
    if (append && append_past_end(pc, size, at, n)) {
        if (moves)
            REAL(lseek)(fd, at + n, SEEK_SET);
        ret = n;
        goto out;
    }
    ssize_t done = 0;
    if (UNLIKELY(at > size) && n > 0) {
        /* past the cache's end, which may be stale: the gap is the FS's (grew_past_end) */
        REAL(ftruncate)(pc->mfd, at + n);
        grew_past_end(pc, v, size, at + n);
        done = written_from(pc, at, size) - at;
        if (__atomic_load_n(&pc->streams, __ATOMIC_RELAXED)) {
            /* glibc writes into this cache itself: a part of a hole it writes would read
             * as zeros, passed on at fflush. The range from the old end is read from the
             * FS now, the write's bytes with it */
            char *fb = NULL;
            fill_range(pc, v, size, at + n, 0, at + n, &fb);
            free(fb);
            done = 0;
        }
    }
    while (done < n) {
        ssize_t w = REAL(pwrite)(pc->mfd, (const char *)buf + done, (size_t)(n - done), at + done);
        if (w < 0)
            goto out;
        done += w;
    }
    if (moves)
        REAL(lseek)(fd, at + n, SEEK_SET);
    ret = n;
out:;
    int e = errno;
    note_known(pc);
    entry_unlock(pc);
    attrcache_changed();     /* the FS's write/truncate: told to every process */
    errno = e;
    return ret;
}

/* ---- size and names */

/* The FS truncates the file and the cache follows, both under the entry's lock: a fill in
 * flight would otherwise put old bytes back after the cache's truncation (its pwrite()
 * grows the memfd again), and a write between the FS's truncation and the cache's would
 * be cut from the cache though the FS keeps it. Returns 0 or -errno. */
static int truncate_locked(struct pcache *pc, struct vfile *v, const char *path, off_t len,
                           const uint64_t *fh)
{
    struct backend_ops *be = backend_get();
    entry_lock(pc);
    check_untracked(pc);
    wrote_here(pc);
    guard_enter();
    int r = be->truncate(pc->mnt, path, len, fh);
    guard_leave();
    __atomic_add_fetch(&pc->gen, 1, __ATOMIC_RELEASE);
    off_t old = pcache_size(pc);
    if (r == 0 && REAL(ftruncate)(pc->mfd, len) < 0)
        r = -errno;
    if (r == 0)
        grew_past_end(pc, v, old, len);     /* up: from the old end on, the FS's bytes */
    note_known(pc);
    entry_unlock(pc);
    attrcache_changed();     /* the FS's write/truncate: told to every process */
    return r;
}

/* ftruncate on a cached fd: the FS first, then the cache (which then holds, after close). */
int pcache_ftruncate(struct vfile *v, off_t len)
{
    struct pcache *pc = v->pc;
    if (backend_get() == NULL || vfile_ensure_fh(v) < 0) {
        errno = EIO;
        return -1;
    }
    return (int)be_errno(truncate_locked(pc, v, v->path, len, &v->fh));
}

/* O_TRUNC: the open's cache (pcache_open) is truncated with the file. Returns 0 or -errno. */
int pcache_truncate_open(struct pcache *pc, const char *path, const uint64_t *fh)
{
    return truncate_locked(pc, NULL, path, 0, fh);
}

/* truncate(path): if the file's cache is held (by this process, or with the shared server
 * by any process), it is truncated with the file; else only the FS. Returns 0 or -errno. */
int pcache_truncate_path(const struct vpath *vp, off_t len)
{
    struct backend_ops *be = backend_get();
    if (be == NULL)
        return -EIO;
    struct pcache *pc = NULL;
    int fresh;
    if (be->truncate_uncached) {
        /* the common case, a file nobody holds, in one round trip */
        guard_enter();
        int r = be->truncate_uncached(vp->mnt, vp->path, len);
        guard_leave();
        if (r != TRUNCATE_CACHED) {
            attrcache_changed();
            return r;
        }
    }
    if (be->cache_open) {
        pc = pcache_open(vp, len, 1, NULL, ino_of(vp, NULL), NULL, 0, &fresh);  /* made fresh: len bytes, none filled */
    } else {
        table_enter();
        if ((pc = find(vp->mnt, vp->path)) != NULL)
            pc->refs++;
        table_leave();
    }
    if (pc == NULL) {
        guard_enter();
        int r = be->truncate(vp->mnt, vp->path, len, NULL);
        guard_leave();
        attrcache_changed();
        return r;
    }
    int r = truncate_locked(pc, NULL, vp->path, len, NULL);
    pcache_unref(pc);
    return r;
}

/* A kept cache that holds a handle, at (mnt, path): out of the table, for let_go (its
 * hold ends when its name does). (table_lock held) */
static struct pcache *held_out(int mnt, const char *path)
{
    struct pcache *pc = find(mnt, path);
    if (pc == NULL || !pc->idle || !pc->held)
        return NULL;
    idle_remove(pc);
    table_remove(pc);
    return pc;
}

/* A process that holds no cache (a backing tree's files are all the kernel's) has nothing
 * to rename or mark, and takes neither the lock nor the guard: a rename or unlink on such a
 * tree blocks no signal (vfs/backing.c). A cache another thread makes meanwhile is an open
 * that raced the change, as it could have taken the lock just after it. */
static int table_empty(void)
{
    return __atomic_load_n(&table, __ATOMIC_ACQUIRE) == NULL;
}

void pcache_renamed(int mnt, const char *from, const char *to)
{
    if (table_empty())
        return;
    size_t fl = strlen(from);
    table_enter();
    struct pcache *drop_from = held_out(mnt, from), *drop_to = held_out(mnt, to);
    for (struct pcache *pc = table; pc; pc = pc->next) {
        if (pc->mnt != mnt || strncmp(pc->path, from, fl) != 0 || (pc->path[fl] != '\0' && pc->path[fl] != '/'))
            continue;
        char *np = malloc(strlen(to) + strlen(pc->path + fl) + 1);
        if (np == NULL)
            continue;
        strcpy(np, to);
        strcat(np, pc->path + fl);
        hash_del(pc);
        free(pc->path);
        pc->path = np;
        hash_add(pc);
    }
    /* a file renamed over another: the old one's cache no longer has a name */
    table_leave();
    if (drop_from)
        let_go(drop_from, NULL);
    if (drop_to)
        let_go(drop_to, NULL);
}

void pcache_unlinked(int mnt, const char *path)
{
    if (table_empty())
        return;
    table_enter();
    struct pcache *drop = held_out(mnt, path), *pc = drop ? NULL : find(mnt, path);
    if (pc)
        __atomic_store_n(&pc->unlinked, 1, __ATOMIC_RELAXED);
    table_leave();
    if (drop)
        let_go(drop, NULL);     /* the class's release: the file may go now */
}

/* Bytes that reached the memfd past the write wrappers (stores through a shared writable
 * mapping; glibc's stdio, whose internal write() no wrapper sees; a child that runs
 * without the interposer) are passed to the FS here, at flush, fsync, close and exit:
 * every filled range, as the cache cannot tell which of them changed. Returns 0 or -1. */
/* An O_APPEND fd grew past the wrappers (bash's line-buffered stdout: glibc writes each
 * line itself): the new bytes are the end of the memfd; they are appended at the FS's end
 * (atomic with other processes' appends), and if that is not where this cache put them,
 * the range is dropped from the cache, to be read again from the FS. */
static int sync_appended(struct pcache *pc, struct vfile *v, off_t size, char *buf)
{
    struct backend_ops *be = backend_get();
    off_t from = pc->known_size, fs_end = from;
    int moved = 0, ret = 0;
    while (from < size) {
        size_t want = (size_t)(size - from) < FS_CHUNK ? (size_t)(size - from) : FS_CHUNK;
        ssize_t n = REAL(pread)(pc->mfd, buf, want, from);
        if (n <= 0)
            break;
        off_t at = from;
        guard_enter();
        ssize_t w = be->append(pc->mnt, v->path, buf, (size_t)n, v->fh, &at);
        guard_leave();
        if (w < (ssize_t)n) {
            /* the FS kept less than was written: the cache must not say otherwise */
            errno = w < 0 ? (int)-w : ENOSPC;
            ret = -1;
            if (!moved) {
                __atomic_add_fetch(&pc->gen, 1, __ATOMIC_RELEASE);
                REAL(ftruncate)(pc->mfd, from + (w > 0 ? w : 0));
                return ret;
            }
            break;
        }
        if (at != from)
            moved = 1;
        fs_end = at + n;
        from += n;
    }
    if (moved) {
        /* The FS put them elsewhere (another process appended first): the range is dropped
         * from the cache, to be read again from the FS. Only now, when every chunk has been
         * read from it: a chunk read after the punch would be zeros, appended to the file.
         * Whole granules only: a punched part of one would read as zeros. */
        off_t g = (off_t)hole_granule(), lo = pc->known_size - pc->known_size % g;
        off_t hi = size + (g - size % g) % g;
        __atomic_add_fetch(&pc->gen, 1, __ATOMIC_RELEASE);
        REAL(fallocate)(pc->mfd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, lo, hi - lo);
        if (ret == 0 && fs_end > size)
            REAL(ftruncate)(pc->mfd, fs_end);
    }
    return ret;
}

/* Has the memfd changed since the known state (kn) was noted? Looks without the lock. */
static int changed_since(struct pcache *pc, const struct known *kn)
{
    struct stat k;
    return REAL(fstat)(pc->mfd, &k) == 0 && (k.st_size != kn->size ||
           k.st_mtim.tv_sec != kn->sec || k.st_mtim.tv_nsec != kn->nsec);
}

int pcache_sync_untracked(struct vfile *v)
{
    struct pcache *pc = v->pc;
    if (pc == NULL || __atomic_load_n(&pc->unlinked, __ATOMIC_RELAXED) || (v->flags & O_ACCMODE) == O_RDONLY)
        return 0;
    /* a first look without the lock (close of an untouched file must stay cheap): the
     * known state on the memfd, else ours as of our last fill or write */
    struct known kn;
    int e0 = errno;
    if (__atomic_load_n(&pc->no_xattr, __ATOMIC_RELAXED) || REAL(fgetxattr)(pc->mfd, KNOWN_XATTR, &kn, sizeof kn) != (ssize_t)sizeof kn) {
        pthread_mutex_lock(&pc->lock);
        kn = (struct known){ pc->known_size, pc->known_mtime.tv_sec, pc->known_mtime.tv_nsec };
        pthread_mutex_unlock(&pc->lock);
    }
    errno = e0;
    if (!__atomic_load_n(&pc->mapped, __ATOMIC_RELAXED) && !__atomic_load_n(&pc->untracked, __ATOMIC_RELAXED) &&
        !changed_since(pc, &kn))
        return 0;
    struct stat k;
    struct backend_ops *be = backend_get();
    if (be == NULL || vfile_ensure_fh(v) < 0) {
        errno = EIO;
        return -1;
    }
    char *buf = malloc(FS_CHUNK);
    if (buf == NULL) {
        errno = ENOMEM;
        return -1;
    }
    entry_lock(pc);
    int ret = 0;
    /* again under the lock: another process may have been between its write and noting
     * it when we looked */
    load_known(pc);
    if (!pc->mapped && !pc->untracked && REAL(fstat)(pc->mfd, &k) == 0 && k.st_size == pc->known_size &&
        k.st_mtim.tv_sec == pc->known_mtime.tv_sec && k.st_mtim.tv_nsec == pc->known_mtime.tv_nsec)
        goto done;
    off_t size = pcache_size(pc);
    if ((v->flags & O_APPEND) && size > pc->known_size && !pc->mapped) {
        ret = sync_appended(pc, v, size, buf);
        goto done;
    }
    struct stat st;
    if (size != pc->known_size && !(size > pc->known_size && fs_stat(pc, v, &st) && st.st_size >= size)) {
        /* a memfd grown past the wrappers makes the FS's file as long, never shorter:
         * another process may have appended past this cache's end since (its bytes) */
        wrote_here(pc);
        guard_enter();
        int r = be->truncate(pc->mnt, v->path, size, &v->fh);
        guard_leave();
        if (r < 0) {
            errno = -r;
            ret = -1;
        }
    }
    for (off_t pos = 0; pos < size && ret == 0;) {
        off_t d = REAL(lseek)(pc->mfd, pos, SEEK_DATA);
        if (d < 0)
            break;
        off_t h = REAL(lseek)(pc->mfd, d, SEEK_HOLE);
        if (h < 0 || h > size)
            h = size;
        for (pos = d; pos < h;) {
            size_t want = (size_t)(h - pos) < FS_CHUNK ? (size_t)(h - pos) : FS_CHUNK;
            ssize_t n = REAL(pread)(pc->mfd, buf, want, pos);
            if (n <= 0) {
                pos = h;
                break;
            }
            wrote_here(pc);
            guard_enter();
            ssize_t w = be->write(pc->mnt, v->path, buf, (size_t)n, pos, v->fh);
            guard_leave();
            if (w <= 0) {
                errno = w < 0 ? (int)-w : EIO;
                ret = -1;
                break;
            }
            pos += w;
        }
    }
done:;
    int e = errno;
    if (ret == 0) {
        note_known(pc);
        __atomic_store_n(&pc->untracked, 0, __ATOMIC_RELAXED);
    }
    entry_unlock(pc);
    free(buf);
    attrcache_changed();     /* the FS's write/truncate: told to every process */
    errno = e;
    return ret;
}

/* fork: no other thread may hold the table's lock at the instant of the fork. (An entry's
 * lock is held only around FS calls, which fork_prepare's other locks already order.) */
void pcache_fork(int phase)
{
    if (phase == 0)
        pthread_mutex_lock(&table_lock);
    else
        pthread_mutex_unlock(&table_lock);
}

/* In a forked child: the parent's references to the server's caches are the parent's,
 * and the child's turns are taken through descriptions of its own. */
void pcache_fork_child(void)
{
    cache_turn_fork_child();
    /* the FS handles of open files are the parent's to release (FUSE releases when the
     * last process lets go); the child may still use them */
    for (int fd = 0; fd <= fdtable_max(); fd++) {
        struct vfile *v = fdtable_get(fd);
        if (v && v->fh_valid == 1)
            v->fh_valid = 2;
    }
    /* the caches the parent keeps are the parent's holds: let go of here, unsaid */
    for (struct pcache *n, *pc = idle_head; pc; pc = n) {
        n = pc->idle_next;
        table_remove(pc);
        REAL(close)(pc->mfd);
        free(pc->path);
        free(pc);
    }
    idle_head = idle_tail = NULL;
    idle_files = 0;
    idle_bytes = 0;
    for (struct pcache *pc = table; pc; pc = pc->next) {
        pc->backend_ref = 0;
        pc->held = 0;       /* the parent's handle */
        pthread_mutex_init(&pc->lock, NULL);
    }
}
