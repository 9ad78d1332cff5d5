"""``bench spark``'s ``[COST]`` lines: what the run's checkpoints, restores and cleanup sent to the
store (the request ledger, :mod:`backends.ledger`), and what that and the bytes the store held
cost at list prices (:mod:`experiments.core.prices`).

Per checkpoint: the median and the total over the run of each request type, the bytes each way,
the retries and their wait (and the answers that were ``503 SlowDown``, where a store was
throttled); per restore (a recovery episode): the same, each; then, for every
provider whose prices apply to the backend, dollars per checkpoint (median), per restore (mean)
and per month: a month of checkpoints at the run's interval (wall time / checkpoints, or the one
given) at their mean requests, plus a month of the bytes the store held for the job when the run
ended (its measured space amplification × the live state).  See docs/cost.md.
"""

from __future__ import annotations

from typing import Any

from backends.base import binary_units
from backends.ledger import summarize
from spark_integration.job import Metrics

from experiments.core.prices import PriceTable, monthly

TAG = "[COST]"


def cost_report(metrics: Metrics, backend: str | None, table: PriceTable,
                interval_s: float | None = None) -> dict[str, Any] | None:
    """The run's ledger and prices as the JSON's ``cost`` section; None when the run sent no
    request to a store (a baseline on Spark's own state)."""
    restores = [r.requests for r in metrics.recoveries if r.requests]
    if not (metrics.checkpoint_requests or restores or metrics.cleanup_requests):
        return None
    checkpoints = summarize(metrics.checkpoint_requests)
    restore_summary = summarize(restores)
    given = interval_s is not None
    if interval_s is None:
        interval_s = metrics.wall_seconds / metrics.checkpoints if metrics.checkpoints else 0.0
    stored = metrics.store_bytes
    stored_from = "StoreBytes"
    if stored is None:
        stored, stored_from = metrics.state_bytes, "StateBytes (the store reports no footprint)"
    report: dict[str, Any] = {
        "checkpoints": {**checkpoints, "each": list(metrics.checkpoint_requests)},
        "restores": {**restore_summary, "each": restores},
        "cleanup": metrics.cleanup_requests,
        "interval_s": round(interval_s, 3),
        "interval_from": "--price-interval" if given else "the run (wall time / checkpoints)",
        "stored_bytes": stored, "stored_from": stored_from,
        "prices": {"table": table.path, "providers": {}},
    }
    for provider in table.for_backend(backend or ""):
        median_req = checkpoints["median"].get("requests", {}) if checkpoints["count"] else {}
        mean_req = checkpoints["mean"].get("requests", {}) if checkpoints["count"] else {}
        per_checkpoint, unpriced = provider.request_cost(median_req)
        per_restore, more = provider.request_cost(restore_summary["mean"].get("requests", {})
                                                  if restores else {})
        month = monthly(provider, mean_req, interval_s, stored, table.gb_bytes)
        report["prices"]["providers"][provider.name] = {
            "title": provider.title, "date": provider.date, "source": provider.source,
            "confirmed": provider.confirmed,
            "per_checkpoint": per_checkpoint if checkpoints["count"] and checkpoints["total"]["requests"]
            else None,  # None: no request attributed to a checkpoint (an asynchronous writer's)
            "per_restore": per_restore if restores else None,
            "per_month": month, "unpriced": sorted(set(unpriced) | set(more))}
    return report


def cost_lines(report: dict[str, Any], backend: str | None) -> list[tuple[str, str]]:
    """The ``[COST], <name>, <value>`` lines of a :func:`cost_report`."""
    lines: list[tuple[str, str]] = []
    ck = report["checkpoints"]
    ledgers = [*ck["each"], *report["restores"]["each"], report["cleanup"] or {}]
    # requests sent and not one byte either way: a store that does not count bytes (HBase, NFS)
    size = _bytes if any(d.get("sent_bytes") or d.get("received_bytes") for d in ledgers) \
        else (lambda _n: "not counted by this store")
    if ck["count"] and not ck["total"]["requests"]:  # written after their tasks returned
        lines.append(("Checkpoint.Requests", "none attributed: the checkpoints were written by "
                                             "an asynchronous writer (docs/cost.md)"))
    elif ck["count"]:
        lines += [("Checkpoint.Requests(median)", _requests(ck["median"])),
                  ("Checkpoint.Requests(total)", f"{_requests(ck['total'])} over {ck['count']} checkpoints"),
                  ("Checkpoint.SentBytes(median)", size(ck["median"]["sent_bytes"])),
                  ("Checkpoint.ReceivedBytes(median)", size(ck["median"]["received_bytes"])),
                  ("Checkpoint.Retries(total)", f"{ck['total']['retries']:g}"),
                  ("Checkpoint.RetryWait(ms)(total)", f"{ck['total']['retry_wait_ms']:.1f}")]
        if ck["total"].get("throttled"):  # a throttled store's (S3's 503 SlowDown answers)
            lines.append(("Checkpoint.Throttled(503 SlowDown)(total)",
                          f"{ck['total']['throttled']:g}"))
    for i, episode in enumerate(report["restores"]["each"], 1):
        lines += [(f"Restore{i}.Requests", _requests(episode)),
                  (f"Restore{i}.ReceivedBytes", size(episode.get("received_bytes", 0))),
                  (f"Restore{i}.Retries", f"{episode.get('retries', 0)} "
                                          f"({episode.get('retry_wait_ms', 0.0):.1f} ms waiting)")]
    if report["cleanup"]:
        lines.append(("Cleanup.Requests", _requests(report["cleanup"])))
    providers = report["prices"]["providers"]
    if not providers:
        lines.append(("Price", f"n/a: no provider in {report['prices']['table']} prices "
                               f"backend {backend}"))
    for name, p in providers.items():
        mark = "" if p["confirmed"] else " (unconfirmed)"
        m = p["per_month"]
        if p["per_checkpoint"] is not None:
            lines.append((f"{name}.$/checkpoint(median)", f"{p['per_checkpoint']:.8f}{mark}"))
        if p["per_restore"] is not None:
            lines.append((f"{name}.$/restore(mean)", f"{p['per_restore']:.8f}{mark}"))
        size, unit = binary_units(report["stored_bytes"] or 0)
        lines.append((f"{name}.$/month", f"{m['total']:.4f}{mark}: requests {m['requests']:.4f} at a "
                      f"checkpoint every {report['interval_s']:g} s + storage {m['storage']:.4f} "
                      f"for {size:.1f} {unit}"))
        if p["unpriced"]:
            lines.append((f"{name}.Unpriced", " ".join(p["unpriced"])))
    if providers:
        dated = ", ".join(f"{n} {p['date']}" for n, p in providers.items())
        lines.append(("Prices", f"{report['prices']['table']} ({dated})"))
    return lines


def print_cost(report: dict[str, Any] | None, backend: str | None) -> None:
    if report is None:
        return
    for name, value in cost_lines(report, backend):
        print(f"{TAG}, {name}, {value}")


def _requests(ledger: dict[str, Any]) -> str:
    """``PutObject=12 GetObject=1 (13 in all)``: a ledger's requests by type."""
    requests = ledger.get("requests") or {}
    if not requests:
        return "none"
    parts = " ".join(f"{k}={v:g}" for k, v in sorted(requests.items(), key=lambda kv: -kv[1]) if v)
    return f"{parts} ({sum(requests.values()):g} in all)"


def _bytes(n: float) -> str:
    size, unit = binary_units(n)
    return f"{n:.0f}" if unit == "B" else f"{n:.0f} ({size:.1f} {unit})"
