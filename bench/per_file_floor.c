/*
 * per_file_floor.c - the floor of a page cache per served file (issue 34): per file, the
 * kernel calls a design that serves each file's data in its own kernel page cache (a
 * memfd) from another process cannot avoid, without Python and without the preload, over
 * the files of DIR (bench/per_file.py gives it the extracted tar: 10,000 files of 1-32 KiB).
 *
 *   gcc -O2 -o bench/out/per_file_floor bench/per_file_floor.c
 *   bench/out/per_file_floor [-n] DIR
 *
 * Every file's bytes are read into memory first (the class's answer); then, each step
 * timed over all the files (the best of 3 passes, us a file):
 *
 *   rt      a request and its answer between two processes over a shared-memory channel
 *           like ldpfuse's (a sequence word each way; the waiter spins, yielding first and
 *           every 10 us, for up to 50 us, then sleeps on a futex; -n: no spin, futex only)
 *   cache   in one process: memfd_create, the bytes written into it (pwrite), the reader's
 *           own description of it (openat of "N" in a kept dirfd of /proc/self/fd, O_RDONLY),
 *           its read whole (two reads: the data, then end of file), both fds closed
 *   path    cache with the description opened by its full name, /proc/self/fd/N
 *   one     floor's calls in one process (the memfd sent to itself over a socketpair):
 *           cache + sendmsg + recvmsg + one more close, no second process
 *   floor   all of it across two processes: the reader asks (rt), the server makes and
 *           fills the memfd, sends it (sendmsg SCM_RIGHTS over a unix socket) and closes
 *           it, then answers; the reader receives it (recvmsg), opens its own description
 *           (as cache), closes the received fd, reads whole and closes
 *   direct  floor with the reader's description opened by the server (read-only, by its
 *           own kept dirfd) and sent instead of the memfd: the reader receives, reads and
 *           closes it (no reopen, one close; what a server that sends the open's own
 *           description would leave the reader)
 *
 * Prints one line:
 *   RESULT files=N rt=R cache=C path=P one=O floor=F direct=D cpu=U srv_cpu=S
 * with cpu the reader's CPU per file in its best floor pass and srv_cpu the server's over its
 * life (3 rt, floor and direct passes each) over 3 N.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char **data;
static size_t *sizes;
static size_t n_files, cap_files;
static int no_spin;

static double now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static double cpu_us(int who)
{
    struct rusage ru;
    getrusage(who, &ru);
    return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) * 1e6 + (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec);
}

static void die(const char *what)
{
    perror(what);
    exit(1);
}

/* every regular file under dir, its bytes in memory */
static void walk(const char *dir)
{
    DIR *d = opendir(dir);
    if (d == NULL)
        die(dir);
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
            continue;
        char path[4096];
        snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
        struct stat st;
        if (lstat(path, &st) < 0)
            die(path);
        if (S_ISDIR(st.st_mode)) {
            walk(path);
            continue;
        }
        if (!S_ISREG(st.st_mode))
            continue;
        if (n_files == cap_files) {
            cap_files = cap_files ? 2 * cap_files : 1024;
            data = realloc(data, cap_files * sizeof *data);
            sizes = realloc(sizes, cap_files * sizeof *sizes);
            if (data == NULL || sizes == NULL)
                die("realloc");
        }
        char *buf = malloc(st.st_size ? (size_t)st.st_size : 1);
        int fd = open(path, O_RDONLY);
        if (buf == NULL || fd < 0 || read(fd, buf, (size_t)st.st_size) != st.st_size)
            die(path);
        close(fd);
        data[n_files] = buf;
        sizes[n_files++] = (size_t)st.st_size;
    }
    closedir(d);
}

/* ---- the channel: one request word, one answer word, each with a sleeper flag */

struct chan {
    _Alignas(64) uint32_t req, req_sleeping;
    _Alignas(64) uint32_t ans, ans_sleeping;
    _Alignas(64) uint32_t index;
};

static void futex(uint32_t *w, int op, uint32_t val)
{
    syscall(SYS_futex, w, op, val, NULL, NULL, 0);
}

/* until *w != old: the spin (yield first and every 10 us, 50 us in all), then the futex */
static uint32_t wait_change(uint32_t *w, uint32_t *sleeping, uint32_t old)
{
    uint32_t v;
    if (!no_spin) {
        double start = now_us(), yielded = start - 10;
        while ((v = __atomic_load_n(w, __ATOMIC_ACQUIRE)) == old) {
            double t = now_us();
            if (t - start > 50)
                break;
            if (t - yielded >= 10) {
                sched_yield();
                yielded = now_us();
            } else {
                for (int i = 0; i < 32; i++)
                    __builtin_ia32_pause();
            }
        }
        if (v != old)
            return v;
    }
    for (;;) {
        __atomic_store_n(sleeping, 1, __ATOMIC_SEQ_CST);
        if ((v = __atomic_load_n(w, __ATOMIC_SEQ_CST)) != old)
            break;
        futex(w, FUTEX_WAIT, old);
    }
    __atomic_store_n(sleeping, 0, __ATOMIC_RELAXED);
    return v;
}

static void post(uint32_t *w, uint32_t *sleeping)
{
    __atomic_add_fetch(w, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(sleeping, __ATOMIC_SEQ_CST))
        futex(w, FUTEX_WAKE, 1);
}

static void send_fd(int sock, int fd)
{
    char byte = 0, ctl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = { &byte, 1 };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl };
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    c->cmsg_level = SOL_SOCKET;
    c->cmsg_type = SCM_RIGHTS;
    c->cmsg_len = CMSG_LEN(sizeof(int));
    memcpy(CMSG_DATA(c), &fd, sizeof fd);
    if (sendmsg(sock, &mh, 0) != 1)
        die("sendmsg");
}

static int recv_fd(int sock)
{
    char byte, ctl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = { &byte, 1 };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof ctl };
    if (recvmsg(sock, &mh, MSG_CMSG_CLOEXEC) != 1)
        die("recvmsg");
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    int fd;
    if (c == NULL || c->cmsg_type != SCM_RIGHTS)
        die("no fd");
    memcpy(&fd, CMSG_DATA(c), sizeof fd);
    return fd;
}

#define DIRECT 0x80000000u     /* the server sends the reader's own description */

/* the server: index ~0 = a bare round trip, n_files = stop, else the file's memfd (with
 * DIRECT: a read-only description of it, opened by the server) */
static void serve(struct chan *ch, int sock)
{
    uint32_t seen = 0;
    int own_dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (own_dir < 0)
        die("/proc/self/fd");
    for (;;) {
        seen = wait_change(&ch->req, &ch->req_sleeping, seen);
        uint32_t i = ch->index;
        if (i == n_files) {
            post(&ch->ans, &ch->ans_sleeping);
            _exit(0);
        }
        if (i != ~0u) {
            uint32_t k = i & ~DIRECT;
            int mfd = memfd_create("floor", MFD_CLOEXEC);
            if (mfd < 0 || pwrite(mfd, data[k], sizes[k], 0) != (ssize_t)sizes[k])
                die("memfd");
            if (i & DIRECT) {
                char name[12];
                snprintf(name, sizeof name, "%d", mfd);
                int ro = openat(own_dir, name, O_RDONLY | O_CLOEXEC);
                if (ro < 0)
                    die("server reopen");
                send_fd(sock, ro);
                close(ro);
            } else {
                send_fd(sock, mfd);
            }
            close(mfd);
        }
        post(&ch->ans, &ch->ans_sleeping);
    }
}

static uint32_t answered;

static void ask(struct chan *ch, uint32_t index)
{
    ch->index = index;
    post(&ch->req, &ch->req_sleeping);
    answered = wait_change(&ch->ans, &ch->ans_sleeping, answered);
}

static int proc_dir;

/* the reader's own description of fd: by the kept dirfd, or by the full name */
static int reopen(int fd, int by_path)
{
    char name[32];
    if (by_path) {
        snprintf(name, sizeof name, "/proc/self/fd/%d", fd);
        return open(name, O_RDONLY);
    }
    snprintf(name, sizeof name, "%d", fd);
    return openat(proc_dir, name, O_RDONLY);
}

static void read_whole(int fd, size_t size)
{
    static char buf[1 << 16];
    ssize_t n, got = 0;
    while ((n = read(fd, buf, sizeof buf)) > 0)
        got += n;
    if (n < 0 || (size_t)got != size)
        die("read");
}

static double pass_cache(int by_path)
{
    double t0 = now_us();
    for (size_t i = 0; i < n_files; i++) {
        int mfd = memfd_create("floor", MFD_CLOEXEC);
        if (mfd < 0 || pwrite(mfd, data[i], sizes[i], 0) != (ssize_t)sizes[i])
            die("memfd");
        int fd = reopen(mfd, by_path);
        if (fd < 0)
            die("reopen");
        read_whole(fd, sizes[i]);
        close(fd);
        close(mfd);
    }
    return (now_us() - t0) / (double)n_files;
}

/* floor's calls in one process: the memfd sent to itself over a socketpair */
static double pass_one(int sv[2])
{
    double t0 = now_us();
    for (size_t i = 0; i < n_files; i++) {
        int mfd = memfd_create("floor", MFD_CLOEXEC);
        if (mfd < 0 || pwrite(mfd, data[i], sizes[i], 0) != (ssize_t)sizes[i])
            die("memfd");
        send_fd(sv[1], mfd);
        close(mfd);
        mfd = recv_fd(sv[0]);
        int fd = reopen(mfd, 0);
        if (fd < 0)
            die("reopen");
        close(mfd);
        read_whole(fd, sizes[i]);
        close(fd);
    }
    return (now_us() - t0) / (double)n_files;
}

static double pass_rt(struct chan *ch)
{
    double t0 = now_us();
    for (size_t i = 0; i < n_files; i++)
        ask(ch, ~0u);
    return (now_us() - t0) / (double)n_files;
}

static double pass_floor(struct chan *ch, int sock)
{
    double t0 = now_us();
    for (size_t i = 0; i < n_files; i++) {
        ask(ch, (uint32_t)i);
        int mfd = recv_fd(sock);
        int fd = reopen(mfd, 0);
        if (fd < 0)
            die("reopen");
        close(mfd);
        read_whole(fd, sizes[i]);
        close(fd);
    }
    return (now_us() - t0) / (double)n_files;
}

/* floor with the reader's description made by the server: received, read, closed */
static double pass_direct(struct chan *ch, int sock)
{
    double t0 = now_us();
    for (size_t i = 0; i < n_files; i++) {
        ask(ch, (uint32_t)i | DIRECT);
        int fd = recv_fd(sock);
        read_whole(fd, sizes[i]);
        close(fd);
    }
    return (now_us() - t0) / (double)n_files;
}

static double best(double a, double b)
{
    return a < b ? a : b;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "-n") == 0) {
        no_spin = 1;
        argv++, argc--;
    }
    if (argc != 2) {
        fprintf(stderr, "usage: per_file_floor [-n] DIR\n");
        return 2;
    }
    walk(argv[1]);
    if (n_files == 0) {
        fprintf(stderr, "per_file_floor: no regular file under %s\n", argv[1]);
        return 1;
    }
    if ((proc_dir = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC)) < 0)
        die("/proc/self/fd");
    int sv[2];
    struct chan *ch = mmap(NULL, sizeof *ch, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (ch == MAP_FAILED || socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, sv) < 0)
        die("channel");
    pid_t pid = fork();
    if (pid < 0)
        die("fork");
    if (pid == 0) {
        close(sv[0]);
        serve(ch, sv[1]);
    }
    close(sv[1]);
    int self[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, self) < 0)
        die("socketpair");
    double rt = 1e9, cache = 1e9, path = 1e9, one = 1e9, floor = 1e9, cpu = 1e9, direct = 1e9;
    pass_cache(0);      /* warm: the page allocator, the dentries */
    for (int k = 0; k < 3; k++) {
        rt = best(rt, pass_rt(ch));
        cache = best(cache, pass_cache(0));
        path = best(path, pass_cache(1));
        one = best(one, pass_one(self));
        direct = best(direct, pass_direct(ch, sv[0]));
        double c0 = cpu_us(RUSAGE_SELF);
        double f = pass_floor(ch, sv[0]);
        if (f < floor) {
            floor = f;
            cpu = (cpu_us(RUSAGE_SELF) - c0) / (double)n_files;
        }
    }
    ask(ch, (uint32_t)n_files);
    int status;
    waitpid(pid, &status, 0);
    /* the server's CPU over its whole life: 3 floor passes and 3 rt passes */
    double srv = cpu_us(RUSAGE_CHILDREN) / (double)n_files / 3;
    printf("RESULT files=%zu rt=%.2f cache=%.2f path=%.2f one=%.2f floor=%.2f direct=%.2f cpu=%.2f srv_cpu=%.2f\n",
           n_files, rt, cache, path, one, floor, direct, cpu, srv);
    return 0;
}
