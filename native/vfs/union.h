/*
 * The union backing's parts (vfs/union*.c), for each other: not the core's (ldpfuse.h has
 * what the core calls).
 */
#ifndef LDPFUSE_VFS_UNION_H
#define LDPFUSE_VFS_UNION_H
#include <stdint.h>
#include <sys/stat.h>

#define UNION_WH ".wh."
#define UNION_OPAQUE_FILE ".wh..wh..opq"
#define LAYERS_MAX 32
#define UNION_FH 0x756e696f6eull    /* opendir's handle: a listing of vfs/union_dirs.c */

struct layer_names;

/* A mount's layers (vfs/union.c) */
struct layer {
    char *dir;
    int fd;                     /* O_PATH, high; -1 until used, or after the program closed it */
};
struct onion {
    int mnt;
    int n;                      /* layers: [0] upper, then the lowers top first */
    struct layer *l;
};
/* A merged directory: its layers' O_PATH fds, top first. */
struct stack {
    int n;
    int fd[LAYERS_MAX];
    unsigned char layer[LAYERS_MAX];        /* which of the onion's layers each is */
    unsigned char owned[LAYERS_MAX];
    int kept;                   /* the fds are the kept table's: kept[slot]'s read lock is held */
    int slot;
    uint64_t changes;           /* walked when the server's counts were this (changes_now; 0: keep nothing) */
    struct layer_names *names[LAYERS_MAX];  /* what each layer's directory holds, if learned
                                               (vfs/union_names.c); a kept stack's are its entry's */
    int self_known;             /* the walk's answer for the directory itself (getattr's): */
    int self_merged;
    struct stat self;
    /* what the walk found of each layer's directory (a kept stack is still true after other
     * changes while these are: vfs/union.c still_true); settled: every ctime was older than
     * the clock before the walk looked */
    int settled;
    uint64_t gen;               /* a kept stack's, new at each keep (0: not kept) */
    uint64_t parent_gen;        /* the kept parent's it was walked from (0: none) */
    struct layer_seen {
        uint64_t ino;
        uint64_t dev;
        struct timespec ctime;
    } seen[LAYERS_MAX];
};


/* vfs/union.c: the declaration, lookups, the directories kept */
extern struct backend_ops *union_inner;     /* the backend below: the class */
struct onion *union_of(int mnt, const char *path);  /* NULL: not a union, or not served here */
int union_is_whiteout(const struct stat *st);
int union_dir_stack(struct onion *u, const char *path, struct stack *s);   /* give back with union_dir_put */
void union_dir_put(struct onion *u, const char *dir, struct stack *s);
struct layer_names *union_stack_names(struct stack *s, int k, int learn);
struct layer_names *union_names_keep(struct stack *s, int k, struct layer_names *ln);
int union_listing(struct onion *u, const char *path, struct stack *s, int k);  /* layer k opened to read */

/* vfs/union_dirs.c: the merged listing */
int union_opendir(int mnt, const char *path, uint64_t *fh);
int union_readdir(int mnt, const char *path, uint64_t fh, struct dirlist *out);
int union_releasedir(int mnt, const char *path, uint64_t fh);

/* vfs/union_names.c: what one layer's directory holds, learned from one listing: the
 * hashes of its names. A name whose hash is not there is not in the directory, so a lookup
 * asks the layer nothing; one whose hash is (the name, or another of the same hash) is
 * asked for as before. NAMES_UNKNOWN: could not be learned (no read permission, too many
 * names): every name is asked for. */
#define NAMES_UNKNOWN ((struct layer_names *)1)

/* fd: the layer's directory opened for reading (union_listing); NULL if it holds more
 * than most names (or no memory) */
struct layer_names *layer_names_read(int fd, size_t most);
int layer_names_searchable(int dfd);
int layer_names_add(struct layer_names **ln, const char *name);    /* 0, or -1: NAMES_UNKNOWN now */
int layer_names_may_hold(const struct layer_names *ln, const char *name);
int layer_names_may_whiteout(const struct layer_names *ln, const char *name);  /* .wh.NAME */
void layer_names_free(struct layer_names *ln);

int union_open_listing(int dfd);    /* the layer's directory dfd (O_PATH) opened for reading, through /proc */
#endif
