"""Process trees on the loopback example (issue 4): fork, exec, spawn,
inherited fds and offsets, cwd, threads, Python hosts and signals.  Each
case is compared with the same program on a native directory."""

import os
import sys

import pytest

from conftest import need


def build_tree(root):
    os.makedirs(root / "sub" / "deeper")
    (root / "f").write_text("line one\nline two\n")
    (root / "sub" / "g").write_text("in sub\n")


@pytest.fixture(params=[{}, {"passthrough": "no"}], ids=["passthrough", "no-passthrough"])
def pws(request, ws):
    """The workspace populated with build_tree, and the loopback options."""
    ws.populate(build_tree)
    ws.options = request.param
    return ws


def sh(ws, script, **kw):
    return ws.compare_sh(script, env_extra={"PY": sys.executable}, options=ws.options, **kw)


def test_sh_c_cat_reads_redirected_virtual_fd_after_exec(pws):
    sh(pws, """
        sh -c 'cat < "$D/f"'
        cat < "$D/f"
        sh -c 'exec cat' < "$D/sub/g"
        sh -c 'wc -l' < "$D/f"
    """)


def test_subshell_writes_share_offset_with_parent(pws):
    sh(pws, """
        (echo a; echo b) > "$D/out"
        cat "$D/out"
        { echo c; sh -c 'echo d'; echo e; } > "$D/out2"
        cat "$D/out2"
        (echo x; /bin/echo y; sh -c 'echo z') >> "$D/out"
        cat "$D/out"
    """)


def test_fd_opened_before_exec_works_in_child(pws):
    sh(pws, """
        exec 3>"$D/via3"
        sh -c 'echo y >&3'
        echo z >&3
        "$PY" -c 'import os; os.write(3, b"from python\\n")'
        exec 3>&-
        cat "$D/via3"
        exec 4<"$D/f"
        sh -c 'read -r first <&4; echo "child read: $first"'
        read -r second <&4
        echo "parent read after child: $second"
        exec 4<&-
    """)


def test_stderr_redirected_into_mount_collects_child_output(pws):
    sh(pws, """
        sh -c 'echo to-stderr >&2; ls "$D/missing"' 2>"$D/log" || true
        cat "$D/log"
        "$PY" -c 'import sys; print("py err", file=sys.stderr)' 2>>"$D/log"
        cat "$D/log"
    """, check_tree=False)  # the log names the directory: compared via stdout


def test_env_i_child_still_sees_mount_with_absolute_path(pws):
    sh(pws, """
        env -i /bin/cat "$D/f"
        env -i /bin/sh -c "cat '$D/sub/g'; ls '$D'"
        env -i /bin/sh -c "echo written-by-env-i > '$D/envi'"
        cat "$D/envi"
    """)


def test_pipeline_status_and_sigpipe_unchanged(pws):
    sh(pws, """
        set +e
        yes | head -1 > "$D/yes"
        echo "status ${PIPESTATUS[*]}"
        cat "$D/yes"
        cat "$D/f" | head -1
        "$PY" -c 'import signal; print(signal.getsignal(signal.SIGINT) is signal.default_int_handler, signal.getsignal(signal.SIGPIPE))' < "$D/f"
    """)


def test_cd_into_mount_subdir_is_inherited_by_children(pws):
    sh(pws, """
        cd "$D/sub"
        /bin/pwd
        sh -c 'pwd; /bin/pwd; cat g; ls'
        "$PY" -c 'import os; print(os.getcwd(), open("g").read().strip(), os.listdir("deeper"))'
        (cd deeper && /bin/pwd && ls ..)
        realpath . ..
        cd ..
        /bin/pwd
        cd ..
        /bin/pwd
    """)


def test_concurrent_append_from_two_processes_loses_nothing(pws):
    sh(pws, """
        writer() { for i in $(seq 1 300); do echo "$1 $i" >> "$D/log"; done; }
        writer a &
        writer b &
        wait
        wc -l < "$D/log"
        grep -c '^a ' "$D/log"
        grep -c '^b ' "$D/log"
        sort "$D/log" | md5sum
    """, check_tree=False)


PY_SUBPROCESS = r'''
import os, subprocess, sys
D = os.environ["D"]
print(subprocess.run(["cat", f"{D}/f"], capture_output=True, text=True).stdout, end="")
print(subprocess.run(["/bin/cat", f"{D}/f"], env={}, capture_output=True, text=True).stdout, end="")
subprocess.run(["sh", "-c", f"echo from-sh > {D}/from_sh"], check=True)
print(open(f"{D}/from_sh").read(), end="")
with open(f"{D}/sub/g") as f:
    print(subprocess.run(["cat"], stdin=f, capture_output=True, text=True).stdout, end="")
with open(f"{D}/child_out", "w") as f:
    subprocess.run(["echo", "child stdout into mount"], stdout=f, check=True)
print(open(f"{D}/child_out").read(), end="")
print(subprocess.run(["ls", "."], cwd=f"{D}/sub", capture_output=True, text=True).stdout, end="")
# close_fds (close_range in the child) with pass_fds of a mount fd
fd = os.open(f"{D}/f", os.O_RDONLY)
print(subprocess.run(["sh", "-c", f"head -1 <&{fd}"], pass_fds=[fd], capture_output=True, text=True).stdout, end="")
os.close(fd)
# O_CLOEXEC is honoured
fd = os.open(f"{D}/f", os.O_RDONLY | os.O_CLOEXEC)
r = subprocess.run(["sh", "-c", f"cat <&{fd} 2>/dev/null && echo leaked || echo closed-on-exec"], close_fds=False, capture_output=True, text=True)
print(r.stdout, end="")
os.close(fd)
print(os.system(f"cat {D}/sub/g > /dev/null") >> 8)
with os.popen(f"cat {D}/f") as p:
    print("popen", p.read().splitlines())
with os.popen(f"cat > {D}/popen_w", "w") as p:
    p.write("written through popen\n")
print(open(f"{D}/popen_w").read(), end="")
pid = os.posix_spawnp("sh", ["sh", "-c", f"ls {D}/sub"], os.environ)
print("posix_spawnp status", os.waitpid(pid, 0)[1])
fd = os.open(f"{D}/f", os.O_RDONLY)
pid = os.posix_spawn("/bin/cat", ["cat"], os.environ,
                     file_actions=[(os.POSIX_SPAWN_DUP2, fd, 0)])
print("posix_spawn dup2 of a mount fd, status", os.waitpid(pid, 0)[1])
os.close(fd)
'''


def test_python_subprocess_system_popen_posix_spawn_match_native(pws):
    pws.compare_py(PY_SUBPROCESS, options=pws.options)


PY_LIBC_CLOEXEC = r'''
import ctypes, os, subprocess
D = os.environ["D"].encode()
libc = ctypes.CDLL(None, use_errno=True)
def child_reads(fd):
    r = subprocess.run(["sh", "-c", f"cat <&{fd} 2>/dev/null && echo inherited || echo closed-on-exec"],
                       close_fds=False, capture_output=True, text=True)
    return r.stdout.split()
# open() through libc (os.open always adds O_CLOEXEC): the fd the program gets, whether
# the server sent it (first open, create) or the process opened the lower file itself
# (an open it has made before), is close-on-exec exactly when the program asked
for name, flags in [(b"/f", os.O_RDONLY), (b"/f", os.O_RDONLY), (b"/f", os.O_RDONLY | os.O_CLOEXEC),
                    (b"/f", os.O_RDONLY | os.O_CLOEXEC), (b"/new", os.O_RDWR | os.O_CREAT),
                    (b"/new2", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC)]:
    fd = libc.open(D + name, flags, 0o644)
    if flags & os.O_CREAT:
        os.write(fd, b"made\n")
        os.lseek(fd, 0, 0)
    print(name.decode(), "cloexec" if flags & os.O_CLOEXEC else "-", child_reads(fd))
    os.close(fd)
'''


def test_libc_open_fd_is_close_on_exec_exactly_when_asked(pws):
    pws.compare_py(PY_LIBC_CLOEXEC, options=pws.options)


PY_SPAWN_OPEN = r'''
import os
D = os.environ["D"]
pid = os.posix_spawn("/bin/cat", ["cat"], os.environ,
                     file_actions=[(os.POSIX_SPAWN_OPEN, 0, f"{D}/f", os.O_RDONLY, 0),
                                   (os.POSIX_SPAWN_OPEN, 1, f"{D}/spawned", os.O_WRONLY | os.O_CREAT, 0o644)])
print("posix_spawn status", os.waitpid(pid, 0)[1])
print(open(f"{D}/spawned").read(), end="")
'''


def test_posix_spawn_file_actions_open_mount_paths(pws):
    pws.compare_py(PY_SPAWN_OPEN, options=pws.options)


PY_FORK = r'''
import os, sys, threading
D = os.environ["D"]
# The offset is shared between parent and child.
fd = os.open(f"{D}/forked", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, b"parent before\n")
pid = os.fork()
if pid == 0:
    os.write(fd, b"child\n")
    with open(f"{D}/f") as f:
        os.write(fd, f.readline().encode())
    os._exit(0)
os.waitpid(pid, 0)
os.write(fd, b"parent after\n")
print("offset", os.lseek(fd, 0, os.SEEK_CUR))
os.close(fd)
print(open(f"{D}/forked").read(), end="")

# Fork while other threads are inside file system calls.
stop = threading.Event()
def busy(n):
    while not stop.is_set():
        os.stat(f"{D}/f")
        with open(f"{D}/sub/g") as f:
            f.read()
        os.listdir(D)
threads = [threading.Thread(target=busy, args=(i,)) for i in range(3)]
for t in threads:
    t.start()
statuses = []
for i in range(20):
    pid = os.fork()
    if pid == 0:
        try:
            with open(f"{D}/child{i}", "w") as f:
                f.write(open(f"{D}/f").read())
            os.listdir(D)
            os._exit(0)
        except BaseException:
            os._exit(3)
    statuses.append(os.waitpid(pid, 0)[1])
stop.set()
for t in threads:
    t.join()
print("fork statuses", set(statuses))
print("children wrote", sorted(n for n in os.listdir(D) if n.startswith("child")) == sorted(f"child{i}" for i in range(20)))
print("contents", {open(f"{D}/child{i}").read() for i in range(20)})
'''


def test_python_fork_shares_offset_and_survives_busy_threads(pws):
    pws.compare_py(PY_FORK, options=pws.options)


PY_MP = r'''
import multiprocessing as mp, os, sys
D = os.environ["D"]

def work(i):
    with open(f"{D}/mp{i}", "w") as f:
        f.write(f"{i} " + open(f"{D}/f").readline())
    return sorted(os.listdir(f"{D}/sub")), os.path.getsize(f"{D}/f")

if __name__ == "__main__":
    for method in ("fork", "spawn", "forkserver"):
        ctx = mp.get_context(method)
        with ctx.Pool(2) as pool:
            print(method, pool.map(work, range(4)))
        p = ctx.Process(target=work, args=(10,))
        p.start()
        p.join()
        print(method, "process exit", p.exitcode)
    print(sorted(n for n in os.listdir(D) if n.startswith("mp")))
    print(open(f"{D}/mp3").read(), end="")
'''


def test_python_multiprocessing_fork_spawn_forkserver_match_native(pws):
    pws.compare_py(PY_MP, tree_ignore=("__pycache__",), options=pws.options)


PY_THREADS = r'''
import os, threading
D = os.environ["D"]
N, FILES = 8, 40
errors = []

def worker(t):
    try:
        os.makedirs(f"{D}/t{t}")
        for i in range(FILES):
            p = f"{D}/t{t}/file{i}"
            with open(p, "w") as f:
                f.write(f"{t}:{i}\n" * (i + 1))
            with open(p) as f:
                assert f.read() == f"{t}:{i}\n" * (i + 1)
            os.stat(p)
        fd = os.open(f"{D}/shared", os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        for i in range(50):
            os.write(fd, f"thread {t} line {i}\n".encode())
        os.close(fd)
        for i in range(0, FILES, 2):
            os.unlink(f"{D}/t{t}/file{i}")
    except Exception as e:
        errors.append(repr(e))

threads = [threading.Thread(target=worker, args=(t,)) for t in range(N)]
for t in threads:
    t.start()
for t in threads:
    t.join()
print("errors", errors)
print("files", sorted(len(os.listdir(f"{D}/t{t}")) for t in range(N)))
lines = open(f"{D}/shared").read().splitlines()
print("shared lines", len(lines), len(set(lines)))
'''


def test_python_threads_doing_io_at_once_match_native(pws):
    pws.compare_py(PY_THREADS, check_tree=False, options=pws.options)


def test_exec_script_in_mount_and_path_search_match_native(pws):
    sh(pws, """
        mkdir "$D/bin"
        printf '#!/bin/sh\\necho "run.sh ran with $1"\\n' > "$D/bin/run.sh"
        chmod +x "$D/bin/run.sh"
        "$D/bin/run.sh" direct
        cd "$D/bin" && ./run.sh relative && cd /
        PATH="$D/bin:$PATH" run.sh via-path
        sh -c 'PATH="$D/bin:$PATH" exec run.sh via-execvp'
    """)


def test_make_C_into_mount_runs_recipes_in_mount(pws):
    need("make")
    sh(pws, """
        printf 'all: out.txt\\nout.txt: f\\n\\tcat f sub/g > out.txt\\n\\twc -l out.txt\\n' > "$D/Makefile"
        make -s -C "$D"
        cat "$D/out.txt"
        make -s -C "$D" || true
    """)


def other_python():
    """A CPython of another minor version than the one running the tests."""
    import glob
    import shutil
    import subprocess
    mine = f"python{sys.version_info.major}.{sys.version_info.minor}"
    candidates = [shutil.which(f"python3.{m}") for m in range(8, 15)]
    candidates += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.*/bin/python3.*[0-9]")))
    for exe in candidates:
        if not exe or os.path.basename(exe) == mine:
            continue
        ok = subprocess.run([exe, "-c", "import sys; assert sys.version_info[:2] != "
                             f"{tuple(sys.version_info[:2])}"], capture_output=True)
        if ok.returncode == 0:
            return exe
    pytest.skip(f"no CPython other than {mine} is installed")


def test_python_host_of_other_version_that_never_touches_mount_runs_normally(pws):
    """Processes that never touch a mount never load libpython, so a Python
    of another version runs as without ldpfuse."""
    exe = other_python()
    pws.compare([exe, "-c", "import sys, os; print(sys.version_info[:2], "
                 "sorted(os.listdir(os.environ['O'])))"], options=pws.options)


def test_python_host_of_other_version_touching_mount_works_or_fails_clearly(pws):
    """Another CPython version cannot share the embedded interpreter: it may
    work (shared mode, issue 6) or stop with one clear error line; it must
    not crash."""
    exe = other_python()
    code = "import os; print(open(os.environ['D'] + '/f').read(), end='')"
    native = pws.native_run([exe, "-c", code])
    ldp = pws.ldp_run([exe, "-c", code], options=pws.options)
    if ldp.returncode == 0:
        assert ldp.stdout == native.stdout, ldp.describe()
    else:
        assert ldp.returncode > 0, "killed by a signal:\n" + ldp.describe()
        lines = [l for l in ldp.stderr.splitlines() if l.strip()]
        assert any("version" in l or "shared" in l for l in lines), ldp.describe()


def test_stat_sees_change_by_concurrent_process_with_attr_timeout_0(pws):
    """With -o attr_timeout=0 nothing is cached: a process sees at once what
    another process (not its child) did to a file."""
    script = pws.write_script("watch.sh", r"""
        mkfifo "$O/go" "$O/done"
        "$PY" -c '
import os
D, O = os.environ["D"], os.environ["O"]
print("before", os.stat(D + "/f").st_size, os.stat(D + "/f").st_mode & 0o777, flush=True)
open(O + "/go", "w").close()
open(O + "/done").read()
print("after", os.stat(D + "/f").st_size, os.stat(D + "/f").st_mode & 0o777)
print("listed", sorted(os.listdir(D)))
' &
        cat "$O/go" > /dev/null
        echo more >> "$D/f"
        chmod 600 "$D/f"
        touch "$D/new"
        echo > "$O/done"
        wait
    """)
    pws.compare(["bash", "-eu", script], options=dict(pws.options, attr_timeout="0"),
                env_extra={"PY": sys.executable})
