"""The two commands issue 2 promises a newcomer, as written there, except
that `ls -la` prints no times and leaves out `..` (whose link count depends
on what else is in the test's directory), so the runs can be compared."""

import subprocess
import sys

from conftest import MEMORY, need


def test_issue_2_loopback_command_tar_then_git_matches_native(ws):
    need("tar")
    need("git")
    src = ws.tmp / "srcdir"
    (src / "pkg").mkdir(parents=True)
    (src / "pkg" / "a.c").write_text("int a;\n")
    (src / "README").write_text("readme\n")
    subprocess.run(["tar", "cf", ws.home / "src.tar", "--sort=name", "-C", src, "."],
                   check=True)
    ws.compare(["bash", "-c", 'cd "$D" && tar xf ~/src.tar && git init -q && git add -A '
                '&& git commit -qm x && ls -la --time-style=+ | grep -v -e "^total" -e " \\.\\.$"'],
               env_extra={"GIT_AUTHOR_NAME": "a", "GIT_AUTHOR_EMAIL": "a@example.com",
                          "GIT_COMMITTER_NAME": "c", "GIT_COMMITTER_EMAIL": "c@example.com"},
               tree_ignore=(".git",))


def test_issue_2_memory_command_python_script_matches_native(ws):
    script = ws.write_script("my_script.py", (
        "import os\n"
        "D = os.environ['D']\n"
        "os.makedirs(D + '/x/y')\n"
        "open(D + '/x/y/f', 'w').write('memory\\n')\n"
        "print(sorted(os.walk(D))[1:], open(D + '/x/y/f').read(), end='')\n"
        "print(os.stat(D + '/x/y/f').st_size)\n").replace(
            "sorted(os.walk(D))[1:]",
            "[(os.path.relpath(r, D), d, f) for r, d, f in sorted(os.walk(D))]"))
    ws.compare([sys.executable, script], fs=MEMORY)
