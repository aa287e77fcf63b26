"""-o default_permissions (implied by -o allow_other): the server checks the caller's rights
from what the class's getattr says, as kernel FUSE does, for classes that check nothing
themselves (the memory example). pjdfstest is not part of the suite (it is built outside
the tree: docs/testing.md, where the memory example with -o default_permissions,allow_other
passes its 238 files), so each of its permission rules is a test of its own: the same commands
run as uid/gid 65534 (and with supplementary groups, setpriv --groups) on a native
directory and on the memory example mounted with -o allow_other, after the same set-up by
root; their outcomes (what each step printed, or its error) and the tree left behind
(modes, owners, sizes, xattrs) must be the same.

The shared mode only: the rules are the server's (native/server/permissions.c)."""

import os
import shutil
import subprocess

import pytest

from conftest import LOOPBACK, MEMORY, NOBODY, base_env, ldpfuse_run_argv

pytestmark = [
    pytest.mark.skipif(os.geteuid() != 0, reason="running the steps as another user (setpriv) needs root"),
    pytest.mark.skipif(shutil.which("setpriv") is None, reason="setpriv (util-linux) is not installed"),
]

# the steps' Python (xattrs) runs as uid 65534: an interpreter it may run
PYTHON = shutil.which("python3", path="/usr/bin:/bin")

# t NAME COMMAND...: prints "NAME ok" or "NAME <the error's last words>"
PRELUDE = r"""
t() { n=$1; shift; if e=$("$@" 2>&1 >/dev/null); then echo "$n ok"; else e=${e##*: }; echo "$n ${e:-failed}"; fi; }
mk() { printf '#!/bin/sh\necho ran\n' > "$1" && chown "$3" "$1" && chmod "$2" "$1"; }
md() { mkdir "$1" && chown "$3" "$1" && chmod "$2" "$1"; }
"""

XATTR = r"""
import errno, os, sys
op, path, name = sys.argv[1:4]
try:
    if op == "get":
        print(os.getxattr(path, name, follow_symlinks=False))
    elif op == "set":
        os.setxattr(path, name, b"v", follow_symlinks=False)
    elif op == "remove":
        os.removexattr(path, name, follow_symlinks=False)
    else:
        print(sorted(n for n in os.listxattr(path, follow_symlinks=False) if n.startswith("user.")))
except OSError as e:
    sys.exit(errno.errorcode[e.errno])
"""

# what root sees after the steps: every name with its type, mode, owner, group, size and
# user.* xattrs (no times)
STATE = r"""
import os, sys
for dirpath, dirs, files in sorted(os.walk(".")):
    for n in sorted(dirs + files):
        p = os.path.join(dirpath, n)
        st = os.lstat(p)
        try:
            xs = sorted(x for x in os.listxattr(p, follow_symlinks=False) if x.startswith("user."))
        except OSError:
            xs = []
        size = st.st_size if not os.path.isdir(p) or os.path.islink(p) else "-"
        print("state", p, oct(st.st_mode), st.st_uid, st.st_gid, size, xs)
"""

FILES_MODES = ("700", "070", "007", "077", "707", "770", "000", "644", "640", "604", "460", "406")

# each rule: (set-up by root, steps run as uid 65534 without and with group 4242)
RULES = {
    # owner / group / other classes: the first class that matches decides, even if it says less
    "rwx_classes": (
        "for o in 65534 0; do for g in 65534 4242 0; do for m in %s; do mk f-$o-$g-$m $m $o:$g; done; done; done"
        % " ".join(FILES_MODES),
        """for f in f-*; do t $f-read cat $f; t $f-write sh -c "echo >> $f";
           t $f-access-r test -r $f; t $f-access-w test -w $f; t $f-access-x test -x $f; done"""),
    # search (x) on every directory above a name; read to list; write+search to make a name
    "search_and_list": (
        "for o in 65534 0; do for g in 65534 4242; do for m in 700 600 100 300 500 711 000 755 070 010 007 001 777; do "
        "md d-$o-$g-$m 755 0:0; echo x > d-$o-$g-$m/f; md d-$o-$g-$m/sub 755 0:0; echo y > d-$o-$g-$m/sub/g; "
        "chown $o:$g d-$o-$g-$m; chmod $m d-$o-$g-$m; done; done; done",
        """for d in d-*; do t $d-cat cat $d/f; t $d-cat-deep cat $d/sub/g; t $d-ls ls $d; t $d-stat stat $d/f;
           t $d-touch touch $d/new; t $d-mkdir mkdir $d/newdir; t $d-rm rm -f $d/f;
           t $d-ln-s ln -s x $d/sl; t $d-mv mv $d/sub $d/sub2; done"""),
    # the sticky bit: only the name's owner, the directory's owner or root removes or renames
    "sticky": (
        "md st 1777 0:0; md st2 1777 65534:65534; md open 777 0:0; "
        "for o in 0 65534 4243; do mk st/f-$o 644 $o:$o; mk st/g-$o 666 $o:$o; md st/d-$o 777 $o:$o; "
        "mk st2/f-$o 644 $o:$o; mk open/x-$o 644 65534:65534; done",
        """for o in 0 65534 4243; do t rm-$o rm -f st/f-$o; t mv-$o mv st/g-$o st/g2-$o; t rmdir-$o rmdir st/d-$o;
           t rm2-$o rm -f st2/f-$o; done
           for o in 0 65534 4243; do t over-$o mv open/x-$o st/g2-$o; done
           t make-in-sticky touch st/mine"""),
    # chmod by the owner only; chown: the owner may give its file to one of its groups;
    # a set-group-ID bit is dropped by a chmod of one not in the file's group
    "chmod_chown": (
        "mk own 644 65534:65534; mk own2 644 65534:4242; mk root 666 0:0; mk root2 644 0:65534; "
        "mk own3 755 65534:65534; mk own4 755 65534:4242; md owndir 755 65534:4242",
        """t chmod-own chmod 600 own; t chmod-root chmod 600 root; t chmod-root-group chmod 600 root2;
           t chgrp-4242 chgrp 4242 own; t chgrp-0 chgrp 0 own; t chgrp-back chgrp 65534 own2;
           t chown-root chown 0 own; t chown-self chown 65534 own3; t chown-root-file chown 65534 root;
           t chmod-sgid chmod 2755 own4; t stat-sgid stat -c %a own4;
           t chmod-sgid-mine chmod 2755 own3; t stat-sgid-mine stat -c %a own3;
           t chmod-dir-sgid chmod 2755 owndir; t stat-dir-sgid stat -c %a owndir;
           t chown-none-root $PY -c 'import os; os.chown("root", -1, -1)'; t chown-same-root chown 0 root;
           t chgrp-same-root chgrp 0 root; t chgrp-same-own4 chgrp 4242 own4"""),
    # times: "now" by the owner or a writer; given times by the owner only; truncate needs write
    "times_and_truncate": (
        "mk own 644 65534:65534; mk r666 666 0:0; mk r644 644 0:0; mk r664 664 0:4242",
        """t now-own touch -c own; t now-writer touch -c r666; t now-reader touch -c r644;
           t now-group touch -c r664; t set-own touch -c -d 2001-02-03 own; t set-writer touch -c -d 2001-02-03 r666;
           t set-reader touch -c -d 2001-02-03 r644; t trunc-own truncate -s 0 own; t trunc-writer truncate -s 1 r666;
           t trunc-reader truncate -s 0 r644; t trunc-group truncate -s 0 r664; t otrunc-reader sh -c ': > r644'"""),
    # a directory moved to another parent needs write on itself (its ".." changes)
    "rename_directory": (
        "md a 777 0:0; md b 777 0:0; md ro 755 0:0; mk ro/x 644 65534:65534; md a/rootdir 755 0:0; md a/rootdir2 755 0:0; md a/mydir 755 65534:65534; "
        "md a/opendir 777 0:0; mk a/rootfile 644 0:0; md a/sealed 555 65534:65534",
        """t root-dir-away mv a/rootdir b/; t root-dir-here mv a/rootdir2 a/renamed; t my-dir-away mv a/mydir b/;
           t open-dir-away mv a/opendir b/; t root-file-away mv a/rootfile b/; t sealed-away mv a/sealed b/;
           t into-readonly mv b/rootfile ro/; t out-of-readonly mv ro/x a/ ; t mydir-into-readonly mv b/mydir ro/"""),
    # user.* xattrs need read (get, list) or write (set, remove); trusted.* root only;
    # user.* only on regular files and directories
    "xattrs": (
        "mk r644 644 0:0; mk r666 666 0:0; mk own 600 65534:65534; md rdir 755 0:0; mkfifo fifo; "
        f"for f in r644 r666 own rdir; do {PYTHON} $X set $f user.a; done",
        """for f in r644 r666 own rdir; do t $f-get $PY $X get $f user.a; t $f-list $PY $X list $f x;
           t $f-set $PY $X set $f user.b; t $f-remove $PY $X remove $f user.a;
           t $f-trusted-get $PY $X get $f trusted.x; t $f-trusted-set $PY $X set $f trusted.x; done
           t fifo-set $PY $X set fifo user.c; t fifo-get $PY $X get fifo user.c"""),
    # device nodes are root's to make (CAP_MKNOD); FIFOs, sockets and symlinks anyone's who
    # may write the directory
    "special_files": (
        "md open 777 0:0; md shut 755 0:0",
        """for d in open shut; do t $d-chr mknod $d/c c 1 3; t $d-blk mknod $d/b b 7 0; t $d-fifo mkfifo $d/p;
           t $d-sock $PY -c "import socket; socket.socket(socket.AF_UNIX).bind('$d/s')";
           t $d-symlink ln -s target $d/l; t $d-readlink readlink $d/l; done"""),
    # hard links to a file one may neither read nor write (fs.protected_hardlinks)
    "hard_links": (
        "md open 777 0:0; mk r600 600 0:0; mk r644 644 0:0; mk r666 666 0:0; mk own 600 65534:65534",
        """for f in r600 r644 r666 own; do t link-$f ln $f open/l-$f; done"""),
}


# rules the preload (not the server) checks: exec needs an execute bit and the caller's
# X_OK (native/interpose/exec_plan.c), chdir the directory's search permission (cwd.c)
XFAIL = {}    # rules still broken: rule -> the exact place of the bug
RULES["exec_needs_x"] = (
    "for o in 65534 0; do for g in 65534 4242; do for m in 700 070 007 644 755 711 000; do mk x-$o-$g-$m $m $o:$g; "
    "done; done; done",
    """for f in x-*; do t $f-exec ./$f; done""")
RULES["chdir_needs_search"] = (
    "for o in 65534 0; do for m in 700 600 100 000 755 070 007 001; do md d-$o-$m $m $o:4242; done; done",
    """for d in d-*; do t $d-cd sh -c "cd $d"; done""")


def run_rule(shared_tmp, rule, groups, fs="memory"):
    setup, steps = RULES[rule]
    xattr = shared_tmp / "xattr.py"
    xattr.write_text(XATTR)
    state = shared_tmp / "state.py"
    state.write_text(STATE)
    as_nobody = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}",
                 f"--groups={groups}" if groups else "--clear-groups"]
    steps_file = shared_tmp / "steps.sh"
    steps_file.write_text(PRELUDE + steps)
    script = (f"{PRELUDE}\nexport X={xattr} PY={PYTHON}\ncd \"$D\" && {{ {setup} ; }} && "
              f"{' '.join(as_nobody)} sh -c 'cd \"$D\" && . {steps_file}'; "
              f"cd \"$D\" && {PYTHON} {state}")
    native = shared_tmp / "native"
    native.mkdir()
    os.chmod(native, 0o755)
    want = subprocess.run(["sh", "-c", script], capture_output=True, text=True, timeout=300,
                          env=base_env(D=str(native)), cwd="/")
    m = shared_tmp / "mnt"
    spec = [MEMORY]
    if fs == "loopback":
        lower = shared_tmp / "lower"
        lower.mkdir()
        os.chmod(lower, 0o755)
        spec = [LOOPBACK, str(lower)]
    argv = ldpfuse_run_argv() + ["--mode", "shared", "-o", "allow_other", "--mountpoint", str(m), *spec, "--",
                                 "sh", "-c", script]
    got = subprocess.run(argv, capture_output=True, text=True, timeout=300, env=base_env(D=str(m)), cwd="/")
    return want, got


def rules_on(fs):
    # a passthrough file (the loopback's) is exec'd as the lower file: the kernel checks it
    known = {r: why for r, why in XFAIL.items() if not (fs == "loopback" and r == "exec_needs_x")}
    return [pytest.param(fs, r, marks=pytest.mark.xfail(strict=True, reason=known[r])) if r in known
            else pytest.param(fs, r) for r in sorted(RULES)]


@pytest.mark.parametrize("groups", ["", "4242"], ids=["no_groups", "group_4242"])
@pytest.mark.parametrize("fs, rule", rules_on("memory") + rules_on("loopback"))
def test_a_user_has_the_same_rights_as_natively(shared_tmp, rule, groups, fs):
    """memory: the server's rules alone; loopback: the server's, then the kernel's on the
    lower directory (the server must refuse nothing the kernel would allow)."""
    want, got = run_rule(shared_tmp, rule, groups, fs)
    assert want.returncode == 0, want.stderr
    want_lines = want.stdout.splitlines()
    got_lines = got.stdout.splitlines()
    assert len(want_lines) > 3, want.stdout + want.stderr
    differ = [(w, g) for w, g in zip(want_lines, got_lines) if w != g]
    assert not differ and len(want_lines) == len(got_lines), (
        f"(native, {fs} with allow_other):\n" + "\n".join(f"{w!r:60} {g!r}" for w, g in differ)
        + f"\nlines: {len(want_lines)} native, {len(got_lines)} mounted\n{got.stderr[-2000:]}")
    assert got.returncode == 0, got.stderr
