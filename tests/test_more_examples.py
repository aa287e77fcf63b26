"""The archive, SQLite and encryption examples under real programs.

Every expectation is computed from the source data the test made: a tree is
described (names, types, modes, sizes, contents, symlink targets) natively and
then by the same Python script running inside the mount.
"""

import json
import os
import random
import sys
import tarfile
import zipfile

import pytest

from conftest import EXAMPLES, base_env, ldpfuse_run_argv, need, run

ARCHIVE = f"{EXAMPLES / 'archive.py'}:Archive"
SQLITEFS = f"{EXAMPLES / 'sqlitefs.py'}:SQLiteFS"
ENCRYPTED = f"{EXAMPLES / 'encrypted.py'}:Encrypted"
TIMEOUT = 120

DESCRIBE = r"""
import hashlib, json, os, stat, sys
root = sys.argv[1]
tree = {}
for dirpath, dirnames, filenames in os.walk(root):
    for name in dirnames + filenames:
        p = os.path.join(dirpath, name)
        st = os.lstat(p)
        rel = os.path.relpath(p, root)
        if stat.S_ISLNK(st.st_mode):
            tree[rel] = ['link', os.readlink(p)]
        elif stat.S_ISDIR(st.st_mode):
            tree[rel] = ['dir', oct(stat.S_IMODE(st.st_mode))]
        else:
            with open(p, 'rb') as f:
                digest = hashlib.sha256(f.read()).hexdigest()
            tree[rel] = ['file', oct(stat.S_IMODE(st.st_mode)), st.st_size, digest]
print(json.dumps(tree, sort_keys=True))
"""


def describe_native(root):
    r = run([sys.executable, "-c", DESCRIBE, root], timeout=TIMEOUT, env=base_env())
    assert r.returncode == 0, r.describe()
    return json.loads(r.stdout)


def ldp(ws, fs, fs_args, cmd, **kw):
    argv = ldpfuse_run_argv() + ["--mountpoint", ws.mnt, "--log-file", ws.tmp / "fs.log",
                                 fs, *fs_args, "--", *cmd]
    return run([str(a) for a in argv], timeout=TIMEOUT, cwd=ws.tmp, env=base_env(HOME=ws.home),
               **kw)


def describe_mount(ws, fs, fs_args, sub=""):
    r = ldp(ws, fs, fs_args, [sys.executable, "-c", DESCRIBE, f"{ws.mnt}{sub}"])
    assert r.returncode == 0, r.describe() + log_of(ws)
    return json.loads(r.stdout)


def log_of(ws):
    log = ws.tmp / "fs.log"
    return "\n--- log ---\n" + log.read_text() if log.exists() else ""


def source_tree(root, *, symlinks=True, hardlink=False, seed=5):
    rng = random.Random(seed)
    (root / "docs" / "deep").mkdir(parents=True)
    (root / "bin").mkdir()
    (root / "docs" / "readme.txt").write_text("the archive example\n" * 30)
    (root / "docs" / "deep" / "data.bin").write_bytes(rng.randbytes(300_000))
    (root / "empty").write_bytes(b"")
    script = root / "bin" / "hello.sh"
    script.write_text("#!/bin/sh\necho hello from inside\n")
    script.chmod(0o755)
    (root / "docs" / "deep").chmod(0o750)
    if symlinks:
        (root / "link").symlink_to("docs/readme.txt")
    if hardlink:
        os.link(root / "docs" / "readme.txt", root / "bin" / "hard.txt")


# ------------------------------------------------------------------ archive

def make_archive(kind, src, dest):
    if kind == "tar.gz-by-tar":
        need("tar")
        r = run(["tar", "czf", dest, "-C", src, "."], timeout=TIMEOUT, env=base_env())
        assert r.returncode == 0, r.describe()
    elif kind == "tar.xz-by-tarfile":
        with tarfile.open(dest, "w:xz") as t:
            for p in sorted(src.rglob("*")):
                t.add(p, arcname=str(p.relative_to(src)), recursive=False)
    elif kind == "zip-by-zip":
        need("zip")
        r = run(["zip", "-qry", dest, "."], timeout=TIMEOUT, cwd=src, env=base_env())
        assert r.returncode == 0, r.describe()
    elif kind == "zip-by-zipfile":
        with zipfile.ZipFile(dest, "w", zipfile.ZIP_DEFLATED) as z:
            for p in sorted(src.rglob("*")):
                z.write(p, str(p.relative_to(src)))


ARCHIVE_KINDS = {  # kind: (symlinks stored, hard links stored)
    "tar.gz-by-tar": (True, True),
    "tar.xz-by-tarfile": (True, True),
    "zip-by-zip": (True, False),
    "zip-by-zipfile": (False, False),
}


@pytest.mark.parametrize("kind", list(ARCHIVE_KINDS))
def test_archive_view_matches_the_archived_tree(ws, kind):
    symlinks, hardlink = ARCHIVE_KINDS[kind]
    src = ws.tmp / "src"
    src.mkdir()
    source_tree(src, symlinks=symlinks, hardlink=hardlink)
    archive = ws.tmp / f"a.{kind.split('-')[0]}"
    make_archive(kind, src, archive)
    assert describe_mount(ws, ARCHIVE, [archive]) == describe_native(src)


# A compressed tar read at random: members in a random order and pieces at random offsets
# through the mount, each compared with the same bytes of the extracted files by the same
# process. Restart points (examples/archive.py, class Decompressed) are what a read at an
# offset resumes from: small spacings and few points make reads cross and thin them.
CHECK_READS = r"""
import os, random, sys
mnt, native, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
rng = random.Random(seed)
names = sorted(os.path.relpath(os.path.join(d, f), native) for d, _, fs in os.walk(native) for f in fs)
order = names[:]
rng.shuffle(order)
bad, reads = [], 0
for name in order:
    with open(os.path.join(mnt, name), "rb") as f, open(os.path.join(native, name), "rb") as g:
        if f.read() != g.read():
            bad.append(("whole", name))
for _ in range(int(sys.argv[4])):
    name = rng.choice(names)
    size = os.path.getsize(os.path.join(native, name))
    fds = [os.open(os.path.join(root, name), os.O_RDONLY) for root in (mnt, native)]
    for _ in range(rng.randint(1, 4)):
        offset, length = rng.randrange(size + 100), rng.choice([1, 511, 4096, rng.randrange(1, 200000)])
        got, want = (os.pread(fd, length, offset) for fd in fds)
        reads += 1
        if got != want:
            bad.append(("pread", name, offset, length, len(got), len(want)))
    for fd in fds:
        os.close(fd)
print(len(names), "files,", reads, "preads, mismatches:", bad[:5])
"""


def random_tree(root, files, seed, big=()):
    """files of 1-32 KiB of random bytes in a few directories, and the sizes in big."""
    rng = random.Random(seed)
    sizes = [rng.randint(1024, 32 * 1024) for _ in range(files)] + list(big)
    for i, size in enumerate(sizes):
        p = root / f"d{i % 7}" / f"f{i:04d}.bin"
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_bytes(rng.randbytes(size))
    return sum(sizes)


def compressed_tar(src, dest, kind):
    """A tar of src compressed as kind: one stream ("gz", "bz2", "xz") or the tar's bytes
    in three streams one after another ("gz-members", as bgzip or `cat a.gz b.gz` make,
    "bz2-streams" as pbzip2 makes, "xz-streams")."""
    import bz2
    import gzip
    import io
    import lzma
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for p in sorted(src.rglob("*")):
            t.add(p, arcname=str(p.relative_to(src)), recursive=False)
    data = buf.getvalue()
    compress = {"gz": gzip.compress, "bz2": bz2.compress, "xz": lzma.compress}[kind.split("-")[0]]
    if "-" in kind:
        cuts = [0, len(data) // 3, len(data) // 3 * 2 + 777, len(data)]
        dest.write_bytes(b"".join(compress(data[a:b]) for a, b in zip(cuts, cuts[1:])))
    else:
        dest.write_bytes(compress(data))


@pytest.mark.parametrize("kind, files, options", [
    ("gz", 300, {}),
    ("gz", 300, {"spacing": 4096, "max_points": 8}),
    ("gz-members", 150, {"spacing": 8192}),
    ("bz2", 40, {}),
    ("bz2-streams", 40, {}),
    ("xz", 40, {}),
    ("xz-streams", 40, {}),
])
def test_archive_compressed_tar_reads_at_random_match_the_extracted_files(ws, kind, files, options):
    src = ws.tmp / "src"
    random_tree(src, files, seed=files, big=[700_000])
    archive = ws.tmp / f"a.tar.{kind}"
    compressed_tar(src, archive, kind)
    args = [archive] + [f"-o{k}={v}" for k, v in options.items()]
    r = ldp(ws, ARCHIVE, args, [sys.executable, "-c", CHECK_READS, ws.mnt, src, "7", "150"])
    assert r.returncode == 0, r.describe() + log_of(ws)
    assert r.stdout.split(",")[0] == f"{files + 1} files" and r.stdout.endswith("mismatches: []\n"), \
        r.describe()


def test_archive_decompresses_a_bounded_amount_per_read_of_a_tar_gz(ws):
    """Reading every member of a .tar.gz in a random order decompresses, per read, at most
    the restart points' spacing more than it returns (the example once decompressed from
    the stream's start at every open: the sum of the members' ends, some 200 times what is
    served here). The example's debug log says what each read decompressed."""
    src = ws.tmp / "src"
    total = random_tree(src, 400, seed=3)
    archive = ws.tmp / "a.tar.gz"
    compressed_tar(src, archive, "gz")
    argv = ldpfuse_run_argv() + ["--mountpoint", ws.mnt, "--log-file", ws.tmp / "fs.log",
                                 "--log-level", "debug", ARCHIVE, archive, "-o", "spacing=65536", "--",
                                 sys.executable, "-c", CHECK_READS, ws.mnt, src, "11", "0"]
    r = run([str(a) for a in argv], timeout=TIMEOUT, cwd=ws.tmp, env=base_env(HOME=ws.home))
    assert r.returncode == 0 and r.stdout.endswith("mismatches: []\n"), r.describe() + log_of(ws)
    reads = [line.split("read ", 1)[1] for line in (ws.tmp / "fs.log").read_text().splitlines()
             if "fuse.archive DEBUG: read " in line]
    served = sum(int(line.split(": ")[1].split()[0]) for line in reads)
    made = sum(int(line.split(", ")[1].split()[0]) for line in reads)
    assert served == total and len(reads) >= 400, (served, total, len(reads))
    # per read: the spacing, the rest of the last block decompressed (8 KiB of input), the bytes
    assert made <= served + len(reads) * (65536 + 64 * 1024), (made, served, len(reads))


def test_archive_serves_cp_a_find_and_exec(ws):
    need("tar")
    src = ws.tmp / "src"
    src.mkdir()
    source_tree(src, hardlink=True)
    make_archive("tar.gz-by-tar", src, ws.tmp / "a.tgz")
    out = ws.tmp / "out"
    r = ldp(ws, ARCHIVE, [ws.tmp / "a.tgz"], [
        "sh", "-c", f"cp -a {ws.mnt} {out} && {ws.mnt}/bin/hello.sh && "
                    f"find {ws.mnt} -name '*.txt' | sort && stat -c %h {ws.mnt}/bin/hard.txt"])
    assert r.returncode == 0, r.describe() + log_of(ws)
    assert r.stdout.splitlines() == [
        "hello from inside", f"{ws.mnt}/bin/hard.txt", f"{ws.mnt}/docs/readme.txt", "2"]
    assert describe_native(out) == describe_native(src)
    # cp -a kept the hard link: the two names had one inode in the view
    assert (out / "bin" / "hard.txt").stat().st_ino == (out / "docs" / "readme.txt").stat().st_ino


def test_archive_is_read_only(ws):
    src = ws.tmp / "src"
    src.mkdir()
    source_tree(src)
    make_archive("zip-by-zipfile", src, ws.tmp / "a.zip")
    r = ldp(ws, ARCHIVE, [ws.tmp / "a.zip"], [sys.executable, "-c", (
        "import errno, os, sys; M = sys.argv[1]\n"
        "for call in (lambda: open(M + '/new', 'w'), lambda: open(M + '/empty', 'a'),\n"
        "             lambda: os.mkdir(M + '/d'), lambda: os.unlink(M + '/empty'),\n"
        "             lambda: os.rename(M + '/empty', M + '/e2')):\n"
        "    try:\n        call()\n        print('allowed')\n"
        "    except OSError as e:\n        print(errno.errorcode[e.errno])\n"
        "print(bool(os.statvfs(M).f_flag & os.ST_RDONLY))"), ws.mnt])
    assert r.returncode == 0, r.describe() + log_of(ws)
    assert r.stdout.split() == ["EROFS"] * 5 + ["True"]


def test_archive_refuses_a_file_that_is_no_archive(ws):
    (ws.tmp / "notes.txt").write_text("not an archive\n")
    r = ldp(ws, ARCHIVE, [ws.tmp / "notes.txt"], ["true"])
    assert r.returncode == 2, r.describe()
    assert "neither a zip nor a tar" in r.stderr and len(r.stderr.splitlines()) == 1


# ------------------------------------------------------------------ sqlite

def test_sqlitefs_state_is_shared_by_every_process_and_survives(ws):
    db = ws.tmp / "fs.db"
    r = ldp(ws, SQLITEFS, [db], ["sh", "-c", f"echo hi > {ws.mnt}/a; cat {ws.mnt}/a"])
    assert r.returncode == 0 and r.stdout == "hi\n", r.describe() + log_of(ws)
    # a later command, new processes: the file is still there
    r = ldp(ws, SQLITEFS, [db], ["cat", ws.mnt / "a"])
    assert r.stdout == "hi\n", r.describe() + log_of(ws)
    # and it is in the database, in SQLite's own format
    import sqlite3
    with sqlite3.connect(db) as conn:
        names = [bytes(n) for (n,) in conn.execute("SELECT name FROM dentry WHERE parent = 1")]
    assert names == [b"a"]
    assert not ws.mnt.exists()


def test_sqlitefs_holds_a_copied_tree_across_commands(ws):
    src = ws.tmp / "src"
    src.mkdir()
    source_tree(src, hardlink=True)
    db = ws.tmp / "fs.db"
    r = ldp(ws, SQLITEFS, [db], ["cp", "-a", f"{src}/.", ws.mnt])
    assert r.returncode == 0, r.describe() + log_of(ws)
    assert describe_mount(ws, SQLITEFS, [db]) == describe_native(src)
    r = ldp(ws, SQLITEFS, [db], ["sh", "-c", f"diff -r {src} {ws.mnt} && echo same; "
                                             f"stat -c %h {ws.mnt}/bin/hard.txt"])
    assert r.stdout == "same\n2\n", r.describe() + log_of(ws)


def test_sqlitefs_concurrent_writers_from_many_processes(ws):
    db = ws.tmp / "fs.db"
    n = 20
    script = (f"for i in $(seq {n}); do (echo $i > {ws.mnt}/f$i; mkdir {ws.mnt}/d$i) & done; "
              f"wait; cat {ws.mnt}/f*; ls {ws.mnt} | wc -l")
    r = ldp(ws, SQLITEFS, [db], ["sh", "-c", script])
    assert r.returncode == 0, r.describe() + log_of(ws)
    lines = r.stdout.split()
    assert sorted(map(int, lines[:-1])) == list(range(1, n + 1)), r.stdout
    assert lines[-1] == str(2 * n)


def test_sqlitefs_posix_semantics_in_python(ws):
    db = ws.tmp / "fs.db"
    code = r"""
import errno, os, sys
M = sys.argv[1]
def err(call):
    try:
        call()
        return 'ok'
    except OSError as e:
        return errno.errorcode[e.errno]
with open(M + '/a', 'wb') as f:
    f.write(b'x' * 70000 + b'tail')
f = open(M + '/a', 'rb')
os.unlink(M + '/a')
print(len(f.read()), os.path.exists(M + '/a'))
f.close()
os.makedirs(M + '/d/e')
print(err(lambda: os.rmdir(M + '/d')), err(lambda: os.rename(M + '/d', M + '/d/e/x')))
open(M + '/b', 'w').write('bee')
open(M + '/c', 'w').write('sea')
os.rename(M + '/b', M + '/c')
print(open(M + '/c').read(), sorted(os.listdir(M)))
os.link(M + '/c', M + '/h')
os.symlink('c', M + '/s')
print(os.stat(M + '/h').st_nlink, os.readlink(M + '/s'), open(M + '/s').read())
with open(M + '/sparse', 'wb') as f:
    f.seek(200000)
    f.write(b'end')
data = open(M + '/sparse', 'rb').read()
print(len(data), data[:3], data[-3:])
os.truncate(M + '/sparse', 100000)
print(os.path.getsize(M + '/sparse'), open(M + '/sparse', 'rb').read() == bytes(100000))
os.setxattr(M + '/c', 'user.k', b'v')
print(os.getxattr(M + '/c', 'user.k'), err(lambda: os.getxattr(M + '/c', 'user.none')))
print(err(lambda: os.mkdir(M + '/c')), err(lambda: os.listdir(M + '/c')))
"""
    r = ldp(ws, SQLITEFS, [db], [sys.executable, "-c", code, ws.mnt])
    assert r.returncode == 0, r.describe() + log_of(ws)
    assert r.stdout.splitlines() == [
        "70004 False",
        "ENOTEMPTY EINVAL",
        "bee ['c', 'd']",
        "2 c bee",
        "200003 b'\\x00\\x00\\x00' b'end'",
        "100000 True",
        "b'v' ENODATA",
        "EEXIST ENOTDIR",
    ]


# ------------------------------------------------------------------ encrypted

@pytest.fixture
def enc(ws):
    pytest.importorskip("cryptography", reason="the encryption example needs the cryptography package")
    lower = ws.tmp / "enc-lower"
    lower.mkdir()
    key = ws.tmp / "key"
    key.write_bytes(os.urandom(32))
    return lower, key


def decrypt_lower(path, key):
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM
    sys.path.insert(0, str(EXAMPLES))
    try:
        import encrypted
    finally:
        sys.path.remove(str(EXAMPLES))
    return encrypted.decrypt(AESGCM(key), path.read_bytes())


def test_encrypted_stores_only_ciphertext_that_decrypts_to_the_source(ws, enc):
    lower, key = enc
    src = ws.tmp / "src"
    src.mkdir()
    source_tree(src)
    r = ldp(ws, ENCRYPTED, [lower, key], ["cp", "-a", f"{src}/.", ws.mnt])
    assert r.returncode == 0, r.describe() + log_of(ws)
    # through the mount: the same tree
    assert describe_mount(ws, ENCRYPTED, [lower, key]) == describe_native(src)
    # below: same names, no plaintext, each file decrypts to its source
    for p in src.rglob("*"):
        q = lower / p.relative_to(src)
        if p.is_symlink():
            assert os.readlink(q) == os.readlink(p)
        elif p.is_file():
            stored = q.read_bytes()
            plain = p.read_bytes()
            if plain:
                assert plain[:64] not in stored
                assert len(stored) == len(plain) + 8 + 12 + 16
            assert decrypt_lower(q, key.read_bytes()) == plain


def test_encrypted_random_access_writes_match_a_plain_file(ws, enc):
    lower, key = enc
    code = r"""
import os, sys
p = sys.argv[1] + '/f.bin'
with open(p, 'wb') as f:
    f.write(b'0123456789' * 1000)
with open(p, 'r+b') as f:
    f.seek(5000); f.write(b'MIDDLE')
    f.seek(0, 2); f.write(b'END')
    f.seek(20000); f.write(b'after a hole')
with open(p, 'ab') as f:
    f.write(b'appended')
os.truncate(p, 19000)
with open(p, 'rb') as f:
    data = f.read()
print(len(data), __import__('hashlib').sha256(data).hexdigest())
"""
    native_dir = ws.tmp / "plain"
    native_dir.mkdir()
    native = run([sys.executable, "-c", code, native_dir], timeout=TIMEOUT, env=base_env())
    r = ldp(ws, ENCRYPTED, [lower, key], [sys.executable, "-c", code, ws.mnt])
    assert r.returncode == 0, r.describe() + log_of(ws)
    assert r.stdout == native.stdout
    assert decrypt_lower(lower / "f.bin", key.read_bytes()) == (native_dir / "f.bin").read_bytes()


def test_encrypted_sqlite3_database_across_processes(ws, enc):
    need("sqlite3")
    lower, key = enc
    r = ldp(ws, ENCRYPTED, [lower, key], ["sh", "-c",
            f"sqlite3 {ws.mnt}/t.db 'CREATE TABLE t(x); INSERT INTO t VALUES (40), (2);' && "
            f"sqlite3 {ws.mnt}/t.db 'SELECT sum(x) FROM t;'"])
    assert r.returncode == 0 and r.stdout == "42\n", r.describe() + log_of(ws)
    assert b"CREATE TABLE" not in (lower / "t.db").read_bytes()


def test_encrypted_with_the_wrong_key_fails_with_eio(ws, enc):
    lower, key = enc
    r = ldp(ws, ENCRYPTED, [lower, key], ["sh", "-c", f"echo secret > {ws.mnt}/s"])
    assert r.returncode == 0, r.describe() + log_of(ws)
    other = ws.tmp / "other-key"
    other.write_bytes(os.urandom(32))
    r = ldp(ws, ENCRYPTED, [lower, other], ["cat", ws.mnt / "s"])
    assert r.returncode == 1 and "Input/output error" in r.stderr, r.describe()
    assert "secret" not in r.stdout
    # a changed byte below is caught too
    stored = bytearray((lower / "s").read_bytes())
    stored[-1] ^= 1
    (lower / "s").write_bytes(bytes(stored))
    r = ldp(ws, ENCRYPTED, [lower, key], ["cat", ws.mnt / "s"])
    assert r.returncode == 1 and "Input/output error" in r.stderr, r.describe()


def test_encrypted_refuses_a_bad_key_file(ws, enc):
    lower, _ = enc
    (ws.tmp / "short").write_bytes(b"too short")
    r = ldp(ws, ENCRYPTED, [lower, ws.tmp / "short"], ["true"])
    assert r.returncode == 2 and "32 bytes" in r.stderr, r.describe()
