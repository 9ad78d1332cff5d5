"""Experiments: every multi-step measurement ckptbench runs, between the workloads and the CLI.

A workload run with its baseline legs, recovery timing, compares and sweeps, the S4 thesis'
figures, storage-compare (local disk vs NFS), the peer comparison with a server's own load tool,
and the Spark protocol matrix all live here, as do the one plotting module (:mod:`experiments.plots`)
and the result documents (:mod:`experiments.results`).  The CLI (:mod:`bench`) only parses
arguments, calls into this package and prints; nothing here imports :mod:`bench`.
"""
