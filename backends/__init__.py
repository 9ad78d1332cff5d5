"""Checkpoint stores behind one interface (see ``base.Backend``) and the registry that opens them."""

from .base import (
    Backend,
    BackendUnavailableError,
    BadKeyError,
    BadOptionError,
    Claim,
    CkptError,
    CorruptDataError,
    ForeignDirectoryError,
    Option,
    Retry,
    StorageFullError,
    StoreClosedError,
    StoreLockedError,
    UnknownBackendError,
    ValueTooLargeError,
    parse_kv,
)
from .registry import backend_class, backend_names, open_backend, register

__all__ = [
    "Backend",
    "BackendUnavailableError",
    "BadKeyError",
    "BadOptionError",
    "Claim",
    "CkptError",
    "CorruptDataError",
    "ForeignDirectoryError",
    "Option",
    "Retry",
    "StorageFullError",
    "StoreClosedError",
    "StoreLockedError",
    "UnknownBackendError",
    "ValueTooLargeError",
    "backend_class",
    "backend_names",
    "open_backend",
    "parse_kv",
    "register",
]
