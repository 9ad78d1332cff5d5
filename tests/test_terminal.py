"""What a person reads on a terminal: the plain tables every human report is laid out with
(:func:`experiments.core.format.text_table`) and the progress bars on stderr (:mod:`bench.progress`)."""

from __future__ import annotations

import io
import time

import pytest

from bench.progress import Display
from experiments.core.format import Note, text_table
from workloads.status import STDERR


def test_a_table_is_plain_aligned_and_pastes_as_it_looks():
    lines = text_table(["backend", "ops/s", "first/this", "READ p50"],
                       [["indexed_fs", "13,472.1", "1.00x", "12us"],
                        ["rocksdb", "1.0", "0.78x", "3us"],
                        ["memory", "-", "-", "-"]])
    assert lines == ["backend        ops/s  first/this  READ p50",
                     "indexed_fs  13,472.1       1.00x      12us",
                     "rocksdb          1.0       0.78x       3us",
                     "memory             -           -         -"]


def test_cells_are_data_never_markup_and_explicit_alignment_wins():
    lines = text_table(["a", "b"], [["[bold]x[/bold]", ":smile: [READ]"], ["22", "y"]],
                       align="rl", indent="  ")
    assert lines == ["               a  b", "  [bold]x[/bold]  :smile: [READ]", "              22  y"]
    assert all(line == line.rstrip() and "\x1b" not in line for line in lines)


def test_a_note_row_keeps_its_lead_cells_and_widens_no_column():
    lines = text_table(["round", "backend", "ops/s"],
                       [["1", "indexed_fs", "900.0"],
                        Note(("2", "redis"), "skipped: ConnectionError: [Errno 111] refused")])
    assert lines == ["round  backend     ops/s",
                     "    1  indexed_fs  900.0",
                     "    2  redis       skipped: ConnectionError: [Errno 111] refused"]
    assert text_table(["m", "op"], [Note(("nfs",), "skipped"), ["hdfs", "put"]],
                      header=False) == ["nfs   skipped", "hdfs  put"]


# ------------------------------------------------------------------------------- progress bars
class _TTY(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_bars_nest_show_counts_and_an_eta_and_vanish_when_closed():
    out = _TTY()
    display = Display(stream=out, delay=0)
    outer = display.bar("compare, 2 rounds", 4)
    outer.update(1)
    inner = display.bar("round 1 indexed_fs run", 1000)
    inner.update(250)
    time.sleep(0.05)
    inner.update(500)
    time.sleep(0.4)  # rich redraws 4 times a second
    text = out.getvalue()
    assert "compare, 2 rounds" in text and "  round 1 indexed_fs run" in text
    assert text.index("compare, 2 rounds") < text.index("round 1 indexed_fs run")  # outer first
    assert "1/4" in text and "500/1000" in text and "ETA" in text
    print("2 sec: 500 operations; 250 current ops/sec", file=STDERR, flush=True)  # a status line
    time.sleep(0.3)
    assert "2 sec: 500 operations" in out.getvalue()  # printed by the display, above its bars
    inner.close()
    outer.close()
    assert display._live is None  # the last bar closed stops (and erases) the display


def test_no_bar_off_a_tty_nor_before_its_delay():
    plain = io.StringIO()
    bar = Display(stream=plain, delay=0).bar("load", 10)
    bar.update(5)
    bar.close()
    assert plain.getvalue() == ""
    tty = _TTY()
    bar = Display(stream=tty, delay=60).bar("load", 10)
    bar.update(5)
    bar.close()
    assert tty.getvalue() == ""


class _Recorded:
    """A progress factory's bar that remembers what it was told."""

    bars: list["_Recorded"] = []

    def __init__(self, label: str, total: int | None) -> None:
        self.label, self.total, self.done, self.closed = label, total, [], False
        _Recorded.bars.append(self)

    def update(self, done: int) -> None:
        self.done.append(done)

    def close(self) -> None:
        self.closed = True


def test_compare_shows_one_bar_of_runs_around_each_runs_load_and_run():
    from experiments.core import compare
    from workloads import core
    from workloads.runner import ClientSettings

    _Recorded.bars = []
    compare.compare(["memory"], {}, core.preset("ycsb-c", records=50, operations=60),
                    ClientSettings(operations=60, seed=1), config={}, rounds=2,
                    progress=_Recorded)
    outer, *inner = _Recorded.bars
    assert (outer.label, outer.total, outer.done[-1]) == ("compare, 2 rounds", 3, 3)
    assert [b.label for b in inner] == ["warm-up memory load", "warm-up memory run",
                                        "round 1 memory load", "round 1 memory run",
                                        "round 2 memory load", "round 2 memory run"]
    assert inner[2].total == 50 and inner[3].total == 60 and inner[3].done[-1] == 60
    assert all(b.closed for b in _Recorded.bars)


@pytest.mark.crash
def test_a_crashed_load_shows_its_progress_from_the_child(tmp_path):
    """``bench recovery --crash`` loads in a child that is SIGKILLed: the child counts its keys
    into shared memory and the parent's bar reads them."""
    from experiments.storage import recovery

    _Recorded.bars = []
    out = recovery.recovery("indexed_fs", {"path": str(tmp_path / "store")}, records=3000,
                            value_size=64, crash_load=True, progress=_Recorded)
    load = _Recorded.bars[0]
    assert (load.label, load.total, load.done[-1], load.closed) == ("load", 3000, 3000, True)
    assert load.done == sorted(load.done)
    assert out.recovery.intact and out.crash_load.keys == 3000
