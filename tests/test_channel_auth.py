"""Issue 32's attacks on the channel between a command's processes and the launcher's
server, each played through the real launcher as a user runs it, the attacker a program of
its own (tests/programs/wire_attacker.py) as uid 65534 or as the launcher's user:

  3. the launcher's name after it dies: a server bound to the dead launcher's name, at its
     pid, hears nothing from the command's processes, which get EIO for good;
  4. the secret read from /proc/PID/environ of a process of the command opens nothing to
     a process outside it, of that uid or of the launcher's;
  5. a connection that says nothing costs nothing that lasts: no region, no thread, and it
     is dropped; the launcher's own uid cannot take the server's fds;
  7. a handle's token learned by a process that was never given the fd reads and releases
     nothing; a W_WRITTEN notice needs the right to write.

Each test fails on 2e84571 (the line each says). docs/security.md states the model.
Root is needed to run the attacker as another user (setpriv), as tests/test_security.py.
The mode is LDPFUSE_TEST_MODE's: in the embedded mode the attacker talks to the launcher's
own server, which serves there the processes that cannot run the class themselves.
"""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from conftest import LDP_MODE, LOOPBACK, NOBODY, PROGRAMS, base_env, launch_argv
from test_security import attacker, probes, sh_attacker, socket_of

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the attacker runs as another user (setpriv): needs root"),
    pytest.mark.skipif(subprocess.run(["which", "setpriv"], capture_output=True).returncode != 0,
                       reason="setpriv (util-linux) is not installed"),
]

THREAD_SAFE_MEMORY = f"{PROGRAMS / 'thread_safe_memory.py'}:ThreadSafeMemory"


class Command:
    """sh -c script under ldpfuse-run, talked to by the test: its stdout lines are read
    until a marker, a line on its stdin lets it go on."""

    def __init__(self, mnt, fs, script, fs_args=(), options=(), mode=LDP_MODE, prefix=(), group=None):
        """group: the process group to run in (the launcher is then not its leader: a
        group's id, as a pid, is never given to a new process while the group lives)."""
        self.group = group
        self.p = subprocess.Popen([*prefix, *launch_argv(mnt, fs, fs_args, options, mode), "sh", "-c", script],
                                  stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True, env=base_env(), cwd="/", start_new_session=group is None,
                                  process_group=group)
        self.out = []

    def until(self, marker, timeout=90):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            line = self.p.stdout.readline()
            if line == "":
                break
            self.out.append(line.rstrip("\n"))
            if line.strip() == marker:
                return
        self.kill()
        pytest.fail(f"the command never said {marker!r}: {self.out}\n{self.p.stderr.read()}")

    def go(self, timeout=120):
        try:
            out, err = self.p.communicate("go\n", timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
            pytest.fail("the command did not end after the attack")
        return self.p.returncode, out, err

    def kill(self):
        try:
            os.killpg(self.group or self.p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.p.communicate()


@pytest.fixture
def tmp(shared_tmp):
    return shared_tmp


def threads_of(pid):
    with open(f"/proc/{pid}/status") as f:
        return int(re.search(r"^Threads:\s+(\d+)", f.read(), re.M).group(1))


# ---- 4. membership in the command is the kernel's word, not the secret's

def test_the_secret_read_from_proc_opens_nothing_outside_the_command(tmp, users_lower):
    """With -o allow_other a process of uid 65534 runs in the command. A process of that uid
    started outside it reads the socket and the secret from the insider's
    /proc/PID/environ and asks to read /public and make /open/thief: refused (EACCES), as
    root's own process outside the command asking for root's /secret. The insider is
    served afterwards, nothing was made. (On 2e84571 both were served: `anyone`, OK,
    `root only`.)"""
    lower = users_lower
    m = tmp / "mnt"
    script = (f"setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups sh -c "
              f"'echo insider $$; echo ready; read go; cat {m}/public; ls {m}/open'")
    run = Command(m, LOOPBACK, script, fs_args=[lower], options=("-o", "allow_other,passthrough=no"))
    run.until("ready")
    (insider,) = [line.split()[1] for line in run.out if line.startswith("insider ")]
    as_other = subprocess.run(attacker("environ-thief", insider, "/public", "/open/thief", uid=NOBODY),
                              capture_output=True, text=True, timeout=60, env=base_env())
    as_root = subprocess.run(attacker("environ-thief", insider, "/secret", "/open/root-thief"),
                             capture_output=True, text=True, timeout=60, env=base_env())
    status, out, err = run.go()
    assert probes(as_other.stdout) == {"read": "refused EACCES", "mkdir": "refused EACCES"}, \
        as_other.stdout + as_other.stderr
    assert probes(as_root.stdout) == {"read": "refused EACCES", "mkdir": "refused EACCES"}, \
        as_root.stdout + as_root.stderr
    assert out == "anyone\n", err
    assert status == 0, err
    assert os.listdir(lower / "open") == []


# ---- 3. the launcher's name, after it died, is nobody's to answer for it

VICTIM = r"""
import errno, sys, time
path, log = sys.argv[1], sys.argv[2]
end = time.monotonic() + float(sys.argv[3])
with open(log, "a", buffering=1) as out:
    while time.monotonic() < end:
        try:
            with open(path) as f:
                f.read()
            out.write("OK\n")
        except OSError as e:
            out.write(errno.errorcode.get(e.errno, str(e.errno)) + "\n")
        time.sleep(0.05)
"""


def at_pid(pid, argv, tries=60):
    """argv started as process `pid` (as an attacker gets there by forking until it holds
    it; root, the test sets the kernel's last pid instead: faster), its first line read;
    None if another process took the pid first every time."""
    for _ in range(tries):
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=base_env())
        if p.pid == pid:
            return p
        p.kill()
        p.communicate()
    return None


@pytest.mark.skipif(LDP_MODE != "shared", reason="the embedded mode's processes run the class "
                    "themselves: none of them waits on the launcher's server to die")
def test_a_dead_launchers_name_and_pid_hear_nothing(tmp, users_lower):
    """kill -9 of the launcher while root's process of the command goes on reading a file
    of the mount. uid 65534 binds the launcher's socket name (from /proc/net/unix) in a
    process that holds the launcher's pid: root's process sends it nothing (no connection
    with a hello, so not the run's secret), and every call after the kill is EIO, with no
    connection per call. (On 2e84571 every call reconnected and sent the fake server the
    secret and its request.)
    The launcher runs as a script starts it, not as the leader of its process group: an
    interactive shell's job would keep its pid from anyone while the group lives."""
    lower = users_lower
    (lower / "f").write_text("data\n")
    m = tmp / "mnt"
    victim, log = tmp / "victim.py", tmp / "victim.log"
    victim.write_text(VICTIM)
    # the launcher as a script starts it: not the leader of its process group
    leader = subprocess.Popen(["sleep", "120"], process_group=0)
    # backing=no: a backed loopback serves the file in the victim itself, with no launcher
    # to ask (docs/backing.md); the attack is on the channel to the launcher
    run = Command(m, LOOPBACK, f"({sys.executable} {victim} {m}/f {log} 25 &); echo ready; sleep 30",
                  fs_args=[lower], options=["-o", "backing=no"], group=leader.pid)
    try:
        run.until("ready")
        name = socket_of(run)
        for _ in range(100):
            if log.exists() and log.read_text().count("OK") >= 3:
                break
            time.sleep(0.1)
        assert log.read_text().count("OK") >= 3, log.read_text()
        launcher = run.p.pid
        os.kill(launcher, signal.SIGKILL)
        run.p.wait(timeout=30)
        before = len(log.read_text().splitlines())
        fake = at_pid(launcher, attacker("fake-server", name, 4, uid=NOBODY))
        if fake is None:
            pytest.skip("another process took the launcher's pid every time")
        out, err = fake.communicate(timeout=60)
        time.sleep(0.5)
        after = log.read_text().splitlines()[before:]
    finally:
        run.kill()
        leader.wait()
    said = out.splitlines()
    assert said[0] == f"pid {launcher}" and said[-1] == "done", out + err
    assert [line for line in said if line.startswith("heard")] == [], "the fake server heard a hello: " + out
    (conns,) = [int(line.split()[1]) for line in said if line.startswith("conns ")]
    assert conns <= 1, f"{conns} connections: a reconnect per call"
    # what the process holds already (a cached open's lower file) may serve it a moment; once
    # a call has met the dead launcher, every one is EIO
    failed = after[after.index("EIO"):] if "EIO" in after else []
    assert len(failed) > 20 and set(failed) == {"EIO"}, " ".join(after)


# ---- 5. a connection that says nothing costs nothing that lasts

def test_silent_connections_of_another_user_get_no_region_no_thread_and_are_dropped(tmp, users_lower):
    """-o allow_other, a thread_safe class (a thread per connection once admitted): uid 65534
    outside the command opens 1000 connections and says nothing for 8 s. None gets a
    region, the launcher grows no thread for them, every one is dropped; meanwhile the
    command's 20 cats read the file. (On 2e84571: 1000 regions, none dropped, a thread
    each.)"""
    m = tmp / "mnt"
    if LDP_MODE == "shared":
        fs, fs_args = THREAD_SAFE_MEMORY, ()
        setup = f"echo v > {m}/v && chmod 644 {m}/v"
    else:
        lower = users_lower
        (lower / "v").write_text("v\n")
        fs, fs_args, setup = LOOPBACK, (lower,), "true"
    script = f"{setup}; echo ready; read go; i=0; while [ $i -lt 20 ]; do cat {m}/v; i=$((i+1)); done"
    run = Command(m, fs, script, fs_args=fs_args, options=("-o", "allow_other"))
    run.until("ready")
    threads = threads_of(run.p.pid)
    flood = subprocess.Popen(attacker("silent", 1000, 8, socket_of(run), uid=NOBODY), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=base_env())
    time.sleep(2)
    during = threads_of(run.p.pid)
    status, out, err = run.go(timeout=60)
    fout, ferr = flood.communicate(timeout=60)
    got = probes(fout)
    assert got["opened"] != "0" and got["region"] == "0", fout + ferr
    assert got["dropped"] == got["opened"], fout
    assert during <= threads + 4, f"{threads} threads before, {during} during the flood"
    assert out == "v\n" * 20 and status == 0, err


def test_the_launchers_own_user_cannot_take_the_servers_fds(tmp, users_lower):
    """The launcher runs with 1024 fds. Root's own process outside the command opens 3000
    connections and says nothing for 20 s: they get no region, the command's 20 cats are
    all served while they hold (on 2e84571 the server handed out a region to each until
    its fds ran out, and the cats waited behind them)."""
    m = tmp / "mnt"
    lower = users_lower
    (lower / "v").write_text("v\n")
    script = f"echo ready; read go; i=0; while [ $i -lt 20 ]; do cat {m}/v; i=$((i+1)); done"
    run = Command(m, LOOPBACK, script, fs_args=[lower], prefix=("prlimit", "--nofile=1024:1024", "--"))
    run.until("ready")
    flood = subprocess.Popen(attacker("silent", 3000, 20, socket_of(run)), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True, env=base_env())
    time.sleep(3)
    t0 = time.monotonic()
    status, out, err = run.go(timeout=60)
    took = time.monotonic() - t0
    fout, ferr = flood.communicate(timeout=60)
    got = probes(fout)
    assert got["region"] == "0", fout + ferr
    assert out == "v\n" * 20 and status == 0, err
    assert took < 15, f"the cats took {took:.1f} s while the connections held (they hold 20 s)"


# ---- 7. a handle is its opener's and its descendants', not its token's

def test_a_learned_handle_token_reads_nothing(tmp, users_lower):
    """Root's process of the command opens /secret; a child it forks reads through the
    handle (it inherited it). The token, written to a file, is learned by two processes of
    the command that were never given the fd (uid 65534, -o allow_other; and one of root):
    their read and release are EBADF. The holder has said it passes an fd of the file
    (W_PASS, as a sendmsg of it does): the learned token passes nothing (EBADF), and a
    claim with an fd of the learner's own, one like the holder's, is no claim (ENOENT):
    the token still reads nothing. uid 65534's W_WRITTEN about root's 0600 file is
    EACCES. Root's holder still reads its file at the end. (On 2e84571 the learned token
    read `root only` and released root's handle; W_WRITTEN was OK.)"""
    lower = users_lower
    m = tmp / "mnt"
    tok = tmp / "token"
    script = (f"mkfifo {tmp}/hold; ({sh_attacker('hold-handle', '/secret', tok)} < {tmp}/hold &); "
              f"exec 3>{tmp}/hold; while [ ! -e {tok} ]; do sleep 0.1; done; "
              f"{sh_attacker('learned-handle', '/secret', tok, uid=NOBODY)}; "
              f"{sh_attacker('learned-handle', '/secret', tok)}; "
              f"{sh_attacker('written', '/secret', uid=NOBODY)}; "
              f"echo >&3; exec 3>&-; wait; cat {m}/secret")
    # passthrough=no: a file the loopback opened is read through the server's handle
    r = subprocess.run(launch_argv(m, LOOPBACK, [lower], ("-o", "allow_other,passthrough=no")) + ["sh", "-c", script],
                       capture_output=True, text=True, timeout=180, env=base_env(), cwd="/")
    lines = r.stdout.splitlines()
    assert "inherited-read root only" in lines, r.stdout + r.stderr
    assert lines.count("learned-read EBADF") == 2, r.stdout + r.stderr
    assert lines.count("learned-release EBADF") == 2, r.stdout
    assert "passed OK" in lines, r.stdout + r.stderr
    assert lines.count("learned-pass EBADF") == 2, r.stdout
    assert lines.count("learned-claim ENOENT") == 2, r.stdout
    assert lines.count("learned-read-after-claim EBADF") == 2, r.stdout
    assert "written EACCES" in lines, r.stdout
    assert lines[-1] == "root only" and r.returncode == 0, r.stdout + r.stderr
