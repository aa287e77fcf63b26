"""inotify on mount paths (native/interpose/notify.c, docs/limitations.md). The kernel does
not see the mount, so no watch can report the changes made through it: inotify_add_watch
on a mount path (through libc, syscall() or, under the safety net, inline) answers
EOPNOTSUPP once the path is found (ENOENT, ENOTDIR as natively), and programs that can
fall back to polling do so. Before, the path went to the kernel: ENOENT for a file that
exists, or, where the mount point exists on disk, a watch on the hidden file under it, and
`tail -f` never showed a line written through the mount."""

import sys

import pytest

from conftest import need

# tail -f started, then a line appended through the mount: tail must show it (within 10 s).
FOLLOW = r'''
tail -s 0.1 -f "$D/log" > "$O/seen" 2> "$O/tail.err" &
pid=$!
for i in $(seq 100); do grep -q one "$O/seen" && break; sleep 0.1; done
echo two >> "$D/log"
for i in $(seq 100); do grep -q two "$O/seen" && break; sleep 0.1; done
kill $pid
cat "$O/seen"
'''


@pytest.mark.parametrize("mount_point_on_disk", [False, True], ids=["absent", "on-disk"])
def test_tail_f_shows_a_line_written_through_the_mount(ws, mount_point_on_disk):
    need("tail")
    ws.populate(lambda d: (d / "log").write_text("one\n"))
    if mount_point_on_disk:
        ws.mnt.mkdir()
        (ws.mnt / "log").write_text("what the mount hides\n")
    r = ws.ldp_run(["sh", "-c", FOLLOW])
    assert r.stdout == "one\ntwo\n", r.describe()
    assert "Operation not supported" in (ws.ldp_out / "tail.err").read_text()
    if mount_point_on_disk:
        assert (ws.mnt / "log").read_text() == "what the mount hides\n"


WATCH = r'''
import ctypes, errno, os, platform
D = os.environ["D"]
SYS_inotify_add_watch = {"x86_64": 254, "aarch64": 27}[platform.machine()]
IN_MODIFY, IN_ONLYDIR = 0x2, 0x01000000
libc = ctypes.CDLL(None, use_errno=True)
fd = libc.inotify_init()
for name, mask in (("log", IN_MODIFY), ("", IN_MODIFY), ("missing", IN_MODIFY),
                   ("log/x", IN_MODIFY), ("log", IN_MODIFY | IN_ONLYDIR)):
    ctypes.set_errno(0)
    r = libc.inotify_add_watch(fd, os.path.join(D, name).encode(), mask)
    print(repr(name), "a watch" if r >= 0 else errno.errorcode[ctypes.get_errno()])  # ENOTSUP is EOPNOTSUPP
ctypes.set_errno(0)
r = libc.syscall(SYS_inotify_add_watch, fd, os.path.join(D, "log").encode(), IN_MODIFY)
print("syscall()", "a watch" if r >= 0 else errno.errorcode[ctypes.get_errno()])
'''


def test_inotify_add_watch_on_mount_paths_finds_the_path_then_answers_eopnotsupp(ws):
    ws.populate(lambda d: (d / "log").write_text("one\n"))
    native = ws.native_run([sys.executable, "-c", WATCH])
    r = ws.ldp_run([sys.executable, "-c", WATCH])
    assert native.stdout == ("'log' a watch\n'' a watch\n'missing' ENOENT\n'log/x' ENOTDIR\n"
                             "'log' ENOTDIR\nsyscall() a watch\n"), native.describe()
    assert r.stdout == ("'log' ENOTSUP\n'' ENOTSUP\n'missing' ENOENT\n'log/x' ENOTDIR\n"
                        "'log' ENOTDIR\nsyscall() ENOTSUP\n"), r.describe()
