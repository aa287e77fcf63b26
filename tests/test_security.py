"""Issue 22's attacks on the shared mode's server, each one played by a hostile client
(tests/programs/wire_attacker.py, speaking the wire protocol by hand) against a real
`ldpfuse-run --mode shared`: from outside the command (the socket found in /proc/net/unix,
no secret) and from inside it as another user (-o allow_other: it holds the secret and
sends hostile requests). Each test asserts that the attack gets a clear errno or a refused
connection, that the server keeps serving (a victim command's result is right, the command's
exit status stays its own), and that nothing of another user was read or changed.

Every attack here worked against the server of 7b0617e (issue 22's proof-of-concept
programs; `LDPFUSE_ATTACK_LEGACY=1` makes wire_attacker.py speak that protocol). Tests of
a hole that is still open are marked xfail(strict=True) with the bug's exact place.

Root is needed to run the attacker as another user (setpriv), as tests/test_credentials.py.

To see the attacks succeed against the server before issue 22, run this file with an
install of 7b0617e and LDPFUSE_ATTACK_LEGACY=1 (that server knows no -o allow_other: it
served every uid; its protocol has no hello).
"""

import os
import re
import select
import shlex
import shutil
import signal
import subprocess
import sys
import time

import pytest

from conftest import EXAMPLES, LOOPBACK, MEMORY, NOBODY, PROGRAMS, base_env, launch_argv, need

ATTACKER = PROGRAMS / "wire_attacker.py"
BY_PATH = f"{PROGRAMS / 'by_path_fs.py'}:ByPath"
# the attacker needs only the standard library, and an interpreter uid 65534 may run (the
# test's may live under root's 0700 home: pyenv)
ATTACKER_PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the attacker runs as another user (setpriv): needs root"),
    pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is not installed"),
]


LEGACY = os.environ.get("LDPFUSE_ATTACK_LEGACY") == "1"
ALLOW_OTHER = () if LEGACY else ("-o", "allow_other")


def attacker(*args, uid=None):
    """The attacker's command line: without the preload (it speaks the protocol itself), as
    uid (and gid) `uid` with no supplementary groups if given."""
    cmd = ["env", "-u", "LD_PRELOAD", ATTACKER_PYTHON, str(ATTACKER), *map(str, args)]
    if uid is not None:
        cmd = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", *cmd]
    return cmd


def sh_attacker(*args, uid=None):
    return shlex.join(attacker(*args, uid=uid))


def probes(text):
    """The attacker's `name value` lines as a dict."""
    out = {}
    for line in text.splitlines():
        name, _, value = line.partition(" ")
        out[name] = value
    return out


def run_cmd(mnt, fs, script, fs_args=(), options=(), timeout=180, env=None):
    """sh -c script as the command of a shared-mode run; (exit status, stdout, stderr)."""
    r = subprocess.run(launch_argv(mnt, fs, fs_args, options, mode="shared") + ["sh", "-c", script],
                       capture_output=True, text=True, timeout=timeout, env=env or base_env(), cwd="/")
    return r


class Running:
    """A command under ldpfuse-run that the test talks to: it prints lines, waits for a line
    on its stdin (`read go`), the test acts meanwhile from outside."""

    def __init__(self, mnt, fs, script, fs_args=(), options=(), env=None):
        self.p = subprocess.Popen(launch_argv(mnt, fs, fs_args, options, mode="shared") + ["sh", "-c", script],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=env or base_env(), cwd="/", start_new_session=True)
        self.out = []

    def until(self, marker, timeout=90):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            ready, _, _ = select.select([self.p.stdout], [], [], 1)
            if ready:
                line = self.p.stdout.readline()
                if line == "":
                    break
                self.out.append(line)
                if line.strip() == marker:
                    return
        self.kill()
        pytest.fail(f"the command never said {marker!r}: {''.join(self.out)}\n{self.p.stderr.read()}")

    def go(self, timeout=120):
        """Let it go on; (exit status, its stdout after the marker, stderr)."""
        try:
            out, err = self.p.communicate("go\n", timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail("the command did not end after the attack")
        return self.p.returncode, out, err

    def kill(self):
        try:
            os.killpg(self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.p.communicate()


def secret_setup(m):
    """Root's private file, a public one and a directory anyone may write, in mount m."""
    return (f"cd {m} && echo 'root only' > secret && chmod 600 secret && "
            f"echo anyone > public && chmod 644 public && mkdir open && chmod 777 open")


@pytest.fixture
def tmp(shared_tmp):
    return shared_tmp


def test_the_attackers_layout_is_the_headers(tmp_path):
    """wire_attacker.py packs the structs by hand: its sizes and offsets are the C headers'."""
    need("gcc")
    src = tmp_path / "layout.c"
    src.write_text(f"""
#define _GNU_SOURCE
#include <stdio.h>
#include <stddef.h>
#include "{PROGRAMS.parent.parent / 'native' / 'backend' / 'channel.h'}"
int main(void) {{
    printf("%zu %zu %zu %zu %zu %zu %zu %d %d %d %d\\n", sizeof(struct wire_req), sizeof(struct wire_resp),
           sizeof(struct wire_hello), offsetof(struct chan_region, rq), offsetof(struct chan_region, rs),
           offsetof(struct chan_region, buf), (size_t)CHAN_SIZE, W_OP_MAX, W_READDIR, W_CACHE_OPEN,
           (int)offsetof(struct wire_req, has_fh));
    printf("%llx\\n", (unsigned long long)WIRE_HELLO_MAGIC);
    return 0;
}}
""")
    exe = tmp_path / "layout"
    subprocess.run(["gcc", "-o", str(exe), str(src)], check=True)
    got = subprocess.run([str(exe)], capture_output=True, text=True, check=True).stdout.split()
    sys.path.insert(0, str(PROGRAMS))
    try:
        import wire_attacker as w
    finally:
        sys.path.remove(str(PROGRAMS))
    assert got == list(map(str, (w.REQ.size, w.RESP.size, w.HELLO.size, w.OFF_RQ, w.OFF_RS, w.OFF_BUF,
                                 w.CHAN_SIZE, w.W_OP_MAX, w.W_READDIR, w.W_CACHE_OPEN, 40))) + [f"{w.HELLO_MAGIC:x}"]


# ---- 1. anyone on the machine used a running command's file system

@pytest.mark.parametrize("options", [(), ALLOW_OTHER], ids=["default", "allow_other"])
def test_an_outsider_finds_the_socket_but_is_refused(tmp, options):
    """The socket's name is in /proc/net/unix for anyone to read. A process of another user
    that is not part of the command is refused at connect (EACCES) unless allow_other, and
    even then, without the run's secret, its requests are never read (the connection is
    refused, EACCES, before it gets a region). A process of the launcher's own user outside
    the command is refused too.
    Root's 0600 file is neither read nor changed, no directory is made."""
    m = tmp / "mnt"
    run = Running(m, MEMORY, secret_setup(m) + "; echo ready; read go; cat secret; ls", options=options)
    run.until("ready")
    name = None
    for _ in range(50):
        with open("/proc/net/unix") as f:
            names = re.findall(rf"@(ldpfuse-{run.p.pid}-[0-9a-f]+)", f.read())
        if names:
            name = names[0]
            break
        time.sleep(0.1)
    assert name, "the server's socket is not in /proc/net/unix"
    as_other = subprocess.run(attacker("outsider", name, "/secret", "/made-by-outsider", uid=NOBODY),
                              capture_output=True, text=True, timeout=60, env=base_env())
    as_same = subprocess.run(attacker("outsider", name, "/secret", "/made-by-outsider"),
                             capture_output=True, text=True, timeout=60, env=base_env())
    status, out, err = run.go()
    other, same = probes(as_other.stdout), probes(as_same.stdout)
    refused = {"read": "refused EACCES", "write": "refused EACCES", "mkdir": "refused EACCES"}
    assert other == refused, as_other.stderr
    assert same == refused, as_same.stderr
    assert status == 0, err
    assert out == "root only\nopen\npublic\nsecret\n", err


def socket_of(run):
    """The server's socket name, as any user finds it in /proc/net/unix (the launcher's pid
    is in it)."""
    for _ in range(50):
        with open("/proc/net/unix") as f:
            names = re.findall(rf"@(ldpfuse-{run.p.pid}-[0-9a-f]+)", f.read())
        if names:
            return names[0]
        time.sleep(0.1)
    pytest.fail("the server's socket is not in /proc/net/unix")


def test_an_outsider_cannot_flood_the_log(tmp):
    """300 connections with a wrong secret from uid 65534 outside the command (allow_other
    lets its uid connect): each is refused (EACCES), and the log does not grow by a line
    each (it did before dbacf37)."""
    m = tmp / "mnt"
    log = tmp / "fs.log"
    run = Running(m, MEMORY, f"echo ready; read go; ls {m}", options=ALLOW_OTHER + ("--log-file", str(log)))
    run.until("ready")
    r = subprocess.run(attacker("wrong-secret", socket_of(run), 300, uid=NOBODY), capture_output=True, text=True,
                       timeout=120, env=base_env())
    status, out, err = run.go()
    assert r.stdout == "refused-EACCES 300\n", r.stderr
    assert status == 0, err
    lines = log.read_text().count("does not hold the run's secret") if log.exists() else 0
    assert lines <= 3, f"{lines} log lines for 300 refused connections"


# ---- 2. paths left the lower directory

def test_request_paths_never_leave_the_lower_directory(tmp):
    """A request naming /../outside/secret, or creating /../outside/new, on the loopback is
    refused (EINVAL) before the class sees it, as are names with //, ., a NUL, no leading /
    or components over NAME_MAX; nothing outside the lower directory is read or made."""
    lower = tmp / "lower"
    outside = tmp / "outside"
    lower.mkdir()
    outside.mkdir()
    (lower / "public").write_text("anyone\n")
    (outside / "secret").write_text("private key\n")
    m = tmp / "mnt"
    r = run_cmd(m, LOOPBACK, sh_attacker("paths", "/../outside/secret", "/../outside/new") + f"; cat {m}/public",
                fs_args=[lower])
    got = probes(r.stdout.replace("anyone\n", ""))
    # a mount path longer than PATH_MAX is what a relative path from deep in the mount
    # gives: the kernel limits the string a program passes, not the path it resolves to
    assert got.pop("long-path") in ("ENAMETOOLONG", "ENOENT"), r.stdout
    assert got == {"getattr-dotdot": "EINVAL", "open-dotdot": "EINVAL", "create-dotdot": "EINVAL",
                   "rename-dotdot": "EINVAL", "symlink-dotdot": "EINVAL", "double-slash": "EINVAL",
                   "dot": "EINVAL", "relative": "EINVAL", "trailing-slash": "EINVAL", "nul": "EINVAL",
                   "empty": "EINVAL", "long-name": "ENAMETOOLONG", "still-served": "OK"}, r.stderr
    assert r.stdout.endswith("anyone\n") and r.returncode == 0, r.stderr
    assert sorted(os.listdir(outside)) == ["secret"]
    assert sorted(os.listdir(lower)) == ["public"]


# ---- 3. handles were never checked against the connection

@pytest.mark.parametrize("fs", ["memory", "loopback-passthrough-no"])
def test_forged_handles_are_refused_and_the_server_keeps_serving(tmp, fs):
    """Every operation that takes a handle, with fh 0..69 (the server's own fds, the file
    system's small fh numbers) and 200 random 64-bit values, from uid 65534 inside the
    command: EBADF each time. Root's process that holds the file open reads it the same
    before and after, a forged release did not close the listening socket (a new process
    is served), and root's file is unchanged."""
    m = tmp / "mnt"
    if fs == "memory":
        spec, fs_args, options, setup = MEMORY, (), ALLOW_OTHER, secret_setup(m)
    else:
        lower = tmp / "lower"
        lower.mkdir()
        os.chmod(lower, 0o755)
        spec, fs_args = LOOPBACK, (lower,)
        options = ALLOW_OTHER + ("-o", "passthrough=no")
        setup = secret_setup(m)
    holder = (f"{sys.executable} -c 'import sys; f = open(\"{m}/secret\"); print(f.read(), end=\"\", flush=True); "
              f"sys.stdin.readline(); f.seek(0); print(f.read(), end=\"\", flush=True)'")
    script = (f"{setup}; mkfifo {tmp}/hold; ({holder} < {tmp}/hold &) ; exec 3>{tmp}/hold; sleep 1; "
              f"{sh_attacker('handles', '/secret', uid=NOBODY)}; echo >&3; exec 3>&-; wait; sleep 1; "
              f"cat {m}/secret; ls {m}")
    r = run_cmd(m, spec, script, fs_args=fs_args, options=options)
    lines = r.stdout.splitlines()
    ops = ("read", "write", "release", "fsync", "flush", "truncate", "readdir", "releasedir", "cache-close",
           "cache-open", "ioctl", "lock", "flock")
    said = [line for line in lines if line.split(" ")[0] in ops + ("still-served",)]
    assert probes("\n".join(said)) == {**{op: "EBADF" for op in ops}, "still-served": "OK"}, r.stdout + r.stderr
    rest = [line for line in lines if line not in said]
    assert rest == ["root only", "root only", "root only", "open", "public", "secret"], r.stdout + r.stderr
    assert r.returncode == 0, r.stderr


def test_a_handle_is_used_only_as_it_was_opened(tmp):
    """One's own handle used for what its open did not ask: a write or a read through the
    wrong access mode, a file handle as a directory's, another mount's: refused."""
    m = tmp / "mnt"
    r = run_cmd(m, MEMORY, f"{secret_setup(m)}; {sh_attacker('own-handle', '/open/mine', '/public', uid=NOBODY)}; "
                f"cat {m}/public", options=ALLOW_OTHER)
    got = probes(r.stdout)
    assert got["write-through-readonly"] == "EBADF", r.stdout + r.stderr
    assert got["read-through-writeonly"] == "EBADF"
    # W_LOCK: a write lock needs a handle open for writing; every field of the struct flock
    # and the command are checked before the class is called (request.c)
    assert got["write-lock-through-readonly"] == "EBADF", r.stdout + r.stderr
    assert all(got[k] == "EINVAL" for k in ("lock-bad-type", "lock-negative-start", "lock-short-struct",
                                            "lock-wait-command", "flock-bad-op", "ioctl-size-mismatch")), \
        r.stdout + r.stderr
    assert got["read-through-dir-handle"] == "EBADF"
    assert got["other-mount"] == "EINVAL"


def test_a_read_only_handle_does_not_truncate(tmp):
    """ftruncate through a handle opened read-only is EINVAL, as the kernel's (it truncated
    root's 0644 file for uid 65534 before dbacf37)."""
    m = tmp / "mnt"
    r = run_cmd(m, MEMORY, f"{secret_setup(m)}; {sh_attacker('own-handle', '/open/mine', '/public', uid=NOBODY)}; "
                f"cat {m}/public", options=ALLOW_OTHER)
    got = probes(r.stdout)
    assert got["truncate-through-readonly"] in ("EBADF", "EINVAL"), r.stdout + r.stderr
    assert r.stdout.endswith("anyone\n")


def test_a_handle_reaches_its_own_file_whatever_path_the_request_names(tmp):
    """fusepy file systems commonly find a file by its path in read and write: the path
    they get for a handle must be the one the handle was opened on."""
    m = tmp / "mnt"
    r = run_cmd(m, BY_PATH, f"echo 'root data' > {m}/theirs; "
                f"chmod 600 {m}/theirs; {sh_attacker('other-path', '/mine', '/theirs', uid=NOBODY)}; "
                f"cat {m}/theirs", options=ALLOW_OTHER)
    got = probes(r.stdout.replace("root data\n", ""))
    assert got["read-other-path"] != "root data", r.stdout + r.stderr     # its own file's bytes, or an error
    assert r.stdout.endswith("root data\n"), r.stdout + r.stderr


def test_a_handle_is_not_released_while_a_call_through_it_runs(tmp):
    m = tmp / "mnt"
    r = run_cmd(m, f"{PROGRAMS / 'release_race_fs.py'}:ReleaseRace", sh_attacker("release-race"))
    got = probes(r.stdout)
    assert got.get("read") == "data", r.stdout + r.stderr


# ---- 4. page caches opened read-write for anyone

def test_the_page_cache_of_a_file_one_may_not_open_is_refused(tmp):
    """W_CACHE_OPEN of root's 0600 file by uid 65534: EACCES without a handle, EBADF with a
    forged one, ESTALE with its own handle of another file; W_CACHE_CLOSE with forged
    tokens: EBADF; W_RELEASE of its own handle naming forged cache tokens: only its handle
    goes (an unknown c: EINVAL). Root's process that holds the file's cache reads the same bytes before
    and after, and so does a new one."""
    m = tmp / "mnt"
    holder = (f"{sys.executable} -c 'import sys; f = open(\"{m}/secret\"); print(f.read(), end=\"\", flush=True); "
              f"sys.stdin.readline(); f.seek(0); print(f.read(), end=\"\", flush=True)'")
    script = (f"{secret_setup(m)}; mkfifo {tmp}/hold; ({holder} < {tmp}/hold &) ; exec 3>{tmp}/hold; sleep 1; "
              f"{sh_attacker('cache', '/secret', '/open/mine', uid=NOBODY)}; echo >&3; exec 3>&-; wait; sleep 1; "
              f"cat {m}/secret")
    r = run_cmd(m, MEMORY, script, options=ALLOW_OTHER)
    lines = r.stdout.splitlines()
    got = probes("\n".join(line for line in lines if line.startswith("cache")))
    assert got == {"cache-open": "EACCES", "cache-open-forged-fh": "EBADF", "cache-open-other-path": "ESTALE",
                   "cache-close": "EBADF", "cache-close-by-release": "EINVAL,OK"}, r.stdout + r.stderr
    assert [line for line in lines if not line.startswith("cache")] == ["root only"] * 3, r.stdout + r.stderr
    assert r.returncode == 0, r.stderr


def test_a_reader_cannot_change_what_others_read_from_the_page_cache(tmp):
    """uid 65534, allowed to read root's 0644 file, asks for its page cache with its
    read-only handle and writes into what it gets: the server gives another user's reader
    no shared cache (EPERM: its preload makes one of its own), and root's processes read
    the file's own bytes before, during and after."""
    m = tmp / "mnt"
    reader = (f"{sys.executable} -c 'import sys; f = open(\"{m}/public\"); print(f.read(), end=\"\", flush=True); "
              f"sys.stdin.readline(); f.seek(0); print(f.read(), end=\"\", flush=True)'")
    script = (f"{secret_setup(m)}; echo 'public data' > {m}/public; mkfifo {tmp}/hold; ({reader} < {tmp}/hold &); "
              f"exec 3>{tmp}/hold; sleep 1; (echo; sleep 2) | {sh_attacker('cache-readonly', '/public', uid=NOBODY)}; "
              f"echo >&3; exec 3>&-; sleep 1; cat {m}/public")
    r = run_cmd(m, MEMORY, script, options=ALLOW_OTHER)
    lines = r.stdout.splitlines()
    assert [line for line in lines if not line.startswith(("cache", "done"))] == ["public data"] * 3, \
        r.stdout + r.stderr


# ---- 5. one request crashed the server

def test_a_mount_index_out_of_range_is_refused(tmp):
    """mnt=60000 (and every index past the mounts): EINVAL; the command's exit status stays
    its own (it was 139, the launcher's SIGSEGV)."""
    m = tmp / "mnt"
    r = run_cmd(m, MEMORY, f"echo hi > {m}/f; {sh_attacker('mount')}; cat {m}/f; exit 7")
    assert probes(r.stdout.replace("hi\n", "")) == {"mnt-1": "EINVAL", "mnt-2": "EINVAL", "mnt-255": "EINVAL",
                                                    "mnt-60000": "EINVAL", "mnt-65535": "EINVAL",
                                                    "still-served": "OK"}, r.stdout + r.stderr
    assert r.stdout.endswith("hi\n") and r.returncode == 7, r.stderr


def test_huge_sizes_negative_offsets_and_bad_lengths(tmp):
    """Sizes are capped, negative offsets and modes that do not exist are EINVAL, xattrs
    over 64 KiB E2BIG, unknown operations ENOSYS; a header whose lengths do not add up costs
    the attacker its connection, and the server serves the next one."""
    m = tmp / "mnt"
    r = run_cmd(m, MEMORY, f"echo hi > {m}/f; {sh_attacker('sizes', '/f')}; cat {m}/f")
    got = probes(r.stdout.replace("hi\n", ""))
    assert got == {"read-negative-offset": "EINVAL", "read-huge": "True", "read-negative-size": "OK",
                   "write-negative-offset": "EINVAL", "write-offset-overflow": "EINVAL",
                   "truncate-negative": "EINVAL", "getxattr-huge": "ENODATA", "setxattr-huge": "E2BIG",
                   "xattr-name-long": "ERANGE", "readlink-huge": "EINVAL", "mode-bad": "EINVAL",
                   "chown-bad": "EINVAL", "utimens-bad": "EINVAL", "utimens-short": "EINVAL", "op-0": "ENOSYS",
                   "op-999": "ENOSYS", "path2-where-none": "EINVAL", "data-where-none": "EINVAL",
                   "still-served": "OK", "lengths": "dropped", "after": "OK"}, r.stdout + r.stderr
    assert r.stdout.endswith("hi\n") and r.returncode == 0, r.stderr


# ---- 6. one client stalled everyone

VICTIM = """
import sys, time
path, seconds = sys.argv[1], float(sys.argv[2])
worst, n, wrong = 0.0, 0, 0
end = time.monotonic() + seconds
while time.monotonic() < end:
    t = time.monotonic()
    with open(path) as f:
        wrong += f.read() != "victim\\n"
    worst = max(worst, time.monotonic() - t)
    n += 1
    time.sleep(0.05)
print("victim", n, wrong, round(worst, 3))
"""


def test_a_reply_never_read_does_not_stall_another_client(tmp):
    """Three connections ask for a listing bigger than the region (its data rides on the
    socket) and never read it, one stops in the middle of its hello, one sends a header
    whose body never comes; they hold still for 40 s. A victim process opens and reads a
    file in a loop all the while: every read is right and none takes 10 s (the old server
    blocked its one FS thread 10 s per such reply: 12.4 s)."""
    m = tmp / "mnt"
    victim = tmp / "victim.py"
    victim.write_text(VICTIM)
    make = (f"{sys.executable} -c 'import os; [open(os.path.join(\"{m}/big\", \"%04d\" % i + \"n\" * 200), \"w\").close() "
            f"for i in range(6000)]'")
    stallers = " & ".join([sh_attacker("stall", "/big", 40)] * 3)
    script = (f"mkdir {m}/big && {make} && echo victim > {m}/v && "
              f"{{ {stallers} & }} ; sleep 5; {sys.executable} {victim} {m}/v 30; wait")
    r = run_cmd(m, MEMORY, script, timeout=240)
    lines = r.stdout.splitlines()
    assert lines.count("answered OK") == 3, r.stdout + r.stderr
    assert lines.count("len-over-region True") == 3, r.stdout
    assert lines.count("done") == 3, r.stdout + r.stderr
    (v,) = [line.split() for line in lines if line.startswith("victim ")]
    n, wrong, worst = int(v[1]), int(v[2]), float(v[3])
    assert n > 10 and wrong == 0, r.stdout
    assert worst < 10, f"a victim's read took {worst} s while the attacker stalled"
    assert r.returncode == 0, r.stderr


def test_one_user_cannot_take_every_connection(tmp):
    """uid 65534 (allow_other) opens connections until refused: past the cap
    (LDPFUSE_MAX_CONNECTIONS, here 32) it gets EMFILE; meanwhile the launcher's user is
    served, and after the attacker lets go so is uid 65534 again."""
    m = tmp / "mnt"
    script = (f"echo victim > {m}/v && chmod 644 {m}/v; mkfifo {tmp}/hold; "
              f"({sh_attacker('connections', 200, uid=NOBODY)} < {tmp}/hold &); exec 3>{tmp}/hold; "
              f"sleep 8; cat {m}/v; echo >&3; exec 3>&-; sleep 2; "
              f"setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups cat {m}/v")
    r = run_cmd(m, MEMORY, script, options=ALLOW_OTHER, env=base_env(LDPFUSE_MAX_CONNECTIONS="32"))
    lines = r.stdout.splitlines()
    assert "conns OK 32" in lines, r.stdout + r.stderr
    assert any(re.fullmatch(r"conns refused EMFILE \d+", line) for line in lines), r.stdout
    assert lines[-2:] == ["victim", "victim"], r.stdout + r.stderr
    assert r.returncode == 0, r.stderr


# ---- 7. shared tables were writable by every client

def test_the_table_of_change_counters_cannot_be_written(tmp):
    """The table's fd is read-only and its memfd sealed (F_SEAL_FUTURE_WRITE, shrink, grow):
    no write, no writable mapping, not even through a read-write reopen of
    /proc/self/fd/N; no seal can be added. Another process's stat after its write agrees with
    what it wrote, as before the attack."""
    m = tmp / "mnt"
    check = (f"{sys.executable} -c 'import os; p = \"{m}/open/c\"; bad = 0\n"
             f"for i in range(300):\n"
             f"    open(p, \"w\").write(\"x\" * i)\n"
             f"    bad += os.stat(p).st_size != i or len(open(p).read()) != i\n"
             f"print(\"coherent\", bad)'")
    r = run_cmd(m, MEMORY, f"{secret_setup(m)}; {check}; {sh_attacker('table', uid=NOBODY)}; {check}",
                options=ALLOW_OTHER)
    got = probes(r.stdout.replace("coherent 0\n", ""))
    assert got == {"mode": "rdonly", "write": "EBADF", "map-shared-write": "EACCES", "reopen-write": "EPERM",
                   "reopen-map-write": "EPERM", "reopen-truncate": "EPERM", "reopen-grow": "EPERM",
                   "add-seals": "EPERM", "still-served": "OK"}, r.stdout + r.stderr
    assert r.stdout.count("coherent 0\n") == 2, r.stdout


# ---- 8. temporary names another user could take first

VICTIM_UID, SQUATTER_UID = 40123, 40124


def test_a_directory_another_user_made_first_is_not_used_for_sockets(tmp):
    """uid 40124 makes /tmp/ldpfuse-sockets-40123 (mode 0777) before uid 40123 binds a socket
    in the mount: the stand-in must not be put there (the squatter could replace it and
    read what the victim's peers send; it was, before the run's private directory of
    bb9f95d); the socket still works."""
    squat = f"/tmp/ldpfuse-sockets-{VICTIM_UID}"
    shutil.rmtree(squat, ignore_errors=True)
    os.mkdir(squat)
    os.chown(squat, SQUATTER_UID, SQUATTER_UID)
    os.chmod(squat, 0o777)
    m = tmp / "mnt"
    echo = (f"import socket\ns = socket.socket(socket.AF_UNIX)\ns.bind('{m}/open/sock')\ns.listen(1)\n"
            f"c = socket.socket(socket.AF_UNIX)\nc.connect('{m}/open/sock')\na, _ = s.accept()\n"
            f"c.sendall(b'through')\nprint(a.recv(100).decode())")
    py = shutil.which("python3", path="/usr/bin:/bin")
    try:
        r = run_cmd(m, MEMORY, f"mkdir {m}/open && chmod 777 {m}/open && "
                    f"setpriv --reuid={VICTIM_UID} --regid={VICTIM_UID} --clear-groups {py} -c \"{echo}\"",
                    options=ALLOW_OTHER)
        used = os.listdir(squat)
    finally:
        shutil.rmtree(squat, ignore_errors=True)
    assert r.stdout == "through\n", r.stderr
    assert used == [], f"the victim's socket stand-in went into the squatter's directory: {used}"
