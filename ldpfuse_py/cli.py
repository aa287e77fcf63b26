"""ldpfuse-run: run a command with a Python file system mounted, no kernel involved.

    ldpfuse-run [--mountpoint DIR] [-o KEY=VALUE]... [--mode embedded|shared]
                [--log-level LEVEL] [--log-file FILE] [--trace] [--stats] [--watch-escapes | --strict]
                [--no-supervise]
                FS [FS_ARG...] -- COMMAND [ARG...]
    ldpfuse-run [options] -m MODULE [ARG...] -- COMMAND [ARG...]

FS is a class (path/to/file.py:Class, package.module:Class) or a fusepy script
(path/to/script.py), run as `python script.py FS_ARG...` would; -m runs a fusepy module as
`python -m MODULE ARG...` would. The launcher checks the file system can be loaded, writes the mount table and what the
preload library needs into the environment, and starts COMMAND with LD_PRELOAD set: the exit
status is the command's. Bad input gets one line on stderr and exit status 2 (127 when the
command does not exist, 126 when it cannot be executed); nothing is started then.
"""
import argparse
import errno
import os
import shutil
import sys
import sysconfig

from .fs_loader import (FLAGS, MODULE_PREFIX, MOUNT_FLAGS, SCRIPT_PREFIX, SpecError, check_instance,
                        check_options, is_script_spec, load_class, parse_options, split_spec)

PROG = "ldpfuse-run"
SEP = "\x1f"
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class UsageError(Exception):
    pass


def die(msg, status=2):
    print(f"{PROG}: {msg}", file=sys.stderr)
    from . import run_dir

    run_dir.remove()
    sys.exit(status)


class ArgumentParser(argparse.ArgumentParser):
    def error(self, message):
        """argparse's complaint as one line (no usage block), exit status 2."""
        if "required: FS" in message:   # nothing before '--' names the file system
            die("no file system before '--': name one (path/to/file.py:Class, package.module:Class, "
                "a fusepy script path/to/script.py, or -m MODULE)")
        die(" ".join(message.split()))


def parser():
    p = ArgumentParser(
        prog=PROG,
        usage="%(prog)s [--mountpoint DIR] [-o KEY=VALUE]... [--mode embedded|shared] "
              "[--log-level LEVEL] [--log-file FILE] [--trace] [--stats] [--watch-escapes | --strict] [--no-supervise] FS [FS_ARG...] -- COMMAND [ARG...]\n"
              "       %(prog)s [options] -m MODULE [ARG...] -- COMMAND [ARG...]",
        description="Run COMMAND (and every process it starts) with the file system FS mounted "
                    "at DIR, served in-process by an LD_PRELOAD library: no FUSE, no root.")
    p.add_argument("--mountpoint", metavar="DIR", help="where the file system appears (need not exist)")
    p.add_argument("-o", dest="options", metavar="KEY=VALUE", action="append", default=[],
                   help="keyword argument for the file system class (repeatable); "
                        "-o ro: a read-only mount")
    p.add_argument("--mode", choices=["embedded", "shared"], default=None,
                   help="shared: one FS process for the whole command (the default); embedded: the "
                        "FS runs inside each process (the default for a class whose "
                        "ldpfuse_mode is 'embedded')")
    p.add_argument("--log-level", default=None, metavar="LEVEL",
                   choices=["debug", "info", "warning", "error", "critical",
                            "DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"])
    p.add_argument("--log-file", metavar="FILE", help="log here instead of stderr")
    p.add_argument("--trace", action="store_true",
                   help="log one line per file system operation: pid, operation, path, "
                        "arguments, result or errno name, microseconds")
    p.add_argument("--stats", action="store_true",
                   help="at the end, a table per operation: calls, time in the file system's server "
                        "and in transport (p50, p99)")
    p.add_argument("--watch-escapes", action="store_true",
                   help="catch file system calls made outside libc (inline system calls, ld.so, "
                        "liburing) with Syscall User Dispatch: those on mount paths are served "
                        "and reported once per call and program (docs/escapes.md); each call "
                        "made outside libc then costs about 1.5 us, one through libc 10-15 ns more")
    p.add_argument("--strict", action="store_true",
                   help="--watch-escapes, but a call outside libc on a mount path fails with EIO, "
                        "a statically linked or set-ID program is not started (EPERM), and "
                        "ldpfuse-run names the escapes at the end and exits nonzero")
    p.add_argument("--no-supervise", dest="supervise", action="store_false", default=True,
                   help="do not serve the programs the preload cannot reach (statically linked: "
                        "busybox-static, CGO_ENABLED=0 Go; and Go programs): by default their path "
                        "calls are stopped by a seccomp filter and answered by ldpfuse-supervisor "
                        "(docs/supervisor.md); without it they do not see the mount")
    p.add_argument("--supervise", action="store_true", default=True, help=argparse.SUPPRESS)   # the default now
    p.add_argument("fs", metavar="FS", help="path/to/file.py:ClassName, package.module:ClassName, "
                                            "or a fusepy script path/to/script.py (its FUSE() call "
                                            "gives the mount point and options)")
    p.add_argument("fs_args", metavar="FS_ARG", nargs=argparse.REMAINDER)
    return p


def find_libpython():
    """The shared libpython of this interpreter, for processes that are not Python."""
    names = [sysconfig.get_config_var("INSTSONAME"), sysconfig.get_config_var("LDLIBRARY")]
    dirs = [sysconfig.get_config_var("LIBDIR"), sysconfig.get_config_var("LIBPL"),
            os.path.join(sys.base_prefix, "lib")]
    multiarch = sysconfig.get_config_var("MULTIARCH")
    if multiarch:
        dirs.append(os.path.join("/usr/lib", multiarch))
    for d in dirs:
        for n in names:
            if d and n and n.endswith((".so", ".so.1.0")) or (n and ".so." in n):
                path = os.path.join(d, n)
                if os.path.isfile(path):
                    return path
    return ""


def find_backend():
    suffix = sysconfig.get_config_var("EXT_SUFFIX") or ".so"
    path = os.path.join(PACKAGE_DIR, "_embedded" + suffix)
    if os.path.isfile(path):
        return path
    for name in os.listdir(PACKAGE_DIR):
        if name.startswith("_embedded") and name.endswith(".so"):
            return os.path.join(PACKAGE_DIR, name)
    return ""


def existing_mounts(env):
    """Mounts set up by an enclosing ldpfuse-run (nested invocations add to them)."""
    mounts = []
    points = env.get("LDPFUSE_MOUNTPOINTS", "")
    for i, point in enumerate(p for p in points.split("\n") if p):
        mounts.append({
            "point": point,
            "spec": env.get(f"LDPFUSE_FS_{i}", ""),
            "args": env.get(f"LDPFUSE_FS_{i}_ARGS", ""),
            "opts": env.get(f"LDPFUSE_FS_{i}_OPTS", ""),
        })
    return mounts


def mount_environment(env, mounts):
    for key in [k for k in env if k.startswith("LDPFUSE_FS_") or k in ("LDPFUSE_MOUNTPOINTS", "LDPFUSE_NMOUNTS")]:
        del env[key]
    mounts = sorted(mounts, key=lambda m: len(m["point"]), reverse=True)  # nested: longest first
    env["LDPFUSE_MOUNTPOINTS"] = "\n".join(m["point"] for m in mounts)
    env["LDPFUSE_NMOUNTS"] = str(len(mounts))
    for i, m in enumerate(mounts):
        env[f"LDPFUSE_FS_{i}"] = m["spec"]
        env[f"LDPFUSE_FS_{i}_ARGS"] = m["args"]
        env[f"LDPFUSE_FS_{i}_OPTS"] = m["opts"]


def absolute_spec(spec):
    target, cls = split_spec(spec)
    if cls and (target.endswith(".py") or os.sep in target):
        return f"{os.path.abspath(target)}:{cls}"
    return spec


def absolute_arg(arg):
    """An FS argument that names an existing path, relative to the launcher's cwd, made
    absolute: each process builds its object in its own working directory (a command
    that changed directory first would otherwise look for 'data' elsewhere)."""
    if arg and not os.path.isabs(arg) and os.path.exists(arg):
        return os.path.abspath(arg)
    return arg


def in_mount(path, point):
    return path == point or path.startswith(point + "/")


def resolve_command(cmd, mountpoints):
    """argv to exec: a command stored in the mount is started through a preloaded shell
    (the launcher itself cannot see the mount). FileNotFoundError if there is no such
    command, PermissionError if there is one but it cannot be executed (the shell's 127
    and 126)."""
    name = cmd[0]
    if "/" in name:
        full = os.path.normpath(os.path.abspath(name))
        if any(in_mount(full, p) for p in mountpoints):
            return ["/bin/sh", "-c", 'exec "$0" "$@"', *cmd]
        if not os.path.exists(name):
            raise FileNotFoundError(name)
        if os.path.isdir(name) or not os.access(name, os.X_OK):
            raise PermissionError(name)
        return cmd
    if shutil.which(name) is None:
        if shutil.which(name, mode=os.F_OK) not in (None, ""):
            raise PermissionError(name)
        raise FileNotFoundError(name)
    return cmd


def one_line(exc):
    return " ".join(str(exc).split())


def mount_point(mountpoint, die=die):
    if not mountpoint:
        die("--mountpoint is empty: name the directory where the file system appears")
    if "\n" in mountpoint:
        die("the mount point may not contain a newline")
    point = os.path.normpath(os.path.abspath(mountpoint))
    if point == "/":
        die("the mount point cannot be /")
    if os.path.lexists(point) and not os.path.isdir(point):
        die(f"the mount point {mountpoint} is not a directory")
    return point


class ScriptOutput:
    """What a script run by the launcher prints: kept (its last lines name why a script
    that exits before FUSE() failed) and, in --mode shared, where this process serves the
    command, written to the log, never into the command's output."""

    encoding = "utf-8"
    errors = "backslashreplace"

    def __init__(self, to_log):
        self.to_log = to_log
        self.lines = []
        self.pending = ""

    def write(self, text):
        lines = (self.pending + text).split("\n")
        self.pending = lines.pop()
        for line in lines:
            if line.strip():
                self.lines = (self.lines + [line])[-5:]
                if self.to_log:
                    from ._runtime import log_line

                    log_line(line)
        return len(text)

    def start_logging(self):
        """FUSE() was called: what the script printed so far, and from now on, is logged."""
        from ._runtime import log_line

        for line in self.lines:
            log_line(line)
        self.to_log = True

    def flush(self):
        pass

    def isatty(self):
        return False

    def last_line(self):
        lines = self.lines + ([self.pending] if self.pending.strip() else [])
        return lines[-1].strip() if lines else ""


def die_now(msg, status=2):
    """die() from inside a script's FUSE() call: a SystemExit there would be the script's."""
    sys.stdout.flush()
    sys.__stderr__.write(f"{PROG}: {msg}\n")
    sys.__stderr__.flush()
    from . import run_dir

    run_dir.remove()
    os._exit(status)


def run_script(args, own_env, cmd):
    """A fusepy script (or -m module): run it here as ``python script.py ARGS`` would; its
    FUSE() call launches the command (see fusepy_script). --mode embedded execs it from
    inside FUSE(); --mode shared (the default) serves it from this process, FUSE() returns when it has
    ended, the script's code after FUSE() runs, and the exit status is the command's."""
    import _thread

    from . import fusepy_script

    shown = f"-m {args.module}" if args.module else args.fs
    if args.mode is None:
        args.mode = "shared"    # the default: one instance for the command tree
    if args.log_file:   # what the script prints or logs here goes there too
        os.environ["LDPFUSE_LOG_FILE"] = os.path.abspath(args.log_file)
    out = ScriptOutput(to_log=False)   # logged from FUSE() on: before it, a failure names it
    served = {}

    def on_fuse(call):
        try:
            launch_from_fuse(call)
        except SystemExit:
            raise
        except BaseException as e:
            die_now(f"{shown}: starting the command failed: {type(e).__name__}: {one_line(e)}")

    def launch_from_fuse(call):
        if args.mode == "shared":
            out.start_logging()
        mountpoint = args.mountpoint or call.mountpoint
        if not mountpoint:
            die_now(f"{shown}: FUSE() was given no mount point and there is no --mountpoint")
        # FUSE(..., allow_other=True): the script's own access options, unless -o said
        if not any(var in own_env for var in ACCESS_FLAGS.values()):
            own_env.update(access_options_of(call.options))
        timeout = call.options.get("attr_timeout")
        if timeout is not None and "LDPFUSE_ATTR_TIMEOUT" not in own_env:
            own_env["LDPFUSE_ATTR_TIMEOUT"] = str(float(timeout))
        if (args.log_level or "").lower() == "debug":
            for key in call.ignored_options():
                sys.__stderr__.write(f"{PROG}: FUSE() option {key}={call.options[key]!r} has "
                                     f"no meaning without a kernel mount: ignored\n")
        spec = (f"{MODULE_PREFIX}{args.module}:{os.getcwd()}" if args.module
                else SCRIPT_PREFIX + os.path.abspath(args.fs))
        streams = sys.stdout, sys.stderr
        sys.stdout, sys.stderr = sys.__stdout__, sys.__stderr__  # the launcher's own lines
        try:
            pid = launch(args, spec, mount_point(mountpoint, die_now), own_env, cmd, die_now,
                         script=True)
        finally:
            sys.stdout, sys.stderr = streams
        # --mode shared: the command runs; wait for it beside the FUSE() call
        from . import shared_mode

        done = _thread.allocate_lock()
        done.acquire()
        served["done"] = done

        def waiter():
            try:
                served["status"] = shared_mode.wait(pid)
                if getattr(args, "escape_record", None):
                    from . import escapes

                    served["status"] = escapes.finish(args.escape_record, served["status"])
            finally:
                done.release()
            # the script's code after FUSE() had its time (FusepyOps._unmount): a script
            # that still runs does not keep the command's exit status from its caller
            if not run.wait_finished(1.0):
                shared_mode.exit_as(served.get("status"))

        _thread.start_new_thread(waiter, ())

    run = fusepy_script.ScriptRun(None if args.module else args.fs, args.fs_args,
                                  module=args.module, launch=on_fuse, stdout=out)
    run.run(keep_process_state=True)
    if "done" not in served:
        e = run.error
        if isinstance(e, fusepy_script.ScriptExit) or e is None:
            why = str(e) if e else "the script did not call FUSE(operations, mountpoint, ...)"
            last = out.last_line()
            die(f"{shown}: {why}" + (f": {last}" if last and e else ""))
        die(f"{shown}: running the script failed: {type(e).__name__}: {one_line(e)}")
    served["done"].acquire()
    from . import shared_mode

    shared_mode.exit_as(served.get("status"))


def unreachable_reason(program):
    """Why the dynamic loader will not preload ldpfuse into this program (docs/limitations.md),
    or None. Only what the file itself says: statically linked, another word size, set-ID."""
    import stat
    import struct

    path = program if "/" in program else shutil.which(program)
    try:
        st = os.stat(path)
        with open(path, "rb") as f:
            head = f.read(64)
            if len(head) < 64 or head[:4] != b"\x7fELF" or head[5] != 1:  # ELF, little-endian
                return None
            if head[4] != (2 if struct.calcsize("P") == 8 else 1):
                return "built for another word size"
            (phoff,) = struct.unpack_from("<Q", head, 32)
            phentsize, phnum = struct.unpack_from("<HH", head, 54)
            f.seek(phoff)
            table = f.read(phentsize * phnum)
    except (OSError, TypeError, struct.error):
        return None
    types = [struct.unpack_from("<I", table, i * phentsize)[0]
             for i in range(min(phnum, len(table) // max(phentsize, 1)))]
    if 3 not in types:  # no PT_INTERP: nothing loads LD_PRELOAD
        return "statically linked"
    if st.st_mode & stat.S_ISUID and st.st_uid != os.geteuid():
        return "set-user-ID"
    if st.st_mode & stat.S_ISGID and st.st_gid != os.getegid() and st.st_gid not in os.getgroups():
        return "set-group-ID"
    return None


def warn_if_not_preloaded(program, point):
    reason = unreachable_reason(program)
    if reason:
        print(f"{PROG}: warning: {program} is {reason}: the loader will not preload ldpfuse "
              f"into it, so it cannot see {point} (programs it starts can); "
              f"see docs/limitations.md", file=sys.stderr)


def preferred_mode(cls):
    """The mode a class asks for when --mode is not given (docs/processes-and-modes.md):
    `ldpfuse_mode = "embedded"` for a class whose state lives outside the process."""
    mode = getattr(cls, "ldpfuse_mode", "shared")
    if mode not in ("embedded", "shared"):
        die(f"{cls.__name__}.ldpfuse_mode must be 'embedded' or 'shared', not {mode!r}")
    return mode


def main(argv=None):
    argv = sys.argv[1:] if argv is None else list(argv)
    if "--" not in argv:
        if any(a in ("-h", "--help") for a in argv):
            parser().print_help()
            return 0
        die("missing '--' before the command (usage: ldpfuse-run [options] FS [FS_ARG...] -- COMMAND [ARG...])")
    split = argv.index("--")
    ours, cmd = argv[:split], argv[split + 1:]
    if not cmd:
        die("no command after '--'")
    ours, module, module_args = split_module(ours)
    p = parser()
    if module is not None:
        ours = ours + ["-"]     # FS is given by -m
    try:
        args = p.parse_args(ours)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 2
    args.module = module
    if module is not None:
        if args.fs_args:
            die(f"-m {module}: its arguments follow it (ldpfuse-run [options] -m MODULE "
                f"[ARG...] -- COMMAND)")
        args.fs, args.fs_args = module, module_args
    script = module is not None or is_script_spec(args.fs)
    if not script and split_spec(args.fs)[1] is None and args.fs.endswith(".py"):
        die(f"no such file system file: {args.fs}")
    if not script:
        take_trailing_options(args)
    args.fs_args = [absolute_arg(a) for a in args.fs_args]
    if args.mountpoint is None and not script:
        die("--mountpoint DIR is required")
    if args.log_file:
        check_log_file(args.log_file)
    # -o options that are ldpfuse's own (FUSE's names), not the class's
    own = {"attr_timeout": "LDPFUSE_ATTR_TIMEOUT", "op_timeout": "LDPFUSE_OP_TIMEOUT"}
    own_env = access_options(args)
    for kv in list(args.options):
        key, _, value = kv.partition("=")
        if key in own:
            try:
                seconds = float(value)
            except ValueError:
                seconds = -1.0
            if not 0 <= seconds < float("inf"):    # NaN fails too
                die(f"-o {key} expects a number of seconds, 0 or more, got {value!r}")
            own_env[own[key]] = value
            args.options.remove(kv)
    take_workers_options(args, own_env)
    if script:
        if "LDPFUSE_WORKERS" in own_env and args.mode == "embedded":
            die(WORKERS_SHARED_ONLY)
        bad = [kv for kv in args.options if kv not in FLAGS]
        if bad:
            die(f"-o {bad[0]}: -o is for a file system class; a fusepy script "
                f"takes its options from its FUSE() call (only -o ro applies to it)")
        return run_script(args, own_env, cmd)
    point = mount_point(args.mountpoint)
    try:
        opts = parse_options(args.options)
        spec = absolute_spec(args.fs)
        cls = load_class(spec, private_name="_ldpfuse_fs_check")
    except SpecError as e:
        die(str(e))
    except BaseException as e:  # the FS file raised at import
        die(f"{args.fs}: importing the file system failed: {type(e).__name__}: {one_line(e)}")
    opts.pop(MOUNT_FLAGS, None)
    try:
        check_options(cls, opts)
    except SpecError as e:
        die(str(e))
    try:
        ops = cls(*args.fs_args, **opts)
    except BaseException as e:
        die(f"{args.fs}: {cls.__name__}({', '.join(map(repr, args.fs_args))}) failed: "
            f"{type(e).__name__}: {one_line(e)}")
    try:
        check_instance(ops, args.fs)
    except SpecError as e:
        die(str(e))
    if getattr(ops, "backing", None) is not None:
        # after-filters and hidden names (ldpfuse_py/after.py): a declaration the class
        # cannot serve (after= with no after method) is one line now, in either mode
        from .after import Filtered, filtered_trees

        try:
            trees = filtered_trees(ops)
            if trees:
                Filtered(ops, trees)
        except (TypeError, ValueError) as e:
            die(f"{args.fs}: {one_line(e)}")
    check = getattr(ops, "ldpfuse_start_check", None)
    if callable(check):     # the class's own check that it can serve (a store that answers)
        try:
            check()
        except BaseException as e:
            die(f"{args.fs}: {one_line(e)}")
    if args.mode is None:
        args.mode = preferred_mode(cls)
    if "LDPFUSE_WORKERS" in own_env and args.mode == "embedded":
        die(WORKERS_SHARED_ONLY)
    from . import _runtime

    _runtime.adopt(spec, args.fs_args, args.options, ops)   # built once, not again to serve
    return launch(args, spec, point, own_env, cmd, die)


WORKERS_SHARED_ONLY = ("-o workers is an option of the shared mode (--mode embedded already builds an "
                       "instance of the class in every process)")


def take_workers_options(args, own_env):
    """-o workers=N|auto and -o workers_safe[=fork] (ldpfuse_py/workers.py) out of
    args.options, into own_env (LDPFUSE_WORKERS when N > 1, LDPFUSE_WORKERS_SAFE)."""
    from . import workers

    for kv in list(args.options):
        key, sep, value = kv.partition("=")
        if key == "workers":
            try:
                n = workers.count(value if sep else "")
            except ValueError as e:
                die(str(e))
            own_env.pop(workers.ENV, None)
            if n > 1:
                own_env[workers.ENV] = str(n)
        elif key == "workers_safe" and value in ("", workers.FORK):
            own_env[workers.SAFE_ENV] = value or "1"
        elif key == "workers_safe":
            die(f"-o workers_safe takes no value, or fork, got {value!r}")
        else:
            continue
        args.options.remove(kv)


def split_module(ours):
    """``[options] -m MODULE ARG...``: as ``python -m``, everything after the module name
    is the module's. Returns (options, module or None, module args)."""
    takes_value = {"--mountpoint", "-o", "--mode", "--log-level", "--log-file"}
    i = 0
    while i < len(ours):
        a = ours[i]
        if a == "-m":
            if i + 1 >= len(ours):
                die("-m expects a module name")
            return ours[:i], ours[i + 1], ours[i + 2:]
        if a in takes_value:
            i += 2
            continue
        if not a.startswith("-"):
            break   # the FS: what follows is its
        i += 1
    return ours, None, []


def take_trailing_options(args):
    """``FS ARG... -o KEY=VALUE``: an -o after a class spec is still ldpfuse-run's, as
    FUSE file systems take -o anywhere on their command line."""
    rest = []
    it = iter(args.fs_args)
    for a in it:
        if a == "-o":
            value = next(it, None)
            if value is None:
                die("-o expects KEY=VALUE")
            args.options.append(value)
        elif a.startswith("-o") and len(a) > 2:
            args.options.append(a[2:])
        else:
            rest.append(a)
    args.fs_args = rest


# FUSE's access options (docs/security.md), spelled as FUSE spells them: -o allow_other,
# -o allow_root, -o default_permissions, alone or in a comma-separated -o. allow_other turns
# default_permissions on unless -o default_permissions=no: a class that checks nothing
# itself (most do) would otherwise let every user of the command read everything.
ACCESS_FLAGS = {"allow_other": "LDPFUSE_ALLOW_OTHER", "allow_root": "LDPFUSE_ALLOW_ROOT",
                "default_permissions": "LDPFUSE_DEFAULT_PERMISSIONS"}
NO = ("0", "no", "false", "off")


def access_options(args):
    """Take FUSE's access options out of args.options; returns their environment."""
    chosen = {}
    rest = []
    for kv in args.options:
        kept = []
        for part in kv.split(","):
            key, sep, value = part.partition("=")
            if key not in ACCESS_FLAGS or (sep and key != "default_permissions"):
                kept.append(part)
                continue
            if sep and value.lower() not in NO + ("1", "yes", "true", "on"):
                die(f"-o default_permissions expects yes or no, got {value!r}")
            chosen[key] = not (sep and value.lower() in NO)
        if kept and len(kept) != len(kv.split(",")):
            rest.append(",".join(kept))
        elif kept:
            rest.append(kv)
    args.options = rest
    return access_environment(chosen, lambda: die("-o allow_other and -o allow_root exclude each other "
                                                  "(allow_other already lets root in)"))


def access_options_of(options):
    """The environment of a fusepy FUSE() call's access options (allow_other=True, ...)."""
    from .fuse_compat import _true

    chosen = {k: _true(options[k]) for k in ACCESS_FLAGS if k in options}
    return access_environment(chosen, lambda: die_now("FUSE(): allow_other and allow_root exclude each other"))


def access_environment(chosen, conflict):
    """The environment of the access options chosen ({name: on}): allow_other and
    allow_root exclude each other (conflict() ends the run), allow_other turns
    default_permissions on unless it was chosen either way."""
    if chosen.get("allow_other") and chosen.get("allow_root"):
        conflict()
    if chosen.get("allow_other") and "default_permissions" not in chosen:
        chosen["default_permissions"] = True
    return {ACCESS_FLAGS[k]: "1" for k, on in chosen.items() if on}


def check_log_file(path):
    """--log-file must be writable now: a log that cannot be written drops every line."""
    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as e:
        die(f"cannot write the log file {path}: {e.strerror}")
    os.close(fd)


def launch(args, spec, point, own_env, cmd, die, script=False):
    """Put the mount in the environment and run the command. --mode shared: as a child,
    served from this process (for a script, returns the command's pid and leaves the
    waiting to the caller); --mode embedded: as a child, this process serving only the
    processes that cannot run the file system themselves (embedded_mode); a fusepy
    script's --mode embedded: exec it."""
    env = dict(os.environ)
    mounts = [m for m in existing_mounts(env) if m["point"] != point]
    mounts.append({"point": point, "spec": spec, "args": SEP.join(args.fs_args),
                   "opts": SEP.join(args.options)})
    mount_environment(env, mounts)
    env.pop("LDPFUSE_FIFO_DIR", None)   # an enclosing launcher's (embedded_mode makes its own)
    env.pop("LDPFUSE_BACKING", None)    # an enclosing launcher's (shared_mode sets its own)
    env.pop("LDPFUSE_UNION", None)      # likewise
    env.pop("LDPFUSE_BACKING_OWNER", None)
    lib = os.path.join(PACKAGE_DIR, "libldpfuse.so")
    if not os.path.isfile(lib):
        die(f"the preload library is missing ({lib}): reinstall ldpfuse-py")
    preload = env.get("LD_PRELOAD", "")
    if lib not in preload.split():
        env["LD_PRELOAD"] = f"{lib} {preload}".strip()
    env["LDPFUSE_LIBPYTHON"] = find_libpython()
    env["LDPFUSE_BACKEND"] = find_backend()
    env["LDPFUSE_PYTHON_EXECUTABLE"] = sys.executable
    env["LDPFUSE_PYTHON_HOME"] = sys.base_prefix
    env["LDPFUSE_PYTHON_PATH"] = "\n".join(p for p in sys.path if p and os.path.isdir(p))
    env["LDPFUSE_PYTHON_VERSION"] = f"{sys.version_info[0]}.{sys.version_info[1]}"
    env["LDPFUSE_PACKAGE_PARENT"] = os.path.dirname(PACKAGE_DIR)
    for key in ("LDPFUSE_CWD", "LDPFUSE_CWD_REAL", "LDPFUSE_WORKERS", "LDPFUSE_WORKERS_SAFE",
                *ACCESS_FLAGS.values()):
        env.pop(key, None)      # the process's own, or an enclosing launcher's
    env.update(own_env)
    if args.trace:
        env["LDPFUSE_TRACE"] = "1"
    else:
        env.pop("LDPFUSE_TRACE", None)
    if args.stats:
        env["LDPFUSE_STATS"] = os.environ["LDPFUSE_STATS"] = "1"    # the launcher reports (stats.py)
    else:
        env.pop("LDPFUSE_STATS", None)
    if args.log_level:
        env["LDPFUSE_LOG_LEVEL"] = args.log_level.lower()
    if args.log_file:
        env["LDPFUSE_LOG_FILE"] = os.path.abspath(args.log_file)
    try:
        argv_exec = resolve_command(cmd, [m["point"] for m in mounts])
    except FileNotFoundError:
        die(f"command not found: {cmd[0]}", 127)
    except PermissionError:
        die(f"cannot run {cmd[0]}: Permission denied", 126)
    from . import escapes, run_dir

    env.pop("LDPFUSE_RUN_DIR", None)    # an enclosing launcher's
    if (args.mode or "shared") == "shared" or not script:
        run_dir.make(env, "LDPFUSE_ALLOW_OTHER" in own_env)     # removed at exit (exit_as)
    record = escapes.configure(args, env)
    from . import supervisor

    supervised = supervisor.configure(env, args.supervise)
    if record:
        reason = unreachable_reason(argv_exec[0])
        if reason and not (supervised and reason == "statically linked"):
            os.unlink(record)
            die(f"{argv_exec[0]} is {reason}: the loader will not preload ldpfuse into it, so it "
                f"cannot see {point}; --strict refuses to run it (see docs/limitations.md)", 126)
    args.escape_record = record
    if not (supervised and unreachable_reason(argv_exec[0]) == "statically linked"):
        warn_if_not_preloaded(argv_exec[0], point)
    sys.stdout.flush()
    sys.stderr.flush()
    # Python ignores SIGPIPE and SIGXFSZ, and exec keeps ignored signals ignored: give the
    # command the defaults it would have had (`yes | head -1` must end by SIGPIPE)
    import signal

    if (args.mode or "shared") == "shared":
        from . import shared_mode

        if script:
            return shared_mode.start(argv_exec, env, die)
        if record is None:
            return shared_mode.run(argv_exec, env, die)
        status = shared_mode.wait(shared_mode.start(argv_exec, env, die))
        shared_mode.exit_as(escapes.finish(record, status))
    for key in ("LDPFUSE_MODE", "LDPFUSE_SOCKET", "LDPFUSE_SERVED", "LDPFUSE_SECRET",
                "LDPFUSE_SERVER_PID", "LDPFUSE_SERVER_START"):    # an enclosing launcher's
        env.pop(key, None)
    if not script:
        # the command is a child: this process serves the processes that cannot run the
        # file system themselves (embedded_mode)
        from . import embedded_mode

        embedded_mode.run(argv_exec, env, record)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        try:
            signal.signal(sig, signal.SIG_DFL)
        except ValueError:  # a script's FUSE() on another thread than the main one
            import ctypes

            ctypes.CDLL(None).signal(int(sig), 0)   # 0: SIG_DFL
    if record:
        escapes.run_watched(argv_exec, env, die, record)
    try:
        os.execvpe(argv_exec[0], argv_exec, env)
    except OSError as e:
        die(f"cannot run {cmd[0]}: {e.strerror}", 127 if e.errno == errno.ENOENT else 126)


if __name__ == "__main__":
    sys.exit(main())
