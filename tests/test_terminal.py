"""What a person reads on a terminal: the plain tables every human report is laid out with
(:func:`experiments.core.format.text_table`) and the progress bars on stderr (:mod:`bench.progress`)."""

from __future__ import annotations

from experiments.core.format import Note, text_table


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
