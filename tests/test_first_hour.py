"""What a new user meets before any file system runs: the README's list of the programs
the tests need is the one CI installs, and a missing program is a skip with its name, or
a failure under CI=true (where every program has been installed)."""

import os
import re
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
TESTS = Path(__file__).resolve().parent


def ci_packages():
    text = (REPO / ".ci" / "run").read_text()
    body = re.search(r"^PACKAGES=\(([^)]*)\)", text, re.M).group(1)
    return set(body.split())


def readme_install_line():
    lines = [x for x in (REPO / "README.md").read_text().splitlines() if x.startswith("apt-get install ")]
    assert len(lines) == 1, f"README.md should have one apt-get install line, has {lines}"
    return set(lines[0].split()[2:])


def test_readme_install_line_names_every_package_ci_installs():
    assert readme_install_line() == ci_packages()


def run_missing_program_test(tmp_path, ci):
    (tmp_path / "test_needs.py").write_text(
        f"import sys\nsys.path.insert(0, {str(TESTS)!r})\n"
        "from conftest import need\n\n"
        "def test_runs_a_program_that_is_not_installed():\n"
        "    need('no-such-program-ldpfuse-test')\n")
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci:
        env["CI"] = "true"
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider",
                           "--rootdir", str(tmp_path), str(tmp_path / "test_needs.py")],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)


def test_a_missing_program_skips_its_test_with_the_programs_name(tmp_path):
    r = run_missing_program_test(tmp_path, ci=False)
    assert r.returncode == 0 and "1 skipped" in r.stdout, r.stdout + r.stderr
    assert "no-such-program-ldpfuse-test (not on PATH) is not installed" in r.stdout, r.stdout


def test_a_missing_program_fails_its_test_under_ci(tmp_path):
    r = run_missing_program_test(tmp_path, ci=True)
    assert r.returncode == 1 and "1 failed" in r.stdout, r.stdout + r.stderr
    assert "CI=true: no-such-program-ldpfuse-test (not on PATH) is not installed" in r.stdout, r.stdout


def set_up_section():
    text = (REPO / "README.md").read_text()
    start = text.index("## Set up")
    end = text.find("\n## ", start + 1)
    return text[start:end if end > 0 else len(text)]


def set_up_commands():
    return [b.strip() for b in re.findall(r"```\n(.*?)```", set_up_section(), re.S)]


def test_the_readme_set_up_is_two_commands_a_venv_install_with_an_example_then_the_tests():
    """Exactly two commands, each one line: install in a venv and run an example (Debian's
    pip refuses to install outside one: externally-managed-environment), then the tests;
    with how long the tests take and a quick subset whose files exist (issue 35 item 5)."""
    first, second = set_up_commands()[:2]     # then the list of programs the tests run
    assert "\n" not in first and "\n" not in second, (first, second)
    assert first.startswith("python3 -m venv .venv && . .venv/bin/activate && pip install . && ldpfuse-run "), first
    assert "python3 -m pytest" in second, second
    section = set_up_section()
    assert re.search(r"\b\d+(-\d+)? minutes per mode\b", section), section    # how long it takes
    quick = re.search(r"`(python3 -m pytest -q (tests/\S+\.py ?)+)`", section)
    assert quick, section
    for name in quick.group(1).split()[4:]:
        assert (REPO / name).is_file(), name


def test_the_readme_first_command_works_as_written_with_debian_s_python(tmp_path):
    """The first command, copied as written, in a copy of the project, with the system's
    python3 first on PATH (Debian's, where pip outside a venv is refused)."""
    python = Path("/usr/bin/python3")
    if not python.exists():
        import pytest
        pytest.skip("no /usr/bin/python3 (the system's Python) on this machine")
    probe = subprocess.run([str(python), "-c", "import ensurepip, venv"], capture_output=True, text=True)
    if probe.returncode != 0:
        import pytest
        pytest.skip("the system's python3 has no venv/ensurepip (Debian: apt-get install python3-venv)")
    import shutil

    copy = tmp_path / "ldpfuse-py"
    shutil.copytree(REPO, copy, ignore=shutil.ignore_patterns(
        ".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", "*.so", "ldpfuse-supervisor"))
    first = set_up_commands()[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("LDPFUSE_", "VIRTUAL_ENV", "PYTHON"))}
    env["PATH"] = "/usr/bin:/bin:/usr/sbin:/sbin"
    env.pop("LD_PRELOAD", None)
    r = subprocess.run(["bash", "-c", first], cwd=copy, env=env, capture_output=True, text=True,
                       timeout=900)
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    lines = r.stdout.splitlines()
    assert any(line.startswith("total ") for line in lines), r.stdout[-3000:]    # pip's lines first
    listed = {line.split()[8] for line in lines if line[:1] in "d-l" and len(line.split()) >= 9}
    assert sorted(os.listdir("/usr/share/doc"))[:20] == sorted(listed - {".", ".."})[:20], r.stdout[-3000:]
