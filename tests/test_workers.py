"""-o workers=N (issue 34, docs/operations.md): one command of the shared mode served by N
instances of the class, each in a process of its own (native/server/workers.c).

Real programs read the archive and loopback examples with workers=2 and get what they
get natively; every request of one open file reaches the instance that opened it (the
Pids fixture's handles are its own); bad values and a class that does not allow it give
one line and a nonzero exit; a worker killed mid-run gives EIO, not a hang, and the
command goes on; a request of uid 65534 in a worker has that uid's rights only. The
suite's coherence and cache tests run with workers=2 too: LDPFUSE_TEST_WORKERS=2
(conftest.run_ldp adds -o workers=2 to every shared-mode run of a class that declares
workers_safe: the loopback and archive examples).
"""

import os
import shutil
import subprocess
import sys
import tarfile

import pytest

from conftest import (EXAMPLES, FS_FIXTURES, LDP_MODE, LOOPBACK, NOBODY, base_env, launch_argv,
                      run_ldp, run_native)

ARCHIVE = f"{EXAMPLES / 'archive.py'}:Archive"
PIDS = f"{FS_FIXTURES / 'pids.py'}:Pids"

shared_only = pytest.mark.skipif(LDP_MODE != "shared", reason="-o workers is an option of the shared mode")


@pytest.fixture
def tree(tmp_path):
    """200 files of 1-40 KiB in 4 directories, and their tar."""
    src = tmp_path / "src"
    for i in range(200):
        d = src / f"d{i % 4}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"f{i:03d}").write_bytes(os.urandom(1 + (i * 211) % 40960))
    tar = tmp_path / "a.tar"
    with tarfile.open(tar, "w") as t:
        t.add(src, arcname="t")
    return src, tar


READ_ALL = r"""
import hashlib, os, sys
out = []
for d, _, fs in sorted(os.walk(sys.argv[1])):
    for f in sorted(fs):
        with open(os.path.join(d, f), "rb") as h:
            out.append(f"{os.path.relpath(os.path.join(d, f), sys.argv[1])} {hashlib.sha256(h.read()).hexdigest()}")
print("\n".join(out))
"""


@shared_only
def test_archive_programs_read_what_native_does(tmp_path, tree):
    src, tar = tree
    mnt = tmp_path / "mnt"
    script = tmp_path / "read_all.py"
    script.write_text(READ_ALL)
    native = run_native([sys.executable, script, src])
    assert native.returncode == 0, native.stderr
    r = run_ldp(ARCHIVE, [tar], ["sh", "-c",
                                 f'{sys.executable} {script} "$1/t" && cat "$1"/t/d*/* | sha256sum && '
                                 f'tar cf - -C "$1/t" . | tar tf - | sort | sha256sum && '
                                 f'cmp "$1/t/d1/f001" "$2/d1/f001" && echo same', "sh", mnt, src],
                mnt, options={"workers": 2})
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    assert "\n".join(lines[:200]) == native.stdout.strip()
    cat = run_native(["sh", "-c", 'cat "$1"/d*/* | sha256sum', "sh", src])
    assert lines[200] == cat.stdout.strip()
    names = run_native(["sh", "-c", 'tar cf - -C "$1" . | tar tf - | sort | sha256sum', "sh", src])
    assert lines[201] == names.stdout.strip()
    assert lines[202] == "same"


@shared_only
def test_loopback_writes_and_reads_as_native(tmp_path, tree):
    src, _ = tree
    lower = tmp_path / "lower"
    shutil.copytree(src, lower)
    mnt = tmp_path / "mnt"
    script = tmp_path / "read_all.py"
    script.write_text(READ_ALL)
    def work(copy, new):    # the directories' names only: the interpreter's path may hold either word
        return (f'cp -r "$1/d0" "$1/{copy}" && echo added >> "$1/{copy}/f000" && mv "$1/{copy}/f004" "$1/{copy}/g" && '
                f'rm "$1/{copy}/f008" && mkdir "$1/{new}" && printf x > "$1/{new}/x" && {sys.executable} {script} "$1"')
    native_dir = tmp_path / "native"
    shutil.copytree(src, native_dir)
    native = run_native(["sh", "-c", work("copy", "new"), "sh", native_dir])
    for passthrough in ("yes", "no"):
        r = run_ldp(LOOPBACK, [lower], ["sh", "-c", work(f"copy{passthrough}", f"new{passthrough}"), "sh", mnt],
                    mnt, options={"workers": 2, "passthrough": passthrough, "backing": "no"})
        assert r.returncode == 0, r.stderr
        want = native.stdout.replace("copy/", f"copy{passthrough}/").replace("new/", f"new{passthrough}/")
        got = [line for line in r.stdout.splitlines() if "copy" not in line or f"copy{passthrough}" in line]
        got = [line for line in got if "new" not in line or f"new{passthrough}" in line]
        assert sorted(got) == sorted(want.splitlines())


# Eight shells append short lines at once to one file, five times over: what the mount
# shows afterwards is what the class wrote (the lower file), and the lines are those of the
# same appends made natively. At 7992107 about 1 run in 30 of one such round showed zeros
# where another's lines are (a page cache made from an open's stale lookup;
# test_cache.py pins that race every run with a slow open).
MANY_APPENDERS = r"""
for r in 1 2 3 4 5; do
    for w in 1 2 3 4 5 6 7 8; do ( for i in $(seq 1 30); do echo "$w $i" >> "$1/log$r"; done ) & done
    wait
    cp "$1/log$r" "$2/view$r"
done
"""


@shared_only
def test_many_appenders_see_through_the_mount_what_the_class_wrote(tmp_path):
    lower, mnt, out, native = (tmp_path / d for d in ("lower", "mnt", "out", "native"))
    for d in (lower, out, native):
        d.mkdir()
    r = run_ldp(LOOPBACK, [lower], ["bash", "-c", MANY_APPENDERS, "sh", mnt, out], mnt,
                options={"workers": 2, "passthrough": "no"})
    assert r.returncode == 0, r.stderr
    n = run_native(["bash", "-c", MANY_APPENDERS.replace('cp "$1/log$r" "$2/view$r"', ":"), "sh", native, out])
    assert n.returncode == 0, n.stderr
    for k in range(1, 6):
        view = (out / f"view{k}").read_bytes()
        assert view.count(0) == 0 and view == (lower / f"log{k}").read_bytes(), k
        assert sorted(view.splitlines()) == sorted((native / f"log{k}").read_bytes().splitlines()), k


# 4 processes (each its own connection, so its own serving thread, and the threads are
# spread over the instances) open 16 files each and read every one 4 times
AFFINITY = r"""
import os, sys
root, ppid = sys.argv[1], os.getppid()
def child(k, w):
    served = set()
    for i in range(k * 16, k * 16 + 16):
        fd = os.open(f"{root}/f{i}", os.O_RDONLY)
        pids = {os.pread(fd, 16, off).split(b"\n")[0] for off in (0, 1024, 2048, 3072)}
        assert len(pids) == 1, (i, pids)     # every read of one open: its opener
        served |= pids
        os.close(fd)                        # its release too (EBADF elsewhere: close fails)
    os.write(w, b" ".join(served))
    os._exit(0)
kids = []
for k in range(4):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        child(k, w)
    os.close(w)
    kids.append((pid, r))
served = set()
for pid, r in kids:
    served |= set(os.read(r, 4096).split())
    assert os.waitpid(pid, 0)[1] == 0
print(len(served), int(str(ppid).encode() in served))
"""


@shared_only
@pytest.mark.parametrize("workers", [1, 2])
def test_requests_of_an_open_file_go_to_its_opener(tmp_path, workers):
    mnt = tmp_path / "mnt"
    script = tmp_path / "affinity.py"
    script.write_text(AFFINITY)
    r = run_ldp(PIDS, [], [sys.executable, script, mnt], mnt, options={"workers": workers})
    assert r.returncode == 0, r.stderr
    # workers=1: the launcher alone; 2: it and one worker process, both used
    assert r.stdout.split() == [str(workers), "1"], r.stdout


@shared_only
@pytest.mark.parametrize("value, says", [
    ("0", "-o workers expects a number of instances from 1 to 64, or auto, got '0'"),
    ("x", "-o workers expects a number of instances from 1 to 64, or auto, got 'x'"),
    ("65", "-o workers expects a number of instances from 1 to 64, or auto, got '65'"),
])
def test_bad_worker_counts_are_refused(tmp_path, value, says):
    r = run_ldp(PIDS, [], ["true"], tmp_path / "mnt", options={"workers": value})
    assert r.returncode != 0
    assert r.stderr.strip().splitlines() == [f"ldpfuse-run: {says}"]


def test_a_class_must_allow_workers(tmp_path):
    computed = f"{FS_FIXTURES / 'computed.py'}:Computed"
    r = run_ldp(computed, [], ["true"], tmp_path / "mnt", options={"workers": 2}, mode="shared")
    assert r.returncode != 0
    assert len(r.stderr.strip().splitlines()) == 1
    assert "Computed does not declare workers_safe = True" in r.stderr
    # the user's word for it
    r = run_ldp(computed, [], ["cat", tmp_path / "mnt" / "small"], tmp_path / "mnt",
                options={"workers": 2, "workers_safe": None}, mode="shared")
    assert r.returncode == 0, r.stderr
    assert len(r.stdout) == 4096


def test_embedded_mode_refuses_workers(tmp_path):
    r = run_ldp(PIDS, [], ["true"], tmp_path / "mnt", options={"workers": 2}, mode="embedded")
    assert r.returncode != 0
    assert r.stderr.strip().splitlines() == [
        "ldpfuse-run: -o workers is an option of the shared mode (--mode embedded already builds an "
        "instance of the class in every process)"]


# 4 processes hold 4 open files each; once each has said which instance opened its files,
# one worker process is killed, and each reads its files again
KILL = r"""
import errno, os, signal, sys
root, ppid = sys.argv[1], os.getppid()
def child(k, w, go):
    fds = [os.open(f"{root}/f{i}", os.O_RDONLY) for i in range(k * 4, k * 4 + 4)]
    owners = [int(os.pread(fd, 16, 0).split(b"\n")[0]) for fd in fds]
    os.write(w, (" ".join(map(str, owners)) + "\n").encode())
    os.read(go, 1)
    bad = []
    for fd, owner in zip(fds, owners):
        try:
            got = int(os.pread(fd, 16, 0).split(b"\n")[0])
            if owner != ppid or got != ppid:
                bad.append(f"{owner} answered {got}")
        except OSError as e:
            if owner == ppid or e.errno != errno.EIO:
                bad.append(f"{owner}: {e}")
        os.close(fd)
    for i in range(8):      # the others go on serving, new opens too
        with open(f"{root}/f{i}", "rb") as f:
            if int(f.read(16).split(b"\n")[0]) != ppid:
                bad.append("a new open served by the dead worker")
    os.write(w, ("; ".join(bad) or "ok").encode())
    os._exit(0)
kids, owners = [], set()
go_r, go_w = os.pipe()
for k in range(4):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        child(k, w, go_r)
    os.close(w)
    kids.append((pid, r))
for pid, r in kids:
    owners |= set(map(int, os.read(r, 4096).split()))
workers = owners - {ppid}
assert workers, "no open served by a worker"
os.kill(workers.pop(), signal.SIGKILL)
os.write(go_w, b"gogo")
for pid, r in kids:
    print(os.read(r, 4096).decode())
    os.waitpid(pid, 0)
"""


@shared_only
def test_a_killed_worker_gives_eio_not_a_hang(tmp_path):
    mnt = tmp_path / "mnt"
    script = tmp_path / "kill.py"
    script.write_text(KILL)
    r = run_ldp(PIDS, [], [sys.executable, script, mnt], mnt, options={"workers": 2}, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["ok"] * 4


# a read of /hang never answers: EIO after op_timeout, and the other instance serves the
# opens and reads that follow (the hung one is killed if it is a worker process, busy for
# good if it is the launcher's own)
HANG = r"""
import errno, os, sys
root = sys.argv[1]
try:
    with open(f"{root}/hang", "rb") as f:
        f.read(16)
    print("hang answered")
except OSError as e:
    print(errno.errorcode[e.errno])
for i in range(8):
    with open(f"{root}/f{i}", "rb") as f:
        assert f.read(16)
print("served")
"""


@shared_only
def test_a_method_that_hangs_gives_eio_and_the_others_serve(tmp_path):
    mnt = tmp_path / "mnt"
    script = tmp_path / "hang.py"
    script.write_text(HANG)
    r = run_ldp(PIDS, [], [sys.executable, script, mnt], mnt, options={"workers": 2, "op_timeout": 2},
                timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["EIO", "served"]


def worker_processes(marker):
    """Pids of worker processes whose environment holds marker."""
    found = []
    for p in os.listdir("/proc"):
        try:
            with open(f"/proc/{p}/cmdline", "rb") as f:
                if b"workers.serve()" not in f.read():
                    continue
            with open(f"/proc/{p}/environ", "rb") as f:
                if marker.encode() in f.read():
                    found.append(int(p))
        except (OSError, ValueError):
            pass
    return found


@shared_only
def test_workers_end_with_the_run_after_destroy(tmp_path):
    mnt = tmp_path / "mnt"
    marker = f"LDPFUSE_TEST_MARK={os.getpid()}-{tmp_path.name}"
    env = dict(base_env(), LDPFUSE_TEST_MARK=marker.partition("=")[2])
    r = run_ldp(PIDS, [], ["sh", "-c", 'cat "$1/f1" >/dev/null', "sh", mnt], mnt, options={"workers": 3}, env=env)
    assert r.returncode == 0, r.stderr
    assert worker_processes(marker) == []


@shared_only
@pytest.mark.skipif(os.geteuid() != 0, reason="the request runs as another user (setpriv): needs root")
@pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is not installed")
def test_a_worker_has_its_callers_rights_only(shared_tmp):
    lower = shared_tmp / "lower"
    lower.mkdir()
    os.chmod(lower, 0o755)
    (lower / "secret").write_text("root only\n")
    os.chmod(lower / "secret", 0o600)
    mnt = shared_tmp / "mnt"
    # 16 tries: both instances serve some (round robin among idle ones)
    script = (f'for i in $(seq 16); do setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups '
              f'cat "$1/secret" 2>/dev/null && echo LEAK; done; cat "$1/secret"')
    for passthrough in ("yes", "no"):
        argv = launch_argv(mnt, LOOPBACK, [lower], ["-o", "allow_other", "-o", "default_permissions=no",
                                                    "-o", "workers=2", "-o", f"passthrough={passthrough}",
                                                    "-o", "backing=no"], mode="shared")
        r = subprocess.run(argv + ["sh", "-c", script, "sh", str(mnt)], capture_output=True, text=True,
                           timeout=120, env=base_env(), cwd="/")
        assert r.returncode == 0, r.stderr
        assert r.stdout == "root only\n"


# 4 processes (4 connections, spread over the instances) each read /who 8 times: the pairs
# (built, served) the instances answered
WHO = r"""
import os, sys
root = sys.argv[1]
def child(w):
    seen = set()
    for _ in range(8):
        with open(f"{root}/who", "rb") as f:
            seen.add(f.read(64).split(b"\n")[0].decode())
    os.write(w, "\n".join(seen).encode())
    os._exit(0)
kids = []
for k in range(4):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        child(w)
    os.close(w)
    kids.append((pid, r))
seen = set()
for pid, r in kids:
    seen |= set(os.read(r, 65536).decode().split("\n"))
    assert os.waitpid(pid, 0)[1] == 0
print(os.getppid())
print("\n".join(sorted(seen)))
"""
BUILT_ONCE = FS_FIXTURES / "built_once.py"


def served_by(tmp_path, cls, workers=2, options=None):
    """Run WHO over built_once.py's cls: (launcher pid, {(built, served)}, log lines, stderr).
    (The launcher builds the class twice: ldpfuse-run's check of its arguments, then the
    instance it serves with.)"""
    mnt = tmp_path / "mnt"
    script = tmp_path / "who.py"
    script.write_text(WHO)
    log = tmp_path / f"{cls}.log"
    r = run_ldp(f"{BUILT_ONCE}:{cls}", [log], [sys.executable, script, mnt], mnt,
                options=dict(options or {}, workers=workers))
    assert r.returncode == 0, r.stderr
    launcher, *pairs = r.stdout.split("\n")
    return (int(launcher), {tuple(map(int, p.split())) for p in pairs if p}, log.read_text().splitlines(),
            r.stderr)


def ended(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rpartition(")")[2].split()[0] in ("Z", "X")
    except FileNotFoundError:
        return True


@shared_only
@pytest.mark.parametrize("workers", [2, 3])
def test_a_class_that_says_fork_is_built_once_and_forked(tmp_path, workers):
    launcher, pairs, log, stderr = served_by(tmp_path, "Forked", workers)
    # no __init__ but the launcher's; each instance served (4 connections over the
    # instances, each its own process), and each called its destroy() and ended
    assert {line for line in log if line.startswith("init")} == {f"init {launcher}"}
    assert {built for built, _ in pairs} == {launcher}
    served = {s for _, s in pairs}
    assert launcher in served and len(served) >= 2, pairs
    destroyed = sorted(int(line.split()[1]) for line in log if line.startswith("destroy"))
    assert len(destroyed) == workers and len(set(destroyed)) == workers and launcher in destroyed
    assert all(ended(pid) for pid in destroyed if pid != launcher)
    assert "fork" not in stderr


@shared_only
def test_a_class_that_does_not_say_fork_gets_fresh_instances(tmp_path):
    launcher, pairs, log, _ = served_by(tmp_path, "Fresh")
    inits = [int(line.split()[1]) for line in log if line.startswith("init")]
    assert len(set(inits)) == 2 and launcher in inits
    assert all(built == served for built, served in pairs) and len(pairs) == 2, pairs


@shared_only
def test_users_word_forks_a_class_that_does_not_say(tmp_path):
    launcher, pairs, log, _ = served_by(tmp_path, "Fresh", options={"workers_safe": "fork"})
    assert {line for line in log if line.startswith("init")} == {f"init {launcher}"}
    assert {built for built, _ in pairs} == {launcher} and len(pairs) == 2, pairs


@shared_only
def test_a_class_whose_init_started_a_thread_is_not_forked(tmp_path):
    launcher, pairs, log, stderr = served_by(tmp_path, "Threaded")
    inits = [int(line.split()[1]) for line in log if line.startswith("init")]
    assert len(set(inits)) == 2 and launcher in inits
    assert all(built == served for built, served in pairs) and len(pairs) == 2, pairs
    said = [line for line in stderr.splitlines() if "fork" in line]
    assert len(said) == 1, stderr
    # (2: the launcher's main thread, and the one of the instance it built, once)
    assert said[0] == ("ldpfuse-run: -o workers=2: the process has 2 threads once Threaded is built (its module "
                       "or __init__ started them), and a fork of a process with threads is unsafe: each worker "
                       "builds its own instance instead (docs/operations.md)"), said


def test_workers_safe_takes_fork_or_nothing(tmp_path):
    r = run_ldp(PIDS, [], ["true"], tmp_path / "mnt", options={"workers_safe": "yes"}, mode="shared")
    assert r.returncode != 0
    assert r.stderr.strip().splitlines() == ["ldpfuse-run: -o workers_safe takes no value, or fork, got 'yes'"]


# A release of a file a worker process opened is posted to it (workers.c, wk_post): the
# client's close() does not wait for it, and the worker runs it before the calls after it
# and before its destroy(). 4 processes (spread over the instances): each finds whether
# its connection's instance is a worker, and if so closes /slow (3 s in its release) and
# times that close, then /fail (release raises) and /die (the worker's release ends the
# process) where the test asks for them, and reads a file it still holds.
POSTED = r"""
import errno, os, sys, time
root, what, ppid = sys.argv[1], sys.argv[2], os.getppid()
def owner(fd):
    return int(os.pread(fd, 16, 0).split(b"\n")[0])
def child(k, w):
    out, held, mine = [], None, False
    fd = os.open(f"{root}/{what}", os.O_RDONLY)
    try:
        who = owner(fd)
        for _ in range(8):      # a file held open by the same instance (it may be busy: another)
            held = os.open(f"{root}/f{k}", os.O_RDONLY)
            mine = owner(held) == who
            if mine:
                break
            os.close(held)
            held = None
    except OSError as e:    # /die: another process's release ended the instance first
        assert what == "die" and e.errno == errno.EIO, e
        who = ppid
    t0 = time.monotonic()
    os.close(fd)
    took = time.monotonic() - t0
    if who != ppid and mine:       # a worker process's, and so is held
        out.append(f"worker-close {took:.1f}")
        try:
            out.append(f"held {owner(held) == who}")
        except OSError as e:
            out.append(f"held {errno.errorcode[e.errno]}")
    try:
        if held is not None:
            os.close(held)
    except OSError as e:
        out.append(f"close-held {e}")
    for i in range(8):      # the command goes on: opens served, by an instance alive
        with open(f"{root}/f{i}", "rb") as f:
            assert int(f.read(16).split(b"\n")[0]) > 0
    os.write(w, ";".join(out).encode())
    os._exit(0)
kids = []
for k in range(4):
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:
        child(k, w)
    os.close(w)
    kids.append((pid, r))
for pid, r in kids:
    got = os.read(r, 4096).decode()
    if got:
        print(got)
    assert os.waitpid(pid, 0)[1] == 0
"""


def posted(tmp_path, what):
    """POSTED with `what` over Releases, workers=2: (its lines, the log's lines, stderr)."""
    mnt = tmp_path / "mnt"
    script = tmp_path / "posted.py"
    script.write_text(POSTED)
    log = tmp_path / "releases.log"
    log.write_text("")
    r = run_ldp(RELEASES, [log], [sys.executable, script, mnt, what], mnt, options={"workers": 2, "op_timeout": 20},
                timeout=120)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.split("\n")
    assert any(line.startswith("worker-close") for line in lines), \
        f"no /{what} opened by a worker process: {r.stdout!r}"
    return [line for line in lines if line], log.read_text().splitlines(), r.stderr


RELEASES = f"{FS_FIXTURES / 'releases.py'}:Releases"


@shared_only
def test_a_workers_release_is_not_waited_for_and_not_lost(tmp_path):
    lines, log, _ = posted(tmp_path, "slow")
    for line in lines:
        took = float(line.split(";")[0].split()[1])
        assert took < 1.5, f"close() waited for the worker's release ({took} s)"
        assert line.split(";")[1] == "held True"
    # every release ran (the slow ones too, before their instance's destroy())
    releases = [line.split() for line in log if line.startswith("release")]
    assert sum(1 for _, _, path in releases if path == "/slow") == 4
    assert sum(1 for _, _, path in releases if path.startswith("/f")) >= 4 + 4 * 8   # (and each retry)
    for pid in {pid for _, pid, _ in releases}:
        mine = [line for line in log if line.split()[1] == pid]
        assert mine[-1] == f"destroy {pid}", mine


@shared_only
def test_a_workers_failing_release_leaves_its_instance_serving(tmp_path):
    lines, log, stderr = posted(tmp_path, "fail")
    for line in lines:
        assert line.split(";")[1:] == ["held True"], line      # its other handle still served
    assert "release('/fail') raised" in stderr


@shared_only
def test_a_worker_that_ends_in_a_posted_release_gives_eio_not_a_hang(tmp_path):
    lines, log, stderr = posted(tmp_path, "die")
    for line in lines:
        # the held file's next call (after the close that ended its instance): EIO; its
        # close answers as a dead worker's does
        assert line.split(";")[1] == "held EIO", line
    assert "killed, its calls answer EIO" in stderr
