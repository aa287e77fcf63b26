"""How ldpfuse-run reads the paths it is given: a relative FS file, FS_ARG
and mount point are taken relative to the directory ldpfuse-run was started
in, even when the command changes directory before it first touches the
mount (the file system is built lazily, in that process)."""

import shutil

from conftest import EXAMPLES, base_env, ldpfuse_run_argv, run

TIMEOUT = 60


def ldpfuse(ws, *args, cwd):
    return run(ldpfuse_run_argv() + [str(a) for a in args], timeout=TIMEOUT,
               cwd=cwd, env=base_env())


def test_relative_fs_file_fs_arg_and_mountpoint_resolve_from_launch_dir(ws):
    shutil.copy(EXAMPLES / "loopback.py", ws.tmp / "myloop.py")
    (ws.lower / "f").write_text("relative ok\n")
    r = ldpfuse(ws, "--mountpoint", "mnt", "myloop.py:Loopback", "lower", "--",
                "sh", "-c", f"cd / && cat {ws.mnt}/f && cd {ws.tmp} && cat mnt/f",
                cwd=ws.tmp)
    assert (r.returncode, r.stdout) == (0, "relative ok\n" * 2), r.describe()


def test_mountpoint_with_trailing_slash_or_dots_is_the_same_mount(ws):
    (ws.lower / "f").write_text("same mount\n")
    for spelling in (f"{ws.mnt}/", f"{ws.tmp}/./mnt", f"{ws.tmp}//mnt//"):
        r = ldpfuse(ws, "--mountpoint", spelling, f"{EXAMPLES / 'loopback.py'}:Loopback",
                    ws.lower, "--", "cat", f"{ws.mnt}/f", cwd=ws.tmp)
        assert (r.returncode, r.stdout) == (0, "same mount\n"), r.describe()
        assert not ws.mnt.exists()


def test_fs_arg_and_option_strings_reach_the_class_unchanged(ws):
    """FS_ARGs are positional strings and -o values keyword strings, spaces
    and '=' included."""
    fs = ws.tmp / "echo_args.py"
    fs.write_text(
        "import errno, stat\n"
        "from ldpfuse_py import FuseOSError, Operations\n"
        "class EchoArgs(Operations):\n"
        "    def __init__(self, *args, **kw):\n"
        "        self.data = (repr(args) + ' ' + repr(sorted(kw.items())) + '\\n').encode()\n"
        "    def getattr(self, path, fh=None):\n"
        "        if path == '/':\n"
        "            return dict(st_mode=stat.S_IFDIR | 0o755, st_nlink=2)\n"
        "        if path == '/args':\n"
        "            return dict(st_mode=stat.S_IFREG | 0o444, st_nlink=1, st_size=len(self.data))\n"
        "        raise FuseOSError(errno.ENOENT)\n"
        "    def readdir(self, path, fh):\n"
        "        return ['.', '..', 'args']\n"
        "    def read(self, path, size, offset, fh):\n"
        "        return self.data[offset:offset + size]\n")
    r = ldpfuse(ws, "--mountpoint", ws.mnt, "-o", "key=a value=with equals", "-o", "n=1",
                f"{fs}:EchoArgs", "first arg", "", "--x", "--", "cat", f"{ws.mnt}/args",
                cwd=ws.tmp)
    expected = repr(("first arg", "", "--x")) + " " + repr([("key", "a value=with equals"),
                                                            ("n", "1")]) + "\n"
    assert (r.returncode, r.stdout) == (0, expected), r.describe()
