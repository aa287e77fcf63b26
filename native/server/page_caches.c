/*
 * The page caches of cached files in the server (docs/cache.md): one memfd per file for
 * every client. Clients fill and write them themselves (vfs/pagecache.c); the server only
 * hands them out, after the caller's own open of the file succeeded, and keeps each alive
 * while a client holds it.
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

/* Does any client hold the page cache of (mnt, path)? */
int scache_held(int mnt, const char *path)
{
    pthread_mutex_lock(&scache_lock);
    int held = *scache_find(mnt, path) != NULL;
    pthread_mutex_unlock(&scache_lock);
    return held;
}

static void scache_drop(struct scache **p)
{
    struct scache *s = *p;
    *p = s->next;
    scache_drops++;
    close(s->mfd);
    free(s->path);
    free(s);
}

/* An fd of the file's memfd (a new open file description) for a client; -errno. fh is the
 * caller's open of the file (NULL: none), size what the client saw, used only if the file
 * system's getattr fails. */
static int scache_get(int mnt, const char *path, off_t size, int size_known, const uint64_t *fh, int *fresh,
                      uint64_t *id);

int scache_open(int mnt, const char *path, off_t size, const uint64_t *fh, int *fresh, uint64_t *id)
{
    return scache_get(mnt, path, size, 0, fh, fresh, id);
}

/* The same, for an open whose own lookup has just said the file's size (W_CREATE_OPEN): no
 * second getattr. */
int scache_open_sized(int mnt, const char *path, off_t size, int *fresh, uint64_t *id)
{
    return scache_get(mnt, path, size, 1, NULL, fresh, id);
}

static int scache_get(int mnt, const char *path, off_t size, int size_known, const uint64_t *fh, int *fresh,
                      uint64_t *id)
{
    pthread_mutex_lock(&scache_lock);
    struct scache **p = scache_find(mnt, path), *s = *p;
    *fresh = 0;
    while (s == NULL) {
        /* the file's size now, asked without the lock (a method may take long); if a cache
         * of any file was dropped meanwhile, this one may have been written and let go of
         * in between: ask again */
        uint64_t drops = scache_drops;
        pthread_mutex_unlock(&scache_lock);
        struct stat st;
        off_t now = size_known ? size : fs_ops->getattr(mnt, path, fh, &st) == 0 && S_ISREG(st.st_mode) ? st.st_size : size;
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
    else if (s->refs == 0)
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
        scache_drop(p);
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
                scache_drop(p);
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
