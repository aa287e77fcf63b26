/*
 * The shared mode's wire format: one request, one response, between a client thread
 * (backend/shared.c, in the preload) and the file system process (native/server/, in the
 * extension module the launcher runs). They travel through the thread's channel
 * (backend/channel.h: a region of shared memory, a futex word, and the connection's unix
 * stream socket beside it). Both ends are on one machine with one ABI, so structs (stat,
 * statvfs, timespec) travel as they are.
 *
 * request:  struct wire_req, then path, path2, data (their lengths in the header)
 * response: struct wire_resp, then data; an open/create that chose passthrough sends the
 *           lower fd along (SCM_RIGHTS, on the socket); a successful open/create's result
 *           is its OPEN_* flags (backend.h).
 * The caller's identity is never taken from a request: the server has the kernel's word
 * for the connection (SO_PEERCRED); uid and gid in a request only say what a root client
 * has become since it connected. A request's fh is a token the server gave this process
 * (server/handles.c), never the file system's own. Every field is checked against the
 * connection before any method runs (server/request.c).
 */
#ifndef LDPFUSE_WIRE_H
#define LDPFUSE_WIRE_H
#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>

enum wire_op {
    W_GETATTR = 1, W_READLINK, W_MKNOD, W_MKDIR, W_UNLINK, W_RMDIR, W_SYMLINK, W_RENAME,
    W_LINK, W_CHMOD, W_CHOWN, W_TRUNCATE, W_OPEN, W_CREATE, W_READ, W_WRITE, W_STATFS,
    W_FLUSH, W_RELEASE, W_FSYNC, W_OPENDIR, W_READDIR, W_RELEASEDIR, W_ACCESS, W_UTIMENS,
    W_SETXATTR, W_GETXATTR, W_LISTXATTR, W_REMOVEXATTR,
    W_APPEND,       /* write at the end; the response's fh is the offset written at */
    W_CACHE_OPEN,   /* the file's page cache: an O_RDWR fd of the server's memfd rides
                       along; a = st_size for a new one; fh (has_fh) is the token of the
                       caller's open of the file, without one the server tries an O_WRONLY
                       open as the caller (a truncate); the result is 1 if the cache is new,
                       the response's fh the cache's own token */
    W_CACHE_CLOSE,  /* a process let go of the file's page cache: fh is its token */
    W_FIFO,         /* a FIFO of the FS: the answer is the path of the real FIFO that
                       stands for it (owner and mode from getattr), for the client to open */
    W_COHERENCE,    /* the server's table of change counters (backend/coherence.h): its
                       memfd rides along, for the client to map (each connection's
                       first message brings it too: this asks only if that did not) */
    W_IOCTL,        /* ioctl(fh, a = cmd, b = the caller's arg as a number, c = flags): data
                       is the caller's _IOC_SIZE(cmd) bytes (none: arg is no address), and
                       so is the answer's */
    W_CREATE_OPEN,  /* lookup and open (O_CREAT: or create) in one round trip (backend.h
                       create_open): a = mode, b = flags, c = WANT_DIR_OK if the client
                       knows the directory is one, | WANT_LOWER for the lower name; the
                       answer's data is a struct wire_create_open (then, for a
                       passthrough CO_OPENED, the lower file's name as W_OPEN's), its
                       result and fh (and fd) those of the create or open */
    W_WRITTEN,      /* the kernel changed the passthrough file at path through this
                       process's fd (vfs/passthrough.c): the server bumps its counter in
                       the table (coherence.h) before it answers */
    W_LOCK,         /* the class's lock (b = 0: a = F_GETLK or F_SETLK, data a struct flock
                       from SEEK_SET, and so is the answer's for F_GETLK; the server puts
                       the caller's pid in l_pid) or flock (b = 1: a = LOCK_SH, LOCK_EX with
                       LOCK_NB, or LOCK_UN), on the open file fh */
    W_MOVED,        /* a directory under a backing tree (vfs/backing.c) was removed, renamed
                       from path to path2, or had its permissions changed by this process,
                       past the server: the server bumps what lies below both names in the
                       table (coherence.h) before it answers (path2 = path but for a rename) */
    W_PASS,         /* the caller is about to send its fd a (of the open file fh) over a unix
                       socket (SCM_RIGHTS): the server takes its own reference to that open
                       file description (pidfd_getfd), for a receiver to prove it holds the
                       same one (W_CLAIM) */
    W_CLAIM,        /* the caller received fd a over a unix socket: if the kernel says it is
                       the open file description some process passed (W_PASS; kcmp
                       KCMP_FILE), the caller and the processes below it may use that handle
                       too; the answer's fh is its token, the data a struct wire_claim and
                       the handle's path (server/handles.c, interpose/pass_fd.c) */
    W_AFTER,        /* an operation of a backing tree the caller did past the server, which
                       the class asked to be told of after (backend.h after): a = its BK_*
                       bit, b = its result (0 or -errno), path2 the second name if any; for
                       BK_GETATTR data is the struct stat, and so is the answer's, adjusted */
};
#define W_OP_MAX W_AFTER
#define AFTER_GETATTR 1     /* W_AFTER's a for a getattr: BK_GETATTR (ldpfuse.h) */

/* The method a request calls, for the log and --stats (the user's method names, as fusepy's). */
static const char *const wire_op_names[W_OP_MAX + 1] __attribute__((unused)) = {
    [W_GETATTR] = "getattr", [W_READLINK] = "readlink", [W_MKNOD] = "mknod", [W_MKDIR] = "mkdir",
    [W_UNLINK] = "unlink", [W_RMDIR] = "rmdir", [W_SYMLINK] = "symlink", [W_RENAME] = "rename",
    [W_LINK] = "link", [W_CHMOD] = "chmod", [W_CHOWN] = "chown", [W_TRUNCATE] = "truncate",
    [W_OPEN] = "open", [W_CREATE] = "create", [W_READ] = "read", [W_WRITE] = "write",
    [W_STATFS] = "statfs", [W_FLUSH] = "flush", [W_RELEASE] = "release", [W_FSYNC] = "fsync",
    [W_OPENDIR] = "opendir", [W_READDIR] = "readdir", [W_RELEASEDIR] = "releasedir",
    [W_ACCESS] = "access", [W_UTIMENS] = "utimens", [W_SETXATTR] = "setxattr",
    [W_GETXATTR] = "getxattr", [W_LISTXATTR] = "listxattr", [W_REMOVEXATTR] = "removexattr",
    [W_APPEND] = "write (append)", [W_CACHE_OPEN] = "open (page cache)",
    [W_CACHE_CLOSE] = "release (page cache)", [W_FIFO] = "getattr (FIFO)",
    [W_COHERENCE] = "(coherence table)", [W_IOCTL] = "ioctl", [W_CREATE_OPEN] = "create/open",
    [W_WRITTEN] = "(written)", [W_LOCK] = "lock", [W_MOVED] = "(moved)",
    [W_PASS] = "(fd passed)", [W_CLAIM] = "(fd received)", [W_AFTER] = "after",
};

static inline const char *wire_op_name(unsigned op)
{
    return op <= W_OP_MAX && wire_op_names[op] ? wire_op_names[op] : "?";
}
/* W_OPEN's b and W_CREATE_OPEN's c: the client would keep the open decision, send the
 * lower file's name of a passthrough open (backend/shared.c: not for a process's first
 * request, whose answer it cannot keep) */
#define WANT_DIR_OK 1
#define WANT_LOWER 2
#define WANT_CACHE 4    /* W_OPEN, W_CREATE_OPEN: the client holds no page cache of the file: a
                           cached open brings the file's page cache with it (one round trip
                           less) */
/* W_OPEN's answer when it brought the page cache: the result has OPEN_CACHE_BROUGHT set
 * (besides the OPEN_* flags, backend.h), the fd riding along is the cache, and the data is
 * this. */
#define OPEN_CACHE_BROUGHT (1u << 30)

/* W_RELEASE's c: RELEASE_CACHE_TOO, b is the token of the caller's page cache of the file,
 * let go of after the release (W_CACHE_CLOSE in the same request) */
#define RELEASE_CACHE_TOO 1
/* A new page cache's known state as the server noted it on the memfd (the user xattr
 * vfs/pagecache.c keeps, KNOWN_XATTR: its size and mtime after the server's fill), so that
 * the client takes it from the answer instead of an fstat and an fsetxattr of its own.
 * noted = 0: not noted (no xattrs, or not a new cache): the client notes it as before. */
struct wire_known {
    int64_t size, sec, nsec;
};
#define WIRE_KNOWN_XATTR "user.ldpfuse.known"
struct wire_open_cache {
    int32_t cache;          /* 1: the file's page cache, 2: a new one, 3: a new one the open
                               filled with the file whole (dispatch.c, fill_first_window) */
    int32_t noted;          /* known is the memfd's noted state (a new one) */
    uint64_t cache_token;
    struct wire_known known;
};
struct wire_create_open {
    int32_t outcome;        /* CO_* (backend.h) */
    int32_t cache;          /* WANT_CACHE answered: 1, the fd riding along is the file's page
                               cache (2: a new one, 3: a new one filled whole), cache_token
                               its handle; 0: none */
    struct stat st;         /* CO_OPENED, CO_EXISTS: what getattr said */
    uint64_t cache_token;
    uint64_t stamp;         /* coherence_stamp() of the path before the lookup: a process that
                               had no table yet (its first request) keeps what it learnt */
    int32_t noted;          /* as wire_open_cache's */
    int32_t unused;
    struct wire_known known;
};
/* W_CLAIM's answer, then the handle's path (no NUL) */
struct wire_claim {
    int32_t mnt;
    int32_t flags;          /* the open's flags */
};
/* W_UNLINK and W_RMDIR answer in fh the coherence stamp of the name gone just after, or 0
 * if another change may have come in between. */

/* What a connection sends first, before its first request: the proof that the client is a
 * process of the command (the run's secret, LDPFUSE_SECRET, which only the command's
 * processes inherit). The server reads no request of a connection without it. */
#define WIRE_HELLO_MAGIC 0x6c6470686c6f3031ull
#define WIRE_SECRET_LEN 32
#define HELLO_WANT_COHERENCE 1u     /* the first answer brings the table of change counters */
struct wire_hello {
    uint64_t magic;
    uint32_t flags;
    uint32_t pad;
    unsigned char secret[WIRE_SECRET_LEN];
};
/* A connection's first request goes on the socket with the hello: at most this long (a
 * longer one is preceded by a W_COHERENCE of its own), so that the server can see it
 * whole before it reads any of it and never waits for a client's bytes. */
#define WIRE_FIRST_MAX 16384
/* The answer's has_fd: which fds ride along on the socket, in one message, in this order */
#define RESP_FD_TABLE 2     /* the table of change counters (a connection's first answer) */
#define RESP_FD 1           /* the answer's own (a passthrough file, a page cache, ...) */
/* Limits of what a request may say (server/request.c): what is longer is refused, what
 * asks for more is answered with at most this much. */
#define WIRE_XATTR_MAX 65536    /* XATTR_SIZE_MAX, XATTR_LIST_MAX */
#define WIRE_NAME_MAX 255       /* NAME_MAX: one component of a path, an xattr's name */
#define WIRE_PATH_MAX 8192      /* a mount path (VPATH_MAX, ldpfuse.h): a relative name of up to
                                   PATH_MAX - 1 bytes from a working directory in a mount */

struct wire_req {
    uint32_t len;           /* bytes after this header */
    uint16_t op;
    uint16_t mnt;
    int64_t a, b, c;        /* numeric arguments, by op */
    uint64_t fh;
    uint8_t has_fh;
    uint8_t pad[3];
    uint32_t path_len, path2_len, data_len;
    uint32_t uid, gid;          /* the caller's euid/egid now */
    uint32_t prev_us;           /* --stats: the round trip of this channel's previous request as
                                   its caller saw it, in us (0: none, or not counted) */
};

struct wire_resp {
    uint32_t len;           /* bytes after this header */
    int32_t has_fd;         /* fds ride along (SCM_RIGHTS): RESP_FD_TABLE | RESP_FD */
    int64_t result;         /* >= 0, or -errno */
    uint64_t fh;
};

/* readdir data: records of this header followed, with WIRE_DIRENT_ATTRS, by the entry's
 * struct stat (what the class's readdir said of it, backend.h dirlist.attrs), then the
 * name (no NUL) */
struct wire_dirent {
    uint64_t ino;
    uint8_t type;
    uint8_t flags;
    uint16_t namelen;
};
#define WIRE_DIRENT_ATTRS 1


/* Read exactly len bytes from a stream socket; -1 on EOF or error. */
static inline int wire_read_all(int fd, void *buf, size_t len)
{
    char *p = (char *)buf;
    while (len > 0) {
        ssize_t r = recv(fd, p, len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return -1;
        p += r;
        len -= (size_t)r;
    }
    return 0;
}
#endif
