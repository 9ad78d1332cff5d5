"""The one owner of matplotlib: every chart ckptbench draws is drawn here.

Charts are drawn from the JSON documents of :mod:`experiments.core.results` (never from live objects),
so ``bench report`` can re-plot saved results exactly as the run that made them did.  The Agg
backend is selected on first use: no display is needed.
"""

from __future__ import annotations

import statistics
from typing import Any

from experiments.core.results import Compare, Entry, OpStats, Result, Sweep, ensure_parent


def pyplot():
    """matplotlib.pyplot on the Agg backend (imported on first use: it is slow to import)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: str, dpi: int = 110, grid_y: bool = False) -> None:
    """Lay ``fig`` out, write it to ``path`` (its directory made) and free it; ``grid_y`` puts a
    light horizontal grid on every panel first (the bar charts)."""
    if grid_y:
        for a in fig.axes:
            a.grid(True, alpha=0.3, axis="y")
    fig.tight_layout()
    ensure_parent(path)
    fig.savefig(path, dpi=dpi)
    pyplot().close(fig)


#: how many decades values must span before an axis goes logarithmic
LOG_DECADES = 2.0


def value_axis(ax: Any, values: list[float], label: str) -> None:
    """A bar chart's value axis: linear from zero, so bar heights compare as the numbers do;
    logarithmic, and labelled so, only where the values span :data:`LOG_DECADES` decades or
    more (then a zero is written on its bar's place, which a log axis cannot draw)."""
    positive = [v for v in values if v and v > 0]
    if positive and max(positive) / min(positive) >= 10 ** LOG_DECADES:
        ax.set_yscale("log")
        ax.set_ylabel(f"{label}, log scale")
        return
    ax.set_ylim(bottom=0)
    ax.set_ylabel(label)


def plot_compare(doc: Compare, path: str) -> None:
    """Bar chart: throughput per backend (left, linear from zero), p50/p99 of every op per
    backend (right; log only when they span decades, :func:`value_axis`)."""
    plt = pyplot()
    ran = [e for e in doc.results if not e.skipped]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4.2))
    names = [e.backend for e in ran]
    ax1.bar(names, [e.throughput_ops_sec for e in ran], color="tab:blue")
    ax1.set_ylim(bottom=0)
    ax1.set_ylabel("throughput (ops/s)")
    ax1.set_title(f"{doc.workload}: throughput")
    ops = sorted({n for e in ran for n in e.ran()})
    width = 0.8 / max(1, 2 * len(ops))
    heights = []
    for i, op in enumerate(ops):
        for j, (pct, hatch) in enumerate((("p50_us", ""), ("p99_us", "//"))):
            xs = [k + (2 * i + j) * width - 0.4 + width / 2 for k in range(len(ran))]
            ys = [getattr(e.ran().get(op) or OpStats(), pct) or 0 for e in ran]
            ax2.bar(xs, ys, width, hatch=hatch, label=f"{op} {pct[:3]}")
            heights += list(zip(xs, ys))
    ax2.set_xticks(range(len(ran)), names)
    value_axis(ax2, [y for _, y in heights], "latency (us)")
    if ax2.get_yscale() == "log":
        for x, y in heights:
            if not y:
                ax2.annotate("0", (x, 1), ha="center", va="bottom", fontsize=7)
    ax2.set_title("latency per op")
    ax2.legend(fontsize=7)
    skipped = [f"{e.backend}: skipped" for e in doc.results if e.skipped]
    if skipped:
        fig.text(0.01, 0.01, "; ".join(skipped), fontsize=7)
    _save(fig, path)


def plot_sweep(doc: Sweep, path: str) -> None:
    """Latency vs throughput, one curve per backend (the thesis' Fig 4.1 shape).  Target-rate
    sweeps plot the intended latency (queueing included), thread sweeps the service latency."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    by_backend: dict[str, list[Entry]] = {}
    for e in doc.results:
        by_backend.setdefault(e.backend, []).append(e)
    for backend, entries in by_backend.items():
        cells: dict[tuple, list[tuple[float, float]]] = {}  # one point per params (--rounds: medians)
        tail: dict[tuple, list[float]] = {}  # the same points' p99
        for e in entries:
            if e.skipped:
                continue
            lat = e.intended if e.intended and e.intended.count else e.overall
            if lat is not None and lat.mean_us is not None:
                cells.setdefault((e.params.target, e.params.threads), []).append(
                    (e.throughput_ops_sec, lat.mean_us / 1000.0))
                tail.setdefault((e.params.target, e.params.threads), []).append((lat.p99_us or 0) / 1000.0)
        pts = [(statistics.median(x for x, _ in c), statistics.median(y for _, y in c), params)
               for params, c in cells.items()]
        if pts:
            line, = ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"{backend} mean")
            ax.plot([p[0] for p in pts], [statistics.median(tail[p[2]]) for p in pts], marker="^",
                    linestyle="--", color=line.get_color(), alpha=0.7, label=f"{backend} p99")
            for x, y, (_, threads) in pts:  # which setting made each point
                if threads is not None:
                    ax.annotate(f"{threads}t", (x, y), textcoords="offset points", xytext=(4, 4), fontsize=7)
        else:
            ax.plot([], [], label=f"{backend} (skipped)")
    ax.set_xlabel("throughput (ops/s)")
    ax.set_ylabel("latency (ms): mean, and p99 dashed; NT = N threads")
    ax.set_title(f"{doc.workload}: latency vs throughput")
    ax.grid(True, alpha=0.3)
    ax.legend()
    _save(fig, path)


def plot_results(docs: list[Result | Compare | Sweep], path: str) -> None:
    """Re-plot saved results: sweeps as curves, compares as bars, single runs as one compare."""
    if all(isinstance(d, Sweep) for d in docs):
        plot_sweep(Sweep(workload=docs[0].workload,
                         results=[e for d in docs for e in d.results]), path)
        return
    entries: list[Entry] = []
    for d in docs:
        if isinstance(d, (Compare, Sweep)):
            entries += d.results
        else:
            entries.append(Entry(d.backend, throughput_ops_sec=d.run.throughput_ops_sec,
                                 phases={"run": d.run}))
    plot_compare(Compare(workload=docs[0].workload, results=entries), path)


def plot_spark_matrix(rows: list[Any], path: str) -> None:
    """Three panels: throughput, checkpoint time, recovery time — one bar per combination that
    ran (its median), with the range over its rounds as a whisker when it ran more than once.
    ``rows`` are :class:`experiments.spark.matrix_result.Row` (a floor above: not imported)."""
    plt = pyplot()
    rows = [r for r in rows if r.throughput is not None]  # skipped rows have no figures
    labels = [r.protocol if r.backend == "-" else f"{r.protocol}\n{r.backend}" for r in rows]
    fig, axes = plt.subplots(1, 3, figsize=(max(10, 1.4 * len(rows) * 1.5), 4.5))
    for ax, key, title in zip(axes, ("throughput", "checkpoint_ms", "recovery_ms"),
                              ("Throughput (events/s)", "Checkpoint time (ms)", "Recovery time (ms)")):
        values = [getattr(r, key) for r in rows]
        spreads = [r.spread(key) for r in rows]
        err = None
        if any(s and len(s.rounds) > 1 for s in spreads):
            err = [[v - (s.min if s else v) for v, s in zip(values, spreads)],
                   [(s.max if s else v) - v for v, s in zip(values, spreads)]]
        ax.bar(range(len(rows)), values, yerr=err, capsize=3, color="tab:blue")
        ax.set_xticks(range(len(rows)), labels, rotation=60, ha="right", fontsize=7)
        ax.set_ylim(bottom=0)
        ax.set_title(title)
        if not any(values):  # an empty panel says why, instead of a meaningless axis
            ax.set_ylim(0, 1)
            ax.set_yticks([])
            ax.text(0.5, 0.5, "none measured" + (" (give --fail-at)" if key == "recovery_ms" else ""),
                    ha="center", transform=ax.transAxes)
    _save(fig, path)


#: the ``[SPARK]`` recovery-phase lines, in the order they happen, and their colours
RECOVERY_PHASES = (("Recovery.Detect(ms)", "detect", "tab:gray"), ("Recovery.Load(ms)", "load", "tab:blue"),
                   ("Recovery.Restore(ms)", "restore", "tab:green"), ("Recovery.Replay(ms)", "replay", "tab:orange"),
                   ("Recovery.CatchUp(ms)", "catch-up", "tab:red"))


def plot_recovery_phases(rows: list[Any], path: str) -> None:
    """Recovery time by phase: one stacked bar per protocol x backend (rows of a ``bench
    spark-matrix`` document, :class:`experiments.spark.matrix_result.Row`: each with
    ``metrics`` holding the ``Recovery.*`` means), detect at the bottom, catch-up on top; the
    bar's height is ``RecoveryTime(ms)``."""
    plt = pyplot()
    rows = [r for r in rows if (r.metrics or {}).get("RecoveryTime(ms)")]  # recovered at least once
    labels = [r.protocol if (r.backend or "-") == "-" else f"{r.protocol}\n{r.backend}" for r in rows]
    fig, ax = plt.subplots(figsize=(max(6, 1.1 * len(rows) + 2), 4.5))
    bottom = [0.0] * len(rows)
    for key, name, colour in RECOVERY_PHASES:
        values = [float(r.metrics.get(key) or 0) for r in rows]
        ax.bar(range(len(rows)), values, bottom=bottom, color=colour, label=name)
        bottom = [b + v for b, v in zip(bottom, values)]
    ax.set_xticks(range(len(rows)), labels, rotation=45, ha="right", fontsize=8)
    ax.set_ylabel("recovery time (ms, mean per episode)")
    ax.set_title("Recovery time by phase")
    ax.legend(fontsize=8)
    if not rows:
        ax.text(0.5, 0.5, "no run recovered from a failure (give --fail-at)", ha="center", transform=ax.transAxes)
    _save(fig, path)


def _line_chart(path: str, draw: Any) -> None:
    """One 7x4.5 axes chart with a light grid: the thesis figures' common frame."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    draw(ax)
    ax.grid(True, alpha=0.3)
    _save(fig, path)


def plot_fig42(doc: Any, path: str) -> None:
    """Thesis Fig 4.2: indexed_fs open (index rebuild) time against the number of PEs, after a
    crash and after a clean close, with the thesis' bound for a million PEs as a line.  ``doc``
    is an :class:`experiments.storage.thesis_result.Thesis` (a floor above: not imported)."""
    rows = doc.rows

    def draw(ax: Any) -> None:
        xs = [r.pes for r in rows]
        ax.plot(xs, [r.open_after_crash_ms for r in rows], marker="o", label="after crash")
        ax.plot(xs, [r.open_after_clean_ms for r in rows], marker="s", label="after clean close")
        ax.axhline(250, color="grey", ls="--", label="thesis: 10^6 PEs < 250 ms")
        ax.set_xscale("log")
        ax.set_xlabel("number of PEs (keys, ~40-byte values)")
        ax.set_ylabel("indexed_fs open / index rebuild (ms)")
        ax.set_title("Fig 4.2: index rebuild time")
        ax.legend()

    _line_chart(path, draw)


def plot_fig45(doc: Any, path: str) -> None:
    """Thesis Figs 4.5/4.6: mean checkpoint write and lazy recovery read latency per backend
    that ran (log scale: file and server backends differ by orders of magnitude)."""
    ran = [r for r in doc.rows if not r.skipped]
    spec = doc.spec

    def draw(ax: Any) -> None:
        xs = range(len(ran))
        ax.bar([x - 0.2 for x in xs], [r.write.mean_us / 1000 for r in ran], 0.4,
               label="write (Fig 4.5)")
        ax.bar([x + 0.2 for x in xs], [r.read.mean_us / 1000 for r in ran], 0.4,
               label="lazy recovery read (Fig 4.6)")
        ax.set_xticks(list(xs), [r.backend for r in ran])
        ax.set_yscale("log")
        ax.set_ylabel("mean latency (ms, log)")
        ax.set_title(f"Figs 4.5/4.6: word count, {spec.rate:.0f} ev/s, {spec.events} events")
        ax.legend()

    _line_chart(path, draw)


def plot_fig47(doc: Any, path: str) -> None:
    """Thesis Fig 4.7: storage-queue throughput (checkpoints/s) against the number of PEs, one
    curve per backend."""
    rows = doc.rows

    def draw(ax: Any) -> None:
        for backend in dict.fromkeys(r.backend for r in rows):
            pts = [r for r in rows if r.backend == backend]
            ax.plot([r.pes for r in pts], [r.write_rate for r in pts], marker="o",
                    label=backend)
        ax.set_xscale("log")
        ax.set_xlabel("number of PEs")
        ax.set_ylabel("storage-queue throughput (checkpoints/s)")
        ax.set_title(f"Fig 4.7: {doc.events} events at {doc.rate:.0f}/s, "
                     f"storage queue {doc.queue}")
        ax.legend()

    _line_chart(path, draw)


def _grouped_bars(ax: Any, names: list[str], groups: list[Any], value: Any) -> None:
    """One bar per (group, name), the names side by side within each group; ``value(name,
    group)`` is the bar's height (0 for a cell that did not run)."""
    width = 0.8 / max(1, len(names))
    for i, n in enumerate(names):
        ax.bar([x + i * width for x in range(len(groups))], [value(n, g) for g in groups],
               width, label=n)
    ax.set_xticks([x + width * (len(names) - 1) / 2 for x in range(len(groups))])


def plot_storage_compare(doc: Any, path: str) -> None:
    """Four panels of a ``ckptbench.storage-compare/1`` document: Table 5.1 (log ops/s),
    write-heavy ops/s, indexed_fs recovery ms, and RPCs per operation over NFS.  ``doc`` is an
    :class:`experiments.storage.compare_result.StorageCompare` (a floor above: not imported)."""
    plt = pyplot()
    rows = doc.rows
    names = [m.name for m in doc.media]
    fig, axes = plt.subplots(2, 2, figsize=(13, 9))

    def find(section: str, medium: str, **match: Any) -> Any:
        return next((r for r in rows if r.section == section and r.medium == medium
                     and all(getattr(r, k) == v for k, v in match.items())), None)

    ax = axes[0][0]
    cases = list(dict.fromkeys((r.ops_requested, r.pattern, r.sync_per_op)
                               for r in rows if r.section == "table5.1"))

    def t51(n: str, c: tuple[int, str, bool]) -> float:
        r = find("table5.1", n, ops_requested=c[0], pattern=c[1], sync_per_op=c[2])
        return r.ops_per_sec if r and not r.skipped else 0

    _grouped_bars(ax, names, cases, t51)
    ax.set_xticklabels([f"{s:.0e}\n{p[:3]}{' sync' if y else ''}" for s, p, y in cases], fontsize=7)
    ax.set_yscale("log")
    ax.set_ylabel("ops/s (log)")
    ax.set_title("Table 5.1: 10-byte writes into one file")
    ax.legend(fontsize=8)

    ax = axes[0][1]
    backends = list(dict.fromkeys(r.backend for r in rows if r.section == "write-heavy"))
    groups = [(b, t) for t in doc.config.threads for b in backends]

    def wh(n: str, g: tuple[str, int]) -> float:
        r = find("write-heavy", n, backend=g[0], threads=g[1])
        return r.throughput_ops_sec if r and not r.skipped else 0

    _grouped_bars(ax, names, groups, wh)
    ax.set_xticklabels([f"{b}\nx{t}" for b, t in groups], fontsize=8)
    ax.set_ylabel("ops/s")
    ax.set_title("write-heavy (durability=sync)")
    ax.legend(fontsize=8)

    ax = axes[1][0]
    rec = [r for r in rows if r.section == "recovery" and not r.skipped]
    xs = range(len(rec))
    ax.bar([x - 0.2 for x in xs], [r.open_after_clean_ms for r in rec], 0.4,
           label="after clean close")
    ax.bar([x + 0.2 for x in xs], [r.open_after_crash_ms for r in rec], 0.4, label="after crash")
    ax.set_xticks(list(xs))
    ax.set_xticklabels([r.medium for r in rec])
    ax.set_ylabel("indexed_fs open (ms)")
    ax.set_title(f"recovery ({rec[0].keys:,} keys)" if rec else "recovery (no medium ran)")
    ax.legend(fontsize=8)

    ax = axes[1][1]
    rpc = [r for r in rows if r.section == "rpc" and not r.skipped]
    ax.bar([f"{r.medium}\n{r.case}" for r in rpc], [r.rpcs_per_op for r in rpc])
    ax.set_ylabel("RPC calls per operation")
    ax.set_title("RPC cost over NFS" if rpc else "RPC cost over NFS (no NFS medium ran)")

    _save(fig, path, dpi=100, grid_y=True)


def plot_checkmate(doc: Any, path: str) -> None:
    """Four panels of a ``ckptbench.checkmate/1`` document: throughput relative to no checkpoints
    and recovery time per query (uniform input), p50 latency uniform against skewed, and the cyclic
    query's useless checkpoints and undone micro-batches (uncoordinated against cic).  ``doc`` is
    an :class:`experiments.spark.checkmate.Checkmate` (a floor above: not imported)."""
    if getattr(doc, "part", "uniform") == "skew":
        plot_checkmate_skew(doc, path)
        return
    if getattr(doc, "part", "uniform") == "paired":
        plot_checkmate_paired(doc, path)
        return
    plt = pyplot()
    rows = doc.rows
    protocols = [p for p in ("none", "coordinated", "uncoordinated", "cic") if any(r.protocol == p for r in rows)]
    queries = [q for q in ("q1", "q3", "q8", "q12") if any(r.query == q for r in rows)]

    def cell(q: str, skew: str, p: str, key: str) -> float:
        r = next((r for r in rows if (r.query, r.skew, r.protocol) == (q, skew, p)), None)
        return float(getattr(r, key) or 0) if r else 0.0

    fig, axes = plt.subplots(2, 2, figsize=(13, 9))
    ax = axes[0][0]
    _grouped_bars(ax, protocols, queries, lambda p, q: cell(q, "uniform", p, "throughput_vs_none"))
    ax.set_xticklabels(queries)
    ax.set_ylabel("throughput × none")
    ax.set_title("uniform input: throughput relative to no checkpoints (CheckMate Fig 7)")
    ax.legend(fontsize=8)

    ax = axes[0][1]
    _grouped_bars(ax, protocols, queries, lambda p, q: cell(q, "uniform", p, "recovery_ms"))
    ax.set_xticklabels(queries)
    ax.set_ylabel("recovery time (ms)")
    ax.set_title("uniform input: recovery time after one failure (none: state lost)")
    ax.legend(fontsize=8)

    ax = axes[1][0]
    _grouped_bars(ax, protocols, queries, lambda p, q: cell(q, "uniform", p, "latency_p50_ms"))
    ax.set_xticklabels(queries)
    ax.set_ylabel("p50 latency (ms)")
    ax.set_title("uniform input: p50 latency over the run (failure included)")
    ax.legend(fontsize=8)

    ax = axes[1][1]
    cyc = doc.cyclic
    sizes = list(cyc)
    names = ["uncoordinated", "cic"]
    _grouped_bars(ax, [f"{p} useless %" for p in names] + [f"{p} batches undone" for p in names],
                  sizes, lambda label, n: getattr(cyc[n][label.split()[0]], "useless_pct" if "useless" in label
                                                                   else "rollback_batches"))
    ax.set_xticklabels([f"{n} instances" for n in sizes])
    ax.set_title("cyclic query, emulated: rollback after a failure (Table IV)")
    ax.legend(fontsize=8)

    _save(fig, path, dpi=100, grid_y=True)


def plot_checkmate_paired(doc: Any, path: str) -> None:
    """CheckMate's first headline from a paired-part ``ckptbench.checkmate/1`` document: left,
    coordinated's MST over none's per query, side by side over the rounds against one search
    each (the band: the search's precision); right, the share of rounds each protocol sustained
    at each rate."""
    plt = pyplot()
    queries = [q for q in ("q1", "q3", "q8", "q12") if q in doc.paired]
    protocols = [p for p in ("none", "coordinated") if any(p in doc.paired[q].probes for q in queries)]

    def ratio(how: str, q: str) -> float:
        if how == "side by side":
            found = doc.paired[q]
            a, b = found.mst("coordinated"), found.mst("none")
        else:
            by = doc.mst.get(q, {})
            a, b = (getattr(by.get(p), "mst", None) for p in ("coordinated", "none"))
        return a / b if a and b else 0.0
    fig, axes = plt.subplots(1, 2, figsize=(13, 5))
    ax = axes[0]
    hows = ["side by side"] + (["one search each"] if doc.mst else [])
    _grouped_bars(ax, hows, queries, ratio)
    ax.set_xticklabels(queries)
    precision = doc.sizes.mst.precision if doc.sizes.mst else 0.1
    ax.axhspan(1 / (1 + precision), 1 + precision, color="grey", alpha=0.15, label="the search's precision")
    ax.axhline(1.0, color="black", linewidth=0.8)
    ax.set_ylabel("coordinated's MST × none's")
    ax.set_title("coordinated ≈ none? (CheckMate Fig 7)")
    ax.legend(fontsize=8)
    ax = axes[1]
    cells = [(q, rate) for q in queries for rate in doc.paired[q].rates]

    def share(p: str, cell: tuple[str, float]) -> float:
        ok, judged = doc.paired[cell[0]].held(p, cell[1])
        return ok / judged if judged else 0.0
    _grouped_bars(ax, protocols, cells, share)
    ax.set_xticklabels([f"{q}\n{rate / 1e3:,.0f}k" for q, rate in cells], fontsize=8)
    ax.set_ylabel("rounds sustained")
    ax.set_ylim(0, 1.05)
    ax.set_title("each rate, the protocols in turn (events/s)")
    ax.legend(fontsize=8)
    _save(fig, path, dpi=100, grid_y=True)


def plot_checkmate_skew(doc: Any, path: str) -> None:
    """CheckMate's Fig 12 from a skew-part ``ckptbench.checkmate/1`` document: p50 latency (top)
    and average checkpoint time (bottom) per query and hot-item ratio, one column per load (a
    share of each protocol's uniform MST), log axes (the paper's values span decades)."""
    plt = pyplot()
    rows = doc.rows
    protocols = [p for p in ("none", "coordinated", "uncoordinated", "cic") if any(r.protocol == p for r in rows)]
    queries = [q for q in ("q1", "q3", "q8", "q12") if any(r.query == q for r in rows)]
    loads = sorted({r.load for r in rows}, key=lambda v: -1 if v is None else v)
    groups = [(q, s) for q in queries for s in doc.skews]
    fig, axes = plt.subplots(2, len(loads), figsize=(6.5 * len(loads), 9), squeeze=False)
    for col, load in enumerate(loads):
        for row, (key, label) in enumerate((("latency_p50_ms", "p50 latency (ms)"),
                                            ("checkpoint_ms", "average checkpoint time (ms)"))):
            ax = axes[row][col]

            def value(p: str, g: tuple[str, str], key: str = key, load: Any = load) -> float:
                r = next((r for r in rows if (r.query, r.skew, r.load, r.protocol) == (g[0], g[1], load, p)), None)
                return float(getattr(r, key) or 0) if r else 0.0
            _grouped_bars(ax, protocols, groups, value)
            ax.set_xticklabels([f"{q}\n{s}" for q, s in groups], fontsize=8)
            ax.set_yscale("symlog", linthresh=1.0)
            ax.set_ylabel(label)
            at = "unpaced" if load is None else f"{load:.0%} of each protocol's uniform MST"
            ax.set_title(f"skewed input, {at} (CheckMate Fig 12)")
            ax.legend(fontsize=8)
    _save(fig, path, dpi=100, grid_y=True)


def plot_latency_over_time(panels: dict[str, dict[str, Any]], path: str, title: str = "", cols: int = 2) -> None:
    """End-to-end latency per second of event creation as CheckMate's Figs 9-10 draw it: one
    panel per run (``panels``: its label, e.g. the protocol -> the run's ``latency`` section,
    :func:`experiments.spark.job.latency_over_time`), p50 and p99 against the second, the failure
    a black dashed vertical line, its recovery by latency (failure to p50 back) shaded; ``cols``
    panels a row (one a protocol).  Panels share their axes, so protocols compare at a glance; a
    log axis where p99 spans decades."""
    plt = pyplot()
    names = list(panels)
    cols = min(cols, len(names)) or 1
    rows = (len(names) + cols - 1) // cols or 1
    fig, axes = plt.subplots(rows, cols, figsize=(6 * cols, 3.2 * rows), sharex=True, sharey=True, squeeze=False)
    positive = [s[k] for lat in panels.values() for s in lat.get("per_second", []) for k in ("p50_ms", "p99_ms")
                if s[k] > 0]
    log = bool(positive) and max(positive) / min(positive) >= 10 ** LOG_DECADES
    for ax, name in zip(axes.flat, names):
        lat = panels[name]
        series = lat.get("per_second", [])
        x = [s["second"] for s in series]
        ax.plot(x, [s["p50_ms"] for s in series], label="p50", linewidth=1.8)
        ax.plot(x, [s["p99_ms"] for s in series], label="p99", linewidth=1.2)
        for i, f in enumerate(lat.get("failure_s", [])):
            ax.axvline(f, color="black", linestyle="--", linewidth=1, label="failure" if i == 0 else None)
            back = (lat.get("recovery_by_latency_ms") or [None] * (i + 1))[i]
            if back is not None:
                ax.axvspan(f, f + back / 1e3, color="grey", alpha=0.15,
                           label="recovery (p50 back)" if i == 0 else None)
        ax.set_title(f"{name} ({lat.get('rate', 0):,.0f} events/s)", fontsize=10)
        ax.grid(True, alpha=0.3)
        if log:
            ax.set_yscale("log")
    for ax in axes[-1]:
        ax.set_xlabel("second of the run (event creation time)")
    for ax in axes[:, 0]:
        ax.set_ylabel("latency (ms)" + (", log scale" if log else ""))
    for ax in list(axes.flat)[len(names):]:
        ax.set_visible(False)
    axes.flat[0].legend(fontsize=8)
    if title:
        fig.suptitle(title, fontsize=11)
    _save(fig, path, dpi=100)


def plot_stragglers(doc: Any, path: str) -> None:
    """A ``ckptbench.logio-stragglers/2`` document as the paper's Figs 5 and 9 draw it: per
    setting, the overhead over ``none``'s failure-free run with 0 to 3 failures, one bar per
    protocol; and the recovery of one failure by phase beside the others' work in it.  ``doc`` is
    an :class:`experiments.spark.stragglers.Stragglers` (a floor above: not imported)."""
    plt = pyplot()
    rows = doc.rows
    protocols = ["coordinated", "logio"]
    figure = {"straggler_moderate": "Fig 5", "no_straggler_fast": "Fig 9"}
    fig, axes = plt.subplots(1, len(doc.settings) + 1, figsize=(6 * (len(doc.settings) + 1), 4.5))
    for ax, st in zip(axes, doc.settings):
        def overhead(p: str, n: int, name: str = st.name) -> float:
            r = next((r for r in rows if r.setting == name and r.protocol == p and r.failures == n), None)
            return float(r.overhead_pct or 0) if r else 0.0
        _grouped_bars(ax, protocols, [0, 1, 2, 3], overhead)
        ax.set_xticklabels(["normal", "1 failure", "2 failures", "3 failures"])
        ax.set_ylabel("total time over none's failure-free run (%)")
        ax.set_title(f"{figure.get(st.name, st.name)}'s setting: {st.name.replace('_', ' ')}")
        ax.legend(fontsize=8)
    ax = axes[-1]
    phases = [("detect", ("Detect(ms)",)), ("load + restore", ("Load(ms)", "Restore(ms)")),
              ("re-run", ("Replay(ms)",)), ("catch-up", ("CatchUp(ms)",))]
    labels = []
    for st in doc.settings:
        for p in protocols:
            labels.append(f"{p}\n{figure.get(st.name, st.name)}")
    x = list(range(len(labels)))
    bottoms = [0.0] * len(labels)
    for phase, lines in phases:
        heights = []
        for st in doc.settings:
            for p in protocols:
                runs = [r for r in rows if r.setting == st.name and r.protocol == p and r.failures]
                heights.append(sum(sum(r.phase(line) for line in lines) for r in runs) / len(runs) if runs else 0.0)
        ax.bar(x, heights, 0.6, bottom=bottoms, label=phase)
        bottoms = [b + h for b, h in zip(bottoms, heights)]
    others = []
    for st in doc.settings:
        for p in protocols:
            runs = [r for r in rows if r.setting == st.name and r.protocol == p and r.failures]
            others.append(sum(r.phase("OthersTask(ms)") for r in runs) / len(runs) if runs else 0.0)
    ax.scatter(x, others, color="black", marker="_", s=400, zorder=3, label="others' re-run task")
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize=8)
    ax.set_ylabel("ms per failure (mean over the runs with failures)")
    ax.set_title("recovery by phase, and the others' work in it")
    ax.legend(fontsize=8)
    _save(fig, path, dpi=100, grid_y=True)


def plot_advise(doc: Any, path: str) -> None:
    """``bench advise``: expected overhead against checkpoint interval, one curve per protocol x
    backend of the ranking (Young/Daly, :mod:`experiments.spark.advise`), the advised interval marked;
    from a state sweep, one per store x layout at the user's state (:mod:`experiments.spark.advise_state`),
    a row beyond its extrapolation limit labelled as not ranked."""
    from experiments.spark.advise import curve, overhead

    plt = pyplot()
    fig, ax = plt.subplots(figsize=(8, 4.8))
    for a in doc.ranking:
        xs, ys = curve(a, doc.mtbf_s)
        label = f"{a.rank}. {a.name}" if getattr(a, "ranked", True) else f"{a.name} (not ranked)"
        line, = ax.plot(xs, [y * 100 for y in ys], label=label)
        if a.interval_s is not None:
            at = overhead(a.interval_s, a.cost_ms / 1e3, doc.mtbf_s, a.restart_ms / 1e3) + a.per_event
            ax.plot([a.interval_s], [at * 100], "o", color=line.get_color())
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("checkpoint interval (s)")
    ax.set_ylabel("expected overhead (% of run time)")
    ax.set_title(f"MTBF {doc.mtbf_s:g} s: P + C/T + T/(2 MTBF) + R/MTBF (dots: advised interval)")
    ax.grid(True, alpha=0.3, which="both")
    ax.legend(fontsize=8)
    _save(fig, path)


def plot_rows(rows: list[Any], path: str) -> None:
    """Throughput of summary rows (:class:`experiments.report.summary.Row`) as horizontal bars
    on a linear axis from zero, one per row that has a throughput, each labelled with its
    value: the chart ``bench report`` draws for a document without a chart of its own."""
    plt = pyplot()
    rows = [r for r in rows if r.throughput is not None]
    labels = [" ".join(x for x in (r.backend, r.setting) if x) or r.workload for r in rows]
    fig, ax = plt.subplots(figsize=(7, 1.2 + 0.4 * max(1, len(rows))))
    bars = ax.barh(range(len(rows)), [r.throughput for r in rows], color="tab:blue")
    ax.bar_label(bars, [f"{r.throughput:,.0f}" for r in rows], padding=3, fontsize=8)
    ax.set_yticks(range(len(rows)), labels, fontsize=8)
    ax.invert_yaxis()
    ax.set_xlim(left=0)
    units = sorted({r.unit for r in rows if r.unit})
    ax.set_xlabel(f"throughput ({', '.join(units) or 'per s'}, linear from 0)")
    ax.grid(True, alpha=0.3, axis="x")
    _save(fig, path)


def _loglog_panel(ax: Any, doc: Any, against: str, metric: str, title: str, dashed: str | None = None) -> None:
    """One log-log panel of a state sweep: a line per store x layout through its points of
    ``metric`` (and of ``dashed`` in the same colour, dashed), failed and unreported points left
    out (a log axis has no zero)."""
    from experiments.spark.state_sweep_result import SIZE

    import matplotlib

    drawn = False
    # more lines than the default cycle's ten colours: each its own (tab20), no two alike
    palette = matplotlib.colormaps["tab20"].colors if len(doc.lines) > 10 else [None] * len(doc.lines)
    for line, colour in zip(doc.lines, palette):
        pts = [p for p in doc.of(against, line) if p.ok]
        xs = [p.state_bytes / 2 ** 20 if against == SIZE else p.dirty * 100 for p in pts]
        for key, style in ((metric, "-"), (dashed, "--")):
            if key is None:
                continue
            got = [(x, p.value(key)) for x, p in zip(xs, pts) if p.value(key)]
            if got:
                drawn = True
                plotted, = ax.plot(*zip(*got), style, marker="o", markersize=3, color=colour,
                                   label=line if style == "-" else None)
                colour = plotted.get_color()
    from matplotlib.ticker import NullFormatter

    from experiments.spark.state_sweep_result import binary_size, percent

    ax.set_xscale("log")
    ax.set_yscale("log")
    ticks = ([(s / 2 ** 20, binary_size(s)) for s in doc.conditions.sizes] if against == SIZE else
             [(d * 100, percent(d)) for d in sorted({*doc.conditions.dirty, 1.0})])
    if ticks:  # the swept values themselves, not matplotlib's powers of ten
        ax.set_xticks([t for t, _ in ticks], [name for _, name in ticks], fontsize=8)
        ax.xaxis.set_minor_formatter(NullFormatter())
    ax.set_xlabel("live state (log)" if against == SIZE else "hot keys / keys (log)")
    ax.set_title(title + " (log-log)", fontsize=10)
    ax.grid(True, alpha=0.3, which="both")
    if not drawn:
        ax.text(0.5, 0.5, "no point measured", ha="center", transform=ax.transAxes)


def plot_state_sweep(doc: Any, path: str) -> list[str]:
    """``bench state-sweep`` (:class:`experiments.spark.state_sweep_result.StateSweep`): the
    size sweep on log-log axes at ``path`` (checkpoint p50 solid and p99 dashed, recovery time,
    space amplification; one line per store x layout) and, when it ran, the dirty sweep beside
    it at ``<stem>-dirty.png`` (checkpoint p50 / p99 and steady throughput against the share
    of keys hot).  The paths written."""
    from experiments.spark.state_sweep_result import DIRTY, SIZE

    plt = pyplot()
    fig, axes = plt.subplots(1, 3, figsize=(16, 5))
    _loglog_panel(axes[0], doc, SIZE, "CheckpointP50(ms)", "checkpoint p50, p99 dashed (ms)", "CheckpointP99(ms)")
    _loglog_panel(axes[1], doc, SIZE, "RecoveryTime(ms)", "recovery time (ms)")
    _loglog_panel(axes[2], doc, SIZE, "SpaceAmplification", "space amplification")
    axes[0].legend(fontsize=7)
    by = " and ".join(part.split(" (")[0] for part in doc.conditions.protocol.split("; "))
    fig.suptitle(f"{doc.conditions.state_bytes_per_key} bytes of state a key, {by}, one failure a run: "
                 f"cost against state, log-log axes" + (" (--quick)" if doc.quick else ""))
    _save(fig, path)
    written = [path]
    if any(p.sweep == DIRTY for p in doc.points):
        dirty_path = (path[:-4] if path.endswith(".png") else path) + "-dirty.png"
        fig, axes = plt.subplots(1, 2, figsize=(11, 4.5))
        _loglog_panel(axes[0], doc, DIRTY, "CheckpointP50(ms)", "checkpoint p50, p99 dashed (ms)",
                      "CheckpointP99(ms)")
        _loglog_panel(axes[1], doc, DIRTY, "SteadyThroughput(events/sec)", "steady events/s")
        axes[0].legend(fontsize=7)
        size = doc.conditions.dirty_size / 2 ** 20
        fig.suptitle(f"{size:g} MiB of state: cost against the share of keys an interval may dirty, log-log axes"
                     + (" (--quick)" if doc.quick else ""))
        _save(fig, dirty_path)
        written.append(dirty_path)
    return written


def plot_throttle_curve(doc: Any, path: str) -> None:
    """``bench throttle-curve``: checkpoint writes a second and p99 update latency against the
    request rate allowed per prefix, on one prefix and on ``doc.entropy``; the unlimited relay
    and the direct run as horizontal references, and on the throughput panel the most one
    prefix allows (one request an update).  ``doc`` is an
    :class:`experiments.storage.throttle_curve.ThrottleCurve` (a floor above: not imported)."""
    plt = pyplot()
    rates = doc.rates
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.5))
    refs = [(doc.point(None, 1), "unlimited relay", "--"),
            (doc.point(None, 1, relay=False), "direct, no relay", ":")]
    for ax, metric, label in ((axes[0], "throughput", "checkpoint writes/s (updates/s)"),
                              (axes[1], "p99_ms", "p99 update latency (ms)")):
        for entropy, marker in ((1, "o"), (doc.entropy, "s")):
            points = [(r, doc.point(r, entropy)) for r in rates]
            xs = [r for r, p in points if p is not None and not p.skipped]
            ys = [float(getattr(p, metric) or 0) for _, p in points if p is not None and not p.skipped]
            name = "1 prefix" if entropy == 1 else f"prefix_entropy={entropy}"
            ax.plot(xs, ys, marker=marker, label=name)
        for ref, name, style in refs:
            if ref is not None and not ref.skipped:
                ax.axhline(float(getattr(ref, metric) or 0), linestyle=style, color="grey",
                           label=name)
        if metric == "throughput" and rates:
            ax.plot([0, max(rates)], [0, max(rates)], linestyle="-.", color="lightgrey",
                    label="one prefix's limit")
        ax.set_xlim(left=0)
        ax.set_ylim(bottom=0)
        ax.set_xlabel("requests/s allowed per prefix")
        ax.set_ylabel(label)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=8)
    axes[0].set_title(f"{doc.workload} on {doc.backend}, {doc.threads} threads, "
                      f"{doc.retry_mode} retries (at most {doc.max_attempts} attempts)")
    axes[1].set_title("what a throttled write waits (503 SlowDown, then backoff)")
    _save(fig, path)
