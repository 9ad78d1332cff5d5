"""The printed report of ``bench storage-compare``: one table per section, built from its document.

The table reads only the ``ckptbench.storage-compare/1`` document (never live objects), so what
is printed and what is saved as JSON always agree; ratios are computed here from the rows.
"""

from __future__ import annotations

from backends import backend_names

from experiments.core.format import Note, Runs, md_table, num, text_table, times
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
    others = [n for n in ran if n != base] if base else []
    head = ["ops", "pattern", "sync", *names, *(f"{n}/{base}" for n in others), "seq/rand"]
    body: list[list[str] | Note] = []
    t51 = [r for r in rows if r.section == "table5.1"]
    index = {(r.ops_requested, r.pattern, r.sync_per_op, r.medium): r for r in t51}
    for size in doc.config.sizes:
        for pattern in ("sequential", "random"):
            for sync in (False, True):
                cells, vals = [], {}
                for n in names:
                    r = index.get((size, pattern, sync, n))
                    if r is None or r.skipped:
                        cells.append("skipped")
                        continue
                    vals[n] = r.ops_per_sec
                    cells.append(_fmt(r.ops_per_sec) + (f"({r.ops:.0e})" if r.capped else ""))
                ratios = [f"{(vals[n] / vals[base]) if n in vals and vals.get(base) else float('nan'):.3f}"
                          for n in others]
                seq_rand = ""
                if pattern == "random":
                    seq = {n: index.get((size, "sequential", sync, n)) for n in names}
                    seq_rand = " ".join(f"{n}:{seq[n].ops_per_sec / vals[n]:.3g}x" for n in vals
                                        if seq[n] and not seq[n].skipped and vals[n])
                body.append([f"{size:.0e}", pattern, "yes" if sync else "no", *cells, *ratios,
                             seq_rand])
    lines += text_table(head, body, align="rll" + "r" * (len(names) + len(others)) + "l")

    # write-heavy
    wh = [r for r in rows if r.section == "write-heavy"]
    lines += ["", "write-heavy (90% update/10% read, 1 KB, 1,000 PEs, durability=sync): ops/s, "
              "p50/p99 µs; ratio indexed_fs/default_fs (thesis on NFS: 4.85x)"]
    body = []
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
            body.append([n, str(t), cell["default_fs"], cell["indexed_fs"], ratio])
    lines += text_table(["medium", "threads", "default_fs", "indexed_fs", "idx/def"], body,
                        align="lrrrr")

    # recovery
    rec = [r for r in rows if r.section == "recovery"]
    if rec:
        lines += ["", f"recovery: indexed_fs open time, {rec[0].keys:,} keys of 40 bytes (ms)"]
        lines += text_table(
            ["medium", "after clean close", "after crash", "crash/clean"],
            [Note((r.medium,), f"skipped: {r.skipped}") if r.skipped else
             [r.medium, f"{r.open_after_clean_ms:.1f}", f"{r.open_after_crash_ms:.1f}",
              f"{r.open_after_crash_ms / r.open_after_clean_ms if r.open_after_clean_ms else 0:.1f}x"]
             for r in rec], align="lrrr")

    # rpc
    rpc = [r for r in rows if r.section == "rpc"]
    lines += ["", "RPC cost: round trips per operation (NFS: ONC RPC calls counted by a loopback "
              "proxy; HDFS: WebHDFS HTTP requests to NameNode and DataNode, counted by the client)"]
    if not rpc:
        lines.append("  no NFS or HDFS medium")
    lines += text_table(
        ["medium", "operation", "per op", "unit", "ops/s"],
        [Note((r.medium, r.operation), f"skipped: {r.skipped}") if r.skipped else
         [r.medium, r.operation, f"{r.rpcs_per_op:.2f}", "HTTP/op" if r.kind == "hdfs" else "RPCs/op",
          f"({r.ops_per_sec:,.0f} ops/s, {r.ops} ops)"] for r in rpc],
        align="llrll", indent="  ", header=False) if rpc else []
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
