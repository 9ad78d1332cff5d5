"""backends/failpoints.py: the spec's grammar, arming, the hit count on which a point fires, and
what a fired point leaves (exit status 87, one stderr line, no cleanup run).  Firing ends the
process, so those cases run in a child."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from backends import failpoints

ROOT = Path(__file__).resolve().parents[1]


def child(code: str, spec: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k not in (failpoints.ENV, "PYTHONUNBUFFERED")}
    if spec is not None:
        env[failpoints.ENV] = spec
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=60)


@pytest.fixture(autouse=True)
def disarmed():
    failpoints.arm(None)
    yield
    failpoints.arm(None)


@pytest.mark.parametrize("spec, parsed", [
    ("a", {"a": 1}),
    ("a@3", {"a": 3}),
    ("a@3,b", {"a": 3, "b": 1}),
    (" a@2 , b@10 ,", {"a": 2, "b": 10}),
    ("", {}),
])
def test_parse_reads_names_and_hit_counts(spec, parsed):
    assert failpoints.parse(spec) == parsed


@pytest.mark.parametrize("spec", ["a@0", "a@-1", "a@x", "@3", "a@1.5"])
def test_parse_refuses_a_bad_part_and_names_it(spec):
    with pytest.raises(failpoints.FailPointSpecError) as err:
        failpoints.parse(spec)
    assert failpoints.ENV in str(err.value) and "NAME@N with N >= 1" in str(err.value)


def test_arm_and_disarm():
    failpoints.arm("x.one@2,x.two")
    assert failpoints.armed() == {"x.one": 2, "x.two": 1}
    failpoints.arm("")
    assert failpoints.armed() == {}
    failpoints.arm("x.one")
    failpoints.arm(None)
    assert failpoints.armed() == {}
    failpoints.hit("x.one")  # disarmed: returns


def test_declare_records_the_point_and_returns_its_name():
    assert failpoints.declare("test.declared", "nothing: a test's own point") == "test.declared"
    assert failpoints.DECLARED["test.declared"] == "nothing: a test's own point"
    del failpoints.DECLARED["test.declared"]


def test_an_unarmed_or_other_point_does_not_fire():
    failpoints.arm("x.armed@2")
    for _ in range(5):
        failpoints.hit("x.other")  # another name: never counted, never fires
    assert failpoints.armed() == {"x.armed": 2}


COUNT_HITS = """
    import sys
    from backends import failpoints
    for i in range(1, 6):
        print(f"before {i}", flush=True)
        failpoints.hit("x.point")
        failpoints.hit("x.other")
    print("finished", flush=True)
"""


@pytest.mark.parametrize("n", [1, 3, 5])
def test_an_armed_point_ends_the_process_on_its_nth_hit(n):
    proc = child(COUNT_HITS, f"x.point@{n}")
    assert proc.returncode == failpoints.EXIT_CODE == 87
    assert proc.stdout.splitlines() == [f"before {i}" for i in range(1, n + 1)]
    assert proc.stderr == f"[FAILPOINT] x.point hit {n}: exiting 87\n"


def test_of_two_armed_points_the_first_reached_fires():
    proc = child(COUNT_HITS, "x.point@4,x.other@2")
    assert proc.returncode == 87
    assert proc.stdout.splitlines() == ["before 1", "before 2"]
    assert proc.stderr == "[FAILPOINT] x.other hit 2: exiting 87\n"


def test_a_point_armed_beyond_the_hits_reached_lets_the_process_finish():
    proc = child(COUNT_HITS, "x.point@6")
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == "finished"
    assert proc.stderr == ""


def test_firing_runs_no_cleanup_and_flushes_no_buffer():
    """As a SIGKILL would: no ``finally``, no ``atexit``, unflushed output lost."""
    proc = child("""
        import atexit, sys
        from backends import failpoints
        atexit.register(lambda: print("atexit ran", flush=True))
        sys.stdout.write("buffered, never flushed")
        try:
            failpoints.hit("x.point")
        finally:
            print("finally ran", flush=True)
    """, "x.point")
    assert proc.returncode == 87
    assert proc.stdout == ""


def test_children_inherit_the_armed_points():
    proc = child("""
        import subprocess, sys
        r = subprocess.run([sys.executable, "-c",
                            "from backends import failpoints; failpoints.hit('x.point')"])
        print(r.returncode)
    """, "x.point")
    assert proc.returncode == 0 and proc.stdout.strip() == "87"


@pytest.mark.parametrize("spec", ["x.point@0", "x.point@many", "@2"])
def test_a_bad_spec_is_one_line_and_exit_2_before_anything_runs(spec):
    proc = child('from backends import failpoints\nprint("ran")', spec)
    assert proc.returncode == 2
    assert proc.stdout == ""
    assert proc.stderr.count("\n") == 1 and proc.stderr.startswith("error: ")
    assert f"{failpoints.ENV}={spec!r}" in proc.stderr and "Traceback" not in proc.stderr


def test_an_empty_spec_arms_nothing():
    proc = child(COUNT_HITS, "")
    assert proc.returncode == 0 and proc.stdout.splitlines()[-1] == "finished"
