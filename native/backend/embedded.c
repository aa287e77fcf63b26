/*
 * The embedded backend: the user's Operations objects live in a CPython interpreter inside
 * this process, and each backend_ops call is one vectorcall of `ops(op, path, *args)` (so
 * an overridden Operations.__call__ sees every operation, as in fusepy).
 *
 * Built as a CPython extension module (no DT_NEEDED on libpython): the preload's loader
 * makes libpython's symbols global first, or the host executable already exports them.
 *
 * Errors: an OSError (FuseOSError included) gives its errno; anything else is EIO plus a
 * traceback in the log naming the operation and path; a result of the wrong type is EIO
 * plus a log line naming the method. Nothing the FS does can crash the host.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include "backend.h"
#include "../run_dir.h"
#include "../stats.h"
#include "fifo_dir.h"
#include <dirent.h>
#include <fcntl.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

static const struct core_api *core;
static int host_owns;

#define OPS(X) X(getattr) X(readlink) X(mknod) X(mkdir) X(unlink) X(rmdir) X(symlink) \
    X(rename) X(link) X(chmod) X(chown) X(truncate) X(open) X(create) X(read) X(write) \
    X(statfs) X(flush) X(release) X(fsync) X(opendir) X(readdir) X(releasedir) X(access) \
    X(utimens) X(setxattr) X(getxattr) X(listxattr) X(removexattr) X(destroy) X(ioctl)
#define ENUM(n) OP_##n,
enum { OPS(ENUM) NOPS };
#undef ENUM

struct mnt {
    PyObject *ops;
    int use_ns;
    int create_fi;          /* create() takes a third parameter: pass a FileInfo */
    /* When the class keeps Operations.__call__, calling the bound method directly is the
     * same thing minus one Python frame: methods[i] caches them (Py_None = use __call__). */
    int direct;
    PyObject *methods[NOPS];
    /* the class handles POSIX ACL xattrs itself (Operations.posix_acl, FUSE_POSIX_ACL) */
    int posix_acl;
    /* 1 << OP_x: the class keeps Operations' own x, which answers success and does nothing
     * (_runtime.NOT_CALLED_WHEN_DEFAULT): not called, as FUSE's no_open/no_opendir */
    unsigned defaults;
    /* not thread_safe: called one operation at a time (serial_enter) */
    int serial;
    /* its open only pins the file and its release only unpins it (Operations.open_only_pins):
     * a re-open may share a handle held past its close (OPEN_HOLD) */
    int open_pins;
};
#define KEPT_DEFAULT(mnt, op) ((mnts[mnt].defaults >> OP_##op) & 1u)

static struct mnt *mnts;
static int nmnts;

/* POSIX ACLs are refused, as kernel FUSE refuses them, from a file system that did not
 * opt in: it would store them as plain data and the mode would not follow, so cp -a and
 * sed -i (which set the final mode through the ACL) would leave wrong modes. Refused,
 * they fall back to chmod. */
static int acl_refused(int mnt, const char *name)
{
    return !mnts[mnt].posix_acl && strncmp(name, "system.posix_acl_", 17) == 0;
}

static PyObject *runtime;           /* ldpfuse_py._runtime */
static PyObject *passthrough_type, *fileinfo_type;

#define DECL(n) static PyObject *s_##n;
OPS(DECL)
#undef DECL
static PyObject **op_names[NOPS] = {
#define ADDR(n) &s_##n,
    OPS(ADDR)
#undef ADDR
};

static int op_index(PyObject *op)
{
    for (int i = 0; i < NOPS; i++)
        if (*op_names[i] == op)
            return i;
    return -1;
}

#define KEYS(X) X(st_mode) X(st_ino) X(st_dev) X(st_nlink) X(st_uid) X(st_gid) X(st_rdev) \
    X(st_size) X(st_blksize) X(st_blocks) X(st_atime) X(st_mtime) X(st_ctime) \
    X(f_bsize) X(f_frsize) X(f_blocks) X(f_bfree) X(f_bavail) X(f_files) X(f_ffree) \
    X(f_favail) X(f_fsid) X(f_flag) X(f_namemax) X(fd) X(fh) X(direct_io) X(keep_cache)
#define DECL(n) static PyObject *k_##n;
KEYS(DECL)
#undef DECL

/* ---- the GIL: one kept thread state per host thread (creating one per call costs 7 us) */
static __thread int tstate_ready;

/* A Python host may call us with an exception pending (os.listdir closes its DIR after
 * setting OSError): it is put aside for the FS call and restored after. */
struct pyctx {
    PyGILState_STATE gil;
    PyObject *type, *value, *tb;
    int serial;             /* this call holds (a level of) serial_lock */
};

/*
 * A class that is not thread_safe is called one operation at a time, as the shared mode's
 * single FS thread calls it and as fusepy's FUSE(nothreads=True) does: in the embedded mode
 * every thread of the program calls the process's own instance, and under the GIL alone
 * their calls interleave wherever a method lets go of it (a sleep, a socket read), so a
 * class that hands out handles with `fh = self.next; self.next += 1` could give two opens
 * one handle. serial_lock is held from the call's gil_enter to its gil_leave, taken with
 * the GIL let go while it waits (a thread in a method that waits for the GIL must be able
 * to get it back). A thread already inside a call (a signal handler's I/O) goes on in.
 * Not in the shared server (serving): its FS thread already serialises such a class.
 */
static pthread_mutex_t serial_lock = PTHREAD_MUTEX_INITIALIZER;
static __thread int serial_depth;
static int serving;

/* --stats in the shared server: each method of the class timed where the server calls it
 * (the vectorcall alone: no argument made, no result converted), in a histogram, so that
 * the class's own cost in the server is told apart from the machinery's and set against
 * the same calls in a plain loop (bench/per_file.py). The monotonic clock (vDSO, two reads
 * a call), not the thread's CPU clock: that is a system call, two a method, and it moved
 * the requests' own times that --stats reports (open p50 +3-4 us). On the FS thread a
 * call is preempted only on a loaded machine: the p50 stays the call's. */
static int method_clock;
static struct op_stats method_wall[NOPS];

void ldp_embedded_serving(void)
{
    serving = 1;
    const char *e = getenv("LDPFUSE_STATS");
    method_clock = e && strcmp(e, "1") == 0;
}

static uint64_t clock_ns(clockid_t id)
{
    struct timespec t;
    clock_gettime(id, &t);
    return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

/* A request of the shared server's FS thread may call several methods (an open that
 * brings its page cache: open, getattr, read): the GIL is taken at the first and kept
 * until the request's end (ldp_embedded_hold, ldp_embedded_let_go), one take and one
 * release per request instead of one per method (perf on bench/per_file.py: the GIL's
 * take, PyGILState_Ensure and PyEval_RestoreThread, was a fifth of the conversions
 * around the class's calls). Only that thread, which calls a class that is not
 * thread_safe, holds it so: a thread_safe class's threads let go of it between methods,
 * so that one request's system calls never hold up another's Python. */
static __thread int hold_depth;     /* in a request that keeps the GIL once taken */
static __thread int holding;        /* ... and has taken it: held_gil says how */
static __thread PyGILState_STATE held_gil;

/*
 * A thread that ends frees its malloc caches (glibc's __libc_thread_freeres) after its
 * pthread keys' destructors, with signals open, holding its arena's lock now and then;
 * and by then its Python thread state is no longer found (the keys' values are cleared). A
 * signal handler that ran there and called the class made a new thread state (calloc) and
 * waited forever for the lock its own thread held (tests/test_signals.py, thread_exits.c).
 * A thread that has called the class blocks every signal from its keys' destructors on, as
 * glibc does itself a moment later: a signal for the process goes to another thread. The
 * key is made before the interpreter's, so that its destructor comes first.
 */
static pthread_key_t ending_key;
static int ending_key_made;

static void thread_ending(void *unused)
{
    (void)unused;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);     /* glibc keeps SIGCANCEL and SIGSETXID open */
}

static void note_thread(void)
{
    if (ending_key_made)
        pthread_setspecific(ending_key, (void *)1);
}

static struct pyctx gil_enter(void)
{
    struct pyctx c;
    if (!tstate_ready) {
        if (PyGILState_GetThisThreadState() == NULL) {
            PyGILState_Ensure();        /* creates this thread's state, counter stays 1 */
            PyEval_SaveThread();
        }
        tstate_ready = 1;
        note_thread();
    }
    if (hold_depth && !holding) {
        held_gil = PyGILState_Ensure();     /* the request's: the calls' own nest in it */
        holding = 1;
    }
    c.gil = PyGILState_Ensure();
    c.serial = 0;
    PyErr_Fetch(&c.type, &c.value, &c.tb);
    return c;
}

/* This thread will make no more calls (a server thread that ends): its kept thread state
 * goes, or every ended thread would leave one behind (about 5 KB each). */
void ldp_thread_done(void)
{
    if (!tstate_ready)
        return;
    tstate_ready = 0;
#if PY_VERSION_HEX >= 0x030D0000
    int ending = Py_IsFinalizing();
#else
    int ending = _Py_IsFinalizing();
#endif
    PyThreadState *ts = Py_IsInitialized() && !ending ? PyGILState_GetThisThreadState() : NULL;
    if (ts == NULL)
        return;
    PyEval_RestoreThread(ts);
    PyGILState_Release(PyGILState_UNLOCKED);   /* its count reaches 0: cleared, deleted, GIL let go */
}

/* The FS thread's request begins: the GIL its methods take stays until its end. */
void ldp_embedded_hold(void)
{
    hold_depth++;
}

/* ... and ends: the GIL goes, if a method took it. */
void ldp_embedded_let_go(void)
{
    if (--hold_depth == 0 && holding) {
        holding = 0;
        PyGILState_Release(held_gil);
    }
}

static void gil_leave(struct pyctx *c)
{
    if (PyErr_Occurred())
        PyErr_Clear();
    PyErr_Restore(c->type, c->value, c->tb);
    if (c->serial && --serial_depth == 0)
        pthread_mutex_unlock(&serial_lock);
    PyGILState_Release(c->gil);
}

static int append_lock_fd = -1;
static pthread_mutex_t append_lock_init = PTHREAD_MUTEX_INITIALIZER;

/* The child of a fork made while another thread was inside a call: that thread is not
 * in the child, nor will it let go of the lock. The append lock's mutex is held only
 * around its file's open, never by the forking thread; its open file description is
 * shared with the parent, whose OFD lock the child would share (not wait for) and could
 * undo: the child opens one of its own at its first append. */
static void serial_after_fork(void)
{
    if (serial_depth == 0)
        pthread_mutex_init(&serial_lock, NULL);
    pthread_mutex_init(&append_lock_init, NULL);
    if (append_lock_fd >= 0) {
        close(append_lock_fd);
        append_lock_fd = -1;
    }
}

/* gil_enter for a call of mount mnt's class: one at a time if it is not thread_safe. */
static struct pyctx gil_enter_mnt(int mnt)
{
    struct pyctx c = gil_enter();
    if (serving || mnt < 0 || mnt >= nmnts || !mnts[mnt].serial)
        return c;
    c.serial = 1;
    if (serial_depth++ == 0 && pthread_mutex_trylock(&serial_lock) != 0) {
        Py_BEGIN_ALLOW_THREADS
        pthread_mutex_lock(&serial_lock);
        Py_END_ALLOW_THREADS
    }
    return c;
}
#define GIL_LEAVE(g) gil_leave(&(g))

/* ---- logging */
static void log_msg(int level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void log_msg(int level, const char *fmt, ...)
{
    char buf[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    core->log(level, buf);
}

static const char *opname(PyObject *op)
{
    return PyUnicode_AsUTF8(op);
}

/* The current exception -> -errno. */
static int fail(PyObject *op, const char *path)
{
    PyObject *type, *val, *tb;
    PyErr_Fetch(&type, &val, &tb);
    PyErr_NormalizeException(&type, &val, &tb);
    int e = EIO;
    if (val && PyErr_GivenExceptionMatches(type, PyExc_OSError)) {
        PyObject *en = PyObject_GetAttrString(val, "errno");
        if (en && PyLong_Check(en)) {
            long v = PyLong_AsLong(en);
            if (v > 0 && v < 4096)
                e = (int)v;
        }
        Py_XDECREF(en);
        PyErr_Clear();
        if (e == EIO && runtime) {
            PyObject *r = PyObject_CallMethod(runtime, "log_exception", "ssOOO", opname(op), path,
                                              type, val ? val : Py_None, tb ? tb : Py_None);
            Py_XDECREF(r);
            PyErr_Clear();
        }
    } else if (runtime) {
        PyObject *r = PyObject_CallMethod(runtime, "log_exception", "ssOOO", opname(op), path,
                                          type ? type : Py_None, val ? val : Py_None, tb ? tb : Py_None);
        Py_XDECREF(r);
        PyErr_Clear();
    }
    Py_XDECREF(type);
    Py_XDECREF(val);
    Py_XDECREF(tb);
    return -e;
}

static int wrong_type(PyObject *op, const char *path, PyObject *got, const char *want)
{
    log_msg(0, "%s(%s) returned %s, expected %s: EIO", opname(op), path, Py_TYPE(got)->tp_name, want);
    return -EIO;
}

/* ---- results: what a method's answer becomes (docs/operations.md, "Results")
 *
 * Every int a method returns goes through int_result: a negative one is -errno and must be
 * an errno (1..4095), a non-negative one must fit what the operation answers (a status,
 * a count, a handle). Anything else is EIO and one log line naming the method: the
 * program never sees an errno the kernel could not give, and a huge negative int is never
 * taken for success. */

/* r (an int) -> 0 with *v set (0 <= *v <= hi), or -errno. */
static int int_result(PyObject *op, const char *path, PyObject *r, unsigned long long hi,
                      unsigned long long *v)
{
    int overflow = 0;
    long long x = PyLong_AsLongLongAndOverflow(r, &overflow);
    if (overflow > 0 && hi > (unsigned long long)LLONG_MAX) {
        unsigned long long u = PyLong_AsUnsignedLongLong(r);
        if (!PyErr_Occurred()) {
            *v = u;
            return 0;
        }
        PyErr_Clear();
    }
    if (overflow || (x == -1 && PyErr_Occurred())) {
        PyErr_Clear();
        log_msg(0, "%s(%s) returned an int out of range: EIO", opname(op), path);
        return -EIO;
    }
    if (x < 0) {
        if (x >= -4095)
            return (int)x;
        log_msg(0, "%s(%s) returned %lld, not -errno (1..4095): EIO", opname(op), path, x);
        return -EIO;
    }
    if ((unsigned long long)x > hi) {
        log_msg(0, "%s(%s) returned %lld, more than %llu: EIO", opname(op), path, x, hi);
        return -EIO;
    }
    *v = (unsigned long long)x;
    return 0;
}

/* r (an int) is only -errno here: anything else is the wrong type. */
static int errno_result(PyObject *op, const char *path, PyObject *r, const char *want)
{
    unsigned long long v;
    int e = int_result(op, path, r, ULLONG_MAX, &v);
    return e < 0 ? e : wrong_type(op, path, r, want);
}

/* A name a listing may hold (readdir, listxattr): not empty, no NUL, and for readdir no
 * '/' (kernel FUSE answers EIO for such an entry). */
static int bad_name(PyObject *op, const char *path, const char *s, size_t len, int dir)
{
    const char *why = len == 0 ? "an empty name" : memchr(s, '\0', len) ? "a name with a NUL byte"
                    : dir && memchr(s, '/', len) ? "a name with '/'" : NULL;
    if (why == NULL)
        return 0;
    log_msg(0, "%s(%s) returned %s: EIO", opname(op), path, why);
    return -EIO;
}

/* A listing must be a list, tuple or other iterable of names; a str, bytes or dict is
 * iterable too, but never what a method meant. */
static int not_a_listing(PyObject *op, const char *path, PyObject *r)
{
    if (PyUnicode_Check(r) || PyBytes_Check(r) || PyByteArray_Check(r) || PyDict_Check(r))
        return wrong_type(op, path, r, "a list of names");
    return 0;
}

/* ops(op, path, *extra) -> new reference, or NULL with the exception set */
static PyObject *method_of(struct mnt *m, PyObject *op)
{
    int i = op_index(op);
    if (i < 0)
        return NULL;
    if (m->methods[i] == NULL) {
        PyObject *meth = PyObject_GetAttr(m->ops, op);
        if (meth == NULL || meth == Py_None || !PyCallable_Check(meth)) {
            PyErr_Clear();
            Py_XDECREF(meth);
            meth = Py_None;     /* let __call__ give fusepy's answer (EFAULT) */
            Py_INCREF(meth);
        }
        m->methods[i] = meth;
    }
    return m->methods[i] == Py_None ? NULL : m->methods[i];
}

static PyObject *call(int mnt, PyObject *op, const char *path, PyObject *const *extra, int nextra)
{
    PyObject *args[8];
    args[0] = op;
    args[1] = PyUnicode_DecodeFSDefault(path);
    if (args[1] == NULL)
        return NULL;
    for (int i = 0; i < nextra; i++)
        args[2 + i] = extra[i];
    struct mnt *m = &mnts[mnt];
    PyObject *meth = m->direct ? method_of(m, op) : NULL;
    uint64_t w0 = method_clock ? clock_ns(CLOCK_MONOTONIC) : 0;
    PyObject *r = meth ? PyObject_Vectorcall(meth, args + 1, (size_t)(1 + nextra) | PY_VECTORCALL_ARGUMENTS_OFFSET, NULL)
                       : PyObject_Vectorcall(m->ops, args, (size_t)(2 + nextra), NULL);
    if (method_clock) {
        int i = op_index(op);
        if (i >= 0)
            stats_add(&method_wall[i], clock_ns(CLOCK_MONOTONIC) - w0);
    }
    Py_DECREF(args[1]);
    return r;
}

/* --stats: the class's methods as the server called them: (name, count, ns total, p50,
 * p99) for each one called (method_clock). */
static PyObject *method_stats(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    PyObject *list = PyList_New(0);
    for (int i = 0; list && i < NOPS; i++) {
        const struct op_stats *s = &method_wall[i];
        if (__atomic_load_n(&s->count, __ATOMIC_RELAXED) == 0)
            continue;
        PyObject *row = Py_BuildValue("(OKKKK)", *op_names[i], (unsigned long long)s->count,
                                      (unsigned long long)s->total_ns, (unsigned long long)stats_quantile(s, 0.5),
                                      (unsigned long long)stats_quantile(s, 0.99));
        if (row == NULL || PyList_Append(list, row) < 0) {
            Py_XDECREF(row);
            Py_DECREF(list);
            return NULL;
        }
        Py_DECREF(row);
    }
    return list;
}

/* A status result: None or an int >= 0 is success, a negative int is -errno; anything else
 * is EIO. */
static int status_of(PyObject *op, const char *path, PyObject *r)
{
    if (r == NULL)
        return fail(op, path);
    int ret = 0;
    unsigned long long v;
    if (PyLong_Check(r))
        ret = int_result(op, path, r, INT_MAX, &v);
    else if (r != Py_None)
        ret = wrong_type(op, path, r, "None or an int status");
    Py_DECREF(r);
    return ret;
}

/* Call with up to 4 extra arguments, each a new reference (stolen here). */
static int call_status(int mnt, PyObject *op, const char *path, int n, ...)
{
    PyObject *extra[6];
    va_list ap;
    va_start(ap, n);
    int bad = 0;
    for (int i = 0; i < n; i++) {
        extra[i] = va_arg(ap, PyObject *);
        bad |= extra[i] == NULL;
    }
    va_end(ap);
    int ret;
    if (bad) {
        ret = fail(op, path);
    } else {
        ret = status_of(op, path, call(mnt, op, path, extra, n));
    }
    for (int i = 0; i < n; i++)
        Py_XDECREF(extra[i]);
    return ret;
}

/* ---- conversions */
static int get_ll(PyObject *d, PyObject *key, long long *out)
{
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (PyLong_Check(v)) {
        *out = PyLong_AsLongLong(v);
        if (*out == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            unsigned long long u = PyLong_AsUnsignedLongLongMask(v);
            *out = (long long)u;
        }
        return 1;
    }
    if (PyFloat_Check(v)) {
        *out = (long long)PyFloat_AS_DOUBLE(v);
        return 1;
    }
    return 0;
}

static int get_time(PyObject *d, PyObject *key, int use_ns, struct timespec *ts)
{
    PyObject *v = PyDict_GetItemWithError(d, key);
    if (v == NULL) {
        PyErr_Clear();
        return 0;
    }
    if (PyLong_Check(v)) {
        long long x = PyLong_AsLongLong(v);
        if (x == -1 && PyErr_Occurred()) {
            PyErr_Clear();
            return 0;
        }
        if (use_ns) {
            ts->tv_sec = x / 1000000000LL;
            ts->tv_nsec = x % 1000000000LL;
            if (ts->tv_nsec < 0) {
                ts->tv_nsec += 1000000000LL;
                ts->tv_sec--;
            }
        } else {
            ts->tv_sec = x;
            ts->tv_nsec = 0;
        }
        return 1;
    }
    if (PyFloat_Check(v)) {
        double f = PyFloat_AS_DOUBLE(v);
        double s = __builtin_floor(f);
        ts->tv_sec = (time_t)s;
        ts->tv_nsec = (long)((f - s) * 1e9);
        if (ts->tv_nsec >= 1000000000L)
            ts->tv_nsec = 999999999L;
        return 1;
    }
    return 0;
}

/* A getattr dict with keys that are not struct stat's (`size` for `st_size`), or values
 * that are not numbers: named once per process, the rest of the dict is used. */
static void log_odd_stat_keys(const char *path, PyObject *d)
{
    static int said;
    if (__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        return;
    PyObject *key, *value;
    Py_ssize_t pos = 0;
    char odd[512] = "";
    size_t used = 0;
    while (PyDict_Next(d, &pos, &key, &value)) {
        int known = 0;
#define IS(n) known |= key == k_##n || (PyUnicode_Check(key) && PyUnicode_Compare(key, k_##n) == 0);
        IS(st_mode) IS(st_ino) IS(st_dev) IS(st_nlink) IS(st_uid) IS(st_gid) IS(st_rdev)
        IS(st_size) IS(st_blksize) IS(st_blocks) IS(st_atime) IS(st_mtime) IS(st_ctime)
#undef IS
        PyErr_Clear();
        int number = PyLong_Check(value) || PyFloat_Check(value);
        if (known && number)
            continue;
        PyObject *r = PyObject_Repr(key);
        const char *k = r ? PyUnicode_AsUTF8(r) : NULL;
        if (k && used < sizeof odd)
            used += (size_t)snprintf(odd + used, sizeof odd - used, "%s%s%s", used ? ", " : "", k,
                                     known ? " (not a number)" : "");
        Py_XDECREF(r);
        PyErr_Clear();
    }
    if (used)
        log_msg(0, "getattr(%s) returned keys that are not struct stat's, ignored: %s "
                "(st_mode, st_size, st_mtime, ...; logged once)", path, odd);
}

static int dict_to_stat(int mnt, const char *path, PyObject *d, struct stat *st)
{
    long long v;
    int used = 0;
    memset(st, 0, sizeof *st);
    st->st_nlink = 1;
    st->st_blksize = 4096;
    if (get_ll(d, k_st_mode, &v)) {
        st->st_mode = (mode_t)v;
        used++;
    }
#define GET(field, type) if (get_ll(d, k_##field, &v)) { st->field = (type)v; used++; }
    GET(st_ino, ino_t) GET(st_dev, dev_t) GET(st_nlink, nlink_t) GET(st_uid, uid_t)
    GET(st_gid, gid_t) GET(st_rdev, dev_t) GET(st_size, off_t) GET(st_blksize, blksize_t)
#undef GET
    if (get_ll(d, k_st_blocks, &v)) {
        st->st_blocks = (blkcnt_t)v;
        used++;
    } else {
        st->st_blocks = (st->st_size + 511) / 512;
    }
    int ns = mnts[mnt].use_ns;
    used += get_time(d, k_st_atime, ns, &st->st_atim);
    used += get_time(d, k_st_mtime, ns, &st->st_mtim);
    used += get_time(d, k_st_ctime, ns, &st->st_ctim);
    if (__builtin_expect(used < PyDict_GET_SIZE(d), 0))
        log_odd_stat_keys(path, d);
    if (__builtin_expect((st->st_mode & S_IFMT) == 0, 0)) {
        /* kernel FUSE refuses an attribute without a file type with EIO as well */
        static int said;
        if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
            log_msg(0, "getattr(%s) returned no file type in st_mode (%s): EIO; every "
                    "file needs one, e.g. st_mode=stat.S_IFREG | 0o644 (logged once)", path,
                    PyDict_GetItemWithError(d, k_st_mode) ? "S_IFREG, S_IFDIR, ... missing"
                                                         : "no st_mode key");
        PyErr_Clear();
        return -EIO;
    }
    return 0;
}

static PyObject *fh_obj(uint64_t fh)
{
    return PyLong_FromUnsignedLongLong(fh);
}

/* ---- operations */
static int be_getattr(int mnt, const char *path, const uint64_t *fh, struct stat *st)
{
    if (!Py_IsInitialized())
        return -EIO;        /* a Python host that has finalised */
    struct pyctx g = gil_enter_mnt(mnt);
    PyObject *extra[1] = { NULL };
    int n = 0;
    if (fh)
        extra[n++] = fh_obj(*fh);
    PyObject *r = call(mnt, s_getattr, path, extra, n);
    if (n)
        Py_DECREF(extra[0]);
    int ret;
    if (r == NULL)
        ret = fail(s_getattr, path);
    else if (PyDict_Check(r))
        ret = dict_to_stat(mnt, path, r, st);
    else if (PyLong_Check(r))
        ret = errno_result(s_getattr, path, r, "a dict of st_* keys");
    else
        ret = wrong_type(s_getattr, path, r, "a dict of st_* keys");
    Py_XDECREF(r);
    GIL_LEAVE(g);
    return ret;
}

/* Copy a bytes-like result into buf; -EIO (logged) for anything else. */
/* A read() that returns more than asked (a procfs-style file, an FS that ignores offset):
 * the bytes past size are dropped, and said once per process. */
static void log_once_read_overrun(const char *path, size_t n, size_t size)
{
    static int said;
    if (__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED))
        return;
    log_msg(1 /* warning */, "Operations.read(%s) returned %zu bytes for a read of %zu: cut to size "
            "(said once)", path, n, size);
}

/* r (a method's bytes-like answer) copied into buf, at most size bytes; or, with to_fd >= 0,
 * written into to_fd at `at` (read_to_fd) when it holds all size bytes asked (fewer: none
 * written, the count returned). */
static ssize_t bytes_result_to(PyObject *op, const char *path, PyObject *r, char *buf, size_t size, int exact,
                               int to_fd, off_t at)
{
    if (r == NULL)
        return fail(op, path);
    if (PyLong_Check(r)) {
        ssize_t e = errno_result(op, path, r, "bytes");
        Py_DECREF(r);
        return e;
    }
    if (PyUnicode_Check(r) && op == s_readlink) {
        PyObject *b = PyUnicode_EncodeFSDefault(r);
        Py_DECREF(r);
        if (b == NULL)
            return fail(op, path);
        r = b;
    }
    Py_buffer view;
    if (PyUnicode_Check(r) || PyObject_GetBuffer(r, &view, PyBUF_SIMPLE) < 0) {
        PyErr_Clear();
        ssize_t e = wrong_type(op, path, r, "bytes");
        Py_DECREF(r);
        return e;
    }
    size_t n = (size_t)view.len;
    ssize_t ret;
    if (exact && size == 0) {
        ret = (ssize_t)n;               /* a size query (getxattr with size 0) */
    } else if (exact && n > size) {
        ret = -ERANGE;
    } else {
        if (n > size) {
            if (op == s_read)
                log_once_read_overrun(path, n, size);
            n = size;
        }
        if (to_fd < 0) {
            memcpy(buf, view.buf, n);
            ret = (ssize_t)n;
        } else if (n == size) {
            ret = pwrite(to_fd, view.buf, n, at);
            if (ret < 0)
                ret = -errno;
        } else {
            ret = (ssize_t)n;
        }
    }
    PyBuffer_Release(&view);
    Py_DECREF(r);
    return ret;
}

static ssize_t bytes_result(PyObject *op, const char *path, PyObject *r, char *buf, size_t size, int exact)
{
    return bytes_result_to(op, path, r, buf, size, exact, -1, 0);
}

static int be_readlink(int mnt, const char *path, char *buf, size_t size)
{
    if (!Py_IsInitialized())
        return -EIO;        /* a Python host that has finalised */
    struct pyctx g = gil_enter_mnt(mnt);
    PyObject *r = call(mnt, s_readlink, path, NULL, 0);
    ssize_t n = bytes_result(s_readlink, path, r, buf, size, 0);
    GIL_LEAVE(g);
    return (int)n;
}

static PyObject *str_obj(const char *s)
{
    return PyUnicode_DecodeFSDefault(s);
}

#define STATUS(mnt, op, path, n, ...) (!Py_IsInitialized() ? -EIO : ({ \
    struct pyctx g_ = gil_enter_mnt(mnt); \
    int r_ = call_status(mnt, op, path, n, ##__VA_ARGS__); \
    GIL_LEAVE(g_); \
    r_; }))

static int be_mknod(int mnt, const char *path, mode_t mode, dev_t dev)
{
    return STATUS(mnt, s_mknod, path, 2, PyLong_FromLong(mode), PyLong_FromUnsignedLongLong(dev));
}
static int be_mkdir(int mnt, const char *path, mode_t mode)
{
    return STATUS(mnt, s_mkdir, path, 1, PyLong_FromLong(mode));
}
static void fifo_renamed(int mnt, const char *from, const char *to);
static int be_unlink(int mnt, const char *path)
{
    int r = STATUS(mnt, s_unlink, path, 0);
    if (r == 0)
        fifo_renamed(mnt, NULL, path);
    return r;
}
static int be_rmdir(int mnt, const char *path)
{
    return STATUS(mnt, s_rmdir, path, 0);
}
static int be_symlink(int mnt, const char *linkpath, const char *target)
{
    /* fusepy order: symlink(target=the new name, source=the link's content) */
    return STATUS(mnt, s_symlink, linkpath, 1, str_obj(target));
}
static int be_rename(int mnt, const char *from, const char *to)
{
    int r = STATUS(mnt, s_rename, from, 1, str_obj(to));
    if (r == 0)
        fifo_renamed(mnt, from, to);
    return r;
}
static int be_link(int mnt, const char *newpath, const char *oldpath)
{
    /* fusepy order: link(target=the new name, source=the existing file) */
    return STATUS(mnt, s_link, newpath, 1, str_obj(oldpath));
}
static int be_chmod(int mnt, const char *path, mode_t mode)
{
    return STATUS(mnt, s_chmod, path, 1, PyLong_FromLong(mode));
}
static int be_chown(int mnt, const char *path, uid_t uid, gid_t gid)
{
    return STATUS(mnt, s_chown, path, 2, PyLong_FromLong(uid == (uid_t)-1 ? -1L : (long)uid),
                  PyLong_FromLong(gid == (gid_t)-1 ? -1L : (long)gid));
}
static int be_truncate(int mnt, const char *path, off_t len, const uint64_t *fh)
{
    if (fh)
        return STATUS(mnt, s_truncate, path, 2, PyLong_FromLongLong(len), fh_obj(*fh));
    return STATUS(mnt, s_truncate, path, 1, PyLong_FromLongLong(len));
}

/* The cache flags a FileInfo carries (FUSE's fuse_file_info.direct_io, keep_cache). */
static unsigned open_flags_of(PyObject *fi)
{
    unsigned f = 0;
    PyObject *d = PyObject_GetAttr(fi, k_direct_io), *k = PyObject_GetAttr(fi, k_keep_cache);
    if (d && PyObject_IsTrue(d) == 1)
        f |= OPEN_DIRECT_IO;
    if (k && PyObject_IsTrue(k) == 1)
        f |= OPEN_KEEP_CACHE;
    Py_XDECREF(d);
    Py_XDECREF(k);
    PyErr_Clear();
    return f;
}

static int open_result_of(PyObject *op, const char *path, PyObject *r, struct open_result *res)
{
    res->passthrough_fd = -1;
    res->fh = 0;
    res->open_flags = 0;
    if (r == NULL)
        return fail(op, path);
    int ret = 0;
    if (PyObject_TypeCheck(r, (PyTypeObject *)fileinfo_type)) {
        /* a FileInfo: its handle, and how its data is to be cached */
        PyObject *fh = PyObject_GetAttr(r, k_fh);
        unsigned long long v;
        if (fh && PyLong_Check(fh)) {
            ret = int_result(op, path, fh, ULLONG_MAX, &v);
            res->fh = v;
            res->open_flags = open_flags_of(r);
        } else {
            ret = wrong_type(op, path, r, "a FileInfo with an int fh");
        }
        Py_XDECREF(fh);
        PyErr_Clear();
    } else if (PyLong_Check(r)) {
        unsigned long long v;
        if ((ret = int_result(op, path, r, ULLONG_MAX, &v)) == 0)
            res->fh = v;
    } else if (PyObject_TypeCheck(r, (PyTypeObject *)passthrough_type)) {
        PyObject *fd = PyObject_GetAttr(r, k_fd), *fh = PyObject_GetAttr(r, k_fh);
        unsigned long long v = 0, h = 0;
        if (fd && PyLong_Check(fd)) {
            ret = int_result(op, path, fd, INT_MAX, &v);
            if (ret == 0 && fh && PyLong_Check(fh))
                ret = int_result(op, path, fh, ULLONG_MAX, &h);
            if (ret == 0) {
                res->passthrough_fd = (int)v;
                res->fh = h;
            }
        } else {
            ret = wrong_type(op, path, r, "Passthrough with an int fd");
        }
        Py_XDECREF(fd);
        Py_XDECREF(fh);
        PyErr_Clear();
    } else if (r == Py_None) {
        res->fh = 0;            /* fusepy treats a None handle as 0 */
    } else {
        ret = wrong_type(op, path, r, "an int file handle or ldpfuse_py.Passthrough");
    }
    Py_DECREF(r);
    return ret;
}

static int be_open(int mnt, const char *path, int flags, struct open_result *res)
{
    if (!Py_IsInitialized())
        return -EIO;        /* a Python host that has finalised */
    struct pyctx g = gil_enter_mnt(mnt);
    PyObject *extra[1] = { PyLong_FromLong(flags) };
    PyObject *r = call(mnt, s_open, path, extra, 1);
    Py_DECREF(extra[0]);
    int ret = open_result_of(s_open, path, r, res);
    if (ret == 0 && KEPT_DEFAULT(mnt, flush))
        res->open_flags |= OPEN_NOFLUSH;
    if (ret == 0 && KEPT_DEFAULT(mnt, open) && KEPT_DEFAULT(mnt, release))
        res->open_flags |= OPEN_LOCAL;
    else if (ret == 0 && mnts[mnt].open_pins && res->passthrough_fd < 0)
        res->open_flags |= OPEN_HOLD;
    GIL_LEAVE(g);
    return ret;
}

static int be_create(int mnt, const char *path, mode_t mode, int flags, struct open_result *res)
{
    if (!Py_IsInitialized())
        return -EIO;        /* a Python host that has finalised */
    struct pyctx g = gil_enter_mnt(mnt);
    PyObject *extra[2] = { PyLong_FromLong(mode), NULL };
    int n = 1;
    if (mnts[mnt].create_fi) {
        extra[1] = PyObject_CallFunction(fileinfo_type, "i", flags);
        n = 2;
    }
    PyObject *r = (extra[0] && (n == 1 || extra[1])) ? call(mnt, s_create, path, extra, n) : NULL;
    int ret = open_result_of(s_create, path, r, res);
    if (ret == 0 && n == 2 && res->passthrough_fd < 0 && res->fh == 0) {
        /* raw_fi style: the FS put its handle into fi.fh and returned 0 */
        PyObject *fh = PyObject_GetAttr(extra[1], k_fh);
        unsigned long long v;
        if (fh && PyLong_Check(fh) && (ret = int_result(s_create, path, fh, ULLONG_MAX, &v)) == 0)
            res->fh = v;
        Py_XDECREF(fh);
        PyErr_Clear();
    }
    if (ret == 0 && n == 2 && res->passthrough_fd < 0)
        res->open_flags |= open_flags_of(extra[1]);     /* create(path, mode, fi) set them */
    if (ret == 0 && KEPT_DEFAULT(mnt, flush))
        res->open_flags |= OPEN_NOFLUSH;
    Py_XDECREF(extra[0]);
    Py_XDECREF(extra[1]);
    GIL_LEAVE(g);
    return ret;
}

/* The class's read: its bytes into buf (fd -1), or written into fd at off */
static ssize_t read_call(int mnt, const char *path, char *buf, int fd, size_t size, off_t off, uint64_t fh)
{
    if (!Py_IsInitialized())
        return -EIO;        /* a Python host that has finalised */
    struct pyctx g = gil_enter_mnt(mnt);
    PyObject *extra[3] = { PyLong_FromSize_t(size), PyLong_FromLongLong(off), fh_obj(fh) };
    PyObject *r = call(mnt, s_read, path, extra, 3);
    for (int i = 0; i < 3; i++)
        Py_XDECREF(extra[i]);
    ssize_t n = bytes_result_to(s_read, path, r, buf, size, 0, fd, off);
    GIL_LEAVE(g);
    return n;
}

static ssize_t be_read(int mnt, const char *path, char *buf, size_t size, off_t off, uint64_t fh)
{
    return read_call(mnt, path, buf, -1, size, off, fh);
}

/* read into a page cache's memfd (backend.h, read_to_fd): the method's bytes are written
 * there as they are, not first copied into a buffer of the server's (bench/NOTES.md,
 * 2026-11-28: a small file's open that brings its data). */
static ssize_t be_read_to_fd(int mnt, const char *path, int fd, size_t size, off_t off, uint64_t fh)
{
    return read_call(mnt, path, NULL, fd, size, off, fh);
}

static ssize_t be_write(int mnt, const char *path, const char *buf, size_t size, off_t off, uint64_t fh)
{
    if (!Py_IsInitialized())
        return -EIO;        /* a Python host that has finalised */
    struct pyctx g = gil_enter_mnt(mnt);
    PyObject *extra[3] = { PyBytes_FromStringAndSize(buf, (Py_ssize_t)size), PyLong_FromLongLong(off),
                           fh_obj(fh) };
    PyObject *r = call(mnt, s_write, path, extra, 3);
    for (int i = 0; i < 3; i++)
        Py_XDECREF(extra[i]);
    ssize_t ret;
    if (r == NULL) {
        ret = fail(s_write, path);
    } else if (PyLong_Check(r)) {
        unsigned long long v;
        /* more than was given is a count nobody wrote: cut to size, as before */
        ret = int_result(s_write, path, r, ULLONG_MAX, &v);
        if (ret == 0)
            ret = v > size ? (ssize_t)size : (ssize_t)v;
        Py_DECREF(r);
    } else {
        ret = wrong_type(s_write, path, r, "an int (bytes written)");
        Py_DECREF(r);
    }
    GIL_LEAVE(g);
    return ret;
}

/* O_APPEND: the FS's size is the end. The VFS core holds the file's lock between this
 * process's threads; other processes running their own instance of the FS (a loopback
 * over one lower directory) are kept out by an OFD lock on one byte, chosen by the path,
 * of a lock file of this user in the command's private directory. */
static int append_lock(const char *path, int type)
{
    if (__atomic_load_n(&append_lock_fd, __ATOMIC_ACQUIRE) < 0) {
        pthread_mutex_lock(&append_lock_init);
        if (append_lock_fd < 0) {
            /* in the command's private directory (run_dir.h): a lock file of a fixed name
             * in /tmp could be another user's, who would hold our appends up */
            char name[PATH_MAX];
            int fd = -1;
            struct stat st;
            if (run_dir_get(name, sizeof name - 32) == 0) {
                snprintf(name + strlen(name), 32, "/append-%u", (unsigned)geteuid());
                fd = open(name, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
            }
            if (fd >= 0 && (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || st.st_uid != geteuid())) {
                close(fd);
                fd = -1;
            }
            int high = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 600) : -1;
            if (fd >= 0)
                close(fd);
            __atomic_store_n(&append_lock_fd, high, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&append_lock_init);
    }
    if (append_lock_fd < 0)
        return -1;
    uint64_t h = 1469598103934665603ULL;
    for (const char *s = path; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211ULL;
    struct flock fl = { .l_type = (short)type, .l_whence = SEEK_SET, .l_start = (off_t)(h % (1u << 30)), .l_len = 1 };
    while (fcntl(append_lock_fd, F_OFD_SETLKW, &fl) < 0)
        if (errno != EINTR)
            return -1;
    return 0;
}

static ssize_t be_append(int mnt, const char *path, const char *buf, size_t size, uint64_t fh, off_t *at)
{
    int locked = append_lock(path, F_WRLCK) == 0;
    struct stat st;
    ssize_t r = be_getattr(mnt, path, &fh, &st);
    if (r == 0) {
        *at = st.st_size;
        r = be_write(mnt, path, buf, size, st.st_size, fh);
    }
    if (locked)
        append_lock(path, F_UNLCK);
    return r;
}

static int be_statfs(int mnt, const char *path, struct statvfs *sv)
{
    if (!Py_IsInitialized())
        return -EIO;        /* a Python host that has finalised */
    struct pyctx g = gil_enter_mnt(mnt);
    PyObject *r = call(mnt, s_statfs, path, NULL, 0);
    int ret = 0;
    memset(sv, 0, sizeof *sv);
    if (r == NULL) {
        ret = fail(s_statfs, path);
    } else if (PyDict_Check(r)) {
        long long v;
        if (get_ll(r, k_f_bsize, &v)) sv->f_bsize = (unsigned long)v;
        if (get_ll(r, k_f_frsize, &v)) sv->f_frsize = (unsigned long)v;
        if (get_ll(r, k_f_blocks, &v)) sv->f_blocks = (fsblkcnt_t)v;
        if (get_ll(r, k_f_bfree, &v)) sv->f_bfree = (fsblkcnt_t)v;
        if (get_ll(r, k_f_bavail, &v)) sv->f_bavail = (fsblkcnt_t)v;
        if (get_ll(r, k_f_files, &v)) sv->f_files = (fsfilcnt_t)v;
        if (get_ll(r, k_f_ffree, &v)) sv->f_ffree = (fsfilcnt_t)v;
        if (get_ll(r, k_f_favail, &v)) sv->f_favail = (fsfilcnt_t)v;
        if (get_ll(r, k_f_fsid, &v)) sv->f_fsid = (unsigned long)v;
        if (get_ll(r, k_f_flag, &v)) sv->f_flag = (unsigned long)v;
        if (get_ll(r, k_f_namemax, &v)) sv->f_namemax = (unsigned long)v;
        else sv->f_namemax = 255;
        if (sv->f_frsize == 0)
            sv->f_frsize = sv->f_bsize;
    } else if (PyLong_Check(r)) {
        ret = errno_result(s_statfs, path, r, "a dict of f_* keys");
    } else {
        ret = wrong_type(s_statfs, path, r, "a dict of f_* keys");
    }
    Py_XDECREF(r);
    GIL_LEAVE(g);
    return ret;
}

static int be_flush(int mnt, const char *path, uint64_t fh)
{
    if (KEPT_DEFAULT(mnt, flush))
        return 0;
    return STATUS(mnt, s_flush, path, 1, fh_obj(fh));
}
static int be_release(int mnt, const char *path, int flags, uint64_t fh)
{
    (void)flags;
    if (KEPT_DEFAULT(mnt, release))
        return 0;
    return STATUS(mnt, s_release, path, 1, fh_obj(fh));
}
static int be_fsync(int mnt, const char *path, int datasync, uint64_t fh)
{
    if (KEPT_DEFAULT(mnt, fsync))
        return 0;
    return STATUS(mnt, s_fsync, path, 2, PyLong_FromLong(datasync), fh_obj(fh));
}

static int be_opendir(int mnt, const char *path, uint64_t *fh)
{
    if (KEPT_DEFAULT(mnt, opendir)) {
        *fh = 0;
        return 0;
    }
    if (!Py_IsInitialized())
        return -EIO;        /* a Python host that has finalised */
    struct pyctx g = gil_enter_mnt(mnt);
    PyObject *r = call(mnt, s_opendir, path, NULL, 0);
    int ret = 0;
    *fh = 0;
    if (r == NULL) {
        ret = fail(s_opendir, path);
    } else {
        if (PyLong_Check(r)) {
            unsigned long long v;
            if ((ret = int_result(s_opendir, path, r, ULLONG_MAX, &v)) == 0)
                *fh = v;
        } else if (r != Py_None) {
            ret = wrong_type(s_opendir, path, r, "an int handle");
        }
        Py_DECREF(r);
    }
    GIL_LEAVE(g);
    return ret;
}

/* readdir's attributes of an entry are what getattr would say (readdirplus) when they are
 * given in full: a file type, st_size and st_mtime (the d_type alone, {st_ino, st_mode}, or
 * mfusepy's mode, are not). */
static int full_attrs(PyObject *attrs, long long mode)
{
    if (attrs == NULL || !PyDict_Check(attrs) || (mode & S_IFMT) == 0)
        return 0;
    int r = PyDict_Contains(attrs, k_st_size) == 1 && PyDict_Contains(attrs, k_st_mtime) == 1;
    PyErr_Clear();
    return r;
}

static int entry_attrs(int mnt, const char *path, PyObject *attrs, struct dirlist *out)
{
    struct stat st;
    if (dict_to_stat(mnt, path, attrs, &st) < 0) {
        PyErr_Clear();
        return 0;       /* not kept: getattr is asked as before */
    }
    return dirlist_attr(out, &st) < 0 ? -ENOMEM : 0;
}

static int add_entry(int mnt, PyObject *op, const char *path, PyObject *item, struct dirlist *out)
{
    PyObject *name = item, *attrs = NULL;
    if (PyTuple_Check(item) || PyList_Check(item)) {
        Py_ssize_t n = PySequence_Size(item);
        if (n < 1)
            return wrong_type(op, path, item, "names or (name, attrs, offset) tuples");
        name = PySequence_GetItem(item, 0);
        if (n >= 2)
            attrs = PySequence_GetItem(item, 1);
    } else {
        Py_INCREF(name);
    }
    int ret = 0;
    PyObject *enc = NULL;
    const char *s = NULL;
    Py_ssize_t len = 0;
    if (name && PyUnicode_Check(name)) {
        enc = PyUnicode_EncodeFSDefault(name);
        if (enc)
            PyBytes_AsStringAndSize(enc, (char **)&s, &len);
    } else if (name && PyBytes_Check(name)) {
        PyBytes_AsStringAndSize(name, (char **)&s, &len);
    }
    if (s == NULL) {
        PyErr_Clear();
        ret = wrong_type(op, path, name ? name : item, "str entry names");
    } else if ((ret = bad_name(op, path, s, (size_t)len, 1)) < 0) {
        ;
    } else {
        long long ino = 0, mode = 0;
        if (attrs && PyDict_Check(attrs)) {
            get_ll(attrs, k_st_ino, &ino);
            get_ll(attrs, k_st_mode, &mode);
        }
        if (dirlist_add(out, s, (size_t)len, (uint64_t)ino, mode ? IFTODT(mode) : DT_UNKNOWN) < 0)
            ret = -ENOMEM;
        else if (ret == 0 && full_attrs(attrs, mode))
            ret = entry_attrs(mnt, path, attrs, out);
    }
    Py_XDECREF(enc);
    Py_XDECREF(name);
    Py_XDECREF(attrs);
    return ret;
}

static int be_readdir(int mnt, const char *path, uint64_t fh, struct dirlist *out)
{
    if (!Py_IsInitialized())
        return -EIO;        /* a Python host that has finalised */
    struct pyctx g = gil_enter_mnt(mnt);
    PyObject *extra[1] = { fh_obj(fh) };
    PyObject *r = call(mnt, s_readdir, path, extra, 1);
    Py_DECREF(extra[0]);
    int ret = 0;
    if (r == NULL) {
        ret = fail(s_readdir, path);
    } else if (PyLong_Check(r)) {
        ret = errno_result(s_readdir, path, r, "a list of names");
        Py_DECREF(r);
    } else if ((ret = not_a_listing(s_readdir, path, r)) < 0) {
        Py_DECREF(r);
    } else if (PyList_Check(r) || PyTuple_Check(r)) {
        PyObject *fast = PySequence_Fast(r, "");
        Py_ssize_t n = PySequence_Fast_GET_SIZE(fast);
        PyObject **items = PySequence_Fast_ITEMS(fast);
        for (Py_ssize_t i = 0; i < n && ret == 0; i++)
            ret = add_entry(mnt, s_readdir, path, items[i], out);
        Py_DECREF(fast);
        Py_DECREF(r);
    } else {
        PyObject *it = PyObject_GetIter(r);
        Py_DECREF(r);
        if (it == NULL) {
            PyErr_Clear();
            log_msg(0, "readdir(%s) returned a non-iterable: EIO", path);
            ret = -EIO;
        } else {
            PyObject *item;
            while (ret == 0 && (item = PyIter_Next(it)) != NULL) {
                ret = add_entry(mnt, s_readdir, path, item, out);
                Py_DECREF(item);
            }
            if (PyErr_Occurred())
                ret = fail(s_readdir, path);
            Py_DECREF(it);
        }
    }
    GIL_LEAVE(g);
    return ret;
}

static int be_releasedir(int mnt, const char *path, uint64_t fh)
{
    if (KEPT_DEFAULT(mnt, releasedir))
        return 0;
    return STATUS(mnt, s_releasedir, path, 1, fh_obj(fh));
}
static int be_access(int mnt, const char *path, int mode)
{
    if (KEPT_DEFAULT(mnt, access))
        return 0;
    return STATUS(mnt, s_access, path, 1, PyLong_FromLong(mode));
}

static PyObject *time_obj(int mnt, const struct timespec *ts)
{
    if (mnts[mnt].use_ns)
        return PyLong_FromLongLong((long long)ts->tv_sec * 1000000000LL + ts->tv_nsec);
    return PyFloat_FromDouble((double)ts->tv_sec + ts->tv_nsec / 1e9);
}

static int be_utimens(int mnt, const char *path, const struct timespec ts[2])
{
    if (!Py_IsInitialized())
        return -EIO;        /* a Python host that has finalised */
    struct pyctx g = gil_enter_mnt(mnt);
    /* NULL is "now" (touch, utimensat with UTIME_NOW twice): times=None, so that the FS
     * applies the rule for it (the owner or a writer may), not that for explicit times */
    PyObject *t = ts == NULL ? (Py_INCREF(Py_None), Py_None)
                             : Py_BuildValue("(NN)", time_obj(mnt, &ts[0]), time_obj(mnt, &ts[1]));
    int r = call_status(mnt, s_utimens, path, 1, t);
    GIL_LEAVE(g);
    return r;
}

static int be_setxattr(int mnt, const char *path, const char *name, const void *value, size_t size, int flags)
{
    if (acl_refused(mnt, name))
        return -EOPNOTSUPP;
    return STATUS(mnt, s_setxattr, path, 3, str_obj(name),
                  PyBytes_FromStringAndSize(value, (Py_ssize_t)size), PyLong_FromLong(flags));
}

static ssize_t be_getxattr(int mnt, const char *path, const char *name, void *value, size_t size)
{
    if (acl_refused(mnt, name))
        return -EOPNOTSUPP;
    if (!Py_IsInitialized())
        return -EIO;        /* a Python host that has finalised */
    struct pyctx g = gil_enter_mnt(mnt);
    PyObject *extra[1] = { str_obj(name) };
    PyObject *r = extra[0] ? call(mnt, s_getxattr, path, extra, 1) : NULL;
    Py_XDECREF(extra[0]);
    ssize_t n = bytes_result(s_getxattr, path, r, value, size, 1);
    GIL_LEAVE(g);
    return n;
}

static ssize_t be_listxattr(int mnt, const char *path, char *list, size_t size)
{
    if (!Py_IsInitialized())
        return -EIO;        /* a Python host that has finalised */
    struct pyctx g = gil_enter_mnt(mnt);
    PyObject *r = call(mnt, s_listxattr, path, NULL, 0);
    ssize_t ret = 0;
    if (r == NULL) {
        ret = fail(s_listxattr, path);
    } else if (PyLong_Check(r)) {
        ret = errno_result(s_listxattr, path, r, "a list of names");
        Py_DECREF(r);
    } else if ((ret = not_a_listing(s_listxattr, path, r)) < 0) {
        Py_DECREF(r);
    } else {
        PyObject *it = PyObject_GetIter(r);
        if (it == NULL) {
            PyErr_Clear();
            ret = wrong_type(s_listxattr, path, r, "a list of names");
        } else {
            size_t total = 0;
            PyObject *item;
            while (ret == 0 && (item = PyIter_Next(it)) != NULL) {
                PyObject *enc = PyUnicode_Check(item) ? PyUnicode_EncodeFSDefault(item)
                              : PyBytes_Check(item) ? (Py_INCREF(item), item) : NULL;
                char *s;
                Py_ssize_t len;
                if (enc && PyBytes_AsStringAndSize(enc, &s, &len) == 0) {
                    if ((ret = bad_name(s_listxattr, path, s, (size_t)len, 0)) == 0) {
                        if (size > 0 && total + (size_t)len + 1 <= size)
                            memcpy(list + total, s, (size_t)len + 1);
                        total += (size_t)len + 1;
                    }
                } else {
                    PyErr_Clear();
                    ret = wrong_type(s_listxattr, path, item, "str attribute names");
                }
                Py_XDECREF(enc);
                Py_DECREF(item);
            }
            if (ret == 0 && PyErr_Occurred())
                ret = fail(s_listxattr, path);
            PyErr_Clear();
            Py_DECREF(it);
            if (ret == 0)
                ret = (size > 0 && total > size) ? -ERANGE : (ssize_t)total;
        }
        Py_DECREF(r);
    }
    GIL_LEAVE(g);
    return ret;
}

static int be_removexattr(int mnt, const char *path, const char *name)
{
    if (acl_refused(mnt, name))
        return -EOPNOTSUPP;
    return STATUS(mnt, s_removexattr, path, 1, str_obj(name));
}

/* fusepy's ioctl(path, cmd, arg, fh, flags, data): arg and data are addresses (ints, as
 * ctypes hands c_void_p to fusepy's callbacks); the FS runs in the caller's process, so
 * data is the caller's own buffer, read and written in place. */
static int be_ioctl(int mnt, const char *path, unsigned int cmd, void *arg, uint64_t fh,
                    unsigned int flags, void *data)
{
    return STATUS(mnt, s_ioctl, path, 5, PyLong_FromUnsignedLong(cmd), PyLong_FromVoidPtr(arg),
                  fh_obj(fh), PyLong_FromUnsignedLong(flags),
                  data ? PyLong_FromVoidPtr(data) : (Py_INCREF(Py_None), Py_None));
}

/* Does the class have a method name (*s: its interned name, made at the first ask)? For
 * the optional methods a class without them answers ENOSYS to, with no call (the GIL
 * held). */
static int has_method(int mnt, PyObject **s, const char *name)
{
    if (*s == NULL)
        *s = PyUnicode_InternFromString(name);
    PyObject *m = *s ? PyObject_GetAttr(mnts[mnt].ops, *s) : NULL;
    int yes = m != NULL && m != Py_None && PyCallable_Check(m);
    if (m == NULL)
        PyErr_Clear();
    Py_XDECREF(m);
    return yes;
}

/* fusepy's lock(path, fh, cmd, lock): lock is the address of a struct flock (fusepy's
 * c_voidp), the class reads it and, for F_GETLK, writes it with ctypes. A class whose lock
 * is None (Operations') takes no locks: -ENOSYS without a call. */
static PyObject *s_lock, *s_flock;
static int be_lock(int mnt, const char *path, uint64_t fh, int cmd, struct flock *lk)
{
    if (!Py_IsInitialized())
        return -EIO;
    struct pyctx g = gil_enter_mnt(mnt);
    int r = !has_method(mnt, &s_lock, "lock") ? -ENOSYS
          : call_status(mnt, s_lock, path, 3, fh_obj(fh), PyLong_FromLong(cmd), PyLong_FromVoidPtr(lk));
    GIL_LEAVE(g);
    return r;
}

/* mfusepy's flock(path, fh, op); Operations' answers ENOSYS */
static int be_flock(int mnt, const char *path, uint64_t fh, int op)
{
    if (!Py_IsInitialized())
        return -EIO;
    struct pyctx g = gil_enter_mnt(mnt);
    int r = !has_method(mnt, &s_flock, "flock") ? -ENOSYS
          : call_status(mnt, s_flock, path, 2, fh_obj(fh), PyLong_FromLong(op));
    GIL_LEAVE(g);
    return r;
}

static void be_destroy(void)
{
    if (!Py_IsInitialized() || host_owns)
        return;                 /* a Python host gets destroy() from its atexit (boot) */
    struct pyctx g = gil_enter();
    for (int i = 0; i < nmnts; i++) {
        PyObject *r = call(i, s_destroy, "/", NULL, 0);
        if (r == NULL)
            fail(s_destroy, "/");
        Py_XDECREF(r);
    }
    GIL_LEAVE(g);
}

/* ---- FIFOs, sockets and devices: opened as the kernel opens those of a FUSE mount, never
 * by the FS's open (a Python method would block with signals held back, and os.open
 * retries after EINTR), as the shared backend does. A FIFO is the real one in the
 * command's FIFO directory (fifo_dir.h), with the FS's mode (and owner, where this
 * process may give it), that this process opens itself, outside the FS: a signal ends
 * the wait with EINTR as natively. Set in the table only where the launcher made the
 * directory. */
static const char *fifo_dir;

static int fifo_real(int mnt, const char *path, const struct stat *st, char *real, size_t size)
{
    if (fifo_dir_name(real, size, fifo_dir, mnt, path) < 0)
        return -ENAMETOOLONG;
    return fifo_dir_settle(real, st);
}

static int be_open_special(int mnt, const char *path, const struct stat *st, int flags)
{
    char real[PATH_MAX];
    if (S_ISFIFO(st->st_mode)) {
        int r = fifo_real(mnt, path, st, real, sizeof real);
        if (r < 0)
            return r;
    } else if (S_ISCHR(st->st_mode) || S_ISBLK(st->st_mode)) {
        snprintf(real, sizeof real, "/dev/%s/%u:%u", S_ISCHR(st->st_mode) ? "char" : "block",
                 major(st->st_rdev), minor(st->st_rdev));
    } else {
        return -ENXIO;
    }
    if (S_ISFIFO(st->st_mode)) {
        flags |= O_NOFOLLOW;
        return fifo_dir_checked(core->open_passthrough ? core->open_passthrough(real, flags, 0) : open(real, flags, 0));
    }
    int fd = core->open_passthrough ? core->open_passthrough(real, flags, 0) : open(real, flags, 0);
    if (fd < 0)
        return errno == ENOENT ? -ENXIO : -errno;
    return fd;
}

/* unlink (from NULL) or rename: the pipe follows its name, as an inode would */
static void fifo_renamed(int mnt, const char *from, const char *to)
{
    char real_from[PATH_MAX], real_to[PATH_MAX];
    if (fifo_dir == NULL || fifo_dir_name(real_to, sizeof real_to, fifo_dir, mnt, to) < 0)
        return;
    int saved = errno;
    if (from == NULL || fifo_dir_name(real_from, sizeof real_from, fifo_dir, mnt, from) < 0 ||
        rename(real_from, real_to) < 0)
        unlink(real_to);
    errno = saved;
}

/* ---- after-filters (vfs/backing.c, backend.h after): ldpfuse_py.after.told(ops, op,
 * path, result, path2, attrs) tells the class; for a getattr it answers the adjusted
 * (st_mode, st_uid, st_gid, atime_ns, mtime_ns, ctime_ns), or None for no change. */
static PyObject *told_fn;

static int be_after(int mnt, unsigned op, const char *path, const char *path2, int result, struct stat *st)
{
    if (!Py_IsInitialized())
        return st ? -EIO : 0;
    struct pyctx g = gil_enter_mnt(mnt);
    if (told_fn == NULL) {
        PyObject *m = PyImport_ImportModule("ldpfuse_py.after");
        told_fn = m ? PyObject_GetAttrString(m, "told") : NULL;
        Py_XDECREF(m);
    }
    PyObject *r = NULL;
    if (told_fn) {
        PyObject *attrs = Py_None;
        Py_INCREF(attrs);
        if (st) {
            Py_DECREF(attrs);
            attrs = Py_BuildValue("(KKKKKKKLLLLLL)", (unsigned long long)st->st_mode, (unsigned long long)st->st_ino,
                                  (unsigned long long)st->st_dev, (unsigned long long)st->st_nlink,
                                  (unsigned long long)st->st_uid, (unsigned long long)st->st_gid,
                                  (unsigned long long)st->st_rdev, (long long)st->st_size,
                                  (long long)st->st_blksize, (long long)st->st_blocks,
                                  (long long)st->st_atim.tv_sec * 1000000000LL + st->st_atim.tv_nsec,
                                  (long long)st->st_mtim.tv_sec * 1000000000LL + st->st_mtim.tv_nsec,
                                  (long long)st->st_ctim.tv_sec * 1000000000LL + st->st_ctim.tv_nsec);
        }
        PyObject *p = PyUnicode_DecodeFSDefault(path);
        PyObject *p2 = path2 ? PyUnicode_DecodeFSDefault(path2) : (Py_INCREF(Py_None), Py_None);
        if (attrs && p && p2)
            r = PyObject_CallFunction(told_fn, "OIOiOO", mnts[mnt].ops, __builtin_ctz(op), p, result, p2, attrs);
        Py_XDECREF(attrs);
        Py_XDECREF(p);
        Py_XDECREF(p2);
    }
    int ret = 0;
    if (r == NULL) {
        ret = fail(s_getattr, path);        /* told() logs a change's exception itself */
        if (!st)
            ret = 0;
    } else if (st && r != Py_None) {
        long long v[6];
        if (!PyTuple_Check(r) || PyTuple_GET_SIZE(r) != 6) {
            ret = wrong_type(s_getattr, path, r, "after-filter attributes");
        } else {
            for (int i = 0; i < 6; i++)
                v[i] = PyLong_AsLongLong(PyTuple_GET_ITEM(r, i));
            if (PyErr_Occurred()) {
                ret = fail(s_getattr, path);
            } else {
                st->st_mode = (mode_t)v[0];
                st->st_uid = (uid_t)v[1];
                st->st_gid = (gid_t)v[2];
                struct timespec *ts[3] = { &st->st_atim, &st->st_mtim, &st->st_ctim };
                for (int i = 0; i < 3; i++) {
                    long long sec = v[3 + i] / 1000000000LL, ns = v[3 + i] % 1000000000LL;
                    if (ns < 0) {
                        ns += 1000000000LL;
                        sec--;
                    }
                    ts[i]->tv_sec = (time_t)sec;
                    ts[i]->tv_nsec = (long)ns;
                }
            }
        }
    }
    Py_XDECREF(r);
    GIL_LEAVE(g);
    return ret;
}

static struct backend_ops ops = {
    .abi = LDP_BACKEND_ABI,
    .getattr = be_getattr, .readlink = be_readlink, .mknod = be_mknod, .mkdir = be_mkdir,
    .unlink = be_unlink, .rmdir = be_rmdir, .symlink = be_symlink, .rename = be_rename,
    .link = be_link, .chmod = be_chmod, .chown = be_chown, .truncate = be_truncate,
    .open = be_open, .create = be_create, .read = be_read, .write = be_write,
    .statfs = be_statfs, .flush = be_flush, .release = be_release, .fsync = be_fsync,
    .opendir = be_opendir, .readdir = be_readdir, .releasedir = be_releasedir,
    .access = be_access, .utimens = be_utimens, .setxattr = be_setxattr,
    .getxattr = be_getxattr, .listxattr = be_listxattr, .removexattr = be_removexattr,
    .destroy = be_destroy, .append = be_append, .ioctl = be_ioctl, .lock = be_lock, .flock = be_flock,
    .after = be_after, .read_to_fd = be_read_to_fd,
};

/* ---- start-up */
static int start_interpreter(char *err, size_t errsize)
{
    PyStatus st;
    PyPreConfig pre;
    PyPreConfig_InitIsolatedConfig(&pre);
    pre.utf8_mode = 1;          /* file names are bytes; surrogateescape round-trips them */
    st = Py_PreInitialize(&pre);
    if (PyStatus_Exception(st)) {
        snprintf(err, errsize, "Python pre-initialisation failed: %s", st.err_msg ? st.err_msg : "?");
        return -1;
    }
    PyConfig cfg;
    PyConfig_InitIsolatedConfig(&cfg);
    cfg.install_signal_handlers = 0;    /* the host's SIGINT/SIGPIPE dispositions stay */
    cfg.site_import = 0;                /* 50-100 ms; sys.path comes from the launcher */
    cfg.write_bytecode = 0;
    cfg.parse_argv = 0;
    cfg.pathconfig_warnings = 0;
    const char *exe = getenv("LDPFUSE_PYTHON_EXECUTABLE");
    const char *home = getenv("LDPFUSE_PYTHON_HOME");
    const char *path = getenv("LDPFUSE_PYTHON_PATH");
    if (exe) {
        PyConfig_SetBytesString(&cfg, &cfg.program_name, exe);
        PyConfig_SetBytesString(&cfg, &cfg.executable, exe);
    }
    if (home)
        PyConfig_SetBytesString(&cfg, &cfg.home, home);
    if (path) {
        cfg.module_search_paths_set = 1;
        const char *p = path;
        while (*p) {
            const char *e = strchr(p, '\n');
            size_t len = e ? (size_t)(e - p) : strlen(p);
            if (len > 0) {
                char *one = strndup(p, len);
                wchar_t *w = Py_DecodeLocale(one, NULL);
                if (w) {
                    PyWideStringList_Append(&cfg.module_search_paths, w);
                    PyMem_RawFree(w);
                }
                free(one);
            }
            if (!e)
                break;
            p = e + 1;
        }
    }
    st = Py_InitializeFromConfig(&cfg);
    PyConfig_Clear(&cfg);
    if (PyStatus_Exception(st)) {
        snprintf(err, errsize, "Python initialisation failed: %s", st.err_msg ? st.err_msg : "?");
        return -1;
    }
    PyEval_SaveThread();        /* the GIL is taken per call; this thread keeps its state */
    tstate_ready = 1;
    return 0;
}

/* A fork while another thread runs Python would leave the child's GIL and import lock
 * held forever: take them around fork (only when the interpreter is ours; a Python host's
 * os.fork does this itself). */
static struct pyctx fork_gil;
static void fork_prepare(void)
{
    fork_gil = gil_enter();
    PyOS_BeforeFork();
}
static void fork_parent(void)
{
    PyOS_AfterFork_Parent();
    gil_leave(&fork_gil);
}
static void fork_child(void)
{
    PyOS_AfterFork_Child();
    gil_leave(&fork_gil);
}

static int boot(char *err, size_t errsize)
{
#define INTERN(n) s_##n = PyUnicode_InternFromString(#n);
    OPS(INTERN)
#undef INTERN
#define INTERN(n) k_##n = PyUnicode_InternFromString(#n);
    KEYS(INTERN)
#undef INTERN
    runtime = PyImport_ImportModule("ldpfuse_py._runtime");
    if (runtime == NULL) {
        /* a Python host whose sys.path lacks the package: borrow the installing one's */
        PyErr_Clear();
        const char *parent = getenv("LDPFUSE_PACKAGE_PARENT");
        PyObject *sys_path = PySys_GetObject("path");
        PyObject *p = parent ? PyUnicode_DecodeFSDefault(parent) : NULL;
        if (sys_path && p && PyList_Insert(sys_path, 0, p) == 0) {
            runtime = PyImport_ImportModule("ldpfuse_py._runtime");
            PySequence_DelItem(sys_path, 0);
        }
        Py_XDECREF(p);
    }
    if (runtime == NULL) {
        PyErr_Print();
        snprintf(err, errsize, "cannot import ldpfuse_py._runtime");
        return 0;
    }
    passthrough_type = PyObject_GetAttrString(runtime, "Passthrough");
    fileinfo_type = PyObject_GetAttrString(runtime, "FileInfo");
    PyObject *r = PyObject_CallMethod(runtime, "boot", "i", host_owns);
    if (r == NULL || !PyList_Check(r)) {
        /* boot() logs its own one-line reason */
        PyObject *type, *val, *tb;
        PyErr_Fetch(&type, &val, &tb);
        PyObject *s = val ? PyObject_Str(val) : NULL;
        snprintf(err, errsize, "%s", s && PyUnicode_Check(s) ? PyUnicode_AsUTF8(s) : "boot failed");
        Py_XDECREF(s);
        Py_XDECREF(type);
        Py_XDECREF(val);
        Py_XDECREF(tb);
        PyErr_Clear();
        Py_XDECREF(r);
        return 0;
    }
    nmnts = (int)PyList_GET_SIZE(r);
    mnts = calloc((size_t)nmnts + 1, sizeof *mnts);
    for (int i = 0; i < nmnts; i++) {
        /* (ops, use_ns, create_fi, direct, posix_acl, defaults, thread_safe, open_only_pins) */
        PyObject *t = PyList_GET_ITEM(r, i);
        mnts[i].ops = PyTuple_GetItem(t, 0);
        Py_XINCREF(mnts[i].ops);
        mnts[i].use_ns = PyObject_IsTrue(PyTuple_GetItem(t, 1));
        mnts[i].create_fi = PyObject_IsTrue(PyTuple_GetItem(t, 2));
        mnts[i].direct = PyTuple_Size(t) > 3 && PyObject_IsTrue(PyTuple_GetItem(t, 3));
        mnts[i].posix_acl = PyTuple_Size(t) > 4 && PyObject_IsTrue(PyTuple_GetItem(t, 4));
        mnts[i].serial = PyTuple_Size(t) > 6 && !PyObject_IsTrue(PyTuple_GetItem(t, 6));
        mnts[i].open_pins = PyTuple_Size(t) > 7 && PyObject_IsTrue(PyTuple_GetItem(t, 7));
        PyObject *defaults = PyTuple_Size(t) > 5 ? PyTuple_GetItem(t, 5) : NULL;
        for (Py_ssize_t k = 0; defaults && PyTuple_Check(defaults) && k < PyTuple_GET_SIZE(defaults); k++)
            for (int o = 0; o < NOPS; o++)
                if (*op_names[o] && PyUnicode_Compare(*op_names[o], PyTuple_GET_ITEM(defaults, k)) == 0)
                    mnts[i].defaults |= 1u << o;
        PyErr_Clear();
        PyErr_Clear();
    }
    Py_DECREF(r);
    return 1;
}

/* Who calls (killpriv.c): the client a server thread answers, or this process. */
void srv_caller(uid_t *uid, gid_t *gid);
void killpriv_wrap(struct backend_ops *ops, void (*who)(uid_t *uid, gid_t *gid));

static void caller(uid_t *uid, gid_t *gid)
{
    if (serving) {
        srv_caller(uid, gid);
    } else {
        *uid = geteuid();
        *gid = getegid();
    }
}

__attribute__((visibility("default")))
struct backend_ops *ldpfuse_backend_embedded_init(const struct core_api *c, int host_owns_python,
                                                  char *err, size_t errsize)
{
    core = c;
    host_owns = host_owns_python;
    struct stat ds;
    fifo_dir = fifo_dir_of_command();
    if (fifo_dir && stat(fifo_dir, &ds) == 0 && S_ISDIR(ds.st_mode))
        ops.open_special = be_open_special;
    ending_key_made = pthread_key_create(&ending_key, thread_ending) == 0;
    if (!host_owns && start_interpreter(err, errsize) < 0)
        return NULL;
    note_thread();      /* start_interpreter's thread keeps the state it made */
    struct pyctx g = gil_enter();
    int ok = boot(err, errsize);
    GIL_LEAVE(g);
    if (!ok)
        return NULL;
    if (!host_owns)
        pthread_atfork(fork_prepare, fork_parent, fork_child);
    pthread_atfork(NULL, NULL, serial_after_fork);
    killpriv_wrap(&ops, caller);
    return &ops;
}

/* Passthrough.open(): open a lower file where the program's next fd would be, since it
 * becomes the program's fd (the FS's own fds are otherwise moved up, out of the way). */
static PyObject *passthrough_open(PyObject *self, PyObject *args)
{
    (void)self;
    PyObject *path;
    int flags, mode = 0777;
    if (!PyArg_ParseTuple(args, "O&i|i", PyUnicode_FSConverter, &path, &flags, &mode))
        return NULL;
    int fd;
    Py_BEGIN_ALLOW_THREADS
    fd = core && core->open_passthrough ? core->open_passthrough(PyBytes_AS_STRING(path), flags | O_CLOEXEC, (mode_t)mode)
                                        : open(PyBytes_AS_STRING(path), flags | O_CLOEXEC, (mode_t)mode);
    Py_END_ALLOW_THREADS
    if (fd < 0) {
        PyErr_SetFromErrnoWithFilenameObject(PyExc_OSError, path);
        Py_DECREF(path);
        return NULL;
    }
    Py_DECREF(path);
    return PyLong_FromLong(fd);
}

/* guard_this_thread(): the calling thread is the file system's own for good (a fusepy
 * script's thread, which waits in FUSE() until the command ends): its I/O goes straight to
 * libc, as the FS code's does while the library calls it, and never back into the mount.
 * A no-op where the preload library is not loaded (the shared mode's launcher). */
static PyObject *guard_this_thread(PyObject *self, PyObject *args)
{
    (void)self;
    (void)args;
    if (core && core->guard_thread)
        core->guard_thread();
    Py_RETURN_NONE;
}

/* Importable as ldpfuse_py._embedded: the shared mode's server runs from it (native/server/). */
PyObject *ldp_serve_init(PyObject *self, PyObject *args);
PyObject *ldp_serve_start(PyObject *self, PyObject *args);
PyObject *ldp_context(PyObject *self, PyObject *args);
PyObject *ldp_serve_loop(PyObject *self, PyObject *args);
PyObject *ldp_serve_stop(PyObject *self, PyObject *args);
PyObject *ldp_serve_cleanup(PyObject *self, PyObject *args);
PyObject *ldp_fs_thread_stuck(PyObject *self, PyObject *args);
PyObject *ldp_server_stats(PyObject *self, PyObject *args);
PyObject *ldp_forward_signals(PyObject *self, PyObject *args);     /* signal_forward.c */
PyObject *ldp_workers_start(PyObject *self, PyObject *args);       /* server/workers.c */
PyObject *ldp_workers_stop(PyObject *self, PyObject *args);
PyObject *ldp_worker_serve(PyObject *self, PyObject *args);
PyObject *ldp_worker_pids(PyObject *self, PyObject *args);
PyObject *ldp_subreaper(PyObject *self, PyObject *args);           /* subreaper.c */
PyObject *ldp_admit_member(PyObject *self, PyObject *arg);         /* subreaper.c */
static PyMethodDef methods[] = {
    { "passthrough_open", passthrough_open, METH_VARARGS,
      "passthrough_open(path, flags, mode=0o777) -> fd, opened to be returned in a Passthrough." },
    { "guard_this_thread", guard_this_thread, METH_NOARGS,
      "Make the calling thread the file system's own: its I/O never enters the mount." },
    { "context", ldp_context, METH_NOARGS, "The calling client's (uid, gid, pid) in the shared mode's server." },
    { "serve_init", ldp_serve_init, METH_NOARGS, "Build the file system objects for serving." },
    { "serve_start", ldp_serve_start, METH_VARARGS,
      "serve_start(listen_fd, thread_safe=False): answer clients on a listening unix socket." },
    { "serve_loop", ldp_serve_loop, METH_NOARGS,
      "Answer the requests of a class that is not thread_safe on this thread until serve_stop()." },
    { "serve_stop", ldp_serve_stop, METH_NOARGS, "End serve_loop()." },
    { "serve_cleanup", ldp_serve_cleanup, METH_NOARGS, "Remove what the server made on disk (FIFOs)." },
    { "server_stats", ldp_server_stats, METH_NOARGS,
      "--stats: per operation (op, count, server ns total, p50, p99, transport count, total, p50, p99)." },
    { "method_stats", method_stats, METH_NOARGS,
      "--stats: the class's methods as the server called them (name, count, ns total, p50, p99)." },
    { "fs_thread_stuck", ldp_fs_thread_stuck, METH_NOARGS,
      "Has a call timed out behind the FS thread, which has finished no request since?" },
    { "forward_signals", ldp_forward_signals, METH_VARARGS,
      "forward_signals(pid): SIGTERM, SIGHUP (and SIGINT, SIGQUIT not from the terminal) go to pid." },
    { "workers_start", ldp_workers_start, METH_VARARGS,
      "workers_start(n, argv, env): n - 1 worker processes serve calls beside this one's instance (-o workers)." },
    { "workers_stop", ldp_workers_stop, METH_VARARGS,
      "workers_stop(grace=5): the workers call their destroy() and end; killed after grace seconds." },
    { "worker_serve", ldp_worker_serve, METH_VARARGS,
      "worker_serve(fd): a worker process answers the server's calls on fd until it closes." },
    { "worker_pids", ldp_worker_pids, METH_NOARGS, "The worker processes' pids." },
    { "subreaper", ldp_subreaper, METH_NOARGS,
      "This process becomes the child subreaper of its descendants (PR_SET_CHILD_SUBREAPER)." },
    { "admit_member", ldp_admit_member, METH_O,
      "admit_member(pid): the server serves this process the launcher started (the supervisor) as one of the command." },
    { NULL, NULL, 0, NULL },
};
static struct PyModuleDef moddef = { PyModuleDef_HEAD_INIT, "_embedded",
    "The embedded backend of ldpfuse-py (loaded by the preload library), and the shared mode's server.",
    -1, methods };
PyMODINIT_FUNC PyInit__embedded(void)
{
    return PyModule_Create(&moddef);
}
