/*
 * The page caches of cached files in the server (docs/cache.md): one memfd per file for
 * every client. Clients fill and write them themselves (vfs/pagecache.c); the server hands
 * them out, after the caller's own open of the file succeeded (a small file's new cache
 * filled by that open: dispatch.c, fill_first_window), and keeps each alive while a client
 * holds it, and after, while the file is unchanged (below: scache_idle).
 *
 * A new cache is sized by the file system's getattr, asked here when the cache is made,
 * never by the size the client saw: that was looked up earlier (an attribute cache, an
 * O_CREAT open that found the file another process had just made), and a memfd made
 * shorter than the file hides what other processes wrote (sqlite's WAL recovery reads
 * frames up to fstat's size, then writes over the ones it did not see).
 */
#include "server.h"
#include <stdio.h>
#include <sched.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/xattr.h>
#include <time.h>

struct scache {
    struct scache *next, **pprev;       /* in its bucket by (mnt, path) */
    struct scache *id_next, **id_pprev; /* in its bucket by id */
    struct scache *lru_next, **lru_pprev; /* idle ones, least recently used first */
    int mnt, refs, mfd;
    uint64_t id;                /* names it in a client's list of what it holds */
    char *path;
    /* kept after its last close (refs 0): what it was made or last found valid against */
    int attrs_known;
    off_t size;
    struct timespec mtime;
    uint64_t stamp;             /* the name's coherence stamp when the last holder let go */
    uint64_t valid_stamp;       /* ... and when size and mtime were last the file's: if the
                                 * name changed since (written through the mount), they are
                                 * asked again at the last close (scache_close_id) */
    long bytes;                 /* memory it holds while idle */
    int idle;                   /* counted in idle_count and idle_bytes, in the LRU list */
    int filling;                /* new, and being filled by the open that made it with data it
                                 * brought (scache_open_to_fill): no other open gets it yet */
    int noted;                  /* the known state the server noted on it (scache_noted) */
    off_t noted_size;
    struct timespec noted_mtime;
};
static uint64_t scache_ids;
static uint64_t scache_drops;   /* caches dropped so far: a size looked up before one may be old */
static pthread_mutex_t scache_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t scache_filled_cond = PTHREAD_COND_INITIALIZER;     /* a fill ended */

/* Found by name at every open and by id at every close: hashed both ways (a list walked
 * each time cost 5-10 us per open with the 1,000 idle caches of a warm directory). */
#define SCACHE_BUCKETS 4096     /* power of two */
static struct scache *by_name[SCACHE_BUCKETS], *by_id[SCACHE_BUCKETS];
static struct scache *lru_head, **lru_tail = &lru_head;

static unsigned name_bucket(int mnt, const char *path)
{
    uint64_t h = coh_seed(mnt);     /* the change table's FNV-1a (coherence.h) */
    for (const unsigned char *c = (const unsigned char *)path; *c; c++)
        h = coh_step(h, *c);
    return (unsigned)(h ^ (h >> 32)) & (SCACHE_BUCKETS - 1);
}

#define LINK(head, s, nx, pp) do { (s)->nx = *(head); if (*(head)) (*(head))->pp = &(s)->nx; \
                                   *(head) = (s); (s)->pp = (head); } while (0)
#define UNLINK(s, nx, pp) do { *(s)->pp = (s)->nx; if ((s)->nx) (s)->nx->pp = (s)->pp; } while (0)

static void name_link(struct scache *s)
{
    LINK(&by_name[name_bucket(s->mnt, s->path)], s, next, pprev);
}

static struct scache *scache_find(int mnt, const char *path)
{
    struct scache *s = by_name[name_bucket(mnt, path)];
    while (s && (s->mnt != mnt || strcmp(s->path, path) != 0))
        s = s->next;
    return s;
}

/* The same, once no open is filling it (scache_open_to_fill): the others wait for it, so
 * that nothing they write into it is written over by the fill (scache_lock held; it is
 * let go of while they wait). */
static struct scache *scache_find_filled(int mnt, const char *path)
{
    struct scache *s;
    while ((s = scache_find(mnt, path)) != NULL && s->filling)
        pthread_cond_wait(&scache_filled_cond, &scache_lock);
    return s;
}

static struct scache *scache_by_id(uint64_t id)
{
    struct scache *s = by_id[id & (SCACHE_BUCKETS - 1)];
    while (s && s->id != id)
        s = s->id_next;
    return s;
}

/* Is there a page cache of (mnt, path), held or idle? (An open's data is not worth
 * bringing then: workers.c.) */
int scache_known(int mnt, const char *path)
{
    pthread_mutex_lock(&scache_lock);
    int known = scache_find(mnt, path) != NULL;
    pthread_mutex_unlock(&scache_lock);
    return known;
}

/* Does any client hold the page cache of (mnt, path)? (An idle one is nobody's.) */
int scache_held(int mnt, const char *path)
{
    pthread_mutex_lock(&scache_lock);
    struct scache *s = scache_find(mnt, path);
    int held = s != NULL && s->refs > 0;
    pthread_mutex_unlock(&scache_lock);
    return held;
}

static long idle_bytes;         /* memory of the caches no client holds */
static int idle_count;          /* and how many they are (each keeps an fd) */
#define IDLE_MAX 1024

/* Each idle cache keeps an fd of the server's: they may take a quarter of RLIMIT_NOFILE
 * (read again at a use 100 ms after the last read: prlimit may move it; read at every
 * release, it was one system call a file for a reader of many files), at most IDLE_MAX.
 * The rest is for what the server must open: the caches clients hold, connections, the
 * class's own files. Under `ulimit -n 256`, 64. scache_lock held. */
static int idle_max(void)
{
    static int most;
    static uint64_t read_at;
    uint64_t now = chan_now_ns();
    if (read_at == 0 || now - read_at > 100000000u) {
        struct rlimit rl;
        most = getrlimit(RLIMIT_NOFILE, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur / 4 >= IDLE_MAX
               ? IDLE_MAX : (int)(rl.rlim_cur / 4);
        read_at = now;
    }
    return most;
}

static void idle_leave(struct scache *s)
{
    if (!s->idle)
        return;
    idle_bytes -= s->bytes;
    idle_count--;
    s->idle = 0;
    s->bytes = 0;
    if (lru_tail == &s->lru_next)
        lru_tail = s->lru_pprev;
    UNLINK(s, lru_next, lru_pprev);
}

/* ---- closing dropped memfds off the FS thread. The last close of a memfd frees its pages
 * and inode: 8-10 us for a small file here, and a reader of many files (a data loader
 * reading 10,000 files once) drops an idle cache at each release, least recently used
 * first: that was 10 us of each file's time on the FS thread, between its Python calls.
 * A reaper thread closes them, a batch at a time; when it cannot (no thread, the queue
 * full) the dropper closes as before. */
#define REAP_MAX 256
static int reap_fds[REAP_MAX];
static int reap_count, reaper_state;      /* 0: not started, 1: running, -1: could not start */
static pthread_mutex_t reap_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t reap_cond = PTHREAD_COND_INITIALIZER;

static void *reaper_thread(void *arg)
{
    (void)arg;
    int batch[REAP_MAX];
    /* at the lowest priority, as the watcher (serve.c): its wake-up no longer preempts the
     * FS thread on its CPU between a release and the next request (measured with perf on
     * bench/per_file.py: 2-4 us a file at load, in the scheduler under the release's
     * reap_close); it runs once a CPU has nothing else to do, and a full queue falls
     * back to the dropper's own close */
    struct sched_param idle = { 0 };
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
    for (;;) {
        pthread_mutex_lock(&reap_lock);
        while (reap_count == 0)
            pthread_cond_wait(&reap_cond, &reap_lock);
        pthread_mutex_unlock(&reap_lock);
        nanosleep(&(struct timespec){ 0, 2000000 }, NULL);     /* let a batch gather: one wake-up each */
        pthread_mutex_lock(&reap_lock);
        int n = reap_count;
        memcpy(batch, reap_fds, (size_t)n * sizeof *batch);
        reap_count = 0;
        pthread_mutex_unlock(&reap_lock);
        for (int i = 0; i < n; i++)
            close(batch[i]);
    }
    return NULL;
}

static void reap_close(int fd)
{
    pthread_mutex_lock(&reap_lock);
    if (reaper_state == 0) {
        pthread_t t;
        reaper_state = pthread_create(&t, NULL, reaper_thread, NULL) == 0 ? 1 : -1;
        if (reaper_state == 1)
            pthread_detach(t);
    }
    int queued = reaper_state == 1 && reap_count < REAP_MAX;
    int first = 0;
    if (queued) {
        reap_fds[reap_count++] = fd;
        first = reap_count == 1;
    }
    pthread_mutex_unlock(&reap_lock);
    /* after the unlock: a reaper woken under the lock would wake only to wait for it */
    if (first)
        pthread_cond_signal(&reap_cond);
    if (!queued)
        close(fd);
}

static void scache_free(struct scache *s, int now)
{
    UNLINK(s, next, pprev);
    UNLINK(s, id_next, id_pprev);
    idle_leave(s);
    scache_drops++;
    if (now)
        close(s->mfd);
    else
        reap_close(s->mfd);
    free(s->path);
    free(s);
}

static void scache_drop(struct scache *s)
{
    scache_free(s, 0);
}

/* Every idle cache let go of, its fd closed at once (not by the reaper): an open met
 * EMFILE. How many went (0: nothing to gain by trying again). scache_lock held. */
static int shed_locked(void)
{
    int n = 0;
    for (; lru_head; n++)
        scache_free(lru_head, 1);
    return n;
}

int scache_shed(void)
{
    pthread_mutex_lock(&scache_lock);
    int n = shed_locked();
    pthread_mutex_unlock(&scache_lock);
    return n;
}

/* ---- keeping a cache past its last close (issue 24: reading an unchanged file again never
 * enters Python, as over kernel FUSE whose page cache outlives the file's release). An idle
 * cache is used again by the next open of its name only while nothing changed: no change
 * through the mount (the name's coherence stamp, coherence.h, is the one it had when the
 * last holder let go) and none behind it (the size and mtime the open's lookup finds are
 * the ones the cache was made with). Idle caches hold at most LDPFUSE_CACHE_KEEP_MB of
 * memory (default 256) and idle_max() fds, the least recently used let go of first; 0
 * keeps none. An open that meets EMFILE lets go of all of them and tries again (here, and
 * the class's own open: dispatch.c). */
static long keep_limit = -1;

static long keep_bytes_limit(void)
{
    if (keep_limit < 0) {
        const char *e = getenv("LDPFUSE_CACHE_KEEP_MB");
        long mb = e && *e ? atol(e) : 256;
        keep_limit = mb > 0 ? mb << 20 : 0;
    }
    return keep_limit;
}

static uint64_t name_stamp(int mnt, const char *path)
{
    struct coherence *t = __atomic_load_n(&coh, __ATOMIC_ACQUIRE);
    return t ? coherence_stamp(t, mnt, path) : 0;
}

/* The last holder let go of s (scache_lock held; k: its memfd's fstat, just taken): keep
 * it idle, or drop it. */
static void scache_idle(struct scache *s, const struct stat *k)
{
    uint64_t stamp = name_stamp(s->mnt, s->path);
    if (!s->attrs_known || stamp == 0 || keep_bytes_limit() == 0) {
        scache_drop(s);
        return;
    }
    s->stamp = stamp;
    s->bytes = (long)k->st_blocks * 512;
    s->idle = 1;
    idle_bytes += s->bytes;
    idle_count++;
    s->lru_next = NULL;         /* the most recently used: at the tail */
    s->lru_pprev = lru_tail;
    *lru_tail = s;
    lru_tail = &s->lru_next;
    int most = idle_max();
    while ((idle_bytes > keep_bytes_limit() || idle_count > most) && lru_head)
        scache_drop(lru_head);
}

/* An idle cache found again: still the file's? (the lookup's attributes in st) */
static int scache_still_valid(const struct scache *s, const struct stat *st)
{
    return st && S_ISREG(st->st_mode) && s->attrs_known && s->size == st->st_size &&
           s->mtime.tv_sec == st->st_mtim.tv_sec && s->mtime.tv_nsec == st->st_mtim.tv_nsec &&
           name_stamp(s->mnt, s->path) == s->stamp;
}

/* An fd of the file's memfd (a new open file description) for a client; -errno. fh is the
 * caller's open of the file (NULL: none), size what the client saw, used only if the file
 * system's getattr fails. */
static int scache_get(int mnt, const char *path, off_t size, const struct stat *known, uint64_t known_stamp,
                      const uint64_t *fh, int fill, int *fresh, off_t *fresh_size, uint64_t *id);

/* (fresh_size, when not NULL: a new cache's size, the memfd's as made, so that its first
 * fill needs no fstat of it: dispatch.c) */
int scache_open(int mnt, const char *path, off_t size, const uint64_t *fh, int *fresh, off_t *fresh_size,
                uint64_t *id)
{
    return scache_get(mnt, path, size, NULL, 0, fh, 0, fresh, fresh_size, id);
}

/* The same, for an open whose own lookup has just found the file's attributes
 * (W_CREATE_OPEN), st_stamp the name's stamp read before that lookup: no second getattr,
 * unless the name changed through the mount since (below, scache_get). */
int scache_open_sized(int mnt, const char *path, const struct stat *st, uint64_t st_stamp, int *fresh,
                      off_t *fresh_size, uint64_t *id)
{
    return scache_get(mnt, path, st->st_size, st, st_stamp, NULL, 0, fresh, fresh_size, id);
}

/* The same, for an open that brought the file's data with it (a worker's, workers.c): a
 * new cache is the caller's alone until scache_filled(id): every other open waits for it,
 * so that the fill writes over nothing newer, as with one FS thread no other request runs
 * meanwhile (dispatch.c, fill_first_window). *fresh is 2, not 1, for a new cache made
 * after the name changed through the mount since st_stamp: the data brought is older
 * than the file, and must not go into it. */
int scache_open_to_fill(int mnt, const char *path, const struct stat *st, uint64_t st_stamp, int *fresh,
                        off_t *fresh_size, uint64_t *id)
{
    return scache_get(mnt, path, st->st_size, st, st_stamp, NULL, 1, fresh, fresh_size, id);
}

/* The fill of a new cache (scache_open_to_fill) ended: the other opens may have it. */
void scache_filled(uint64_t id)
{
    pthread_mutex_lock(&scache_lock);
    struct scache *s = scache_by_id(id);
    if (s)
        s->filling = 0;
    pthread_cond_broadcast(&scache_filled_cond);    /* (dropped meanwhile: its waiters look again) */
    pthread_mutex_unlock(&scache_lock);
}

static int memfd_passed_on(int mfd, const struct stat *k);
static int passed_on(const struct scache *s, const struct stat *k);

/* Writes through the mount in the server now, by name (its by_name bucket). With a thread
 * per connection (a thread_safe class, -o workers) an open on another thread may ask the
 * file's attributes after the class wrote and before the write's change stamp moved
 * (dispatch.c, coh_changed): the new size or mtime it sees is no change behind the mount.
 * Taken for one, it gave that open a fresh cache while the writers kept the old one, and
 * the lines they appended after were holes of zeros in the new one (four shells appending
 * under -o workers=2: 1 run in 7). A bucket shared with another name only waits for that
 * name's write too. */
static int writing[SCACHE_BUCKETS];

void scache_writing(int mnt, const char *path, int delta)
{
    __atomic_add_fetch(&writing[name_bucket(mnt, path)], delta, __ATOMIC_SEQ_CST);
}

/* A held cache whose file's attributes (st, asked at the name's stamp st_at, which is
 * still the name's) are no longer those it was filled against, while no write through
 * the mount is under way and the name's stamp says nothing changed it through the mount
 * (read in that order: a write that ended moved the stamp before it stopped counting),
 * and whose memfd holds nothing the FS did not get: the file changed behind the mount.
 * (Attributes asked before a change through the mount are no change behind it.) */
static int held_changed_behind(const struct scache *s, const struct stat *st, uint64_t st_at)
{
    struct stat k;
    return s->attrs_known && S_ISREG(st->st_mode) &&
           __atomic_load_n(&writing[name_bucket(s->mnt, s->path)], __ATOMIC_SEQ_CST) == 0 &&
           s->valid_stamp == name_stamp(s->mnt, s->path) && st_at == s->valid_stamp &&
           (s->size != st->st_size || s->mtime.tv_sec != st->st_mtim.tv_sec ||
            s->mtime.tv_nsec != st->st_mtim.tv_nsec) &&
           fstat(s->mfd, &k) == 0 && passed_on(s, &k);
}

/* A new cache's memfd is sized by attributes asked at the name's current stamp: asked
 * before a write through the mount that ended since (another open's lookup, an append
 * made and let go of meanwhile by another client on another thread), its size would be
 * the file's old end, and the next append through it would find the FS's end past the
 * memfd's: the lines between, never filled, read as zeros (four shells appending under
 * -o workers=2). Attributes given (known) count only while the name's stamp is still
 * known_stamp, the one read before they were asked; else they are asked again. */
static int scache_get(int mnt, const char *path, off_t size, const struct stat *known, uint64_t known_stamp,
                      const uint64_t *fh, int fill, int *fresh, off_t *fresh_size, uint64_t *id)
{
    struct stat st;
    int have_st = 0, given = 0;
    uint64_t st_at = 0;     /* the name's stamp before st was asked */
    if (known) {
        st = *known;
        have_st = given = 1;
        st_at = known_stamp;
    }
    pthread_mutex_lock(&scache_lock);
    struct scache *s = scache_find_filled(mnt, path);
    *fresh = 0;
    if (have_st && st_at != name_stamp(mnt, path))
        have_st = given = 0;    /* older than a change through the mount */
    if (s && s->refs <= 0) {
        /* idle since its last close: used again only if the file is unchanged */
        if (!have_st) {
            st_at = name_stamp(mnt, path);
            pthread_mutex_unlock(&scache_lock);
            have_st = fs_ops->getattr(mnt, path, fh, &st) == 0;
            pthread_mutex_lock(&scache_lock);
            s = scache_find_filled(mnt, path);
        }
        if (s && s->refs <= 0) {
            if (have_st && scache_still_valid(s, &st)) {
                idle_leave(s);
                s->valid_stamp = s->stamp;
            } else {
                scache_drop(s);
                s = NULL;
            }
        }
    }
    if (s && s->refs > 0 && s->attrs_known && !have_st) {
        st_at = name_stamp(mnt, path);
        pthread_mutex_unlock(&scache_lock);
        have_st = fs_ops->getattr(mnt, path, fh, &st) == 0;
        pthread_mutex_lock(&scache_lock);
        s = scache_find_filled(mnt, path);
    }
    if (s && s->refs > 0 && have_st && held_changed_behind(s, &st, st_at)) {
        /* held, but the file changed behind the mount since its attributes were taken (no
         * change through it explains them): its holders keep theirs, this open gets the
         * file as it is now, as kernel FUSE's open drops a page cache whose file changed */
        scache_drop(s);
        s = NULL;
    }
    for (int asked = 0; s == NULL; asked++) {
        /* the file's size now, asked without the lock (a method may take long); if a cache
         * of any file was dropped meanwhile, this one may have been written and let go of
         * in between, and if the name changed through the mount, the size asked may be
         * from before: ask again */
        uint64_t drops = scache_drops, stamp = name_stamp(mnt, path);
        int ask = !have_st || asked > 0 || st_at != stamp;
        pthread_mutex_unlock(&scache_lock);
        if (ask) {
            have_st = fs_ops->getattr(mnt, path, fh, &st) == 0 && S_ISREG(st.st_mode);
            st_at = stamp;
            given = 0;
        }
        off_t now = have_st ? st.st_size : size;
        pthread_mutex_lock(&scache_lock);
        if ((s = scache_find_filled(mnt, path)) != NULL || drops != scache_drops ||
            (stamp != name_stamp(mnt, path) && asked < 8))     /* (bounded: writers of caches of their own) */
            continue;
        char name[250];
        snprintf(name, sizeof name, "ldpfuse:%.240s", path);
        int mfd = memfd_create(name, MFD_CLOEXEC);
        if (mfd < 0 && errno == EMFILE && shed_locked() > 0)
            mfd = memfd_create(name, MFD_CLOEXEC);
        s = mfd >= 0 ? calloc(1, sizeof *s) : NULL;
        if (s == NULL || (s->path = strdup(path)) == NULL || ftruncate(mfd, now) < 0) {
            int e = errno ? errno : ENOMEM;
            if (mfd >= 0)
                close(mfd);
            if (s)
                free(s->path);
            free(s);
            pthread_mutex_unlock(&scache_lock);
            return -e;
        }
        s->mnt = mnt;
        s->mfd = mfd;
        s->id = ++scache_ids;
        s->attrs_known = have_st;
        s->valid_stamp = stamp;
        /* data brought with attributes that were asked again is older than the file */
        s->filling = fill && given;
        s->size = now;
        if (have_st)
            s->mtime = st.st_mtim;
        name_link(s);
        LINK(&by_id[s->id & (SCACHE_BUCKETS - 1)], s, id_next, id_pprev);
        *fresh = fill && !given ? 2 : 1;
        if (fresh_size)
            *fresh_size = now;
    }
    /* the client gets the server's own description of the memfd (a dup, not a reopen
     * through /proc: that walked procfs and made a new description at every open, 2 of
     * the open's system calls and its final fput at the close after the hand-over). The
     * clients use it only for positional I/O, holes, attributes and xattrs
     * (vfs/pagecache.c), none of which an offset or another holder moves; a client that
     * sets flags on it could as well write into the memfd it holds read-write. The
     * program's own fd is the client's reopen of it, a description of its own. */
    int fd = fcntl(s->mfd, F_DUPFD_CLOEXEC, 0);
    if (fd < 0 && errno == EMFILE && shed_locked() > 0)
        fd = fcntl(s->mfd, F_DUPFD_CLOEXEC, 0);
    int r = fd >= 0 ? fd : -errno;
    *id = s->id;
    if (fd >= 0)
        s->refs++;
    else if (s->refs <= 0)
        scache_drop(s);
    pthread_mutex_unlock(&scache_lock);
    return r;
}

/* A client let go of the cache (its close, or its end: exit, kill -9, exec). A cache
 * already dropped (its name unlinked) is no longer in the table.
 *
 * A file written through the mount (its name's stamp moved since its size and mtime were
 * last the file's) is kept too: every write and truncation through the mount reached the
 * memfd under the file's turn, so at the last close it holds what the FS holds, and only
 * the attributes it is kept against are old. They are asked again here (one getattr per
 * last close of a changed file), still holding the cache, and kept only if nothing changed
 * the name meanwhile, the FS's size is the memfd's and the memfd holds no store that was
 * not passed on (memfd_passed_on); else it is dropped as before. A
 * file written by one process is then read by the next at the memfd's speed, as a file
 * written over kernel FUSE is read from the kernel's page cache. */
/* Did every change of the memfd reach the FS? The clients keep the memfd's size and mtime
 * after their last tracked fill or write in a user xattr (vfs/pagecache.c, KNOWN_XATTR);
 * a store past the wrappers (stdio, a mapping) that was never passed on (its process
 * killed) leaves the memfd apart from it. Without xattrs (tmpfs before 6.6) nobody knows:
 * as before, yes. */
static int memfd_passed_on(int mfd, const struct stat *k)
{
    struct { int64_t size, sec, nsec; } kn;
    ssize_t n = fgetxattr(mfd, "user.ldpfuse.known", &kn, sizeof kn);
    if (n < 0)
        return errno == ENOTSUP || errno == EOPNOTSUPP;
    return n == (ssize_t)sizeof kn && kn.size == k->st_size && kn.sec == k->st_mtim.tv_sec &&
           kn.nsec == k->st_mtim.tv_nsec;
}

/* memfd_passed_on, without reading the xattr back when the memfd (k: its fstat) is as it
 * was at the server's own note after its fill (scache_noted): nothing changed it since, so
 * the note, its own or a client's of the same state, says so too. */
static int passed_on(const struct scache *s, const struct stat *k)
{
    if (s->noted && k->st_size == s->noted_size && k->st_mtim.tv_sec == s->noted_mtime.tv_sec &&
        k->st_mtim.tv_nsec == s->noted_mtime.tv_nsec)
        return 1;
    return memfd_passed_on(s->mfd, k);
}

/* The server noted the known state of the new cache id (dispatch.c, note_known_fresh):
 * size and mtime after its fill. */
void scache_noted(uint64_t id, off_t size, const struct timespec *mtime)
{
    pthread_mutex_lock(&scache_lock);
    struct scache *s = scache_by_id(id);
    if (s) {
        s->noted = 1;
        s->noted_size = size;
        s->noted_mtime = *mtime;
    }
    pthread_mutex_unlock(&scache_lock);
}

void scache_close_id(uint64_t id)
{
    struct stat k;
    pthread_mutex_lock(&scache_lock);
    struct scache *s = scache_by_id(id);
    if (s && s->refs == 1 && s->attrs_known && s->valid_stamp != name_stamp(s->mnt, s->path) &&
        keep_bytes_limit() > 0) {
        char *path = strdup(s->path);
        int mnt = s->mnt;
        uint64_t stamp = name_stamp(mnt, path);
        pthread_mutex_unlock(&scache_lock);
        struct stat st;
        int ok = path && stamp != 0 && fs_ops->getattr(mnt, path, NULL, &st) == 0 && S_ISREG(st.st_mode);
        pthread_mutex_lock(&scache_lock);
        if ((s = scache_by_id(id)) != NULL && s->refs == 1 && ok && strcmp(s->path, path) == 0 &&
            name_stamp(mnt, path) == stamp && fstat(s->mfd, &k) == 0 && k.st_size == st.st_size &&
            passed_on(s, &k)) {
            s->size = st.st_size;
            s->mtime = st.st_mtim;
            s->valid_stamp = stamp;
        }
        free(path);
    }
    if (s && --s->refs <= 0) {
        if (s->valid_stamp != name_stamp(s->mnt, s->path) || fstat(s->mfd, &k) < 0 ||
            !passed_on(s, &k))
            scache_drop(s);     /* changed, and its attributes not found again above; or
                                 * holding what the FS never got */
        else
            scache_idle(s, &k);
    }
    pthread_mutex_unlock(&scache_lock);
}

/* A name that went away (unlink, rename over it) takes its cache with it: the clients that
 * hold it keep their fds; the next open of the name gets a new one. A renamed file's
 * cache follows it. */
void scache_renamed(int mnt, const char *from, const char *to)
{
    pthread_mutex_lock(&scache_lock);
    struct scache *s = scache_find(mnt, to);
    if (s)
        scache_drop(s);
    size_t fl = from ? strlen(from) : 0;
    /* the file and, for a directory, everything under it: rehashed under the new name */
    struct scache *moved = NULL;
    for (int b = 0; from && b < SCACHE_BUCKETS; b++)
        for (struct scache *n, *e = by_name[b]; e; e = n) {
            n = e->next;
            if (e->mnt != mnt || strncmp(e->path, from, fl) != 0 || (e->path[fl] != '\0' && e->path[fl] != '/'))
                continue;
            char *np = malloc(strlen(to) + strlen(e->path + fl) + 1);
            if (np == NULL) {
                scache_drop(e);     /* not left under a name that is no longer the file's */
                continue;
            }
            strcpy(np, to);
            strcat(np, e->path + fl);
            free(e->path);
            e->path = np;
            UNLINK(e, next, pprev);
            e->next = moved;
            moved = e;
        }
    while (moved) {
        struct scache *n = moved->next;
        name_link(moved);
        moved = n;
    }
    pthread_mutex_unlock(&scache_lock);
}
