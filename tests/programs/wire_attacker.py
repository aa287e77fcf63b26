"""A hostile client of the shared mode's server (issue 22), speaking the wire protocol of
native/backend/wire.h and channel.h by hand: what a local user could write in an afternoon.

As a library (tests/wire_fuzz.py imports it): Conn(socket_name, secret) is one connection,
conn.call(op, path, ...) one request, its Answer (result, fh, data, fds).

As a program: `wire_attacker.py ATTACK [ARG...]`, run by tests/test_security.py inside a
command (LDPFUSE_SOCKET and LDPFUSE_SECRET from the environment, as the command's own
processes have them) or outside it (the socket named by --socket, found in
/proc/net/unix; no secret). Each attack prints one line per probe, `name value`, where
value is an errno name, OK, or what was read; the test compares them. It never passes
the preload library on (the test starts it with LD_PRELOAD unset).

With LDPFUSE_ATTACK_LEGACY=1 it speaks the protocol of 7b0617e (no hello, fh = the file
system's own): the same attacks against the server of before issue 22.
"""

import array
import ctypes
import errno
import mmap
import os
import random
import select
import socket
import struct
import sys
import time

# ---- the wire format (native/backend/wire.h): checked against the C headers by
# tests/test_security.py::test_the_attackers_layout_is_the_headers
(W_GETATTR, W_READLINK, W_MKNOD, W_MKDIR, W_UNLINK, W_RMDIR, W_SYMLINK, W_RENAME,
 W_LINK, W_CHMOD, W_CHOWN, W_TRUNCATE, W_OPEN, W_CREATE, W_READ, W_WRITE, W_STATFS,
 W_FLUSH, W_RELEASE, W_FSYNC, W_OPENDIR, W_READDIR, W_RELEASEDIR, W_ACCESS, W_UTIMENS,
 W_SETXATTR, W_GETXATTR, W_LISTXATTR, W_REMOVEXATTR, W_APPEND, W_CACHE_OPEN,
 W_CACHE_CLOSE, W_FIFO, W_COHERENCE, W_IOCTL, W_CREATE_OPEN, W_WRITTEN, W_LOCK, W_MOVED,
 W_PASS, W_CLAIM, W_AFTER) = range(1, 43)
W_OP_MAX = W_AFTER
FLOCK = struct.Struct("hhqqi4x")                  # struct flock, 32 bytes
F_SETLK, F_RDLCK, F_WRLCK, LOCK_EX = 6, 0, 1, 2
OP_NAMES = {v: k for k, v in globals().items() if k.startswith("W_") and k != "W_OP_MAX"}

REQ = struct.Struct("<IHHqqqQB3xIIIIII4x")     # struct wire_req, 72 bytes
RESP = struct.Struct("<IiqQ")                   # struct wire_resp, 24 bytes
HELLO = struct.Struct("<QII32s")                # struct wire_hello, 48 bytes
HELLO_MAGIC = 0x6c6470686c6f3031
HELLO_WANT_COHERENCE = 1
RESP_FD, RESP_FD_TABLE = 1, 2
CHAN_SIZE = 1 << 20
OFF_STATE, OFF_SERVER_WAITS, OFF_CLIENT_WAITS = 0, 4, 8
OFF_RQ, OFF_RS, OFF_BUF = 16, 88, 112
CHAN_BUF = CHAN_SIZE - OFF_BUF
CHAN_IDLE, CHAN_REQ, CHAN_RESP, CHAN_GAVE_UP = range(4)
WIRE_FIRST_MAX = 16384

LEGACY = os.environ.get("LDPFUSE_ATTACK_LEGACY") == "1"

_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long
SYS_futex = 202 if os.uname().machine == "x86_64" else 98
FUTEX_WAIT, FUTEX_WAKE = 0, 1


class Timespec(ctypes.Structure):
    _fields_ = [("tv_sec", ctypes.c_long), ("tv_nsec", ctypes.c_long)]


class Refused(Exception):
    """The server refused the connection: its hello said -errno (or it closed)."""

    def __init__(self, err):
        super().__init__(errno.errorcode.get(err, str(err)) if err else "closed")
        self.errno = err


class Gone(Exception):
    """The server closed the connection (it dropped us), or broke the protocol."""


class Answer:
    def __init__(self, result, fh, data, fds):
        self.result, self.fh, self.data, self.fds = result, fh, data, fds

    @property
    def err(self):
        return errno.errorcode.get(-self.result, str(self.result)) if self.result < 0 else None

    def close_fds(self):
        for fd in self.fds:
            os.close(fd)
        self.fds = []


def say(*words):
    """One output line in one write(2): several attackers share the test's stdout pipe, and a
    print() split into two writes let their lines interleave ("donedone")."""
    os.write(1, (" ".join(map(str, words)) + "\n").encode())


def errname(result):
    """A result as a probe line says it: an errno name, or OK."""
    return errno.errorcode.get(-result, str(result)) if result < 0 else "OK"


def socket_from_proc(owner_pid=None):
    """The name of a shared-mode server's abstract socket, as any user finds it in
    /proc/net/unix (the launcher's pid is in the name: owner_pid picks one)."""
    names = []
    with open("/proc/net/unix") as f:
        for line in f.readlines()[1:]:
            parts = line.split()
            if len(parts) >= 8 and parts[7].startswith("@ldpfuse-"):
                name = parts[7][1:]
                if owner_pid is None or name.startswith(f"ldpfuse-{owner_pid}-"):
                    names.append(name)
    return names[0] if names else None


def recv_fds(sock, nbytes, maxfds=2):
    fds = array.array("i")
    msg, anc, _flags, _addr = sock.recvmsg(nbytes, socket.CMSG_SPACE(maxfds * fds.itemsize),
                                           socket.MSG_CMSG_CLOEXEC)
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % fds.itemsize])
    return msg, list(fds)


def recv_all(sock, n):
    out = bytearray()
    while len(out) < n:
        b = sock.recv(n - len(out))
        if not b:
            raise Gone("closed")
        out += b
    return bytes(out)


class Conn:
    """One connection to the server: the hello (with `secret`, bytes, or None for a wrong
    one), then requests. The first request goes on the socket with the hello; the rest
    through the region the server handed over."""

    def __init__(self, name, secret, timeout=30.0, want_coherence=True):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect("\0" + name)
        self.secret = secret if secret is not None else os.urandom(32)
        self.want_coherence = want_coherence
        self.region = None
        self.table_fd = None
        self.timeout = timeout

    def close(self):
        if self.table_fd is not None:
            os.close(self.table_fd)
            self.table_fd = None
        try:
            self.sock.close()
        except OSError:
            pass

    # ---- the region
    def _u32(self, off):
        return struct.unpack_from("<I", self.region, off)[0]

    def _set_u32(self, off, v):
        struct.pack_into("<I", self.region, off, v)

    def _futex(self, off, op, val, ms=0):
        addr = ctypes.addressof(self._base) + off
        ts = Timespec(ms // 1000, (ms % 1000) * 1000000)
        return _libc.syscall(SYS_futex, ctypes.c_void_p(addr), op, val,
                             ctypes.byref(ts) if op == FUTEX_WAIT else None, None, 0)

    def _take_region(self):
        msg, fds = recv_fds(self.sock, RESP.size)
        if len(msg) < RESP.size:
            for fd in fds:
                os.close(fd)
            raise Refused(0)
        _len, _has_fd, result, _fh = RESP.unpack(msg)
        if result < 0:
            for fd in fds:
                os.close(fd)
            raise Refused(-result)
        if not fds:
            raise Gone("no region")
        self.region = mmap.mmap(fds[0], CHAN_SIZE, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
        self._base = ctypes.c_char.from_buffer(self.region)
        for fd in fds:
            os.close(fd)

    # ---- a request
    @staticmethod
    def pack(op, path=b"/", path2=b"", data=b"", mnt=0, a=0, b=0, c=0, fh=None,
             uid=None, gid=None, lengths=None):
        path, path2 = os.fsencode(path), os.fsencode(path2)
        pl, p2l, dl = lengths or (len(path), len(path2), len(data))
        rq = REQ.pack(pl + p2l + dl, op, mnt, a, b, c, fh or 0, fh is not None, pl, p2l, dl,
                      os.geteuid() if uid is None else uid, os.getegid() if gid is None else gid,
                      0)     # prev_us (--stats)
        return rq, path + path2 + data

    def call(self, op, path=b"/", path2=b"", data=b"", *, raw=None, read_data=True, **kw):
        """One request; its Answer. raw = (header bytes, body bytes) sends those as they are."""
        rq, body = raw or self.pack(op, path, path2, data, **kw)
        if self.region is None:
            hello = b"" if LEGACY else HELLO.pack(
                HELLO_MAGIC, HELLO_WANT_COHERENCE if self.want_coherence else 0, 0, self.secret)
            try:
                self.sock.sendall(hello + rq + body)
                sent = None
            except OSError as e:    # a refused process may find the server gone before its
                sent = e            # request went: the refusal waits on the socket all the same
            self._take_region()
            if sent is not None:
                raise Gone(str(sent))
            first = True
        else:
            self.region[OFF_RQ:OFF_RQ + len(rq)] = rq
            if len(body) <= CHAN_BUF:
                self.region[OFF_BUF:OFF_BUF + len(body)] = body
            self._set_u32(OFF_STATE, CHAN_REQ)
            if self._u32(OFF_SERVER_WAITS):
                self._futex(OFF_STATE, FUTEX_WAKE, 0x7fffffff)
            if len(body) > CHAN_BUF:
                self.sock.sendall(body)
            first = False
        return self._wait(first, read_data)

    def _wait(self, first, read_data):
        deadline = time.monotonic() + self.timeout
        while self._u32(OFF_STATE) != CHAN_RESP:
            self._set_u32(OFF_CLIENT_WAITS, 1)
            st = self._u32(OFF_STATE)
            if st != CHAN_RESP:
                self._futex(OFF_STATE, FUTEX_WAIT, st, 50)
            self._set_u32(OFF_CLIENT_WAITS, 0)
            if self._u32(OFF_STATE) == CHAN_RESP:
                break
            # the server still lives? (a socket with a timeout waits for readability
            # before any recv, MSG_DONTWAIT or not: ask poll, with none)
            p = select.poll()
            p.register(self.sock, select.POLLIN | select.POLLRDHUP)
            if p.poll(0):
                try:
                    if self.sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT) == b"":
                        raise Gone("closed")
                except ConnectionResetError:
                    raise Gone("reset")
                except (BlockingIOError, InterruptedError):
                    pass
            if time.monotonic() > deadline:
                raise TimeoutError("no answer")
        ln, has_fd, result, fh = RESP.unpack_from(self.region, OFF_RS)
        fds = []
        if has_fd & (RESP_FD | RESP_FD_TABLE):
            _msg, fds = recv_fds(self.sock, 1)
            if has_fd & RESP_FD_TABLE and fds:
                self.table_fd = fds.pop(0)
        data = b""
        if read_data:
            if ln <= CHAN_BUF:
                data = bytes(self.region[OFF_BUF:OFF_BUF + ln])
            else:
                data = recv_all(self.sock, ln)
        return Answer(result, fh, data, fds)


def connect(name=None, secret=None, **kw):
    """A connection as a process of the command makes it (its environment's socket and
    secret), or with the given ones."""
    name = name or os.environ["LDPFUSE_SOCKET"]
    if secret is None and "LDPFUSE_SECRET" in os.environ:
        secret = bytes.fromhex(os.environ["LDPFUSE_SECRET"])
    return Conn(name, secret, **kw)


def probe(label, fn):
    """Run fn() -> str; print `label value`; an exception prints its kind."""
    try:
        value = fn()
    except Refused as e:
        value = f"refused {e}"
    except Gone:
        value = "dropped"
    except (ConnectionResetError, BrokenPipeError):
        value = "dropped"
    except ConnectionRefusedError:
        value = "connect-refused"
    except TimeoutError:
        value = "timeout"
    say(label, value)
    return value


def opened(conn, path, flags, mode=0o644):
    """An open or create; the token (fh) or raises OSError."""
    ans = conn.call(W_CREATE, path, a=mode, b=flags) if flags & os.O_CREAT else conn.call(W_OPEN, path, a=flags)
    ans.close_fds()
    if ans.result < 0:
        raise OSError(-ans.result, f"open {path}")
    return ans.fh


# ---- the attacks (one per issue 22 line); each prints probe lines

def attack_outsider(args):
    """Line 1: a process outside the command, with no secret, uses the file system."""
    name, path = args[0], args[1]
    def read_file():
        c = Conn(name, None)
        fh = opened(c, path, os.O_RDONLY)
        ans = c.call(W_READ, path, a=4096, b=0, fh=fh)
        return ans.data.decode(errors="replace").strip() if ans.result >= 0 else errname(ans.result)
    probe("read", read_file)
    def write_file():
        c = Conn(name, None)
        fh = opened(c, path, os.O_WRONLY)
        ans = c.call(W_WRITE, path, data=b"attacker\n", b=0, fh=fh)
        return errname(ans.result)
    probe("write", write_file)
    def create():
        c = Conn(name, None)
        ans = c.call(W_MKDIR, args[2], a=0o777)
        return errname(ans.result)
    probe("mkdir", create)


def attack_wrong_secret(args):
    """Line 1 again: connection after connection with a wrong secret (each one dropped)."""
    name, n = args[0], int(args[1])
    outcome = {}
    for _ in range(n):
        try:
            Conn(name, None, timeout=10).call(W_GETATTR, "/")
            key = "served"
        except Refused as e:
            key = f"refused-{e}"
        except (Gone, ConnectionError):
            key = "dropped"
        outcome[key] = outcome.get(key, 0) + 1
    for k, v in sorted(outcome.items()):
        say(k, v)


def attack_paths(args):
    """Line 2: names that leave the mount's root, and malformed names."""
    outside_read, outside_new = args[0], args[1]     # e.g. /../x/secret, /../x/new
    c = connect()
    probe("getattr-dotdot", lambda: errname(c.call(W_GETATTR, outside_read).result))
    def read_outside():
        ans = c.call(W_OPEN, outside_read, a=os.O_RDONLY)
        if ans.result < 0:
            return errname(ans.result)
        if ans.fds:     # passthrough: the lower fd itself
            data = os.pread(ans.fds[0], 4096, 0)
            ans.close_fds()
            return data.decode(errors="replace").strip()
        return errname(c.call(W_READ, outside_read, a=4096, b=0, fh=ans.fh).result)
    probe("open-dotdot", read_outside)
    def create_outside():
        ans = c.call(W_CREATE, outside_new, a=0o644, b=os.O_WRONLY | os.O_CREAT)
        ans.close_fds()
        return errname(ans.result)
    probe("create-dotdot", create_outside)
    probe("rename-dotdot", lambda: errname(c.call(W_RENAME, "/public", outside_new).result))
    probe("symlink-dotdot", lambda: errname(c.call(W_SYMLINK, outside_new, "/etc/passwd").result))
    for label, path in (("double-slash", b"//public"), ("dot", b"/./public"), ("relative", b"public"),
                        ("trailing-slash", b"/public/"), ("nul", b"/public\0/../x"),
                        ("empty", b""), ("long-name", b"/" + b"n" * 256),
                        ("long-path", b"/d" * 2100)):
        probe(label, lambda path=path: errname(c.call(W_GETATTR, path).result))
    probe("still-served", lambda: errname(c.call(W_GETATTR, "/public").result))


def attack_handles(args):
    """Line 3: read, write, release, fsync, truncate through handles never given."""
    path = args[0]
    c = connect()
    def each(op, **kw):
        seen = set()
        for fh in list(range(0, 70)) + [random.getrandbits(64) for _ in range(200)]:
            ans = c.call(op, path, fh=fh, **kw)
            seen.add(errname(ans.result))
            ans.close_fds()
        return ",".join(sorted(seen))
    probe("read", lambda: each(W_READ, a=4096, b=0))
    probe("write", lambda: each(W_WRITE, data=b"attacker\n", b=0))
    probe("release", lambda: each(W_RELEASE))
    probe("fsync", lambda: each(W_FSYNC))
    probe("flush", lambda: each(W_FLUSH))
    probe("truncate", lambda: each(W_TRUNCATE, a=0))
    probe("readdir", lambda: each(W_READDIR))
    probe("releasedir", lambda: each(W_RELEASEDIR))
    probe("cache-close", lambda: each(W_CACHE_CLOSE))
    probe("cache-open", lambda: each(W_CACHE_OPEN))
    probe("ioctl", lambda: each(W_IOCTL, a=0x5401))
    probe("lock", lambda: each(W_LOCK, a=F_SETLK, b=0, data=FLOCK.pack(F_WRLCK, 0, 0, 0, 0)))
    probe("flock", lambda: each(W_LOCK, a=LOCK_EX, b=1))
    probe("still-served", lambda: errname(c.call(W_GETATTR, "/").result))


def attack_own_handle(args):
    """Line 3 again, with a handle of one's own: it does not reach another file (the path
    of a request that names a handle is the handle's), nor do what its open did not ask."""
    mine, theirs = args[0], args[1]
    c = connect()
    ro = opened(c, theirs, os.O_RDONLY)
    probe("truncate-through-readonly", lambda: errname(c.call(W_TRUNCATE, theirs, a=0, fh=ro).result))
    probe("write-through-readonly", lambda: errname(c.call(W_WRITE, theirs, data=b"attacker\n", b=0, fh=ro).result))
    rw = opened(c, mine, os.O_RDWR | os.O_CREAT)
    probe("write-other-path", lambda: errname(c.call(W_WRITE, theirs, data=b"attacker\n", b=0, fh=rw).result))
    probe("truncate-other-path", lambda: errname(c.call(W_TRUNCATE, theirs, a=0, fh=rw).result))
    wo = opened(c, mine, os.O_WRONLY)
    probe("read-through-writeonly", lambda: errname(c.call(W_READ, mine, a=10, b=0, fh=wo).result))
    probe("write-lock-through-readonly", lambda: errname(c.call(
        W_LOCK, theirs, a=F_SETLK, b=0, data=FLOCK.pack(F_WRLCK, 0, 0, 0, 0), fh=ro).result))
    probe("lock-bad-type", lambda: errname(c.call(
        W_LOCK, mine, a=F_SETLK, b=0, data=FLOCK.pack(7, 0, 0, 0, 0), fh=rw).result))
    probe("lock-negative-start", lambda: errname(c.call(
        W_LOCK, mine, a=F_SETLK, b=0, data=FLOCK.pack(F_RDLCK, 0, -5, 0, 0), fh=rw).result))
    probe("lock-short-struct", lambda: errname(c.call(W_LOCK, mine, a=F_SETLK, b=0, data=b"12345", fh=rw).result))
    probe("lock-wait-command", lambda: errname(c.call(
        W_LOCK, mine, a=7, b=0, data=FLOCK.pack(F_RDLCK, 0, 0, 0, 0), fh=rw).result))
    probe("flock-bad-op", lambda: errname(c.call(W_LOCK, mine, a=64, b=1, fh=rw).result))
    # ioctl: the data is the command's _IOC_SIZE bytes or none (M_IOWR: 4 bytes)
    probe("ioctl-size-mismatch", lambda: errname(c.call(
        W_IOCTL, mine, a=(3 << 30) | (4 << 16) | (ord("M") << 8) | 1, data=b"12345", fh=rw).result))
    d = c.call(W_OPENDIR, "/").fh
    probe("read-through-dir-handle", lambda: errname(c.call(W_READ, mine, a=10, b=0, fh=d).result))
    probe("other-mount", lambda: errname(c.call(W_READ, mine, a=10, b=0, fh=rw, mnt=1).result))


def attack_other_path(args):
    """Line 3 again: one's own read-write handle, with another file's path in the request."""
    mine, theirs = args[0], args[1]
    c = connect()
    rw = opened(c, mine, os.O_RDWR | os.O_CREAT)
    probe("read-other-path", lambda: (lambda a: a.data.decode(errors="replace").strip() or errname(a.result))(
        c.call(W_READ, theirs, a=100, b=0, fh=rw)))
    probe("write-other-path", lambda: errname(c.call(W_WRITE, theirs, data=b"attacker\n", b=0, fh=rw).result))


def attack_release_race(args):
    """Line 3 again: a release of one's own handle, on another connection, while a read
    through it is still in the file system."""
    import threading
    c1, c2 = connect(), connect()
    fh = opened(c1, "/f", os.O_RDONLY)
    out = {}
    t = threading.Thread(target=lambda: out.update(read=c1.call(W_READ, "/f", a=100, b=0, fh=fh)))
    t.start()
    time.sleep(0.5)
    probe("release", lambda: errname(c2.call(W_RELEASE, "/f", fh=fh).result))
    t.join()
    ans = out["read"]
    say("read", ans.data.decode() if ans.result >= 0 else errname(ans.result))


def attack_cache(args):
    """Line 4: the page cache of a file one may not open; another's cache closed."""
    path = args[0]
    c = connect()
    def cache_open(**kw):
        ans = c.call(W_CACHE_OPEN, path, a=0, **kw)
        if ans.result >= 0 and ans.fds:
            data = os.pread(ans.fds[0], 4096, 0)
            os.pwrite(ans.fds[0], b"attacker\n", 0)
            ans.close_fds()
            return "OK " + data.decode(errors="replace").strip()
        return errname(ans.result)
    probe("cache-open", cache_open)
    probe("cache-open-forged-fh", lambda: cache_open(fh=random.getrandbits(64)))
    mine = opened(c, args[1], os.O_RDWR | os.O_CREAT)
    probe("cache-open-other-path", lambda: cache_open(fh=mine))
    def close_others():
        seen = set()
        for fh in list(range(0, 70)) + [random.getrandbits(64) for _ in range(200)]:
            seen.add(errname(c.call(W_CACHE_CLOSE, path, fh=fh).result))
        return ",".join(sorted(seen))
    probe("cache-close", close_others)
    def release_closing_others():
        # a release of one's own handle that also names a cache's token (RELEASE_CACHE_TOO
        # = 1): forged tokens let go of nothing but the handle; another c is refused
        seen = set()
        for token in list(range(0, 10)) + [random.getrandbits(64) for _ in range(40)]:
            b = token - 2**64 if token >= 2**63 else token      # the token's bits in an int64
            seen.add(errname(c.call(W_RELEASE, args[1], fh=opened(c, args[1], os.O_RDONLY), b=b, c=1).result))
        seen.add(errname(c.call(W_RELEASE, args[1], fh=opened(c, args[1], os.O_RDONLY), b=0, c=2).result))
        return ",".join(sorted(seen))
    probe("cache-close-by-release", release_closing_others)


def attack_cache_readonly(args):
    """A reader's page cache: what it may do to it is what its open allowed (read), so it
    cannot change what another process reads from the same file."""
    path = args[0]
    c = connect()
    ro = opened(c, path, os.O_RDONLY)
    ans = c.call(W_CACHE_OPEN, path, a=0, fh=ro)
    if ans.result < 0 or not ans.fds:
        say("cache-open", errname(ans.result))
        return
    fd = ans.fds[0]
    size = os.fstat(fd).st_size
    def write():
        try:
            os.pwrite(fd, b"ATTACKER", 0)
            return "OK"
        except OSError as e:
            return errno.errorcode[e.errno]
    probe("cache-write", write)
    def mapw():
        try:
            m = mmap.mmap(fd, max(size, 1), mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
            m[:8] = b"ATTACKER"
            m.close()
            return "OK"
        except (OSError, ValueError) as e:
            return errno.errorcode.get(getattr(e, "errno", 0) or 0, type(e).__name__)
    probe("cache-map-write", mapw)
    def reopen():
        try:
            w = os.open(f"/proc/self/fd/{fd}", os.O_RDWR)
        except OSError as e:
            return errno.errorcode[e.errno]
        try:
            os.pwrite(w, b"ATTACKER", 0)
            return "OK"
        except OSError as e:
            return errno.errorcode[e.errno]
        finally:
            os.close(w)
    probe("cache-reopen-write", reopen)
    say("done")
    sys.stdin.readline()    # the test reads the file again meanwhile, then lets us go


def attack_mount(args):
    """Line 5: a mount index out of range."""
    c = connect()
    for mnt in (1, 2, 255, 60000, 65535):
        probe(f"mnt-{mnt}", lambda mnt=mnt: errname(c.call(W_GETATTR, "/", mnt=mnt).result))
    probe("still-served", lambda: errname(c.call(W_GETATTR, "/").result))


def attack_sizes(args):
    """Huge sizes and negative offsets, lengths that do not add up."""
    path = args[0]
    c = connect()
    fh = opened(c, path, os.O_RDWR)
    probe("read-negative-offset", lambda: errname(c.call(W_READ, path, a=10, b=-1, fh=fh).result))
    probe("read-huge", lambda: str(len(c.call(W_READ, path, a=1 << 62, b=0, fh=fh).data) <= CHAN_BUF))
    probe("read-negative-size", lambda: errname(c.call(W_READ, path, a=-5, b=0, fh=fh).result))
    probe("write-negative-offset", lambda: errname(c.call(W_WRITE, path, data=b"x", b=-4096, fh=fh).result))
    probe("write-offset-overflow", lambda: errname(c.call(W_WRITE, path, data=b"xx", b=(1 << 63) - 1, fh=fh).result))
    probe("truncate-negative", lambda: errname(c.call(W_TRUNCATE, path, a=-1).result))
    probe("getxattr-huge", lambda: errname(min(0, c.call(W_GETXATTR, path, "user.x", a=1 << 40).result)))
    probe("setxattr-huge", lambda: errname(c.call(W_SETXATTR, path, "user.x", data=b"v" * 70000).result))
    probe("xattr-name-long", lambda: errname(c.call(W_GETXATTR, path, "user." + "n" * 300, a=10).result))
    probe("readlink-huge", lambda: errname(min(0, c.call(W_READLINK, path, a=1 << 40).result)))
    probe("mode-bad", lambda: errname(c.call(W_CHMOD, path, a=1 << 40).result))
    probe("chown-bad", lambda: errname(c.call(W_CHOWN, path, a=1 << 40, b=-1).result))
    probe("utimens-bad", lambda: errname(c.call(W_UTIMENS, path, data=struct.pack("<qqqq", 0, -7, 0, 1 << 40)).result))
    probe("utimens-short", lambda: errname(c.call(W_UTIMENS, path, data=b"abc").result))
    probe("op-0", lambda: errname(c.call(0).result))
    probe("op-999", lambda: errname(c.call(999).result))
    probe("path2-where-none", lambda: errname(c.call(W_GETATTR, "/", "/x").result))
    probe("data-where-none", lambda: errname(c.call(W_GETATTR, "/", data=b"x").result))
    probe("still-served", lambda: errname(c.call(W_GETATTR, path).result))
    # the lengths do not add up: the connection goes, the server stays
    def bad_lengths():
        rq, body = Conn.pack(W_GETATTR, "/public")
        rq = REQ.pack(*(lambda f: (f[0] + 1000,) + f[1:])(REQ.unpack(rq)))
        return errname(c.call(0, raw=(rq, body)).result)
    probe("lengths", bad_lengths)
    d = connect()
    probe("after", lambda: errname(d.call(W_GETATTR, path).result))


def attack_stall(args):
    """Line 6: a listing bigger than the region whose data is never read; the attacker
    then sleeps while the test measures a victim."""
    d, seconds = args[0], float(args[1])
    c = connect()
    ans = c.call(W_OPENDIR, d)
    big = c.call(W_READDIR, d, fh=ans.fh, read_data=False)
    say("answered", errname(big.result))
    say("len-over-region", RESP.unpack_from(c.region, OFF_RS)[0] > CHAN_BUF)
    # a second connection that stops in the middle of its hello, and one that sends a
    # header saying a body comes and never sends it
    half = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    half.connect("\0" + os.environ["LDPFUSE_SOCKET"])
    secret = bytes.fromhex(os.environ.get("LDPFUSE_SECRET", "00" * 32))
    half.sendall(b"" if LEGACY else HELLO.pack(HELLO_MAGIC, 0, 0, secret)[:20])
    body = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    body.connect("\0" + os.environ["LDPFUSE_SOCKET"])
    rq, _ = Conn.pack(W_WRITE, "/x", data=b"y" * 8000)
    body.sendall((b"" if LEGACY else HELLO.pack(HELLO_MAGIC, 0, 0, secret)) + rq + b"/x")
    say("stalling")
    time.sleep(seconds)
    say("done")


def attack_connections(args):
    """Line 6: as many connections as one uid can open, each with its hello."""
    n = int(args[0])
    conns, outcome = [], {}
    for _ in range(n):
        try:
            c = connect(timeout=10)
            c.call(W_GETATTR, "/")
            conns.append(c)
            outcome["OK"] = outcome.get("OK", 0) + 1
        except Refused as e:
            key = f"refused {e}"
            outcome[key] = outcome.get(key, 0) + 1
            if outcome[key] > 20:
                break
        except OSError as e:    # our own fds
            outcome[errno.errorcode.get(e.errno, "?")] = outcome.get(errno.errorcode.get(e.errno, "?"), 0) + 1
            break
    for k, v in sorted(outcome.items()):
        say("conns", k, v)
    say("holding")
    sys.stdin.readline()


def attack_table(args):
    """Line 7: writes to the table of change counters every client maps."""
    c = connect()
    c.call(W_GETATTR, "/")
    fd = c.table_fd
    if fd is None:
        ans = c.call(W_COHERENCE, "/")
        fd = ans.fds[0] if ans.fds else None
    if fd is None:
        say("table none")
        return
    size = os.fstat(fd).st_size
    def try_(fn):
        try:
            fn()
            return "OK"
        except (OSError, ValueError) as e:
            return errno.errorcode.get(getattr(e, "errno", 0) or 0, type(e).__name__)
    def mode():
        with open(f"/proc/self/fdinfo/{fd}") as f:
            flags = int(f.read().split("flags:")[1].split()[0], 8)
        return "rdonly" if flags & os.O_ACCMODE == os.O_RDONLY else "writable"
    probe("mode", mode)
    probe("write", lambda: try_(lambda: os.pwrite(fd, b"\0" * 64, 0)))
    probe("map-shared-write", lambda: try_(lambda: mmap.mmap(fd, size, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)))
    def reopened(action):
        def go():
            w = os.open(f"/proc/self/fd/{fd}", os.O_RDWR)
            try:
                action(w)
            finally:
                os.close(w)
        return try_(go)
    probe("reopen-write", lambda: reopened(lambda w: os.pwrite(w, b"\0" * 64, 0)))
    probe("reopen-map-write", lambda: reopened(lambda w: mmap.mmap(w, size, mmap.MAP_SHARED, mmap.PROT_WRITE)))
    probe("reopen-truncate", lambda: reopened(lambda w: os.ftruncate(w, 0)))
    probe("reopen-grow", lambda: reopened(lambda w: os.ftruncate(w, size * 2)))
    probe("add-seals", lambda: reopened(lambda w: __import__("fcntl").fcntl(w, 1033, 8)))   # F_ADD_SEALS, F_SEAL_WRITE
    probe("still-served", lambda: errname(c.call(W_GETATTR, "/").result))


# ---- issue 32: the channel's own authentication

def environ_of(pid):
    """The socket and secret an insider holds, as a process of its uid reads them from
    /proc/PID/environ."""
    with open(f"/proc/{pid}/environ", "rb") as f:
        env = dict(kv.split(b"=", 1) for kv in f.read().split(b"\0") if b"=" in kv)
    return env[b"LDPFUSE_SOCKET"].decode(), bytes.fromhex(env[b"LDPFUSE_SECRET"].decode())


def attack_environ_thief(args):
    """Attack 4: a process outside the command, of an insider's uid (or the launcher's),
    takes the socket and secret from the insider's /proc/PID/environ and uses the file
    system: reads PATH, makes DIR."""
    name, secret = environ_of(int(args[0]))
    def read_file():
        c = Conn(name, secret)
        fh = opened(c, args[1], os.O_RDONLY)
        ans = c.call(W_READ, args[1], a=4096, b=0, fh=fh)
        return ans.data.decode(errors="replace").strip() if ans.result >= 0 else errname(ans.result)
    probe("read", read_file)
    probe("mkdir", lambda: errname(Conn(name, secret).call(W_MKDIR, args[2], a=0o777).result))


def attack_silent(args):
    """Attack 5: N connections that say nothing, held for SECONDS: how many were handed a
    region (an fd came) and how many the server dropped meanwhile. NAME, or the
    environment's socket."""
    n, seconds = int(args[0]), float(args[1])
    name = args[2] if len(args) > 2 else os.environ["LDPFUSE_SOCKET"]
    socks = []
    for _ in range(n):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.setblocking(False)
        for _try in range(400):
            try:
                s.connect("\0" + name)
                socks.append(s)
                break
            except BlockingIOError:     # the backlog is full: give the server a moment
                time.sleep(0.005)
            except OSError as e:
                say("connect", errno.errorcode.get(e.errno, "?"))
                break
        else:
            s.close()
            break               # the server takes no more
        if socks[-1:] != [s]:
            break
    say("opened", len(socks))
    region, dropped, live = 0, 0, list(socks)
    end = time.monotonic() + seconds
    while live and time.monotonic() < end:
        p = select.poll()
        by_fd = {s.fileno(): s for s in live}
        for fd in by_fd:
            p.register(fd, select.POLLIN | select.POLLRDHUP)
        for fd, _ev in p.poll(200):
            s = by_fd[fd]
            try:
                msg, fds = recv_fds(s, RESP.size)
            except (BlockingIOError, InterruptedError):
                continue
            except OSError:
                msg, fds = b"", []
            if fds:
                region += 1
                for f in fds:
                    os.close(f)
            if not msg:
                dropped += 1
                live.remove(s)
                s.close()
            elif not fds:
                dropped += 1        # a refusal: the server's hello without a region
                live.remove(s)
                s.close()
    say("region", region)
    say("dropped", dropped)
    for s in socks:
        s.close()


def attack_hold_handle(args):
    """Attack 7, the victim's side: a process of the command opens PATH (a raw client, so
    the test sees its token), writes the token to TOKENFILE, and a child it forks (which
    inherited the handle, as a forked process inherits an fd) reads through it; then it
    holds the handle until a line comes on stdin."""
    path, tokenfile = args[0], args[1]
    c = connect()
    fh = opened(c, path, os.O_RDONLY)
    pid = os.fork()
    if pid == 0:
        try:
            ans = connect().call(W_READ, path, a=4096, b=0, fh=fh)
            say("inherited-read", ans.data.decode(errors="replace").strip() if ans.result >= 0 else errname(ans.result))
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    # an fd of its own said to be the file's, about to be passed (W_PASS): the server then
    # holds a passed description, which a claim by anyone else must not match
    passed = os.open(f"/proc/self/fd/{os.memfd_create('ldpfuse:' + path)}", os.O_RDONLY)
    say("passed", errname(c.call(W_PASS, path, a=passed, fh=fh).result))
    with open(tokenfile + ".tmp", "w") as f:
        f.write(str(fh))
    os.chmod(tokenfile + ".tmp", 0o644)
    os.rename(tokenfile + ".tmp", tokenfile)
    say("holding")
    sys.stdin.readline()
    c.close()


def attack_learned_handle(args):
    """Attack 7: a process of the command that was never given the fd reads PATH through a
    token it learned (TOKENFILE), and releases it."""
    path, tokenfile = args[0], args[1]
    fh = int(open(tokenfile).read())
    c = connect()
    def read():
        ans = c.call(W_READ, path, a=4096, b=0, fh=fh)
        return ans.data.decode(errors="replace").strip() if ans.result >= 0 else errname(ans.result)
    probe("learned-read", read)
    probe("learned-release", lambda: errname(c.call(W_RELEASE, path, fh=fh).result))
    # the token does not let it pass the handle on, and no fd of its own (one like the
    # holder's: a memfd of that name, opened read-only) is the holder's passed one
    probe("learned-pass", lambda: errname(c.call(W_PASS, path, a=0, fh=fh).result))
    mine = os.open(f"/proc/self/fd/{os.memfd_create('ldpfuse:' + path)}", os.O_RDONLY)
    probe("learned-claim", lambda: errname(c.call(W_CLAIM, path, a=mine).result))
    probe("learned-read-after-claim", read)


def attack_written(args):
    """W_WRITTEN ("I wrote this passthrough file") about PATH, by a process that may not
    write it."""
    probe("written", lambda: errname(connect().call(W_WRITTEN, args[0]).result))


def attack_fake_server(args):
    """Attack 3, the attacker's server: binds NAME (the dead launcher's, from
    /proc/net/unix) and listens for SECONDS; says its pid first, then how many connections
    came and every hello it heard (hex), which would hold the run's secret."""
    name, seconds = args[0], float(args[1])
    say("pid", os.getpid())
    srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    srv.bind("\0" + name)
    srv.listen(64)
    srv.settimeout(0.1)
    conns, heard = 0, []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            s, _ = srv.accept()
        except socket.timeout:
            continue
        conns += 1
        s.settimeout(0.5)
        try:
            data = s.recv(4096)
        except OSError:
            data = b""
        if data:
            heard.append(data[:HELLO.size].hex())
        s.close()
    say("conns", conns)
    for h in heard:
        say("heard", h)
    say("done")


ATTACKS = {name[7:].replace("_", "-"): fn for name, fn in globals().items() if name.startswith("attack_")}

if __name__ == "__main__":
    if len(sys.argv) < 2 or sys.argv[1] not in ATTACKS:
        sys.exit(f"usage: {sys.argv[0]} {{{','.join(ATTACKS)}}} ARG...")
    ATTACKS[sys.argv[1]](sys.argv[2:])
