"""NexMark Q3: persons ⋈ auctions on seller = person id (state in OR/ID/CA, category 10).

    PYSPARK_PYTHON=.venv/bin/python spark-submit --master 'local[2]' \\
        --conf spark.ckptbench.protocol=logio \\
        --conf spark.ckptbench.backend=redis --conf spark.ckptbench.backend.host=127.0.0.1 \\
        spark_integration/jobs/nexmark_q3.py --events 1000000 [--keys N] [--skew hot:0.2] [--verify]

Same conf keys and arguments as ``wordcount.py``; the events are NexMark's mixed stream (1 person,
3 auctions, 46 bids per 50), ``--keys`` is the number of active persons/auctions, and the keyed
state is the join's (:mod:`spark_integration.q3`). ``--verify`` compares the final join state —
persons kept, auctions waiting, results emitted per seller — with a failure-free join.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wordcount import main  # noqa: E402  (a job script, run by spark-submit)

if __name__ == "__main__":
    sys.exit(main(kind="q3"))
