"""The launcher's side of the supervisor (docs/supervisor.md, native/supervisor/).

Statically linked programs, which the loader never preloads ldpfuse into, and Go programs,
whose runtime makes its own system calls, have their path calls served from outside, by
default (--no-supervise turns it off): the preload installs a seccomp filter before it
execs one (native/interpose/supervise.c) and hands the filter's listener to
ldpfuse-supervisor, which this module starts for the run. Programs the preload serves
carry no filter and pay nothing for it.
LDPFUSE_SUPERVISE=all supervises every program of the command (to measure what
supervision costs: bench/supervise_cost.py); =no (or --no-supervise) none.
"""
import os
import socket
import subprocess

HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ldpfuse-supervisor")
OFF = ("no", "off", "0", "false")
_started = {}


def unavailable():
    """Why this kernel cannot supervise (a line's end), or None."""
    try:
        with open("/proc/sys/kernel/seccomp/actions_avail") as f:
            notif = "user_notif" in f.read().split()
    except OSError:
        notif = False
    if not notif:
        return "this kernel has no seccomp user notification (SECCOMP_RET_USER_NOTIF)"
    release = os.uname().release.split("-")[0].split(".")
    try:
        if (int(release[0]), int(release[1])) < (5, 14):
            return f"Linux {os.uname().release} is older than 5.14 (no SECCOMP_ADDFD_FLAG_SEND)"
    except (IndexError, ValueError):
        pass
    return None


def configure(env, wanted_by_flag):
    """Decide what the run supervises and say it in env (LDPFUSE_SUPERVISE): 'auto' by
    default, 'all' if the environment asks for it, nothing with --no-supervise or
    LDPFUSE_SUPERVISE=no. A kernel that cannot supervise gets one line on stderr. Returns
    whether the run supervises."""
    for key in ("LDPFUSE_SUPERVISOR", "LDPFUSE_SUPERVISOR_PID", "LDPFUSE_SUPERVISOR_HELPER",
                "LDPFUSE_SUPERVISED"):
        env.pop(key, None)      # an enclosing launcher's: this run starts its own
    mode = env.get("LDPFUSE_SUPERVISE", "auto").lower()
    if not wanted_by_flag or mode in OFF:
        env.pop("LDPFUSE_SUPERVISE", None)
        return False
    why = unavailable()
    if why:
        os.write(2, f"ldpfuse-run: {why}: statically linked and Go programs will not see the "
                    f"mounts (docs/supervisor.md; --no-supervise silences this)\n".encode())
        env.pop("LDPFUSE_SUPERVISE", None)
        return False
    env["LDPFUSE_SUPERVISE"] = "all" if mode == "all" else "auto"
    return True


def wanted(env):
    """'auto', 'all' or None: what the run supervises."""
    mode = env.get("LDPFUSE_SUPERVISE", "")
    return mode if mode in ("auto", "all") else None


def start(env):
    """Start the run's supervisor on a socket in the run's directory and name it in env.
    Returns False (with a line on stderr) if it cannot start: nothing is supervised then."""
    run_dir = env.get("LDPFUSE_RUN_DIR")
    if not run_dir or not os.path.isfile(HELPER):
        os.write(2, b"ldpfuse-run: no run directory or no ldpfuse-supervisor: "
                    b"statically linked and Go programs run unsupervised\n")
        env.pop("LDPFUSE_SUPERVISE", None)
        return False
    path = os.path.join(run_dir, "supervisor.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    try:
        sock.bind(path)
    except OSError as e:
        sock.close()
        os.write(2, f"ldpfuse-run: the supervisor's socket cannot be made ({path}: {e.strerror}): "
                    "statically linked and Go programs run unsupervised\n".encode())
        env.pop("LDPFUSE_SUPERVISE", None)
        return False
    sock.listen(64)
    child_env = dict(env)
    # the supervisor serves; it is never supervised itself
    child_env.pop("LDPFUSE_SUPERVISE", None)
    child_env.pop("LDPFUSE_SUPERVISED", None)
    helper = subprocess.Popen([HELPER, "serve", str(sock.fileno()), str(os.getpid())], env=child_env,
                              pass_fds=(sock.fileno(),), stdout=subprocess.PIPE, stdin=subprocess.DEVNULL)
    pid_line = helper.stdout.readline()
    helper.wait()   # it detached: its pid came on stdout
    sock.close()
    try:
        pid = int(pid_line)
    except ValueError:
        os.write(2, b"ldpfuse-run: the supervisor did not start: statically linked "
                    b"and Go programs run unsupervised\n")
        env.pop("LDPFUSE_SUPERVISE", None)
        return False
    _started["pid"] = pid
    from . import _embedded

    try:
        _embedded.admit_member(pid)     # detached, it is not below us: the server serves it
    except OSError:
        pass    # it ended already: nothing is supervised
    try:
        _started["pidfd"] = os.pidfd_open(pid)
    except (OSError, AttributeError):
        pass
    env["LDPFUSE_SUPERVISOR"] = path
    env["LDPFUSE_SUPERVISOR_PID"] = str(pid)
    env["LDPFUSE_SUPERVISOR_HELPER"] = HELPER     # posix_spawn goes through its exec-as role
    return True


def command(argv_exec):
    """The command as it must be started: through the supervisor's exec role, whose exec
    goes through the preload, which supervises the program if it must (the same rule as
    for every exec of the command: native/interpose/supervise.c)."""
    return [HELPER, "exec", *argv_exec]


def stop(timeout=5.0):
    """Ask the supervisor to end (it writes back what supervised writers closed first) and
    wait for it."""
    pid = _started.pop("pid", None)
    if pid is None:
        return
    import select
    import signal

    try:
        os.kill(pid, signal.SIGTERM)
    except OSError:
        return
    fd = _started.pop("pidfd", None)
    if fd is not None:
        select.select([fd], [], [], timeout)
        os.close(fd)
