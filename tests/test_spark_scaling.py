"""``bench spark-matrix --cluster``'s pure parts: the scaling document, its tables and headline,
and the one-line refusals of options ``--cluster`` takes (the runs on a cluster are too slow for
CI: ``bench reproduce cluster-scaling``)."""

from __future__ import annotations

import argparse

from bench.spark_matrix_cli import add_parser, run
from experiments.spark.matrix_result import Matrix, Row
from experiments.spark.scaling_result import (EXECUTOR_LOSS, Scaling, headline, markdown, speedup,
                                              to_text)
from spark_integration.job import JobSpec


def _row(protocol, backend, tput, ckpt=None, recovery=None, loss=None, skipped=None):
    metrics = {EXECUTOR_LOSS: loss} if loss is not None else {}
    return Row(protocol=protocol, backend=backend, throughput=tput, checkpoint_ms=ckpt, recovery_ms=recovery,
               exactly_once=None if protocol == "none" or skipped else True, metrics=metrics, skipped=skipped)


def _doc():
    def matrix(p, tput, skipped=None):
        return Matrix(job=JobSpec(parallelism=p), rows=[
            _row("none", "-", 2 * tput), _row("coordinated", "redis", tput, 40.0, 9000.0, 12000.0),
            _row("coordinated", "indexed_fs", None if skipped else tput / 2, 80.0, 11000.0, 13000.0,
                 skipped=skipped)])
    return Scaling(hosts=3, cores_per_host=2, fail_node=1, fail_offset=20000,
                   matrices=[matrix(2, 1000.0), matrix(4, 1500.0), matrix(6, 1800.0, "HDFS is down")])


def test_scaling_document_round_trips_and_its_tables_give_each_parallelism_and_the_curve():
    doc = Scaling.from_json(_doc().to_json())
    assert doc.parallelisms() == [2, 4, 6] and doc.matrices[1].rows[1].throughput == 1500.0
    text = to_text(doc)
    assert doc.table == text.splitlines() and "table" not in doc.to_json()
    assert "[SCALING] parallelism 4 over 3 hosts, host 1 lost at event 20000" in text
    assert "executor loss ms" in text and "1,800          1.80x" in text
    md = "\n".join(markdown({"run": doc.to_json()}))
    assert "| coordinated | redis | 1,000 | 1,500 | 1,800 | 1.80x | 40 | 40 | 40 | 9,000 | 9,000 | 9,000 |" in md
    assert "| coordinated | redis | 1,500 | 40 | 9,000 | 12,000 | true |" in md  # parallelism 4's table
    assert "| coordinated | indexed_fs | 500 | 750 | - | - |" in md and "skipped: HDFS is down" in md
    # indexed_fs did not run at 6: no ratio from a missing end point
    assert speedup([500.0, 750.0, None]) is None and speedup([None, 1.0]) is None
    # a second run (other stores) adds its own tables after the first's
    assert "\n".join(markdown({"run": doc.to_json(), "stores": doc.to_json()})).count("| x (p=6 / p=2) |") == 2
    assert headline({"run": doc.to_json()}) == "events/s at p=6 over p=2 on 3 hosts: none 1.80x, coordinated 1.80x"


def _parser():
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers(dest="command"))
    return parser


def test_cluster_options_are_refused_in_one_line_without_cluster(capsys):
    parser = _parser()
    args = parser.parse_args(["spark-matrix", "--parallelism", "2,4", "--backends", "redis"])
    assert run(args) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "--parallelism 2,4: several instance counts run with --cluster only" in err
    args = parser.parse_args(["spark-matrix", "--fail-node", "1", "--backends", "redis"])
    assert run(args) == 2 and "give --cluster" in capsys.readouterr().err
    args = parser.parse_args(["spark-matrix", "--cluster", "--fail-node", "1", "--fail-at", "10",
                              "--fail-at", "20", "--backends", "redis"])
    assert run(args) == 2 and "at most one --fail-at" in capsys.readouterr().err
    args = parser.parse_args(["spark-matrix", "--cluster", "--master", "local[4]", "--backends", "redis"])
    assert run(args) == 2 and "--master local[4] and --cluster" in capsys.readouterr().err
    assert parser.parse_args(["spark-matrix", "--parallelism", "2,4,6"]).parallelism == [2, 4, 6]


def test_store_options_put_file_stores_on_the_clusters_hdfs_and_servers_behind_its_relay(tmp_path):
    """What every host reaches: a file backend's directory on the cluster's NameNode, a server's
    namespace without its loopback host (placement sets the relay's), and nothing for a store
    that only a local directory holds (which placement then refuses)."""
    from experiments.spark.on_cluster import store_options

    state = str(tmp_path / "state")
    assert store_options("indexed_fs", "ns1", state)["path"].startswith("hdfs://10.77.0.1:8020/ckptbench/ns1")
    assert store_options("default_fs", "ns1", state)["path"].startswith("hdfs://")
    assert store_options("rocksdb", "ns1", state) == {}
    redis = store_options("redis", "ns1", state)
    assert "host" not in redis and redis["prefix"] == "ckpt:ns1:"
    assert "endpoint" not in store_options("minio", "ns1", state)
