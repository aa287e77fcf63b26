"""A Unix socket bound to a path in the mount appears there (stat says socket, ls
lists it, unlink removes it) and another process connects to it by that path; the
same script on a native directory gives the same output."""

from conftest import LOOPBACK

SCRIPT = r'''
import errno, os, socket, stat, subprocess, sys
D = os.environ["D"]
path = f"{D}/s"
srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
srv.bind(path)
srv.listen(1)
srv.settimeout(30)  # a child that cannot connect fails the test instead of hanging it
print("type is socket:", stat.S_ISSOCK(os.lstat(path).st_mode))
print("listed:", sorted(os.listdir(D)))
again = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
try:
    again.bind(path)
except OSError as e:
    print("second bind:", errno.errorcode[e.errno])
# another process connects by the path in the mount and says hello
child = subprocess.Popen([sys.executable, "-c",
    "import socket, sys; c = socket.socket(socket.AF_UNIX); c.connect(sys.argv[1]); "
    "c.sendall(b'hello from the child'); c.close()", path])
conn, _ = srv.accept()
print("received:", conn.recv(100).decode())
child.wait()
conn.close()
srv.close()
os.unlink(path)
print("after unlink:", sorted(os.listdir(D)))
c = socket.socket(socket.AF_UNIX)
try:
    c.connect(path)
except OSError as e:
    print("connect to removed name:", errno.errorcode[e.errno])
with open(f"{D}/plain", "w"):
    pass
try:
    c.connect(f"{D}/plain")
except OSError as e:
    print("connect to a regular file:", errno.errorcode[e.errno])
# the name can be bound again once removed
srv = socket.socket(socket.AF_UNIX)
srv.bind(path)
print("bound again:", stat.S_ISSOCK(os.stat(path).st_mode))
srv.close()
os.unlink(path)
'''


# The loopback only: in the embedded mode each process has its own memory file system,
# so the child would not see the name the parent made (docs/limitations.md).
def test_unix_socket_bound_in_the_mount_is_reachable_by_its_path(ws):
    native, _ = ws.compare_py(SCRIPT, fs=LOOPBACK)
    assert "received: hello from the child" in native.stdout
