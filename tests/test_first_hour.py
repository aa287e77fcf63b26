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
