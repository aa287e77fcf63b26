/*
 * ldpfuse-supervisor (docs/supervisor.md): serves, from outside, the path calls of programs
 * the preload cannot reach. A seccomp filter (interpose/supervise.c) stops each call of
 * calls.h in the kernel; this process gets a notification, reads the call's paths out of
 * the caller's memory, and either lets the kernel run the call (the path is in no mount:
 * SECCOMP_USER_NOTIF_FLAG_CONTINUE) or serves it. It serves by making the same call itself:
 * the launcher starts it with the preload, so its own open/stat/mkdir on a mount path are
 * answered by the file system as any program's are (the shared server, or in the embedded
 * mode its own instance), and every fd it gets is a real kernel fd that it can install in
 * the caller (SECCOMP_IOCTL_NOTIF_ADDFD).
 *
 * One file per duty, in the order a notification meets them:
 *
 *   main.c       the roles (serve, exec), the socket listeners arrive on, a thread per
 *                listener
 *   target.c     the caller: its memory, its identity, its cwd and fds, the validity of
 *                a notification (SECCOMP_IOCTL_NOTIF_ID_VALID)
 *   serve.c      one notification: decode it with calls.h, continue or serve it
 *   shadow.c     directories: a real directory per mount directory listed, which the
 *                kernel can list for the caller, mapped back to the mount path
 *   writeback.c  cached files a caller opened for writing: it writes a private memfd,
 *                whose bytes reach the file system when the caller closes it
 *   cwd.c        working directories in a mount: a caller's chdir there, kept for it
 */
#ifndef LDPFUSE_SUPERVISOR_H
#define LDPFUSE_SUPERVISOR_H
#include <linux/seccomp.h>
#include <limits.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define SV_PATH_MAX (PATH_MAX + 1024)
#ifndef SECCOMP_IOCTL_NOTIF_SET_FLAGS  /* Linux 6.6; Debian 12's headers are 6.1's */
#define SECCOMP_IOCTL_NOTIF_SET_FLAGS SECCOMP_IOW(4, __u64)
#define SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP 1UL
#endif

/* main.c */
#include <pthread.h>
extern pthread_mutex_t sv_serving;      /* held while a call on a mount is served */
extern int sv_strict;                   /* --strict: what cannot be served fails (EIO) */
extern int sv_nmounts;
extern char **sv_mounts;                /* absolute, normalised, no trailing slash */
extern size_t *sv_mount_len;
extern char sv_shadow_root[PATH_MAX];   /* the run directory's shadow tree (shadow.c) */
void sv_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void sv_log_once(int key, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* target.c */
struct sv_target {
    int listener;
    struct seccomp_notif *n;
    pid_t pid;
};
/* the NUL-terminated string at addr in the caller (at most size - 1 bytes): its length,
 * or -errno (ENAMETOOLONG, EFAULT) */
ssize_t target_read_string(struct sv_target *t, uint64_t addr, char *out, size_t size);
int target_read(struct sv_target *t, uint64_t addr, void *out, size_t size);
int target_write(struct sv_target *t, uint64_t addr, const void *buf, size_t size);
/* is the notification still pending (the caller alive and still in that call)? */
int target_valid(struct sv_target *t);
/* does the caller act with our fsuid, fsgid and (at least) our effective capabilities?
 * (only then is a call served: docs) */
int target_is_us(struct sv_target *t, mode_t *umask_out);
/* the absolute normalised path (dirfd, path) names in the caller: 1 if it was relative to
 * a directory the kernel does not see as the caller does (a virtual cwd or a shadow: the
 * call must be served, wherever it leads), 0 if not, or -errno */
int target_resolve(struct sv_target *t, long dirfd, const char *path, char *out, size_t size);
/* the mount an absolute normalised path is in, or -1 */
int mount_of(const char *abs);

/* cwd.c: working directories in a mount (tid: the caller's thread) */
int cwd_virtual(pid_t tid, char *out, size_t size);    /* 1 and out if it has one */
void cwd_enter(pid_t tid, const char *dir);             /* its chdir into a mount */
void cwd_leave(pid_t tid);                              /* a chdir, fchdir or exit of it */
void cwd_hand_down(pid_t tid);                          /* its execve: for a preloaded image */

/* serve.c: answer one notification */
void serve_notification(int listener, struct seccomp_notif *n, struct seccomp_notif_resp *resp);

/* shadow.c */
/* make the shadow of mount directory abs (its entries as the FS lists them) and open it:
 * an O_RDONLY|O_DIRECTORY fd, or -errno */
int shadow_open(const char *abs, int cloexec);
/* a path in the shadow tree back to the mount path it stands for (in place); 1 if it was one */
int shadow_unmap(char *path, size_t size);

/* writeback.c */
int writeback_init(void);               /* the inotify fd to poll */
/* A caller got a private memfd for a cached file it opened for writing: fd is ours (the
 * preload's, of the file), ro a read-only fd of the memfd. Both are kept; when the
 * caller's description is closed for the last time the memfd's bytes are written to the
 * file through fd, and both are let go. -1 (both closed) if it cannot be watched. */
int writeback_watch(int fd, int ro, const char *abs);
void writeback_events(void);            /* the inotify fd is readable */
void writeback_all(void);               /* the end: write every writer's bytes */
#endif
