/* Pointers to the real libc functions, resolved lazily: REAL(open)(path, flags). */
#ifndef LDPFUSE_REAL_H
#define LDPFUSE_REAL_H
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <aio.h>
#include <dirent.h>
#include <fcntl.h>
#include <fts.h>
#include <ftw.h>
#include <glob.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <sys/time.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/sendfile.h>
#include <unistd.h>
#include <utime.h>
#include <stdarg.h>
#include <wchar.h>

#define REAL_SYM(name, ret, params) extern ret (*real_##name) params;
#include "real_symbols.h"
#undef REAL_SYM

void *real_resolve(const char *name, void **slot);

#define REAL(name) \
    (__builtin_expect(real_##name != NULL, 1) ? real_##name \
        : (__typeof__(real_##name))real_resolve(#name, (void **)&real_##name))

#endif
