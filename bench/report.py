"""Turns bench/out/results.json (written by bench/run.py) into bench/RESULTS.md and bench/results.png.

    python3 bench/run.py --report-only     rewrites both from the last run's results
"""
import os
import statistics

import data_loader as DL
from run import (ARCHIVE_GZ_VS_FUSE, BENCH, FIRSTOP_TARGET_MS, ISSUE24, ISSUE33, MEMORY_TARGET, MICRO, NONMOUNT,
                 NONMOUNT_TARGET_NS,
                 RESULTS_MD, RESULTS_PNG, TARGETS, THESIS, THESIS_TARGET)

DISK_CONFIGS = ['native', 'ldp-loop', 'ldp-loop-nobacking', 'ldp-loop-filter', 'ldp-loop-nopt',
                'ldp-loop-embedded', 'fusepy-loop', 'libfuse-pt', 'libfuse-pthp']
MEM_CONFIGS = ['native-tmpfs', 'ldp-mem', 'ldp-mem-embedded', 'fusepy-mem']
TARGET_CONFIG = 'ldp-loop'
LABELS = {
    'native': 'native (disk)', 'ldp-loop': 'ldpfuse-py loopback',
    'ldp-loop-nopt': 'ldpfuse-py loopback, passthrough=no',
    'ldp-loop-nobacking': 'ldpfuse-py loopback, backing=no',
    'ldp-loop-filter': 'ldpfuse-py loopback, Python sees create+unlink+open_write',
    'libfuse-pthp': 'libfuse passthrough_hp (FUSE)',
    'ldp-loop-embedded': 'ldpfuse-py loopback, --mode embedded', 'fusepy-loop': 'fusepy loopback (FUSE)',
    'libfuse-pt': 'libfuse C passthrough (FUSE)', 'native-tmpfs': 'native (tmpfs)',
    'ldp-mem': 'ldpfuse-py memory', 'ldp-mem-embedded': 'ldpfuse-py memory, --mode embedded',
    'fusepy-mem': 'fusepy memory (FUSE)',
}
LABELS.update((c, l) for c, l in DL.LABELS.items() if c not in LABELS)   # data-loader configurations


def fmt(v):
    if v is None:
        return '-'
    a = abs(v)
    if a >= 1e6:
        return '%.2fM' % (v / 1e6)
    if a >= 1e4:
        return '%.0fk' % (v / 1e3)
    if a >= 1e3:
        return '%.1fk' % (v / 1e3)
    if a >= 100:
        return '%.0f' % v
    if a >= 10:
        return '%.1f' % v
    return '%.2f' % v


def fmt_ratio(r):
    if r is None:
        return '-'
    return 'x%.3f' % r if r < 0.1 else 'x%.2f' % r


class Medians:
    """Medians over rounds, per (configuration, workload key)."""

    def __init__(self, results):
        self.samples = {}
        fields = {m[0]: m[2] for m in MICRO}
        for row in results.get('micro', []):
            if row.get('error'):
                continue
            key = '%s:%s' % (row['workload'], row['threads'])
            field = fields.get(key)
            if row['workload'].startswith('nm-'):
                key, field = row['workload'], 'ns_per_call'
            elif row['workload'] == 'firstop':
                for f in ('mount_ms', 'outside_ms', 'first_op_ms'):
                    self.add(row['config'], 'firstop.' + f, float(row[f]))
                continue
            if field and field in row:
                self.add(row['config'], key, float(row[field]))
        for row in results.get('thesis', []):
            self.add(row['config'], row['workload'], row['mb_per_s'])
        for row in results.get('nonmount', []):
            self.add(row['config'], row['workload'] + '.native_ns', row['native_ns'])
            self.add(row['config'], row['workload'] + '.ns', row['ns'])
            self.add(row['config'], row['workload'] + '.delta_ns', row['ns'] - row['native_ns'])

    def add(self, cfg, key, v):
        self.samples.setdefault((cfg, key), []).append(v)

    def get(self, cfg, key):
        s = self.samples.get((cfg, key))
        return statistics.median(s) if s else None

    def spread(self, cfg, key):
        s = self.samples.get((cfg, key))
        if not s or len(s) < 2:
            return None
        m = statistics.median(s)
        return (max(s) - min(s)) / m if m else None

    def n(self, cfg, key):
        return len(self.samples.get((cfg, key), []))

    def ratio(self, cfg, key, ref):
        a, b = self.get(cfg, key), self.get(ref, key)
        return a / b if a is not None and b else None


def mark(ok):
    if ok is None:
        return 'no data'
    return 'met' if ok else '**not met**'


def micro_table(md, configs, present):
    cols = [c for c in configs if c in present]
    if not cols:
        return []
    ref = cols[0]
    lines = ['| workload | unit | ' + ' | '.join(LABELS[c] for c in cols) + ' | %s spread |' % ref,
             '|---|---|' + '---:|' * len(cols) + '---:|']
    for key, title, _, unit in MICRO:
        if all(md.get(c, key) is None for c in cols):
            continue
        cells = []
        for c in cols:
            v = md.get(c, key)
            if c == ref:
                cells.append(fmt(v))
            else:
                cells.append('%s (%s)' % (fmt(v), fmt_ratio(md.ratio(c, key, ref))) if v is not None else '-')
        sp = md.spread(ref, key)
        lines.append('| %s `%s` | %s | %s | %s |' % (title, key, unit, ' | '.join(cells),
                                                   '%.0f%%' % (sp * 100) if sp is not None else '-'))
    return lines


def loader_medians(results, key='loader'):
    """{(configuration, workers): median seconds} of the data loader's rounds (key: 'loader_gz'
    for the .tar.gz ones)."""
    samples = {}
    for r in results.get(key, []):
        samples.setdefault((r['config'], r['workers']), []).append(r['seconds'])
    return {k: statistics.median(v) for k, v in samples.items()}


def loader_ratios(med):
    """The speed ratios issue 24 asks of the data loader (higher is better): a dict per ratio,
    key, title, configs (the two compared), ratio (None without both medians), secs (theirs)."""
    def row(key, title, a, b):       # how many times faster a is than b
        ok = a in med and b in med and med[a]
        return {'key': key, 'title': title, 'configs': (a[0], b[0]),
                'ratio': med[b] / med[a] if ok else None, 'secs': (med.get(a), med.get(b))}
    rows = []
    for w in DL.WORKERS:
        rows.append(row('rat-ldp/rat-fuse:%d' % w, 'ratarmount under ldpfuse-run vs over kernel FUSE, '
                        '%d worker%s' % (w, 's' if w > 1 else ''), ('rat-ldp', w), ('rat-fuse', w)))
    for w in DL.WORKERS:
        rows.append(row('archive-ldp/native:%d' % w, 'examples/archive.py under ldpfuse-run vs native, '
                        '%d worker%s' % (w, 's' if w > 1 else ''), ('archive-ldp', w), ('native', w)))
    one, more = DL.WORKERS
    rows.append(row('archive-ldp:%d/%d' % (more, one), 'examples/archive.py under ldpfuse-run, %d workers vs %d'
                    % (more, one), ('archive-ldp', more), ('archive-ldp', one)))
    return rows


def loader_summary(results):
    """What results.json keeps of the data loader besides its samples: medians and ratios."""
    med = loader_medians(results)
    return {'info': results.get('loader_info'), 'skipped': results.get('loader_skipped', {}),
            'median_s': {c: {str(w): med[(c, w)] for w in DL.WORKERS if (c, w) in med}
                         for c in DL.CONFIGS if any((c, w) in med for w in DL.WORKERS)},
            'ratios': {r['key']: r['ratio'] for r in loader_ratios(med)}}


def loader_table(results):
    """The data loader's section of RESULTS.md, or [] when it did not run."""
    info = results.get('loader_info')
    if not info:
        return []
    med = loader_medians(results)
    skipped = results.get('loader_skipped', {})
    out = ['', '## Data loader, issue 24 (bench/data_loader.py; seconds, median of %d interleaved rounds)' % info['rounds'],
           '', 'Every file of a tar of %d files of 1-32 KiB (%.0f MiB) read by 1 and by 4 forked workers '
           '(the workers\' listing and reads, timed inside the reader: the mount\'s start is not counted); '
           'ldpfuse-run in the default mode. `xN`: speed relative to native.' % (info['files'], info['bytes'] / 2**20),
           '', '| configuration | 1 worker | 4 workers |', '|---|---:|---:|']
    for c in DL.CONFIGS:
        if c in skipped:
            out.append('| %s | skipped: %s | |' % (DL.LABELS[c], skipped[c]))
            continue
        cells = []
        for w in DL.WORKERS:
            m, n = med.get((c, w)), med.get(('native', w))
            if m is None:
                cells.append('failed (see Failures)')
            elif c == 'native' or not n:
                cells.append('%.3f' % m)
            else:
                cells.append('%.3f (%s)' % (m, fmt_ratio(n / m)))
        out.append('| %s | %s |' % (DL.LABELS[c], ' | '.join(cells)))
    out += [''] + ['- %s: %s' % (r['title'], fmt_ratio(r['ratio'])) for r in loader_ratios(med)]
    return out


def loader_gz_ratios(med):
    """Issue 31's ratios: the archive example vs ratarmount over kernel FUSE on the .tar.gz,
    per worker count (speed: higher is better, the target is ARCHIVE_GZ_VS_FUSE)."""
    rows = []
    for w in DL.WORKERS:
        a, b = ('archive-ldp-gz', w), ('rat-fuse-gz', w)
        rows.append({'key': 'archive-ldp-gz/rat-fuse-gz:%d' % w, 'workers': w,
                     'ratio': med[b] / med[a] if med.get(a) and b in med else None,
                     'secs': (med.get(a), med.get(b))})
    return rows


def loader_gz_summary(results):
    """What results.json keeps of the .tar.gz data loader besides its samples."""
    med = loader_medians(results, 'loader_gz')
    return {'info': results.get('loader_gz_info'), 'skipped': results.get('loader_gz_skipped', {}),
            'median_s': {c: {str(w): med[(c, w)] for w in DL.WORKERS if (c, w) in med}
                         for c in DL.GZ_CONFIGS if any((c, w) in med for w in DL.WORKERS)},
            'median_start_s': {c: statistics.median(v) for c, v in results.get('loader_gz_starts', {}).items() if v},
            'ratios': {r['key']: r['ratio'] for r in loader_gz_ratios(med)}}


def loader_gz_table(results):
    """The .tar.gz data loader's section of RESULTS.md (issue 31), or [] when it did not run."""
    info = results.get('loader_gz_info')
    if not info:
        return []
    med = loader_medians(results, 'loader_gz')
    skipped = results.get('loader_gz_skipped', {})
    starts = results.get('loader_gz_starts', {})
    out = ['', '## Data loader on a .tar.gz, issue 31 (bench/data_loader.py --gz; seconds, median of %d '
           'interleaved rounds)' % info['rounds'],
           '', 'The same %d files of 1-32 KiB (%.0f MiB) in a tar compressed by gzip -6, read as above; '
           '`start`: the median time from the command\'s start to the reader\'s (ratarmount: its mount, '
           'which reads the index it wrote at its first mount; the example: ldpfuse-run\'s start and '
           'end, with the pass that builds the index and the restart points).' % (info['files'], info['bytes'] / 2**20),
           '', '| configuration | 1 worker | 4 workers | start |', '|---|---:|---:|---:|']
    for c in DL.GZ_CONFIGS:
        if c in skipped:
            out.append('| %s | skipped: %s | | |' % (DL.LABELS[c], skipped[c]))
            continue
        cells = []
        for w in DL.WORKERS:
            m, n = med.get((c, w)), med.get(('native', w))
            if m is None:
                cells.append('failed (see Failures)')
            elif c == 'native' or not n:
                cells.append('%.3f' % m)
            else:
                cells.append('%.3f (%s)' % (m, fmt_ratio(n / m)))
        start = statistics.median(starts[c]) if starts.get(c) else None
        cells.append('-' if start is None else '%.2f' % start)
        out.append('| %s | %s |' % (DL.LABELS[c], ' | '.join(cells)))
    out.append('')
    for r in loader_gz_ratios(med):
        target = ('examples/archive.py on the .tar.gz, %d worker%s: >= x%g of ratarmount over kernel FUSE '
                  '(within twice its time)' % (r['workers'], 's' if r['workers'] > 1 else '', ARCHIVE_GZ_VS_FUSE))
        if r['ratio'] is None:
            out.append('- %s: -' % target)
        else:
            out.append('- %s: %s (%.3f s vs %.3f s), %s' % ((target, fmt_ratio(r['ratio'])) + r['secs'] +
                                                             ('met' if r['ratio'] >= ARCHIVE_GZ_VS_FUSE else 'NOT met',)))
    return out


def issue24_targets(results, md):
    """The section "Targets of issue 24 (default mode)": [(target, measured, met or None)]."""
    titles = {m[0]: m[1] for m in MICRO}
    units = {m[0]: m[3] for m in MICRO}
    rows = []

    def ratio_row(target, cfg, key, ref, want, strict=False):
        r, a, b = md.ratio(cfg, key, ref), md.get(cfg, key), md.get(ref, key)
        measured = '-' if r is None else '%s (%s vs %s %s)' % (fmt_ratio(r), fmt(a), fmt(b), units.get(key, 'MB/s'))
        rows.append((target, measured, None if r is None else (r > want if strict else r >= want)))

    skipped = results.get('loader_skipped', {})
    for r in loader_ratios(loader_medians(results)):
        kind, workers = r['key'].split(':')
        n_workers = '%s worker%s' % (workers, '' if workers == '1' else 's')
        if kind == 'rat-ldp/rat-fuse':
            goal = ISSUE24['loader_vs_fuse']
            target = 'data loader, %s: ratarmount under ldpfuse-run >= x%g of ratarmount over kernel FUSE' % (n_workers, goal)
        elif kind == 'archive-ldp/native':
            goal = ISSUE24['archive_vs_native']
            target = 'data loader, %s: examples/archive.py under ldpfuse-run >= x%g of native' % (n_workers, goal)
        else:
            goal = None
            target = 'data loader: examples/archive.py under ldpfuse-run, %s workers faster than %s' % tuple(workers.split('/'))
        if r['ratio'] is None:
            why = ['%s skipped: %s' % (DL.LABELS[c], skipped[c]) for c in dict.fromkeys(r['configs']) if c in skipped]
            rows.append((target, '; '.join(why) or '-', None))
        else:
            rows.append((target, '%s (%.3f s vs %.3f s)' % ((fmt_ratio(r['ratio']),) + r['secs']),
                         r['ratio'] >= goal if goal else r['ratio'] > 1.0))
    ratio_row('memory example, %s: >= x%g of fusepy memory over kernel FUSE' % (titles['orc:1'], ISSUE24['memory_vs_fusepy']),
              'ldp-mem', 'orc:1', 'fusepy-mem', ISSUE24['memory_vs_fusepy'])
    a, b = md.get('ldp-mem', 'orc:8'), md.get('ldp-mem', 'orc:1')
    rows.append(('memory example, open+read+close: 8 threads >= 1 thread',
                 '-' if a is None or not b else '%s (%s vs %s ops/s)' % (fmt_ratio(a / b), fmt(a), fmt(b)),
                 None if a is None or not b else a >= b))
    ratio_row('memory example, %s: >= x%g of tmpfs' % (titles['seqread:1'], ISSUE24['memory_seqread']),
              'ldp-mem', 'seqread:1', 'native-tmpfs', ISSUE24['memory_seqread'])
    for key, goal in ISSUE24['loop'].items():
        ratio_row('loopback example, %s: >= x%g of native' % (titles[key], goal), 'ldp-loop', key, 'native', goal)
    for name, *_ in THESIS:
        ratio_row('thesis %s (loopback example): >= x%g of native' % (name, ISSUE24['thesis']),
                  'ldp-loop', name, 'native', ISSUE24['thesis'])
    return rows


def round_ratio(results, cfg, key, ref):
    """The median over rounds of cfg's value / ref's in the same round (None if no round has both)."""
    fields = {m[0]: m[2] for m in MICRO}
    by = {}
    for row in results.get('micro', []):
        k = '%s:%s' % (row['workload'], row.get('threads'))
        if k == key and not row.get('error') and fields.get(k) in row:
            by.setdefault(row['config'], {})[row['round']] = float(row[fields[k]])
    for row in results.get('thesis', []):
        if row['workload'] == key:
            by.setdefault(row['config'], {})[row['round']] = row['mb_per_s']
    a, b = by.get(cfg, {}), by.get(ref, {})
    rs = [a[r] / b[r] for r in a if b.get(r)]
    return statistics.median(rs) if rs else None


def issue33_section(results, md):
    """The backed loopback (ldp-loop) against native, and the same without backing."""
    out = ['', '## Targets of issue 33 (default mode, the loopback example on a backing tree)', '',
           'Two ratios per cell: of the medians, and (in brackets) the median of the per-round '
           'ratios (each run against the native run of its round). Met when both are at or '
           'above the target. `-o backing=no` is the same example with every name operation '
           'through its Python methods.', '',
           '| target | backed (`ldp-loop`) | `-o backing=no` | |', '|---|---|---|---|']
    titles = {m[0]: m[1] for m in MICRO}
    items = [('%s' % titles['create:%d' % t], 'create:%d' % t, ISSUE33['create']) for t in (1, 2, 8)]
    items += [('thesis %s' % t[0], t[0], ISSUE33['thesis']) for t in THESIS]
    for title, key, want in items:
        cells, met = [], None
        for cfg in ('ldp-loop', 'ldp-loop-nobacking'):
            r, rr = md.ratio(cfg, key, 'native'), round_ratio(results, cfg, key, 'native')
            cells.append('-' if r is None else '%s (%s)' % (fmt_ratio(r), fmt_ratio(rr)))
            if cfg == 'ldp-loop' and r is not None and rr is not None:
                met = r >= want and rr >= want
        out.append('| %s >= x%g | %s | %s | %s |' % (title, want, cells[0], cells[1],
                                                 'not run' if met is None else mark(met)))
    out += where_the_time_goes(results, ('ldp-loop', 'native'), ['create:%d' % t for t in (1, 2, 8)] + ['orc:1'])
    return out


def where_the_time_goes(results, cfgs, keys):
    """Per operation, medians over rounds: the workers' CPU, their wait for a CPU and their
    time asleep (microbench's cpu/queued/asleep_us_per_op). On a loaded machine ops/s moves
    with the wait, which the load decides; the CPU is what the layer costs."""
    f = ('cpu_us_per_op', 'queued_us_per_op', 'asleep_us_per_op')
    med = {}
    for row in results.get('micro', []):
        k = '%s:%s' % (row['workload'], row.get('threads'))
        if k in keys and row['config'] in cfgs and not row.get('error') and all(x in row for x in f):
            for x in f:
                med.setdefault((row['config'], k, x), []).append(float(row[x]))
    if not med:
        return []
    out = ['', 'Where the time goes (us per operation, medians; a worker\'s wall-clock is its CPU, its '
           'wait for a CPU and its time asleep; the CPU ratio is native\'s over the configuration\'s, '
           'the figure the load does not move):', '',
           '| workload | ' + ' | '.join('%s CPU / wait / asleep' % c for c in cfgs) + ' | CPU ratio |',
           '|---|' + '---:|' * (len(cfgs) + 1)]
    for k in keys:
        cells, cpu = [], []
        for c in cfgs:
            v = [statistics.median(med[(c, k, x)]) if (c, k, x) in med else None for x in f]
            cpu.append(v[0])
            cells.append('-' if v[0] is None else '%.2f / %.2f / %.2f' % tuple(v))
        ratio = cpu[1] / cpu[0] if None not in cpu[:2] and cpu[0] else None
        out.append('| `%s` | %s | %s |' % (k, ' | '.join(cells), fmt_ratio(ratio) if ratio else '-'))
    return out


def issue24_section(results, md):
    out = ['', '## Targets of issue 24 (default mode)', '',
           'ldpfuse-py as a user runs it, with no `--mode` flag: the loopback example (`ldp-loop`), the '
           'memory example (`ldp-mem`), ratarmount and examples/archive.py under ldpfuse-run. Ratios are '
           'speeds (higher is better); "not run": this run did not measure it.', '',
           '| target | measured | |', '|---|---|---|']
    for target, measured, met in issue24_targets(results, md):
        out.append('| %s | %s | %s |' % (target, measured, 'not run' if met is None else mark(met)))
    return out


def cache_tables(results):
    """The page cache's workloads (run.py: cache_round), medians of whole-command times."""
    rows = results.get('cache', [])
    if not rows:
        return []
    import statistics

    def med(**match):
        vals = [r['seconds'] for r in rows if all(r.get(k) == v for k, v in match.items())]
        return statistics.median(vals) if vals else None
    out = ['', '## Page cache: partial reads of a 2 GiB computed file (ms, whole command, median)', '',
           'ldpfuse-run + the command on tests/fs_fixtures/computed.py: the same command on its 2 GiB '
           'file and on its 4 KiB file. Goal (issue 9): 2 GiB <= 5 x 4 KiB + 20 ms.', '',
           '| workload | mode | 4 KiB file | 2 GiB file | 5 x 4 KiB + 20 ms | met |', '|---|---|---:|---:|---:|---|']
    for wl in sorted({r['workload'] for r in rows if r['workload'].startswith('cache-')}):
        for mode in ('embedded', 'shared'):
            small, big = med(workload=wl, mode=mode, file='small'), med(workload=wl, mode=mode, file='big')
            if small is None or big is None:
                continue
            goal = 5 * small + 0.020
            out.append('| %s | %s | %.1f | %.1f | %.1f | %s |' % (wl, mode, small * 1e3, big * 1e3, goal * 1e3,
                                                               'yes' if big <= goal else '**no**'))
    app = [r for r in rows if r['workload'].startswith('appends:')]
    if app:
        out += ['', '## Page cache: N shell processes appending 50 lines each (`echo >> f`)', '',
                '| processes | where | time (ms, median) | lines kept (worst round) | lines written |',
                '|---:|---|---:|---:|---:|']
        for wl in sorted({r['workload'] for r in app}, key=lambda w: int(w.split(':')[1])):
            for where in ('native', 'memory-shared', 'loopback-nopt'):
                rs = [r for r in app if r['workload'] == wl and r['mode'] == where]
                if rs:
                    out.append('| %s | %s | %.1f | %d | %d |' % (wl.split(':')[1], where,
                                                                med(workload=wl, mode=where) * 1e3,
                                                                min(r['lines'] for r in rs), rs[0]['want']))
    return out


# bench/targets.py writes its own section of RESULTS.md, between these lines; a rewrite by
# run.py keeps it (at the end), and targets.py replaces only it.
TARGETS_BEGIN = '<!-- written by bench/targets.py -->'
TARGETS_END = '<!-- end of bench/targets.py -->'


def kept_section(md_path, begin, end):
    """The text from begin to end (both lines included, and a newline) in md_path, or ''."""
    try:
        with open(md_path) as fh:
            text = fh.read()
    except OSError:
        return ''
    i, j = text.find(begin), text.find(end)
    return text[i:j + len(end)] + '\n' if 0 <= i < j else ''


def replace_section(md_path, begin, end, section):
    """Put section (without the marker lines) between begin and end in md_path: in place of
    the old one, or at the end of the file."""
    try:
        with open(md_path) as fh:
            text = fh.read()
    except OSError:
        text = ''
    block = '%s\n%s\n%s\n' % (begin, section.rstrip(), end)
    i, j = text.find(begin), text.find(end)
    if 0 <= i < j:
        text = text[:i] + block + text[j + len(end):].lstrip('\n')
    else:
        text = text.rstrip() + ('\n\n' if text.strip() else '') + block
    with open(md_path, 'w') as fh:
        fh.write(text)


def write(results, md_path=RESULTS_MD, png_path=RESULTS_PNG):
    md = Medians(results)
    present = set(results.get('configs', {}))
    machine = results.get('machine', {})
    scale = results.get('scale', {})
    out = ['# ldpfuse-py benchmark results', '',
           'Written by `python3 bench/run.py%s%s` (bench/README.md says what each workload and '
           'configuration is). Values are medians over interleaved rounds; `xN` is the ratio to the '
           'native directory the configuration stands on (disk for loopbacks, tmpfs for the memory '
           'file systems), higher is better. The ldpfuse-py configurations run in the default mode '
           '(no `--mode` flag, as a user runs them) unless their name says `--mode embedded`. "spread" is (max - min) / median of the native runs: '
           'the noise floor of this machine.' % (' --quick' if results.get('quick') else '',
                                         ' --only ...' if results.get('filtered') else ''), '',
           '## Machine', '']
    for k, v in machine.items():
        out.append('- %s: %s' % (k, v))
    out.append('- rounds: %s micro-benchmark rounds of %ss per workload (after %ss warm-up), '
               '%s thesis rounds of %ss; whole run %.0f s' % (
                   scale.get('rounds'), scale.get('duration'), scale.get('warmup'),
                   scale.get('thesis_rounds'), scale.get('fio_runtime'),
                   results.get('elapsed_s', 0)))
    out.append('- fixture: large file %s MiB (%s MiB in the memory configurations), 1000 files '
               'of 16 KiB, a 1000-entry directory' % (scale.get('large_mb'), scale.get('mem_large_mb')))
    if results.get('loader_info'):
        out.append('- data loader: a tar of %(files)d files, %(rounds)d interleaved rounds' % results['loader_info'])
    if results.get('loader_gz_info'):
        out.append('- data loader on a .tar.gz: %(files)d files, %(rounds)d interleaved rounds' % results['loader_gz_info'])

    # ---- targets
    out += ['', '## Targets of issue 3', '',
            'Ratios of **%s** to native unless the row says otherwise.' % LABELS[TARGET_CONFIG], '',
            '| what | target | measured | |', '|---|---|---:|---|']
    titles = {m[0]: m[1] for m in MICRO}
    for key, target in TARGETS.items():
        r = md.ratio(TARGET_CONFIG, key, 'native')
        out.append('| %s | >= x%.2f | %s | %s |' % (titles[key], target, fmt_ratio(r),
                                                   mark(None if r is None else r >= target)))
    for w in ('orc', 'create', 'seqread', 'randread'):
        for t in (2, 8):
            key, one = '%s:%d' % (w, t), '%s:1' % w
            try:
                eff = (md.get(TARGET_CONFIG, key) / md.get(TARGET_CONFIG, one)) / \
                      (md.get('native', key) / md.get('native', one))
            except (TypeError, ZeroDivisionError):
                eff = None
            out.append('| %s: speed-up 1->%d threads relative to native\'s | scales like native '
                       '(>= x0.80) | %s | %s |' % (titles[one], t, fmt_ratio(eff),
                                                    mark(None if eff is None else eff >= 0.8)))
    for key in ('orc:1', 'create:1'):
        r = md.ratio('ldp-mem', key, 'fusepy-mem')
        out.append('| %s: ldpfuse-py memory vs fusepy memory over FUSE | >= x%.0f | %s | %s |' % (
            titles[key], MEMORY_TARGET, fmt_ratio(r), mark(None if r is None else r >= MEMORY_TARGET)))
    for name, *_ in THESIS:
        r = md.ratio(TARGET_CONFIG, name, 'native')
        out.append('| thesis %s | >= x%.2f | %s | %s |' % (name, THESIS_TARGET, fmt_ratio(r),
                                                          mark(None if r is None else r >= THESIS_TARGET)))
    for wl, title in NONMOUNT:
        d = md.get(TARGET_CONFIG, wl + '.delta_ns')
        out.append('| %s on a non-mount path: ns added by the preload | a few ns (<= %.0f) | %s | %s |' % (
            title, NONMOUNT_TARGET_NS, '-' if d is None else '%+.1f ns' % d,
            mark(None if d is None else d <= NONMOUNT_TARGET_NS)))
    for cfg in ('ldp-loop', 'ldp-mem', 'ldp-loop-embedded', 'ldp-mem-embedded'):
        v = md.get(cfg, 'firstop.first_op_ms')
        if v is None and cfg.endswith('-embedded'):
            continue
        out.append('| first operation in a fresh process, %s | < %.0f ms | %s | %s |' % (
            LABELS[cfg], FIRSTOP_TARGET_MS, '-' if v is None else '%.1f ms' % v,
            mark(None if v is None else v < FIRSTOP_TARGET_MS)))
    out += issue24_section(results, md)
    out += issue33_section(results, md)

    # ---- micro tables
    out += ['', '## Micro-benchmarks (bench/microbench.c), disk', '']
    out += micro_table(md, DISK_CONFIGS, present) or ['(no configuration ran)']
    out += ['', '## Micro-benchmarks, memory file systems (native reference: tmpfs)', '']
    lines = micro_table(md, MEM_CONFIGS, present)
    out += lines or ['(no configuration ran)']
    if 'ldp-mem' in present and 'fusepy-mem' in present:
        out += ['', 'ldpfuse-py memory vs fusepy memory over FUSE: ' + ', '.join(
            '%s %s' % (m[0], fmt_ratio(md.ratio('ldp-mem', m[0], 'fusepy-mem')))
            for m in MICRO if md.ratio('ldp-mem', m[0], 'fusepy-mem') is not None)]

    # ---- thesis
    thesis_cfgs = [c for c in DISK_CONFIGS if any(md.get(c, t[0]) is not None for t in THESIS)]
    out += ['', '## The six LDP_FUSE thesis workloads (MB/s, %s)' % (
        'filebench' if 'used' == machine.get('filebench') else 'fio job files in bench/workloads'), '']
    if thesis_cfgs:
        out.append('| workload | ' + ' | '.join(LABELS[c] for c in thesis_cfgs) + ' | native spread |')
        out.append('|---|' + '---:|' * len(thesis_cfgs) + '---:|')
        for name, *_ in THESIS:
            cells = []
            for c in thesis_cfgs:
                v = md.get(c, name)
                if c == 'native':
                    cells.append(fmt(v))
                else:
                    cells.append('%s (%s)' % (fmt(v), fmt_ratio(md.ratio(c, name, 'native'))) if v is not None else '-')
            sp = md.spread('native', name)
            out.append('| %s | %s | %s |' % (name, ' | '.join(cells), '%.0f%%' % (sp * 100) if sp is not None else '-'))
    else:
        out.append('(not run)')
    out += loader_table(results)
    out += loader_gz_table(results)

    # ---- non-mount and first op
    nm_cfgs = [c for c in ('ldp-loop', 'ldp-loop-nopt', 'ldp-loop-embedded', 'ldp-mem', 'ldp-mem-embedded')
               if md.get(c, NONMOUNT[0][0] + '.ns') is not None]
    out += ['', '## Cost of a call on a non-mount path (ns per call)', '',
            'Each round runs the calls in a process without the preload and, right after, in one '
            'under ldpfuse-run; the cells are medians over rounds: without -> with (median of the '
            'per-round differences).', '',
            '| call | ' + ' | '.join(LABELS[c] for c in nm_cfgs) + ' |',
            '|---|' + '---:|' * len(nm_cfgs)]
    for wl, title in NONMOUNT:
        cells = ['%.1f -> %.1f (%+.1f)' % (md.get(c, wl + '.native_ns'), md.get(c, wl + '.ns'),
                                           md.get(c, wl + '.delta_ns')) for c in nm_cfgs]
        out.append('| %s | %s |' % (title, ' | '.join(cells)))
    out += ['', '## First operation in a fresh process (fork + exec + one stat + exit, ms, median)', '',
            'The child stats the mount root, or a path outside any mount (same environment, preload '
            'loaded); the difference is what the first mount operation costs (for ldpfuse-py: '
            'starting the interpreter and the file system). The native row is a plain process with '
            'no preload.', '',
            '| configuration | stat on the mount | stat elsewhere | first-op cost |', '|---|---:|---:|---:|']
    for c in DISK_CONFIGS + MEM_CONFIGS:
        v = md.get(c, 'firstop.mount_ms')
        if v is None:
            continue
        out.append('| %s | %.2f | %.2f | %.2f |' % (LABELS[c], v, md.get(c, 'firstop.outside_ms'),
                                                  md.get(c, 'firstop.first_op_ms')))

    out += cache_tables(results)

    notes = os.path.join(BENCH, 'NOTES.md')
    if os.path.exists(notes):
        with open(notes) as fh:
            text = fh.read().strip().splitlines()
        # NOTES.md is hand-written: its own title is replaced by this section's
        out += ['', '## Notes (hand-written in bench/NOTES.md; they refer to the run they name)', '']
        body = [l for l in text if not l.startswith('# ')]
        while body and not body[0].strip():
            body.pop(0)
        out += body

    # ---- skipped and failures
    out += ['', '## Skipped configurations', '']
    skipped = results.get('skipped', {})
    lines = ['- %s: %s' % (LABELS.get(k, k), v) for k, v in skipped.items()]
    lines += ['- data loader, %s: %s' % (DL.LABELS[k], v) for k, v in results.get('loader_skipped', {}).items()]
    lines += ['- data loader, %s: %s' % (DL.LABELS[k], v) for k, v in results.get('loader_gz_skipped', {}).items()]
    out += lines or ['(none)']
    out += ['', '## Failures', '']
    fails = results.get('failures', [])
    if not fails:
        out.append('(none)')
    for f in fails:
        out += ['### %s, %s (exit %s)' % (LABELS.get(f['config'], f['config']), f['phase'], f['rc']), '',
                '```', f['command'], '```', '']
        if f.get('stdout'):
            out += ['stdout (last lines):', '', '```', f['stdout'], '```', '']
        if f.get('stderr'):
            out += ['stderr (last lines):', '', '```', f['stderr'], '```', '']
    kept = kept_section(md_path, TARGETS_BEGIN, TARGETS_END)
    with open(md_path, 'w') as fh:
        fh.write('\n'.join(out).rstrip() + '\n' + (kept and '\n' + kept))
    written = [md_path]
    if plot(md, present, png_path):
        written.append(png_path)
    return written


def plot(md, present, png_path=RESULTS_PNG):
    """Draw the ratios to png_path; False (and a line saying why) when nothing was drawn."""
    try:
        import matplotlib
        matplotlib.use('Agg')
        import matplotlib.pyplot as plt
    except Exception:
        print('[bench] matplotlib not installed: no results.png (pip install matplotlib)')
        return False
    series = [c for c in DISK_CONFIGS[1:] + MEM_CONFIGS[1:] if c in present]
    if not series:
        print('[bench] no configuration but the native ones ran: no results.png')
        return False
    ref = {c: ('native-tmpfs' if c in MEM_CONFIGS else 'native') for c in series}
    micro_keys = [m[0] for m in MICRO if any(md.ratio(c, m[0], ref[c]) for c in series)]
    thesis_keys = [t[0] for t in THESIS if any(md.ratio(c, t[0], 'native') for c in series)]
    panels = [(micro_keys, 'micro-benchmarks (bench/microbench.c)')] if micro_keys else []
    if thesis_keys:
        panels.append((thesis_keys, 'LDP_FUSE thesis workloads'))
    if not panels:
        print('[bench] no ratios to plot: no results.png')
        return False
    fig, axes = plt.subplots(len(panels), 1, figsize=(17, 5.5 * len(panels)), squeeze=False)
    colors = {'ldp-loop': '#1f77b4', 'ldp-loop-nopt': '#6baed6', 'ldp-loop-embedded': '#17becf',
              'fusepy-loop': '#d62728', 'libfuse-pt': '#ff7f0e', 'ldp-mem': '#2ca02c',
              'ldp-mem-embedded': '#98df8a', 'fusepy-mem': '#9467bd'}
    for ax, (keys, title) in zip(axes[:, 0], panels):
        cfgs = [c for c in series if any(md.ratio(c, k, ref[c]) for k in keys)]
        width = 0.8 / max(1, len(cfgs))
        for i, c in enumerate(cfgs):
            xs, ys = [], []
            for j, k in enumerate(keys):
                r = md.ratio(c, k, ref[c])
                if r:
                    xs.append(j + (i - (len(cfgs) - 1) / 2) * width)
                    ys.append(r)
            ax.bar(xs, ys, width, label='%s (vs %s)' % (LABELS[c], ref[c]), color=colors.get(c))
        for j, k in enumerate(keys):
            t = TARGETS.get(k, THESIS_TARGET if k in [x[0] for x in THESIS] else None)
            if t:
                ax.plot([j - 0.45, j + 0.45], [t, t], color='black', linewidth=1, linestyle=':')
        ax.axhline(1.0, color='gray', linewidth=0.8)
        ax.set_yscale('log')
        ax.set_xticks(range(len(keys)))
        ax.set_xticklabels(keys, rotation=30, ha='right')
        ax.set_ylabel('ratio to native (log)')
        ax.set_title(title + '; dotted: issue 3 target for ldpfuse-py loopback')
        ax.legend(fontsize=8, loc='upper left', bbox_to_anchor=(1.0, 1.0))
        ax.grid(axis='y', which='both', alpha=0.3)
    fig.tight_layout()
    fig.savefig(png_path, dpi=90)
    plt.close(fig)
    return True


if __name__ == '__main__':
    import json
    from run import RESULTS_JSON, report_paths
    with open(RESULTS_JSON) as f:
        results = json.load(f)
    paths = report_paths(results.get('filtered'))
    print('wrote', *write(results, *paths))
