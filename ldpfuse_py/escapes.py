"""--watch-escapes and --strict: the launcher's half of the safety net (docs/escapes.md).

The preload library does the watching (native/interpose/escape.c): it reads
LDPFUSE_ESCAPES (``watch`` or ``strict``) in every process. Under ``strict`` each process
also appends one line per escape to the file named by LDPFUSE_ESCAPES_LOG, which the
launcher reads when the command has ended: it names the escapes and exits nonzero.
"""
import os
import sys
import tempfile

PROG = "ldpfuse-run"
SHOWN = 20      # escapes named at the end; the rest are counted


def configure(args, env):
    """Put the mode in the command's environment: the flags, or (no flag) an
    LDPFUSE_ESCAPES the caller already exported. Returns the record file under
    --strict (the caller reads it with finish()), else None."""
    mode = ("strict" if args.strict else "watch" if args.watch_escapes
            else env.get("LDPFUSE_ESCAPES", ""))
    env.pop("LDPFUSE_ESCAPES_LOG", None)
    if mode not in ("watch", "strict"):
        env.pop("LDPFUSE_ESCAPES", None)
        return None
    env["LDPFUSE_ESCAPES"] = mode
    if mode != "strict":
        return None
    # in the command's private directory (run_dir.py), 0600: nobody outside the command can
    # write a fake escape into it; with allow_other the command's other users may append
    # (0622: only the command's processes can reach the directory)
    fd, path = tempfile.mkstemp(prefix="ldpfuse-escapes-", dir=env.get("LDPFUSE_RUN_DIR"))
    if env.get("LDPFUSE_ALLOW_OTHER") and env.get("LDPFUSE_RUN_DIR"):
        os.fchmod(fd, 0o622)
    os.close(fd)
    env["LDPFUSE_ESCAPES_LOG"] = path
    return path


def finish(path, status):
    """The command has ended: name what escaped (one line each, on stderr) and give the
    wait status to exit with: the command's, or exit status 1 if it succeeded."""
    try:
        with open(path, errors="replace") as f:
            lines = f.read().splitlines()
    except OSError:
        lines = []
    try:
        os.unlink(path)
    except OSError:
        pass
    escapes = []
    for line in lines:
        fields = line.split("\t")
        if len(fields) == 5 and fields[1:] not in escapes:
            escapes.append(fields[1:])
    if not escapes:
        return status
    print(f"{PROG}: --strict: {len(escapes)} call(s) escaped ldpfuse (docs/escapes.md):",
          file=sys.stderr)
    for program, call, where, outcome in escapes[:SHOWN]:
        print(f"{PROG}:   {program}: {call} on {where}: {outcome}", file=sys.stderr)
    if len(escapes) > SHOWN:
        print(f"{PROG}:   ... and {len(escapes) - SHOWN} more", file=sys.stderr)
    sys.stderr.flush()
    if status is None or (os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0):
        return 1 << 8   # exit status 1
    return status


def run_watched(argv_exec, env, die, record):
    """A fusepy script's --mode embedded under --strict: the launcher cannot exec the
    command (it must read the record at the end), so it starts it, waits for it and every
    descendant, and exits as it did (a class's embedded run: embedded_mode.run)."""
    import signal

    from . import shared_mode

    pid = shared_mode.start_command(argv_exec, env)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGQUIT, signal.SIG_IGN)
    for sig in (signal.SIGTERM, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: shared_mode._forward(pid, s))
    shared_mode.exit_as(finish(record, shared_mode.reap_all(pid)))
