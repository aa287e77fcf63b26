"""An open file passed between two processes of one command over a unix socket (SCM_RIGHTS),
step by step, for tests/test_passed_fds.py to compare with the same run on a native
directory:

    python3 passed_fd.py DIR parent|sibling|closed|exited

A child opens DIR/f (O_RDWR) and DIR/g (O_RDONLY) and sends both fds to the receiver: the
parent (which forked it), or a second child of the parent (its sibling). Neither receiver
descends from the opener. The receiver reads, writes, appends, truncates, stats and closes
through them, and a child it forks reads through them too; the opener holds its fds until
the receiver is done, then reads f through its own. Last, the top process reads f anew.
closed, exited: the opener sends f's fd to the parent and closes it at once (closed), or
ends (exited), before the parent's recvmsg; the parent then writes through it and closes
it. One line per step: its result, or the errno's name."""
import array
import errno
import os
import socket
import sys
import time


def step(name, fn):
    try:
        value = fn()
    except OSError as e:
        value = errno.errorcode.get(e.errno, str(e.errno))
    print(name, repr(value), flush=True)


def send_fds(sock, fds):
    sock.sendmsg([b"x"], [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", fds))])


def recv_fds(sock, n):
    msg, anc, flags, addr = sock.recvmsg(1, socket.CMSG_LEN(4 * n))
    fds = array.array("i")
    for level, kind, data in anc:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            fds.frombytes(data[:len(data) - len(data) % 4])
    return list(fds)


def opener(sock, d):
    f = os.open(f"{d}/f", os.O_RDWR)
    g = os.open(f"{d}/g", os.O_RDONLY)
    send_fds(sock, [f, g])
    sock.recv(1)                  # the receiver is done
    step("opener-pread", lambda: os.pread(f, 64, 0))
    step("opener-fstat", lambda: os.fstat(f).st_size)
    os.close(f)
    os.close(g)


def receiver(sock, d):
    f, g = recv_fds(sock, 2)
    step("read", lambda: os.read(f, 5))
    step("pwrite", lambda: os.pwrite(f, b"HELLO", 0))
    step("write-at-offset", lambda: os.write(f, b"_"))
    step("offset", lambda: os.lseek(f, 0, os.SEEK_CUR))
    step("pwrite-past-end", lambda: os.pwrite(f, b"+tail", 12))
    step("fstat", lambda: os.fstat(f).st_size)
    step("stat-by-name", lambda: os.stat(f"{d}/f").st_size)
    step("pread", lambda: os.pread(f, 64, 0))
    pid = os.fork()
    if pid == 0:
        step("child-pread", lambda: os.pread(f, 64, 0))
        step("child-pwrite", lambda: os.pwrite(f, b"c", 1))
        step("child-g-read", lambda: os.pread(g, 64, 0))
        os._exit(0)
    os.waitpid(pid, 0)
    step("ftruncate", lambda: os.ftruncate(f, 15))
    step("fstat-after-truncate", lambda: os.fstat(f).st_size)
    step("fsync", lambda: os.fsync(f))
    step("g-read", lambda: os.pread(g, 64, 0))
    step("g-write", lambda: os.pwrite(g, b"no", 0))
    step("close", lambda: os.close(f))
    step("g-close", lambda: os.close(g))
    sock.send(b"k")


def sent_and_let_go(sock, done, d, role):
    """The opener: f's fd goes, and the opener lets go of it before anyone received it."""
    f = os.open(f"{d}/f", os.O_RDWR)
    send_fds(sock, [f])
    os.close(f)
    if role == "closed":
        os.write(done, b"c")      # closed: the receiver's recvmsg comes after this
        sock.recv(1)              # and the opener lives on until the receiver is done


def late_receiver(sock, d):
    (f,) = recv_fds(sock, 1)
    step("late-read", lambda: os.read(f, 5))
    step("late-pwrite", lambda: os.pwrite(f, b"HELLO", 0))
    step("late-write-past-end", lambda: os.pwrite(f, b"+tail", 12))
    step("late-fstat", lambda: os.fstat(f).st_size)
    step("late-stat-by-name", lambda: os.stat(f"{d}/f").st_size)
    step("late-close", lambda: os.close(f))
    step("late-after-close", lambda: open(f"{d}/f", "rb").read())
    sock.send(b"k")


def main():
    d, role = sys.argv[1], sys.argv[2]
    if role not in ("parent", "sibling", "closed", "exited"):
        sys.exit(f"usage: {sys.argv[0]} DIR parent|sibling|closed|exited")
    with open(f"{d}/f", "wb") as out:
        out.write(b"hello world\n")
    with open(f"{d}/g", "wb") as out:
        out.write(b"read only\n")
    a, b = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    if role in ("closed", "exited"):
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:
            sent_and_let_go(a, w, d, role)
            os._exit(0)
        if role == "closed":
            os.read(r, 1)
        else:
            os.waitpid(pid, 0)
            time.sleep(0.5)       # the server sees the opener's connection go
        late_receiver(b, d)
        if role == "closed":
            os.waitpid(pid, 0)
        step("after-read", lambda: open(f"{d}/f", "rb").read())
        step("after-stat", lambda: os.stat(f"{d}/f").st_size)
        return
    kids = []
    pid = os.fork()
    if pid == 0:
        opener(a, d)
        os._exit(0)
    kids.append(pid)
    if role == "parent":
        receiver(b, d)
    else:
        pid = os.fork()
        if pid == 0:
            receiver(b, d)
            os._exit(0)
        kids.append(pid)
    for pid in kids:
        os.waitpid(pid, 0)
    step("after-read", lambda: open(f"{d}/f", "rb").read())
    step("after-stat", lambda: os.stat(f"{d}/f").st_size)


main()
