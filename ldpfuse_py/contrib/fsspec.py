"""FsspecFS: any fsspec store (S3, GCS, Azure, HDFS, memory, local) as a mount.

    ldpfuse-run --mountpoint /mnt/data ldpfuse_py.contrib.fsspec:FsspecFS \\
        s3://bucket/prefix -o endpoint_url=http://127.0.0.1:9000 -- python train.py

The one argument is an fsspec URL; every ``-o key=value`` (before the FS spec, or after
the URL) is a storage option of that store (``endpoint_url``, ``key``, ``secret``,
``anon=true``, ...), given to ``fsspec.core.url_to_fs``. How the data moves:

- **reads are ranged**: the page cache asks ``read(path, size, offset)`` only for the
  ranges a program is about to read, plus a readahead window (docs/cache.md), and each
  such call is one ranged request (``cat_file(path, start, end)``): reading 4 KiB of a
  5 GiB object costs one GET of the window, not the object;
- **listings and attributes** come from fsspec's own listings cache (``dircache``), whose
  entries expire after ``listings_expiry_time`` seconds (default: the mount's
  ``attr_timeout``, 1 s); every change made here empties the entries it touches;
- **writes** go to a local spool file of the object, shared by every process writing
  it (:class:`Spool`), and are committed at close (``flush``) and ``fsync``: the spool
  is uploaded with ``fs.open(path, "wb")`` (a multipart upload on S3 when large), and
  the upload's error is ``close()``'s;
- **names**: ``unlink`` is ``rm_file``, ``rename`` is ``mv`` (a copy and a delete on
  object stores, recursive for a prefix), ``mkdir`` is ``mkdir``, plus an empty
  ``name/`` marker object where the store keeps no empty directories (S3), so a new
  directory is seen by every process, ``rmdir`` removes both.

Object stores have no owners, modes or times that can be set: files show as the
caller's, 0644 (directories 0755), with the store's modification time; ``chmod``,
``chown`` and ``utimens`` are accepted and change nothing. Symlinks, hard links and
xattrs are not supported (``EOPNOTSUPP``/``ENOTSUP``).

Every process runs its own instance in the default embedded mode: a file being written
is seen by other processes when it is committed (at close), as with any object store.
"""
import contextlib
import errno
import fcntl
import hashlib
import os
import stat
import sys
import tempfile
import threading
import time
from datetime import datetime

from ldpfuse_py import FuseOSError, Operations

DIR_SIZE = 4096  # what ls shows for a directory, as on ext4
SECRET_WORDS = ("key", "secret", "token", "password", "credential")


def _import_fsspec():
    """The fsspec library, never this file: a file spec (.../contrib/fsspec.py:FsspecFS)
    puts this directory first on sys.path while the file loads."""
    here = os.path.dirname(os.path.abspath(__file__))
    saved = sys.path[:]
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    try:
        import fsspec
        import fsspec.core
    finally:
        sys.path[:] = saved
    return fsspec


def storage_options(options):
    """-o values are strings: 'true'/'false' become booleans and plain integers ints,
    except for options that name a secret (a numeric key stays a string)."""
    out = {}
    for key, value in options.items():
        if isinstance(value, str) and not any(w in key.lower() for w in SECRET_WORDS):
            low = value.lower()
            if low in ("true", "false"):
                value = low == "true"
            elif low.lstrip("-").isdigit():
                value = int(low)
            else:
                try:
                    value = float(value) if "." in value else value
                except ValueError:
                    pass
        out[key] = value
    return out


def options_after_url(args):
    """`FsspecFS s3://bucket -o endpoint_url=URL`: ldpfuse-run's -o options must come
    before the FS spec, but people write them after the URL too; these arrive as
    arguments ('-o', 'key=value'), and mean the same."""
    out = {}
    args = list(args)
    while args:
        arg = args.pop(0)
        if arg == "-o" and args:
            arg = args.pop(0)
        elif arg.startswith("-o") and len(arg) > 2:
            arg = arg[2:]
        key, sep, value = arg.partition("=")
        if not sep or not key:
            raise TypeError(f"FsspecFS takes one URL, then only -o KEY=VALUE options; got {arg!r}")
        out[key] = value
    return out


def errno_of(exc):
    """The errno a program sees for an exception of the store."""
    if isinstance(exc, FuseOSError):
        return exc.errno
    if isinstance(exc, FileNotFoundError):
        return errno.ENOENT
    if isinstance(exc, FileExistsError):
        return errno.EEXIST
    if isinstance(exc, (PermissionError,)):
        return errno.EACCES
    if isinstance(exc, IsADirectoryError):
        return errno.EISDIR
    if isinstance(exc, NotADirectoryError):
        return errno.ENOTDIR
    if isinstance(exc, OSError) and exc.errno:
        return exc.errno
    return errno.EIO


_reported = set()


def store_error(exc):
    """The FuseOSError a program gets for an exception of the store. One with no errno of
    its own (missing credentials, a refused connection, a server's error) is EIO for the
    program, so the store's own words go to the log, once per message in a process."""
    code = errno_of(exc)
    if code == errno.EIO and not isinstance(exc, FuseOSError):
        what = f"{type(exc).__name__}: {' '.join(str(exc).split())}"
        if what not in _reported:
            _reported.add(what)
            from ldpfuse_py._runtime import log_line

            log_line(f"ldpfuse[{os.getpid()}]: the store failed, the caller gets EIO: {what}")
    return FuseOSError(code)


def mtime_of(info):
    for key in ("mtime", "LastModified", "last_modified", "modified", "created", "ctime"):
        value = info.get(key)
        if value is None:
            continue
        if isinstance(value, datetime):
            return value.timestamp()
        try:
            return float(value)
        except (TypeError, ValueError):
            try:
                return datetime.fromisoformat(str(value).replace("Z", "+00:00")).timestamp()
            except ValueError:
                continue
    return 0.0


@contextlib.contextmanager
def path_lock(path):
    """An exclusive flock of the file at path, which its last user may remove: after
    taking the lock, make sure path still names the file locked, else start again."""
    while True:
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            if os.fstat(fd).st_ino == os.stat(path).st_ino:
                break
        except FileNotFoundError:
            pass
        except BaseException:
            os.close(fd)
            raise
        os.close(fd)
    try:
        yield
    finally:
        os.close(fd)


class Spool:
    """The bytes of one object being written, in a local file that every process writing
    the same object shares (`<spool dir>/<hash>.data`), uploaded whole at commit.

    Why shared: in the default embedded mode each process runs its own FsspecFS, and a
    file is often written by several (`{ echo head; cat body; } > /mnt/out`: the shell
    writes, then cat at the offset the shell reached). Each one writes into the same
    spool file, and each commit uploads all of it, so the last commit holds every byte.
    A spool is filled from the object when it is made (a write into an existing object
    keeps the rest of it). Each process holding it keeps a shared flock on it; the one
    that commits last (no other holder) removes it, and one left behind by a killed
    process (no holder) is refilled from the store by the next writer. Every operation
    on it is made under an exclusive flock of `<hash>.lock` (removed with the spool)."""

    CHUNK = 4 << 20

    def __init__(self, fs, full, directory, fill=True):
        self.fs = fs
        self.full = full
        self.data_path, self.lock_path = self.paths(fs, full, directory)
        self.fd = -1
        with self.locked():
            fd = os.open(self.data_path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
            try:
                try:
                    fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    alone = True                # new, or left by a process that died
                except BlockingIOError:
                    alone = False               # another process is writing it
                if alone:
                    os.ftruncate(fd, 0)
                    if fill:
                        self._fill(fd)
                fcntl.flock(fd, fcntl.LOCK_SH)
                # kept across exec: bash runs the last command of `( echo; cat )` in the
                # subshell's own process, and the bytes the subshell wrote must stay held
                os.set_inheritable(fd, True)
            except BaseException:
                os.close(fd)
                raise
            self.fd = fd

    @staticmethod
    def paths(fs, full, directory):
        name = hashlib.sha256(f"{fs.protocol!r}|{full}".encode()).hexdigest()[:40]
        return os.path.join(directory, name + ".data"), os.path.join(directory, name + ".lock")

    @classmethod
    def peek(cls, fs, full, directory, size, offset):
        """What another process's live spool of full holds: (file size, bytes at offset)
        or None when no process is writing full."""
        data_path, lock_path = cls.paths(fs, full, directory)
        try:
            fd = os.open(data_path, os.O_RDONLY | os.O_CLOEXEC)
        except FileNotFoundError:
            return None
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return None                     # no holder: left by a process that died
            except BlockingIOError:
                pass
            with path_lock(lock_path):
                return os.fstat(fd).st_size, (os.pread(fd, size, offset) if size else b"")
        finally:
            os.close(fd)

    def _fill(self, fd):
        try:
            src = self.fs.open(self.full, "rb", block_size=self.CHUNK)
        except FileNotFoundError:
            return
        with src:
            offset = 0
            while True:
                chunk = src.read(self.CHUNK)
                if not chunk:
                    break
                os.pwrite(fd, chunk, offset)
                offset += len(chunk)

    def locked(self):
        return path_lock(self.lock_path)

    @property
    def size(self):
        return os.fstat(self.fd).st_size

    def write(self, data, offset):
        with self.locked():
            return os.pwrite(self.fd, data, offset)

    def read(self, size, offset):
        with self.locked():
            return os.pread(self.fd, size, offset)

    def truncate(self, length):
        with self.locked():
            os.ftruncate(self.fd, length)

    def commit(self):
        """Upload the whole spool (a multipart upload when it is large), then let go of it."""
        with self.locked():
            with self.fs.open(self.full, "wb") as dst:
                offset = 0
                while True:
                    chunk = os.pread(self.fd, self.CHUNK, offset)
                    if not chunk:
                        break
                    dst.write(chunk)
                    offset += len(chunk)
            self._let_go()

    def discard(self):
        with self.locked():
            self._let_go()

    def _let_go(self):
        """Under the lock: the last holder removes the spool and its lock file. Holds
        this process inherited across exec are its own: they go first."""
        mine = os.fstat(self.fd)
        for name in os.listdir("/proc/self/fd"):
            other = int(name)
            if other == self.fd:
                continue
            try:
                st = os.stat(f"/proc/self/fd/{other}")
            except OSError:
                continue
            if (st.st_dev, st.st_ino) == (mine.st_dev, mine.st_ino):
                os.close(other)
        try:
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            os.unlink(self.data_path)
            os.unlink(self.lock_path)
        except (BlockingIOError, FileNotFoundError):
            pass
        os.close(self.fd)
        self.fd = -1

    def close_fds(self):
        if self.fd >= 0:
            try:
                os.close(self.fd)
            except OSError:
                pass
            self.fd = -1


class ReadAhead:
    """Ranged reads of one object, with a window that grows while the reads are
    sequential. An object store answers each request after a fixed delay (tens of ms
    on S3), so the page cache's windows (128 KiB to a few MiB) alone would spend more
    time waiting than moving bytes: a read that continues where the previous one ended
    fetches up to `limit` bytes (doubling from 8 MiB) and keeps what the page cache did
    not ask for yet; any other read fetches exactly what was asked. At most one window is
    held per file being read."""

    FIRST = 8 << 20

    def __init__(self, limit):
        self.limit = limit
        self.lock = threading.Lock()
        self.buf = b""
        self.buf_off = 0
        self.buf_eof = False
        self.next_off = -1
        self.window = 0

    def read(self, fetch, size, offset):
        """fetch(start, end) -> bytes of the object in [start, end) (shorter at its end)."""
        with self.lock:
            out = b""
            if self.buf_off <= offset < self.buf_off + len(self.buf):
                out = self.buf[offset - self.buf_off:offset - self.buf_off + size]
                if len(out) == size or self.buf_eof:
                    self.next_off = offset + len(out)
                    return out          # all of it, or the buffer ends at the object's end
            want_off, want = offset + len(out), size - len(out)
            if self.limit and offset == self.next_off:
                self.window = min(max(self.window * 2, self.FIRST), self.limit)
            else:
                self.window = 0
            span = max(want, self.window)
            try:
                data = fetch(want_off, want_off + span)
            except Exception:
                if out:                 # the buffer ended at the object's end, exactly
                    self.buf, self.buf_off = b"", 0
                    self.next_off = offset + len(out)
                    return out
                raise
            if len(data) > want:
                self.buf, self.buf_off, self.buf_eof = data, want_off, len(data) < span
            else:
                self.buf, self.buf_off = b"", 0
            out += data[:want]
            self.next_off = offset + len(out)
            return out


def private_dir(path):
    """Is path (not a symlink) a directory of this user that nobody else may enter?"""
    try:
        st = os.lstat(path)
    except OSError:
        return False
    return stat.S_ISDIR(st.st_mode) and st.st_uid == os.getuid() and not st.st_mode & 0o077


def default_spool_dir():
    """Where the spool is without -o spool_dir: never a fixed name in a directory others
    write (another user could make it first, or swap it for a link). The user's own
    $XDG_RUNTIME_DIR; else the command's private directory (LDPFUSE_RUN_DIR, made for the
    run with a random name: every process of the command finds the same spool there, and
    it goes when the command ends); else, a script run on its own, a new mkdtemp."""
    runtime = os.environ.get("XDG_RUNTIME_DIR", "")
    if runtime.startswith("/") and private_dir(runtime):
        return os.path.join(runtime, "ldpfuse-fsspec")
    run_dir = os.environ.get("LDPFUSE_RUN_DIR", "")
    if run_dir.startswith("/") and os.path.isdir(run_dir):
        mine = os.path.join(run_dir, f"fsspec-{os.getuid()}")
        try:
            os.mkdir(mine, 0o700)
        except FileExistsError:
            pass
        except OSError:
            mine = None
        if mine and private_dir(mine):
            return mine
        # another user of the command made that name first (-o allow_other): one of our own
        return tempfile.mkdtemp(prefix=f"fsspec-{os.getuid()}-", dir=run_dir)
    return tempfile.mkdtemp(prefix=f"ldpfuse-fsspec-{os.getuid()}-")


class FsspecFS(Operations):
    """Mount the fsspec URL ``url``; keyword arguments are the store's options."""

    def __init__(self, url, *more, **options):
        self.url = url
        options = storage_options({**options_after_url(more), **options})
        # ldpfuse's own option, not the store's: the largest sequential read-ahead
        self.readahead = int(options.pop("readahead", 64 << 20))
        # and where files being written are kept until they are committed
        self.spool_dir = options.pop("spool_dir", None) or default_spool_dir()
        os.makedirs(self.spool_dir, mode=0o700, exist_ok=True)
        if not private_dir(self.spool_dir):
            raise PermissionError(f"spool_dir {self.spool_dir} must be a directory of "
                                  f"uid {os.getuid()} that only it can read (mode 0700)")
        options.setdefault("use_listings_cache", True)
        options.setdefault("listings_expiry_time",
                           float(os.environ.get("LDPFUSE_ATTR_TIMEOUT", "1") or 1))
        self.options = options
        self._pid = None
        self._fs = None
        fs = self.fs                         # a bad URL or option fails here, at start
        self.root = fs._strip_protocol(url).rstrip("/") if url else ""
        self.started = time.time()
        self.lock = threading.RLock()
        self.handles = {}                    # fh -> (path, flags)
        self.next_fh = 1
        self.writers = {}                    # path -> Spool not yet committed
        self.readers = {}                    # path -> ReadAhead while the file is open
        self.created = set()                 # made empty here, not written yet
        protocols = fs.protocol if isinstance(fs.protocol, (tuple, list)) else (fs.protocol,)
        self.markers = not {"file", "local", "memory"} & set(protocols)  # keeps no empty dirs

    def ldpfuse_start_check(self):
        """Called once by ldpfuse-run before the command starts (never in the processes it
        serves): the store must answer for the mount's root. A store that cannot be
        reached or will not let us in (no credentials, nothing listening at the endpoint)
        is one line and exit status 2, as any bad input, instead of EIO at every call; a
        root that does not exist yet (an empty prefix, a bucket the command makes) or that
        we may not read is the command's to meet."""
        try:
            self.fs.info(self.root)
        except (FileNotFoundError, NotADirectoryError, PermissionError):
            pass
        except Exception as e:
            raise RuntimeError(f"{self.url}: cannot use the store: {type(e).__name__}: "
                               f"{' '.join(str(e).split())}") from None

    # --------------------------------------------------------------- the store
    @property
    def fs(self):
        """The store's client: a new one in a forked child (fsspec's event loop and
        connections are the parent's)."""
        if self._pid != os.getpid():
            fsspec = _import_fsspec()
            self._fs, _ = fsspec.core.url_to_fs(self.url, **self.options)
            self._pid = os.getpid()
            self.writers = {}
            self.handles = {}
            self.readers = {}
            self.created = set()
        return self._fs

    def __call__(self, op, *args):
        """Every operation: in a forked child, first forget the parent's client, files
        being written and handles (they are the parent's to commit)."""
        if self._pid != os.getpid():
            self.fs
        return super().__call__(op, *args)

    def full(self, path):
        if path == "/":
            return self.root
        return f"{self.root}/{path.lstrip('/')}" if self.root else path.lstrip("/")

    def forget(self, path):
        """Empty the listing cache entries a change of path makes stale, and what was read
        ahead of it."""
        self.readers.pop(path, None)
        try:
            self.fs.invalidate_cache(self.full(path))
        except Exception:
            pass

    def _info(self, full):
        try:
            return self.fs.info(full)
        except Exception as e:
            raise store_error(e) from None

    # ------------------------------------------------------------- metadata
    def getattr(self, path, fh=None):
        now = self.started
        base = dict(st_uid=os.getuid(), st_gid=os.getgid())
        if path == "/":
            return dict(base, st_mode=stat.S_IFDIR | 0o755, st_nlink=2, st_size=DIR_SIZE,
                        st_mtime=now, st_ctime=now, st_atime=now)
        writer = self.writers.get(path)
        if writer is not None:
            return dict(base, st_mode=stat.S_IFREG | 0o644, st_nlink=1, st_size=writer.size,
                        st_mtime=time.time(), st_ctime=time.time(), st_atime=time.time())
        with self.lock:
            live = Spool.peek(self.fs, self.full(path), self.spool_dir, 0, 0)
        if live is not None:                     # another process is writing it
            return dict(base, st_mode=stat.S_IFREG | 0o644, st_nlink=1, st_size=live[0],
                        st_mtime=time.time(), st_ctime=time.time(), st_atime=time.time())
        info = self._info(self.full(path))
        if info.get("type") == "directory":
            t = mtime_of(info) or now
            return dict(base, st_mode=stat.S_IFDIR | 0o755, st_nlink=2, st_size=DIR_SIZE,
                        st_mtime=t, st_ctime=t, st_atime=t)
        t = mtime_of(info)
        return dict(base, st_mode=stat.S_IFREG | 0o644, st_nlink=1,
                    st_size=int(info.get("size") or 0), st_mtime=t, st_ctime=t, st_atime=t)

    def readdir(self, path, fh):
        full = self.full(path)
        try:
            entries = self.fs.ls(full, detail=True)
        except Exception as e:
            raise store_error(e) from None
        names = [".", ".."]
        seen = set()
        for entry in entries:
            name = entry["name"].rstrip("/").rsplit("/", 1)[-1]
            if not name or entry["name"].rstrip("/") == full.rstrip("/") or name in seen:
                continue                      # the directory's own marker object
            seen.add(name)
            is_dir = entry.get("type") == "directory"
            mode = (stat.S_IFDIR | 0o755) if is_dir else (stat.S_IFREG | 0o644)
            names.append((name, {"st_mode": mode}, 0))
        for written in list(self.writers):
            parent, _, name = written.rpartition("/")
            if (parent or "/") == path and name not in seen:
                names.append((name, {"st_mode": stat.S_IFREG | 0o644}, 0))
        return names

    def statfs(self, path):
        big = 1 << 40
        return dict(f_bsize=4096, f_frsize=4096, f_blocks=big, f_bfree=big, f_bavail=big,
                    f_files=big, f_ffree=big, f_favail=big, f_namemax=255)

    def chmod(self, path, mode):
        self.getattr(path)
        return 0

    def chown(self, path, uid, gid):
        self.getattr(path)
        return 0

    def utimens(self, path, times=None):
        self.getattr(path)
        return 0

    # ---------------------------------------------------------------- names
    def mkdir(self, path, mode):
        full = self.full(path)
        if self.fs.exists(full):
            raise FuseOSError(errno.EEXIST)
        try:
            self.fs.mkdir(full, create_parents=False)
        except FileExistsError:
            raise FuseOSError(errno.EEXIST) from None
        except Exception:
            pass                              # stores without directories say so variously
        self.forget(path)
        if self.markers and not self.fs.isdir(full):
            try:
                self.fs.pipe_file(full + "/", b"")
            except Exception as e:
                raise store_error(e) from None
        self.forget(path)
        return 0

    def rmdir(self, path):
        full = self.full(path)
        if self.getattr(path)["st_mode"] & stat.S_IFDIR != stat.S_IFDIR:
            raise FuseOSError(errno.ENOTDIR)
        if len(self.readdir(path, 0)) > 2:
            raise FuseOSError(errno.ENOTEMPTY)
        try:
            if self.markers:
                try:
                    self.fs.rm_file(full + "/")
                except FileNotFoundError:
                    pass
                self.forget(path)
            if not self.markers or self.fs.isdir(full):   # a store with real directories
                self.fs.rmdir(full)
        except Exception as e:
            raise store_error(e) from None
        finally:
            self.forget(path)
        return 0

    def unlink(self, path):
        full = self.full(path)
        attrs = self.getattr(path)
        if stat.S_ISDIR(attrs["st_mode"]):
            raise FuseOSError(errno.EISDIR)
        writer = self.writers.pop(path, None)
        if writer is not None:
            writer.discard()
            writer.close_fds()
        try:
            if self.fs.exists(full):
                self.fs.rm_file(full)
        except Exception as e:
            raise store_error(e) from None
        finally:
            self.forget(path)
        return 0

    def rename(self, old, new):
        src, dst = self.full(old), self.full(new)
        attrs = self.getattr(old)
        with self.lock:                       # commit first: the store renames objects
            self._commit(old)
        is_dir = stat.S_ISDIR(attrs["st_mode"])
        try:
            target = self.getattr(new)
        except FuseOSError:
            target = None
        if target is not None:
            if stat.S_ISDIR(target["st_mode"]):
                if not is_dir:
                    raise FuseOSError(errno.EISDIR)
                if len(self.readdir(new, 0)) > 2:
                    raise FuseOSError(errno.ENOTEMPTY)
                self.rmdir(new)
            elif is_dir:
                raise FuseOSError(errno.ENOTDIR)
        if is_dir and (new + "/").startswith(old + "/"):
            raise FuseOSError(errno.EINVAL)
        try:
            self.fs.mv(src, dst, recursive=is_dir)
            if is_dir and self.markers:       # a marker of the old name may stay behind
                try:
                    self.fs.rm_file(src + "/")
                except Exception:
                    pass
        except Exception as e:
            raise store_error(e) from None
        finally:
            self.forget(old)
            self.forget(new)
        return 0

    def symlink(self, target, source):
        raise FuseOSError(errno.EOPNOTSUPP)

    def link(self, target, source):
        raise FuseOSError(errno.EOPNOTSUPP)

    def readlink(self, path):
        raise FuseOSError(errno.EINVAL)

    # ----------------------------------------------------------------- data
    def _new_handle(self, path, flags):
        with self.lock:
            fh = self.next_fh
            self.next_fh += 1
            self.handles[fh] = (path, flags)
            return fh

    def open(self, path, flags):
        if (flags & os.O_ACCMODE) == os.O_RDONLY:
            self.getattr(path)
        return self._new_handle(path, flags)

    def create(self, path, mode, fi=None):
        # An empty object now: the file exists for every process (another image after
        # exec, another process of the tree) before its data is committed at close.
        with self.lock:
            old = self.writers.pop(path, None)
            if old is not None:
                old.discard()
                old.close_fds()
            try:
                self.fs.pipe_file(self.full(path), b"")
            except Exception as e:
                raise store_error(e) from None
            finally:
                self.forget(path)
            self.created.add(path)              # its spool need not be filled from the store
        flags = fi.flags if fi is not None else os.O_WRONLY
        return self._new_handle(path, flags | os.O_CREAT)

    def read(self, path, size, offset, fh):
        writer = self.writers.get(path)
        if writer is not None:
            return writer.read(size, offset)
        full = self.full(path)
        with self.lock:
            live = Spool.peek(self.fs, full, self.spool_dir, size, offset)
        if live is not None:                     # another process is writing it
            self.readers.pop(path, None)
            return live[1]
        reader = self.readers.get(path)
        if reader is None:
            with self.lock:
                reader = self.readers.setdefault(path, ReadAhead(self.readahead))
        try:
            return reader.read(lambda start, end: self.fs.cat_file(full, start=start, end=end),
                               size, offset)
        except Exception as e:
            if errno_of(e) == errno.ENOENT:
                raise FuseOSError(errno.ENOENT) from None
            # a range past the end is an error for some stores (S3: 416)
            info = self._info(full)
            if offset >= int(info.get("size") or 0):
                return b""
            raise store_error(e) from None

    def _writer(self, path, fill=True):
        """This process's hold on the spool of path (made, or joined, at the first write)."""
        writer = self.writers.get(path)
        if writer is None:
            if path in self.created:
                self.created.discard(path)
                fill = False
            try:
                writer = Spool(self.fs, self.full(path), self.spool_dir, fill=fill)
            except Exception as e:
                raise store_error(e) from None
            self.writers[path] = writer
            self.readers.pop(path, None)
        return writer

    def write(self, path, data, offset, fh):
        with self.lock:
            self.readers.pop(path, None)
            return self._writer(path).write(data, offset)

    def truncate(self, path, length, fh=None):
        with self.lock:
            self._writer(path, fill=length > 0).truncate(length)
            if fh is None and not any(p == path for p, _ in self.handles.values()):
                return self._commit(path)       # truncate(1): no close will come
            return 0

    def _commit(self, path):
        writer = self.writers.pop(path, None)
        if writer is None:
            return 0
        try:
            writer.commit()
        except Exception as e:
            raise store_error(e) from None
        finally:
            writer.close_fds()
            self.forget(path)
        return 0

    def flush(self, path, fh):
        """close(): the data written so far is committed, and its error is close()'s.
        A later write through another fd of the file makes a new spool from the object."""
        with self.lock:
            return self._commit(path)

    def fsync(self, path, datasync, fh):
        with self.lock:
            return self._commit(path)

    def release(self, path, fh):
        with self.lock:
            self.handles.pop(fh, None)
            if not any(p == path for p, _ in self.handles.values()):
                self.readers.pop(path, None)
                self._commit(path)
        return 0

    def destroy(self, path):
        """Process exit with files still open for writing (a program that never closed
        its stdout): commit them."""
        with self.lock:
            for written in list(self.writers):
                try:
                    self._commit(written)
                except FuseOSError as e:
                    print(f"ldpfuse fsspec: {written}: commit at exit failed: "
                          f"{os.strerror(e.errno)}", file=sys.stderr)

    # ---------------------------------------------------------------- xattrs
    def getxattr(self, path, name, position=0):
        raise FuseOSError(errno.ENOTSUP)

    def listxattr(self, path):
        return []
