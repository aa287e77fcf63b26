"""No file-related libc symbol is left unwrapped by accident.

Lists every function the C library exports (every symbol version: `*64`,
`__*_chk`, `__*_2`, `__x*`, compat names) whose name belongs to a family that
touches files by path, by fd or by directory stream, and fails on each that the
preload library neither defines nor lists below as not needing a wrapper, with
why. A new glibc, or a family added to FAMILIES, makes the missing names show up
here instead of in a program that writes past the page cache (fallocate64 was
such a name: a punched hole read back the old bytes)."""

import re
import subprocess
import sys
from pathlib import Path

import pytest

import ldpfuse_py

# Name prefixes of the functions that take a path, an fd or a directory stream, or open a
# stream on a file. Each libc name that starts with one is checked.
FAMILIES = re.compile(r"""^_*(
    open|creat|close|dup|fcntl|ioctl|read|pread|write|pwrite|lseek|llseek|
    x?f?l?stat|newfstatat|statx|statfs|fstatfs|statvfs|fstatvfs|
    truncate|ftruncate|fallocate|posix_fallocate|posix_fadvise|readahead|
    fsync|fdatasync|sync_file_range|syncfs|
    link|unlink|symlink|readlink|rename|mkdir|rmdir|mknod|mkfifo|xmknod|remove|
    chmod|fchmod|lchmod|chown|fchown|lchown|utime|futime|lutime|
    access|faccess|euidaccess|eaccess|chdir|fchdir|getcwd|getwd|get_current_dir_name|
    realpath|canonicalize_file_name|chroot|
    [lf]?getxattr|[lf]?setxattr|[lf]?listxattr|[lf]?removexattr|
    dirfd|fdopendir|opendir|readdir|closedir|rewinddir|seekdir|telldir|scandir|
    getdents|glob|nftw|ftw|fts|
    fopen|fdopen|freopen|fclose|fcloseall|tmpfile|mkstemp|mkostemp|mkdtemp|mktemp|
    tempnam|tmpnam|mmap|munmap|msync|copy_file_range|sendfile|splice|tee|vmsplice|
    flock|lockf|name_to_handle|open_by_handle|inotify|fanotify|
    posix_spawn|exec|fexecve|dlopen|isatty|ttyname|
    mount|umount|swapon|swapoff|acct
)""", re.X)

# Exported names of those families that need no wrapper, and why.
NOT_NEEDED = {
    # glibc's own: GLIBC_PRIVATE, called only between glibc's libraries
    **{n: "GLIBC_PRIVATE: only glibc's own libraries call it" for n in (
        "__close_nocancel", "__fstat64", "__mmap", "__munmap", "__open64_nocancel",
        "__open_nocancel", "__pread64_nocancel", "__read_nocancel", "__write_nocancel",
        "__open_catalog", "__mktemp")},
    # work on the kernel fd as it is: for a cached file the memfd every process of the
    # mount shares, for a passthrough file the lower file
    "posix_fadvise": "advice only; the kernel applies it to the memfd or the lower file",
    "posix_fadvise64": "as posix_fadvise",
    "readahead": "advice only: the kernel reads ahead in the memfd, the cache fills at read()",
    "sync_file_range": "no durability promise (man page); fsync/fdatasync reach the FS",
    "syncfs": "flushes the kernel's file systems; the FS's data is written at write()",
    "msync": "stores through a shared mapping are in the memfd every process sees; they "
             "reach the FS at the fd's flush, fsync, close, exec or exit (docs/cache.md)",
    "isatty": "asks the kernel: a memfd or a lower file is not a terminal, as natively",
    "ttyname": "as isatty", "ttyname_r": "as isatty", "__ttyname_r_chk": "as isatty",
    "tee": "pipes only", "vmsplice": "pipes only",
    "getdents64": "a virtual directory's fd is an empty directory of ours: lists nothing, "
                  "as SYS_getdents64 (docs/limitations.md); readdir and the walkers are wrapped",
    # no file is opened by name, or only outside any mount
    "fcloseall": "closes streams; their fds' records go when the numbers are reused",
    "fopencookie": "a stream over the caller's functions: no file",
    "open_memstream": "a stream in memory", "open_wmemstream": "a stream in memory",
    "mktemp": "makes a name only: the open that follows is wrapped",
    "tempnam": "makes a name only", "tmpnam": "makes a name only", "tmpnam_r": "makes a name only",
    "tmpfile": "opens in P_tmpdir (/tmp), never in a mount", "tmpfile64": "as tmpfile",
    "glob_pattern_p": "no I/O", "globfree": "no I/O", "globfree64": "no I/O",
    "execveat": "the kernel resolves the path itself, as for a path relative to a "
                "directory fd (docs/limitations.md); the exec family by path is wrapped",
    # privileged or outside what a file system serves
    "chroot": "root only; a chroot into a mount is the kernel's (docs/limitations.md)",
    "mount": "root only: the kernel's mount table",
    "umount": "root only", "umount2": "root only", "swapon": "root only", "acct": "root only",
    "name_to_handle_at": "kernel file handles: no FUSE operation to serve them (EOPNOTSUPP "
                         "from the kernel for the placeholder)",
    "open_by_handle_at": "as name_to_handle_at",
    "inotify_init": "makes an inotify fd; inotify_add_watch is wrapped",
    "inotify_init1": "as inotify_init",
    "fanotify_init": "root only", "fanotify_mark": "root only",
    "mount_setattr": "root only: the kernel's mount API", "open_tree": "root only: the kernel's mount API",
    "swapoff": "root only", "create_module": "obsolete kernel module call (ENOSYS)",
    "openpty": "opens the terminal devices (/dev/ptmx, /dev/pts), never a mount",
    # names that only look like the families
    "duplocale": "a locale, not an fd", "__duplocale": "a locale, not an fd",
    "openlog": "syslog's socket", "closelog": "syslog's socket",
    "flockfile": "a stdio stream's lock, in memory",
}
# Whole groups that build data for a wrapped call, with no I/O of their own.
NOT_NEEDED_PREFIXES = {
    "posix_spawnattr_": "attributes for posix_spawn, which is wrapped",
    "posix_spawn_file_actions_": "file actions for posix_spawn, which is wrapped and runs them",
}


def exported(lib):
    """Function names lib exports, every version."""
    out = subprocess.run(["nm", "-D", "--defined-only", str(lib)], capture_output=True, text=True,
                         check=True).stdout
    return {line.split()[2].split("@")[0] for line in out.splitlines()
            if len(line.split()) == 3 and line.split()[1] in "TWi"}


def libc_path():
    for line in Path("/proc/self/maps").read_text().splitlines():
        if re.search(r"/libc\.so\.6$", line):
            return line.split()[-1]
    pytest.skip("this Python is not linked with glibc's libc.so.6")


def preload_path():
    """The preload library the tests run: beside the package imported here (an in-place
    build), else beside the installed package (pytest run from the repository imports the
    source tree, whose ldpfuse_py/ has no library when it was installed with pip)."""
    found = sorted(Path(ldpfuse_py.__file__).parent.glob("libldpfuse*.so"))
    if not found:
        installed = subprocess.run([sys.executable, "-c", "import ldpfuse_py, os; print(os.path.dirname(ldpfuse_py.__file__))"],
                                   capture_output=True, text=True, cwd="/").stdout.strip()
        found = sorted(Path(installed).glob("libldpfuse*.so")) if installed else []
    assert found, "libldpfuse.so is not built"
    return found[0]


def test_every_file_related_libc_symbol_is_wrapped_or_says_why_not():
    libc = {n for n in exported(libc_path()) if FAMILIES.match(n)}
    ours = exported(preload_path())
    missing = sorted(n for n in libc - ours if n not in NOT_NEEDED
                     and not any(n.startswith(p) for p in NOT_NEEDED_PREFIXES))
    assert not missing, ("libc exports these file-related functions that the preload library "
                         f"neither wraps nor lists in NOT_NEEDED: {missing}")


def test_no_symbol_is_both_wrapped_and_listed_as_not_needed():
    ours = exported(preload_path())
    both = sorted(n for n in NOT_NEEDED if n in ours)
    assert not both, f"wrapped, yet listed as not needing a wrapper: {both}"
