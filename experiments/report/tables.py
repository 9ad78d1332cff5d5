"""Human tables of result documents: what ``compare``, ``sweep`` and the thesis experiments print.

Each table is built from the same JSON document that is written beside it
(:mod:`experiments.core.results`), so the printed table and the saved data never disagree.
"""

from __future__ import annotations

from experiments.core.results import Compare, Ratio, Sweep


def compare_table(doc: Compare) -> list[str]:
    """Throughput, p50/p99 per op, and the first backend's throughput over each one's — the
    convention of the ``[RATIO]`` lines below it, and with rounds the same figure: the median of
    each round's ratio (:func:`~experiments.core.compare.compare_ratios`), not a ratio of medians."""
    ran = [e for e in doc.results if not e.skipped]
    op_names = sorted({n for e in ran for n in e.ran()})
    first = ran[0].backend if ran else ""
    head = f"{'backend':<12} {'ops/s':>10} {'first/this':>10}"
    for n in op_names:
        head += f" {n + ' p50':>14} {n + ' p99':>14}"
    lines = [head]
    medians = {r.over: r.median for r in doc.ratios or []}
    for e in doc.results:
        if e.skipped:
            lines.append(f"{e.backend:<12} skipped: {e.skipped}")
            continue
        ratio = 1.0 if e.backend == first else medians.get(
            e.backend, ran[0].throughput_ops_sec / e.throughput_ops_sec if e.throughput_ops_sec else 0.0)
        row = f"{e.backend:<12} {e.throughput_ops_sec:>10.1f} {ratio:>9.3g}x"
        for n in op_names:
            s = e.ran().get(n)
            row += (f" {s.p50_us:>11}us {s.p99_us:>11}us" if s else f" {'-':>14} {'-':>14}")
        lines.append(row)
    if len(ran) > 1:
        lines.append(f"first/this: {first}'s throughput over each backend's"
                     + (" (the median of each round's ratio, as [RATIO])" if doc.ratios else ""))
    return lines


def sweep_table(doc: Sweep) -> list[str]:
    """One row per sweep point: backend, target/threads, throughput, mean/p50/p99 latency
    (and the round, for ``--rounds``)."""
    rounds = any(e.round is not None for e in doc.results)
    lines = [("round " if rounds else "")
             + f"{'backend':<12} {'target':>8} {'threads':>7} {'ops/s':>10} {'mean us':>10} "
             f"{'p50 us':>8} {'p99 us':>8} {'int.mean us':>12} {'int.p99 us':>11}"]
    for e in doc.results:
        p = e.params
        target = f"{p.target:.0f}" if p.target else "-"
        threads = p.threads if p.threads is not None else 1
        head = f"{e.round if e.round is not None else '':>5} " if rounds else ""
        if e.skipped:
            lines.append(f"{head}{e.backend:<12} {target:>8} {threads:>7} skipped: {e.skipped}")
            continue
        o, i = e.overall, e.intended
        lines.append(f"{head}{e.backend:<12} {target:>8} {threads:>7} "
                     f"{e.throughput_ops_sec:>10.1f} {o.mean_us or 0:>10.1f} "
                     f"{o.p50_us or 0:>8} {o.p99_us or 0:>8}"
                     + (f" {i.mean_us:>12.1f} {i.p99_us:>11}" if i and i.count else ""))
    return lines


def ratio_lines(ratios: list[Ratio]) -> list[str]:
    """``[RATIO], <what>, <median>`` (and each round's ratio when there were several)."""
    lines = []
    for r in ratios:
        line = f"[RATIO], {r.what}, {r.median:.2f}"
        if len(r.rounds) > 1:
            line += f", median of {len(r.rounds)} rounds: " + " ".join(
                f"{x:.2f}" for x in r.rounds)
        lines.append(line)
    return lines
