"""``bench reproduce cost``: what a checkpoint costs in requests and dollars, per store and layout.

A set of ``bench spark`` runs (:func:`commands`) of the word count with 1 KiB of state a key,
every checkpoint a full one (``--full-every 1``: a checkpoint's requests are what the whole state
costs, not what an interval changed), one injected failure a run (so a restore is priced too),
``--orphans`` (what the run left off its recovery line) and ``--price-interval 60`` (a month of
checkpoints one a minute, as a job would take them, not as often as a benchmark does).

* **Stores × layouts** at one state size: MinIO (priced as S3, GCS and Azure Blob), Redis and
  HBase (no provider lists a price for them: their requests are counted, not priced), indexed_fs
  on the local disk (priced as EBS gp3, whose requests are included in its monthly price) and on
  HDFS (WebHDFS requests), each with the ``chunks`` and the ``per-key`` layout.
* **Keys** on MinIO: both layouts at three key counts, so the per-key layout's requests (one PUT a
  key) and its price can be followed as they rise with the keys; the chunks layout's follow the
  bytes (one PUT per 4 MiB).  Per-key at gigabytes of state would be millions of PUTs a
  checkpoint, too many for this machine to run in minutes: a reader extrapolates along the
  line (requests per checkpoint ≈ keys + a few).

:func:`table` makes one row per run and price row (a provider whose prices apply to the store),
:func:`chart` the requests and dollars against the keys.
"""

from __future__ import annotations

from typing import Any

from experiments.core.format import Runs, md_table, num

#: the job every step runs (the keys, events and failure come from the size)
JOB = ("spark --job wordcount --state-bytes 1024 --full-every 1 --protocol coordinated --verify "
       "--orphans --price-interval 60")
#: (keys of the store rows, keys of the MinIO key steps) per size
KEYS = {"full": (4_000, (1_000, 4_000, 16_000)), "quick": (1_000, (250, 1_000, 2_000))}
#: (store, medium) rows, in the table's order (a medium holds a file store's directory)
STORES: tuple[tuple[str, str], ...] = (
    ("minio", ""), ("redis", ""), ("hbase", ""), ("indexed_fs", ""), ("indexed_fs", "hdfs"))
LAYOUTS = ("chunks", "per-key")
SERVERS = ("redis", "hbase", "minio", "hdfs")
#: the provider whose dollars the chart and the headline show for MinIO
CHART_PROVIDER = "s3-standard"


def label(store: str, medium: str, layout: str, rung: str = "") -> str:
    """A step's label: the same at both sizes (``rung``: ``fewer`` or ``more`` keys on MinIO)."""
    return f"{store}{'-' + medium if medium else ''}-{layout}{'-' + rung if rung else ''}"


def parts(lab: str) -> tuple[str, str]:
    """(store as shown, layout) of a step's :func:`label`."""
    head = lab.removesuffix("-fewer").removesuffix("-more")
    layout = next(lay for lay in LAYOUTS if head.endswith("-" + lay))
    return head[:-len(layout) - 1].replace("indexed_fs-hdfs", "indexed_fs on hdfs"), layout


def _keys(doc: dict[str, Any]) -> int:
    return int((doc.get("job") or {}).get("keys") or 0)


def sizes(keys: int) -> str:
    """A load phase that visits every key once (one micro-batch, the first checkpoint), then three
    micro-batches on the hot 1 %; the failure in the third: four checkpoints of the whole state."""
    return (f"--keys {keys} --skew load+hot:1:{max(keys // 100, 1)} --events {4 * keys} --batch {keys} "
            f"--fail-at {5 * keys // 2}")


def commands(size: str) -> list[tuple[str, str]]:
    """(label, ``bench`` arguments) of every step at ``size`` (``full`` or ``quick``)."""
    mid, (fewer, _, more) = KEYS[size]
    runs = [(store, medium, layout, "", mid) for store, medium in STORES for layout in LAYOUTS]
    runs += [("minio", "", layout, rung, k) for rung, k in (("fewer", fewer), ("more", more))
             for layout in LAYOUTS]
    steps = []
    for store, medium, layout, rung, keys in runs:
        where = f" --medium {medium}" if medium else ""
        steps.append((label(store, medium, layout, rung),
                      f"{JOB} --backend {store} --layout {layout}{where} {sizes(keys)}"))
    return steps


def _requests(ledger: dict[str, Any] | None, top: int = 3) -> str:
    """``PutObject 16,002 · HeadBucket 1`` (the largest types; ``+N more``)."""
    requests = {k: v for k, v in ((ledger or {}).get("requests") or {}).items() if v}
    if not requests:
        return "–"
    ordered = sorted(requests.items(), key=lambda kv: -kv[1])
    text = " · ".join(f"{k} {num(v)}" for k, v in ordered[:top])
    return text + (f" +{len(ordered) - top} more" if len(ordered) > top else "")


def _total(ledger: dict[str, Any] | None) -> float:
    return float(sum(((ledger or {}).get("requests") or {}).values()))


def _money(value: float | None) -> str:
    return "–" if value is None else f"{value:.6f}" if value < 0.01 else f"{value:,.4f}"


def _rows(runs: Runs) -> list[tuple[str, dict[str, Any]]]:
    """The runs in step order (labels as :func:`commands` makes them), each with its document."""
    return [(lab, runs[lab]) for lab, _ in commands("full") if lab in runs]


def table(runs: Runs) -> list[str]:
    head = ["store", "layout", "keys", "state (MiB)", "requests a checkpoint (median)", "in all",
            "MiB sent a checkpoint", "requests a restore", "price row", "$ a checkpoint", "$ a restore",
            "$ a month (a checkpoint a minute + storage)", "orphans (left / after GC)", "exactly-once"]
    rows = []
    for lab, doc in _rows(runs):
        store, layout = parts(lab)
        keys = _keys(doc)
        if "error" in doc:
            rows.append([store, layout, "–", f"failed: {doc['error']}"] + [""] * (len(head) - 4))
            continue
        m, cost, orphans = doc.get("metrics", {}), doc.get("cost") or {}, doc.get("orphans") or {}
        ck = cost.get("checkpoints") or {}
        median = ck.get("median") if ck.get("count") else None
        restore = ((cost.get("restores") or {}).get("each") or [None])[0]
        left = (f"{orphans['before_gc']['objects']} / {orphans['after_gc']['objects']}"
                + (" (growing)" if orphans.get("growing") else "")) if orphans else "–"
        common = [store, layout, num(keys), num(m.get("StateBytes", 0) / 2**20), _requests(median),
                  num(_total(median)), num((median or {}).get("sent_bytes", 0) / 2**20), _requests(restore)]
        tail = [left, {True: "yes", False: "NO"}.get(m.get("ExactlyOnce"), "–")]
        providers = (cost.get("prices") or {}).get("providers") or {}
        if not providers:
            rows.append(common + ["none lists this store", "–", "–", "–"] + tail)
        for name, p in providers.items():
            rows.append(common + [name + ("" if p.get("confirmed") else " (unconfirmed)"),
                                  _money(p.get("per_checkpoint")), _money(p.get("per_restore")),
                                  _money((p.get("per_month") or {}).get("total"))] + tail)
    out = md_table(head, rows)
    out += ["", "Every checkpoint is a full one (`--full-every 1`), so its requests are what the "
                "whole state costs; a month is 730 hours of one checkpoint a minute at the run's "
                "mean requests, plus the bytes the store held for the job (its measured space "
                "amplification); a restore is priced by itself. The per-key layout sends one PUT a "
                "key: at a gigabyte of 1 KiB keys that is about a million PUTs a checkpoint, which "
                "the rows above let a reader extrapolate rather than run. Orphans: what the run "
                "left in the store that the recovery line does not reference, when it ended and "
                "after the protocol's GC (`bench spark --orphans`, docs/cost.md).", ""]
    return out


def _point(doc: dict[str, Any], provider: str = CHART_PROVIDER) -> tuple[float, float | None]:
    """(requests a checkpoint (median, all types), ``provider``'s dollars a month) of a run."""
    cost = doc.get("cost") or {}
    ck = cost.get("checkpoints") or {}
    month = (((cost.get("prices") or {}).get("providers") or {}).get(provider) or {}).get("per_month") or {}
    return _total(ck.get("median") if ck.get("count") else None), month.get("total")


def headline(runs: Runs) -> str:
    ladder = {}
    for lab, doc in _rows(runs):
        store, layout = parts(lab)
        if store == "minio" and "error" not in doc:
            ladder.setdefault(layout, []).append((_keys(doc), *_point(doc)))
    if not ladder.get("per-key") or not ladder.get("chunks"):
        return "not run"
    (k, per_key, per_key_month), (_, chunks, chunks_month) = max(ladder["per-key"]), max(ladder["chunks"])
    return (f"MinIO at {num(k)} keys of 1 KiB: per-key {num(per_key)} requests a checkpoint "
            f"({CHART_PROVIDER}: ${_money(per_key_month)} a month at one a minute), chunks "
            f"{num(chunks)} (${_money(chunks_month)})")


def chart(runs: Runs, path: str) -> None:
    """Requests a checkpoint against keys (log-log: MinIO's two layouts as lines, the other
    stores as points), and MinIO's dollars a month at S3's prices against keys."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.6))
    series: dict[str, list[tuple[int, float, float | None]]] = {}
    for lab, doc in _rows(runs):
        if "error" in doc:
            continue
        store, layout = parts(lab)
        series.setdefault(f"{store} {layout}", []).append((_keys(doc), *_point(doc)))
    for name, points in series.items():
        points.sort()
        xs, ys = [p[0] for p in points], [max(p[1], 0.5) for p in points]
        style = "-o" if len(points) > 1 else "s"
        left.plot(xs, ys, style, label=name)
        dollars = [(x, p[2]) for x, p in zip(xs, points) if p[2] is not None]
        if name.startswith("minio") and dollars:
            right.plot([d[0] for d in dollars], [d[1] for d in dollars], "-o", label=name)
    left.set_xscale("log")
    left.set_yscale("log")
    left.set_xlabel("keys (1 KiB of state each)")
    left.set_ylabel("requests a checkpoint (median, full checkpoints)")
    left.legend(fontsize=7)
    right.set_xscale("log")
    right.set_xlabel("keys (1 KiB of state each)")
    right.set_ylabel(f"$ a month at {CHART_PROVIDER} (a checkpoint a minute)")
    right.set_ylim(bottom=0)
    right.legend(fontsize=8)
    fig.suptitle("What a checkpoint costs: coordinated, every checkpoint full, one failure a run")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
