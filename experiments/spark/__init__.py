"""Spark experiments: one job run (:mod:`~experiments.spark.job`), the protocols x stores matrix,
CheckMate's and LOG.io's experiments, the disk baseline of a run, and ``advise``, which reads
the matrix's results to recommend a store, a protocol and an interval."""
