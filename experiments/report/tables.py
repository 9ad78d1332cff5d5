"""Human tables of result documents: what ``compare``, ``sweep`` and the thesis experiments print.

Each table is built from the same JSON document that is written beside it
(:mod:`experiments.core.results`), so the printed table and the saved data never disagree.
"""

from __future__ import annotations

from experiments.core.format import Note, text_table
from experiments.core.results import Compare, Ratio, Sweep


def compare_table(doc: Compare) -> list[str]:
    """Throughput, p50/p99 per op, and the first backend's throughput over each one's — the
    convention of the ``[RATIO]`` lines below it, and with rounds the same figure: the median of
    each round's ratio (:func:`~experiments.core.compare.compare_ratios`), not a ratio of medians."""
    ran = [e for e in doc.results if not e.skipped]
    op_names = sorted({n for e in ran for n in e.ran()})
    first = ran[0].backend if ran else ""
    head = ["backend", "ops/s", "first/this"] + [f"{n} {q}" for n in op_names for q in ("p50", "p99")]
    medians = {r.over: r.median for r in doc.ratios or []}
    body: list[list[str] | Note] = []
    for e in doc.results:
        if e.skipped:
            body.append(Note((e.backend,), f"skipped: {e.skipped}"))
            continue
        ratio = 1.0 if e.backend == first else medians.get(
            e.backend, ran[0].throughput_ops_sec / e.throughput_ops_sec if e.throughput_ops_sec else 0.0)
        row = [e.backend, f"{e.throughput_ops_sec:.1f}", f"{ratio:.3g}x"]
        for n in op_names:
            s = e.ran().get(n)
            row += [f"{s.p50_us}us", f"{s.p99_us}us"] if s else ["-", "-"]
        body.append(row)
    lines = text_table(head, body, align="l" + "r" * (len(head) - 1))
    if len(ran) > 1:
        lines.append(f"first/this: {first}'s throughput over each backend's"
                     + (" (the median of each round's ratio, as [RATIO])" if doc.ratios else ""))
    return lines


def sweep_table(doc: Sweep) -> list[str]:
    """One row per sweep point: backend, target/threads, throughput, mean/p50/p99 latency
    (and the round, for ``--rounds``)."""
    rounds = any(e.round is not None for e in doc.results)
    head = ["backend", "target", "threads", "ops/s", "mean us", "p50 us", "p99 us", "int.mean us",
            "int.p99 us"]
    body: list[list[str] | Note] = []
    for e in doc.results:
        p = e.params
        lead = [e.backend, f"{p.target:.0f}" if p.target else "-",
                str(p.threads if p.threads is not None else 1)]
        if rounds:
            lead.insert(0, str(e.round) if e.round is not None else "")
        if e.skipped:
            body.append(Note(tuple(lead), f"skipped: {e.skipped}"))
            continue
        o, i = e.overall, e.intended
        body.append(lead + [f"{e.throughput_ops_sec:.1f}", f"{o.mean_us or 0:.1f}",
                            str(o.p50_us or 0), str(o.p99_us or 0)]
                    + ([f"{i.mean_us:.1f}", str(i.p99_us)] if i and i.count else ["", ""]))
    if rounds:
        head.insert(0, "round")
    return text_table(head, body, align="r" * rounds + "l" + "r" * (len(head) - 1 - rounds))


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
