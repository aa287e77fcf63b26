/*
 * Cached files (the file system serves them through read() and write(): their fd is a
 * memfd page cache) that a supervised caller opened for writing. The caller's writes go
 * to the memfd, in the kernel, past any wrapper; the supervisor keeps its own fd of the
 * file (the preload's, which writes through to the file system) and watches the memfd
 * with inotify: when a description opened for writing is closed for the last time
 * (IN_CLOSE_WRITE: the caller's close, or its exit), the memfd's bytes and size are
 * written to the file system through that fd. So another process sees the bytes at once
 * (the page cache is the same) and the file system from the writer's close on, as
 * kernel FUSE's write-back cache does at flush.
 *
 * Events are read before any notification is served (main.c), so a close comes before
 * the next call of any supervised process.
 */
#include "supervisor.h"
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define WB_MAX 1024     /* files kept at once; past it the oldest is written and let go */

struct wb {
    int wd, fd;
    char *path;
};
static struct wb wbs[WB_MAX];
static int nwb, ifd = -1;
static char buf[1 << 20];

int writeback_init(void)
{
    ifd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    return ifd;
}

static void flush(struct wb *w)
{
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", w->fd);
    int raw = open(self, O_RDONLY | O_CLOEXEC);     /* the memfd itself, not a file of the mount */
    struct stat st;
    if (raw < 0 || fstat(raw, &st) < 0) {
        sv_log("%s: its bytes could not be read back (%s)", w->path, strerror(errno));
        if (raw >= 0)
            close(raw);
        return;
    }
    int err = ftruncate(w->fd, st.st_size) < 0 ? errno : 0;
    for (off_t off = 0; !err && off < st.st_size;) {
        ssize_t r = pread(raw, buf, sizeof buf, off);
        if (r <= 0)
            break;
        for (ssize_t done = 0; !err && done < r;) {
            ssize_t w2 = pwrite(w->fd, buf + done, (size_t)(r - done), off + done);
            if (w2 <= 0)
                err = w2 < 0 ? errno : EIO;
            else
                done += w2;
        }
        off += r;
    }
    if (!err && fsync(w->fd) < 0 && errno != EINVAL && errno != ENOSYS)
        err = errno;
    if (err)
        sv_log("%s: writing a supervised program's bytes to the file system failed (%s)", w->path, strerror(err));
    close(raw);
}

static void let_go(int i)
{
    inotify_rm_watch(ifd, wbs[i].wd);
    close(wbs[i].fd);
    free(wbs[i].path);
    wbs[i] = wbs[--nwb];
}

void writeback_watch(int fd, const char *abs)
{
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", fd);
    int wd = ifd < 0 ? -1 : inotify_add_watch(ifd, self, IN_CLOSE_WRITE);
    if (wd < 0) {
        sv_log("%s: a supervised writer's close cannot be watched (%s): its bytes reach the file "
               "system now, not at its close", abs, strerror(errno));
        close(fd);
        return;
    }
    for (int i = 0; i < nwb; i++)
        if (wbs[i].wd == wd) {     /* the same cache: one fd of it is enough */
            close(fd);
            return;
        }
    if (nwb == WB_MAX) {
        flush(&wbs[0]);
        let_go(0);
    }
    wbs[nwb++] = (struct wb){ wd, fd, strdup(abs) };
}

void writeback_events(void)
{
    char ev[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    for (;;) {
        ssize_t n = read(ifd, ev, sizeof ev);
        if (n <= 0)
            return;
        for (char *p = ev; p < ev + n;) {
            struct inotify_event *e = (struct inotify_event *)p;
            for (int i = 0; i < nwb; i++)
                if (wbs[i].wd == e->wd && (e->mask & IN_CLOSE_WRITE))
                    flush(&wbs[i]);
            p += sizeof *e + e->len;
        }
    }
}
