"""``--stats``: at the end of a run, a table per operation of how many calls reached the file
system, how long they spent in the server (the request's checks, the class's method, the
conversions) and in transport (what the calling process saw, less the server's part: the
shared memory, the wake-ups, the scheduling), with medians and 99th percentiles, so that a
file system's author sees where the time goes.

The server keeps the histograms (native/server/request.c, native/stats.h); each client
tells it, with every request, how long its previous one took as it saw it. The table is
the shared mode's (and, in the embedded mode, that of the processes the launcher served:
the others call the class in-process, with no transport to measure).
"""
import os
import sys


def _ms(ns):
    return f"{ns / 1e6:.1f} ms"


def _us(ns):
    return f"{ns / 1e3:.0f} us" if ns >= 10_000 else f"{ns / 1e3:.1f} us"


def table(rows):
    """The table's lines, for rows of _embedded.server_stats()."""
    head = ("operation", "calls", "server total", "p50", "p99", "transport total", "p50", "p99")
    body = []
    for name, n, s_total, s50, s99, t_n, t_total, t50, t99 in sorted(rows, key=lambda r: -r[2]):
        transport = (_ms(t_total), _us(t50), _us(t99)) if t_n else ("-", "-", "-")
        body.append((name, str(n), _ms(s_total), _us(s50), _us(s99), *transport))
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
    calls = sum(r[1] for r in rows)
    lines = [f"ldpfuse-run --stats: {calls} call(s) reached the file system's server", fmt(head)]
    lines += [fmt(r) for r in body]
    return lines


def methods_table(rows):
    """The lines for rows of _embedded.method_stats(): each of the class's methods as the
    server called it (the call alone, not the request around it; each named with its
    parentheses, not to be taken for the operation of the same name above)."""
    if not rows:
        return []
    head = ("method", "calls", "total", "p50", "p99", "mean")
    body = [(f"{name}()", str(n), _ms(t), _us(t50), _us(t99), _us(t / n))
            for name, n, t, t50, t99 in sorted(rows, key=lambda r: -r[2])]
    widths = [max(len(r[i]) for r in [head, *body]) for i in range(len(head))]
    fmt = lambda r: "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
    return ["the class's methods as the server called them:", fmt(head)] + [fmt(r) for r in body]


def report():
    """Print the table on stderr (the log file with --log-file), if --stats asked for it and
    the server ran here."""
    if os.environ.get("LDPFUSE_STATS") != "1":
        return
    mod = sys.modules.get("ldpfuse_py._embedded")
    if mod is None:
        lines = ["ldpfuse-run --stats: no call reached the launcher's server (in the embedded "
                 "mode each process calls the class itself)"]
    else:
        lines = table(mod.server_stats()) + methods_table(mod.method_stats())
    text = "\n".join(lines) + "\n"
    log = os.environ.get("LDPFUSE_LOG_FILE")
    try:
        if log:
            with open(log, "a") as f:
                f.write(text)
        else:
            os.write(2, text.encode())
    except OSError:
        pass
