"""Issue 32's attacks on rights, each played through the real launcher as a user runs it
(`ldpfuse-run`, root's, with the attacker a process of the command dropped to uid 65534 by
setpriv, or root with every capability dropped), in the mode LDPFUSE_TEST_MODE names:

  1. uid 65534 gives a copied binary file capabilities (security.capability: cap_setuid)
     or sets a trusted.* xattr through a loopback served with -o allow_other and
     default_permissions=no (the loopback checks nothing itself: the serving thread's
     rights are the only check);
  2. uid 65534 races its own FIFO in the embedded mode's FIFO directory against a symlink
     to root's binary, while root opens that FIFO in the mount (its mode set-user-ID);
  6. root with every capability dropped (setpriv --bounding-set=-all, as capsh
     --drop=all) reads, writes and chowns another user's 0600 file through the mount.

Each one worked against 2e84571 in the shared mode (the server's thread kept the
launcher's capabilities; permissions.c took uid 0 for every right), and attack 2 in the
embedded mode (chmod by a name another user could swap); each now fails with the errno a
native call gets, nothing of another user is changed, and the command goes on being
served. Root is needed to run the attacker as another user.
"""

import os
import shutil
import struct
import subprocess
import sys

import pytest

from conftest import LDP_MODE, LOOPBACK, MEMORY, NOBODY, base_env, ldpfuse_run_argv

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="the attacker runs as another user (setpriv): needs root"),
    pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is not installed"),
]

# an interpreter uid 65534 may run (the test's may live under root's 0700 home: pyenv)
PYTHON = shutil.which("python3", path="/usr/bin:/bin") or sys.executable
AS_NOBODY = f"setpriv --reuid={NOBODY} --regid={NOBODY} --clear-groups"
NO_CAPS = "setpriv --inh-caps=-all --bounding-set=-all"
# cap_setuid, permitted and effective (struct vfs_cap_data, revision 2)
SETUID_CAPS = struct.pack("<IIIII", 0x02000000 | 1, 1 << 7, 0, 0, 0)


def ldp(tmp, fs, fs_args, script, options=("-o", "allow_other"), timeout=120):
    """sh -c script as the command of a run of root's launcher, in the test's mode."""
    argv = ldpfuse_run_argv() + ["--mode", LDP_MODE, *options, "--mountpoint", str(tmp / "mnt"),
                                 fs, *map(str, fs_args), "--", "sh", "-c", script]
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, env=base_env(), cwd="/")


@pytest.fixture
def lower(shared_tmp):
    """A lower directory: `open/` (0777), root's `secret` (0600) and nobody's `theirs`
    (0600), and a copy of a root binary to give capabilities to."""
    d = shared_tmp / "lower"
    d.mkdir()
    os.chmod(d, 0o755)
    (d / "open").mkdir()
    os.chmod(d / "open", 0o777)
    (d / "secret").write_text("root only\n")
    os.chmod(d / "secret", 0o600)
    (d / "theirs").write_text("nobody's\n")
    os.chmod(d / "theirs", 0o600)
    os.chown(d / "theirs", NOBODY, NOBODY)
    return d


def xattrs(path):
    return sorted(os.listxattr(path, follow_symlinks=False))


@pytest.mark.parametrize("options", [("-o", "allow_other,default_permissions=no"), ("-o", "allow_other")],
                         ids=["default_permissions=no", "default_permissions"])
def test_another_user_cannot_give_a_file_capabilities_or_set_trusted_xattrs(shared_tmp, lower, options):
    """Attack 1: the copy is uid 65534's own file; setting security.capability on it needs
    CAP_SETFCAP, trusted.* needs CAP_SYS_ADMIN, natively and through the mount: EPERM, and
    the lower file has neither. user.* xattrs on its own file still work (the call reaches
    the class), and root's run goes on."""
    m = shared_tmp / "mnt"
    probe = (
        "import os, sys\n"
        "p = sys.argv[1]\n"
        "with open('/bin/true', 'rb') as src, open(p, 'wb') as dst: dst.write(src.read())\n"
        "os.chmod(p, 0o755)\n"
        f"for name, value in (('security.capability', {SETUID_CAPS!r}), ('trusted.evil', b'1'), ('user.ok', b'1')):\n"
        "    try:\n"
        "        os.setxattr(p, name, value)\n"
        "        print(name, 'set')\n"
        "    except OSError as e:\n"
        "        print(name, os.strerror(e.errno))\n")
    (shared_tmp / "probe.py").write_text(probe)
    os.chmod(shared_tmp / "probe.py", 0o644)
    r = ldp(shared_tmp, LOOPBACK, [lower], f"""
        {AS_NOBODY} {PYTHON} {shared_tmp}/probe.py {m}/open/copy
        cat {m}/secret
    """, options=options)
    assert r.stdout == ("security.capability Operation not permitted\n"
                        "trusted.evil Operation not permitted\n"
                        "user.ok set\n"
                        "root only\n"), r.stderr
    assert r.returncode == 0, r.stderr
    copy = lower / "open" / "copy"
    assert copy.stat().st_uid == NOBODY
    assert xattrs(copy) == ["user.ok"]


def test_root_with_every_capability_dropped_is_served_as_any_user_on_the_loopback(shared_tmp, lower):
    """Attack 6: root without CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, CAP_CHOWN or CAP_FOWNER
    cannot read, append to, chown or chmod nobody's 0600 file natively; through the mount
    neither. Root with its capabilities (the same command) still can."""
    m = shared_tmp / "mnt"
    r = ldp(shared_tmp, LOOPBACK, [lower], f"""
        {NO_CAPS} sh -c '
            grep CapEff /proc/self/status
            cat {m}/theirs || echo refused
            echo x >> {m}/theirs || echo refused
            chown 0 {m}/theirs || echo refused
            chmod 666 {m}/theirs || echo refused
            echo mine > {m}/open/mine && cat {m}/open/mine'
        cat {m}/theirs
    """, options=())
    assert r.stdout == ("CapEff:\t0000000000000000\n" + "refused\n" * 4 + "mine\nnobody's\n"), r.stderr
    assert r.stderr.count("Permission denied") >= 2 and r.stderr.count("Operation not permitted") == 2, r.stderr
    st = (lower / "theirs").stat()
    assert (st.st_uid, st.st_mode & 0o7777, (lower / "theirs").read_text()) == (NOBODY, 0o600, "nobody's\n")


# Root that reads nobody's file, then empties its effective capabilities (capset, as a
# daemon does before it handles untrusted input), then tries again.
DROP_AFTER_CONNECT = r"""
import ctypes, os, struct, sys
path = sys.argv[1]
def attempt(what):
    try:
        with open(path) as f:
            print(what, f.read().strip())
    except PermissionError:
        print(what, "refused")
    try:
        os.chmod(path, 0o644)
        print(what, "chmod done")
    except PermissionError:
        print(what, "chmod refused")
    os.chmod(path, 0o600) if os.stat(path).st_mode & 0o777 != 0o600 else None
attempt("with caps:")
libc = ctypes.CDLL(None, use_errno=True)
head = ctypes.create_string_buffer(struct.pack("<Ii", 0x20080522, 0))
data = ctypes.create_string_buffer(8 * 3)
assert libc.syscall(125, head, data) == 0           # capget: this thread's sets
eff0, prm0, inh0, eff1, prm1, inh1 = struct.unpack("<6I", data.raw)
data = ctypes.create_string_buffer(struct.pack("<6I", 0, prm0, inh0, 0, prm1, inh1))
assert libc.syscall(126, head, data) == 0           # capset: no effective capability
attempt("without:")
"""


@pytest.mark.parametrize("options", [(), ("-o", "backing=no")], ids=["backed", "through-the-class"])
def test_root_that_drops_its_capabilities_after_it_was_served_is_served_without_them(shared_tmp, lower, options):
    """A root process served once (connected with every capability) that then empties its
    effective set (a raw capset: this thread) reads and chmods nobody's 0600 file no more
    through the mount, as natively; with its capabilities it did both."""
    m = shared_tmp / "mnt"
    prog = shared_tmp / "drop.py"
    prog.write_text(DROP_AFTER_CONNECT)
    native = subprocess.run([PYTHON, str(prog), str(lower / "theirs")], capture_output=True, text=True)
    r = ldp(shared_tmp, LOOPBACK, [lower], f"{PYTHON} {prog} {m}/theirs", options=options)
    assert native.stdout == ("with caps: nobody's\nwith caps: chmod done\n"
                             "without: refused\nwithout: chmod refused\n"), native.stderr
    assert r.stdout == native.stdout, r.stderr


@pytest.mark.skipif(LDP_MODE != "shared", reason="the embedded mode runs a memory file system in each process: "
                    "nothing of another process's to reach")
def test_root_with_every_capability_dropped_is_checked_as_any_user_by_default_permissions(shared_tmp):
    """Attack 6 on a class that checks nothing (the memory example, -o default_permissions):
    the server's checks look at the caller's capabilities, not at its uid."""
    m = shared_tmp / "mnt"
    r = ldp(shared_tmp, MEMORY, [], f"""
        echo nobody > {m}/theirs && chown {NOBODY}:{NOBODY} {m}/theirs && chmod 600 {m}/theirs
        mkdir {m}/closed && chmod 700 {m}/closed && chown {NOBODY} {m}/closed
        {NO_CAPS} sh -c '
            cat {m}/theirs || echo refused
            echo x >> {m}/theirs || echo refused
            chown 0 {m}/theirs || echo refused
            ls {m}/closed || echo refused
            echo mine > {m}/mine && cat {m}/mine'
        cat {m}/theirs
        stat -c '%u %a' {m}/theirs
    """, options=("-o", "default_permissions"))
    assert r.stdout == "refused\n" * 4 + f"mine\nnobody\n{NOBODY} 600\n", r.stderr
    assert r.returncode == 0, r.stderr


FIFO_SWAPPER = r"""
# uid 65534 inside the command: its own FIFO at the name the FIFO directory gives the
# mount's /open/p, swapped again and again for a symlink to root's binary
import os, sys, time
d = os.environ.get("LDPFUSE_FIFO_DIR")
victim, seconds = sys.argv[1], float(sys.argv[2])
h = 0xcbf29ce484222325
for b in b"/open/p":
    h = ((h ^ b) * 0x100000001b3) & 0xFFFFFFFFFFFFFFFF
name = f"{d}/0-{h:016x}"
swaps = 0
end = time.monotonic() + seconds
while d and time.monotonic() < end:
    try:
        os.mkfifo(name + ".f", 0o600)
        os.rename(name + ".f", name)
        os.symlink(victim, name + ".l")
        os.rename(name + ".l", name)
        swaps += 1
    except OSError:
        pass
print("swapper", "ran" if swaps > 100 else f"could not ({d})", flush=True)
"""

FIFO_OPENER = r"""
import os, sys, time
opened = 0
end = time.monotonic() + float(sys.argv[2])
while time.monotonic() < end:
    try:
        os.close(os.open(sys.argv[1], os.O_RDONLY | os.O_NONBLOCK))
        opened += 1
    except OSError:
        pass
print("opener", "opened" if opened else "never opened", flush=True)
"""


def test_a_fifo_name_another_user_swaps_for_a_symlink_is_never_followed(shared_tmp, lower):
    """Attack 2: the embedded mode's FIFO directory is writable by the command's users
    (sticky), and a FIFO's name there follows from its path. uid 65534 makes a FIFO in the
    mount, set-user-ID (its own), and swaps its FIFO at that name for a symlink to root's
    binary while root opens the FIFO in a loop: root's chmod followed the link (the binary
    became set-user-ID root in well under a second). Now the FIFO is changed through its
    own fd and opened O_NOFOLLOW: the binary stays as it was. The shared mode's server
    keeps its FIFOs in a directory only the launcher writes: the swapper finds none."""
    m = shared_tmp / "mnt"
    victim_dir = shared_tmp / "victim"
    victim_dir.mkdir()
    os.chmod(victim_dir, 0o755)
    victim = victim_dir / "true"
    shutil.copy("/bin/true", victim)
    os.chmod(victim, 0o755)
    (shared_tmp / "swapper.py").write_text(FIFO_SWAPPER)
    (shared_tmp / "opener.py").write_text(FIFO_OPENER)
    r = ldp(shared_tmp, LOOPBACK, [lower], f"""
        {AS_NOBODY} {PYTHON} -c 'import os; os.mkfifo("{m}/open/p", 0o600); os.chmod("{m}/open/p", 0o4755)'
        stat -c '%A %u' {m}/open/p
        {AS_NOBODY} {PYTHON} {shared_tmp}/swapper.py {victim} 6 &
        {sys.executable} {shared_tmp}/opener.py {m}/open/p 5
        wait
        cat {m}/secret
    """)
    swapped = "swapper ran\n" if LDP_MODE == "embedded" else "swapper could not (None)\n"
    assert sorted(r.stdout.splitlines(True)) == sorted([f"prwsr-xr-x {NOBODY}\n", swapped, "opener opened\n",
                                                        "root only\n"]), r.stderr
    st = victim.stat()
    assert (st.st_uid, st.st_mode & 0o7777) == (0, 0o755)


def test_access_answers_with_the_callers_effective_rights_on_the_loopback(shared_tmp, lower):
    """access(2) through a loopback that checks nothing but the lower file system's answer
    (default_permissions=no): uid 65534 may not read root's 0600 file, and access() says so,
    as natively. The loopback asked os.access() with real ids, which on the serving thread
    are the launcher's (root): it answered yes (2e84571 as here)."""
    m = shared_tmp / "mnt"
    r = ldp(shared_tmp, LOOPBACK, [lower], f"""
        {AS_NOBODY} {PYTHON} -c 'import os; print(os.access("{m}/secret", os.R_OK), os.access("{m}/open", os.W_OK))'
    """, options=("-o", "allow_other,default_permissions=no"))
    assert r.stdout == "False True\n", r.stderr
