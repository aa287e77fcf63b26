/*
 * Starts the backend the first time a mount is touched, in the process that touches it.
 * Processes that never touch a mount never load libpython.
 *
 * --mode shared: the shared backend (backend/shared.c), no Python here. --mode embedded:
 * if the host is already a CPython of our version (python3 running a script that opens
 * /mnt/x/f), its interpreter is reused. Otherwise libpython is loaded RTLD_GLOBAL (C
 * extensions need its symbols) from the path the launcher wrote, then the backend module,
 * which is a CPython extension module so that it links against whichever libpython
 * (shared, or static inside the host) is present.
 * A process that cannot host the file system (a Python of another version, a user who
 * may not read libpython or the stdlib, a libpython that will not load, a file system
 * that will not start here, a Python of ours that touches the mount before its
 * interpreter runs: a venv or PYTHONPATH in the mount) is served by the launcher instead: the shared backend, to the
 * launcher's one instance (ldpfuse_py/embedded_mode.py), with this process's rights. The
 * choice is made once, at the first operation, said once in the log at info level, and
 * passed to the images this process execs (LDPFUSE_SERVED). Only with no launcher to ask
 * (a fusepy script's embedded run execs the command) do its operations fail with EIO.
 */
#include "../ldpfuse.h"
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static pthread_mutex_t load_lock = PTHREAD_MUTEX_INITIALIZER;
static int loaded;              /* load() has decided, for good */
static struct backend_ops *backend;

/*
 * A fork while another thread is in load(): that thread holds load_lock, and may be
 * half-way through starting the interpreter (or, in a Python host, importing the file
 * system under the host's import locks), and it is not in the child. Waiting for it in
 * the prepare handler could deadlock (a Python host forks holding the GIL, which the
 * loading thread needs), so the child lets go of the lock instead and does not touch
 * that half-started interpreter: it is served by the launcher (served_by_launcher), as
 * a process that cannot host the file system is. A fork made by the loading thread
 * itself (a class's __init__ that starts a program) keeps the load as it stands: the
 * child goes on from there on that thread.
 */
static int load_in_host_python; /* the load under way runs in the host's own interpreter */
static int loading;             /* threads that hold load_lock or are about to take it */
static TLS int loading_here;    /* this thread holds it */
static int forked_mid_load;     /* this process is the child of a fork made during a load */

static void load_fork_child(void)
{
    if (loading_here) {
        loading = 1;            /* the loader itself forked: it goes on here, the lock its */
    } else if (__atomic_load_n(&loading, __ATOMIC_ACQUIRE) > 0) {
        pthread_mutex_init(&load_lock, NULL);
        loading = 0;
        forked_mid_load = 1;    /* (at worst a load that had just ended: loaded says so) */
    }
}

void backend_loader_init(void)
{
    pthread_atfork(NULL, NULL, load_fork_child);
}

static void core_log(int level, const char *msg)
{
    ldp_log(level, "%s", msg);
}

static int core_open_passthrough(const char *path, int flags, mode_t mode)
{
    return REAL(open)(path, flags, mode);
}

static void core_guard_thread(void)
{
    guard_enter();      /* never left: the thread belongs to the FS until it ends */
}

static const struct core_api core = {
    .abi = LDP_BACKEND_ABI,
    .log = core_log,
    .open_passthrough = core_open_passthrough,
    .guard_thread = core_guard_thread,
};

static int host_python_state(char *why, size_t size)
{
    /* 1 = a running CPython of our version, 0 = none, -1 = one we cannot use (why says
     * so), -2 = ours, not running (yet: a python3 whose stdout is a mount file asks
     * isatty(1) before Py_Initialize; or no more: after Py_Finalize) */
    int (*is_init)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    if (is_init == NULL)
        return 0;
    const char *(*version)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
    const char *want = getenv("LDPFUSE_PYTHON_VERSION");    /* "3.11" */
    if (version && want) {
        const char *have = version();
        size_t wl = strlen(want);
        if (strncmp(have, want, wl) != 0 || (have[wl] != '.' && have[wl] != ' ')) {
            char hv[16];
            size_t i = 0;
            while (have[i] && have[i] != ' ' && i < sizeof hv - 1) {
                hv[i] = have[i];
                i++;
            }
            hv[i] = '\0';
            snprintf(why, size, "this program runs Python %s, but the file system needs Python %s "
                     "(the interpreter ldpfuse-py was installed with)", hv, want);
            return -1;
        }
    }
    if (!is_init()) {
        /* libpython is here but not running (a host before Py_Initialize or after
         * Py_Finalize): starting a second interpreter under it would corrupt it. The
         * call fails with EIO; a later one, once the host's interpreter runs, starts the
         * backend. */
        return -2;
    }
    return 1;
}

struct backend_ops *backend_shared_init(void);

/* Why a process of another user (setpriv, su, pjdfstest -u) cannot start the installing
 * Python (a venv under root's 0700 home): 1 if that is the reason, said in why. */
static int unreadable(const char *path, char *why, size_t size)
{
    if (path == NULL || *path == '\0' || REAL(faccessat)(AT_FDCWD, path, R_OK, AT_EACCESS) == 0 ||
        errno != EACCES)
        return 0;
    snprintf(why, size, "this process (uid %d) cannot read %s", (int)geteuid(), path);
    return 1;
}

/* This process cannot host the file system (why): the launcher's one instance serves it
 * over the shared mode's wire, with this process's rights, if the launcher listens
 * (LDPFUSE_SOCKET); the images it execs inherit the choice (LDPFUSE_SERVED). Said once,
 * at info level. 0: no launcher to ask (a fusepy script's embedded run). */
static int served_by_launcher(const char *why)
{
    const char *sock = getenv("LDPFUSE_SOCKET");
    if (sock == NULL || *sock == '\0')
        return 0;
    ldp_log(LOG_INFO, "--mode embedded: served by the launcher's file system instance (shared with "
            "every process served so), not by one in this process: %s", why);
    char entry[600];
    snprintf(entry, sizeof entry, "LDPFUSE_SERVED=%s", why);
    exec_env_keep(entry);
    backend = backend_shared_init();
    return 1;
}

/* No launcher to serve it: the error, once, on stderr (where the user of that process
 * looks) and in the log file if there is one, with the way out. */
static void cannot_host(const char *why)
{
    char msg[1024];
    int n = snprintf(msg, sizeof msg, "ldpfuse[%d]: --mode embedded: %s, so the file system cannot run in "
                     "this process and its mount operations fail with EIO; the default shared mode "
                     "(no --mode embedded) serves any process\n", (int)getpid(), why);
    if (n < 0 || (size_t)n >= sizeof msg)
        n = (int)strlen(msg);
    (void)!REAL(write)(2, msg, (size_t)n);
    const char *file = getenv("LDPFUSE_LOG_FILE");
    int fd = file && *file ? REAL(open)(file, O_WRONLY | O_APPEND | O_CLOEXEC) : -1;
    if (fd >= 0) {
        (void)!REAL(write)(fd, msg, (size_t)n);
        REAL(close)(fd);
    }
}

/* The file system in this process (the embedded backend), or why not. */
static int host_here(char *why, size_t size)
{
    int host = host_python_state(why, size);
    if (host < 0)
        return host;
    if (host == 0) {
        const char *lib = getenv("LDPFUSE_LIBPYTHON");
        if (lib == NULL || *lib == '\0' || dlopen(lib, RTLD_NOW | RTLD_GLOBAL) == NULL) {
            if (!unreadable(lib, why, size))
                snprintf(why, size, "cannot load libpython (%s): %s", lib ? lib : "LDPFUSE_LIBPYTHON unset",
                         dlerror());
            return -1;
        }
    }
    const char *so = getenv("LDPFUSE_BACKEND");
    void *h = so ? dlopen(so, RTLD_NOW | RTLD_LOCAL) : NULL;
    backend_init_fn init = h ? (backend_init_fn)dlsym(h, "ldpfuse_backend_embedded_init") : NULL;
    if (init == NULL) {
        if (!unreadable(so, why, size))
            snprintf(why, size, "cannot load the embedded backend (%s): %s", so ? so : "LDPFUSE_BACKEND unset",
                     dlerror());
        return -1;
    }
    static struct core_api c;   /* the backend keeps the pointer */
    c = core;
    char err[512] = "";
    backend = init(&c, host == 1, err, sizeof err);
    if (backend == NULL) {
        if (!unreadable(getenv("LDPFUSE_PYTHON_HOME"), why, size))
            snprintf(why, size, "the file system could not start here: %s", err);
        return -1;
    }
    return 0;
}

/*
 * The child of a fork made while another thread of a Python host was starting the file
 * system in the host's interpreter: that thread was importing (ldpfuse_py, the class's
 * module, what they import), and CPython leaves the modules it had begun in sys.modules,
 * marked initializing, with their import locks owned by a thread the child does not
 * have. The child's next use of one (a ResourceWarning's look at `warnings`) would wait
 * for it forever. They are forgotten here, at the child's first call on a mount: a later
 * import starts them anew. Modules this thread itself is importing are kept.
 */
static const char forget_code[] =
    "exec(\"import sys, _thread\\n"
    "b = sys.modules.get('importlib._bootstrap')\\n"
    "locks = getattr(b, '_module_locks', {})\\n"
    "me = _thread.get_ident()\\n"
    "for name, mod in list(sys.modules.items()):\\n"
    "    if not getattr(getattr(mod, '__spec__', None), '_initializing', False):\\n"
    "        continue\\n"
    "    ref = locks.get(name)\\n"
    "    lock = ref() if ref is not None else None\\n"
    "    if lock is not None and getattr(lock, 'owner', None) == me:\\n"
    "        continue\\n"
    "    del sys.modules[name]\\n"
    "    locks.pop(name, None)\\n\", {})";

static void forget_half_imports(void)
{
    int (*ensure)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "PyGILState_Ensure");
    void (*release)(int) = (void (*)(int))dlsym(RTLD_DEFAULT, "PyGILState_Release");
    int (*run)(const char *) = (int (*)(const char *))dlsym(RTLD_DEFAULT, "PyRun_SimpleString");
    if (ensure == NULL || release == NULL || run == NULL)
        return;
    guard_enter();
    int g = ensure();
    run(forget_code);
    release(g);
    guard_leave();
}

/* 0 when decided for good (backend set, or NULL for good); 1: ask again at the next call */
static int load(void)
{
    const char *mode = getenv("LDPFUSE_MODE");
    if (mode && strcmp(mode, "shared") == 0) {
        backend = backend_shared_init();    /* no Python in this process at all */
        return 0;
    }
    if (forked_mid_load) {
        if (load_in_host_python)
            forget_half_imports();
        if (served_by_launcher("forked while another thread was starting the file system in the "
                               "parent, whose half-started interpreter cannot serve it"))
            return 0;
        cannot_host("forked while another thread was starting the file system");
        return 0;
    }
    const char *served = getenv("LDPFUSE_SERVED");
    if (served && *served) {
        char why[600];
        snprintf(why, sizeof why, "as the process that started it: %s", served);
        if (served_by_launcher(why))
            return 0;
    }
    guard_enter();
    char why[600] = "";
    int (*is_init)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    load_in_host_python = is_init && is_init();
    int r = host_here(why, sizeof why);
    load_in_host_python = 0;
    if (r == -2) {
        /* a Python program whose interpreter does not run (yet: it reads the mount while
         * it starts, a venv or PYTHONPATH there, or asks isatty() of a stdout there): the
         * launcher serves it if it can; if not, EIO until the interpreter runs */
        snprintf(why, sizeof why, "this program's Python interpreter is not running (it touches "
                 "the mount while it starts, or after it has finished)");
        r = served_by_launcher(why) ? 0 : -2;
    } else if (r < 0 && !served_by_launcher(why)) {
        cannot_host(why);
    }
    guard_leave();
    return r == -2;
}

/* At exit in a Python program that never touched the mount by name and has already
 * finalised its interpreter, the FS cannot be started: whoever opened the inherited cached
 * fds writes them back on its close (the memfd is shared). */
int backend_unreachable_at_exit(void)
{
    int (*is_init)(void) = (int (*)(void))dlsym(RTLD_DEFAULT, "Py_IsInitialized");
    const char *mode = getenv("LDPFUSE_MODE");
    return backend == NULL && is_init != NULL && !is_init() && !(mode && strcmp(mode, "shared") == 0);
}

struct backend_ops *backend_get(void)
{
    if (UNLIKELY(ldp_vfork_child)) {
        /* the FS would start (or talk) on the parent's memory: see interpose/vfork.c */
        ldp_log(LOG_ERROR, "a vfork child used the mount before exec: EIO");
        return NULL;
    }
    if (__atomic_load_n(&loaded, __ATOMIC_ACQUIRE))
        return backend;
    static int waiting_logged;
    __atomic_add_fetch(&loading, 1, __ATOMIC_ACQ_REL);
    pthread_mutex_lock(&load_lock);
    if (!loaded) {
        loading_here = 1;
        int again = load();
        loading_here = 0;
        if (again == 0) {
            backend = backing_over(backend);    /* the mount's backing trees, if it has any */
            backend = union_over(backend);      /* an overlay's merged view (vfs/union.c) */
            __atomic_store_n(&loaded, 1, __ATOMIC_RELEASE);
        } else if (!waiting_logged) {
            waiting_logged = 1;
            ldp_log(LOG_DEBUG, "this program's Python interpreter is not running (yet); "
                    "mount operations fail with EIO until it is");
        }
    }
    pthread_mutex_unlock(&load_lock);
    __atomic_sub_fetch(&loading, 1, __ATOMIC_ACQ_REL);
    return backend;
}

/* Called at exit: give the FS its destroy() if it ever started here. */
void backend_destroy(void)
{
    if (backend && backend->destroy) {
        guard_enter();
        backend->destroy();
        guard_leave();
    }
}
