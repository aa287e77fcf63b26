/*
 * roundtrip.c - the raw cost of one request of the shared mode, with no Python in it.
 *
 * Run as the command of ldpfuse-run (it reads LDPFUSE_SOCKET from the environment):
 *   gcc -O2 -pthread -I native/backend -o bench/out/roundtrip bench/roundtrip.c
 *   ldpfuse-run --mountpoint /tmp/m examples/memory.py:Memory -- bench/out/roundtrip [N] [THREADS]
 * Each thread opens a channel of its own (backend/channel.h), proving it belongs to the
 * command with the run's secret (LDPFUSE_SECRET, as backend/channel.c does), and sends N
 * W_CACHE_CLOSE requests that name no page cache: the server's checks answer them
 * (EBADF) without calling the class, so what is timed is the transport and the checks
 * every request passes (write the request, wake or be seen by the server, its answer,
 * wake or be seen by the client). Prints the median round trip of batches of 1000, in
 * microseconds.
 */
#define _GNU_SOURCE
#include "channel.h"
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>

static int n_req = 20000;

static const char path[] = "/no-such-cache";

static void wait_answer(struct chan_region *r)
{
    uint64_t s0 = chan_now_ns();
    for (unsigned k = 1; chan_load(&r->state) != CHAN_RESP; k++) {
        if ((k & 7) == 0 && chan_now_ns() - s0 > 20000)
            break;
        sched_yield();
    }
    while (chan_load(&r->state) != CHAN_RESP) {
        uint32_t st = chan_load(&r->state);
        chan_store(&r->client_waits, 1);
        if (chan_load(&r->state) != CHAN_RESP)
            chan_sleep(&r->state, st, 50);
        chan_store(&r->client_waits, 0);
    }
}

/* A channel as backend/channel.c makes one: the hello with the run's secret and the
 * connection's first request go on the socket right after connect, and the request is
 * answered in the region the server's first message brings. */
static struct chan_region *connect_channel(int *sock)
{
    const char *name = getenv("LDPFUSE_SOCKET"), *secret = getenv("LDPFUSE_SECRET");
    if (!name || !secret || strlen(secret) != 2 * WIRE_SECRET_LEN)
        return NULL;
    struct sockaddr_un a = { .sun_family = AF_UNIX };
    size_t nl = strlen(name);
    memcpy(a.sun_path + 1, name, nl);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(fd, (struct sockaddr *)&a, (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + nl)) < 0)
        return NULL;
    struct {
        struct wire_hello hello;
        struct wire_req rq;
        char path[sizeof path - 1];
    } first = { .hello = { .magic = WIRE_HELLO_MAGIC },
                .rq = { .op = W_CACHE_CLOSE, .len = sizeof path - 1, .path_len = sizeof path - 1 } };
    for (int i = 0; i < WIRE_SECRET_LEN; i++)
        sscanf(secret + 2 * i, "%2hhx", &first.hello.secret[i]);
    memcpy(first.path, path, sizeof first.path);
    if (send(fd, &first, sizeof first, MSG_NOSIGNAL) != (ssize_t)sizeof first)
        return NULL;
    struct wire_resp hello;
    char cbuf[CMSG_SPACE(2 * sizeof(int))];
    struct iovec iov = { &hello, sizeof hello };
    struct msghdr mh = { .msg_iov = &iov, .msg_iovlen = 1, .msg_control = cbuf, .msg_controllen = sizeof cbuf };
    if (recvmsg(fd, &mh, MSG_WAITALL) != sizeof hello || CMSG_FIRSTHDR(&mh) == NULL)
        return NULL;
    int mfd = -1;
    struct cmsghdr *c = CMSG_FIRSTHDR(&mh);
    memcpy(&mfd, CMSG_DATA(c), sizeof mfd);
    void *p = mmap(NULL, CHAN_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, mfd, 0);
    close(mfd);
    *sock = fd;
    if (p == MAP_FAILED)
        return NULL;
    wait_answer(p);     /* the first request's */
    return p;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static void *worker(void *arg)
{
    double *median = arg;
    int sock;
    struct chan_region *r = connect_channel(&sock);
    if (r == NULL) {
        fprintf(stderr, "roundtrip: no shared-mode server (run me under ldpfuse-run)\n");
        exit(1);
    }
    int batches = n_req / 1000;
    double *t = calloc((size_t)batches, sizeof *t);
    for (int b = 0; b < batches; b++) {
        uint64_t t0 = chan_now_ns();
        for (int i = 0; i < 1000; i++) {
            struct wire_req rq = { .op = W_CACHE_CLOSE, .len = (uint32_t)strlen(path), .path_len = (uint32_t)strlen(path) };
            r->rq = rq;
            memcpy(r->buf, path, rq.len);
            chan_store(&r->state, CHAN_REQ);
            if (chan_load(&r->server_waits))
                chan_wake(&r->state);
            wait_answer(r);
        }
        t[b] = (double)(chan_now_ns() - t0) / 1000.0 / 1000.0;
    }
    qsort(t, (size_t)batches, sizeof *t, cmp);
    *median = t[batches / 2];
    free(t);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1)
        n_req = atoi(argv[1]) < 1000 ? 1000 : atoi(argv[1]);
    int threads = argc > 2 ? atoi(argv[2]) : 1;
    if (threads < 1 || threads > 64)
        threads = 1;
    pthread_t th[64];
    double med[64];
    for (int i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, worker, &med[i]);
    for (int i = 0; i < threads; i++)
        pthread_join(th[i], NULL);
    qsort(med, (size_t)threads, sizeof med[0], cmp);
    printf("RESULT roundtrip threads=%d median_us=%.2f\n", threads, med[threads / 2]);
    return 0;
}
