"""Packaging as a new user meets it: `python -m build` makes an sdist and a wheel from a
copy of the source tree; the sdist carries every file of the tree (native sources,
examples, docs, tests, LICENSE); `pip install` of the sdist and of the wheel, each into
a fresh venv, gives an ldpfuse-run that serves an example; a machine without a C
compiler gets one clear error. Slow (two builds, two venvs): marked `slow`, and run in
the default mode only (packaging does not depend on the mode)."""

import os
import shutil
import subprocess
import sys
import tarfile
import venv
import zipfile
from pathlib import Path

import pytest

from conftest import LDP_MODE, REPO, base_env

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(LDP_MODE != "shared",
                       reason="packaging does not depend on the mode: run once, in the default mode"),
]
pytest.importorskip("build", reason="the `build` package is not installed (pip install '.[test]')")

BUILD_TIMEOUT = 600


def source_files(root):
    """The files of the source tree, relative: `git ls-files` in a checkout, else a walk."""
    if (root / ".git").exists() and shutil.which("git"):
        r = subprocess.run(["git", "-C", str(root), "ls-files", "-z"], capture_output=True)
        if r.returncode == 0:
            return {p for p in r.stdout.decode().split("\0") if p and (root / p).is_file()}
    out = set()
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in (".git", "__pycache__", "build", "dist",
                                                         ".pytest_cache", "out")
                       and not d.endswith(".egg-info")]
        for name in filenames:
            if not name.endswith((".so", ".o", ".pyc")):
                out.add(str((Path(dirpath) / name).relative_to(root)))
    return out


def run(argv, **kw):
    r = subprocess.run([str(a) for a in argv], capture_output=True, text=True,
                       timeout=BUILD_TIMEOUT, env=kw.pop("env", base_env()), **kw)
    return r


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
    """Build the sdist and the wheel from a copy of the tree (the build writes into the
    tree it builds)."""
    tmp = tmp_path_factory.mktemp("packaging")
    src = tmp / "src"
    files = source_files(REPO)
    for rel in files:
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, src / rel)
    out = tmp / "dist"
    r = run([sys.executable, "-m", "build", "--sdist", "--wheel", "--outdir", out, src])
    assert r.returncode == 0, f"python -m build failed:\n{r.stdout[-4000:]}\n{r.stderr[-4000:]}"
    sdists = list(out.glob("*.tar.gz"))
    wheels = list(out.glob("*.whl"))
    assert len(sdists) == 1 and len(wheels) == 1, list(out.iterdir())
    return {"tmp": tmp, "files": files, "sdist": sdists[0], "wheel": wheels[0]}


def test_sdist_carries_every_file_of_the_source_tree(dists):
    with tarfile.open(dists["sdist"]) as tar:
        top = tar.getnames()[0].split("/")[0]
        names = {n[len(top) + 1:] for n in tar.getnames() if n.startswith(top + "/")}
    missing = sorted(f for f in dists["files"] if f not in names and f != ".gitignore")
    assert not missing, f"files of the tree not in the sdist: {missing}"
    # the parts a user needs, named, so a tree without git still checks them
    for needed in ("LICENSE", "README.md", "setup.py", "pyproject.toml",
                   "native/ldpfuse.h", "native/backend/embedded.c", "examples/loopback.py",
                   "docs/operations.md", "tests/conftest.py", "ldpfuse_py/contrib/fsspec.py"):
        assert needed in names, needed
    native = {f for f in dists["files"] if f.startswith("native/")}
    assert native and native <= names


def test_wheel_has_the_spdx_license_and_the_built_libraries(dists):
    with zipfile.ZipFile(dists["wheel"]) as whl:
        meta_name = next(n for n in whl.namelist() if n.endswith(".dist-info/METADATA"))
        meta = whl.read(meta_name).decode()
        names = whl.namelist()
    assert "License-Expression: MIT" in meta.splitlines()
    assert "License-File: LICENSE" in meta.splitlines()
    assert any(n.endswith(".dist-info/licenses/LICENSE") for n in names)
    assert "Classifier: Operating System :: POSIX :: Linux" in meta
    for built in ("ldpfuse_py/libldpfuse.so", "ldpfuse_py/libldpfuse_audit.so",
                  "ldpfuse_py/contrib/fsspec.py"):
        assert built in names, built
    assert any(n.startswith("ldpfuse_py/_embedded") and n.endswith(".so") for n in names)


def fresh_venv(path):
    venv.EnvBuilder(with_pip=True, clear=True).create(path)
    return path / "bin" / "python"


def run_example(python, tmp):
    """The README's first command, with the freshly installed ldpfuse-run: a loopback
    view of a directory, listed and read, against the same commands on the directory."""
    data = tmp / "data"
    data.mkdir(exist_ok=True)
    (data / "hello.txt").write_text("hello from a fresh install\n")
    (data / "sub").mkdir(exist_ok=True)
    mnt = tmp / "mnt"
    ldpfuse_run = python.parent / "ldpfuse-run"
    assert ldpfuse_run.exists(), "the install made no ldpfuse-run script"
    examples = tmp / "examples"
    if not examples.exists():
        shutil.copytree(REPO / "examples", examples)
    r = run([ldpfuse_run, "--mountpoint", mnt, f"{examples / 'loopback.py'}:Loopback", data,
             "--", "sh", "-c", f'ls "{mnt}"; cat "{mnt}/hello.txt"'], cwd=tmp)
    assert (r.returncode, r.stdout) == (0, "hello.txt\nsub\nhello from a fresh install\n"), \
        f"exit {r.returncode}\n{r.stdout}\n{r.stderr}"


def test_pip_install_of_the_wheel_in_a_fresh_venv_runs_an_example(dists, tmp_path):
    python = fresh_venv(tmp_path / "venv")
    r = run([python, "-m", "pip", "install", "-q", "--no-index", dists["wheel"]])
    assert r.returncode == 0, r.stdout + r.stderr
    run_example(python, tmp_path)


def test_pip_install_of_the_sdist_in_a_fresh_venv_builds_and_runs_an_example(dists, tmp_path):
    python = fresh_venv(tmp_path / "venv")
    r = run([python, "-m", "pip", "install", "-q", dists["sdist"]])
    assert r.returncode == 0, r.stdout + r.stderr
    run_example(python, tmp_path)


def test_building_without_a_c_compiler_is_one_clear_error(dists, tmp_path):
    python = fresh_venv(tmp_path / "venv")
    env = base_env(CC="ldpfuse-no-such-compiler")
    r = run([python, "-m", "pip", "install", "--no-cache-dir", dists["sdist"]], env=env)
    assert r.returncode != 0
    out = r.stdout + r.stderr
    assert "ldpfuse-py: building from source needs a C compiler" in out, out[-3000:]
    assert "'ldpfuse-no-such-compiler' (the C compiler) was not found" in out, out[-3000:]


def test_auditwheel_gives_the_wheel_a_manylinux_tag_and_it_still_runs(dists, tmp_path):
    """What cibuildwheel does in the manylinux images ([tool.cibuildwheel] in
    pyproject.toml), here on this machine's glibc: the wheel needs no library beyond
    glibc, so auditwheel repair tags it manylinux, and the repaired wheel works."""
    pytest.importorskip("auditwheel", reason="auditwheel is not installed (pip install '.[test]')")
    auditwheel = Path(sys.executable).parent / "auditwheel"
    env = base_env(PATH=f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}")
    r = run([auditwheel, "repair", "-w", tmp_path / "repaired", dists["wheel"]], env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    repaired = list((tmp_path / "repaired").glob("*.whl"))
    assert len(repaired) == 1 and "-manylinux_" in repaired[0].name, repaired
    python = fresh_venv(tmp_path / "venv")
    r = run([python, "-m", "pip", "install", "-q", "--no-index", repaired[0]])
    assert r.returncode == 0, r.stdout + r.stderr
    run_example(python, tmp_path)
