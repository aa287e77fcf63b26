"""ldpfuse_py.contrib.fsspec:FsspecFS on a real S3 API (moto's server, s3fs as the
client), and on fsspec's local and memory file systems.

Real programs (cp, tar, sqlite3 read-only, python's csv, git clone of a bare repository
kept in the bucket) run in the mount and natively on a directory with the same content;
their outputs must match. What they wrote is then read back from the bucket with s3fs
directly, past ldpfuse, and the server's own request log (moto's recorder) shows that a
small read of a large object is one ranged GET."""

import hashlib
import json
import os
import subprocess
import sys

import pytest

from conftest import base_env, need, run_ldp, run_native
from s3_server import CREDENTIALS, FSSPEC_FS, MotoServer

pytest.importorskip("moto.server", reason="moto[server] is not installed (pip install '.[test]')")
pytest.importorskip("s3fs", reason="s3fs is not installed (pip install '.[test]')")


@pytest.fixture(scope="module")
def moto(tmp_path_factory):
    server = MotoServer(str(tmp_path_factory.mktemp("moto")))
    yield server
    server.stop()


class Bucket:
    """A fresh bucket, a native twin directory, and how to run commands on both."""

    def __init__(self, moto, tmp):
        self.moto = moto
        self.s3 = moto.client()
        self.name = moto.new_bucket()
        self.prefix = f"{self.name}/data"
        self.url = f"s3://{self.prefix}"
        self.tmp = tmp
        self.native = tmp / "native"
        self.mnt = tmp / "mnt"
        self.out = {self.native: tmp / "native_out", self.mnt: tmp / "ldp_out"}
        for d in (self.native, *self.out.values()):
            d.mkdir()

    def seed(self, build):
        """Build a tree natively, and upload the same tree under the bucket's prefix (with
        an empty `dir/` marker object for each empty directory, as S3 keeps them)."""
        build(self.native)
        for dirpath, dirnames, filenames in os.walk(self.native):
            rel = os.path.relpath(dirpath, self.native)
            key = self.prefix if rel == "." else f"{self.prefix}/{rel}"
            for name in filenames:
                self.s3.put_file(os.path.join(dirpath, name), f"{key}/{name}")
            if not dirnames and not filenames and rel != ".":
                self.s3.pipe_file(key + "/", b"")

    def env(self, d, **extra):
        return base_env(D=d, O=self.out[d], **CREDENTIALS, **extra)

    def ldp(self, cmd, env_extra=None, timeout=180, options=None):
        opts = {"endpoint_url": self.moto.endpoint, "spool_dir": self.tmp / "spool"}
        opts.update(options or {})
        return run_ldp(FSSPEC_FS, [self.url], cmd, self.mnt, options=opts, cwd=self.tmp,
                       env=self.env(self.mnt, **(env_extra or {})), timeout=timeout)

    def compare_sh(self, script, env_extra=None):
        path = self.tmp / "script.sh"
        path.write_text(script)
        native = run_native(["bash", "-eu", path], cwd=self.tmp,
                            env=self.env(self.native, **(env_extra or {})))
        assert native.returncode == 0, "native run failed (test bug):\n" + native.describe()
        ldp = self.ldp(["bash", "-eu", path], env_extra)
        report = "\n=== native ===\n" + native.describe() + "\n=== ldpfuse ===\n" + ldp.describe()
        norm = lambda text, d: text.replace(str(d), "$D").replace(str(self.out[d]), "$O")  # noqa: E731
        assert ldp.returncode == native.returncode, report
        assert norm(ldp.stdout, self.mnt) == norm(native.stdout, self.native), report
        assert norm(ldp.stderr, self.mnt) == norm(native.stderr, self.native), report
        return native, ldp

    def objects(self):
        """key under the prefix -> sha256 of the object, read with s3fs (no ldpfuse)."""
        out = {}
        for key in self.s3.find(self.prefix):
            rel = key[len(self.prefix) + 1:]
            if rel and not key.endswith("/"):
                out[rel] = hashlib.sha256(self.s3.cat_file(key)).hexdigest()
        return out

    def native_files(self):
        out = {}
        for p in self.native.rglob("*"):
            if p.is_file():
                out[str(p.relative_to(self.native))] = hashlib.sha256(p.read_bytes()).hexdigest()
        return out


@pytest.fixture
def bucket(moto, tmp_path):
    return Bucket(moto, tmp_path)


def small_tree(d):
    (d / "docs").mkdir()
    (d / "docs" / "readme.txt").write_text("hello from the bucket\n" * 10)
    (d / "docs" / "nested").mkdir()
    (d / "docs" / "nested" / "deep.bin").write_bytes(bytes(range(256)) * 300)
    (d / "empty").mkdir()
    (d / "top.csv").write_text("name,count\n" + "".join(f"item{i},{i * 3}\n" for i in range(500)))


def test_cp_cat_ls_mkdir_rm_in_the_bucket_match_native(bucket):
    bucket.seed(small_tree)
    bucket.compare_sh("""
        ls "$D" "$D/docs" "$D/empty"
        cat "$D/docs/readme.txt" | sha256sum
        cp "$D/docs/nested/deep.bin" "$O/copy.bin"; sha256sum < "$O/copy.bin"
        cp "$D/top.csv" "$D/docs/copied.csv"
        seq 1 200000 > "$D/seq.txt"
        mkdir "$D/made" "$D/made/sub"
        echo one > "$D/made/sub/one"
        mv "$D/made/sub/one" "$D/made/two"
        rm "$D/docs/readme.txt"
        rmdir "$D/empty"
        ls -R "$D"
        wc -c "$D/seq.txt" "$D/docs/copied.csv" "$D/made/two"
        stat -c '%n %s %F' "$D/seq.txt" "$D/made" | sed "s|$D|D|"
        rmdir "$D/made" 2>&1 || echo "rmdir of a non-empty directory fails: $?"
    """)
    # what the programs wrote is in the bucket, as S3 objects, byte for byte
    assert bucket.objects() == bucket.native_files()


def test_a_file_written_by_several_processes_keeps_every_byte(bucket):
    """The shell writes, then cat (another process, another FsspecFS in the embedded
    mode) continues at the shell's offset, then the shell again; a subshell writes, then
    execs cat in its own process: one object holds all their bytes."""
    bucket.seed(small_tree)
    bucket.compare_sh("""
        { echo header; cat "$D/top.csv"; echo footer; } > "$D/joined.csv"
        ( echo sub; head -c 3000 "$D/docs/nested/deep.bin" | od -An -tx1 | head -3 ) >> "$D/joined.csv"
        # bash execs the subshell's last command in the subshell's own process
        ( echo again; cat "$D/docs/readme.txt" ) >> "$D/joined.csv"
        sha256sum < "$D/joined.csv"; wc -c < "$D/joined.csv"
        tail -n 4 "$D/joined.csv"
    """)
    assert bucket.objects() == bucket.native_files()
    assert not list((bucket.tmp / "spool").iterdir()), "spool files left behind"


def test_tar_archive_of_the_bucket_and_extraction_into_it_match_native(bucket):
    need("tar")
    bucket.seed(small_tree)
    src = bucket.tmp / "src"
    src.mkdir()
    small_tree(src)
    (src / "big.dat").write_bytes(os.urandom(3 << 20))
    bucket.compare_sh("""
        tar cf "$O/from.tar" -C "$D" docs top.csv
        tar tf "$O/from.tar" | sort
        mkdir "$D/unpacked"
        tar cf - -C "$SRC" . | tar xf - -C "$D/unpacked" --no-same-owner -m
        (cd "$D/unpacked" && find . -type f | sort | xargs sha256sum)
    """, env_extra={"SRC": src})
    assert bucket.objects() == bucket.native_files()


def test_sqlite3_reads_a_database_kept_in_the_bucket(bucket):
    need("sqlite3")

    def build(d):
        import sqlite3
        con = sqlite3.connect(d / "shop.db")
        con.execute("CREATE TABLE item (id INTEGER PRIMARY KEY, name TEXT, price REAL)")
        con.executemany("INSERT INTO item (name, price) VALUES (?, ?)",
                        [(f"item {i}", i * 1.25) for i in range(20000)])
        con.execute("CREATE INDEX by_price ON item (price)")
        con.commit()
        con.close()

    bucket.seed(build)
    bucket.compare_sh("""
        sqlite3 -readonly "$D/shop.db" 'PRAGMA integrity_check;'
        sqlite3 -readonly "$D/shop.db" 'SELECT count(*), sum(price) FROM item;'
        sqlite3 -readonly "$D/shop.db" 'SELECT id, name FROM item WHERE price BETWEEN 100 AND 110;'
        sqlite3 "file:$D/shop.db?immutable=1" 'SELECT max(id) FROM item;'
    """)


def test_python_csv_reads_and_writes_in_the_bucket(bucket):
    bucket.seed(small_tree)
    script = bucket.tmp / "totals.py"
    script.write_text("""
import csv, os, sys
d = os.environ["D"]
with open(os.path.join(d, "top.csv"), newline="") as f:
    rows = list(csv.DictReader(f))
total = sum(int(r["count"]) for r in rows)
with open(os.path.join(d, "totals.csv"), "w", newline="") as f:
    w = csv.writer(f)
    w.writerow(["rows", "total"])
    w.writerow([len(rows), total])
    for r in rows[::50]:
        w.writerow([r["name"], r["count"]])
with open(os.path.join(d, "totals.csv"), newline="") as f:
    print(f.read())
print(sorted(os.listdir(d)))
""")
    bucket.compare_sh(f'"{sys.executable}" "{script}"\n')
    assert bucket.objects() == bucket.native_files()


def test_git_clones_a_bare_repository_kept_in_the_bucket(bucket):
    need("git")
    env = base_env(HOME=bucket.tmp, GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@example.com",
                   GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com",
                   GIT_AUTHOR_DATE="2024-01-01T00:00:00Z", GIT_COMMITTER_DATE="2024-01-01T00:00:00Z")
    work = bucket.tmp / "work"
    work.mkdir()
    git = lambda *a, cwd=work: subprocess.run(["git", *a], cwd=cwd, env=env, check=True,  # noqa: E731
                                              capture_output=True)
    git("init", "-q", "-b", "main")
    for i in range(5):
        (work / f"f{i}.txt").write_text(f"version {i}\n" * (i + 1))
        git("add", ".")
        git("commit", "-q", "-m", f"commit {i}")

    def build(d):
        git("clone", "-q", "--bare", str(work), str(d / "repo.git"), cwd=bucket.tmp)

    bucket.seed(build)
    bucket.compare_sh("""
        git clone -q "$D/repo.git" "$O/clone"
        git -C "$O/clone" log --format='%H %s'
        git -C "$O/clone" fsck --full 2>&1 | sort
        (cd "$O/clone" && sha256sum f*.txt)
        git -C "$D/repo.git" cat-file -p HEAD:f4.txt
    """, env_extra={"HOME": bucket.tmp, "GIT_CONFIG_NOSYSTEM": "1"})


def test_reading_4k_of_a_large_object_is_one_ranged_get_of_the_readahead_window(bucket):
    size = 64 << 20
    bucket.s3.pipe_file(f"{bucket.prefix}/big.bin", os.urandom(4096) * (size // 4096))
    bucket.moto.post("/moto-api/recorder/reset-recording")
    bucket.moto.post("/moto-api/recorder/start-recording")
    try:
        r = bucket.ldp(["sh", "-c", 'head -c 4096 "$D/big.bin" | wc -c; '
                        'tail -c 4096 "$D/big.bin" | wc -c'])
    finally:
        bucket.moto.post("/moto-api/recorder/stop-recording")
    assert r.returncode == 0 and r.stdout.split() == ["4096", "4096"], r.describe()
    log = [json.loads(line) for line in
           bucket.moto.get("/moto-api/recorder/download-recording").decode().splitlines() if line]
    gets = [e for e in log if e["method"] == "GET" and e["url"].endswith("/big.bin")]
    assert gets, "no GET of the object reached the server"
    fetched = 0
    for e in gets:
        rng = e["headers"].get("Range")
        assert rng, f"a GET of the whole 64 MiB object: {e['headers']}"
        start, end = map(int, rng.split("=")[1].split("-"))
        fetched += end - start + 1
    # two reads, each one window of readahead (128 KiB and a page or two around it)
    assert fetched <= 2 * (256 << 10), [e["headers"]["Range"] for e in gets]


def test_a_sequential_read_grows_its_requests_and_gets_every_byte(bucket):
    """cat of a 48 MiB object: the same bytes as the object, in a handful of GETs (the
    read-ahead doubles from 8 MiB while the reads are sequential), none of them whole."""
    data = os.urandom(1 << 20) * 48
    bucket.s3.pipe_file(f"{bucket.prefix}/seq.bin", data)
    bucket.moto.post("/moto-api/recorder/reset-recording")
    bucket.moto.post("/moto-api/recorder/start-recording")
    try:
        r = bucket.ldp(["sh", "-c", 'cat "$D/seq.bin" | sha256sum'])
    finally:
        bucket.moto.post("/moto-api/recorder/stop-recording")
    assert r.returncode == 0 and r.stdout.split()[0] == hashlib.sha256(data).hexdigest(), r.describe()
    log = [json.loads(line) for line in
           bucket.moto.get("/moto-api/recorder/download-recording").decode().splitlines() if line]
    ranges = [e["headers"].get("Range") for e in log
              if e["method"] == "GET" and e["url"].endswith("/seq.bin")]
    assert all(ranges), ranges
    assert len(ranges) <= 8, ranges


def test_large_sequential_write_is_a_multipart_upload_committed_at_close(bucket):
    src = bucket.tmp / "src.bin"
    src.write_bytes(bytes(range(251)) * 80000)
    bucket.moto.post("/moto-api/recorder/reset-recording")
    bucket.moto.post("/moto-api/recorder/start-recording")
    try:
        # parts of 5 MiB, S3's smallest (s3fs's default is 50 MiB)
        r = bucket.ldp(["sh", "-c", f'cat "{src}" > "$D/upload.bin"; wc -c < "$D/upload.bin"'],
                       options={"default_block_size": 5 << 20})
    finally:
        bucket.moto.post("/moto-api/recorder/stop-recording")
    assert r.returncode == 0, r.describe()
    assert r.stdout.split() == [str(251 * 80000)], r.describe()
    got = bucket.s3.cat_file(f"{bucket.prefix}/upload.bin")
    assert got == bytes(range(251)) * 80000
    log = [json.loads(line) for line in
           bucket.moto.get("/moto-api/recorder/download-recording").decode().splitlines() if line]
    parts = [e for e in log if e["method"] == "PUT" and "partNumber=" in e["url"]]
    assert len(parts) >= 3, "\n".join(e["method"] + " " + e["url"] for e in log)


def test_writes_anywhere_in_an_existing_object_keep_every_byte(bucket):
    bucket.s3.pipe_file(f"{bucket.prefix}/f.bin", b"a" * 100000)
    script = bucket.tmp / "rw.py"
    script.write_text("""
import os
p = os.path.join(os.environ["D"], "f.bin")
with open(p, "r+b") as f:
    f.seek(50000); f.write(b"MIDDLE")
    f.seek(0, 2); f.write(b"END")
    f.seek(10); f.write(b"start")
with open(p, "ab") as f:
    f.write(b"+appended")
fd = os.open(os.path.join(os.environ["D"], "new.bin"), os.O_CREAT | os.O_WRONLY, 0o644)
os.pwrite(fd, b"later", 100)
os.pwrite(fd, b"first", 0)
os.close(fd)
print(os.path.getsize(p), os.path.getsize(os.path.join(os.environ["D"], "new.bin")))
""")
    r = bucket.ldp([sys.executable, script])
    assert r.returncode == 0, r.describe()
    expect = bytearray(b"a" * 100000)
    expect[50000:50006] = b"MIDDLE"
    expect += b"END"
    expect[10:15] = b"start"
    expect += b"+appended"
    assert r.stdout.split() == [str(len(expect)), "105"], r.describe()
    assert bucket.s3.cat_file(f"{bucket.prefix}/f.bin") == bytes(expect)
    assert bucket.s3.cat_file(f"{bucket.prefix}/new.bin") == b"first" + bytes(95) + b"later"


def test_an_upload_the_store_refuses_is_an_error_of_close(bucket):
    """The bucket disappears while a file is being written: close() fails with an
    errno, the program learns its data did not reach the store."""
    script = bucket.tmp / "vanish.py"
    script.write_text(f"""
import os, s3fs
s3 = s3fs.S3FileSystem(endpoint_url={bucket.moto.endpoint!r}, skip_instance_cache=True)
f = open(os.path.join(os.environ["D"], "doomed.txt"), "w")
f.write("data that cannot land\\n")
f.flush()
s3.rm({bucket.name!r}, recursive=True)
try:
    f.close()
except OSError as e:
    print("close failed:", e.errno != 0)
else:
    print("close succeeded")
""")
    r = bucket.ldp([sys.executable, script])
    assert r.stdout.strip() == "close failed: True", r.describe()
    # and the bytes are not thrown away: they stay in the spool directory
    kept = [p.read_bytes() for p in (bucket.tmp / "spool").glob("*.data")]
    assert kept == [b"data that cannot land\n"]


def test_ls_of_a_missing_bucket_fails_with_enoent(moto, tmp_path):
    r = run_ldp(FSSPEC_FS, ["s3://no-such-bucket-here/x"], ["ls", tmp_path / "mnt"],
                tmp_path / "mnt", options={"endpoint_url": moto.endpoint},
                env=base_env(**CREDENTIALS))
    # the class is built (no request yet); the listing is ENOENT for ls
    assert r.returncode != 0 and "No such file or directory" in r.stderr, r.describe()


def test_store_options_may_follow_the_url(moto, tmp_path):
    """The issue's form: `FsspecFS s3://bucket/prefix -o endpoint_url=...`."""
    s3 = moto.client()
    name = moto.new_bucket()
    s3.pipe_file(f"{name}/p/hello.txt", b"hello after the url\n")
    mnt = tmp_path / "mnt"
    r = run_ldp(FSSPEC_FS, [f"s3://{name}/p", "-o", f"endpoint_url={moto.endpoint}"],
                ["cat", mnt / "hello.txt"], mnt, env=base_env(**CREDENTIALS))
    assert (r.returncode, r.stdout) == (0, "hello after the url\n"), r.describe()
    r = run_ldp(FSSPEC_FS, [f"s3://{name}/p", "stray"], ["true"], mnt, env=base_env(**CREDENTIALS))
    assert r.returncode == 2 and "only -o KEY=VALUE options; got 'stray'" in r.stderr, r.describe()


def test_a_spool_dir_others_can_read_is_refused(tmp_path):
    """Files being written are kept there: a directory made by someone else, or open to
    others, is one line and exit status 2, not a leak."""
    spool = tmp_path / "spool"
    spool.mkdir(mode=0o755)
    spool.chmod(0o755)
    r = run_ldp(FSSPEC_FS, [f"file://{tmp_path}"], ["true"], tmp_path / "mnt",
                options={"spool_dir": spool}, env=base_env())
    assert r.returncode == 2 and "must be a directory of uid" in r.stderr, r.describe()
    assert len(r.stderr.strip().splitlines()) == 1, r.describe()


def test_an_unknown_store_is_one_line_and_exit_status_2(tmp_path):
    r = run_ldp(FSSPEC_FS, ["nosuchstore://bucket"], ["true"], tmp_path / "mnt", env=base_env())
    assert r.returncode == 2, r.describe()
    assert len(r.stderr.strip().splitlines()) == 1 and "nosuchstore" in r.stderr, r.describe()


# ---------------------------------------------------------------- other fsspec stores

@pytest.mark.parametrize("protocol", ["file", "memory"])
def test_python_program_on_fsspec_local_and_memory_stores_matches_native(protocol, tmp_path):
    """The same script on a native directory and on a mount of fsspec's local or
    memory file system. (memory:// lives in the process that holds the file system: the
    program itself in the embedded mode, the server in the shared mode.)"""
    native, lower = tmp_path / "native", tmp_path / "lower"
    native.mkdir()
    lower.mkdir()
    url = f"file://{lower}" if protocol == "file" else f"memory://ldpfuse-test-{os.getpid()}"
    script = tmp_path / "script.py"
    script.write_text("""
import os, shutil
d = os.environ["D"]
os.mkdir(os.path.join(d, "sub"))
with open(os.path.join(d, "sub", "a.txt"), "w") as f:
    f.write("alpha\\n" * 1000)
with open(os.path.join(d, "sub", "a.txt"), "a") as f:
    f.write("tail\\n")
shutil.copy(os.path.join(d, "sub", "a.txt"), os.path.join(d, "b.txt"))
os.rename(os.path.join(d, "b.txt"), os.path.join(d, "sub", "c.txt"))
with open(os.path.join(d, "sub", "c.txt"), "rb") as f:
    f.seek(5990); print(f.read())
print(sorted(os.listdir(d)), sorted(os.listdir(os.path.join(d, "sub"))))
print(os.path.getsize(os.path.join(d, "sub", "c.txt")))
os.unlink(os.path.join(d, "sub", "a.txt"))
try:
    os.rmdir(os.path.join(d, "sub"))
except OSError as e:
    print("rmdir:", e.strerror)
os.mkdir(os.path.join(d, "gone"))
os.rmdir(os.path.join(d, "gone"))
print([(r[len(d):], sorted(fs)) for r, _, fs in os.walk(d)])
""")
    env_n = base_env(D=native)
    a = run_native([sys.executable, script], env=env_n)
    assert a.returncode == 0, a.describe()
    mnt = tmp_path / "mnt"
    b = run_ldp(FSSPEC_FS, [url], [sys.executable, script], mnt, env=base_env(D=mnt))
    assert (b.returncode, b.stdout, b.stderr) == (a.returncode, a.stdout, a.stderr), \
        a.describe() + "\n" + b.describe()
    if protocol == "file":
        assert sorted(p.name for p in (lower / "sub").iterdir()) == ["c.txt"]
        assert (lower / "sub" / "c.txt").read_text() == "alpha\n" * 1000 + "tail\n"


def no_credentials_env(tmp_path):
    env = base_env(HOME=tmp_path, AWS_CONFIG_FILE=tmp_path / "none",
                   AWS_SHARED_CREDENTIALS_FILE=tmp_path / "none",
                   AWS_EC2_METADATA_DISABLED="true")   # never ask an instance metadata address
    for key in [k for k in env if k.startswith("AWS_") and k not in (
            "AWS_CONFIG_FILE", "AWS_SHARED_CREDENTIALS_FILE", "AWS_EC2_METADATA_DISABLED")]:
        del env[key]
    env["AWS_DEFAULT_REGION"] = "us-east-1"
    return env


def assert_refused_at_start(r, marker, *words):
    lines = r.stderr.strip().splitlines()
    assert r.returncode == 2 and len(lines) == 1, r.describe()
    for word in words:
        assert word in lines[0], r.describe()
    assert not marker.exists(), "the command ran although the store cannot be used"


def test_a_store_without_credentials_is_one_line_and_exit_2_before_the_command(moto, tmp_path):
    """No credentials anywhere: ldpfuse-run asks the store for the mount's root before it
    starts the command, and says what the store said (it started the command, and every
    call failed with EIO: issue 35 item 5)."""
    mnt, marker = tmp_path / "mnt", tmp_path / "ran"
    r = run_ldp(FSSPEC_FS, [f"s3://{moto.new_bucket()}/p"], ["touch", marker], mnt,
                options={"endpoint_url": moto.endpoint}, env=no_credentials_env(tmp_path))
    assert_refused_at_start(r, marker, "cannot use the store", "NoCredentialsError")


def test_an_endpoint_where_nothing_listens_is_one_line_and_exit_2_before_the_command(tmp_path):
    import socket

    with socket.socket() as s:      # a port nothing listens on: bound, never listening
        s.bind(("127.0.0.1", 0))
        endpoint = f"http://127.0.0.1:{s.getsockname()[1]}"
        mnt, marker = tmp_path / "mnt", tmp_path / "ran"
        r = run_ldp(FSSPEC_FS, ["s3://bucket/p"], ["touch", marker], mnt,
                    options={"endpoint_url": endpoint}, env=base_env(**CREDENTIALS), timeout=120)
    assert_refused_at_start(r, marker, "cannot use the store", endpoint)