"""Finding the user's file system class from an FS spec.

``path/to/file.py:ClassName`` loads the file as a module of its own (under a private name,
so it never shadows or leaks into the program's modules), with the file's directory first
on ``sys.path`` while it loads; ``package.module:ClassName`` imports the module normally.
``path/to/script.py`` (no class) is a fusepy script: see ``fuse_compat.run_script``.

While the file system's module loads, ``import fuse`` and ``import mfusepy`` give
``ldpfuse_py.fuse_compat`` (:class:`FusepyImports`), so fusepy file systems load unchanged
and the program's own ``fuse`` module, if any, is left alone.
"""
import importlib
import importlib.machinery
import importlib.util
import os
import sys


COMPAT_NAMES = ("fuse", "mfusepy")
SCRIPT_PREFIX = "script:"  # how the launcher marks a fusepy script in LDPFUSE_FS_<i>
MODULE_PREFIX = "module:"  # ... and a fusepy module run as `python -m NAME` (module:NAME:CWD)
MOUNT_FLAGS = "\0mount"   # parse_options' key for FUSE's bare mount flags (-o ro)
FLAGS = ("ro",)            # -o flags (no =value) that are the mount's, as FUSE's -o ro


UNSUPPORTED_FUSELL = ("fusell (fusepy's low-level API, FUSELL) is not supported: it answers libfuse's "
                      "inode-numbered requests through ctypes, and ldpfuse serves paths; port the "
                      "file system to fusepy's Operations (docs/from-fusepy.md)")


class _FusepyFinder:
    """Finds ``fuse``/``mfusepy`` as ldpfuse_py.fuse_compat (imported only if asked for)."""

    @staticmethod
    def find_spec(name, path=None, target=None):
        if name == "fusell":
            raise ImportError(UNSUPPORTED_FUSELL, name=name)
        if name not in COMPAT_NAMES:
            return None
        return importlib.machinery.ModuleSpec(name, _FusepyFinder)

    @staticmethod
    def create_module(spec):
        from . import fuse_compat

        return fuse_compat

    @staticmethod
    def exec_module(module):
        pass


class FusepyImports:
    """``with FusepyImports():`` the file system's code sees the compatibility layer as
    ``fuse`` and ``mfusepy``; afterwards sys.modules holds what it held before (a real
    fusepy the program imported stays the program's)."""

    def __enter__(self):
        self.saved = {n: sys.modules.pop(n) for n in COMPAT_NAMES if n in sys.modules}
        sys.meta_path.insert(0, _FusepyFinder)
        return self

    def __exit__(self, *exc):
        try:
            sys.meta_path.remove(_FusepyFinder)
        except ValueError:
            pass
        for name in COMPAT_NAMES:
            module = sys.modules.get(name)
            if module is not None and module.__name__ == "ldpfuse_py.fuse_compat":
                del sys.modules[name]
        sys.modules.update(self.saved)
        return False


class SpecError(Exception):
    """An FS spec that cannot be used; the message is one line for the user."""


def split_spec(spec):
    """'file.py:Class' -> ('file.py', 'Class'); a spec without a class gives (spec, None)."""
    head, sep, cls = spec.rpartition(":")
    if not sep or not cls.isidentifier() or not head:
        return spec, None
    return head, cls


def is_file_spec(target):
    return target.endswith(".py") or os.sep in target


def is_script_spec(spec):
    """A fusepy script: an existing file named without ':ClassName'."""
    target, cls = split_spec(spec)
    return cls is None and (spec.endswith(".py") or os.sep in spec) and os.path.isfile(spec)


def load_module(target, private_name):
    if is_file_spec(target):
        path = os.path.abspath(target)
        if not os.path.isfile(path):
            raise SpecError(f"no such file system file: {target}")
        spec = importlib.util.spec_from_file_location(private_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[private_name] = module  # dataclasses and pickle look modules up here
        sys.path.insert(0, os.path.dirname(path))  # siblings import, as for `python file.py`
        try:
            with FusepyImports():
                spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(private_name, None)
            raise
        finally:
            try:
                sys.path.remove(os.path.dirname(path))
            except ValueError:
                pass
        return module
    try:
        with FusepyImports():
            return importlib.import_module(target)
    except ModuleNotFoundError as e:
        if e.name and target.startswith(e.name):
            raise SpecError(f"no module named {target!r}") from None
        raise


def load_class(spec, private_name="_ldpfuse_fs"):
    """The class an FS spec names. Raises SpecError, or whatever importing the file raised."""
    target, cls_name = split_spec(spec)
    if cls_name is None:
        raise SpecError(f"FS must be path/to/file.py:ClassName, package.module:ClassName or a "
                        f"fusepy script path/to/script.py, got {spec!r}")
    if ":" in target and is_file_spec(target.partition(":")[0]):
        raise SpecError(f"FS names one class after its file (path/to/file.py:ClassName), "
                        f"got {spec!r}")
    module = load_module(target, private_name)
    cls = getattr(module, cls_name, None)
    if cls is None:
        raise SpecError(f"{target} has no class {cls_name!r}")
    if not callable(cls):
        raise SpecError(f"{target}:{cls_name} is not a class")
    return cls


def check_instance(ops, spec):
    """A file system object must be an ``Operations`` (or have fusepy's ``__call__``
    dispatch and the methods): anything else would fail at the first operation."""
    from .operations import Operations

    if isinstance(ops, Operations):
        return ops
    if callable(ops) and callable(getattr(ops, "getattr", None)):
        return ops
    name = type(ops).__name__
    raise SpecError(f"{spec}: {name} is not an Operations subclass "
                    f"(write `class {name}(Operations):`, from ldpfuse_py or fuse)")


def check_options(cls, opts):
    """Each -o key must be a keyword the class's constructor takes (any, if it takes
    ``**kwargs``): SpecError naming the first one that is not."""
    import inspect

    try:
        params = list(inspect.signature(cls).parameters.values())
    except (TypeError, ValueError):
        return  # a constructor Python cannot describe: the call itself will tell
    if any(p.kind == p.VAR_KEYWORD for p in params):
        return
    names = [p.name for p in params if p.kind in (p.POSITIONAL_OR_KEYWORD, p.KEYWORD_ONLY)]
    for key in opts:
        if key not in names:
            takes = ", ".join(names) if names else "none"
            raise SpecError(f"-o {key}: {cls.__name__} takes no option {key!r} "
                            f"(its keyword arguments: {takes})")


def parse_options(pairs):
    """['k=v', ...] -> {'k': 'v'}; FUSE's bare mount flags (``ro``) are gathered under
    MOUNT_FLAGS, never passed to the class."""
    opts = {}
    for kv in pairs:
        key, sep, value = kv.partition("=")
        if not sep and key in FLAGS:
            opts.setdefault(MOUNT_FLAGS, []).append(key)
            continue
        if not sep or not key.isidentifier():
            raise SpecError(f"-o expects KEY=VALUE with KEY a Python identifier, got {kv!r}")
        opts[key] = value
    return opts
