"""``python -m bench`` = the ``bench`` console script."""

import sys

from .cli import main

sys.exit(main())
