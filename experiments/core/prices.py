"""Prices: a table of list prices (``prices.toml`` beside this module, or ``--prices FILE``) and
the arithmetic that turns a request ledger and stored bytes into dollars.

The table names providers (S3 Standard, GCS Standard, Azure Blob Hot, EBS gp3); each says which
backends its prices apply to, when and where they were read, its price per GB-month, its price
classes (dollars per 1,000 requests) and which class each request type the ledger counts
(:mod:`backends.ledger`) falls in.  The arithmetic is pure: a request type in no class costs
nothing and is reported as unpriced, never guessed.

What a month costs (:func:`monthly`) is the requests of a month of checkpoints at a given
interval plus the bytes the store holds for a month; restores are priced each, not by the month
(how often a job fails is not a property of the store).
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass, field
from typing import Any, Mapping

from backends.base import BadOptionError

#: the price table used unless ``--prices FILE`` names another
DEFAULT_TABLE = os.path.join(os.path.dirname(__file__), "prices.toml")
#: how messages and the [COST] lines name it (its place in the repository)
DEFAULT_NAME = "experiments/core/prices.toml"
#: seconds in a billing month (AWS, GCP and Azure price a month as 730 hours)
MONTH_S = 730 * 3600.0


@dataclass(frozen=True)
class Provider:
    """One provider's list prices (see the module doc and the table's header)."""

    name: str
    title: str
    backends: tuple[str, ...]
    date: str
    source: str
    confirmed: bool
    storage_gb_month: float
    requests: Mapping[str, float] = field(default_factory=dict)  # class -> $ per 1,000
    classes: Mapping[str, str] = field(default_factory=dict)  # request type -> class
    note: str = ""
    #: the class of a type ``classes`` does not name (None: such a type is unpriced)
    default_class: str | None = None

    def request_cost(self, requests: Mapping[str, float]) -> tuple[float, list[str]]:
        """Dollars for ``requests`` (type -> count, counts may be fractional: a median), and
        the types it could not price (in no class)."""
        dollars, unpriced = 0.0, []
        for kind, n in requests.items():
            cls = self.classes.get(kind, self.default_class)
            if cls is None:
                unpriced.append(kind)
                continue
            dollars += n * self.requests[cls] / 1000.0
        return dollars, sorted(unpriced)

    def storage_cost(self, nbytes: float, seconds: float, gb_bytes: int) -> float:
        """Dollars for holding ``nbytes`` for ``seconds``."""
        return nbytes / gb_bytes * self.storage_gb_month * seconds / MONTH_S


@dataclass(frozen=True)
class PriceTable:
    """A price table file: its providers and the bytes it calls a GB."""

    path: str
    gb_bytes: int
    providers: tuple[Provider, ...]

    def for_backend(self, backend: str) -> list[Provider]:
        """The providers whose prices apply to a run on ``backend``."""
        return [p for p in self.providers if backend in p.backends]


def load(path: str | None = None) -> PriceTable:
    """The price table at ``path`` (default :data:`DEFAULT_TABLE`); a file that is missing,
    not TOML or not of the table's shape is one :class:`BadOptionError` naming the problem."""
    shown = path or DEFAULT_NAME
    path = path or DEFAULT_TABLE
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except OSError as exc:
        raise BadOptionError(f"--prices {path}: cannot read it ({exc.strerror or exc}); give a "
                             f"TOML price table like {DEFAULT_NAME}") from None
    except tomllib.TOMLDecodeError as exc:
        raise BadOptionError(f"--prices {path}: not TOML ({exc}); give a price table like "
                             f"{DEFAULT_NAME}") from None
    return parse(data, shown)


def parse(data: Mapping[str, Any], path: str = "<table>") -> PriceTable:
    """A :class:`PriceTable` from a table's parsed TOML (see :func:`load`)."""
    def bad(what: str) -> BadOptionError:
        return BadOptionError(f"--prices {path}: {what}; see {DEFAULT_NAME} for the shape")

    providers = data.get("providers")
    if not isinstance(providers, dict) or not providers:
        raise bad("no [providers.NAME] table")
    out = []
    for name, p in providers.items():
        if not isinstance(p, dict):
            raise bad(f"providers.{name} is not a table")
        try:
            requests = {str(k): _price(v) for k, v in (p.get("requests") or {}).items()}
            classes = {str(k): str(v) for k, v in (p.get("classes") or {}).items()}
            storage = _price(p["storage_gb_month"])
        except KeyError as exc:
            raise bad(f"providers.{name} has no {exc.args[0]}") from None
        except (TypeError, ValueError):
            raise bad(f"providers.{name}: a price that is not a number >= 0") from None
        default = p.get("default_class")
        unknown = sorted((set(classes.values()) | ({str(default)} if default else set()))
                         - set(requests))
        if unknown:
            raise bad(f"providers.{name}.classes names the price class {unknown[0]!r}, "
                      f"which providers.{name}.requests does not price")
        out.append(Provider(name=name, title=str(p.get("title", name)),
                            backends=tuple(map(str, p.get("backends", ()))),
                            date=str(p.get("date", "")), source=str(p.get("source", "")),
                            confirmed=bool(p.get("confirmed", False)), storage_gb_month=storage,
                            requests=requests, classes=classes, note=str(p.get("note", "")),
                            default_class=str(default) if default else None))
    gb = data.get("gb_bytes", 1 << 30)
    if type(gb) is not int or gb <= 0:
        raise bad(f"gb_bytes = {gb!r} is not a positive integer")
    return PriceTable(path=path, gb_bytes=gb, providers=tuple(out))


def _price(value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value >= 0:
        raise ValueError(value)
    return float(value)


def monthly(provider: Provider, checkpoint_requests: Mapping[str, float], interval_s: float,
            stored_bytes: float, gb_bytes: int) -> dict[str, float]:
    """A month of checkpoints every ``interval_s`` seconds, each sending
    ``checkpoint_requests`` (type -> mean count), with ``stored_bytes`` held all month:
    ``requests``, ``storage`` and ``total`` dollars."""
    per_checkpoint, _ = provider.request_cost(checkpoint_requests)
    requests = per_checkpoint * MONTH_S / interval_s if interval_s > 0 else 0.0
    storage = provider.storage_cost(stored_bytes, MONTH_S, gb_bytes)
    return {"requests": requests, "storage": storage, "total": requests + storage}
