#!/usr/bin/env python3
"""Run ldpfuse-py's benchmark suite and write bench/RESULTS.md and bench/results.png.

    python3 bench/run.py                 full run (about 25 minutes on 2 cores)
    python3 bench/run.py --quick         short run (about 3 minutes), for a first look
    python3 bench/run.py --only micro    only the micro-benchmarks (or: thesis, cache, loader,
                                         loader-gz, a workload name, or a configuration name)
    python3 bench/run.py --report-only   rewrite RESULTS.md/results.png from bench/out/results.json

Every workload runs in every configuration, in interleaved rounds (round 1:
native, ldpfuse loopback, ..., round 2: ...), and the tables show medians over
rounds and their ratio to the native directory the configuration stands on.
What each workload and configuration means: bench/README.md.
"""
import argparse
import json
import os
import platform
import re
import shlex
import shutil
import signal
import subprocess
import sys
import time

import data_loader as DL        # bench/data_loader.py: issue 24's data-loader workload

BENCH = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(BENCH)
OUT = os.path.join(BENCH, 'out')
MICROBENCH = os.path.join(OUT, 'microbench')
WORKLOADS = os.path.join(BENCH, 'workloads')
RESULTS_JSON = os.path.join(OUT, 'results.json')
RESULTS_MD = os.path.join(BENCH, 'RESULTS.md')
RESULTS_PNG = os.path.join(BENCH, 'results.png')
MOUNT_BASE = '/tmp/ldpfuse-bench-mnt'

# ---------------------------------------------------------------- scales

# filebench: the bigfileset of each read workload, as the fio sizes above (the .f files'
# own sizes, 2 GiB a workload, are laid out again for every run: minutes per round here).
# The create workloads keep theirs: they are timed, and only a prefix of the set is made.
FB_SIZES = {
    'full': {'sq-re-4KB-1th-1f': dict(size='1g'), 'sq-re-4KB-32th-32f': dict(size='32m'),
             'web-server-100th': dict(entries='4000'), 'file-server-50th': dict(entries='10000')},
    'quick': {'sq-re-4KB-1th-1f': dict(size='256m'), 'sq-re-4KB-32th-32f': dict(size='8m'),
              'web-server-100th': dict(entries='2000'), 'file-server-50th': dict(entries='2000')},
}

SCALES = {
    'full': dict(rounds=5, duration=0.5, warmup=0.1, large_mb=256, mem_large_mb=64,
                 firstop_n=20, thesis_rounds=3, fio_runtime=4, loader_rounds=3, loader_files=10000,
                 fio=dict(FIO_SQ1_SIZE='1g', FIO_SQ32_SIZE='32m', FIO_CRWR_NRFILES='200000',
                          FIO_CRWR32_NRFILES='6250', FIO_WEB_NRFILES='4000',
                          FIO_FS_NRFILES='200'),
                 fio_fuse=dict(FIO_CRWR_NRFILES='10000', FIO_CRWR32_NRFILES='320'),
                 fb=FB_SIZES['full']),
    'quick': dict(rounds=2, duration=0.2, warmup=0.05, large_mb=64, mem_large_mb=32,
                  firstop_n=5, thesis_rounds=1, fio_runtime=2, loader_rounds=2, loader_files=2000,
                  fio=dict(FIO_SQ1_SIZE='256m', FIO_SQ32_SIZE='8m', FIO_CRWR_NRFILES='40000',
                           FIO_CRWR32_NRFILES='1250', FIO_WEB_NRFILES='2000',
                           FIO_FS_NRFILES='40'),
                  fio_fuse=dict(FIO_CRWR_NRFILES='3000', FIO_CRWR32_NRFILES='100'),
                  fb=FB_SIZES['quick']),
}

# ---------------------------------------------------------------- workloads

# (key, title, unit field, unit label); key is "name:threads"
MICRO = [
    ('stat:1', 'stat', 'ops_per_s', 'ops/s'),
    ('orc:1', 'open+read 4K+close', 'ops_per_s', 'ops/s'),
    ('create:1', 'create+write 4K+close+unlink', 'ops_per_s', 'ops/s'),
    ('seqread:1', 'sequential 4K read', 'mb_per_s', 'MB/s'),
    ('randread:1', 'random 4K pread', 'mb_per_s', 'MB/s'),
    ('readdir:1', 'readdir 1000 entries', 'ops_per_s', 'listings/s'),
]
for _t in (2, 8):
    MICRO += [
        ('orc:%d' % _t, 'open+read+close, %d threads' % _t, 'ops_per_s', 'ops/s'),
        ('create:%d' % _t, 'create cycle, %d threads' % _t, 'ops_per_s', 'ops/s'),
        ('seqread:%d' % _t, 'sequential read, %d threads' % _t, 'mb_per_s', 'MB/s'),
        ('randread:%d' % _t, 'random pread, %d threads' % _t, 'mb_per_s', 'MB/s'),
    ]
MICRO_KEYS = [m[0] for m in MICRO]
NONMOUNT = [('nm-stat', 'stat'), ('nm-open', 'open+close'), ('nm-pread', 'pread 1 byte')]

# (name, fio job file, filebench file, kind): kind 'read' uses a laid-out file
# set shared by all loopback configurations, 'create' a fresh directory per run
THESIS = [
    ('sq-re-4KB-1th-1f', 'fio-sq-re-4KB-1th-1f.fio', 'file-sq-re-4KB-1th-1f.f', 'read'),
    ('sq-re-4KB-32th-32f', 'fio-sq-re-4KB-32th-32f.fio', 'file-sq-re-4KB-32th-32f.f', 'read'),
    ('cr-wr-4KB-1th-4Mf', 'fio-cr-wr-4KB-1th-4Mf.fio', 'file-cr-wr-4KB-1th-4Mf.f', 'create'),
    ('cr-wr-4KB-32th-4Mf', 'fio-cr-wr-4KB-32th-4Mf.fio', 'file-cr-wr-4KB-32th-4Mf.f', 'create'),
    ('web-server-100th', 'fio-web-server-100th.fio', 'web-server-100th.f', 'read'),
    ('file-server-50th', 'fio-file-server-50th.fio', 'file-server-50th.f', 'read'),
]
THESIS_KEYS = [t[0] for t in THESIS]

# Targets of issue 3, for the ldpfuse-py loopback (passthrough) configuration.
TARGETS = {'stat:1': 0.8, 'orc:1': 0.7, 'create:1': 0.7, 'seqread:1': 0.95,
           'randread:1': 0.95, 'readdir:1': 0.5}
for _t in (2, 8):
    for _w in ('orc', 'create', 'seqread', 'randread'):
        TARGETS['%s:%d' % (_w, _t)] = TARGETS['%s:1' % _w]
THESIS_TARGET = 0.95
MEMORY_TARGET = 20.0   # ldpfuse memory vs fusepy memory over FUSE, orc and create
NONMOUNT_TARGET_NS = 10.0
FIRSTOP_TARGET_MS = 30.0

# Targets of issue 24, in the default mode (report.py's "Targets of issue 24"): speed ratios.
ISSUE24 = dict(
    loader_vs_fuse=3.0,        # data loader: ratarmount under ldpfuse-run vs over kernel FUSE
    archive_vs_native=0.5,     # data loader: examples/archive.py under ldpfuse-run vs native
    memory_vs_fusepy=20.0,     # ldp-mem vs fusepy-mem, open+read 4K+close, 1 thread
    memory_seqread=0.9,        # ldp-mem vs native-tmpfs, sequential 4K read
    loop={'orc:1': 0.8, 'orc:8': 0.8, 'create:1': 0.7, 'create:8': 0.7},   # ldp-loop vs native
    thesis=0.9,                # ldp-loop vs native, each thesis workload
)
# Issue 33, the backed loopback example in the default mode vs native: every thesis workload,
# and the create cycle with 1, 2 and 8 threads (report.py's "Targets of issue 33")
ISSUE33 = dict(thesis=0.92, create=0.9)
# Issue 31: the archive example on a .tar.gz within twice ratarmount's time over kernel FUSE
ARCHIVE_GZ_VS_FUSE = 0.5       # speed ratio: archive-ldp-gz vs rat-fuse-gz, each worker count

# ---------------------------------------------------------------- helpers


def log(msg):
    print('[bench %s] %s' % (time.strftime('%H:%M:%S'), msg), flush=True)


class Skip(Exception):
    """A configuration cannot run here; the message says why."""


def run_cmd(cmd, timeout, env=None, cwd=None):
    """Runs cmd in its own process group; returns (rc, stdout, stderr)."""
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         env=env, cwd=cwd, start_new_session=True, text=True,
                         errors='replace')
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return 'timeout after %ds' % timeout, out, err
    except BaseException:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass                        # the group is gone already
        p.wait()
        raise
    return p.returncode, out, err


def parse_results(text):
    rows = []
    for line in text.splitlines():
        if line.startswith('RESULT '):
            rows.append(dict(kv.split('=', 1) for kv in line.split()[1:]))
    return rows


def tail(text, n=25):
    lines = (text or '').rstrip().splitlines()
    return '\n'.join(lines[-n:])


def is_tmpfs(path):
    best, fstype = '', None
    real = os.path.realpath(path)
    with open('/proc/mounts') as f:
        for line in f:
            parts = line.split()
            mnt = parts[1].replace('\\040', ' ')
            if (real == mnt or real.startswith(mnt.rstrip('/') + '/')) and len(mnt) > len(best):
                best, fstype = mnt, parts[2]
    return fstype == 'tmpfs'


def unmount(path):
    if not os.path.ismount(path):
        return
    for cmd in (['umount', path], ['fusermount', '-u', path], ['fusermount3', '-u', path],
                ['umount', '-l', path]):
        if shutil.which(cmd[0]):
            subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            if not os.path.ismount(path):
                return


# ---------------------------------------------------------------- dependencies

APT_PACKAGES = ['fuse', 'libfuse2', 'libfuse3-dev', 'fio', 'pkg-config']
PIP_PACKAGES = ['fusepy', 'matplotlib', 'ratarmount']


def missing_dependencies():
    apt, pip = [], []
    if not shutil.which('fusermount') and not os.path.exists('/usr/lib/x86_64-linux-gnu/libfuse.so.2'):
        apt += ['fuse', 'libfuse2']
    if not os.path.exists('/usr/share/doc/libfuse3-dev/examples'):
        apt.append('libfuse3-dev')
    if not shutil.which('fio'):
        apt.append('fio')
    if not shutil.which('pkg-config'):
        apt.append('pkg-config')
    for mod, pkg in (('fuse', 'fusepy'), ('matplotlib', 'matplotlib')):
        try:
            __import__(mod)
        except Exception:
            pip.append(pkg)
    if not DL.find_ratarmount():
        pip.append('ratarmount')
    return apt, pip


def ensure_dependencies(install):
    apt, pip = missing_dependencies()
    if not apt and not pip:
        return
    apt_cmd = ['apt-get', 'install', '-y'] + APT_PACKAGES
    pip_cmd = [sys.executable, '-m', 'pip', 'install'] + PIP_PACKAGES
    if install and os.geteuid() == 0 and shutil.which('apt-get'):
        if apt:
            log('installing: ' + shlex.join(apt_cmd))
            subprocess.run(['apt-get', 'update', '-q'], stdout=subprocess.DEVNULL)
            subprocess.run(apt_cmd, stdout=subprocess.DEVNULL)
        if pip:
            log('installing: ' + shlex.join(pip_cmd))
            subprocess.run(pip_cmd, stdout=subprocess.DEVNULL)
        apt, pip = missing_dependencies()
    if apt:
        log('missing Debian packages %s; run: sudo %s' % (apt, shlex.join(apt_cmd)))
    if pip:
        log('missing Python packages %s; run: %s' % (pip, shlex.join(pip_cmd)))


def build_microbench():
    os.makedirs(OUT, exist_ok=True)
    src = os.path.join(BENCH, 'microbench.c')
    if not os.path.exists(MICROBENCH) or os.path.getmtime(MICROBENCH) < os.path.getmtime(src):
        subprocess.run(['gcc', '-O2', '-Wall', '-pthread', src, '-o', MICROBENCH], check=True)


def build_libfuse_passthrough():
    """Builds libfuse's C high-level passthrough example; returns its path."""
    exe = os.path.join(OUT, 'passthrough')
    if os.path.exists(exe):
        return exe
    src_dir = '/usr/share/doc/libfuse3-dev/examples'
    if not os.path.isdir(src_dir):
        raise Skip('libfuse3-dev examples not installed (apt-get install libfuse3-dev)')
    build = os.path.join(OUT, 'passthrough-src')
    os.makedirs(build, exist_ok=True)
    for name in ('passthrough.c', 'passthrough_helpers.h'):
        for cand in (name, name + '.gz'):
            path = os.path.join(src_dir, cand)
            if os.path.exists(path):
                if cand.endswith('.gz'):
                    import gzip
                    with gzip.open(path, 'rb') as f, open(os.path.join(build, name), 'wb') as g:
                        g.write(f.read())
                else:
                    shutil.copy(path, os.path.join(build, name))
                break
    try:
        flags = subprocess.run(['pkg-config', '--cflags', '--libs', 'fuse3'], check=True,
                               capture_output=True, text=True).stdout.split()
        subprocess.run(['gcc', '-O2', os.path.join(build, 'passthrough.c'), '-o', exe] + flags,
                       check=True, capture_output=True, text=True)
    except (OSError, subprocess.CalledProcessError) as e:
        raise Skip('cannot build libfuse passthrough: %s' % (getattr(e, 'stderr', '') or e))
    return exe


def find_ldpfuse_run(explicit):
    if explicit:
        return explicit if os.path.exists(explicit) or shutil.which(explicit) else None
    found = shutil.which('ldpfuse-run')
    if found:
        return found
    cand = os.path.join(os.path.dirname(sys.executable), 'ldpfuse-run')
    return cand if os.path.exists(cand) else None


# ---------------------------------------------------------------- configurations


class Config:
    """One way of serving the fixture: where the command sees it, how it is started."""
    name = label = ''
    native_ref = 'native'   # the native configuration its ratios are taken against
    memory = False          # the fixture must be created through the mount
    setup_in_command = False  # the FS's state lasts one command (ldpfuse-run's server in the
                              # default mode, the process in embedded mode): the timed command
                              # creates the fixture itself, before timing
    thesis = True           # runs the thesis workloads
    nonmount = False        # measures non-mount call costs against native (ldpfuse)
    in_quick = True         # part of a --quick run unless named with --only

    def __init__(self, ctx):
        self.ctx = ctx

    def start(self):
        pass

    def stop(self):
        pass

    def root(self):
        """The directory, as the command sees it, that stands for ctx.lower."""
        raise NotImplementedError

    def wrap(self, cmd):
        return cmd


class Native(Config):
    name, label = 'native', 'native (disk)'

    def root(self):
        return self.ctx.lower


class NativeTmpfs(Config):
    name, label = 'native-tmpfs', 'native (tmpfs)'
    native_ref = 'native-tmpfs'
    thesis = False

    def root(self):
        return self.ctx.tmpfs


class Ldpfuse(Config):
    fs = None
    opts = ()
    mode = None             # the default mode (shared), as a user runs it: no --mode flag
    nonmount = True

    def start(self):
        if not self.ctx.ldpfuse_run:
            raise Skip('ldpfuse-run not found (pip install . in the repo root, or --ldpfuse-run PATH)')
        self.mnt = os.path.join(MOUNT_BASE, self.name)

    def fs_args(self):
        return []

    def wrap(self, cmd):
        pre = [self.ctx.ldpfuse_run, '--mountpoint', self.mnt,
               '--log-file', os.path.join(OUT, 'ldpfuse-%s.log' % self.name)]
        for o in self.opts:
            pre += ['-o', o]
        if self.mode:                    # None: the default mode, as a user runs it
            pre += ['--mode', self.mode]
        return pre + [self.fs] + self.fs_args() + ['--'] + cmd


class LdpfuseLoopback(Ldpfuse):
    name, label = 'ldp-loop', 'ldpfuse-py loopback'

    def start(self):
        super().start()
        self.fs = os.path.join(REPO, 'examples', 'loopback.py') + ':Loopback'

    def fs_args(self):
        return [self.ctx.lower]

    def root(self):
        return self.mnt


class LdpfuseLoopbackNoPassthrough(LdpfuseLoopback):
    name, label = 'ldp-loop-nopt', 'ldpfuse-py loopback -o passthrough=no'
    opts = ('passthrough=no',)


class LdpfuseLoopbackNoBacking(LdpfuseLoopback):
    # every name operation through Python (passthrough at open): the loopback before its
    # tree was backed (issue 33), to show what the class's methods cost
    name, label = 'ldp-loop-nobacking', 'ldpfuse-py loopback -o backing=no'
    opts = ('backing=no',)


class LdpfuseLoopbackFilter(LdpfuseLoopback):
    # a backed tree whose class still sees creates, unlinks and opens for writing: what a
    # filter in Python costs per operation (issue 33)
    name, label = 'ldp-loop-filter', 'ldpfuse-py loopback -o see=create,unlink,open_write'
    opts = ('see=create,unlink,open_write',)


class LdpfuseMemory(Ldpfuse):
    name, label = 'ldp-mem', 'ldpfuse-py memory'
    native_ref = 'native-tmpfs'
    memory = setup_in_command = True
    thesis = False

    def start(self):
        super().start()
        self.fs = os.path.join(REPO, 'examples', 'memory.py') + ':Memory'

    def root(self):
        return self.mnt


class LdpfuseLoopbackEmbedded(LdpfuseLoopback):
    name, label = 'ldp-loop-embedded', 'ldpfuse-py loopback --mode embedded'
    mode = 'embedded'
    nonmount = False
    in_quick = False


class LdpfuseMemoryEmbedded(LdpfuseMemory):
    name, label = 'ldp-mem-embedded', 'ldpfuse-py memory --mode embedded'
    mode = 'embedded'
    nonmount = False
    in_quick = False


class FuseDaemon(Config):
    """A kernel FUSE file system: a daemon mounted for the whole run."""

    def daemon_cmd(self):
        raise NotImplementedError

    def start(self):
        if not os.path.exists('/dev/fuse'):
            raise Skip('/dev/fuse does not exist')
        self.mnt = os.path.join(MOUNT_BASE, self.name)
        unmount(self.mnt)
        os.makedirs(self.mnt, exist_ok=True)
        cmd = self.daemon_cmd()
        self.log_path = os.path.join(OUT, 'daemon-%s.log' % self.name)
        self.log_file = open(self.log_path, 'w')
        self.proc = subprocess.Popen(cmd, stdout=self.log_file, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        deadline = time.time() + 15
        while time.time() < deadline:
            if os.path.ismount(self.mnt):
                return
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.stop()
        with open(self.log_path) as f:
            raise Skip('mount failed: %s: %s' % (shlex.join(cmd), tail(f.read(), 5)))

    def stop(self):
        unmount(self.mnt)
        proc = getattr(self, 'proc', None)
        if proc and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(5)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        if getattr(self, 'log_file', None):
            self.log_file.close()


class FusepyLoopback(FuseDaemon):
    name, label = 'fusepy-loop', 'fusepy loopback (FUSE)'

    def daemon_cmd(self):
        try:
            import fuse  # noqa: F401
        except Exception:
            raise Skip('fusepy not installed (pip install fusepy; apt-get install fuse libfuse2)')
        return [sys.executable, os.path.join(BENCH, 'fusepy_loopback.py'), self.ctx.lower, self.mnt]

    def root(self):
        return self.mnt


class FusepyMemory(FusepyLoopback):
    name, label = 'fusepy-mem', 'fusepy memory (FUSE)'
    native_ref = 'native-tmpfs'
    memory = True
    thesis = False

    def daemon_cmd(self):
        super().daemon_cmd()
        return [sys.executable, os.path.join(BENCH, 'fusepy_memory.py'), self.mnt]


class LibfusePassthrough(FuseDaemon):
    name, label = 'libfuse-pt', 'libfuse C passthrough (FUSE)'

    def daemon_cmd(self):
        return [build_libfuse_passthrough(), '-f', self.mnt]

    def root(self):
        # passthrough.c mirrors the whole root file system
        return self.mnt + self.ctx.lower


class LibfusePassthroughHp(FuseDaemon):
    # libfuse 3's low-level passthrough_hp, as a user runs it: its caches on (entry and
    # attribute timeouts of a day), kernel passthrough of reads and writes where the
    # kernel has it (6.9+), splice, as many threads as it wants. Not packaged: built from
    # libfuse's source (meson setup build && ninja -C build example/passthrough_hp),
    # found at $LIBFUSE_PASSTHROUGH_HP or /tmp/libfuse-src/build/example/passthrough_hp.
    name, label = 'libfuse-pthp', 'libfuse passthrough_hp (FUSE)'
    in_quick = False
    # It keeps an O_PATH fd of every inode the kernel has looked up, for as long as the
    # kernel keeps its entry (a day): a few runs of the thesis workloads (tens of thousands
    # of files) take it past the fd limit (20000 here), and every later open fails with
    # EMFILE. Each thesis run gets a fresh mount, as a user's next mount would be.
    remount_per_run = True

    def daemon_cmd(self):
        exe = os.environ.get('LIBFUSE_PASSTHROUGH_HP',
                             '/tmp/libfuse-src/build/example/passthrough_hp')
        if not os.access(exe, os.X_OK):
            raise Skip('%s not built (libfuse source: meson setup build && '
                       'ninja -C build example/passthrough_hp; or set LIBFUSE_PASSTHROUGH_HP)' % exe)
        return [exe, '--foreground', self.ctx.lower, self.mnt]

    def root(self):
        return self.mnt


CONFIG_CLASSES = [Native, LdpfuseLoopback, LdpfuseLoopbackNoBacking, LdpfuseLoopbackFilter, LdpfuseLoopbackNoPassthrough, LdpfuseLoopbackEmbedded,
                  FusepyLoopback, LibfusePassthrough, LibfusePassthroughHp, NativeTmpfs, LdpfuseMemory,
                  LdpfuseMemoryEmbedded, FusepyMemory]
CONFIG_NAMES = [c.name for c in CONFIG_CLASSES]


# ---------------------------------------------------------------- the run


class Context:
    def __init__(self, args, scale):
        self.args = args
        self.scale = scale
        self.lower = os.path.abspath(args.dir)
        self.tmpfs = os.path.abspath(args.tmpfs_dir)
        self.outside = os.path.join(self.lower, 'outside')
        self.ldpfuse_run = find_ldpfuse_run(args.ldpfuse_run)
        self.results = {'micro': [], 'thesis': [], 'nonmount': [], 'cache': [], 'loader': [],
                        'loader_skipped': {}, 'failures': [], 'skipped': {},
                        'configs': {}, 'scale': scale, 'quick': args.quick}


def record_failure(ctx, cfg, phase, cmd, rc, out, err, env_note=''):
    """cfg: a Config, or the name of a data-loader configuration."""
    name = getattr(cfg, 'name', cfg)
    entry = {'config': name, 'phase': phase, 'command': env_note + shlex.join(cmd),
             'rc': str(rc), 'stdout': tail(out), 'stderr': tail(err)}
    ctx.results['failures'].append(entry)
    log('FAILED %s %s (rc %s): %s' % (name, phase, rc, entry['command']))
    for line in (tail(err, 8) or tail(out, 8)).splitlines():
        log('    ' + line)


def large_mb(ctx, cfg):
    return ctx.scale['mem_large_mb'] if cfg.native_ref == 'native-tmpfs' else ctx.scale['large_mb']


def prepare_fixtures(ctx, configs):
    os.makedirs(ctx.lower, exist_ok=True)
    os.makedirs(ctx.outside, exist_ok=True)
    with open(os.path.join(ctx.outside, 'stat.dat'), 'wb') as f:
        f.write(b'x' * 4096)
    names = {c.name for c in configs}
    log('fixture: %s/micro (large file %d MiB)' % (ctx.lower, ctx.scale['large_mb']))
    subprocess.run([MICROBENCH, 'setup', os.path.join(ctx.lower, 'micro'),
                    '--large-mb', str(ctx.scale['large_mb'])], check=True)
    if 'native-tmpfs' in names:
        os.makedirs(ctx.tmpfs, exist_ok=True)
        subprocess.run([MICROBENCH, 'setup', os.path.join(ctx.tmpfs, 'micro'),
                        '--large-mb', str(ctx.scale['mem_large_mb'])], check=True)


def start_configs(ctx, configs):
    """Starts each configuration and checks it serves the fixture correctly."""
    ready = []
    for cfg in configs:
        try:
            cfg.start()
        except Skip as e:
            ctx.results['skipped'][cfg.name] = str(e)
            log('SKIP %s: %s' % (cfg.name, e))
            continue
        micro = os.path.join(cfg.root(), 'micro')
        if cfg.memory and not cfg.setup_in_command:
            cmd = [MICROBENCH, 'setup', micro, '--large-mb', str(large_mb(ctx, cfg))]
            rc, out, err = run_cmd(cmd, 600)
            if rc != 0:
                record_failure(ctx, cfg, 'setup', cmd, rc, out, err)
                ctx.results['skipped'][cfg.name] = 'fixture setup failed (see Failures)'
                cfg.stop()
                continue
        cmd = cfg.wrap([MICROBENCH, 'check', micro, '--large-mb', str(large_mb(ctx, cfg))]
                       + (['--setup'] if cfg.setup_in_command else []))
        rc, out, err = run_cmd(cmd, 600)
        if rc != 0 or 'CHECK OK' not in out:
            record_failure(ctx, cfg, 'check', cmd, rc, out, err)
            ctx.results['skipped'][cfg.name] = 'correctness check failed (see Failures)'
            cfg.stop()
            continue
        ctx.results['configs'][cfg.name] = {'label': cfg.label, 'native_ref': cfg.native_ref,
                                            'memory': cfg.memory}
        ready.append(cfg)
        log('ready: %s (%s)' % (cfg.name, cfg.label))
    return ready


def micro_round(ctx, cfg, rnd, keys):
    s = ctx.scale
    micro = os.path.join(cfg.root(), 'micro')
    wl = list(keys)
    if ctx.want('firstop'):
        wl.append('firstop')
    if not wl:
        return
    cmd = cfg.wrap([MICROBENCH, 'run', micro, '-d', str(s['duration']), '-w', str(s['warmup']),
                    '-n', str(s['firstop_n']), '--large-mb', str(large_mb(ctx, cfg)),
                    '--outside', ctx.outside, '--root', cfg.root()]
                   + (['--setup'] if cfg.setup_in_command else []) + wl)
    budget = 120 + len(wl) * (s['duration'] + s['warmup']) * 3 + s['firstop_n'] * 2
    if cfg.native_ref == 'native':
        # the disk as settle_disk leaves it for a thesis run (the create cycle unlinks its
        # files: each round's creates met the freed inode numbers of the rounds before, and
        # native's cycle fell 118k -> 82k a second over 8 rounds, bench/NOTES.md), then the
        # fixture read back into the page cache, as the rounds before had left it
        settle_disk(ctx.lower, 3)
        read_tree(os.path.join(ctx.lower, 'micro'))
    t0 = time.time()
    rc, out, err = run_cmd(cmd, int(budget))
    rows = parse_results(out)
    for row in rows:
        row.update(config=cfg.name, round=rnd)
        ctx.results['micro'].append(row)
    if rc != 0:
        record_failure(ctx, cfg, 'micro round %d' % rnd, cmd, rc, out, err)
    log('round %d %-14s %d results in %.1fs' % (rnd, cfg.name, len(rows), time.time() - t0))


def nonmount_round(ctx, cfg, rnd):
    """Calls on a non-mount path, natively and then under cfg's preload, back to back."""
    s = ctx.scale
    base = [MICROBENCH, 'run', ctx.outside, '-d', str(s['duration']), '-w', str(s['warmup']),
            '--outside', ctx.outside] + [n for n, _ in NONMOUNT]
    got = {}
    for who, cmd in (('native', base), (cfg.name, cfg.wrap(base))):
        rc, out, err = run_cmd(cmd, 120)
        if rc != 0:
            record_failure(ctx, cfg, 'non-mount round %d' % rnd, cmd, rc, out, err)
            return
        for row in parse_results(out):
            if 'ns_per_call' in row:
                got.setdefault(row['workload'], {})[who] = float(row['ns_per_call'])
    for wl, pair in got.items():
        if len(pair) == 2:
            ctx.results['nonmount'].append({'config': cfg.name, 'round': rnd, 'workload': wl,
                                            'native_ns': pair['native'], 'ns': pair[cfg.name]})
    log('round %d %-14s non-mount calls: %s' % (rnd, cfg.name, ', '.join(
        '%s %+.1f ns' % (w, p[cfg.name] - p['native']) for w, p in got.items() if len(p) == 2)))


def fio_sizes(ctx, cfg=None):
    """The FIO_* sizes for cfg.  The create workloads are capped at FIORUNTIME seconds;
    over kernel FUSE they get fewer files, because fio looks up every file of the job
    before it starts (about 0.15 ms each over fusepy) and FUSE creates only a few
    thousand files in the run time anyway."""
    sizes = dict(ctx.scale['fio'])
    if isinstance(cfg, FuseDaemon):
        sizes.update(ctx.scale['fio_fuse'])
    return sizes


def fio_env(ctx, fiodir, cfg=None):
    env = dict(os.environ)
    env.update(fio_sizes(ctx, cfg))
    env['FIODIR'] = fiodir
    env['FIORUNTIME'] = str(ctx.scale['fio_runtime'])
    env['FIO_WEB_SIZE'] = '%dk' % (16 * int(ctx.scale['fio']['FIO_WEB_NRFILES']))
    return env


def prepare_thesis(ctx):
    """Lays out the read workloads' files once, natively, in the shared lower dir."""
    base = os.path.join(ctx.lower, 'thesis')
    os.makedirs(base, exist_ok=True)
    if ctx.use_filebench:
        return
    for name, job, _, kind in THESIS:
        if kind != 'read' or not ctx.want(name):
            continue
        t0 = time.time()
        cmd = ['fio', '--create_only=1', '--output=/dev/null', os.path.join(WORKLOADS, job)]
        subprocess.run(cmd, env=fio_env(ctx, base), check=True, cwd=OUT)
        log('laid out %s in %.1fs' % (name, time.time() - t0))
    # write back what the layout dirtied, then read it all once: warm page cache
    t0 = time.time()
    os.sync()
    nbytes = read_tree(base, recurse=False)
    log('synced and read %d MiB of thesis files in %.1fs' % (nbytes >> 20, time.time() - t0))


def read_tree(top, recurse=True):
    """Reads every file under top (its directories too if recurse) once, natively, into
    the page cache; returns the bytes read."""
    nbytes = 0
    buf = bytearray(1 << 20)
    for entry in os.scandir(top):
        if entry.is_dir(follow_symlinks=False) and recurse:
            nbytes += read_tree(entry.path)
        elif entry.is_file(follow_symlinks=False):
            with open(entry.path, 'rb', buffering=0) as f:
                while True:
                    n = f.readinto(buf)
                    if not n:
                        break
                    nbytes += n
    return nbytes


def fb_scaled(text, sizes):
    """The filebench workload with its bigfileset's size= and entries= set to sizes."""
    def fix(m):
        line = m.group(0)
        for key, val in sizes.items():
            line = re.sub(r'\b%s=[^,\s]+' % key, '%s=%s' % (key, val), line)
        return line
    return re.sub(r'^define fileset name=bigfileset,.*$', fix, text, flags=re.M)


def block_device_stat(path):
    """/sys's I/O counters of the block device path is on (its partition's), or None."""
    dev = os.stat(path).st_dev
    stat = '/sys/dev/block/%d:%d/stat' % (os.major(dev), os.minor(dev))
    return stat if os.path.exists(stat) else None


def settle_disk(path, caches, quiet=2.0, limit=60.0):
    """Before a thesis run: the dirty pages written back, the kernel's caches dropped as root
    (`caches`: 2, dentries and inodes; 3, the page cache too), and the disk under path quiet
    (no write, discard or request in flight for `quiet` seconds, `limit` at most). Each run,
    whichever configuration, starts from the same state. On this machine's ext4 (no journal,
    mounted with `discard`), native's cr-wr ran at 16-275 MB/s after the runs before it had
    removed their trees: ext4 without a journal does not give an inode number freed in the
    last 60 s to a new file, and finds which were by reading each free inode's dtime in the
    block device's cached inode table blocks (`recently_deleted`, 20-30% of the run's CPU);
    a block that is not cached counts as written out long ago. Dropping the page cache drops
    those blocks: six such runs right after a removed tree gave 264-275 MB/s (bench/NOTES.md).
    A removed tree also kept the disk busy with discards for 2-15 s after `sync` returned.
    Returns the seconds waited."""
    t0 = time.time()
    os.sync()
    try:
        with open('/proc/sys/vm/drop_caches', 'w') as f:
            f.write(str(caches))
    except OSError:
        pass                            # not root: the caches stay
    stat = block_device_stat(path)
    if stat is None:
        return time.time() - t0
    last, since = None, time.time()
    while time.time() - t0 < limit:
        with open(stat) as f:
            fields = f.read().split()
        # writes, sectors written, requests in flight, discards (kernels since 4.18)
        now = (fields[4], fields[6], fields[8], fields[11:13])
        if now != last:
            last, since = now, time.time()
        elif time.time() - since >= quiet:
            break
        time.sleep(0.1)
    return time.time() - t0


def thesis_run(ctx, cfg, rnd, name, job, fbfile, kind):
    base_lower = os.path.join(ctx.lower, 'thesis')
    base = os.path.join(cfg.root(), 'thesis')
    fresh = None
    if kind == 'create' or ctx.use_filebench:
        # a new directory each run: nothing of it is in any cache yet
        sub = '%s-%s-r%d' % (name, cfg.name, rnd)
        fresh = os.path.join(base_lower, sub)
        shutil.rmtree(fresh, ignore_errors=True)
        os.makedirs(fresh)
        for i in range(32):
            os.makedirs(os.path.join(fresh, 'd%d' % i))
        base = os.path.join(base, sub)
    if getattr(cfg, 'remount_per_run', False):
        cfg.stop()
        cfg.start()
    out_file = os.path.join(OUT, 'fio-%s-%s.json' % (name, cfg.name))
    if ctx.use_filebench:
        with open(os.path.join(WORKLOADS, fbfile)) as f:
            text = f.read().replace('__DIR__', base)
        text = re.sub(r'^run \d+', 'run %d' % ctx.scale['fio_runtime'], text, flags=re.M)
        text = fb_scaled(text, ctx.scale['fb'].get(name, {}))
        fb = os.path.join(OUT, 'fb-%s.f' % name)
        with open(fb, 'w') as f:
            f.write(text)
        cmd = cfg.wrap(['setarch', '-R', 'filebench', '-f', fb])
        env = dict(os.environ)
        env_note = ''
    else:
        if os.path.exists(out_file):
            os.unlink(out_file)
        cmd = cfg.wrap(['fio', '--output-format=json', '--output=' + out_file,
                        os.path.join(WORKLOADS, job)])
        env = fio_env(ctx, base, cfg)
        env_note = 'FIODIR=%s FIORUNTIME=%s %s ' % (
            base, env['FIORUNTIME'], ' '.join('%s=%s' % kv for kv in sorted(fio_sizes(ctx, cfg).items())))
    # filebench lays out each run's files after this: its page cache may go too; fio's read
    # workloads read the files prepare_thesis laid out and warmed once, which must stay
    waited = settle_disk(base_lower, 3 if ctx.use_filebench else 2)
    t0 = time.time()
    rc, out, err = run_cmd(cmd, 300 + 4 * ctx.scale['fio_runtime'], env=env, cwd=OUT)
    mbs = None
    if rc == 0:
        try:
            if ctx.use_filebench:
                m = re.search(r'IO Summary:.*?([\d.]+)mb/s', out)
                mbs = float(m.group(1))
            else:
                with open(out_file) as f:
                    job_res = json.load(f)['jobs'][0]
                mbs = (job_res['read']['bw_bytes'] + job_res['write']['bw_bytes']) / 1e6
        except Exception as e:
            err += '\n(could not parse results: %r)' % e
            rc = 'unparsable'
    if mbs is None:
        record_failure(ctx, cfg, 'thesis %s round %d' % (name, rnd), cmd, rc, out, err, env_note)
    else:
        ctx.results['thesis'].append({'config': cfg.name, 'workload': name, 'round': rnd,
                                      'mb_per_s': mbs})
        log('round %d %-20s %-14s %10.1f MB/s  (%.1fs; disk settled in %.1fs)'
            % (rnd, name, cfg.name, mbs, time.time() - t0, waited))
    if fresh:
        shutil.rmtree(fresh, ignore_errors=True)
    # what this run dirtied (files, a removed tree) is written back by the next run's
    # settle_disk, before its clock starts


# ---------------------------------------------------------------- the page cache (docs/cache.md)

# Whole commands, timed from the outside (ldpfuse-run's start included), on the computed
# FS of tests/fs_fixtures/computed.py: the same command on its 2 GiB file and on its
# 4 KiB file, in both modes. Goal (issue 9): 2 GiB within x5 of 4 KiB plus 20 ms.
COMPUTED = os.path.join(REPO, 'tests', 'fs_fixtures', 'computed.py')
CACHE_READS = [
    ('head', 'head -c 100 FILE', 'head -c 100'),
    ('tail', 'tail -c 100 FILE', 'tail -c 100'),
    ('pread', '%s -c "import os,random\nfd=os.open(\'FILE\',0)\nn=os.fstat(fd).st_size\n'
              'random.seed(1)\nfor _ in range(50): os.pread(fd,4096,random.randrange(max(1,n-4095)))"'
     % sys.executable, 'python: 50 random 4 KiB preads'),
]
APPENDERS = (1, 4, 8)       # processes, 50 `echo >> f` each
CACHE_KEYS = ['cache-' + r[0] for r in CACHE_READS] + ['appends:%d' % n for n in APPENDERS]


def timed(cmd, timeout=300):
    t0 = time.time()
    rc, out, err = run_cmd(cmd, timeout)
    return time.time() - t0, rc, out, err


def cache_round(ctx, rnd, keys):
    """One interleaved round of the cache workloads."""
    mnt = os.path.join(MOUNT_BASE, 'cache')
    runner = [ctx.ldpfuse_run, '--mountpoint', mnt,
              '--log-file', os.path.join(OUT, 'ldpfuse-cache.log')]
    for mode in ('embedded', 'shared'):
        for name, shell, _ in CACHE_READS:
            if 'cache-' + name not in keys:
                continue
            for fname in ('big', 'small'):
                cmd = runner + ['--mode', mode, COMPUTED + ':Computed', '--', 'sh', '-c',
                                shell.replace('FILE', mnt + '/' + fname) + ' > /dev/null']
                secs, rc, out, err = timed(cmd)
                if rc != 0:
                    record_failure(ctx, Native(ctx), 'cache %s %s %s' % (name, mode, fname), cmd, rc, out, err)
                    continue
                ctx.results['cache'].append(dict(workload='cache-' + name, mode=mode, file=fname,
                                                 round=rnd, seconds=secs))
    memory = os.path.join(REPO, 'examples', 'memory.py') + ':Memory'
    loopback = os.path.join(REPO, 'examples', 'loopback.py') + ':Loopback'
    for n in APPENDERS:
        if 'appends:%d' % n not in keys:
            continue
        script = ('for w in $(seq %d); do (for i in $(seq 50); do echo "$w $i" >> "$D/log"; done) & done; '
                  'wait; wc -l < "$D/log"' % n)
        lowdir = os.path.join(ctx.tmpfs, 'appends')
        for where in ('native', 'memory-shared', 'loopback-nopt'):
            shutil.rmtree(lowdir, ignore_errors=True)
            os.makedirs(lowdir)
            if where == 'native':
                cmd = ['env', 'D=' + lowdir, 'sh', '-c', script]
            elif where == 'memory-shared':
                cmd = ['env', 'D=' + mnt] + runner + ['--mode', 'shared', memory, '--', 'sh', '-c', script]
            else:
                cmd = ['env', 'D=' + mnt] + runner + ['-o', 'passthrough=no', loopback, lowdir,
                                                      '--', 'sh', '-c', script]
            secs, rc, out, err = timed(cmd)
            lines = int(out.split()[-1]) if rc == 0 and out.split() else -1
            ctx.results['cache'].append(dict(workload='appends:%d' % n, mode=where, file='',
                                             round=rnd, seconds=secs, lines=lines, want=50 * n))
    save(ctx)


# ---------------------------------------------------------------- the data loader (issue 24)


def loader_run(ctx, gz=False):
    """bench/data_loader.py's workload: a tar of loader_files files (1-32 KiB) read by 1 and
    4 forked workers, natively, through ratarmount over kernel FUSE, ratarmount under
    ldpfuse-run and examples/archive.py under ldpfuse-run (default mode), in interleaved
    rounds. With gz (the loader-gz item, issue 31) the tar is gzip'd and read natively
    (extracted), through ratarmount over kernel FUSE and through examples/archive.py. The
    tar is made in the lower directory and removed at the end."""
    key = 'loader_gz' if gz else 'loader'
    work = os.path.join(ctx.lower, key)
    DL.teardown(work)                    # what an interrupted run left
    files, rounds = ctx.scale['loader_files'], ctx.scale['loader_rounds']
    t0 = time.time()
    dl = DL.setup(work, files, ctx.ldpfuse_run, gz=gz)
    try:
        log('data loader: %d files (%d MiB) in %s, set up in %.1fs' % (
            files, dl['bytes'] >> 20, dl['tgz'] if gz else dl['tar'], time.time() - t0))
        ctx.results[key + '_info'] = {'files': files, 'bytes': dl['bytes'], 'rounds': rounds}
        skipped = {c: why for c, why in DL.unavailable(dl).items() if c in (DL.GZ_CONFIGS if gz else DL.CONFIGS)}
        ctx.results[key + '_skipped'] = skipped
        for c, why in skipped.items():
            log('SKIP data loader %s: %s' % (c, why))
        configs = [c for c in (DL.GZ_CONFIGS if gz else DL.CONFIGS) if c not in skipped]
        ctx.results.setdefault(key, [])
        for rnd, c, w, secs, err in DL.measure(dl, configs, rounds):
            if secs is None:
                record_failure(ctx, c, 'data loader, %d worker(s), round %d' % (w, rnd),
                               DL.command(c, w, dl), 'failed', '', err)
                continue
            ctx.results[key].append({'config': c, 'workers': w, 'round': rnd, 'seconds': secs})
            log('round %d data loader %-14s %d worker(s) %8.3f s' % (rnd, c, w, secs))
        ctx.results[key + '_starts'] = dl['starts']
        save(ctx)
    finally:
        DL.teardown(work)


def report_paths(filtered):
    """A run filtered with --only reports under bench/out, never over the full run's files."""
    if filtered:
        return os.path.join(OUT, 'RESULTS.md'), os.path.join(OUT, 'results.png')
    return RESULTS_MD, RESULTS_PNG


def save(ctx):
    with open(RESULTS_JSON, 'w') as f:
        json.dump(ctx.results, f, indent=1)


def machine_info(ctx):
    info = {}
    model = ''
    try:
        with open('/proc/cpuinfo') as f:
            for line in f:
                if line.startswith('model name'):
                    model = line.split(':', 1)[1].strip()
                    break
    except OSError:
        pass
    info['cpu'] = '%s, %d cores' % (model or platform.processor(), os.cpu_count())
    info['kernel'] = platform.release()
    info['glibc'] = os.confstr('CS_GNU_LIBC_VERSION') if hasattr(os, 'confstr') else '?'
    info['python (driver, fusepy daemons)'] = '%s (%s)' % (platform.python_version(), sys.executable)

    def out(cmd):
        try:
            text = subprocess.run(cmd, capture_output=True, text=True, timeout=30).stdout.strip()
            return text.splitlines()[0] if text else ''
        except Exception:
            return ''
    if ctx.ldpfuse_run:
        script = ctx.ldpfuse_run
        if '/shims/' in script and shutil.which('pyenv'):   # a pyenv shim: find the real script
            script = out(['pyenv', 'which', os.path.basename(script)]) or script
        try:
            shebang = open(script, 'rb').readline().decode(errors='replace')
        except OSError:
            shebang = ''
        interp = shebang[2:].strip().split()[0] if shebang.startswith('#!') else sys.executable
        info['python (ldpfuse-run)'] = out([interp, '-c', 'import sys; print(sys.version.split()[0], sys.executable)'])
        info['ldpfuse-run'] = ctx.ldpfuse_run
        info['ldpfuse_py package'] = out([interp, '-c', (
            'import glob, os, time, ldpfuse_py; d = os.path.dirname(ldpfuse_py.__file__); '
            'libs = glob.glob(os.path.join(d, "*.so")); '
            'print(d, "(native libraries built", time.strftime("%Y-%m-%d %H:%M UTC", '
            'time.gmtime(max(map(os.path.getmtime, libs)))) + ")" if libs else "")')])
    info['ldpfuse-py commit'] = out(['git', '-C', REPO, 'log', '-1', '--format=%h %cI %s'])
    try:
        import importlib.metadata as md
        info['fusepy'] = md.version('fusepy')
    except Exception:
        pass
    info['libfuse2'] = out(['dpkg-query', '-W', '-f', '${Version}', 'libfuse2'])
    info['libfuse3'] = out(['pkg-config', '--modversion', 'fuse3'])
    info['fio'] = out(['fio', '--version'])
    info['filebench'] = 'used' if ctx.use_filebench else 'not on PATH (fio job files used)'
    info['gcc'] = out(['gcc', '-dumpfullversion'])
    for what, path in (('lower directory', ctx.lower), ('tmpfs directory', ctx.tmpfs)):
        info[what] = '%s (%s on %s)' % (path, out(['findmnt', '-n', '-o', 'FSTYPE', '-T', path]),
                                        out(['findmnt', '-n', '-o', 'SOURCE', '-T', path]))
    info['date'] = time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())
    return info


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--quick', action='store_true', help='short run (about 3 minutes)')
    ap.add_argument('--rounds', type=int, help='interleaved rounds of micro-benchmarks')
    ap.add_argument('--thesis-rounds', type=int, help='interleaved rounds of thesis workloads')
    ap.add_argument('--thesis-runtime', type=int,
                    help='seconds of each timed thesis run (default 4, --quick 2)')
    ap.add_argument('--only', action='append', default=[],
                    help='comma-separated: micro, thesis, nonmount, firstop, cache, loader, loader-gz, workload names '
                         '(stat, orc, create, seqread, randread, readdir, orc:8, sq-re-4KB-1th-1f, ...) '
                         'and/or configuration names (%s)' % ', '.join(CONFIG_NAMES))
    ap.add_argument('--dir', default='/var/tmp/ldpfuse-bench',
                    help='lower/native directory on the disk under test (default %(default)s)')
    ap.add_argument('--tmpfs-dir', default='/dev/shm/ldpfuse-bench',
                    help='native directory for the memory configurations (default %(default)s)')
    ap.add_argument('--ldpfuse-run', help='path of ldpfuse-run (default: found on PATH)')
    ap.add_argument('--loader-files', type=int,
                    help='files in the data loader\'s tar (default 10000, --quick 2000)')
    ap.add_argument('--no-install', action='store_true',
                    help='do not apt-get/pip install missing tools; print the commands instead')
    ap.add_argument('--report-only', action='store_true',
                    help='rewrite RESULTS.md and results.png from bench/out/results.json')
    args = ap.parse_args()

    if args.report_only:
        with open(RESULTS_JSON) as f:
            results = json.load(f)
        sys.path.insert(0, BENCH)
        import report
        report.write(results, *report_paths(results.get('filtered')))
        return 0

    scale = dict(SCALES['quick' if args.quick else 'full'])
    if args.rounds:
        scale['rounds'] = args.rounds
    if args.thesis_rounds:
        scale['thesis_rounds'] = args.thesis_rounds
    if args.loader_files:
        scale['loader_files'] = args.loader_files
    if args.thesis_runtime:
        scale['fio_runtime'] = args.thesis_runtime
    ctx = Context(args, scale)
    ctx.results['filtered'] = bool(args.only)

    only = [w for item in args.only for w in item.split(',') if w]
    cfg_filter = [w for w in only if w in CONFIG_NAMES]
    wl_filter = [w for w in only if w not in CONFIG_NAMES]
    for w in wl_filter:
        known = {'micro', 'thesis', 'nonmount', 'firstop', 'cache', 'loader', 'loader-gz'} | set(THESIS_KEYS) | set(MICRO_KEYS) \
            | set(CACHE_KEYS) | {'cache-' + r[0] for r in CACHE_READS} | {'appends'} \
            | {k.split(':')[0] for k in MICRO_KEYS}
        if w not in known:
            ap.error('unknown --only item %r' % w)

    def want(name):
        if not wl_filter:
            return True
        if name in ('loader', 'loader-gz'):
            return name in wl_filter
        if name in wl_filter:
            return True
        group = 'thesis' if name in THESIS_KEYS else 'cache' if name in CACHE_KEYS else 'micro'
        return group in wl_filter or (':' in name and name.split(':')[0] in wl_filter)
    ctx.want = want
    micro_keys = [k for k in MICRO_KEYS if want(k)]
    cache_keys = [k for k in CACHE_KEYS if want(k)]
    if wl_filter and not any(w in ('cache', 'appends') or w in CACHE_KEYS or w.startswith('cache-')
                             for w in wl_filter):
        cache_keys = []
    thesis_items = [t for t in THESIS if want(t[0])]

    ensure_dependencies(not args.no_install)
    build_microbench()
    ctx.use_filebench = bool(shutil.which('filebench'))
    if thesis_items and not ctx.use_filebench and not shutil.which('fio'):
        log('SKIP thesis workloads: neither filebench nor fio on PATH (apt-get install fio)')
        thesis_items = []
    if not is_tmpfs(os.path.dirname(ctx.tmpfs)):
        log('note: %s is not on a tmpfs; the memory configurations compare against a plain '
            'directory' % ctx.tmpfs)
    if not ctx.ldpfuse_run:
        log('ldpfuse-run not found: the ldpfuse-py configurations are skipped '
            '(install with pip install . in %s)' % REPO)

    configs = [c(ctx) for c in CONFIG_CLASSES
               if c.name in cfg_filter or (not cfg_filter and (c.in_quick or not args.quick))]
    # each configuration's native reference runs too
    refs = {c.native_ref for c in configs}
    configs = [c(ctx) for c in CONFIG_CLASSES
               if c.name in {x.name for x in configs} | refs]
    if not (micro_keys or want('nonmount') or want('firstop')):
        configs = [c for c in configs if c.thesis]
    if not (micro_keys or want('nonmount') or want('firstop') or thesis_items):
        configs = []                     # e.g. --only loader or --only cache: no fixture to serve
    if args.quick and not cfg_filter and configs:
        log('--quick: the --mode embedded configurations are left out (name them in --only to run them)')
    os.makedirs(MOUNT_BASE, exist_ok=True)
    t_start = time.time()
    if configs:
        prepare_fixtures(ctx, configs)
    ready = start_configs(ctx, configs)
    try:
        if micro_keys or want('nonmount') or want('firstop'):
            for rnd in range(1, scale['rounds'] + 1):
                # rotate the order so no configuration always runs first
                k = (rnd - 1) % len(ready)
                for cfg in ready[k:] + ready[:k]:
                    micro_round(ctx, cfg, rnd, micro_keys)
                save(ctx)
        nm_cfgs = [c for c in ready if c.nonmount and c.name != 'native']
        if want('nonmount') and nm_cfgs:
            for rnd in range(1, scale['rounds'] + 1):
                for cfg in nm_cfgs:
                    nonmount_round(ctx, cfg, rnd)
                save(ctx)
        if cache_keys and ctx.ldpfuse_run:
            os.makedirs(ctx.tmpfs, exist_ok=True)
            for rnd in range(1, scale['rounds'] + 1):
                cache_round(ctx, rnd, cache_keys)
                log('cache round %d done' % rnd)
        thesis_cfgs = [c for c in ready if c.thesis]
        if thesis_items and thesis_cfgs:
            prepare_thesis(ctx)
            for rnd in range(1, scale['thesis_rounds'] + 1):
                for name, job, fbfile, kind in thesis_items:
                    k = (rnd - 1) % len(thesis_cfgs)
                    for cfg in thesis_cfgs[k:] + thesis_cfgs[:k]:
                        thesis_run(ctx, cfg, rnd, name, job, fbfile, kind)
                    save(ctx)
    finally:
        for cfg in ready:
            cfg.stop()
    sys.path.insert(0, BENCH)
    import report
    if want('loader'):
        loader_run(ctx)                  # after the FUSE daemons above are gone
        ctx.results['loader_summary'] = report.loader_summary(ctx.results)
    if want('loader-gz'):
        loader_run(ctx, gz=True)
        ctx.results['loader_gz_summary'] = report.loader_gz_summary(ctx.results)
    ctx.results['machine'] = machine_info(ctx)
    ctx.results['elapsed_s'] = time.time() - t_start
    save(ctx)
    stamp = time.strftime('%Y%m%d-%H%M%S', time.gmtime())
    shutil.copy(RESULTS_JSON, os.path.join(OUT, 'results-%s.json' % stamp))
    md_path, png_path = report_paths(ctx.results['filtered'])
    written = report.write(ctx.results, md_path, png_path)
    log('done in %.0fs: %s' % (time.time() - t_start, ', '.join(written)))
    return 0


if __name__ == '__main__':
    # a kill (SIGTERM) ends the run as Ctrl-C does: through main()'s finally, which
    # unmounts the FUSE daemons it started (killed outright, they stayed mounted)
    signal.signal(signal.SIGTERM, signal.default_int_handler)
    sys.exit(main())
