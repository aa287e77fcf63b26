/*
 * The server's threads. A class that is not thread_safe is called from one thread only,
 * the one that built it (the launcher's main thread, in serve_loop: it waits on every
 * channel's futex at once with futex_waitv), so objects bound to their thread work. A
 * class with `thread_safe = True` gets one thread per channel, so a call that blocks holds
 * up only its caller. A client may give a request up (op_timeout, backend/channel.c: a
 * method that never returns): one compare-and-swap on the region's state (chan_settle)
 * decides whether the answer stands or is dropped (request.c). The FS thread writes in the
 * table every client maps since when it has been in its current request
 * (coherence.c), so that clients tell a stuck FS thread from a busy one and stop queueing a
 * full op_timeout each behind it. The watcher thread hears of clients that hang up.
 * Python-facing entry points: _embedded.serve_init() builds the FS objects;
 * _embedded.serve_start(listen_fd, thread_safe) starts accepting; serve_loop() serves
 * until serve_stop().
 */
#include "server.h"
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>

void ldp_thread_done(void);
void ldp_embedded_serving(void);
void ldp_embedded_hold(void);
void ldp_embedded_let_go(void);
struct backend_ops *ldpfuse_backend_embedded_init(const struct core_api *c, int host_owns_python, char *err,
                                                  size_t errsize);
int serialise = 1;
int watch_ep = -1;

static long server_spin_ns = -1;
#define FS_ANTICIPATE_NS 3000000ull     /* the FS thread stays awake this long after a connection */

/* How long the server spins for a client's next request (LDPFUSE_SERVER_SPIN_US, default
 * 100 us). Long enough to cover what a program does between two requests of a loop (a
 * create cycle writes 4 KiB and closes between its create and its unlink): a sleep costs
 * the waker a wake-up of an idle CPU, 50-80 us on this 2-core VM when the machine is
 * otherwise quiet. Measured (bench/targets.py, idle machine): 5 us gave the create cycle
 * x0.14 of native and open+read+close x0.43; 100 us x0.64 and x0.58. chan_spin stops
 * spinning where it does not pay (a short process), and the spin yields the CPU. */
static uint64_t spin_budget(void)
{
    if (server_spin_ns < 0) {
        const char *e = getenv("LDPFUSE_SERVER_SPIN_US");
        server_spin_ns = e && *e ? strtol(e, NULL, 10) * 1000 : 100000;
    }
    return (uint64_t)server_spin_ns;
}

/* A thread_safe class: one thread per client connection while it lasts, so a call that
 * blocks holds up only its caller. It waits on its channel's futex, in slices, checking
 * between them that the client still lives. */
#define FIRST_PART_MS 10000
static void serve_client(struct client *cl)
{
    struct chan_region *rg = cl->region;
    struct chan_spin spin = { 0 };
    if (client_setup(cl) < 0) {
        client_gone(cl);
        return;
    }
    /* the first request comes on the socket, whole before the client was admitted
     * (peers.c: the door waits SILENCE_MS for it); the wait here is for a protocol
     * broken since (request.c, first_ready): one that sent a part and no more for
     * FIRST_PART_MS is dropped */
    int ready = 0;
    for (int waited = 0; cl->first && (ready = first_ready(cl)) == 0;) {
        char byte;
        if (recv(cl->fd, &byte, 1, MSG_PEEK | MSG_DONTWAIT) == 1) {
            if (++waited > FIRST_PART_MS || chan_peer_gone(cl->fd))
                break;      /* the rest will not come */
            nanosleep(&(struct timespec){ 0, 1000000 }, NULL);   /* the rest is on its way */
            continue;
        }
        struct pollfd first = { .fd = cl->fd, .events = POLLIN | POLLRDHUP };
        poll(&first, 1, -1);
    }
    if (cl->first && (ready <= 0 || serve_request(cl) < 0)) {
        client_gone(cl);
        return;
    }
    spares_fill();      /* after the answer: out of the way of this client and the next */
    for (;;) {
        uint32_t st = chan_load(&rg->state);
        if (st != CHAN_REQ && spin_budget() > 0 && chan_spin_now(&spin)) {
            struct chan_spinner spinner;
            chan_spin_start(&spinner, spin_budget());
            while ((st = chan_load(&rg->state)) != CHAN_REQ && chan_spin_turn(&spinner))
                ;
            chan_spin_result(&spin, st == CHAN_REQ);
        }
        if (st != CHAN_REQ) {
            chan_store(&rg->server_waits, 1);
            st = chan_load(&rg->state);
            if (st != CHAN_REQ)
                chan_sleep(&rg->state, st, 100);
            chan_store(&rg->server_waits, 0);
            if (chan_load(&rg->state) != CHAN_REQ) {
                if (chan_peer_gone(cl->fd))
                    break;
                continue;
            }
        }
        if (serve_request(cl) < 0)
            break;
    }
    client_gone(cl);
}

/* Threads whose connection has ended wait here for the next one (up to POOL_IDLE_MAX of
 * them, for POOL_IDLE_S), so a new connection (every short process makes one) costs no
 * thread start and no new Python thread state: 200 `cat` processes on a thread_safe
 * loopback ran at x0.47 of native with a thread per connection. The accept thread hands a
 * client to a waiting thread (pool_give) or starts one. */
#define POOL_IDLE_MAX 16
#define POOL_IDLE_S 10
static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond = PTHREAD_COND_INITIALIZER;
static struct client *pool_queue;   /* handed over, not yet taken (linked by next) */
static int pool_idle, pool_queued;

static int pool_give(struct client *cl)
{
    pthread_mutex_lock(&pool_lock);
    int given = pool_idle > pool_queued;
    if (given) {
        struct client **p = &pool_queue;
        while (*p)
            p = &(*p)->next;
        cl->next = NULL;
        *p = cl;
        pool_queued++;
        pthread_cond_signal(&pool_cond);
    }
    pthread_mutex_unlock(&pool_lock);
    return given;
}

/* The next client for this thread, or NULL: it ends. */
static struct client *pool_wait(void)
{
    struct client *cl = NULL;
    pthread_mutex_lock(&pool_lock);
    if (pool_idle < POOL_IDLE_MAX) {
        struct timespec end;
        clock_gettime(CLOCK_MONOTONIC, &end);
        end.tv_sec += POOL_IDLE_S;
        pool_idle++;
        while (pool_queue == NULL && pthread_cond_clockwait(&pool_cond, &pool_lock, CLOCK_MONOTONIC, &end) != ETIMEDOUT)
            ;
        pool_idle--;
        if ((cl = pool_queue) != NULL) {
            pool_queue = cl->next;
            pool_queued--;
        }
    }
    pthread_mutex_unlock(&pool_lock);
    return cl;
}

static void *conn_thread(void *arg)
{
    for (struct client *cl = arg; cl; cl = pool_wait())
        serve_client(cl);
    ldp_thread_done();
    return NULL;
}

/* A thread_safe class's new client: to a waiting thread, or a new one. */
void pool_start(struct client *cl)
{
    if (pool_give(cl))
        return;
    pthread_t t;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &at, conn_thread, cl) != 0)
        client_gone(cl);
    pthread_attr_destroy(&at);
}

/* The clients of a class that is not thread_safe, served by the FS thread: the accept
 * thread adds to `fs_clients` (at its head, under fs_clients_lock, published whole with
 * a release store) and bumps `fs_ctl`, a futex the FS thread also waits on. Only the FS
 * thread takes clients off the list, so it may walk the list without the lock. */
static struct client *fs_clients;
static pthread_mutex_t fs_clients_lock = PTHREAD_MUTEX_INITIALIZER;
static uint32_t fs_ctl;
static int fs_stop;
uint64_t last_connect_ns;           /* when the accept thread last took a connection */

static int fs_asleep;               /* the FS thread is in (or on its way into) fs_wait */

/* A spinning FS thread sees fs_ctl move; only a sleeping one needs the wake-up (whose
 * system call, to an idle CPU, costs the waker tens of microseconds on a VM: the
 * watcher, when a short process exits, does it on that process's CPU). */
void fs_poke(void)
{
    __atomic_add_fetch(&fs_ctl, 1, __ATOMIC_SEQ_CST);
    if (__atomic_load_n(&fs_asleep, __ATOMIC_SEQ_CST))
        syscall(SYS_futex, &fs_ctl, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* A new client of the FS thread (from the accept thread). */
void fs_client_add(struct client *cl)
{
    pthread_mutex_lock(&fs_clients_lock);
    cl->next = fs_clients;
    __atomic_store_n(&fs_clients, cl, __ATOMIC_RELEASE);  /* whole, for lock-free readers */
    pthread_mutex_unlock(&fs_clients_lock);
    fs_poke();
}

/* The clients' sockets, watched for hang-ups so that a client that has gone (a short
 * process's exit) is let go of soon, not at its server thread's next 100 ms look. For
 * the FS thread a hang-up is a hint (fs_hangup), it checks each socket. Each connection
 * is watched once (EPOLLONESHOT: the watcher never names an fd, which the FS thread may
 * have closed and a new connection reused); a thread_safe class's under the address of
 * its region's futex word (tagged with bit 0; the FS thread's clients under their
 * fd << 1), which the watcher wakes: a stale address (the region gone since) makes
 * that wake fail (EFAULT) or wake a thread that then finds nothing to do, never more. */
static int fs_hangup;

static void *watch_thread(void *arg)
{
    (void)arg;
    /* at the lowest priority: a short process's exit woke it on that process's CPU,
     * where it ran (10-20 us) before the process could finish dying and its parent go on;
     * as SCHED_IDLE it runs once a CPU has nothing else to do. Nothing waits on it: the
     * FS thread also looks at every socket each 100 ms, and a thread_safe class's
     * threads at theirs. */
    struct sched_param idle = { 0 };
    pthread_setschedparam(pthread_self(), SCHED_IDLE, &idle);
    for (;;) {
        struct epoll_event ev[32];
        int n = epoll_wait(watch_ep, ev, 32, -1);
        if (n < 0 && errno != EINTR)
            break;
        int hangup = 0, poke = 0;
        for (int i = 0; i < n; i++) {
            if (ev[i].data.u64 & 1) {
                syscall(SYS_futex, (uint32_t *)(uintptr_t)(ev[i].data.u64 & ~(uint64_t)1), FUTEX_WAKE, INT_MAX,
                        NULL, NULL, 0);
                continue;
            }
            /* EPOLLONESHOT: nothing to take out (by number: client_gone may have closed it) */
            poke = 1;
            hangup = 1;
        }
        if (hangup)
            __atomic_store_n(&fs_hangup, 1, __ATOMIC_SEQ_CST);
        if (poke)
            fs_poke();
    }
    return NULL;
}


/* fuse_get_context() in the server: the calling client's (uid, gid, pid), or None when
 * this thread is not answering a request. */
PyObject *ldp_context(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    if (srv_current == NULL)
        Py_RETURN_NONE;
    return Py_BuildValue("(III)", srv_current->as_uid, srv_current->as_gid, srv_current->pid);
}

/* The uid and gid of the client being answered (this process's when none): killpriv.c */
void srv_caller(uid_t *uid, gid_t *gid)
{
    *uid = srv_current ? (uid_t)srv_current->as_uid : geteuid();
    *gid = srv_current ? (gid_t)srv_current->as_gid : getegid();
}

PyObject *ldp_serve_init(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    char err[512] = "";
    fs_ops = ldpfuse_backend_embedded_init(&server_core, 1, err, sizeof err);
    if (fs_ops == NULL) {
        PyErr_SetString(PyExc_RuntimeError, err[0] ? err : "the file system could not start");
        return NULL;
    }
    Py_RETURN_NONE;
}

/* The fd table grown now, while no thread of ours shares it: the kernel grows a shared
 * table only after an RCU grace period (expand_fdtable's synchronize_rcu), 4-17 ms
 * measured here, which the first request that made a high fd paid instead (the first
 * O_APPEND write: the append lock file at 600; the file system's own fds, from 512). */
static void grow_fd_table(int fd)
{
    struct rlimit rl;
    int top = 1023;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur <= (rlim_t)top)
        top = (int)rl.rlim_cur - 1;
    int high = top > 2 ? fcntl(fd, F_DUPFD_CLOEXEC, top) : -1;
    if (high >= 0)
        close(high);
}

PyObject *ldp_serve_start(PyObject *self, PyObject *args)
{
    (void)self;
    int lfd, thread_safe = 0;
    if (!PyArg_ParseTuple(args, "i|p", &lfd, &thread_safe))
        return NULL;
    if (fs_ops == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "serve_init() first");
        return NULL;
    }
    if (peers_init() < 0) {
        PyErr_SetString(PyExc_RuntimeError, "no LDPFUSE_SECRET: the launcher makes one for each run");
        return NULL;
    }
    serialise = !thread_safe;
    ldp_embedded_serving();     /* the FS thread orders the calls, not the backend's lock */
    coh_ensure();       /* before any client: one_thread is set from serialise */
    switch_creds = creds_init();
    umask(0);       /* each client applied its own umask to the modes it sends */
    grow_fd_table(lfd);
    pthread_t t;
    if ((watch_ep = epoll_create1(EPOLL_CLOEXEC)) >= 0 &&
        pthread_create(&t, NULL, watch_thread, NULL) == 0)
        pthread_detach(t);
    if (pthread_create(&t, NULL, accept_thread, (void *)(intptr_t)lfd) != 0) {
        PyErr_SetFromErrno(PyExc_OSError);
        return NULL;
    }
    pthread_detach(t);
    Py_RETURN_NONE;
}

/* The FS thread's wait: every client's futex word (futex_waitv, up to FUTEX_WAITV_MAX - 1 of
 * them; with more, a short timeout and a scan of the rest) and fs_ctl (a new client,
 * serve_stop()). Returns after at most `ms` milliseconds. */
static void fs_wait(long ms)
{
    struct futex_waitv w[FUTEX_WAITV_MAX];
    int n = 0;
    /* announced before fs_ctl is read: a poke after that read wakes us, one before it
     * moved the value we wait on (futex_waitv then returns at once) */
    __atomic_store_n(&fs_asleep, 1, __ATOMIC_SEQ_CST);
    uint32_t ctl = __atomic_load_n(&fs_ctl, __ATOMIC_SEQ_CST);
    w[n++] = (struct futex_waitv){ .val = ctl, .uaddr = (uintptr_t)&fs_ctl, .flags = FUTEX_32 | FUTEX_PRIVATE_FLAG };
    int more = 0;
    pthread_mutex_lock(&fs_clients_lock);
    for (struct client *cl = fs_clients; cl; cl = cl->next) {
        if (!cl->ready) {
            n = 0;          /* a new client to set up */
            break;
        }
        chan_store(&cl->region->server_waits, 1);
        uint32_t st = chan_load(&cl->region->state);
        if (cl->first ? first_ready(cl) != 0 : st == CHAN_REQ) {
            n = 0;          /* work (or a client's end) came in meanwhile */
            break;
        }
        /* a client whose first request is still on its way on the socket wakes this
         * futex once it has sent it and has its region (channel.c), the others publish
         * requests there: either way no other thread is woken first. (Before its first
         * request a client's region holds no request: what it says there is not read.) */
        if (n == FUTEX_WAITV_MAX) {
            more = 1;
            continue;
        }
        w[n++] = (struct futex_waitv){ .val = st, .uaddr = (uintptr_t)&cl->region->state, .flags = FUTEX_32 };
    }
    pthread_mutex_unlock(&fs_clients_lock);
    if (n > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        long add = more ? 1 : ms;
        ts.tv_nsec += (add % 1000) * 1000000L;
        ts.tv_sec += add / 1000 + ts.tv_nsec / 1000000000L;
        ts.tv_nsec %= 1000000000L;
        if (syscall(SYS_futex_waitv, w, n, 0, &ts, CLOCK_MONOTONIC) < 0 && errno == ENOSYS)
            chan_sleep(&fs_ctl, ctl, 1);    /* a kernel before 5.16: look again every ms */
    }
    __atomic_store_n(&fs_asleep, 0, __ATOMIC_SEQ_CST);
    pthread_mutex_lock(&fs_clients_lock);
    for (struct client *cl = fs_clients; cl; cl = cl->next)
        chan_store(&cl->region->server_waits, 0);
    pthread_mutex_unlock(&fs_clients_lock);
}

/* One pass over the FS thread's clients: answer each published request, and, when
 * `check` says so, drop those whose socket has closed. Returns how many it answered. */
static int fs_pass(int check)
{
    int served = 0;
    pthread_mutex_lock(&fs_clients_lock);
    struct client *list = fs_clients;
    pthread_mutex_unlock(&fs_clients_lock);
    /* only this thread removes from the list; the accept thread only pushes at its head */
    for (struct client *cl = list; cl; cl = cl->next) {
        if (client_setup(cl) < 0) {
            cl->gone = 1;
            continue;
        }
        int first = cl->first ? first_ready(cl) : 0;
        if (first < 0) {
            cl->gone = 1;
        } else if (first > 0 || (!cl->first && chan_load(&cl->region->state) == CHAN_REQ)) {
            coh_fs_begin();
            ldp_embedded_hold();        /* one GIL take per request, not per method */
            if (serve_request(cl) < 0)
                cl->gone = 1;
            ldp_embedded_let_go();
            coh_fs_served();
            served++;
        } else if (check && chan_peer_gone(cl->fd)) {
            cl->gone = 1;
        }
    }
    for (;;) {
        struct client *dead = NULL;
        pthread_mutex_lock(&fs_clients_lock);
        for (struct client **p = &fs_clients; *p; p = &(*p)->next)
            if ((*p)->gone) {
                dead = *p;
                *p = dead->next;
                break;
            }
        pthread_mutex_unlock(&fs_clients_lock);
        if (dead == NULL)
            break;
        client_gone(dead);
    }
    return served;
}

/* Is one process at most among the FS thread's live clients? Then new processes come one
 * after another (a shell loop of short processes: waking the FS thread for each costs
 * more than it does), not beside others: with two or more at once (make -j2, whose make
 * is a client too) the CPUs have work, and a spinning FS thread slowed the build (16
 * compiles: 274 ms without anticipation, 335 ms with it, 191 natively). A client whose
 * socket has closed but whose hang-up has not been told yet does not count. */
static int fs_client_alone(void)
{
    pid_t one = 0;
    for (struct client *cl = __atomic_load_n(&fs_clients, __ATOMIC_ACQUIRE); cl; cl = cl->next) {
        if (cl->gone || !cl->ready || cl->pid == one)
            continue;
        if (chan_peer_gone(cl->fd))
            continue;
        if (one != 0)
            return 0;
        one = cl->pid;
    }
    return 1;
}

/* serve_loop(): the calling thread (the one that built the FS objects) answers every
 * client of a class that is not thread_safe, one request at a time, until serve_stop():
 * so the class is always called from the thread that built it, and objects bound to a
 * thread (sqlite3 connections made in __init__) work. After an answer it spins a little
 * for the next request (while processes come one after another, for the next connection
 * too), then
 * sleeps on every client's futex at once (futex_waitv). For a
 * thread_safe class it only waits. Python signal handlers still run (every 100 ms at
 * worst); an exception from one ends the loop. */
PyObject *ldp_serve_loop(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    struct chan_spin fs_spin = { 0 };
    while (!__atomic_load_n(&fs_stop, __ATOMIC_ACQUIRE)) {
        Py_BEGIN_ALLOW_THREADS
        uint64_t t0 = chan_now_ns(), last_check = t0;
        while (!__atomic_load_n(&fs_stop, __ATOMIC_ACQUIRE) && chan_now_ns() - t0 < 100000000u) {
            uint64_t now = chan_now_ns();
            int check = now - last_check > 100000000u || __atomic_exchange_n(&fs_hangup, 0, __ATOMIC_SEQ_CST);
            if (check)
                last_check = now;
            if (fs_pass(check) > 0)
                continue;
            /* spin a little: a client that just got its answer often asks again at once
             * (adaptive: fs_spin). While new processes come one after another (a shell
             * loop of short processes: one every millisecond or so), stay awake until
             * FS_ANTICIPATE_NS after the last connection, whatever the spins so far paid:
             * asleep, the FS thread costs each new process an idle CPU's wake-up (50-80 us
             * on a quiet VM) between the accept thread's hand-over and the call; with the
             * adaptive rule it slept between most two `cat`s of a loop. */
            uint64_t start = chan_now_ns(), budget = spin_budget();
            uint64_t last = __atomic_load_n(&last_connect_ns, __ATOMIC_RELAXED);
            uint64_t since = start > last ? start - last : 0;
            uint32_t ctl = __atomic_load_n(&fs_ctl, __ATOMIC_SEQ_CST);
            int anticipate = budget > 0 && since < FS_ANTICIPATE_NS && fs_client_alone();
            int work = 0;
            if (anticipate)
                budget = FS_ANTICIPATE_NS - since;
            spares_fill();
            if (budget > 0 && (anticipate || chan_spin_now(&fs_spin))) {
                struct chan_spinner spinner;
                chan_spin_start(&spinner, budget);
                while (!work && chan_spin_turn(&spinner)) {
                    if (__atomic_load_n(&fs_ctl, __ATOMIC_SEQ_CST) != ctl)
                        work = 1;       /* a new client, or one that has gone */
                    /* no lock: only this thread takes clients off the list (fs_pass); a
                     * first request is looked for on the socket (no watcher's wake-up) */
                    for (struct client *cl = __atomic_load_n(&fs_clients, __ATOMIC_ACQUIRE); cl && !work; cl = cl->next)
                        work = cl->first ? !cl->ready || first_ready(cl) != 0
                                         : chan_load(&cl->region->state) == CHAN_REQ;
                }
                if (!anticipate)
                    chan_spin_result(&fs_spin, work);
            }
            /* a poke after the spin's last look (a hang-up) would be lost to fs_wait,
             * which waits from fs_ctl's value of then */
            if (!work && __atomic_load_n(&fs_ctl, __ATOMIC_SEQ_CST) == ctl)
                fs_wait(100);
        }
        fs_pass(1);
        if (orphans_pending())
            orphans_sweep();    /* a process seen leaving may have been mid-exit */
        if (lingering_pending())
            lingering_sweep(0);     /* passed fds no one claimed (handles.c) */
        Py_END_ALLOW_THREADS
        if (!__atomic_load_n(&fs_stop, __ATOMIC_ACQUIRE) && PyErr_CheckSignals() < 0)
            return NULL;
    }
    Py_BEGIN_ALLOW_THREADS
    lingering_sweep(1);     /* the command has ended: every passed fd's handle, before destroy() */
    Py_END_ALLOW_THREADS
    become_self();
    Py_RETURN_NONE;
}

/* fs_thread_stuck(): has a call timed out behind the FS thread, which has finished no
 * request since (coherence.h, fs)? The launcher then does not wait for it to end. */
PyObject *ldp_fs_thread_stuck(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    return PyBool_FromLong(coh_fs_stuck(__atomic_load_n(&coh, __ATOMIC_ACQUIRE)));
}

PyObject *ldp_serve_stop(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    __atomic_store_n(&fs_stop, 1, __ATOMIC_RELEASE);
    fs_poke();
    Py_RETURN_NONE;
}

/* serve_cleanup(): remove what the server left on disk (the FIFOs' directory). */
PyObject *ldp_serve_cleanup(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    sfifo_cleanup();
    Py_RETURN_NONE;
}
