/* O_TMPFILE in a mount (tmpfile.c): an unnamed file, and linkat giving it a name. */
#ifndef LDPFUSE_TMPFILE_H
#define LDPFUSE_TMPFILE_H
#include "../ldpfuse.h"

__attribute__((visibility("hidden"))) int tmpfile_open(const struct vpath *dir, int flags, mode_t mode);
/* 1 if fd is an unnamed file of this process (then *r is linkat's result), else 0 */
__attribute__((visibility("hidden"))) int tmpfile_link(int fd, const struct vpath *to, int *r);

#endif
