"""The printed report of ``bench storage-compare``: one table per section, built from its document.

The table reads only the ``ckptbench.storage-compare/1`` document (never live objects), so what
is printed and what is saved as JSON always agree; ratios are computed here from the rows.
"""

from __future__ import annotations

from backends import backend_names

from experiments.core.format import Runs, md_table, num, times
from experiments.storage.compare_result import StorageCompare


def _fmt(v: float | None) -> str:
    if v is None:
        return "-"
    return f"{v:,.0f}" if v >= 10 else f"{v:.2f}"


def table_lines(doc: StorageCompare) -> list[str]:
    """The printed report: one table per section, ratios included; skipped media with why."""
    rows, media = doc.rows, doc.media
    ran = [m.name for m in media if not m.skipped]
    names = [m.name for m in media]
    base = ran[0] if ran else None
    lines = ["storage-compare: media " + ", ".join(
        f"{m.name}={m.location or '-'}" for m in media)]
    for m in media:
        if m.skipped:
            lines.append(f"  SKIPPED {m.name}: {m.skipped}")

    # Table 5.1
    lines += ["", "Table 5.1: 10-byte writes into one file, ops/s (ops run/requested; "
              f"per-op-durable runs capped at {doc.config.sync_ops:,})"]
    head = f"{'ops':>11} {'pattern':<10} {'sync':<4} " + " ".join(f"{n:>18}" for n in names)
    if base:
        head += "  " + " ".join(f"{n + '/' + base:>12}" for n in ran if n != base)
    head += "  seq/rand"
    lines.append(head)
    t51 = [r for r in rows if r.section == "table5.1"]
    index = {(r.ops_requested, r.pattern, r.sync_per_op, r.medium): r for r in t51}
    for size in doc.config.sizes:
        for pattern in ("sequential", "random"):
            for sync in (False, True):
                cells, vals = [], {}
                for n in names:
                    r = index.get((size, pattern, sync, n))
                    if r is None or r.skipped:
                        cells.append(f"{'skipped':>18}")
                        continue
                    vals[n] = r.ops_per_sec
                    mark = f"({r.ops:.0e})" if r.capped else ""
                    cells.append(f"{_fmt(r.ops_per_sec) + mark:>18}")
                line = f"{size:>11.0e} {pattern:<10} {'yes' if sync else 'no':<4} " + " ".join(cells)
                if base:
                    line += "  " + " ".join(
                        f"{(vals[n] / vals[base]) if n in vals and vals.get(base) else float('nan'):>12.3f}"
                        for n in ran if n != base)
                if pattern == "random":
                    seq = {n: index.get((size, "sequential", sync, n)) for n in names}
                    ratios = [f"{n}:{seq[n].ops_per_sec / vals[n]:.3g}x" for n in vals
                              if seq[n] and not seq[n].skipped and vals[n]]
                    line += "  " + " ".join(ratios)
                lines.append(line)

    # write-heavy
    wh = [r for r in rows if r.section == "write-heavy"]
    lines += ["", "write-heavy (90% update/10% read, 1 KB, 1,000 PEs, durability=sync): ops/s, "
              "p50/p99 µs; ratio indexed_fs/default_fs (thesis on NFS: 4.85x)"]
    lines.append(f"{'medium':<10} {'threads':>7} {'default_fs':>28} {'indexed_fs':>28} {'idx/def':>8}")
    for n in names:
        for t in doc.config.threads:
            cell, tp = {}, {}
            for b in backend_names(kind="file"):
                r = next((r for r in wh if r.medium == n and r.threads == t
                          and r.backend == b), None)
                if r is None or r.skipped:
                    cell[b] = "skipped"
                    continue
                o = r.overall
                tp[b] = r.throughput_ops_sec
                cell[b] = f"{_fmt(tp[b])} ({_fmt(o.p50_us)}/{_fmt(o.p99_us)})"
            ratio = (f"{tp['indexed_fs'] / tp['default_fs']:.2f}x"
                     if tp.get("default_fs") and "indexed_fs" in tp else "-")
            lines.append(f"{n:<10} {t:>7} {cell['default_fs']:>28} {cell['indexed_fs']:>28} "
                         f"{ratio:>8}")

    # recovery
    rec = [r for r in rows if r.section == "recovery"]
    if rec:
        lines += ["", f"recovery: indexed_fs open time, {rec[0].keys:,} keys of 40 bytes (ms)"]
        lines.append(f"{'medium':<10} {'after clean close':>18} {'after crash':>12} {'crash/clean':>12}")
        for r in rec:
            if r.skipped:
                lines.append(f"{r.medium:<10} skipped: {r.skipped}")
                continue
            c, k = r.open_after_clean_ms, r.open_after_crash_ms
            lines.append(f"{r.medium:<10} {c:>18.1f} {k:>12.1f} {k / c if c else 0:>11.1f}x")

    # rpc
    rpc = [r for r in rows if r.section == "rpc"]
    lines += ["", "RPC cost: round trips per operation (NFS: ONC RPC calls counted by a loopback "
              "proxy; HDFS: WebHDFS HTTP requests to NameNode and DataNode, counted by the client)"]
    if not rpc:
        lines.append("  no NFS or HDFS medium")
    for r in rpc:
        if r.skipped:
            lines.append(f"  {r.medium:<8} {r.operation:<45} skipped: {r.skipped}")
        else:
            unit = "HTTP/op" if r.kind == "hdfs" else "RPCs/op"
            lines.append(f"  {r.medium:<8} {r.operation:<45} {r.rpcs_per_op:>6.2f} "
                         f"{unit}  ({r.ops_per_sec:,.0f} ops/s, {r.ops} ops)")
    lines += ["", doc.thesis]
    return lines


# ------------------------------------------------------------------------------- bench reproduce
def storage_compare(runs: Runs) -> list[str]:
    (doc,) = (StorageCompare.from_json(d) for d in runs.values())
    media = [m.name for m in doc.media]
    rows_by: dict[str, dict[str, str]] = {}

    def put(measure: str, medium: str, value: str) -> None:
        rows_by.setdefault(measure, {})[medium] = value

    size = max(doc.config.sizes)
    for r in doc.rows:
        m, sec = r.medium, r.section
        if sec == "table5.1" and r.ops_requested == size:
            what = (f"Table 5.1 {r.pattern}{', sync each' if r.sync_per_op else ''} "
                    f"({num(size)} x 10 B), ops/s")
            put(what, m, "skipped" if r.skipped else
                num(r.ops_per_sec) + (f" ({num(r.ops)} run)" if r.capped else ""))
        elif sec == "write-heavy":
            put(f"write-heavy {r.backend} x{r.threads}, ops/s", m,
                "skipped" if r.skipped else num(r.throughput_ops_sec))
        elif sec == "recovery":
            for label in ("clean", "crash"):
                put(f"indexed_fs open after {'clean close' if label == 'clean' else 'crash'} "
                    f"({num(r.keys)} keys), ms", m,
                    "skipped" if r.skipped else num(getattr(r, f"open_after_{label}_ms")))
        elif sec == "rpc":
            put(f"RPCs per {r.operation}", m,
                "skipped" if r.skipped else f"{r.rpcs_per_op:.2f}")
    for key, value in doc.summary.items():
        _, medium, threads = key.split("/")
        put(f"write-heavy indexed_fs/default_fs {threads}", medium, times(value))
    return md_table(["measure"] + media,
                    [[what] + [cells.get(m, "-") for m in media] for what, cells in rows_by.items()])


def storage_compare_headline(runs: Runs) -> str:
    (doc,) = (StorageCompare.from_json(d) for d in runs.values())
    most = f"x{max(doc.config.threads)}"
    parts = [f"{k.split('/')[1]} {times(v)}" for k, v in doc.summary.items()
             if k.split("/")[2] == most]
    return f"write-heavy indexed_fs/default_fs with {most[1:]} threads: " + ", ".join(parts)
