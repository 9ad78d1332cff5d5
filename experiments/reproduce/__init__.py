"""``bench reproduce``: the committed experiments, run in order, their tables written into
``docs/results.md`` and the README (:mod:`~experiments.reproduce.docs`)."""
