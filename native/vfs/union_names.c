/*
 * What a layer's directory holds (vfs/union.h): the hashes of its names, from one listing.
 *
 * A lookup in a merged directory asks each layer, top first, for the name (fstatat) and,
 * above the last one, for fuse-overlayfs' whiteout of it (.wh.NAME): two system calls per
 * layer that does not hold the name, where the kernel's overlayfs answers from its dentry
 * cache. A process that keeps a merged directory (vfs/union.c, "directories kept") learns
 * a layer's names once, from the listing a readdir merged anyway or from one getdents of
 * the layer when lookups there go on; from then on a layer whose set lacks the name (and
 * .wh.NAME) is skipped. The set is the kept directory's, and as true as it is: nothing
 * changed through the mount since its walk (the server's count of changes), attr_timeout
 * not passed (a change from outside the command).
 *
 * Hashes, not names: a name of the same hash as one held is asked for as before; a name
 * held is never taken for a missing one.
 */
#include "../ldpfuse.h"
#include "union.h"
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>

#define NAMES_MAX (1u << 16)       /* a bigger directory is asked name by name */

struct layer_names {
    uint32_t cap, n;            /* cap: a power of two; grown at half full */
    int has_wh;                 /* a .wh. name is there (a whiteout file, or .wh..wh..opq) */
    uint32_t slot[];            /* 0: empty */
};

static uint32_t name_hash(uint64_t h)
{
    uint32_t x = (uint32_t)(h ^ (h >> 32));
    return x ? x : 1;
}

static uint32_t hash_of(const char *name)
{
    return name_hash(fnv1a(fnv1a_seed(0), name, NULL));
}

static uint32_t hash_of_whiteout(const char *name)
{
    return name_hash(fnv1a(fnv1a(fnv1a_seed(0), UNION_WH, NULL), name, NULL));
}

static struct layer_names *sized(uint32_t cap)
{
    struct layer_names *ln = calloc(1, sizeof *ln + cap * sizeof ln->slot[0]);
    if (ln)
        ln->cap = cap;
    return ln;
}

static void put(struct layer_names *ln, uint32_t h)
{
    uint32_t i = h & (ln->cap - 1);
    for (; ln->slot[i]; i = (i + 1) & (ln->cap - 1))
        if (ln->slot[i] == h)
            return;
    ln->slot[i] = h;
    ln->n++;
}

int layer_names_add(struct layer_names **lnp, const char *name)
{
    struct layer_names *ln = *lnp;
    if (ln == NAMES_UNKNOWN)
        return -1;
    if (ln == NULL || 2 * (ln->n + 1) > ln->cap) {
        uint32_t cap = ln ? 2 * ln->cap : 64;
        struct layer_names *bigger = cap / 2 <= NAMES_MAX ? sized(cap) : NULL;
        if (bigger == NULL) {
            free(ln);
            *lnp = NAMES_UNKNOWN;
            return -1;
        }
        if (ln) {
            bigger->has_wh = ln->has_wh;
            for (uint32_t i = 0; i < ln->cap; i++)
                if (ln->slot[i])
                    put(bigger, ln->slot[i]);
            free(ln);
        }
        *lnp = ln = bigger;
    }
    if (strncmp(name, UNION_WH, 4) == 0)
        ln->has_wh = 1;
    put(ln, hash_of(name));
    return 0;
}

static int holds(const struct layer_names *ln, uint32_t h)
{
    for (uint32_t i = h & (ln->cap - 1); ln->slot[i]; i = (i + 1) & (ln->cap - 1))
        if (ln->slot[i] == h)
            return 1;
    return 0;
}

int layer_names_may_hold(const struct layer_names *ln, const char *name)
{
    return ln == NULL || ln == NAMES_UNKNOWN || holds(ln, hash_of(name));
}

int layer_names_may_whiteout(const struct layer_names *ln, const char *name)
{
    return ln == NULL || ln == NAMES_UNKNOWN || (ln->has_wh && holds(ln, hash_of_whiteout(name)));
}

void layer_names_free(struct layer_names *ln)
{
    if (ln != NAMES_UNKNOWN)
        free(ln);
}

/* May the caller look names up in the layer's directory dfd (O_PATH)? Only then does a
 * name missing from its listing answer ENOENT without asking: without search permission
 * the lookup fails with EACCES, whatever the name. */
int layer_names_searchable(int dfd)
{
    return REAL(syscall)(SYS_faccessat2, dfd, "", X_OK, AT_EMPTY_PATH | AT_EACCESS) == 0;
}

struct layer_names *layer_names_read(int fd, size_t most)
{
    struct layer_names *ln = NULL;
    size_t seen = 0;
    char *buf = malloc(8192);  /* small reads: a directory bigger than most is left early */
    long n = buf ? 1 : -1;
    while (n > 0 && ln != NAMES_UNKNOWN && seen <= most) {
        n = REAL(syscall)(SYS_getdents64, fd, buf, 8192);
        for (long off = 0; off < n && ln != NAMES_UNKNOWN;) {
            struct linux_dirent64 *d = (struct linux_dirent64 *)(buf + off);
            off += d->d_reclen;
            layer_names_add(&ln, d->d_name);
            seen++;
        }
    }
    free(buf);
    if (n < 0 || seen > most) {
        layer_names_free(ln);
        return n < 0 ? NAMES_UNKNOWN : NULL;
    }
    return ln ? ln : sized(64);     /* nothing at all (not even "."): every name is missing */
}
