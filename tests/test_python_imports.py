"""A Python host importing code stored in the mount: its own imports must go
through the file system (while the file system's own imports must not), and
bytecode caches written into the mount must work.  Compared with native."""

import sys

import pytest

from conftest import MEMORY, need

# Writes a package into $D, imports it (twice: source, then __pycache__),
# runs a script and a module from the mount, and compiles the tree.
SCRIPT = r'''
import importlib, os, runpy, subprocess, sys, compileall
D = os.environ["D"]
os.makedirs(f"{D}/pkg/sub")
with open(f"{D}/pkg/__init__.py", "w") as f:
    f.write("from .mod import VALUE\n")
with open(f"{D}/pkg/mod.py", "w") as f:
    f.write("VALUE = 6 * 7\ndef where():\n    import os\n    return os.path.basename(os.path.dirname(__file__))\n")
with open(f"{D}/pkg/sub/__init__.py", "w") as f:
    f.write("")
with open(f"{D}/pkg/sub/data.txt", "w") as f:
    f.write("package data\n")
with open(f"{D}/pkg/__main__.py", "w") as f:
    f.write("print('running pkg as __main__')\n")
with open(f"{D}/script.py", "w") as f:
    f.write("import sys\nprint('script ran with', sys.argv[1:])\n")
sys.path.insert(0, D)
import pkg
print("imported", pkg.VALUE, pkg.mod.where())
print("pycache", sorted(os.listdir(f"{D}/pkg/__pycache__")) if os.path.isdir(f"{D}/pkg/__pycache__") else None)
import importlib.resources
print("resource", importlib.resources.files("pkg.sub").joinpath("data.txt").read_text().strip())
for name in [m for m in sys.modules if m == "pkg" or m.startswith("pkg.")]:
    del sys.modules[name]
importlib.invalidate_caches()
import pkg.mod
print("reimported from cache", pkg.mod.VALUE)
runpy.run_path(f"{D}/script.py", run_name="__main__")
sys.argv = ["pkg"]
runpy.run_module("pkg", run_name="__main__")
print("compileall", compileall.compile_dir(D, quiet=1))
'''


def test_python_imports_from_loopback_match_native(ws):
    ws.compare_py(SCRIPT, env_extra={"PYTHONDONTWRITEBYTECODE": ""},
                  tree_ignore=("pkg/__pycache__", "pkg/sub/__pycache__", "__pycache__"))


def test_python_imports_from_memory_match_native(ws):
    ws.compare_py(SCRIPT, fs=MEMORY, env_extra={"PYTHONDONTWRITEBYTECODE": ""})


def build_app(root):
    (root / "app").mkdir()
    (root / "app" / "__init__.py").write_text("")
    (root / "app" / "__main__.py").write_text(
        "import sys\nfrom app import helper\nprint('app main', helper.twice(21), sys.argv[1:])\n")
    (root / "app" / "helper.py").write_text("def twice(x):\n    return 2 * x\n")
    (root / "tool.py").write_text("import sys\nprint('tool', sys.argv[1:])\n")


@pytest.fixture
def appws(ws):
    ws.populate(build_app)
    return ws


def test_python_runs_script_stored_in_mount(appws):
    appws.compare_sh("""
        "$PY" "$D/tool.py" one two
        cd "$D" && "$PY" tool.py three
    """, env_extra={"PY": sys.executable})


def test_python_dash_m_with_cwd_in_mount(appws):
    """`cd /mnt/x && python -m app`: sys.path[0] is the mount, read while
    the host interpreter starts."""
    appws.compare_sh("""
        cd "$D" && "$PY" -m app three
    """, env_extra={"PY": sys.executable})


def test_python_with_pythonpath_in_mount(appws):
    """PYTHONPATH naming the mount: the path is examined while the host
    interpreter starts, before it runs any code (in the embedded mode the launcher
    serves such a program: tests/test_embedded_fallback.py)."""
    appws.compare_sh("""
        PYTHONPATH="$D" "$PY" -c 'import app.helper; print(app.helper.twice(5))'
        PYTHONPATH="$D" "$PY" -m app four
    """, env_extra={"PY": sys.executable})


# Debian's python3 imports importlib only when a program asks: with the working directory
# in the mount, `python3 -m venv` starts the file system (embedded mode) inside its own
# `import importlib`, which must still end with importlib.util in place.
DEBIAN_PYTHON = "/usr/bin/python3"


@pytest.mark.parametrize("python", [sys.executable, DEBIAN_PYTHON], ids=["this-python", "debian-python3"])
def test_python_dash_m_stdlib_modules_with_cwd_in_mount(ws, python):
    need(python)
    ws.compare_sh("""
        cd "$D"
        "$PY" -m venv --without-pip v
        grep -v '^command' v/pyvenv.cfg
        ls v/bin | grep -c python
        echo '{"b": [1, 2]}' | "$PY" -m json.tool
        "$PY" -m base64 -d <<< aGVsbG8K
    """, env_extra={"PY": python}, check_tree=False)    # the venv's files name its directory
