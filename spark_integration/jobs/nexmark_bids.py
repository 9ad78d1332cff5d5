"""NexMark bids, keyed count of bids per auction (Q12-style keyed aggregation).

Same conf keys and arguments as ``wordcount.py``; the events are NexMark bids keyed by auction.
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from wordcount import main  # noqa: E402  (a job script, run by spark-submit)

if __name__ == "__main__":
    sys.exit(main(kind="bids"))
