"""A wire-protocol fuzzer for the shared mode's server: random and mutated requests on real
connections, for a bounded time. Run inside a command (it reads LDPFUSE_SOCKET and
LDPFUSE_SECRET from its environment, as the command's processes have them), without the
preload: `env -u LD_PRELOAD python3 wire_fuzz.py SECONDS SEED ROOT`. tests/test_wire_fuzz.py
runs it as root and as uid 65534 (-o allow_other) beside a victim.

Every request names paths under ROOT (a directory of its own: the victim's files are
elsewhere), so what it does to the tree it does to its own. Requests are of four kinds:
well-formed ones with random fields (any op, sometimes another mount, sizes and offsets
from the edges of their ranges, handles it was given or random ones), names mutated
(`..`, `//`, NUL, overlong), headers whose bytes are flipped at random (lengths that do
not add up cost the connection, which is then made again), and hellos that are wrong or
cut short. The server must answer every request it does not drop the connection for,
within ANSWER_TIMEOUT: a request left unanswered is a hang, and the fuzzer says so and
exits 1. The last line is a summary: `fuzz requests N answered A dropped D hellos H`.
"""

import os
import random
import socket
import struct
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "programs"))
import wire_attacker as w  # noqa: E402

ANSWER_TIMEOUT = 20.0
EDGES = [0, 1, -1, 2, 7, 255, 256, 4095, 4096, 65535, 65536, 65537, w.CHAN_BUF - 1, w.CHAN_BUF, w.CHAN_BUF + 1,
         2**31 - 1, 2**31, -2**31, 2**32, 2**62, 2**63 - 1, -2**63, 0o777, 0o100644, 0o40755, 0o170000 | 0o7777]


def edge(rng):
    return rng.choice(EDGES) if rng.random() < 0.7 else rng.randrange(-2**63, 2**63)


def name(rng, root, made):
    r = rng.random()
    if made and r < 0.4:
        return rng.choice(made)
    if r < 0.6:
        return root
    parts = [rng.choice(["a", "b", "dir", "f", "x" * rng.randrange(1, 40)]) for _ in range(rng.randrange(1, 4))]
    return root + "/" + "/".join(parts)


def mutate_name(rng, p):
    p = os.fsencode(p)
    how = rng.randrange(9)
    if how == 0:
        return p + b"/.."
    if how == 1:
        return p + b"/../../.."
    if how == 2:
        return p.replace(b"/", b"//", 1)
    if how == 3:
        return p + b"\0tail"
    if how == 4:
        return p + b"/" + b"n" * rng.choice([255, 256, 4000])
    if how == 5:
        return b"/" + b"d/" * rng.choice([2047, 2048, 3000])
    if how == 6:
        return p[1:]
    if how == 7:
        return bytes(rng.randrange(256) for _ in range(rng.randrange(0, 64)))
    return p + b"/."


class Fuzzer:
    def __init__(self, seed, root):
        self.rng = random.Random(seed)
        self.root = root
        self.conn = None
        self.tokens = []        # (op kind, token) the server gave
        self.made = []
        self.stats = dict(requests=0, answered=0, dropped=0, hellos=0)
        self.last = None

    def connection(self):
        if self.conn is None:
            self.conn = w.connect(timeout=ANSWER_TIMEOUT)
            self.tokens = []
        return self.conn

    def drop(self):
        if self.conn is not None:
            self.conn.close()
        self.conn = None
        self.stats["dropped"] += 1

    def request(self):
        rng = self.rng
        op = rng.randrange(1, w.W_OP_MAX + 1) if rng.random() < 0.95 else rng.choice([0, w.W_OP_MAX + 1, 65535])
        path = name(rng, self.root, self.made)
        path2 = b""
        if op in (w.W_RENAME, w.W_LINK):
            path2 = name(rng, self.root, self.made)
        elif op == w.W_SYMLINK:
            path2 = rng.choice(["target", "/etc/passwd", "../../x", "t" * 5000])
        elif op in (w.W_SETXATTR, w.W_GETXATTR, w.W_REMOVEXATTR):
            path2 = rng.choice(["user.a", "user.b", "trusted.x", "security.y", "system.posix_acl_access",
                                "user." + "n" * 300, "bad"])
        elif rng.random() < 0.05:
            path2 = "/stray"
        if rng.random() < 0.25:
            path = mutate_name(rng, path)
        if path2 and rng.random() < 0.15:
            path2 = mutate_name(rng, path2)
        data = b""
        if op in (w.W_WRITE, w.W_APPEND, w.W_SETXATTR, w.W_UTIMENS, w.W_IOCTL) or rng.random() < 0.05:
            size = rng.choice([0, 1, 16, 32, 100, 4096, 8192, 65536, 65537])
            data = os.urandom(size)
            if op == w.W_UTIMENS and rng.random() < 0.5:
                data = struct.pack("<qqqq", edge(rng), rng.choice([0, 999999999, 10**9, -1, (1 << 30) - 1,
                                                                   (1 << 30) - 2]),
                                   edge(rng), edge(rng))
        kw = dict(mnt=0 if rng.random() < 0.9 else rng.randrange(65536), a=edge(rng), b=edge(rng), c=edge(rng))
        if op in (w.W_OPEN, w.W_CREATE, w.W_CREATE_OPEN) and rng.random() < 0.7:
            kw["a"] = rng.choice([0o644, 0o600, 0o777, os.O_RDONLY, os.O_RDWR, os.O_WRONLY | os.O_TRUNC])
            kw["b"] = rng.choice([os.O_RDONLY, os.O_RDWR, os.O_WRONLY | os.O_CREAT, os.O_RDWR | os.O_CREAT | os.O_EXCL])
        if op in (w.W_READ, w.W_READDIR, w.W_GETXATTR, w.W_LISTXATTR, w.W_READLINK) and rng.random() < 0.5:
            kw["a"] = rng.choice([0, 1, 4096, w.CHAN_BUF, w.CHAN_BUF + 1, 2**40])
        # sizes a file system honours by allocating them (the memory example fills a hole of
        # a truncate or of a write far past the end in RAM, up to its 16 GiB limit) are kept
        # small: such a request is legal, and slow only for the class that serves it
        for key in ("a", "b"):
            if (op == w.W_TRUNCATE and key == "a") or (op in (w.W_WRITE, w.W_FSYNC) and key == "b"):
                if 1 << 24 < kw[key] <= 1 << 35:
                    kw[key] &= (1 << 24) - 1
        r = rng.random()
        if self.tokens and r < 0.5:
            kw["fh"] = rng.choice(self.tokens)
        elif r < 0.7:
            kw["fh"] = edge(rng) & (2**64 - 1)
        if rng.random() < 0.03:
            kw["uid"], kw["gid"] = rng.choice([(0, 0), (65534, 65534), (1, 1), (2**32 - 1, 2**32 - 1)])
        rq, body = w.Conn.pack(op, path, path2, data, **kw)
        if rng.random() < 0.08:     # flip bytes of the header (lengths, op, mnt, has_fh ...)
            rq = bytearray(rq)
            for _ in range(rng.randrange(1, 4)):
                rq[rng.randrange(len(rq))] = rng.randrange(256)
            rq = bytes(rq)
        return op, path, rq, body

    def one(self):
        rng = self.rng
        if rng.random() < 0.02:
            self.bad_hello()
            return
        c = self.connection()
        op, path, rq, body = self.request()
        self.last = f"request {w.REQ.unpack(rq)} body {body[:80]!r} ({len(body)} bytes)"
        self.stats["requests"] += 1
        # a connection's first request goes on the socket, where the server waits (without
        # holding a thread) for as many bytes as its header says: one that says more than
        # was sent gets no answer, by the protocol, and the fuzzer lets that connection go
        incomplete = c.region is None and w.REQ.unpack(rq)[0] > len(body)
        c.timeout = 1.0 if incomplete else ANSWER_TIMEOUT
        try:
            ans = c.call(op, raw=(rq, body))
        except (w.Gone, ConnectionError, w.Refused):
            self.drop()
            return
        except TimeoutError:
            if not incomplete:
                raise
            self.drop()
            return
        self.stats["answered"] += 1
        ans.close_fds()
        if ans.result >= 0 and ans.fh and op in (w.W_OPEN, w.W_CREATE, w.W_OPENDIR, w.W_CACHE_OPEN,
                                                  w.W_CREATE_OPEN):
            self.tokens.append(ans.fh)
            self.tokens = self.tokens[-64:]
        if ans.result >= 0 and op in (w.W_CREATE, w.W_MKDIR, w.W_MKNOD, w.W_SYMLINK, w.W_CREATE_OPEN):
            p = os.fsdecode(path) if isinstance(path, bytes) else path
            if p.startswith(self.root + "/") and len(self.made) < 200:
                self.made.append(p)

    def bad_hello(self):
        """A connection whose hello is wrong (magic, secret) or cut short."""
        rng = self.rng
        self.stats["hellos"] += 1
        self.last = "a wrong or cut hello"
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(ANSWER_TIMEOUT)
        try:
            s.connect("\0" + os.environ["LDPFUSE_SOCKET"])
            hello = bytearray(w.HELLO.pack(w.HELLO_MAGIC, 1, 0, bytes.fromhex(os.environ["LDPFUSE_SECRET"])))
            at = rng.choice([rng.randrange(8), rng.randrange(16, len(hello))])     # magic or secret
            hello[at] ^= 1 << rng.randrange(8)
            if rng.random() < 0.5:
                hello = bytearray(w.HELLO.pack(w.HELLO_MAGIC, 1, 0, bytes.fromhex(os.environ["LDPFUSE_SECRET"])))
                cut = True      # a right hello, the message cut short
            else:
                cut = False
            rq, body = w.Conn.pack(w.W_GETATTR, self.root)
            msg = bytes(hello) + rq + body
            s.sendall(msg[:rng.randrange(len(msg))] if cut else msg)
            s.shutdown(socket.SHUT_WR)
            # not waited for: a thread_safe class's server thread holds a first request cut
            # short for 10 s before it lets go (the FS thread at once); the victim's reads
            # say whether anyone else waited meanwhile
        except (ConnectionError, BrokenPipeError):
            pass
        finally:
            s.close()


def main():
    seconds, seed, root = float(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    f = Fuzzer(seed, root)
    end = time.monotonic() + seconds
    print("fuzz seed", seed, flush=True)
    try:
        while time.monotonic() < end:
            f.one()
    except TimeoutError:
        print("fuzz hang: no answer in", ANSWER_TIMEOUT, "s to", f.last, flush=True)
        sys.exit(1)
    s = f.stats
    print(f"fuzz requests {s['requests']} answered {s['answered']} dropped {s['dropped']} hellos {s['hellos']}",
          flush=True)


if __name__ == "__main__":
    main()
