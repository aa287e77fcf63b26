"""Issue 10's targets in one run: the loopback example in the default mode (no --mode
flag, as a user runs it) next to native, in interleaved rounds, medians; one line per
target with the measured figure and met / NOT MET.

    python3 bench/targets.py [--rounds 5] [--quick] [--dir DIR] [--ldpfuse-run PATH]

| target | measured by |
|---|---|
| first operation of a fresh process <= 0.3 ms | microbench `firstop` (fork+exec of a stat of the mount root, minus the same outside it) |
| 200 short processes >= x0.7 | bench/short_processes.py's loop: `cat` of 200 files of 4 KiB, one process each |
| open+read 4K+close >= x0.5 | microbench `orc` |
| create+write 4K+close+unlink >= x0.5 | microbench `create` |
| stat >= x0.8 | microbench `stat` |
| readdir of 1000 entries >= x0.5 | microbench `readdir` |

Ratios are ldpfuse's speed over native's (higher is better). Every sample goes to
bench/out/targets.json, and the table to its own section of bench/RESULTS.md (kept when
bench/run.py rewrites that file; --no-write leaves RESULTS.md alone). The exit status is 0 whether or not the targets are met (1 when
a measurement failed).
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import run as R                  # noqa: E402  (bench/run.py: configurations, microbench)
import short_processes as SP     # noqa: E402
import report                   # noqa: E402
from report import Medians       # noqa: E402

MICRO_TARGETS = [               # (microbench key, title, minimum ratio to native)
    ('orc:1', 'open+read 4K+close', 0.5),
    ('create:1', 'create+write 4K+close+unlink', 0.5),
    ('stat:1', 'stat', 0.8),
    ('readdir:1', 'readdir 1000 entries', 0.5),
]
FIRSTOP_MAX_MS = 0.3
SHORT_PROCS_MIN = 0.7
PROCS = 200


# run.py's ldp-loop: the loopback example in the default mode (no --mode flag)
LdpfuseLoopbackDefault = R.LdpfuseLoopback


def evaluate(results, short):
    """[(target, measured text, met: True/False/None)] from the samples."""
    md = Medians(results)
    ldp = LdpfuseLoopbackDefault.name
    rows = []
    v = md.get(ldp, 'firstop.first_op_ms')
    rows.append(('first operation of a fresh process <= %.1f ms' % FIRSTOP_MAX_MS,
                 '-' if v is None else '%.3f ms (%.2f ms with it, %.2f ms without)' % (
                     v, md.get(ldp, 'firstop.mount_ms'), md.get(ldp, 'firstop.outside_ms')),
                 None if v is None else v <= FIRSTOP_MAX_MS))
    if short['native'] and short[ldp]:
        n, m = statistics.median(short['native']), statistics.median(short[ldp])
        rows.append(('%d short processes >= x%.1f' % (PROCS, SHORT_PROCS_MIN),
                     'x%.2f (%.3f ms/process, native %.3f)' % (n / m, m, n), n / m >= SHORT_PROCS_MIN))
    else:
        rows.append(('%d short processes >= x%.1f' % (PROCS, SHORT_PROCS_MIN), '-', None))
    for key, title, want in MICRO_TARGETS:
        r = md.ratio(ldp, key, 'native')
        spread = md.spread('native', key)
        rows.append(('%s >= x%.1f' % (title, want),
                     '-' if r is None else 'x%.2f (%.0f/s, native %.0f/s, native spread %.0f%%)' % (
                         r, md.get(ldp, key), md.get('native', key), 100 * (spread or 0)),
                     None if r is None else r >= want))
    return rows


def verdict(met):
    return 'no data' if met is None else 'met' if met else 'NOT MET'


def section(ctx, scale, rows):
    """The table as bench/RESULTS.md shows it, with when, where and at what load."""
    commit = subprocess.run(['git', '-C', R.REPO, 'log', '-1', '--format=%h'], capture_output=True,
                            text=True).stdout.strip()
    cpu = '%d cores' % os.cpu_count()
    load = os.getloadavg()
    out = ['## Targets of issue 10 (bench/targets.py: loopback example, default mode)', '',
           'Written by `python3 bench/targets.py` at %s, commit %s; medians of %d interleaved '
           'rounds against native; load average %.1f %.1f %.1f on %s.' % (
               time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime()), commit or '?',
               scale['rounds'], load[0], load[1], load[2], cpu), '',
           '| target | measured | |', '|---|---|---|']
    for target, measured, met in rows:
        out.append('| %s | %s | %s |' % (target, measured, '**%s**' % verdict(met) if met is False else verdict(met)))
    return '\n'.join(out) + '\n'


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--rounds', type=int, help='interleaved rounds (default 5, --quick 2)')
    ap.add_argument('--quick', action='store_true', help='fewer rounds, shorter runs')
    ap.add_argument('--dir', default='/var/tmp/ldpfuse-bench',
                    help='lower/native directory (default %(default)s)')
    ap.add_argument('--ldpfuse-run', help='path of ldpfuse-run (default: found on PATH)')
    ap.add_argument('--no-write', action='store_true', help='do not write the table into bench/RESULTS.md')
    args = ap.parse_args()
    scale = dict(R.SCALES['quick' if args.quick else 'full'])
    if args.rounds:
        scale['rounds'] = args.rounds
    ctx = R.Context(argparse.Namespace(dir=args.dir, tmpfs_dir='/dev/shm/ldpfuse-bench',
                                       ldpfuse_run=args.ldpfuse_run, quick=args.quick), scale)
    if not ctx.ldpfuse_run:
        sys.exit('targets: ldpfuse-run not found (pip install . in the repo root, or --ldpfuse-run PATH)')
    ctx.want = lambda name: name == 'firstop'
    R.build_microbench()
    os.makedirs(R.MOUNT_BASE, exist_ok=True)
    configs = [R.Native(ctx), LdpfuseLoopbackDefault(ctx)]
    R.prepare_fixtures(ctx, configs)
    ready = R.start_configs(ctx, configs)
    if len(ready) != 2:
        sys.exit('targets: a configuration could not start: %s' % json.dumps(ctx.results['failures'], indent=1))
    ldp = LdpfuseLoopbackDefault.name
    work, lower, mnt = SP.make_files(PROCS, parent=os.path.dirname(ctx.lower))
    procs = SP.configs(ctx.ldpfuse_run, lower, mnt, PROCS, modes=('shared (default)',))
    procs = {'native': procs['native'], ldp: procs['shared (default)']}
    short = {k: [] for k in procs}
    keys = [k for k, _, _ in MICRO_TARGETS]
    try:
        for rnd in range(1, scale['rounds'] + 1):
            k = (rnd - 1) % len(ready)
            for cfg in ready[k:] + ready[:k]:
                R.micro_round(ctx, cfg, rnd, keys)
                short[cfg.name].append(SP.run(*procs[cfg.name]))
                R.log('round %d %-16s short processes %.3f ms/process' % (rnd, cfg.name, short[cfg.name][-1]))
    finally:
        for cfg in ready:
            cfg.stop()
        shutil.rmtree(work, ignore_errors=True)
    ctx.results['short_processes_ms'] = short
    os.makedirs(R.OUT, exist_ok=True)
    with open(os.path.join(R.OUT, 'targets.json'), 'w') as f:
        json.dump(ctx.results, f, indent=1)
    rows = evaluate(ctx.results, short)
    print('\nIssue 10 targets: loopback example, default mode, vs native; medians of %d interleaved rounds'
          % scale['rounds'])
    width = max(len(r[0]) for r in rows)
    for target, measured, met in rows:
        print('  %-*s  %-8s %s' % (width, target, verdict(met), measured))
    if not args.no_write:
        report.replace_section(R.RESULTS_MD, report.TARGETS_BEGIN, report.TARGETS_END,
                               section(ctx, scale, rows))
    for fail in ctx.results['failures']:
        print('failed: %s %s (rc %s): %s' % (fail['config'], fail['phase'], fail['rc'], fail['command']))
    return 1 if ctx.results['failures'] or any(m is None for _, _, m in rows) else 0


if __name__ == '__main__':
    sys.exit(main())
