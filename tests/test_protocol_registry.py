"""The protocol registry: one table of protocols and baselines, asked by conf, runner, CLI and matrix."""

from __future__ import annotations

import os
import pickle

import pytest

from spark_integration.conf import PREFIX, from_conf
from spark_integration.protocols.base import Baseline, Protocol
from spark_integration.protocols.registry import (
    UnknownProtocolError,
    baseline_class,
    protocol_class,
    protocol_names,
    registration,
)
from spark_integration.protocols.tokens import STATS_SCHEMA, BatchPlan, InstanceStats

ALL = ["none", "uncoordinated", "coordinated", "cic", "logio", "spark-state"]


def test_lists_every_protocol_and_the_baseline():
    assert protocol_names() == ALL
    assert protocol_names(baseline=False) == ALL[:-1]
    assert protocol_names(baseline=True) == ["spark-state"]


def test_unknown_protocol_is_one_error_listing_them():
    with pytest.raises(UnknownProtocolError) as exc:
        registration("hmnr")
    assert str(exc.value) == "unknown protocol 'hmnr'; valid protocols: " + ", ".join(ALL)
    with pytest.raises(UnknownProtocolError, match="valid protocols: none, uncoordinated"):
        from_conf({PREFIX + "protocol": "hmnr"})


def test_spark_state_is_a_baseline_without_backend_or_q3_that_takes_failures():
    reg = registration("spark-state")
    assert reg.baseline and not reg.uses_backend and reg.failure_injection
    assert reg.supports("count") and not reg.supports("join")
    cls = baseline_class("spark-state")
    assert issubclass(cls, Baseline) and cls.name == "spark-state" and cls.session_conf
    with pytest.raises(ValueError, match="is a baseline"):
        protocol_class("spark-state")


def test_every_protocol_loads_under_its_name():
    for name in protocol_names(baseline=False):
        reg = registration(name)
        cls = protocol_class(name)
        assert issubclass(cls, Protocol) and cls.name == name and not reg.baseline
        assert reg.supports("count") and reg.supports("join")
    assert not registration("none").uses_backend and not registration("none").exactly_once
    with pytest.raises(ValueError, match="not a baseline"):
        baseline_class("coordinated")


def test_conf_asks_the_registry(tmp_path):
    assert from_conf({PREFIX + "protocol": "spark-state"}).writes_checkpoints is False
    with pytest.raises(ValueError, match="drop spark.ckptbench.backend"):
        from_conf({PREFIX + "protocol": "spark-state", PREFIX + "backend": "default_fs",
                   PREFIX + "backend.path": str(tmp_path)})
    s = from_conf({PREFIX + "protocol": "spark-state", PREFIX + "failAt": "100",
                   PREFIX + "checkpointLocation": str(tmp_path)})
    assert s.fail_at == (100,) and s.checkpoint_location == str(tmp_path)
    s = from_conf({PREFIX + "protocol": "logio", PREFIX + "backend": "default_fs",
                   PREFIX + "backend.path": str(tmp_path)})
    assert s.writes_checkpoints is True
    with pytest.raises(ValueError, match="give spark.ckptbench.backend.path instead"):
        from_conf({PREFIX + "protocol": "logio", PREFIX + "backend": "default_fs",
                   PREFIX + "checkpointLocation": str(tmp_path)})


def test_tokens_are_typed_frozen_and_picklable(tmp_path):
    from spark_integration.protocols.coordinated import EpochCheckpoint, EpochRestore

    plan = BatchPlan(3, EpochRestore(2, 1), EpochCheckpoint(3, False, 1, 1), expected={0: 5})
    assert pickle.loads(pickle.dumps(plan)) == plan
    with pytest.raises(AttributeError):
        plan.batch_seq = 4  # type: ignore[misc]
    assert [f.split()[0] for f in STATS_SCHEMA.split(", ")] == list(InstanceStats.__annotations__)


def test_cli_rules_come_from_the_registry(capsys):
    from bench.cli import main

    assert main(["spark", "--protocol", "spark-state", "--backend", "default_fs"]) == 2
    assert "drop --backend" in capsys.readouterr().err
    # what the baseline cannot run is refused before a Spark session starts
    assert main(["spark", "--protocol", "spark-state", "--state-bytes", "64", "--window-events", "100"]) == 2
    assert "drop spark.ckptbench.windowEvents (--window-events)" in capsys.readouterr().err
    assert main(["spark", "--protocol", "spark-state", "--fail-at", "10", "--fail-instance", "1"]) == 2
    assert "drop spark.ckptbench.failInstance" in capsys.readouterr().err
    assert main(["spark", "--protocol", "spark-state", "--resume"]) == 2
    assert "drop --resume" in capsys.readouterr().err
    assert main(["spark", "--protocol", "spark-state", "--medium", "nfs"]) == 2
    assert "have no nfs://" in capsys.readouterr().err
    assert main(["spark-matrix", "--protocols", "none,spark-state"]) == 2
    assert "'spark-state' is not a protocol; valid: none, uncoordinated, coordinated, cic, logio" in capsys.readouterr().err


def test_a_baseline_medium_holds_its_checkpoint_location(tmp_path):
    """``--medium`` places spark-state's checkpoint location (Spark's own checkpoints), in a
    fresh directory removed with the medium's when the run ends; no file backend is asked for."""
    from experiments.spark.job import store_on_medium

    settings = from_conf({PREFIX + "protocol": "spark-state"})
    with store_on_medium(settings, f"local:{tmp_path}") as placed:
        where = placed.checkpoint_location
        assert where.startswith(str(tmp_path)) and os.path.isdir(where)
        assert placed.backend is None and not placed.retain_checkpoints
    assert not os.path.exists(where)
