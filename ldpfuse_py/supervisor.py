"""The launcher's side of the supervisor (docs/supervisor.md, native/supervisor/).

With --supervise (LDPFUSE_SUPERVISE=auto), statically linked programs, which the loader
never preloads ldpfuse into, and Go programs, whose runtime makes its own system calls,
have their path calls served from outside: the preload installs a seccomp filter before
it execs one (native/interpose/supervise.c) and hands the filter's listener to
ldpfuse-supervisor, which this module starts for the run.
LDPFUSE_SUPERVISE=all supervises every program of the command (to measure what
supervision costs: bench/supervise_cost.py).
"""
import os
import socket
import subprocess

HELPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ldpfuse-supervisor")
_started = {}


def wanted(env):
    """'auto', 'all' or None: what the run supervises."""
    mode = env.get("LDPFUSE_SUPERVISE", "")
    return mode if mode in ("auto", "all") else None


def start(env):
    """Start the run's supervisor on a socket in the run's directory and name it in env.
    Returns False (with a line on stderr) if it cannot start: nothing is supervised then."""
    run_dir = env.get("LDPFUSE_RUN_DIR")
    if not run_dir or not os.path.isfile(HELPER):
        os.write(2, b"ldpfuse-run: --supervise: no run directory or no ldpfuse-supervisor: "
                    b"statically linked and Go programs run unsupervised\n")
        env.pop("LDPFUSE_SUPERVISE", None)
        return False
    path = os.path.join(run_dir, "supervisor.sock")
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    sock.bind(path)
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
        os.write(2, b"ldpfuse-run: --supervise: the supervisor did not start: statically linked "
                    b"and Go programs run unsupervised\n")
        env.pop("LDPFUSE_SUPERVISE", None)
        return False
    _started["pid"] = pid
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
