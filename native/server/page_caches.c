/*
 * The page caches of cached files in the server (docs/cache.md): one memfd per file for
 * every client. Clients fill and write them themselves (vfs/pagecache.c); the server only
 * hands them out, after the caller's own open of the file succeeded, and keeps each alive
 * while a client holds it, and after, while the file is unchanged (below: scache_idle).
 *
 * A new cache is sized by the file system's getattr, asked here when the cache is made,
 * never by the size the client saw: that was looked up earlier (an attribute cache, an
 * O_CREAT open that found the file another process had just made), and a memfd made
 * shorter than the file hides what other processes wrote (sqlite's WAL recovery reads
 * frames up to fstat's size, then writes over the ones it did not see).
 */
#include "server.h"
#include <stdio.h>
#include <sys/mman.h>

struct scache {
    struct scache *next;
    int mnt, refs, mfd;
    uint64_t id;                /* names it in a client's list of what it holds */
    char *path;
    /* kept after its last close (refs 0): what it was made or last found valid against */
    int attrs_known;
    off_t size;
    struct timespec mtime;
    uint64_t stamp;             /* the name's coherence stamp when the last holder let go */
    uint64_t idle_seq;          /* when it became idle (least recently used goes first) */
    long bytes;                 /* memory it holds while idle */
    int idle;                   /* counted in idle_count and idle_bytes */
};
static uint64_t scache_ids;
static uint64_t scache_drops;   /* caches dropped so far: a size looked up before one may be old */
static struct scache *scaches;
static pthread_mutex_t scache_lock = PTHREAD_MUTEX_INITIALIZER;

static struct scache **scache_find(int mnt, const char *path)
{
    struct scache **p = &scaches;
    for (; *p; p = &(*p)->next)
        if ((*p)->mnt == mnt && strcmp((*p)->path, path) == 0)
            break;
    return p;
}

/* Does any client hold the page cache of (mnt, path)? (An idle one is nobody's.) */
int scache_held(int mnt, const char *path)
{
    pthread_mutex_lock(&scache_lock);
    struct scache *s = *scache_find(mnt, path);
    int held = s != NULL && s->refs > 0;
    pthread_mutex_unlock(&scache_lock);
    return held;
}

static long idle_bytes;         /* memory of the caches no client holds */
static int idle_count;          /* and how many they are (each keeps an fd) */
#define IDLE_MAX 1024
static uint64_t idle_seqs;

static void scache_drop(struct scache **p)
{
    struct scache *s = *p;
    *p = s->next;
    scache_drops++;
    if (s->idle) {
        idle_bytes -= s->bytes;
        idle_count--;
    }
    close(s->mfd);
    free(s->path);
    free(s);
}

/* ---- keeping a cache past its last close (issue 24: reading an unchanged file again never
 * enters Python, as over kernel FUSE whose page cache outlives the file's release). An idle
 * cache is used again by the next open of its name only while nothing changed: no change
 * through the mount (the name's coherence stamp, coherence.h, is the one it had when the
 * last holder let go) and none behind it (the size and mtime the open's lookup finds are
 * the ones the cache was made with). Idle caches hold at most LDPFUSE_CACHE_KEEP_MB of
 * memory (default 256) and 1024 fds, the least recently used let go of first; 0 keeps
 * none. */
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

/* The last holder let go of *p (scache_lock held): keep it idle, or drop it. */
static void scache_idle(struct scache **p)
{
    struct scache *s = *p;
    struct stat k;
    uint64_t stamp = name_stamp(s->mnt, s->path);
    if (!s->attrs_known || stamp == 0 || keep_bytes_limit() == 0 || fstat(s->mfd, &k) < 0) {
        scache_drop(p);
        return;
    }
    s->stamp = stamp;
    s->idle_seq = ++idle_seqs;
    s->bytes = (long)k.st_blocks * 512;
    s->idle = 1;
    idle_bytes += s->bytes;
    idle_count++;
    while (idle_bytes > keep_bytes_limit() || idle_count > IDLE_MAX) {
        struct scache **oldest = NULL;
        for (struct scache **q = &scaches; *q; q = &(*q)->next)
            if ((*q)->idle && (oldest == NULL || (*q)->idle_seq < (*oldest)->idle_seq))
                oldest = q;
        if (oldest == NULL)
            break;
        scache_drop(oldest);
    }
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
static int scache_get(int mnt, const char *path, off_t size, const struct stat *known, const uint64_t *fh,
                      int *fresh, uint64_t *id);

int scache_open(int mnt, const char *path, off_t size, const uint64_t *fh, int *fresh, uint64_t *id)
{
    return scache_get(mnt, path, size, NULL, fh, fresh, id);
}

/* The same, for an open whose own lookup has just found the file's attributes
 * (W_CREATE_OPEN): no second getattr, unless a cache was dropped in between. */
int scache_open_sized(int mnt, const char *path, const struct stat *st, int *fresh, uint64_t *id)
{
    return scache_get(mnt, path, st->st_size, st, NULL, fresh, id);
}

static int scache_get(int mnt, const char *path, off_t size, const struct stat *known, const uint64_t *fh,
                      int *fresh, uint64_t *id)
{
    struct stat st;
    int have_st = 0;
    if (known) {
        st = *known;
        have_st = 1;
    }
    pthread_mutex_lock(&scache_lock);
    struct scache **p = scache_find(mnt, path), *s = *p;
    *fresh = 0;
    if (s && s->refs <= 0) {
        /* idle since its last close: used again only if the file is unchanged */
        if (!have_st) {
            pthread_mutex_unlock(&scache_lock);
            have_st = fs_ops->getattr(mnt, path, fh, &st) == 0;
            pthread_mutex_lock(&scache_lock);
            p = scache_find(mnt, path);
            s = *p;
        }
        if (s && s->refs <= 0) {
            if (have_st && scache_still_valid(s, &st)) {
                if (s->idle) {
                    idle_bytes -= s->bytes;
                    idle_count--;
                }
                s->idle = 0;
                s->bytes = 0;
            } else {
                scache_drop(p);
                s = NULL;
            }
        }
    }
    for (int asked = 0; s == NULL; asked++) {
        /* the file's size now, asked without the lock (a method may take long); if a cache
         * of any file was dropped meanwhile, this one may have been written and let go of
         * in between: ask again */
        uint64_t drops = scache_drops;
        pthread_mutex_unlock(&scache_lock);
        if (!have_st || asked > 0)
            have_st = fs_ops->getattr(mnt, path, fh, &st) == 0 && S_ISREG(st.st_mode);
        off_t now = have_st ? st.st_size : size;
        pthread_mutex_lock(&scache_lock);
        p = scache_find(mnt, path);
        if ((s = *p) != NULL || drops != scache_drops)
            continue;
        char name[250];
        snprintf(name, sizeof name, "ldpfuse:%.240s", path);
        int mfd = memfd_create(name, MFD_CLOEXEC);
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
        s->size = now;
        if (have_st)
            s->mtime = st.st_mtim;
        s->next = scaches;
        scaches = s;
        *fresh = 1;
    }
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", s->mfd);
    int fd = open(proc, O_RDWR | O_CLOEXEC);
    int r = fd >= 0 ? fd : -errno;
    *id = s->id;
    if (fd >= 0)
        s->refs++;
    else if (s->refs <= 0)
        scache_drop(scache_find(mnt, path));
    pthread_mutex_unlock(&scache_lock);
    return r;
}

/* Returns the id of the cache let go of (0: none by that name). */
uint64_t scache_close(int mnt, const char *path)
{
    pthread_mutex_lock(&scache_lock);
    struct scache **p = scache_find(mnt, path);
    uint64_t id = *p ? (*p)->id : 0;
    if (*p && --(*p)->refs <= 0)
        scache_idle(p);
    pthread_mutex_unlock(&scache_lock);
    return id;
}

/* A client that went away without letting go (exit, kill -9, exec). A cache already
 * dropped (its name unlinked) is no longer in the table. */
void scache_close_id(uint64_t id)
{
    pthread_mutex_lock(&scache_lock);
    for (struct scache **p = &scaches; *p; p = &(*p)->next)
        if ((*p)->id == id) {
            if (--(*p)->refs <= 0)
                scache_idle(p);
            break;
        }
    pthread_mutex_unlock(&scache_lock);
}

/* A name that went away (unlink, rename over it) takes its cache with it: the clients that
 * hold it keep their fds; the next open of the name gets a new one. A renamed file's
 * cache follows it. */
void scache_renamed(int mnt, const char *from, const char *to)
{
    pthread_mutex_lock(&scache_lock);
    struct scache **p = scache_find(mnt, to);
    if (*p)
        scache_drop(p);
    size_t fl = from ? strlen(from) : 0;
    for (struct scache *s = scaches; from && s; s = s->next) {
        if (s->mnt != mnt || strncmp(s->path, from, fl) != 0 || (s->path[fl] != '\0' && s->path[fl] != '/'))
            continue;
        char *np = malloc(strlen(to) + strlen(s->path + fl) + 1);
        if (np == NULL)
            continue;
        strcpy(np, to);
        strcat(np, s->path + fl);
        free(s->path);
        s->path = np;
    }
    pthread_mutex_unlock(&scache_lock);
}
