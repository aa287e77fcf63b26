"""Installs of ldpfuse-py measured side by side (bench/embedded_launcher.py,
bench/stuck_calls.py): their LABEL=LDPFUSE_RUN arguments, and the table of medians."""
import statistics


def parse(args):
    """[label, ldpfuse-run path] of each LABEL=LDPFUSE_RUN argument."""
    return [a.split("=", 1) for a in args]


def print_medians(rows, installs, times, rounds, digits):
    """A line per row, a column per install: the median of times[(row, label)], or 'failed'
    when a round of it failed."""
    width = max(len(r) for r in rows) + 2
    print("".ljust(width) + "".join(label.rjust(14) for label, _ in installs))
    for row in rows:
        cells = []
        for label, _ in installs:
            t = times[(row, label)]
            cells.append((f"{statistics.median(t):.{digits}f}" if len(t) == rounds else "failed").rjust(14))
        print(row.ljust(width) + "".join(cells))
    return width
