/*
 * A channel of the shared mode: one per client thread, a region of shared memory (a sealed
 * memfd the server makes for each connection and hands over it, with the table of change
 * counters of backend/coherence.h beside it) plus the connection's unix
 * socket. A request and its answer go through the region; a futex word in it says whose
 * turn it is, and each side sleeps on it only after a short spin, so a round trip costs a
 * few microseconds, not two socket transfers. The socket stays for what the kernel must
 * carry or vouch for: who the client is (SO_PEERCRED at connect: the identity never comes
 * from the region), fds (SCM_RIGHTS), payloads bigger than the region, the connection's
 * first request (sent with the connect, before the client has the region: one round trip
 * for a short process's first operation), and the end of either side (a closed socket is
 * how each learns that the other died).
 *
 * Both ends (backend/channel.c in the preload, server/ in the extension) include
 * this header; its layout is the contract.
 */
#ifndef LDPFUSE_CHANNEL_H
#define LDPFUSE_CHANNEL_H
#include "wire.h"
#include <limits.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

#define CHAN_SIZE (1u << 20)    /* the region; pages are only used as they are touched */

enum chan_state {
    CHAN_IDLE = 0,  /* nothing asked yet */
    CHAN_REQ,       /* the client wrote a request: the server's turn */
    CHAN_RESP,      /* the server wrote the answer: the client's turn */
    CHAN_GAVE_UP,   /* the client stopped waiting (op_timeout) and let go of the channel:
                     * the server drops the answer and releases what it handed over */
};
/* Who ends a request is decided by one compare-and-swap on state, from CHAN_REQ (or
 * CHAN_IDLE for a connection's first request, which came on the socket): the server's to
 * CHAN_RESP (the answer stands) or the client's to CHAN_GAVE_UP (it is dropped). A request
 * given up before the server took it is never run. */
static inline int chan_settle(uint32_t *state, uint32_t from, uint32_t to)
{
    return __atomic_compare_exchange_n(state, &from, to, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
}

struct chan_region {
    uint32_t state;             /* the futex word: enum chan_state */
    uint32_t server_waits;      /* the server sleeps (or is about to) on state */
    uint32_t client_waits;      /* the client sleeps (or is about to) on state */
    uint32_t pad;
    struct wire_req rq;
    struct wire_resp rs;
    char buf[];                 /* a request's body, then an answer's data, if they fit */
};
#define CHAN_BUF (CHAN_SIZE - offsetof(struct chan_region, buf))

/*
 * What does not fit in the region rides on the socket: a request whose body is longer than
 * CHAN_BUF sends the body on the socket after publishing the header. An answer's fd (one
 * byte with SCM_RIGHTS, if rs.has_fd) is sent before its header is published, so the
 * client finds it there at once; its data, if rs.len > CHAN_BUF, after.
 * A connection's first request goes whole on the socket (header, then body); its answer
 * comes in the region like any other. The server's first message on a connection is a
 * struct wire_resp with result CHAN_SIZE and, with SCM_RIGHTS, the region's memfd and the
 * coherence table's (has_fd = how many).
 */

static inline uint32_t chan_load(const uint32_t *p)
{
    return __atomic_load_n(p, __ATOMIC_SEQ_CST);
}

static inline void chan_store(uint32_t *p, uint32_t v)
{
    __atomic_store_n(p, v, __ATOMIC_SEQ_CST);
}

/* The region is shared between processes: no FUTEX_PRIVATE_FLAG. */
static inline void chan_wake(uint32_t *word)
{
    syscall(SYS_futex, word, FUTEX_WAKE, INT_MAX, NULL, NULL, 0);
}

/* Sleep while *word == val, at most ms milliseconds (or until a signal). */
static inline void chan_sleep(uint32_t *word, uint32_t val, long ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    syscall(SYS_futex, word, FUTEX_WAIT, val, &ts, NULL, 0);
}

static inline uint64_t chan_now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* Adaptive spinning, for either side: spin for the other side's next move only while
 * spinning pays. A waiter that is new (its first requests: a short process) does not spin
 * by this rule (channel.c spins for a connection's first answer on its own terms); four
 * spins in a row that end in a sleep anyway stop it for the next 64 waits. Measured
 * on 2 busy cores: a fixed spin made 200 short processes 40% slower, no spin made a hot
 * loop of requests 2-5x slower; each turn of a spin also stops it when the CPU turns out
 * busy (chan_spin_turn). */
struct chan_spin {
    uint32_t waits, misses, skip;
};

static inline int chan_spin_now(struct chan_spin *s)
{
    if (s->waits < 16) {
        s->waits++;
        return 0;
    }
    if (s->skip) {
        s->skip--;
        return 0;
    }
    return 1;
}

static inline void chan_spin_result(struct chan_spin *s, int paid)
{
    if (paid)
        s->misses = 0;
    else if (++s->misses >= 4) {
        s->misses = 0;
        s->skip = 64;
    }
}

/* A spin: chan_spin_start() then chan_spin_turn() until the awaited change is seen or a
 * turn says stop (0): past the budget, or a yield let another task run for a while.
 * Spinning pays only on a CPU that would otherwise go idle (waking an idle CPU is what
 * costs); on a busy one the sleeper is woken without that cost, and the spin only takes
 * time from others. A turn waits with the CPU's pause instruction, about a microsecond,
 * and yields only every CHAN_YIELD_EVERY_NS: a spin made of sched_yield() calls made the
 * other CPU of this 2-vCPU VM 10-35% slower (a native loop of `cat`, 0.75 -> 0.82-1.0 ms
 * per process, with such a spinner on the other CPU; pauses with a yield every 5-20 us:
 * no difference measurable). But where the CPU is shared (the first turn's yield, or a
 * later one, let another task run: the other side of the channel, often), every turn
 * yields at once: pausing there only kept the other side waiting (open+read+close with
 * 2 threads, x0.63 of native with yields, x0.58 with pauses). */
#define CHAN_YIELD_BUSY_NS 40000     /* a yield that took longer: the CPU is busy (one of
                                        our own threads' short turns, 10-30 us, is not) */
#define CHAN_YIELD_EVERY_NS 10000
#define CHAN_YIELD_SHARED_NS 3000    /* a yield that took longer: another task ran */
struct chan_spinner {
    uint64_t start, budget, yielded;
    int shared;                 /* another task wants this CPU: yield at every turn */
};

static inline void chan_spin_start(struct chan_spinner *s, uint64_t budget)
{
    s->start = chan_now_ns();
    s->yielded = s->start - CHAN_YIELD_EVERY_NS;    /* the first turn yields: is the CPU shared? */
    s->budget = budget;
    s->shared = 0;
}

static inline void chan_cpu_relax(void)
{
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#elif defined(__aarch64__)
    __asm__ __volatile__("yield" ::: "memory");
#else
    __asm__ __volatile__("" ::: "memory");
#endif
}

static inline int chan_spin_turn(struct chan_spinner *s)
{
    uint64_t now = chan_now_ns();
    if (now - s->start > s->budget)
        return 0;
    if (!s->shared && now - s->yielded < CHAN_YIELD_EVERY_NS) {
        for (int i = 0; i < 32; i++)
            chan_cpu_relax();
        return 1;
    }
    sched_yield();
    s->yielded = chan_now_ns();
    uint64_t took = s->yielded - now;
    if (took > CHAN_YIELD_SHARED_NS)
        s->shared = 1;
    return took < CHAN_YIELD_BUSY_NS;
}

/* Has the other end of a connected unix socket gone (closed, died)? */
static inline int chan_peer_gone(int sock)
{
    struct pollfd p = { .fd = sock, .events = POLLRDHUP };
    struct timespec zero = { 0, 0 };
    return syscall(SYS_ppoll, &p, 1, &zero, NULL, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL));
}

/* The client's side (backend/channel.c): one request at a time on this thread's channel. */
struct channel;
struct iovec;
struct channel *channel_begin(void);
int channel_send(struct channel *c, const struct wire_req *rq, const struct iovec *body, int n);
int channel_post(struct channel *c, const struct wire_req *rq, const struct iovec *body, int n);
int channel_wait(struct channel *c, struct wire_resp *rs, int *fd, int keep_on_exec);
#define CHAN_TIMED_OUT (-2)     /* channel_send/channel_wait: op_timeout passed, given up */
#define CHAN_STUCK (-3)         /* given up sooner: the FS thread is stuck (coherence.h, fs) */
#define CHAN_REFUSED (-4)       /* the server refused this process (channel_refused: why) */
int channel_refused(struct channel *c);
uint32_t channel_last_us(const struct channel *c);   /* --stats */
void channel_note_us(struct channel *c, uint32_t us);
double channel_op_timeout(void);
int channel_memfd_ok(int fd, off_t size);
int channel_data(struct channel *c, const struct wire_resp *rs, void *dst, size_t take);
void channel_end(struct channel *c);
void channel_fail(struct channel *c);
void channel_atfork_child(void);
void shared_fds_lost(unsigned first, unsigned last);
void shared_fds_closed(unsigned first, unsigned last);   /* after the kernel closed them */
void shared_coherence_offer(int fd);     /* the table the connection brought (closes fd) */
struct coherence *shared_coherence(void);   /* that table, or NULL */
/* Past w bytes a partial sendmsg wrote: the vector left (*v, the count returned). */
static inline size_t iov_advance(struct iovec **v, size_t n, size_t w)
{
    while (n > 0 && w >= (*v)->iov_len) {
        w -= (*v)->iov_len;
        (*v)++;
        n--;
    }
    if (n > 0) {
        (*v)->iov_base = (char *)(*v)->iov_base + w;
        (*v)->iov_len -= w;
    }
    return n;
}

#endif
