"""The one error type of the Spark integration, and the one line a store's failure becomes.

A subclass of :class:`backends.base.CkptError` (so ``bench`` reports it as one line) and of
``ValueError`` (most of them are settings that cannot be used as given).  It lives in its own
module so that every other module can raise it without importing the conf parser.
"""

from __future__ import annotations

import re

from backends.base import CkptError


class SparkIntegrationError(CkptError, ValueError):
    """A Spark-integration setting or state that cannot be used as given."""


#: the last ``backends.base.<Name>Error: message`` line of an executor's Python traceback
_STORE_ERROR = re.compile(r"^backends\.base\.(\w+Error): (.+)$", re.M)
#: what to do about a store error no recovery can cure, by its type
_STORE_FIX = {
    "StorageFullError": "give the store more room (Redis: its maxmemory; a disk: free space) "
                        "or checkpoint less state (--keys, --state-bytes)",
    "ValueTooLargeError": "choose a layout whose pieces fit the store (--layout chunks "
                          "--chunk-bytes SMALLER)",
    "BackendUnavailableError": "start the store (bench services up NAME) and run the job again",
}


def store_error(exc: BaseException) -> SparkIntegrationError | None:
    """The one line to report when a micro-batch failed because the checkpoint store refused a
    write (it is full, a value is too large, the server is gone): Spark wraps the executor's
    typed error in its own exception with the whole Python traceback, which recovery cannot
    cure and a user should not have to read.  ``None`` when ``exc`` is no such failure."""
    found = _STORE_ERROR.findall(str(exc))
    if not found:
        return None
    name, message = found[-1]
    fix = _STORE_FIX.get(name, "see the store's own log")
    return SparkIntegrationError(f"the checkpoint store failed ({name}): "
                                 f"{message.strip().rstrip('.')}; {fix}")
