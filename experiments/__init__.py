"""Experiments: every multi-step measurement ckptbench runs, between the workloads and the CLI.

One sub-package per family, each a floor of its own (``tests/test_layering.py`` keeps the order;
a family imports only the families listed before it):

* :mod:`experiments.core`: a workload run with its baseline legs (:mod:`~experiments.core.run`,
  :mod:`~experiments.core.baselines`), compares and sweeps (:mod:`~experiments.core.compare`),
  the run spec and the result documents every other family writes (:mod:`~experiments.core.results`);
* :mod:`experiments.audit`: the durability audit (process crash and power cut) of every store;
* :mod:`experiments.spark`: the Spark protocol matrix, CheckMate's and LOG.io's experiments, the
  disk baseline of a Spark run and ``advise``, which reads their results;
* :mod:`experiments.report`: tables, plots (the one place matplotlib is imported) and the
  generated Markdown blocks of the README and ``docs/``;
* :mod:`experiments.storage`: store reopen after a crash, local disk vs NFS vs HDFS, the peer
  comparison with a server's own load tool, and the S4 thesis' figures;
* :mod:`experiments.reproduce`: ``bench reproduce``, which runs the committed experiments and
  writes their tables into ``docs/results.md`` and the README.

The CLI (:mod:`bench`) only parses arguments, calls into these packages and prints; nothing here
imports :mod:`bench`.
"""
