"""The one error type of the Spark integration.

A subclass of :class:`backends.base.CkptError` (so ``bench`` reports it as one line) and of
``ValueError`` (most of them are settings that cannot be used as given).  It lives in its own
module so that every other module can raise it without importing the conf parser.
"""

from __future__ import annotations

from backends.base import CkptError


class SparkIntegrationError(CkptError, ValueError):
    """A Spark-integration setting or state that cannot be used as given."""
