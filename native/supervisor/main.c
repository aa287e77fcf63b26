/*
 * ldpfuse-supervisor's two roles (docs/supervisor.md):
 *
 *   ldpfuse-supervisor serve SOCKET_FD LAUNCHER_PID
 *       the launcher starts it (with the preload and the command's environment) on a
 *       listening unix socket; it serves until the launcher asks it to end (SIGTERM) or
 *       ends. It runs outside the command's process tree (it detaches at start), so the
 *       launcher's wait for the command's descendants does not wait for it.
 *   ldpfuse-supervisor exec PROGRAM [ARG...]
 *       the launcher's command when it must be supervised from its start: exec PROGRAM
 *       through the preload's execve, which installs the filter (interpose/supervise.c).
 *   ldpfuse-supervisor exec-as PATH ARGV0 [ARG...]
 *       what a posix_spawn of a program to supervise spawns instead (glibc's child execs
 *       from inside libc, where no wrapper runs): the same, for PATH with argv[0] ARGV0.
 *
 * The main thread waits (epoll) on the socket, the write-back watch, the launcher's pidfd
 * and SIGTERM. A listener arrives with the run's secret from a process of our uid, and is
 * answered with one byte; each listener (a tree of supervised processes) gets a thread
 * that answers its notifications in turn. Deciding that a call names no mount (the
 * common case) takes no lock; a call on a mount is served under one lock (sv_serving),
 * after the writers' closes seen so far. Every operation on the file system is bounded by
 * the run's op_timeout (the preload's own rule), so a stuck file system delays a
 * supervised caller by at most that, never for ever.
 */
#include "supervisor.h"
#include "calls.h"
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <pthread.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>

int sv_strict;
int sv_nmounts;
char **sv_mounts;
size_t *sv_mount_len;

static int log_fd = 2;

void sv_log(const char *fmt, ...)
{
    char line[PATH_MAX + 512];
    int n = snprintf(line, sizeof line, "ldpfuse-supervisor[%d]: ", (int)getpid());
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n - 1, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    (void)!write(log_fd, line, (size_t)n);
}

void sv_log_once(int key, const char *fmt, ...)
{
    static unsigned char seen[4096];
    if (key >= 0 && key < (int)sizeof seen && seen[key]++)
        return;
    char msg[PATH_MAX + 256];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    sv_log("%s", msg);
}

static int exec_role(char **argv)
{
    const char *mode = getenv("LDPFUSE_SUPERVISE");
    if (mode && strcmp(mode, "all") == 0)
        setenv("LDPFUSE_SUPERVISED", "1", 1);   /* interpose/supervise.c: covered from here down */
    execvp(argv[0], argv);
    int e = errno;
    fprintf(stderr, "ldpfuse-run: cannot run %s: %s\n", argv[0], strerror(e));
    return e == ENOENT ? 127 : 126;
}

static void mounts_from_env(void)
{
    const char *m = getenv("LDPFUSE_MOUNTPOINTS");
    char *all = strdup(m ? m : "");
    int cap = 1;
    for (char *p = all; *p; p++)
        cap += *p == '\n';
    sv_mounts = calloc((size_t)cap, sizeof *sv_mounts);
    sv_mount_len = calloc((size_t)cap, sizeof *sv_mount_len);
    char *save = NULL;
    for (char *p = strtok_r(all, "\n", &save); p; p = strtok_r(NULL, "\n", &save)) {
        size_t l = strlen(p);
        while (l > 1 && p[l - 1] == '/')
            p[--l] = '\0';
        sv_mounts[sv_nmounts] = p;
        sv_mount_len[sv_nmounts++] = l;
    }
}

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

static unsigned char secret[SV_SECRET_LEN];

/* A process hands a listener over: our uid (SO_PEERCRED) and the secret first (answered
 * 1, or the connection is closed), then one fd that must be a seccomp listener. */
static int take_listener(int conn)
{
    struct ucred cr;
    socklen_t cl = sizeof cr;
    if (getsockopt(conn, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 || cr.uid != geteuid())
        return -1;
    struct timeval tv = { 1, 0 };   /* a client that does not send stalls us at most this */
    setsockopt(conn, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    unsigned char got[SV_SECRET_LEN];
    ssize_t n = recv(conn, got, sizeof got, 0);
    unsigned char diff = n == SV_SECRET_LEN ? 0 : 1;
    for (int i = 0; i < SV_SECRET_LEN; i++)
        diff |= got[i] ^ secret[i];
    char ok = 1;
    if (diff || send(conn, &ok, 1, MSG_NOSIGNAL) != 1)
        return -1;
    char byte;
    char cbuf[CMSG_SPACE(sizeof(int))];
    struct iovec iov = { &byte, 1 };
    struct msghdr m = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
    n = recvmsg(conn, &m, MSG_CMSG_CLOEXEC);
    int fd = -1;
    for (struct cmsghdr *c = CMSG_FIRSTHDR(&m); n > 0 && c; c = CMSG_NXTHDR(&m, c))
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
            memcpy(&fd, CMSG_DATA(c), sizeof fd);
    if (fd < 0 || (m.msg_flags & MSG_CTRUNC)) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    /* a seccomp listener, not any fd: its NOTIF_ID_VALID of id 0 says ENOENT, nothing else */
    uint64_t id = 0;
    if (ioctl(fd, SECCOMP_IOCTL_NOTIF_ID_VALID, &id) == 0 || errno != ENOENT) {
        close(fd);
        return -1;
    }
    return fd;
}

pthread_mutex_t sv_serving = PTHREAD_MUTEX_INITIALIZER;
static struct seccomp_notif_sizes notif_sizes;
static int nthreads;    /* listener threads running (the main thread changes it up, they down) */

/* One listener's thread: each notification in turn, until every process under its filter
 * has ended (POLLHUP). A tree of supervised processes waiting for the file system does not
 * hold up another tree's calls; within a tree calls are answered one at a time. */
static void *listener_thread(void *arg)
{
    int l = (int)(intptr_t)arg;
    struct seccomp_notif *n = calloc(1, notif_sizes.seccomp_notif > sizeof *n ? notif_sizes.seccomp_notif : sizeof *n);
    struct seccomp_notif_resp *resp =
        calloc(1, notif_sizes.seccomp_notif_resp > sizeof *resp ? notif_sizes.seccomp_notif_resp : sizeof *resp);
    while (n && resp) {
        struct pollfd p = { .fd = l, .events = POLLIN };
        if (poll(&p, 1, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (p.revents & POLLIN) {
            memset(n, 0, notif_sizes.seccomp_notif);
            if (ioctl(l, SECCOMP_IOCTL_NOTIF_RECV, n) == 0)
                serve_notification(l, n, resp);
            continue;   /* ENOENT: the caller went away first */
        }
        if (p.revents & (POLLHUP | POLLERR | POLLNVAL))
            break;      /* every process it filtered has ended */
    }
    free(n);
    free(resp);
    close(l);
    __atomic_sub_fetch(&nthreads, 1, __ATOMIC_RELAXED);
    return NULL;
}

/* 0, or -1 (the listener closed): past SV_MAX_TREES trees at once the next is refused, and
 * its program runs unsupervised (refused under --strict), with a line in the log */
#define SV_MAX_TREES 256
static int start_listener(int l)
{
    if (__atomic_load_n(&nthreads, __ATOMIC_RELAXED) >= SV_MAX_TREES) {
        sv_log("%d supervised process trees at once: one more is not supervised", SV_MAX_TREES);
        close(l);
        return -1;
    }
    /* the caller's CPU switches to us at once (Linux >= 6.6), as a futex hand-over: no
     * idle CPU's wake-up per call */
    ioctl(l, SECCOMP_IOCTL_NOTIF_SET_FLAGS, (uint64_t)SECCOMP_USER_NOTIF_FD_SYNC_WAKE_UP);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&attr, 256 * 1024);
    pthread_t t;
    __atomic_add_fetch(&nthreads, 1, __ATOMIC_RELAXED);
    int r = pthread_create(&t, &attr, listener_thread, (void *)(intptr_t)l);
    pthread_attr_destroy(&attr);
    if (r != 0) {
        __atomic_sub_fetch(&nthreads, 1, __ATOMIC_RELAXED);
        close(l);
        return -1;
    }
    return 0;
}

static int serve_role(int sock, pid_t launcher)
{
    /* detach: the launcher's wait for its descendants must not wait for us */
    pid_t child = fork();
    if (child < 0)
        return 1;
    if (child > 0)
        _exit(0);
    /* our pid to the launcher (PR_SET_PTRACER names us to Yama), then stdout is done */
    char line[32];
    int len = snprintf(line, sizeof line, "%d\n", (int)getpid());
    (void)!write(1, line, (size_t)len);
    int null = open("/dev/null", O_WRONLY | O_CLOEXEC);
    if (null >= 0) {
        dup2(null, 1);
        close(null);
    }
    const char *s = getenv("LDPFUSE_SECRET");
    if (s == NULL || strlen(s) != 2 * SV_SECRET_LEN)
        return 1;
    for (int i = 0; i < SV_SECRET_LEN; i++)
        secret[i] = (unsigned char)(hexval(s[2 * i]) << 4 | hexval(s[2 * i + 1]));
    const char *e = getenv("LDPFUSE_ESCAPES");
    sv_strict = e && strcmp(e, "strict") == 0;
    const char *lf = getenv("LDPFUSE_LOG_FILE");
    if (lf && *lf) {
        int fd = open(lf, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0600);
        if (fd >= 0)
            log_fd = fd;
    }
    mounts_from_env();
    const char *rd = getenv("LDPFUSE_RUN_DIR");
    snprintf(sv_shadow_root, sizeof sv_shadow_root, "%s/supervisor", rd && *rd ? rd : "/tmp");
    mkdir(sv_shadow_root, 0700);
    umask(0);

    int ep = epoll_create1(EPOLL_CLOEXEC);
    int wfd = writeback_init();
    int pfd = (int)syscall(SYS_pidfd_open, launcher, 0);
    sigset_t term;
    sigemptyset(&term);
    sigaddset(&term, SIGTERM);
    sigprocmask(SIG_BLOCK, &term, NULL);
    int sfd = signalfd(-1, &term, SFD_CLOEXEC);
    struct epoll_event ev = { .events = EPOLLIN };
    int fixed[4] = { sock, wfd, pfd, sfd };
    for (int i = 0; i < 4; i++) {
        ev.data.fd = fixed[i];
        if (fixed[i] >= 0)
            epoll_ctl(ep, EPOLL_CTL_ADD, fixed[i], &ev);
    }
    if (pfd < 0 && kill(launcher, 0) < 0)
        return 0;

    if (syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &notif_sizes) < 0)
        return 1;
    for (;;) {
        struct epoll_event evs[8];
        int k = epoll_wait(ep, evs, 8, -1);
        if (k < 0 && errno != EINTR)
            return 1;
        for (int i = 0; i < k; i++) {
            int fd = evs[i].data.fd;
            if (fd == wfd) {
                pthread_mutex_lock(&sv_serving);
                writeback_events();
                pthread_mutex_unlock(&sv_serving);
            } else if (fd == pfd || fd == sfd) {
                /* the command has ended: what its writers closed, and what processes that
                 * outlived it still hold, is written */
                pthread_mutex_lock(&sv_serving);
                writeback_events();
                writeback_all();
                return 0;   /* with the lock held: no call is served after this */
            } else if (fd == sock) {
                int conn = accept4(sock, NULL, NULL, SOCK_CLOEXEC);
                if (conn < 0)
                    continue;
                int l = take_listener(conn);
                char ok = l >= 0 && start_listener(l) == 0;
                (void)!send(conn, &ok, 1, MSG_NOSIGNAL);
                close(conn);
            }
        }
    }
}

/* exec-as PATH ARGV0 ARG...: a posix_spawn's child (interpose/supervise.c) */
static int exec_as_role(const char *path, char **argv)
{
    const char *mode = getenv("LDPFUSE_SUPERVISE");
    if (mode && strcmp(mode, "all") == 0)
        setenv("LDPFUSE_SUPERVISED", "1", 1);
    execv(path, argv);
    int e = errno;
    fprintf(stderr, "ldpfuse-supervisor: cannot run %s: %s\n", path, strerror(e));
    return 127;     /* posix_spawn's child's status when its exec fails */
}

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "exec") == 0)
        return exec_role(argv + 2);
    if (argc >= 4 && strcmp(argv[1], "exec-as") == 0)
        return exec_as_role(argv[2], argv + 3);
    if (argc == 4 && strcmp(argv[1], "serve") == 0)
        return serve_role(atoi(argv[2]), (pid_t)atoi(argv[3]));
    fprintf(stderr, "usage: ldpfuse-supervisor serve SOCKET_FD LAUNCHER_PID | exec PROGRAM [ARG...] | "
                    "exec-as PATH ARGV0 [ARG...]\n"
                    "(started by ldpfuse-run: docs/supervisor.md)\n");
    return 2;
}
