"""Finding the user's file system class from an FS spec.

``path/to/file.py:ClassName`` loads the file as a module of its own (under a private name,
so it never shadows or leaks into the program's modules); ``package.module:ClassName``
imports the module normally.
"""
import importlib
import importlib.util
import os
import sys


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


def load_module(target, private_name):
    if is_file_spec(target):
        path = os.path.abspath(target)
        if not os.path.isfile(path):
            raise SpecError(f"no such file system file: {target}")
        spec = importlib.util.spec_from_file_location(private_name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[private_name] = module  # dataclasses and pickle look modules up here
        try:
            spec.loader.exec_module(module)
        except BaseException:
            sys.modules.pop(private_name, None)
            raise
        return module
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as e:
        if e.name and target.startswith(e.name):
            raise SpecError(f"no module named {target!r}") from None
        raise


def load_class(spec, private_name="_ldpfuse_fs"):
    """The class an FS spec names. Raises SpecError, or whatever importing the file raised."""
    target, cls_name = split_spec(spec)
    if cls_name is None:
        raise SpecError(f"FS must be path/to/file.py:ClassName or package.module:ClassName, got {spec!r}")
    module = load_module(target, private_name)
    cls = getattr(module, cls_name, None)
    if cls is None:
        raise SpecError(f"{target} has no class {cls_name!r}")
    if not callable(cls):
        raise SpecError(f"{target}:{cls_name} is not a class")
    return cls


def parse_options(pairs):
    """['k=v', ...] -> {'k': 'v'}"""
    opts = {}
    for kv in pairs:
        key, sep, value = kv.partition("=")
        if not sep or not key.isidentifier():
            raise SpecError(f"-o expects KEY=VALUE with KEY a Python identifier, got {kv!r}")
        opts[key] = value
    return opts
