"""Unit tests of the public API and of the two examples, called from Python.

No interposer is involved: Memory and Loopback are instantiated directly and
their methods called with mount-relative paths, as the dispatcher would.
"""

import errno
import importlib.util
import logging
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import ldpfuse_py
from ldpfuse_py import (
    ENOTSUP, FileInfo, FuseOSError, LoggingMixIn, Operations, Passthrough,
    fuse_get_context,
)

REPO = Path(__file__).resolve().parent.parent


def load_example(name):
    spec = importlib.util.spec_from_file_location(
        f"ldpfuse_example_{name}", REPO / "examples" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


memory_example = load_example("memory")
Memory = memory_example.Memory
Loopback = load_example("loopback").Loopback


def raises_errno(code, func, *args):
    with pytest.raises(OSError) as info:
        func(*args)
    assert info.value.errno == code, (
        f"expected {errno.errorcode[code]}, got {info.value!r}")


# ---------------------------------------------------------------- the API


def test_fuse_os_error_carries_errno_and_strerror():
    e = FuseOSError(errno.ENOENT)
    assert isinstance(e, OSError)
    assert e.errno == errno.ENOENT
    assert e.strerror == os.strerror(errno.ENOENT)


def test_enotsup_is_the_platform_errno():
    assert ENOTSUP == errno.ENOTSUP


def test_package_reexports_the_api_and_version():
    for name in ("Operations", "FuseOSError", "LoggingMixIn", "fuse_get_context",
                 "Passthrough", "FileInfo", "ENOTSUP"):
        assert getattr(ldpfuse_py, name) is getattr(ldpfuse_py.operations, name)
    assert ldpfuse_py.__version__ == "0.1.0"


def test_operations_defaults_are_fusepys():
    ops = Operations()
    assert ops.use_ns is False
    assert ops.getattr("/") == {"st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2}
    raises_errno(errno.ENOENT, ops.getattr, "/x")
    assert ops.readdir("/", 0) == [".", ".."]
    assert ops.access("/", os.R_OK) == 0
    assert ops.open("/f", os.O_RDONLY) == 0
    assert ops.opendir("/") == 0
    assert ops.listxattr("/") == []
    assert ops.statfs("/") == {}
    for op in ("flush", "release", "releasedir"):
        assert getattr(ops, op)("/", 0) == 0
    assert ops.fsync("/", 0, 0) == 0
    assert ops.fsyncdir("/", 0, 0) == 0
    assert ops.utimens("/") == 0
    assert ops.init("/") is None
    assert ops.destroy("/") is None
    assert ops.bmap is None and ops.lock is None
    raises_errno(errno.EIO, ops.read, "/f", 10, 0, 0)
    raises_errno(errno.ENOENT, ops.readlink, "/l")
    raises_errno(ENOTSUP, ops.getxattr, "/", "user.a")
    raises_errno(ENOTSUP, ops.setxattr, "/", "user.a", b"v", 0)
    raises_errno(ENOTSUP, ops.removexattr, "/", "user.a")
    raises_errno(errno.ENOTTY, ops.ioctl, "/", 0, 0, 0, 0, None)
    for op, args in [("chmod", (0o644,)), ("chown", (0, 0)), ("create", (0o644,)),
                     ("link", ("/b",)), ("mkdir", (0o755,)), ("mknod", (0o644, 0)),
                     ("rename", ("/b",)), ("rmdir", ()), ("symlink", ("/b",)),
                     ("truncate", (0,)), ("unlink", ()), ("write", (b"x", 0, 0))]:
        raises_errno(errno.EROFS, getattr(ops, op), "/a", *args)


def test_call_dispatches_by_name_and_answers_efault_for_unknown_ops():
    class FS(Operations):
        def getattr(self, path, fh=None):
            return {"st_mode": stat.S_IFREG | 0o644, "path": path, "fh": fh}

    fs = FS()
    assert fs("getattr", "/a", 7) == {"st_mode": stat.S_IFREG | 0o644, "path": "/a", "fh": 7}
    raises_errno(errno.EFAULT, fs, "no_such_operation", "/")


def test_overriding_call_sees_every_operation():
    seen = []

    class Rewriting(Operations):
        def __call__(self, op, *args):
            seen.append(op)
            return super().__call__(op, "/" if args[0] == "/alias" else args[0], *args[1:])

    fs = Rewriting()
    assert fs("getattr", "/alias")["st_nlink"] == 2
    assert fs("readdir", "/alias", 0) == [".", ".."]
    assert seen == ["getattr", "readdir"]


def test_passthrough_holds_fd_and_fh_in_slots():
    p = Passthrough(5)
    assert (p.fd, p.fh) == (5, 0)
    p = Passthrough(6, fh=9)
    assert (p.fd, p.fh) == (6, 9)
    assert Passthrough.__slots__ == ("fd", "fh")
    with pytest.raises(AttributeError):
        p.other = 1


def test_file_info_defaults_and_slots():
    fi = FileInfo(os.O_RDWR | os.O_CREAT)
    assert fi.flags == os.O_RDWR | os.O_CREAT
    assert (fi.fh, fi.direct_io, fi.keep_cache) == (0, False, False)
    assert FileInfo().flags == 0
    assert FileInfo.__slots__ == ("flags", "fh", "direct_io", "keep_cache")
    with pytest.raises(AttributeError):
        fi.other = 1


def test_fuse_get_context_is_this_process():
    assert fuse_get_context() == (os.getuid(), os.getgid(), os.getpid())


class Logged(LoggingMixIn, Operations):
    def read(self, path, size, offset, fh):
        return b"x" * size


class ReprCounter:
    count = 0

    def __repr__(self):
        ReprCounter.count += 1
        return "ReprCounter()"


def test_logging_mixin_logs_calls_and_results_at_debug(caplog):
    with caplog.at_level(logging.DEBUG, logger="fuse.log-mixin"):
        assert Logged()("getattr", "/")["st_nlink"] == 2
    messages = [r.getMessage() for r in caplog.records if r.name == "fuse.log-mixin"]
    assert messages[0].startswith("-> getattr /")
    assert messages[1].startswith("<- getattr {")


def test_logging_mixin_logs_oserror_and_reraises(caplog):
    with caplog.at_level(logging.DEBUG, logger="fuse.log-mixin"):
        raises_errno(errno.ENOENT, Logged(), "getattr", "/missing")
    messages = [r.getMessage() for r in caplog.records if r.name == "fuse.log-mixin"]
    assert messages[-1] == "<- getattr '%s'" % FuseOSError(errno.ENOENT)


def test_logging_mixin_formats_nothing_when_debug_is_off(caplog):
    ReprCounter.count = 0
    with caplog.at_level(logging.INFO, logger="fuse.log-mixin"):
        assert Logged()("read", "/f", 3, 0, ReprCounter()) == b"xxx"
    assert ReprCounter.count == 0
    assert not [r for r in caplog.records if r.name == "fuse.log-mixin"]

    with caplog.at_level(logging.DEBUG, logger="fuse.log-mixin"):
        Logged()("read", "/f", 3, 0, ReprCounter())
    assert ReprCounter.count == 1


def test_logging_mixin_reaches_the_next_call_in_the_mro(caplog):
    class Counting(Operations):
        calls = 0

        def __call__(self, op, *args):
            Counting.calls += 1
            return super().__call__(op, *args)

    class FS(LoggingMixIn, Counting):
        pass

    FS()("getattr", "/")
    assert Counting.calls == 1


def test_importing_the_package_does_not_import_logging_or_typing():
    code = ("import sys; import ldpfuse_py; "
            "print(' '.join(m for m in ('logging', 'typing') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-S", "-c", code], cwd=REPO,
                         capture_output=True, text=True, check=True).stdout
    assert out.strip() == ""


# ---------------------------------------------------------------- Memory


@pytest.fixture
def mem():
    return Memory()


def make_file(fs, path, data=b"", mode=0o644):
    fh = fs.create(path, mode, FileInfo(os.O_RDWR | os.O_CREAT | os.O_TRUNC))
    if data:
        assert fs.write(path, data, 0, fh) == len(data)
    return fh


def names(fs, path):
    return [e if isinstance(e, str) else e[0] for e in fs.readdir(path, 0)]


def test_memory_root_is_a_directory_with_ns_times(mem):
    assert Memory.use_ns is True
    st = mem.getattr("/")
    assert stat.S_ISDIR(st["st_mode"])
    assert st["st_nlink"] == 2
    assert isinstance(st["st_mtime"], int) and st["st_mtime"] > 10**18
    for key in ("st_ino", "st_uid", "st_gid", "st_size", "st_blocks", "st_blksize",
                "st_atime", "st_ctime", "st_rdev"):
        assert key in st


def test_memory_create_write_read_round_trip(mem):
    fh = make_file(mem, "/f", b"hello world")
    assert fh >= 1
    assert mem.read("/f", 5, 6, fh) == b"world"
    assert mem.read("/f", 100, 0, fh) == b"hello world"
    assert mem.read("/f", 10, 50, fh) == b""
    st = mem.getattr("/f")
    assert stat.S_ISREG(st["st_mode"]) and stat.S_IMODE(st["st_mode"]) == 0o644
    assert st["st_size"] == 11 and st["st_nlink"] == 1
    assert (st["st_uid"], st["st_gid"]) == fuse_get_context()[:2]


def test_memory_open_returns_distinct_handles_released_by_release(mem):
    make_file(mem, "/f", b"abc")
    a = mem.open("/f", os.O_RDONLY)
    b = mem.open("/f", os.O_RDONLY)
    assert a >= 1 and b >= 1 and a != b
    mem.release("/f", a)
    assert a not in mem._handles and b in mem._handles


def test_memory_inodes_are_unique(mem):
    make_file(mem, "/a")
    make_file(mem, "/b")
    mem.mkdir("/d", 0o755)
    inos = {mem.getattr(p)["st_ino"] for p in ("/", "/a", "/b", "/d")}
    assert len(inos) == 4


def test_memory_write_past_end_zero_fills(mem):
    fh = make_file(mem, "/f", b"ab")
    mem.write("/f", b"Z", 5, fh)
    assert mem.read("/f", 10, 0, fh) == b"ab\0\0\0Z"


def test_memory_overwrite_in_middle_and_across_end(mem):
    fh = make_file(mem, "/f", b"0123456789")
    mem.write("/f", b"ab", 3, fh)
    mem.write("/f", b"XYZ", 8, fh)
    assert mem.read("/f", 100, 0, fh) == b"012ab567XYZ"


def test_memory_appends_grow_one_bytearray_in_place(mem):
    fh = make_file(mem, "/log")
    buf = mem._handles[fh].data
    chunk = b"0123456789"
    for i in range(100_000):
        assert mem.write("/log", chunk, i * 10, fh) == 10
    assert mem._handles[fh].data is buf
    assert len(buf) == 1_000_000
    assert buf == chunk * 100_000


def test_memory_write_accepts_memoryview(mem):
    fh = make_file(mem, "/f")
    mem.write("/f", memoryview(b"abcdef")[1:4], 0, fh)
    assert mem.read("/f", 10, 0, fh) == b"bcd"


def test_memory_truncate_shrinks_and_zero_extends(mem):
    fh = make_file(mem, "/f", b"abcdef")
    mem.truncate("/f", 3)
    assert mem.read("/f", 10, 0, fh) == b"abc"
    mem.truncate("/f", 5, fh)
    assert mem.read("/f", 10, 0, fh) == b"abc\0\0"
    raises_errno(errno.EISDIR, mem.truncate, "/", 0)


def test_memory_write_updates_mtime_and_ctime(mem):
    fh = make_file(mem, "/f")
    mem.utimens("/f", (1, 2))
    mem.write("/f", b"x", 0, fh)
    st = mem.getattr("/f")
    assert st["st_mtime"] > 2 and st["st_ctime"] > 2 and st["st_atime"] == 1


def test_memory_open_with_o_trunc_empties_the_file(mem):
    make_file(mem, "/f", b"abc")
    fh = mem.open("/f", os.O_WRONLY | os.O_TRUNC)
    assert mem.getattr("/f", fh)["st_size"] == 0
    fh = mem.open("/f", os.O_RDONLY)
    assert mem.read("/f", 10, 0, fh) == b""


def test_memory_create_on_existing_file_opens_it_unless_o_excl(mem):
    make_file(mem, "/f", b"abc")
    fh = mem.create("/f", 0o600, FileInfo(os.O_RDWR | os.O_CREAT))
    assert mem.read("/f", 10, 0, fh) == b"abc"
    raises_errno(errno.EEXIST, mem.create, "/f", 0o600,
                 FileInfo(os.O_RDWR | os.O_CREAT | os.O_EXCL))
    raises_errno(errno.EISDIR, mem.create, "/", 0o600, FileInfo(os.O_RDWR | os.O_CREAT))


def test_memory_create_without_file_info_works_like_fusepy(mem):
    fh = mem.create("/f", 0o640)
    mem.write("/f", b"x", 0, fh)
    assert mem.getattr("/f")["st_size"] == 1
    assert stat.S_IMODE(mem.getattr("/f")["st_mode"]) == 0o640


def test_memory_missing_component_is_enoent_and_file_component_is_enotdir(mem):
    make_file(mem, "/f")
    raises_errno(errno.ENOENT, mem.getattr, "/nope")
    raises_errno(errno.ENOENT, mem.getattr, "/nope/x")
    raises_errno(errno.ENOTDIR, mem.getattr, "/f/x")
    raises_errno(errno.ENOTDIR, mem.create, "/f/x", 0o644, FileInfo(os.O_CREAT))
    raises_errno(errno.ENOENT, mem.mkdir, "/nope/d", 0o755)
    raises_errno(errno.ENOTDIR, mem.readdir, "/f", 0)
    raises_errno(errno.ENOTDIR, mem.opendir, "/f")


def test_memory_data_operations_on_a_directory_are_eisdir(mem):
    mem.mkdir("/d", 0o755)
    raises_errno(errno.EISDIR, mem.open, "/d", os.O_WRONLY)
    raises_errno(errno.EISDIR, mem.read, "/d", 1, 0, None)
    make_file(mem, "/f")
    raises_errno(errno.ENOTDIR, mem.open, "/f", os.O_RDONLY | os.O_DIRECTORY)


def test_memory_mkdir_counts_links_and_lists_entries(mem):
    mem.mkdir("/d", 0o750)
    mem.mkdir("/d/e", 0o755)
    make_file(mem, "/d/f")
    assert mem.getattr("/")["st_nlink"] == 3
    assert mem.getattr("/d")["st_nlink"] == 3
    assert mem.getattr("/d/e")["st_nlink"] == 2
    assert stat.S_IMODE(mem.getattr("/d")["st_mode"]) == 0o750
    entries = mem.readdir("/d", 0)
    assert entries[:2] == [".", ".."]
    by_name = {name: (attrs, off) for name, attrs, off in entries[2:]}
    assert set(by_name) == {"e", "f"}
    assert by_name["e"][0]["st_ino"] == mem.getattr("/d/e")["st_ino"]
    assert stat.S_ISDIR(by_name["e"][0]["st_mode"])
    assert stat.S_ISREG(by_name["f"][0]["st_mode"])
    assert by_name["f"][1] == 0
    raises_errno(errno.EEXIST, mem.mkdir, "/d", 0o755)
    raises_errno(errno.EEXIST, mem.mkdir, "/d/f", 0o755)
    raises_errno(errno.EEXIST, mem.mkdir, "/", 0o755)


def test_memory_rmdir_errors_and_link_count(mem):
    mem.mkdir("/d", 0o755)
    make_file(mem, "/d/f")
    raises_errno(errno.ENOTEMPTY, mem.rmdir, "/d")
    raises_errno(errno.ENOTDIR, mem.rmdir, "/d/f")
    raises_errno(errno.ENOENT, mem.rmdir, "/nope")
    raises_errno(errno.EBUSY, mem.rmdir, "/")
    mem.unlink("/d/f")
    mem.rmdir("/d")
    assert names(mem, "/") == [".", ".."]
    assert mem.getattr("/")["st_nlink"] == 2


def test_memory_create_and_remove_update_parent_times(mem):
    mem.mkdir("/d", 0o755)
    for op, args in [("create", ("/d/f", 0o644)), ("unlink", ("/d/f",)),
                     ("mkdir", ("/d/e", 0o755)), ("rmdir", ("/d/e",))]:
        mem.utimens("/d", (1, 1))
        before = mem.getattr("/d")
        getattr(mem, op)(*args)
        after = mem.getattr("/d")
        assert after["st_mtime"] > before["st_mtime"] == 1, op
        assert after["st_ctime"] >= before["st_ctime"], op


def test_memory_unlink_of_directory_is_eisdir(mem):
    mem.mkdir("/d", 0o755)
    raises_errno(errno.EISDIR, mem.unlink, "/d")
    raises_errno(errno.ENOENT, mem.unlink, "/nope")


def test_memory_unlinked_file_stays_usable_through_its_handle(mem):
    fh = make_file(mem, "/f", b"keep")
    mem.unlink("/f")
    raises_errno(errno.ENOENT, mem.getattr, "/f")
    assert mem.read("/f", 10, 0, fh) == b"keep"
    mem.write("/f", b"!", 4, fh)
    mem.truncate("/f", 5, fh)
    assert mem.read("/f", 10, 0, fh) == b"keep!"
    assert mem.getattr("/f", fh)["st_nlink"] == 0
    make_file(mem, "/f", b"new")  # a new file under the old name is another inode
    assert mem.read("/f", 10, 0, fh) == b"keep!"
    mem.release("/f", fh)


def test_memory_write_after_rename_reaches_the_open_inode(mem):
    fh = make_file(mem, "/a", b"1")
    mem.rename("/a", "/b")
    mem.write("/a", b"2", 1, fh)
    rfh = mem.open("/b", os.O_RDONLY)
    assert mem.read("/b", 10, 0, rfh) == b"12"


def test_memory_hard_links_share_the_inode(mem):
    fh = make_file(mem, "/a", b"data")
    mem.mkdir("/d", 0o755)
    mem.link("/d/b", "/a")  # fusepy's order: link(target, source)
    a, b = mem.getattr("/a"), mem.getattr("/d/b")
    assert a["st_ino"] == b["st_ino"]
    assert a["st_nlink"] == b["st_nlink"] == 2
    mem.write("/a", b"DATA", 0, fh)
    assert mem.read("/d/b", 10, 0, mem.open("/d/b", os.O_RDONLY)) == b"DATA"
    mem.unlink("/a")
    assert mem.getattr("/d/b")["st_nlink"] == 1
    raises_errno(errno.EPERM, mem.link, "/e", "/d")
    raises_errno(errno.EEXIST, mem.link, "/d/b", "/d/b")
    raises_errno(errno.ENOENT, mem.link, "/x", "/nope")


def test_memory_rename_replaces_an_existing_file(mem):
    make_file(mem, "/a", b"A")
    make_file(mem, "/b", b"B")
    ino = mem.getattr("/a")["st_ino"]
    mem.utimens("/a", (1, 1))
    mem.rename("/a", "/b")
    assert names(mem, "/") == [".", "..", "b"]
    st = mem.getattr("/b")
    assert st["st_ino"] == ino and st["st_size"] == 1
    assert st["st_ctime"] > 1  # rename changes ctime
    assert st["st_mtime"] == 1  # but not mtime


def test_memory_rename_moves_a_directory_over_an_empty_one(mem):
    mem.mkdir("/src", 0o755)
    make_file(mem, "/src/f", b"x")
    mem.mkdir("/dst", 0o755)
    mem.mkdir("/p", 0o755)
    mem.mkdir("/p/dst", 0o755)
    mem.rename("/src", "/p/dst")
    assert names(mem, "/p/dst") == [".", "..", "f"]
    assert names(mem, "/") == [".", "..", "dst", "p"]
    assert mem.getattr("/")["st_nlink"] == 4  # dst, p
    assert mem.getattr("/p")["st_nlink"] == 3


def test_memory_rename_directory_updates_its_parent_for_later_checks(mem):
    mem.mkdir("/a", 0o755)
    mem.mkdir("/b", 0o755)
    mem.rename("/a", "/b/a")
    mem.mkdir("/b/a/c", 0o755)
    raises_errno(errno.EINVAL, mem.rename, "/b", "/b/a/c/b")


def test_memory_rename_errors(mem):
    mem.mkdir("/d", 0o755)
    mem.mkdir("/full", 0o755)
    make_file(mem, "/full/f")
    make_file(mem, "/f")
    raises_errno(errno.ENOTEMPTY, mem.rename, "/d", "/full")
    raises_errno(errno.ENOTDIR, mem.rename, "/d", "/f")
    raises_errno(errno.EISDIR, mem.rename, "/f", "/d")
    raises_errno(errno.EINVAL, mem.rename, "/d", "/d/sub")
    raises_errno(errno.ENOENT, mem.rename, "/nope", "/x")
    raises_errno(errno.ENOENT, mem.rename, "/f", "/nope/x")
    raises_errno(errno.EBUSY, mem.rename, "/", "/x")
    assert names(mem, "/") == [".", "..", "d", "full", "f"]


def test_memory_rename_of_a_name_onto_its_own_hard_link_is_a_no_op(mem):
    make_file(mem, "/a")
    mem.link("/b", "/a")
    mem.rename("/a", "/b")
    assert names(mem, "/") == [".", "..", "a", "b"]
    mem.rename("/a", "/a")
    assert mem.getattr("/a")["st_nlink"] == 2


def test_memory_open_of_a_symlink_is_eloop(mem):
    mem.symlink("/l", "f")
    make_file(mem, "/f")
    raises_errno(errno.ELOOP, mem.open, "/l", os.O_RDONLY | os.O_NOFOLLOW)
    raises_errno(errno.ELOOP, mem.create, "/l", 0o644, FileInfo(os.O_CREAT | os.O_WRONLY))
    raises_errno(errno.EEXIST, mem.create, "/l", 0o644,
                 FileInfo(os.O_CREAT | os.O_EXCL | os.O_WRONLY))


def test_memory_symlink_and_readlink(mem):
    mem.symlink("/l", "some/target")  # fusepy's order: symlink(target, source)
    st = mem.getattr("/l")
    assert stat.S_ISLNK(st["st_mode"])
    assert st["st_size"] == len("some/target")
    assert mem.readlink("/l") == "some/target"
    make_file(mem, "/f")
    raises_errno(errno.EINVAL, mem.readlink, "/f")
    raises_errno(errno.EEXIST, mem.symlink, "/f", "x")
    raises_errno(errno.EOPNOTSUPP, mem.chmod, "/l", 0o600)
    assert mem.getattr("/l")["st_mode"] == stat.S_IFLNK | 0o777


def test_memory_chmod_keeps_the_file_type_and_chown_minus_one_keeps_ids(mem):
    make_file(mem, "/f")
    mem.chmod("/f", 0o4711)
    assert mem.getattr("/f")["st_mode"] == stat.S_IFREG | 0o4711
    mem.chown("/f", 123, 456)
    mem.chown("/f", -1, 789)
    st = mem.getattr("/f")
    assert (st["st_uid"], st["st_gid"]) == (123, 789)
    mem.chown("/f", 321, 0xFFFFFFFF)
    st = mem.getattr("/f")
    assert (st["st_uid"], st["st_gid"]) == (321, 789)


def test_memory_utimens_sets_ns_times_or_now(mem):
    make_file(mem, "/f")
    mem.utimens("/f", (1_000_000_001, 2_000_000_002))
    st = mem.getattr("/f")
    assert (st["st_atime"], st["st_mtime"]) == (1_000_000_001, 2_000_000_002)
    mem.utimens("/f")
    assert mem.getattr("/f")["st_mtime"] > 2_000_000_002


def test_memory_xattrs_honour_create_and_replace_flags(mem):
    make_file(mem, "/f")
    raises_errno(errno.ENODATA, mem.getxattr, "/f", "user.a")
    raises_errno(errno.ENODATA, mem.setxattr, "/f", "user.a", b"1", os.XATTR_REPLACE)
    mem.setxattr("/f", "user.a", b"1", os.XATTR_CREATE)
    raises_errno(errno.EEXIST, mem.setxattr, "/f", "user.a", b"2", os.XATTR_CREATE)
    mem.setxattr("/f", "user.a", b"2", os.XATTR_REPLACE)
    mem.setxattr("/f", "user.b", b"", 0)
    assert mem.getxattr("/f", "user.a") == b"2"
    assert sorted(mem.listxattr("/f")) == ["user.a", "user.b"]
    mem.removexattr("/f", "user.a")
    raises_errno(errno.ENODATA, mem.removexattr, "/f", "user.a")
    assert mem.listxattr("/f") == ["user.b"]


def test_memory_mknod_makes_regular_files_and_fifos(mem):
    mem.mknod("/r", stat.S_IFREG | 0o600, 0)
    mem.mknod("/p", stat.S_IFIFO | 0o644, 0)
    assert mem.getattr("/r")["st_mode"] == stat.S_IFREG | 0o600
    assert mem.getattr("/p")["st_mode"] == stat.S_IFIFO | 0o644
    fh = mem.open("/r", os.O_RDWR)
    mem.write("/r", b"ok", 0, fh)
    assert mem.read("/r", 2, 0, fh) == b"ok"
    raises_errno(errno.EEXIST, mem.mknod, "/p", stat.S_IFIFO | 0o644, 0)
    raises_errno(errno.EPERM, mem.mknod, "/d", stat.S_IFDIR | 0o755, 0)


def test_memory_access_checks_permission_bits_for_non_root(mem, monkeypatch):
    make_file(mem, "/f", mode=0o640)
    mem.chown("/f", 1000, 1000)
    memory_module = memory_example
    monkeypatch.setattr(memory_module, "fuse_get_context", lambda: (1000, 1000, 1))
    assert mem.access("/f", os.R_OK | os.W_OK) == 0
    raises_errno(errno.EACCES, mem.access, "/f", os.X_OK)
    monkeypatch.setattr(memory_module, "fuse_get_context", lambda: (2000, 1000, 1))
    assert mem.access("/f", os.R_OK) == 0
    raises_errno(errno.EACCES, mem.access, "/f", os.W_OK)
    monkeypatch.setattr(memory_module, "fuse_get_context", lambda: (2000, 2000, 1))
    raises_errno(errno.EACCES, mem.access, "/f", os.R_OK)
    assert mem.access("/f", os.F_OK) == 0
    raises_errno(errno.ENOENT, mem.access, "/nope", os.F_OK)


def test_memory_statfs_has_the_statvfs_keys(mem):
    sv = mem.statfs("/")
    for key in ("f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail",
                "f_files", "f_ffree", "f_favail", "f_namemax"):
        assert sv[key] > 0


def test_memory_dispatch_through_call(mem):
    fh = mem("create", "/f", 0o644, FileInfo(os.O_RDWR | os.O_CREAT))
    assert mem("write", "/f", b"hi", 0, fh) == 2
    assert mem("read", "/f", 2, 0, fh) == b"hi"
    raises_errno(errno.ENOENT, mem, "getattr", "/nope")


# ---------------------------------------------------------------- Loopback


@pytest.fixture
def lower(tmp_path):
    d = tmp_path / "lower"
    d.mkdir()
    return d


@pytest.fixture
def loop(lower):
    return Loopback(str(lower))


@pytest.fixture
def loop_np(lower):
    return Loopback(str(lower), passthrough="no")


def test_loopback_maps_mount_paths_under_root(loop, lower):
    (lower / "a").write_bytes(b"x")
    assert loop._lower("/") == str(lower)
    assert loop._lower("/a") == os.path.join(str(lower), "a")
    assert loop.getattr("/a")["st_ino"] == os.lstat(lower / "a").st_ino
    assert loop.getattr("/")["st_ino"] == os.lstat(lower).st_ino


def test_loopback_rejects_a_root_that_is_not_a_directory(tmp_path):
    with pytest.raises(FileNotFoundError):
        Loopback(str(tmp_path / "missing"))
    (tmp_path / "file").write_bytes(b"")
    with pytest.raises(NotADirectoryError):
        Loopback(str(tmp_path / "file"))


def test_loopback_rejects_unknown_passthrough_value(lower):
    with pytest.raises(ValueError):
        Loopback(str(lower), passthrough="maybe")


def test_loopback_getattr_has_every_key_with_ns_times(loop, lower):
    (lower / "f").write_bytes(b"12345")
    os.utime(lower / "f", ns=(1_000_000_007, 2_000_000_009))
    st = loop.getattr("/f")
    real = os.lstat(lower / "f")
    assert Loopback.use_ns is True
    assert set(st) == {"st_mode", "st_ino", "st_dev", "st_nlink", "st_uid", "st_gid",
                       "st_rdev", "st_size", "st_blksize", "st_blocks",
                       "st_atime", "st_mtime", "st_ctime"}
    assert (st["st_atime"], st["st_mtime"]) == (1_000_000_007, 2_000_000_009)
    assert st["st_ctime"] == real.st_ctime_ns
    assert (st["st_dev"], st["st_size"], st["st_mode"]) == (real.st_dev, 5, real.st_mode)


def test_loopback_hard_link_shows_same_inode_and_link_count(loop, lower):
    (lower / "a").write_bytes(b"x")
    loop.link("/b", "/a")  # link(target=new name, source=existing)
    a, b = loop.getattr("/a"), loop.getattr("/b")
    assert (a["st_ino"], a["st_dev"]) == (b["st_ino"], b["st_dev"])
    assert a["st_nlink"] == b["st_nlink"] == 2


def test_loopback_symlink_is_stored_as_given_and_not_followed(loop, lower):
    loop.symlink("/l", "../outside/target")  # symlink(target=link, source=content)
    assert os.readlink(lower / "l") == "../outside/target"
    assert loop.readlink("/l") == "../outside/target"
    assert stat.S_ISLNK(loop.getattr("/l")["st_mode"])
    loop.utimens("/l", (3_000_000_000, 4_000_000_000))  # dangling: must not follow
    assert os.lstat(lower / "l").st_mtime_ns == 4_000_000_000
    if os.getuid() == 0:
        loop.chown("/l", 1234, 5678)
        st = os.lstat(lower / "l")
        assert (st.st_uid, st.st_gid) == (1234, 5678)


def test_loopback_utimens_none_sets_now(loop, lower):
    (lower / "f").write_bytes(b"")
    os.utime(lower / "f", ns=(1, 1))
    loop.utimens("/f")
    assert os.lstat(lower / "f").st_mtime_ns > 1


def test_loopback_oserrors_pass_through_unchanged(loop, lower):
    (lower / "f").write_bytes(b"")
    (lower / "d").mkdir()
    (lower / "d" / "x").write_bytes(b"")
    raises_errno(errno.ENOENT, loop.getattr, "/nope")
    raises_errno(errno.ENOTDIR, loop.getattr, "/f/x")
    raises_errno(errno.ENOTEMPTY, loop.rmdir, "/d")
    raises_errno(errno.EEXIST, loop.mkdir, "/d", 0o755)
    raises_errno(errno.EISDIR, loop.unlink, "/d")
    raises_errno(errno.EINVAL, loop.readlink, "/f")
    raises_errno(errno.EEXIST, loop.create, "/f", 0o644,
                 FileInfo(os.O_WRONLY | os.O_CREAT | os.O_EXCL))


def test_loopback_access_raises_eacces(loop, lower):
    (lower / "f").write_bytes(b"")
    os.chmod(lower / "f", 0o644)
    assert loop.access("/f", os.R_OK) is None
    raises_errno(errno.EACCES, loop.access, "/f", os.X_OK)
    raises_errno(errno.EACCES, loop.access, "/nope", os.F_OK)


def test_loopback_xattrs_on_the_lower_file(loop, lower):
    (lower / "f").write_bytes(b"")
    try:
        os.setxattr(lower / "f", "user.probe", b"1")
    except OSError as e:
        pytest.skip(f"no user xattrs on {lower}: {e}")
    raises_errno(errno.ENODATA, loop.getxattr, "/f", "user.missing")
    loop.setxattr("/f", "user.a", b"v", 0)
    assert loop.getxattr("/f", "user.a") == b"v"
    raises_errno(errno.EEXIST, loop.setxattr, "/f", "user.a", b"w", os.XATTR_CREATE)
    assert sorted(loop.listxattr("/f")) == ["user.a", "user.probe"]
    loop.removexattr("/f", "user.a")
    raises_errno(errno.ENODATA, loop.removexattr, "/f", "user.a")


def test_loopback_statfs_reports_the_lower_file_system(loop, lower):
    sv = loop.statfs("/")
    real = os.statvfs(lower)
    assert set(sv) == {"f_bsize", "f_frsize", "f_blocks", "f_bfree", "f_bavail",
                       "f_files", "f_ffree", "f_favail", "f_flag", "f_namemax"}
    assert (sv["f_bsize"], sv["f_blocks"], sv["f_namemax"]) == (
        real.f_bsize, real.f_blocks, real.f_namemax)


def test_loopback_readdir_gives_types_and_inodes_without_stat(loop, lower):
    (lower / "f").write_bytes(b"")
    (lower / "d").mkdir()
    os.symlink("f", lower / "l")
    os.mkfifo(lower / "p")
    entries = loop.readdir("/", 0)
    assert entries[:2] == [".", ".."]
    by_name = {name: attrs for name, attrs, off in entries[2:]}
    assert set(by_name) == {"f", "d", "l", "p"}
    assert by_name["f"]["st_mode"] == stat.S_IFREG
    assert by_name["d"]["st_mode"] == stat.S_IFDIR
    assert by_name["l"]["st_mode"] == stat.S_IFLNK
    assert by_name["p"]["st_mode"] == 0
    for name, attrs in by_name.items():
        assert attrs["st_ino"] == os.lstat(lower / name).st_ino


def test_loopback_names_operations(loop, lower):
    loop.mkdir("/d", 0o700)
    assert stat.S_IMODE(os.stat(lower / "d").st_mode) == 0o700
    loop.mknod("/d/p", stat.S_IFIFO | 0o600, 0)
    assert stat.S_ISFIFO(os.lstat(lower / "d" / "p").st_mode)
    loop.rename("/d/p", "/p2")
    assert stat.S_ISFIFO(os.lstat(lower / "p2").st_mode)
    loop.unlink("/p2")
    loop.rmdir("/d")
    assert os.listdir(lower) == []


def test_loopback_chmod_of_a_symlink_fails_and_leaves_the_target_alone(loop, lower):
    (lower / "f").write_bytes(b"")
    os.chmod(lower / "f", 0o644)
    os.symlink("f", lower / "l")
    os.symlink("nowhere", lower / "dangling")
    raises_errno(errno.EOPNOTSUPP, loop.chmod, "/l", 0o600)
    raises_errno(errno.EOPNOTSUPP, loop.chmod, "/dangling", 0o600)
    assert stat.S_IMODE(os.stat(lower / "f").st_mode) == 0o644


def test_loopback_chmod_and_truncate(loop, lower):
    (lower / "f").write_bytes(b"abcdef")
    loop.chmod("/f", 0o600)
    assert stat.S_IMODE(os.stat(lower / "f").st_mode) == 0o600
    loop.truncate("/f", 2)
    assert (lower / "f").read_bytes() == b"ab"


def test_loopback_open_returns_passthrough_of_the_lower_file(loop, lower):
    (lower / "f").write_bytes(b"lower data")
    p = loop.open("/f", os.O_RDONLY)
    try:
        assert isinstance(p, Passthrough)
        assert os.fstat(p.fd).st_ino == os.lstat(lower / "f").st_ino
        assert os.read(p.fd, 100) == b"lower data"
    finally:
        os.close(p.fd)


def test_loopback_create_honours_o_rdwr_and_mode(loop, lower):
    p = loop.create("/new", 0o640, FileInfo(os.O_RDWR | os.O_CREAT | os.O_TRUNC))
    try:
        assert isinstance(p, Passthrough)
        os.write(p.fd, b"abc")
        assert os.pread(p.fd, 3, 0) == b"abc"  # readable: O_RDWR kept
    finally:
        os.close(p.fd)
    assert stat.S_IMODE(os.stat(lower / "new").st_mode) == 0o640 & ~current_umask()


def current_umask():
    mask = os.umask(0)
    os.umask(mask)
    return mask


def test_loopback_create_without_file_info_opens_write_only(loop, lower):
    (lower / "f").write_bytes(b"old")
    p = loop.create("/f", 0o644)
    try:
        assert os.fstat(p.fd).st_size == 0  # O_TRUNC
        raises_errno(errno.EBADF, os.read, p.fd, 1)
    finally:
        os.close(p.fd)


def test_loopback_without_passthrough_serves_data_through_python(loop_np, lower):
    fh = loop_np.create("/f", 0o644, FileInfo(os.O_RDWR | os.O_CREAT))
    assert isinstance(fh, int)
    assert loop_np.write("/f", b"hello", 0, fh) == 5
    assert loop_np.write("/f", b"J", 0, fh) == 1
    assert loop_np.read("/f", 10, 0, fh) == b"Jello"
    loop_np.truncate("/f", 2, fh)
    assert loop_np.flush("/f", fh) == 0
    loop_np.fsync("/f", 0, fh)
    loop_np.fsync("/f", 1, fh)
    assert (lower / "f").read_bytes() == b"Je"
    loop_np.unlink("/f")
    assert loop_np.getattr("/f", fh)["st_size"] == 2  # fstat of the open file
    loop_np.release("/f", fh)
    raises_errno(errno.EBADF, os.fstat, fh)
    fh = loop_np.open("/", os.O_RDONLY)
    loop_np.release("/", fh)


def test_loopback_without_passthrough_can_read_a_write_only_append_open(loop_np, lower):
    # ldpfuse fills its cache with read() and writes back at explicit offsets
    (lower / "f").write_bytes(b"old")
    fh = loop_np.open("/f", os.O_WRONLY | os.O_APPEND)
    try:
        assert loop_np.read("/f", 10, 0, fh) == b"old"
        loop_np.write("/f", b"OLD+", 0, fh)
    finally:
        loop_np.release("/f", fh)
    assert (lower / "f").read_bytes() == b"OLD+"
    fh = loop_np.create("/g", 0o644, FileInfo(os.O_WRONLY | os.O_CREAT | os.O_APPEND))
    try:
        loop_np.write("/g", b"ab", 0, fh)
        loop_np.write("/g", b"A", 0, fh)
        assert loop_np.read("/g", 10, 0, fh) == b"Ab"
    finally:
        loop_np.release("/g", fh)


def test_loopback_release_never_closes_a_passthrough_fd(loop, lower):
    (lower / "f").write_bytes(b"x")
    p = loop.open("/f", os.O_RDONLY)
    try:
        loop.release("/f", p.fd)
        os.fstat(p.fd)  # still open
    finally:
        os.close(p.fd)


def test_loopback_at_filesystem_root(tmp_path):
    fs = Loopback("/")
    assert fs._lower("/") == "/"
    assert fs._lower(str(tmp_path)) == str(tmp_path)
