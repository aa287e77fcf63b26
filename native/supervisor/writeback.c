/*
 * Cached files (the file system serves them through read() and write(): the preload's fd
 * is a memfd page cache) that a supervised caller opened for writing. The caller's writes
 * go to an fd in the kernel, past any wrapper: it gets a private memfd holding the file's
 * bytes (serve.c), and the supervisor keeps the preload's fd of the file (which writes
 * through to the file system) and a read-only fd of the private memfd, and watches the
 * memfd with inotify. When the caller's description is closed for the last time
 * (IN_CLOSE_WRITE: its close, or its exit; nobody else ever opens that memfd for writing)
 * its bytes and size are written to the file system through the preload's fd, as kernel
 * FUSE's write-back cache does at flush: other processes see them from the writer's close
 * on.
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

#define WB_MAX 1024     /* writers at once; past it the oldest is written and let go */

struct wb {
    int wd, fd, ro;
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
    struct stat st;
    if (fstat(w->ro, &st) < 0)
        return;
    /* the bytes first, then the size: a reader meanwhile sees the old bytes or the new
     * ones, never a grown file's zeros */
    int err = 0;
    for (off_t off = 0; !err && off < st.st_size;) {
        ssize_t r = pread(w->ro, buf, sizeof buf, off);
        if (r <= 0)
            break;
        for (ssize_t done = 0; !err && done < r;) {
            ssize_t n = pwrite(w->fd, buf + done, (size_t)(r - done), off + done);
            if (n <= 0)
                err = n < 0 ? errno : EIO;
            else
                done += n;
        }
        off += r;
    }
    if (!err && ftruncate(w->fd, st.st_size) < 0)
        err = errno;
    if (err)
        sv_log("%s: writing a supervised program's bytes to the file system failed (%s)", w->path, strerror(err));
}

static void let_go(int i)
{
    inotify_rm_watch(ifd, wbs[i].wd);
    close(wbs[i].fd);   /* the preload's close: flush and release reach the file system */
    close(wbs[i].ro);
    free(wbs[i].path);
    wbs[i] = wbs[--nwb];
}

int writeback_watch(int fd, int ro, const char *abs)
{
    char self[64];
    snprintf(self, sizeof self, "/proc/self/fd/%d", ro);
    int wd = ifd < 0 ? -1 : inotify_add_watch(ifd, self, IN_CLOSE_WRITE);
    if (wd < 0) {
        sv_log("%s: a supervised writer's close cannot be watched (%s): refused (EIO)", abs, strerror(errno));
        close(fd);
        close(ro);
        return -1;
    }
    if (nwb == WB_MAX) {
        flush(&wbs[0]);
        let_go(0);
    }
    wbs[nwb++] = (struct wb){ wd, fd, ro, strdup(abs) };
    return 0;
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
                if (wbs[i].wd == e->wd && (e->mask & IN_CLOSE_WRITE)) {
                    flush(&wbs[i]);
                    let_go(i);
                    break;
                }
            p += sizeof *e + e->len;
        }
    }
}

void writeback_all(void)
{
    while (nwb > 0) {
        flush(&wbs[nwb - 1]);
        let_go(nwb - 1);
    }
}
