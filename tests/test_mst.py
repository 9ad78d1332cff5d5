"""The MST search and its stop criterion on synthetic runs (pure logic), latency per second and
recovery by latency on synthetic commits, and one real ``bench mst`` search at tiny sizes."""

from __future__ import annotations

import json
import math

import pytest

from experiments.spark.mst import (SUSTAINABLE, UNSUSTAINABLE, Criterion, Probe, judge, probe_line, search,
                                   slope)
from spark_integration.latency_series import (Commit, backlog, per_second, recovery_by_latency,
                                              weighted_quantile)


def micro_batches(rate: float, events: int, capacity: float, overhead: float = 0.3) -> list[Commit]:
    """The commits of a micro-batch engine: each batch takes everything due when it starts and
    needs ``overhead + n / capacity`` seconds; the next starts when it ends."""
    commits, t, done = [], 0.5, 0
    while done < events:
        due = min(events, int(rate * t))
        if due <= done:
            t = (done + 1) / rate
            continue
        t += overhead + (due - done) / capacity
        commits.append(Commit(done, due, t))
        done = due
    return commits


# ------------------------------------------------------------------------------ the criterion
def test_slope_is_least_squares():
    assert slope([(0, 1), (1, 3), (2, 5)]) == pytest.approx(2.0)
    assert slope([(0, 1), (1, 0), (2, 1), (3, 0)]) == pytest.approx(-0.2)
    assert slope([(1, 1)]) is None and slope([(1, 1), (1, 2)]) is None


def test_a_job_below_its_capacity_is_sustainable():
    rate, events = 4000, 4000 * 20
    probe = judge(rate, micro_batches(rate, events, capacity=6000), events, warmup_s=5)
    assert probe.verdict == SUSTAINABLE, probe
    assert abs(probe.backlog_slope) < Criterion().growth * rate
    assert probe.commits_in_window >= 3 and probe.p50_ms and probe.p99_ms >= probe.p50_ms


def test_a_job_above_its_capacity_is_stopped_by_its_growing_backlog():
    rate, events = 8000, 8000 * 20
    probe = judge(rate, micro_batches(rate, events, capacity=6000, overhead=0.05), events, warmup_s=5)
    assert probe.verdict == UNSUSTAINABLE and probe.stopped_by == "backlog", probe
    # the backlog grows at the shortfall: rate - capacity
    assert probe.backlog_slope == pytest.approx(2000, rel=0.25)
    assert "backlog grew" in probe_line(1, probe, Criterion())


def test_latency_growth_alone_stops_a_probe():
    """A backlog that stays level while the sink's p99 climbs (results held back) is stopped by p99."""
    rate, events = 1000, 20_000
    commits = [Commit(i * 500, (i + 1) * 500, (i + 1) * 0.5 + 0.2 + 0.0 * i) for i in range(40)]
    # hold each commit back by 0.1 s more than the last: latency grows 200 ms per second
    commits = [Commit(c.start, c.end, c.done_s + 0.1 * i) for i, c in enumerate(commits)]
    probe = judge(rate, commits, events, warmup_s=5, criterion=Criterion(growth=0.05))
    assert probe.verdict == UNSUSTAINABLE
    assert probe.stopped_by in ("backlog", "p99")
    assert probe.p99_slope_ms_s == pytest.approx(200, rel=0.2)


def test_too_few_commits_in_the_window_is_unsustainable():
    rate, events = 1000, 20_000
    commits = [Commit(0, 1000, 1.5), Commit(1000, 20_000, 40.0)]
    probe = judge(rate, commits, events, warmup_s=5)
    assert probe.verdict == UNSUSTAINABLE and probe.stopped_by == "commits"


# ------------------------------------------------------------------------------ the search
def fake(capacity: float):
    calls: list[float] = []

    def probe(rate: float) -> Probe:
        calls.append(rate)
        ok = rate <= capacity
        return Probe(rate=rate, verdict=SUSTAINABLE if ok else UNSUSTAINABLE, stopped_by="" if ok else "backlog")
    return probe, calls


def test_search_ramps_then_bisects_to_the_precision():
    probe, calls = fake(5300)
    found = search(probe, start_rate=1000, precision=0.10, max_probes=20)
    assert calls[:4] == [1000, 2000, 4000, 8000]
    assert found.mst <= 5300 < found.high and found.high / found.low <= 1.10
    assert found.mst == max(p.rate for p in found.probes if p.sustainable)
    assert len(found.probes) == len(calls) and "within 10%" in found.stop


def test_search_halves_down_from_an_unsustainable_start():
    probe, calls = fake(700)
    found = search(probe, start_rate=4000, precision=0.25, max_probes=20)
    assert calls[:4] == [4000, 2000, 1000, 500]
    assert 500 <= found.mst <= 700 < found.high


def test_search_stops_at_its_probe_budget_and_says_so():
    probe, calls = fake(5300)
    found = search(probe, start_rate=1000, precision=0.01, max_probes=6)
    assert len(calls) == 6 and found.mst == 5300 or found.mst < 5300
    assert "6 probes" in found.stop


def test_a_failed_probe_ends_the_search_with_what_it_found():
    from experiments.spark.mst import FAILED

    def probe(rate: float) -> Probe:
        if rate > 3000:
            return Probe(rate=rate, verdict=FAILED, stopped_by="Python worker failed to connect back.")
        return Probe(rate=rate, verdict=SUSTAINABLE)
    found = search(probe, start_rate=1000, precision=0.1, max_probes=20)
    assert [p.rate for p in found.probes] == [1000, 2000, 4000] and found.mst == 2000 and found.high is None
    assert "failed 2 times (Python worker failed to connect back.)" in found.stop
    assert "failed (Python worker" in probe_line(3, found.probes[-1], Criterion())


def test_search_with_nothing_sustainable_has_no_mst():
    probe, _ = fake(1)
    found = search(probe, start_rate=100, precision=0.1, max_probes=20, min_rate=10)
    assert found.mst is None and "unsustainable down to" in found.stop


def test_search_on_simulated_micro_batches_finds_the_capacity():
    """The criterion and the search together, on the engine model: the MST lands below the
    capacity and within the bracket's precision of it."""
    capacity = 6000.0

    def probe(rate: float) -> Probe:
        events = int(rate * 20)
        return judge(rate, micro_batches(rate, events, capacity, overhead=0.2), events, warmup_s=5)
    found = search(probe, start_rate=1000, precision=0.10, max_probes=12)
    assert found.mst is not None and 0.6 * capacity <= found.mst <= capacity, [(p.rate, p.verdict) for p in found.probes]


def test_search_and_pairing_say_each_probe_numbered_in_the_order_run(monkeypatch):
    """``find`` and ``find_paired`` around the probe (faked here: no Spark): one line per probe,
    numbered 1, 2, ...; the paired lines name the protocol, the search's do not."""
    from experiments.spark import mst

    def probe_job(spark, tmp, protocol, backend, base, rate, sizes, interval, criterion):
        ok = rate <= (3000 if protocol == "none" else 2500)
        return Probe(rate=rate, verdict=SUSTAINABLE if ok else UNSUSTAINABLE, stopped_by="" if ok else "backlog",
                     backlog_slope=0.0 if ok else rate / 2)
    monkeypatch.setattr(mst, "probe_job", probe_job)
    lines: list[str] = []
    found = mst.find(None, "", "none", None, None, mst.QUICK, say=lines.append)
    assert len(lines) == len(found.probes) >= 3
    assert [line.split(",")[1] for line in lines] == [f" Probe {n}" for n in range(1, len(lines) + 1)]
    lines.clear()
    paired = mst.find_paired(None, "", ["none", "coordinated"], None, None, mst.QUICK, [2000, 2800], rounds=2,
                             say=lines.append)
    assert [line.split(",")[1] for line in lines] == [
        f" Probe {n} ({p})" for n, p in enumerate(["none", "coordinated", "coordinated", "none"] * 2, 1)]
    assert [p.sustainable for p in paired.probes["coordinated"]] == [True, False, True, False]


# ------------------------------------------------------------------------------ latency over time
def test_per_second_buckets_events_by_creation_time():
    rate = 1000
    commits = [Commit(0, 1000, 1.5), Commit(1000, 2000, 2.5)]
    series = per_second(commits, rate)
    assert [s["second"] for s in series] == [0.0, 1.0]
    assert [s["events"] for s in series] == [1000, 1000]
    # events of second 0 were created 0..1 s and committed at 1.5 s: latency 0.5..1.5 s
    assert series[0]["p50_ms"] == pytest.approx(1000, abs=40)
    assert series[0]["p99_ms"] == pytest.approx(1500, abs=40)


def test_backlog_after_each_commit():
    assert backlog([Commit(0, 800, 1.0), Commit(800, 2000, 2.0)], 1000, 2000) == [(1.0, 200.0), (2.0, 0.0)]


def test_weighted_quantile():
    assert weighted_quantile([], 0.5) == 0.0
    assert weighted_quantile([(1, 1), (10, 3)], 0.5) == 10
    assert weighted_quantile([(1, 3), (10, 1)], 0.5) == 1


def series_of(p50: list[float]) -> list[dict]:
    return [{"second": float(i), "events": 100, "p50_ms": v, "p99_ms": 2 * v} for i, v in enumerate(p50)]


def test_recovery_is_failure_to_p50_back_within_ten_percent_and_stable():
    p50 = [300] * 10 + [2000, 1500, 900, 320, 500, 310, 300, 305, 300, 300]
    # failure at 10.4 s; 13 is back (320 <= 330) but 14 is not; from 15 on it stays, and the
    # events of second 15 reach the sink 300 ms after it starts: 15.3 s
    assert recovery_by_latency(series_of(p50), failure_s=10.4) == pytest.approx(4900)


def test_recovery_counts_the_events_in_flight_at_the_failure():
    """With seconds of latency, the events the failure delays were created before it: the level
    comes from the seconds before them, and recovery ends when the sink is fresh again."""
    p50 = [2000] * 10 + [6000, 9000, 8000, 5000, 2100, 2000, 2050, 2000]
    # failure at 12.5 s: the events of 10.5 s on were in flight; second 14 is back, its events
    # reach the sink at 16 s
    assert recovery_by_latency(series_of(p50), failure_s=12.5) == pytest.approx(3500)
    # a failure that does not show at the sink recovers in no time
    assert recovery_by_latency(series_of([2000] * 20), failure_s=12.5) == 0.0


def test_recovery_is_none_when_latency_never_comes_back():
    p50 = [300] * 10 + [1000 + 100 * i for i in range(10)]
    assert recovery_by_latency(series_of(p50), failure_s=10.0) is None
    assert recovery_by_latency(series_of(p50), failure_s=0.0) is None  # no second before it


def test_recovery_skips_the_warm_up_seconds_for_the_normal_level():
    p50 = [5000, 4000] + [300] * 8 + [900, 300, 300, 300, 300]
    assert recovery_by_latency(series_of(p50), failure_s=10.0, normal_from=2.0) == pytest.approx(1300)


# ------------------------------------------------------------------------------ the real search
@pytest.mark.slow
def test_bench_mst_finds_a_rate_on_a_real_job(tmp_path, capsys):
    """A real search at tiny sizes: q12 under coordinated on indexed_fs, 4 s probes, at most 3."""
    from bench.cli import main

    out = tmp_path / "mst.json"
    rc = main(["mst", "--job", "nexmark-q12", "--protocol", "coordinated", "--backend", "indexed_fs",
               "--quick", "--probe-seconds", "4", "--max-probes", "3", "--start-rate", "2000",
               "--json", str(out)])
    text = capsys.readouterr().out
    assert rc == 0, text
    assert text.count("[MST], Probe ") == 3
    assert "[MST], Rate(events/sec), " in text and "[MST], Search, " in text
    doc = json.loads(out.read_text())
    assert doc["schema"] == "ckptbench.mst/1" and len(doc["probes"]) == 3
    for p in doc["probes"]:
        assert p["verdict"] in (SUSTAINABLE, UNSUSTAINABLE) and p["rate"] > 0
        assert p["per_second"] and all(not math.isnan(s["p99_ms"]) for s in p["per_second"])
    sustained = [p["rate"] for p in doc["probes"] if p["verdict"] == SUSTAINABLE]
    assert doc["mst"] == (max(sustained) if sustained else None)


def test_bench_mst_refuses_a_protocol_without_its_backend(capsys):
    from bench.cli import main

    assert main(["mst", "--protocol", "coordinated"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--backend" in err
