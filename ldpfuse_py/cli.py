"""ldpfuse-run: run a command with a Python file system mounted, no kernel involved.

    ldpfuse-run [--mountpoint DIR] [-o KEY=VALUE]... [--mode embedded|shared]
                [--log-level LEVEL] [--log-file FILE] [--trace]
                FS [FS_ARG...] -- COMMAND [ARG...]

The launcher checks the file system can be loaded, writes the mount table and what the
preload library needs into the environment, and execs COMMAND with LD_PRELOAD set: the exit
status is the command's. Bad input gets one line on stderr and exit status 2 (127 when the
command does not exist); nothing is started then.
"""
import argparse
import os
import shutil
import sys
import sysconfig

from .fs_loader import SCRIPT_PREFIX, SpecError, is_script_spec, load_class, parse_options, split_spec

PROG = "ldpfuse-run"
SEP = "\x1f"
PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__))


class UsageError(Exception):
    pass


def die(msg, status=2):
    print(f"{PROG}: {msg}", file=sys.stderr)
    sys.exit(status)


def parser():
    p = argparse.ArgumentParser(
        prog=PROG,
        usage="%(prog)s [--mountpoint DIR] [-o KEY=VALUE]... [--mode embedded|shared] "
              "[--log-level LEVEL] [--log-file FILE] [--trace] FS [FS_ARG...] -- COMMAND [ARG...]",
        description="Run COMMAND (and every process it starts) with the file system FS mounted "
                    "at DIR, served in-process by an LD_PRELOAD library: no FUSE, no root.")
    p.add_argument("--mountpoint", metavar="DIR", help="where the file system appears (need not exist)")
    p.add_argument("-o", dest="options", metavar="KEY=VALUE", action="append", default=[],
                   help="keyword argument for the file system class (repeatable)")
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
    (the launcher itself cannot see the mount)."""
    name = cmd[0]
    if "/" in name:
        full = os.path.normpath(os.path.abspath(name))
        if any(in_mount(full, p) for p in mountpoints):
            return ["/bin/sh", "-c", 'exec "$0" "$@"', *cmd]
        if not os.path.exists(name):
            raise FileNotFoundError(name)
        return cmd
    if shutil.which(name) is None:
        raise FileNotFoundError(name)
    return cmd


def one_line(exc):
    return " ".join(str(exc).split())


def mount_point(mountpoint):
    if "\n" in mountpoint:
        die("the mount point may not contain a newline")
    point = os.path.normpath(os.path.abspath(mountpoint))
    if point == "/":
        die("the mount point cannot be /")
    return point


def _root_logging():
    if "logging" not in sys.modules:
        return [], 30  # logging.WARNING
    import logging

    root = logging.getLogger()
    return list(root.handlers), root.level


def _restore_root_logging(state):
    """Undo the script's logging.basicConfig(): its handlers wrote into the buffer of this
    check run, and a later run of the script in this process (--mode shared) must be
    able to configure logging again."""
    if "logging" not in sys.modules:
        return
    import logging

    root = logging.getLogger()
    handlers, level = state
    for h in [h for h in root.handlers if h not in handlers]:
        root.removeHandler(h)
    root.setLevel(level)


def load_script(args, own_env):
    """A fusepy script: run it here once, as its own __main__, to learn the mount point and
    options of its FUSE() call; every process that touches the mount runs it again to
    build its operations object. Returns (spec, mount point)."""
    import io

    from .fuse_compat import ScriptExit, run_script

    path = os.path.abspath(args.fs)
    printed = io.StringIO()
    logging_before = _root_logging()
    try:
        calls, _ = run_script(path, args.fs_args, stdout=printed)
    except ScriptExit as e:
        last = [line for line in printed.getvalue().splitlines() if line.strip()][-1:]
        die(f"{args.fs}: {e}" + (f": {last[0].strip()}" if last else ""))
    except BaseException as e:
        die(f"{args.fs}: running the script failed: {type(e).__name__}: {one_line(e)}")
    finally:
        _restore_root_logging(logging_before)
    if not calls:
        die(f"{args.fs}: the script did not call FUSE(operations, mountpoint, ...)")
    if len(calls) > 1:
        die(f"{args.fs}: the script called FUSE() {len(calls)} times; "
            f"ldpfuse-run mounts one file system per script")
    call = calls[0]
    mountpoint = args.mountpoint or call.mountpoint
    if not mountpoint:
        die(f"{args.fs}: FUSE() was given no mount point and there is no --mountpoint")
    timeout = call.options.get("attr_timeout")
    if timeout is not None and "LDPFUSE_ATTR_TIMEOUT" not in own_env:
        own_env["LDPFUSE_ATTR_TIMEOUT"] = str(float(timeout))
    if (args.log_level or "").lower() == "debug":
        for key in call.ignored_options():
            print(f"{PROG}: FUSE() option {key}={call.options[key]!r} has no meaning "
                  f"without a kernel mount: ignored", file=sys.stderr)
    return SCRIPT_PREFIX + path, mountpoint


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
    p = parser()
    try:
        args = p.parse_args(ours)
    except SystemExit as e:
        return e.code if isinstance(e.code, int) else 2
    script = is_script_spec(args.fs)
    if not script and split_spec(args.fs)[1] is None and args.fs.endswith(".py"):
        die(f"no such file system file: {args.fs}")
    args.fs_args = [absolute_arg(a) for a in args.fs_args]
    if args.mountpoint is None and not script:
        die("--mountpoint DIR is required")
    # -o options that are ldpfuse's own (FUSE's names), not the class's
    own = {"attr_timeout": "LDPFUSE_ATTR_TIMEOUT"}
    own_env = {}
    for kv in list(args.options):
        key, _, value = kv.partition("=")
        if key in own:
            try:
                float(value)
            except ValueError:
                die(f"-o {key} expects a number of seconds, got {value!r}")
            own_env[own[key]] = value
            args.options.remove(kv)
    if script:
        if args.options:
            die(f"-o {args.options[0]}: -o is for a file system class; a fusepy script "
                f"takes its options from its FUSE() call")
        spec, mountpoint = load_script(args, own_env)
    else:
        mountpoint = args.mountpoint
    class_mode = "shared"
    point = mount_point(mountpoint)
    if not script:
        try:
            opts = parse_options(args.options)
            spec = absolute_spec(args.fs)
            cls = load_class(spec, private_name="_ldpfuse_fs_check")
        except SpecError as e:
            die(str(e))
        except BaseException as e:  # the FS file raised at import
            die(f"{args.fs}: importing the file system failed: {type(e).__name__}: {one_line(e)}")
        try:
            cls(*args.fs_args, **opts)
        except BaseException as e:
            die(f"{args.fs}: {cls.__name__}({', '.join(map(repr, args.fs_args))}) failed: "
                f"{type(e).__name__}: {one_line(e)}")
        class_mode = preferred_mode(cls)

    env = dict(os.environ)
    mounts = [m for m in existing_mounts(env) if m["point"] != point]
    mounts.append({"point": point, "spec": spec, "args": SEP.join(args.fs_args),
                   "opts": SEP.join(args.options)})
    mount_environment(env, mounts)
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
    for key in ("LDPFUSE_CWD", "LDPFUSE_CWD_REAL"):
        env.pop(key, None)
    env.update(own_env)
    if args.trace:
        env["LDPFUSE_TRACE"] = "1"
    else:
        env.pop("LDPFUSE_TRACE", None)
    if args.log_level:
        env["LDPFUSE_LOG_LEVEL"] = args.log_level.lower()
    if args.log_file:
        env["LDPFUSE_LOG_FILE"] = os.path.abspath(args.log_file)
    try:
        argv_exec = resolve_command(cmd, [m["point"] for m in mounts])
    except FileNotFoundError:
        die(f"command not found: {cmd[0]}", 127)
    warn_if_not_preloaded(argv_exec[0], point)
    sys.stdout.flush()
    sys.stderr.flush()
    # Python ignores SIGPIPE and SIGXFSZ, and exec keeps ignored signals ignored: give the
    # command the defaults it would have had (`yes | head -1` must end by SIGPIPE)
    import signal

    if (args.mode or class_mode) == "shared":
        from . import shared_mode

        return shared_mode.run(argv_exec, env, die)
    for key in ("LDPFUSE_MODE", "LDPFUSE_SOCKET"):    # an enclosing shared-mode launcher's
        env.pop(key, None)
    for sig in (signal.SIGPIPE, signal.SIGXFSZ):
        signal.signal(sig, signal.SIG_DFL)
    try:
        os.execvpe(argv_exec[0], argv_exec, env)
    except OSError as e:
        die(f"cannot run {cmd[0]}: {e.strerror}", 126 if e.errno == 13 else 127)


if __name__ == "__main__":
    sys.exit(main())
