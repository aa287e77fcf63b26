"""Imports a Python program is in the middle of when its file system starts in it.

In the embedded mode the file system starts inside a Python program at the program's
first operation on a mount, and that can be in the middle of the program's own
``import X``: with the working directory in the mount, the search of ``sys.path[0]``
for X is that first operation. Starting the file system imports modules (importlib.util,
for one); if X is one of them, the program's import, once its search ends, makes a second
X and puts it in ``sys.modules`` over the first, without the submodules the first had as
attributes (``python3 -m venv``: "module 'importlib' has no attribute 'util'").

This module is imported first by the package, so it sees the imports under way before
the package's own: the names still being searched for (a module lock held, nothing in
``sys.modules`` yet). :func:`give_back` takes what the file system's start put under those
names out of ``sys.modules``, so the program's import makes them as it would have; the
file system keeps the module objects it already holds.
"""
import sys

_bootstrap = sys.modules.get("_frozen_importlib")
_locks = getattr(_bootstrap, "_module_locks", None) or {}
SEARCHING = {name for name in list(_locks)
             if name not in sys.modules and not name.startswith("ldpfuse_py")}
BEFORE = set(sys.modules) if SEARCHING else set()


def give_back():
    """Called once the file system has started inside a Python program (_runtime.boot)."""
    for name in SEARCHING:
        if name not in _locks:
            continue    # that import has ended since: the module is the program's own
        for key in [k for k in list(sys.modules)
                    if (k == name or k.startswith(name + ".")) and k not in BEFORE]:
            del sys.modules[key]
