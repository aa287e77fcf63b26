/*
 * The union backing's parts (vfs/union*.c), for each other: not the core's (ldpfuse.h has
 * what the core calls).
 */
#ifndef LDPFUSE_VFS_UNION_H
#define LDPFUSE_VFS_UNION_H
#include <stdint.h>

#define UNION_WH ".wh."
#define UNION_OPAQUE_FILE ".wh..wh..opq"

/* What one layer's directory holds, learned from one listing (vfs/union_names.c): the
 * hashes of its names. A name whose hash is not there is not in the directory, so a lookup
 * asks the layer nothing; one whose hash is (the name, or another of the same hash) is
 * asked for as before. NAMES_UNKNOWN: could not be learned (no read permission, too many
 * names): every name is asked for. */
struct layer_names;
#define NAMES_UNKNOWN ((struct layer_names *)1)

/* dfd: the layer's directory, O_PATH; NULL if it holds more than most names (or no memory) */
struct layer_names *layer_names_read(int dfd, size_t most);
int layer_names_searchable(int dfd);
int layer_names_add(struct layer_names **ln, const char *name);    /* 0, or -1: NAMES_UNKNOWN now */
int layer_names_may_hold(const struct layer_names *ln, const char *name);
int layer_names_may_whiteout(const struct layer_names *ln, const char *name);  /* .wh.NAME */
void layer_names_free(struct layer_names *ln);

int union_open_listing(int dfd);    /* the layer's directory dfd (O_PATH) opened for reading */
#endif
