"""CheckMate's experiment in parts (pure logic on invented documents, no Spark): the time each
full part is expected to take, the skew part's MSTs taken from a uniform run, the marks on a
protocol above ``none``, the skew table and the papers' headlines generated from the documents
(with LOG.io's runs too short to measure), and the reproduce steps that run the parts."""

from __future__ import annotations

import json
from dataclasses import replace

import pytest

from experiments.core.document import dump
from experiments.spark import checkmate as cm
from experiments.spark import mst as mst_mod
from experiments.spark.mst import Probe, Search

MINUTES = 60.0


def search(rate: float | None, high: float | None) -> Search:
    probes = [Probe(rate=rate, verdict="sustainable")] if rate else []
    if high:
        probes.append(Probe(rate=high, verdict="unsustainable", stopped_by="backlog", backlog_slope=900.0,
                            window_s=15.0))
    return Search(probes, rate, rate, high, "bracket")


def row(query: str, skew: str, protocol: str, *, p50: float = 100.0, ckpt: float = 10.0, rate: float = 4000.0,
        load: float | None = None, throughput: float = 4000.0, steady: float = 80.0, checkpoints: int = 40) -> cm.Row:
    return cm.Row(query=query, skew=skew, protocol=protocol, backend="indexed_fs", throughput=throughput,
                  latency_p50_ms=p50, latency_p99_ms=3 * p50, checkpoint_ms=ckpt, recovery_ms=500.0,
                  restart_ms=50.0, checkpoints=0 if protocol == "none" else checkpoints, basic=checkpoints,
                  forced=0, useless=0, replayed=0, logged_messages=0, piggybacked_bytes=0,
                  message_bytes_ratio=1.0, failures=1, exactly_once=True, rate=rate, load=load,
                  metrics={"Checkpoints": 0 if protocol == "none" else checkpoints, "SteadySeconds": steady})


def uniform_doc(msts: dict[str, tuple[float, float]], parallelism: int = 2, quick: bool = False) -> cm.Checkmate:
    """A full uniform run of q3 with these (MST, bracket top) per protocol; its grid paced at 80 %."""
    rows = [row("q3", "uniform", p, rate=0.8 * m, throughput=0.8 * m) for p, (m, _) in msts.items()]
    none = rows[0].throughput
    for r in rows:
        r.throughput_vs_none = round(r.throughput / none, 3)
    return cm.Checkmate(quick=quick, backend="indexed_fs", parallelism=parallelism, sizes=cm.FULL,
                        skews={"uniform": "0.0"}, rows=rows, paper=dump(cm.PAPER),
                        piggyback_bytes_per_row=8 + 10 * 2 * parallelism,
                        mst={"q3": {p: search(m, h) for p, (m, h) in msts.items()}})


def skew_doc(coordinated_p50: float, uncoordinated_p50: float, steady: float = 80.0) -> cm.Checkmate:
    rows = []
    for ratio in cm.FULL.skew_ratios:
        name, _ = cm.hot(ratio)
        for load in cm.FULL.skew_loads:
            for p, p50 in (("coordinated", coordinated_p50), ("uncoordinated", uncoordinated_p50), ("cic", 120.0)):
                rows.append(row("q3", name, p, p50=p50 * (1 + ratio), ckpt=p50 / 10, load=load, steady=steady))
    return cm.Checkmate(quick=False, backend="indexed_fs", parallelism=2, sizes=cm.FULL, part="skew",
                        skews=dict(cm.hot(r) for r in cm.FULL.skew_ratios), rows=rows, paper=dump(cm.PAPER),
                        mst_from="results/checkmate/run.json")


# ------------------------------------------------------------------------------ time budget
def test_each_full_part_is_expected_to_fit_a_two_hour_window():
    uniform = cm.plan(cm.FULL)
    skew = cm.plan(cm.FULL, "skew", msts_given=True)
    assert uniform.searches_from_start == 4 and uniform.searches_from_none == 12
    assert uniform.rows == 16 and uniform.warmups == 4  # the grid; a warm-up run a protocol
    assert skew.mst_seconds == 0 and skew.rows == 3 * 3 * 2 * 3  # q3/q8/q12 x 3 ratios x 2 loads x 3 protocols
    for p in (uniform, skew):
        assert 30 * MINUTES < p.seconds <= 2 * 60 * MINUTES, p.describe()
        assert p.describe().startswith("expected about ")
    # without --mst-from the skew part searches its queries' MSTs itself, and says so
    assert cm.plan(cm.FULL, "skew").searches_from_start == 3
    assert cm.plan(cm.QUICK).seconds < 10 * MINUTES and cm.plan(cm.QUICK, "skew").seconds < 10 * MINUTES
    assert cm.minutes(5400) == "1 h 30 min" and cm.minutes(600) == "10 min" and cm.minutes(30) == "30 s"


def test_progress_lines_say_what_is_left_at_the_pace_so_far():
    lines: list[str] = []
    progress = cm.Progress(cm.plan(cm.QUICK), lines.append)
    clock = iter([100.0, 130.0])
    progress.start, progress.clock = 0.0, lambda: next(clock)
    progress.done(progress.plan.seconds / 2, "half")
    assert "half done; 2 min so far, about 2 min left" in lines[0]


# ------------------------------------------------------------------------------ MSTs from the uniform run
def test_the_skew_part_takes_its_msts_from_a_full_uniform_run_of_the_same_setting():
    full = uniform_doc({"coordinated": (5000.0, 5500.0), "uncoordinated": (4500.0, 5000.0), "cic": (3000.0, 3300.0)})
    got = cm.msts_from(full, "indexed_fs", 2, ("q3",), cm.SKEW_PROTOCOLS)
    assert got["q3"]["cic"].mst == 3000.0
    for doc, args, said in (
            (replace(full, quick=True), ("indexed_fs", 2), "no uniform MST step"),
            (full, ("redis", 2), "measured indexed_fs with 2 instances, not redis"),
            (full, ("indexed_fs", 4), "not indexed_fs with 4"),
            (replace(full, mst={"q3": {"coordinated": search(5000.0, None)}}), ("indexed_fs", 2),
             "no MST search for q3 uncoordinated, q3 cic")):
        with pytest.raises(cm.MstSourceError, match=said) as err:
            cm.msts_from(doc, *args, ("q3",), cm.SKEW_PROTOCOLS)
        assert "run `bench checkmate" in str(err.value) and "\n" not in str(err.value)


def test_bench_checkmate_refuses_an_mst_source_in_one_line(tmp_path, capsys):
    from bench.cli import main

    quick = uniform_doc({"none": (5000.0, 5500.0)}, quick=True)
    path = tmp_path / "u.json"
    path.write_text(json.dumps(quick.to_json()))
    for source in (str(tmp_path / "missing.json"), str(path)):
        assert main(["checkmate", "--part", "skew", "--mst-from", source, "--json", str(tmp_path / "s.json")]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and "--mst-from" in err and "bench checkmate" in err


# ------------------------------------------------------------------------------ above none
def test_a_protocol_above_none_at_mst_is_marked_and_explained():
    doc = uniform_doc({"none": (5000.0, 5500.0), "coordinated": (5200.0, 5700.0), "cic": (6000.0, None)})
    table = cm.markdown(doc)
    fig7 = next(line for line in table if line.startswith("| q3 | 5,000 |"))
    assert "| 5,200 | 1.04 [M1] |" in fig7 and "| 6,000 | 1.20 [M2] |" in fig7
    notes = [line for line in table if line.startswith("[M")]
    assert "brackets overlap" in notes[0] and "within the search's precision (10%)" in notes[0]
    assert "do not overlap" not in notes[0] and "(no unsustainable probe)" in notes[1]
    # the paced grid follows the MSTs: its rows above none say so, pointing at them
    grid = next(line for line in table if line.startswith("| q3 | coordinated |"))
    assert grid.endswith("| [1] |")
    note = next(line for line in table if line.startswith("[1] "))
    assert "paced at 4,160 events/s (80% of its own MST) against none's 4,000" in note
    # a row that ran unpaced (its search found no MST) beside a paced none is not compared
    cic = next(r for r in doc.rows if r.protocol == "cic")
    cic.rate = 0.0
    assert "not comparable" in cm.above_grid(doc, cic, doc.rows[0], "1.20")
    # within 2 %: nothing to mark
    assert cm.above_mst(uniform_doc({"none": (5000.0, 5500.0), "coordinated": (5100.0, 5600.0)}), "q3",
                        "coordinated") is None


# ------------------------------------------------------------------------------ skew and headlines
def test_skew_table_beside_fig12_and_its_verdict():
    doc = skew_doc(coordinated_p50=900.0, uncoordinated_p50=150.0)
    table = cm.skew_markdown(doc)
    assert sum(line.startswith("**Skewed input (CheckMate Fig 12), each protocol paced at") for line in table) == 2
    assert "| q3 | hot 30% | 1,170 | 195 | 156 | 90.0 | 15.0 | 12.0 | 6.00 | 40 / 40 / 40 |" in table
    assert any(line.startswith("Paper (Fig 12): ") for line in table)
    mark, reason = cm.skew_verdict(doc)
    assert mark == cm.REPRODUCED and "below coordinated's in 6 of 6 cells" in reason
    assert cm.skew_verdict(skew_doc(100.0, 150.0))[0] == cm.NOT_REPRODUCED
    short = skew_doc(900.0, 150.0, steady=5.0)
    assert "| too short |" in "\n".join(cm.skew_markdown(short))
    assert cm.skew_verdict(short) == (cm.NOT_MEASURED, "every skew cell is too short to measure")
    assert cm.skew_verdict(None)[0] == cm.NOT_MEASURED
    assert cm.markdown(doc.to_json()) == table and cm.headline(doc).startswith("skew (Fig 12): ")


def test_checkmates_headlines_from_the_three_parts():
    two = uniform_doc({"none": (5000.0, 5500.0), "coordinated": (4900.0, 5400.0),
                       "uncoordinated": (4400.0, 4800.0), "cic": (3000.0, 3300.0)})
    four = uniform_doc({"none": (4000.0, 4400.0), "coordinated": (3900.0, 4300.0),
                        "uncoordinated": (3500.0, 3900.0), "cic": (1800.0, 2000.0)}, parallelism=4)
    got = {claim.split(":")[1].strip(): (mark, reason)
           for claim, mark, reason in cm.paper_verdicts(two.to_json(), skew_doc(900.0, 150.0), four)}
    assert got["coordinated ≈ none on uniform input (Fig 7"][0] == cm.REPRODUCED
    assert got["uncoordinated about 10 % below coordinated (Fig 7)"] == (
        cm.REPRODUCED, "uncoordinated's MST × coordinated's: q3 0.90 (median 0.90; the search brackets each "
                       "MST to 10%; only a median below 0.91 tells the two apart: uncoordinated is measurably "
                       "below coordinated)")
    # within the precision of coordinated's MST, "about 10 % below" is not shown
    close = uniform_doc({"none": (5000.0, 5500.0), "coordinated": (4900.0, 5400.0),
                         "uncoordinated": (4700.0, 5200.0)})
    mark, reason = cm.paper_verdicts(close)[1][1:]
    assert mark == cm.NOT_REPRODUCED and reason.endswith("uncoordinated is not measurably below coordinated)")
    mark, reason = got["CIC far lower at high parallelism (Fig 7"]
    assert mark == cm.REPRODUCED and "at 4: q3 0.45" in reason and "100 workers would carry" in reason
    assert "(median 0.45 at 4, against the paper's 0.5; lower than at 2 in 1 of 1 queries)" in reason
    assert got["uncoordinated's relative gain under skew (Fig 12)"][0] == cm.REPRODUCED
    # a --quick uniform run or none at all: not yet measured at full size
    marks = [m for _, m, _ in cm.paper_verdicts(replace(two, quick=True), None, None)]
    assert marks == [cm.NOT_MEASURED] * 4
    # coordinated clearly above none is a baseline beaten: it decides nothing; clearly below
    # it refutes the claim
    above = uniform_doc({"none": (5000.0, 5500.0), "coordinated": (6000.0, None)})
    _, mark, reason = cm.paper_verdicts(above)[0]
    assert mark == cm.NOT_MEASURED and "coordinated above none by more than the precision in q3 (1.20)" in reason
    below = uniform_doc({"none": (5000.0, 5500.0), "coordinated": (4000.0, 4400.0)})
    assert cm.paper_verdicts(below)[0][1] == cm.NOT_REPRODUCED
    # none's search out of probes with a wide bracket: its MST may be far higher, so the ratio
    # to it decides nothing (coordinated above it is no gain, nor a reproduction)
    wide = uniform_doc({"none": (5000.0, 7000.0), "coordinated": (5600.0, 6000.0)})
    _, mark, reason = cm.paper_verdicts(wide)[0]
    assert mark == cm.NOT_MEASURED and "q3 (none's search from" in reason and "40% wide" in reason
    # ... and so does one that found no unsustainable rate: its MST lies somewhere above
    endless = uniform_doc({"none": (5000.0, None), "coordinated": (4900.0, 5400.0)})
    _, mark, reason = cm.paper_verdicts(endless)[0]
    assert mark == cm.NOT_MEASURED and "found no unsustainable rate up to 5,000" in reason


# ------------------------------------------------------------------------------ the paired part
def paired_doc(verdicts: dict[str, dict[float, str]], quick: bool = False) -> cm.Checkmate:
    """A paired run of q3 whose probes give these verdicts: protocol -> rate -> one letter a round
    (s: sustainable, u: unsustainable, f: failed)."""
    names = {"s": "sustainable", "u": "unsustainable", "f": "failed"}
    rates = sorted({r for by in verdicts.values() for r in by})
    rounds = max(len(v) for by in verdicts.values() for v in by.values())
    probes = {p: [Probe(rate=r, verdict=names[by[r][k]], backlog_slope=0.01 * r * (by[r][k] == "u"))
                  for k in range(rounds) for r in rates if r in by] for p, by in verdicts.items()}
    sizes = replace(cm.QUICK, paired_rounds=1) if quick else cm.FULL
    return cm.Checkmate(quick=quick, backend="indexed_fs", parallelism=2, sizes=sizes, part="paired",
                        paper=dump(cm.PAPER), mst_from="results/checkmate/run.json",
                        paired={"q3": mst_mod.Pairing(rates=rates, rounds=rounds, probes=probes)})


def test_pairing_takes_turns_and_a_rate_is_sustained_in_most_rounds():
    ran: list[tuple[str, float]] = []

    def probe(protocol: str, rate: float) -> Probe:
        ran.append((protocol, rate))
        verdict = "sustainable" if rate <= (6000.0 if protocol == "none" else 5500.0) else "unsustainable"
        return Probe(rate=rate, verdict=verdict)
    found = mst_mod.pair(probe, ("none", "coordinated"), [6000.0, 5500.0, 6000.0], rounds=2)
    assert found.rates == [5500.0, 6000.0]
    # the first protocol changes from rate to rate and round to round
    assert ran == [("none", 5500.0), ("coordinated", 5500.0), ("coordinated", 6000.0), ("none", 6000.0),
                   ("none", 5500.0), ("coordinated", 5500.0), ("coordinated", 6000.0), ("none", 6000.0)]
    assert (found.mst("none"), found.mst("coordinated")) == (6000.0, 5500.0)
    assert found.held("coordinated", 6000.0) == (0, 2)
    # a majority of the rounds judged decides; a failed probe is no verdict; a rate above one not
    # sustained does not count
    doc = paired_doc({"none": {5000.0: "ssu", 5500.0: "fsu", 6000.0: "sss"}, "coordinated": {5000.0: "uus"}})
    pairing = doc.paired["q3"]
    assert pairing.held("none", 5500.0) == (1, 2) and not pairing.sustains("none", 5500.0)
    assert pairing.mst("none") == 5000.0 and pairing.mst("coordinated") is None
    assert pairing.median_backlog("none", 5000.0) == 0.0
    assert mst_mod.bracket_rates([search(5000.0, 5500.0), search(5500.0, 6100.0), search(None, 900.0)]) == \
        [900.0, 5000.0, 5500.0, 6100.0]


def test_the_paired_part_decides_the_first_headline_where_it_ran():
    above = uniform_doc({"none": (5000.0, 5500.0), "coordinated": (6100.0, 6700.0)})
    assert cm.paper_verdicts(above)[0][1] == cm.NOT_MEASURED
    even = paired_doc({"none": {5000.0: "sss", 5500.0: "suu", 6100.0: "uuu", 6700.0: "uuu"},
                       "coordinated": {5000.0: "sss", 5500.0: "uus", 6100.0: "suu", 6700.0: "uuu"}})
    assert cm.paired_ratios(even) == {"q3": 1.0}
    _, mark, reason = cm.paper_verdicts(above, paired=even.to_json())[0]
    assert mark == cm.REPRODUCED
    assert "q3 1.00 (all within" in reason and "q3 from the two side by side in 3 rounds" in reason \
        and "where one search each gave q3 1.22" in reason
    still = paired_doc({"none": {5000.0: "sss", 6100.0: "uuu"}, "coordinated": {5000.0: "sss", 6100.0: "ssu"}})
    _, mark, reason = cm.paper_verdicts(above, paired=still)[0]
    assert mark == cm.NOT_MEASURED and "coordinated above none even side by side in q3 (1.22)" in reason
    # a --quick paired run decides nothing
    assert cm.paper_verdicts(above, paired=replace(even, quick=True))[0][1] == cm.NOT_MEASURED
    table = cm.markdown(even.to_json())
    assert "| q3 | 5,500 | 1/3 | +1.0% | 1/3 | +1.0% |" in table
    assert "| q3 | 5,000 | 5,000 | 1.00 | 4 of 12 / 5 of 12 |" in table
    assert cm.headline(even) == "none and coordinated side by side, 3 rounds: coordinated's MST × none's q3 1.00"
    assert cm.page_block("paired", 2) == "checkmate-paired"


def test_the_paired_part_is_planned_and_draws_its_chart(tmp_path):
    from experiments.report import plots

    full = cm.plan(cm.FULL, "paired", msts_given=True)
    assert full.paired_probes == 4 * 3 * 2 * 3 and full.rows == 0 and full.seconds < 60 * MINUTES
    assert "72 paired probes" in full.describe() and not full.describe().endswith("; ")
    quick = cm.plan(cm.QUICK, "paired")
    assert quick.paired_probes == 1 * 2 * 2 * 1 and quick.seconds < 5 * MINUTES
    plots.plot_checkmate(paired_doc({"none": {5000.0: "s"}, "coordinated": {5000.0: "s"}}), str(tmp_path / "p.png"))
    assert (tmp_path / "p.png").stat().st_size > 10_000


def test_logio_runs_too_short_read_too_short_and_decide_nothing():
    from experiments.spark import stragglers

    rows = []
    for protocol, failures in [("none", 0)] + [(p, n) for n in stragglers.FAILURES for p in ("coordinated", "logio")]:
        rows.append(stragglers.Row(setting="straggler_moderate", protocol=protocol, failures=failures, wall_s=50.0,
                                   throughput=1000.0, latency_p50_ms=40.0, latency_p99_ms=90.0, checkpoint_ms=1.5,
                                   recovery_ms=500.0, restart_ms=20.0, replayed=0, exactly_once=True,
                                   metrics={"Checkpoints": 2 if protocol == "logio" else 20, "SteadySeconds": 45.0},
                                   overhead_pct=1.0))
    doc = stragglers.Stragglers(quick=False, backend="indexed_fs", parallelism=2, straggler=1,
                                settings=[stragglers.FULL[0]], victims={"straggler_moderate": 0}, seconds=600.0,
                                rows=rows, paper=stragglers.PAPER)
    table = stragglers.markdown(doc)
    assert next(line for line in table if line.startswith("| logio | 1 |")).startswith("| logio | 1 | 50.0 | too short |")
    assert next(line for line in table if line.startswith("| coordinated | 1 |")).startswith(
        "| coordinated | 1 | 50.0 | +1.0 |")
    assert "| | ours | too short | too short / too short / too short | +1.0 |" in "\n".join(table)
    mark, reason = stragglers.verdict(doc)
    assert mark == "*not yet measured at full size*" and "2 checkpoints < 3" in reason


def test_the_headlines_block_is_made_from_the_reproduce_documents(tmp_path):
    from experiments.reproduce import papers
    from experiments.reproduce.result import Reproduce, StepRun

    out = tmp_path / "results"
    out.mkdir()
    two = uniform_doc({"none": (5000.0, 5500.0), "coordinated": (4900.0, 5400.0),
                       "uncoordinated": (4400.0, 4800.0), "cic": (3000.0, 3300.0)})
    for name, doc, quick in (("checkmate", two, False), ("checkmate-skew", skew_doc(900.0, 150.0), True)):
        rep = Reproduce(name=name, shows="", quick=quick, started="2026-11-27T10:00:00+0000",
                        runs=[StepRun("run", "bench checkmate", 0, 1.0, "log", "run.json", document=doc.to_json())])
        (out / f"{name}.json").write_text(json.dumps(rep.to_json()))
    earlier = "- **CheckMate: uncoordinated's relative gain under skew (Fig 12)**: *reproduced* — earlier figures."
    text = papers.block(str(out), earlier)
    lines = text.splitlines()
    assert len(lines) == 5
    assert lines[0].startswith("- **CheckMate: coordinated ≈ none on uniform input") and "*reproduced* — " in lines[0]
    assert "(measured in `bench reproduce checkmate` of 2026-11-27)" in lines[0]
    assert lines[3] == earlier  # the skew run here is --quick: the measured line stands
    assert "*not yet measured at full size*" in lines[2] and "*not yet measured at full size*" in lines[4]
    # a full run here that decides nothing (none's bracket too wide) replaces an older verdict
    wide = uniform_doc({"none": (5000.0, 7000.0), "coordinated": (5600.0, 6000.0)})
    rep = Reproduce(name="checkmate", shows="", quick=False, started="2026-11-28T10:00:00+0000",
                    runs=[StepRun("run", "bench checkmate", 0, 1.0, "log", "run.json", document=wide.to_json())])
    (out / "checkmate.json").write_text(json.dumps(rep.to_json()))
    first = papers.block(str(out), text).splitlines()[0]
    assert "*not yet measured at full size*" in first and "undecided: q3" in first and "of 2026-11-28" in first


def test_reproduce_runs_checkmate_in_parts_each_with_its_own_chart():
    from experiments.reproduce import run as reproduce

    cmd = {name: reproduce.command(reproduce.EXPERIMENTS[name].steps[0].argv("results", name, False))
           for name in ("checkmate", "checkmate-skew", "checkmate-parallelism", "checkmate-paired")}
    assert cmd["checkmate"].startswith("bench checkmate --docs docs/checkmate.md --json results/checkmate/run.json")
    assert cmd["checkmate-skew"].startswith("bench checkmate --part skew --mst-from results/checkmate/run.json ")
    assert cmd["checkmate-parallelism"].startswith("bench checkmate --parallelism 4 ")
    assert cmd["checkmate-paired"].startswith("bench checkmate --part paired --mst-from results/checkmate/run.json ")
    plots = [reproduce.EXPERIMENTS[n].steps[0].paths("results", n)["plot"] for n in cmd]
    assert plots == ["results/checkmate.png", "results/checkmate-skew/checkmate-skew.png",
                     "results/checkmate-parallelism/checkmate-parallelism.png",
                     "results/checkmate-paired/checkmate-paired.png"]
    assert cm.page_block("skew", 2) == "checkmate-skew" and cm.page_block("uniform", 4) == "checkmate-parallelism"
