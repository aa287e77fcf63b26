"""In the shared mode every process's caches (attributes, missing names, open decisions,
directory listings) hear at once of a change another process makes through the mount,
as with one kernel cache for all processes (docs/cache.md, backend/coherence.h).

Each script has a process that looks first (so its caches hold the old answers), waits
on a FIFO outside the mount while another process changes the tree, then looks again
within attr_timeout; it never waits for a child (wait() alone forgets everything), so
the shell's watcher uses builtins only."""

import pytest

from conftest import LOOPBACK, MEMORY, need

WATCHER = r"""
mkfifo "$O/ready" "$O/go"
(
    test -e "$D/f" && echo "watcher: f exists"
    test -s "$D/e" || echo "watcher: e is empty"
    test -s "$D/e2" || echo "watcher: e2 is empty"
    for n in "$D"/d/*; do printf '%s ' "${n##*/}"; done; echo
    test -e "$D/a" && echo "watcher: a exists"
    test -e "$D/b" || echo "watcher: no b"
    test -e "$D/later" || echo "watcher: no later"
    echo ready > "$O/ready"
    read x < "$O/go"
    test -e "$D/f" && echo "watcher: f still exists" || echo "watcher: f is gone"
    test -s "$D/e" && echo "watcher: e has bytes" || echo "watcher: e still empty"
    test -s "$D/e2" && echo "watcher: e2 has bytes" || echo "watcher: e2 still empty"
    for n in "$D"/d/*; do printf '%s ' "${n##*/}"; done; echo
    test -e "$D/a" && echo "watcher: a still exists" || echo "watcher: a is gone"
    test -e "$D/b" && echo "watcher: b exists" || echo "watcher: still no b"
    test -e "$D/later" && echo "watcher: later exists" || echo "watcher: still no later"
) > "$O/watcher.out" &
read x < "$O/ready"
rm "$D/f"
echo bytes > "$D/e"
/bin/echo appended >> "$D/e2"      # a program that exits with its output still open
touch "$D/d/new"
mv "$D/a" "$D/b"
mkdir "$D/later"
echo go > "$O/go"
wait
cat "$O/watcher.out"
rm "$O/watcher.out" "$O/ready" "$O/go"
"""


def tree(d):
    (d / "f").write_text("f\n")
    (d / "e").write_text("")
    (d / "e2").write_text("")
    (d / "a").write_text("a\n")
    (d / "d").mkdir()
    (d / "d" / "old").write_text("")


# attr_timeout=30: an answer kept from before the change would still be used when the
# watcher looks again, however slow the machine
LONG = {"attr_timeout": "30"}


@pytest.mark.parametrize("fs", [LOOPBACK, MEMORY], ids=["loopback", "memory"])
@pytest.mark.parametrize("options", [LONG, {"passthrough": "no", **LONG}], ids=["passthrough", "no-passthrough"])
def test_a_process_sees_another_process_change_at_once(ws, fs, options):
    if fs == MEMORY and "passthrough" in options:
        pytest.skip("memory.py has no passthrough option: it serves every file itself")
    prefix = ws.start_from(tree, fs)
    native, ldp = ws.compare_sh(prefix + WATCHER, fs=fs, options=options, mode="shared")
    assert "watcher: f is gone" in native.stdout, native.describe()


LOCKSTEP = r"""
        mkfifo "$O/ask" "$O/told"
        python3 - "$D" "$O" <<'EOF' > "$O/py.out" &
import os, sys
d, o = sys.argv[1:]
def next_step():
    with open(f"{o}/ask", "w") as f:
        f.write("next\n")
    with open(f"{o}/told") as f:
        f.read()
PROGRAM
EOF
        for cmd in COMMANDS; do
            read x < "$O/ask"
            sh -c "$cmd"
            echo done > "$O/told"
        done
        wait
        cat "$O/py.out"
        rm "$O/py.out" "$O/ask" "$O/told"
"""


def in_lockstep(program, commands):
    """A script that runs a long-lived Python program (d: the mount, o: a scratch
    directory) and, each time it calls next_step(), the next of the shell commands (the
    words of a `for` list) in another process, before it goes on."""
    return LOCKSTEP.replace("PROGRAM", program.strip("\n")).replace("COMMANDS", commands)


@pytest.mark.parametrize("options", [LONG, {"passthrough": "no", **LONG}], ids=["passthrough", "no-passthrough"])
def test_a_long_lived_program_sees_names_and_links_come_and_go_from_other_processes(ws, options):
    """Python stats in a loop while shells create, link, append to, rename and remove
    names (an append through a second hard link changes the first name's file too)."""
    need("python3")
    ws.populate(lambda d: [(d / n).write_text(n + "\n") for n in ("keep", "z")])
    ws.compare_sh(in_lockstep(r"""
os.unlink(f"{d}/z")         # known missing here now; a shell makes it again
for step in range(4):
    st = os.stat(f"{d}/keep")
    print(step, sorted(os.listdir(d)), [os.path.exists(f"{d}/{n}") for n in ("x", "y", "z")],
          st.st_size, st.st_nlink)
    next_step()
""", r"""'touch "$D/x"; ln "$D/keep" "$D/keep2"; echo more >> "$D/keep2"; echo z > "$D/z"' \
                   'mv "$D/x" "$D/y"; echo again >> "$D/keep2"' 'rm "$D/y" "$D/keep2"' 'true'"""),
                  options=options, mode="shared")


@pytest.mark.parametrize("options", [LONG, {"passthrough": "no", **LONG}], ids=["passthrough", "no-passthrough"])
def test_a_long_lived_program_opens_what_other_processes_made_replaced_or_removed(ws, options):
    """The first open of a name in a process is one request (lookup and open together):
    what it learnt (a missing name, a file and where its data lives) is kept like a
    lookup's answer and forgotten when another process changes the name, also for a name
    reached through a symlinked directory (a change told under the real name)."""
    need("python3")
    ws.populate(lambda d: [(d / "dir").mkdir(), (d / "link").symlink_to("dir"),
                           (d / "old").write_text("old 1\n"), (d / "gone").write_text("gone\n")])
    ws.compare_sh(in_lockstep(r"""
def look(name):
    try:
        fd = os.open(f"{d}/{name}", os.O_RDONLY)
    except OSError as e:
        return f"{name}: {os.strerror(e.errno)}"
    try:
        return f"{name}: {os.read(fd, 100)!r}"
    except OSError as e:
        return f"{name}: opened, {os.strerror(e.errno)}"
    finally:
        os.close(fd)
for step in range(3):
    print(step, [look(n) for n in ("new", "old", "gone", "link/new", "dir/new", "dir")])
    next_step()
""", r"""'echo made > "$D/new"; rm "$D/old"; echo "old 2" > "$D/old"; rm "$D/gone"; echo in-dir > "$D/dir/new"' \
                   'echo again >> "$D/new"; rm "$D/dir/new"' 'true'"""),
                  options=options, mode="shared")


SQLITE_LOOP = """
    for round in 1 2 3; do
        rm -f "$D/c.db"
        sqlite3 "$D/c.db" 'PRAGMA journal_mode=delete; CREATE TABLE t (w TEXT, i INTEGER);' > /dev/null
        for w in a b c; do
            for i in $(seq 1 40); do echo "INSERT INTO t (w, i) VALUES ('$w', $i);"; done \\
                | sqlite3 -cmd '.timeout 30000' "$D/c.db" &
        done
        wait
        sqlite3 "$D/c.db" 'SELECT w, count(*), sum(i) FROM t GROUP BY w ORDER BY w;'
    done
"""


@pytest.mark.parametrize("options", [{"passthrough": "no"}, {"passthrough": "no", **LONG}, LONG],
                         ids=["no-passthrough", "no-passthrough-long-cache", "passthrough-long-cache"])
def test_concurrent_sqlite3_writers_find_the_journal_as_it_is_now(ws, options):
    """The rollback journal is made and deleted by one sqlite3 while the others look for
    it (hot journal check): a stale "it exists" made the open that followed fail with
    'unable to open database file'."""
    need("sqlite3")
    ws.compare_sh(SQLITE_LOOP, options=options, mode="shared", check_tree=False)


@pytest.mark.parametrize("options", [{}, {"passthrough": "no"}], ids=["passthrough", "no-passthrough"])
def test_rename_onto_itself_or_its_own_hard_link_leaves_the_name(ws, options):
    """rename() that changes nothing (the same name, or two links of one file) succeeds
    and removes nothing: the name must not be remembered as missing."""
    ws.populate(lambda d: (d / "a").write_text("a\n"))
    ws.compare_py("""
import os
d = os.environ["D"]
os.rename(f"{d}/a", f"{d}/a")
print("same name", os.path.exists(f"{d}/a"))
os.link(f"{d}/a", f"{d}/b")
os.rename(f"{d}/a", f"{d}/b")
print("own link", os.path.exists(f"{d}/a"), os.path.exists(f"{d}/b"), os.stat(f"{d}/a").st_nlink)
print(open(f"{d}/a").read(), end="")
""", options=options)
