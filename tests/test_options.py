"""Declared option ranges (``backends.base.Option``): pure parsing, no store is opened and no server
is needed.  A bad value gives exactly one ``BadOptionError`` whose one line names the backend, the
option, the value, what is allowed and how to fix it; every backend's defaults parse."""

from __future__ import annotations

import math
import threading

import pytest

from backends import BadOptionError, Option, backend_class, backend_names
from backends.base import LONGEST_WAIT_S


def bad(backend: str, **given) -> str:
    """The one-line message of the ``BadOptionError`` that parsing ``given`` raises."""
    with pytest.raises(BadOptionError) as err:
        backend_class(backend).parse_options(given)
    message = str(err.value)
    assert "\n" not in message
    exc = err.value
    assert exc.__cause__ is None and (exc.__context__ is None or exc.__suppress_context__), \
        "one error, not a chain"
    return message


@pytest.mark.parametrize("name", backend_names())
def test_every_backend_accepts_its_own_defaults(name):
    cls = backend_class(name)
    config = cls.parse_options({})
    assert set(config) == set(cls.all_options())
    for key, opt in cls.all_options().items():
        assert config[key] == opt.default
        # as text too (the CLI's --opt and a Spark conf give strings)
        if opt.default is not None:
            text = str(opt.default).lower() if opt.type is bool else str(opt.default)
            assert cls.parse_options({key: text})[key] == opt.default


@pytest.mark.parametrize("option", ["index_flush_interval", "compaction_interval"])
@pytest.mark.parametrize("value", [math.inf, "inf", "Infinity", -math.inf])
def test_infinite_intervals_are_rejected(option, value):
    message = bad("indexed_fs", **{option: value})
    assert "backend 'indexed_fs'" in message and f"option {option}=" in message
    assert "finite" in message and f"--opt {option}=" in message


def test_interval_above_what_a_timer_can_sleep_is_rejected():
    message = bad("indexed_fs", index_flush_interval=1e10)
    assert "option index_flush_interval=10000000000.0" in message
    assert f"<= {int(LONGEST_WAIT_S)}" in message and ">= 0" in message
    assert "--opt index_flush_interval=60 (the default)" in message
    assert LONGEST_WAIT_S < threading.TIMEOUT_MAX  # the declared max is one a timer can sleep


def test_the_declared_max_itself_is_allowed():
    cls = backend_class("indexed_fs")
    assert cls.parse_options({"index_flush_interval": LONGEST_WAIT_S})["index_flush_interval"] \
        == LONGEST_WAIT_S
    assert cls.parse_options({"compaction_interval": "0"})["compaction_interval"] == 0.0


def _float_options() -> list[tuple[str, str]]:
    return [(name, key) for name in backend_names()
            for key, opt in backend_class(name).all_options().items() if opt.type is float]


@pytest.mark.parametrize("backend,option", _float_options())
@pytest.mark.parametrize("value", [math.nan, "nan", "NaN"])
def test_nan_is_rejected_for_every_float_option(backend, option, value):
    message = bad(backend, **{option: value})
    assert f"backend {backend!r}" in message and f"option {option}=nan" in message
    assert "finite" in message


@pytest.mark.parametrize("backend", ["indexed_fs", "default_fs"])
def test_empty_path_is_rejected(backend):
    message = bad(backend, path="")
    assert f"backend {backend!r}" in message and "option path=''" in message
    assert "non-empty" in message and "--opt path=" in message


@pytest.mark.parametrize("backend,given,allowed", [
    ("indexed_fs", {"segment_size": 0}, ">= 1"),
    ("indexed_fs", {"sync_interval_ms": "-5"}, ">= 1"),
    ("indexed_fs", {"compaction_live_ratio": 1.5}, "<= 1"),
    ("indexed_fs", {"index_flush_interval": -1}, ">= 0"),
    ("redis", {"timeout": 0}, "> 0"),
    ("redis", {"retries": -1}, ">= 0"),
    ("redis", {"wait_replicas": -1}, ">= 0"),
    ("redis", {"port": 70000}, "<= 65535"),
    ("hbase", {"timeout": 0}, ">= 1"),
    ("hbase", {"pool_size": 0}, ">= 1"),
    ("hbase", {"batch_size": "0"}, ">= 1"),
    ("hbase", {"retries": -1}, ">= 0"),
    ("minio", {"retries": 0}, ">= 1"),
    ("minio", {"max_workers": 0}, ">= 1"),
    ("minio", {"timeout": -1.0}, "> 0"),
    ("minio", {"prefix": "p" * 1024}, "at most 1023 utf-8 bytes"),
])
def test_out_of_range_values_name_option_value_range_and_fix(backend, given, allowed):
    (option, value), = given.items()
    message = bad(backend, **given)
    assert f"backend {backend!r}: option {option}=" in message
    assert str(value)[:20] in message and allowed in message
    assert f"e.g. --opt {option}=" in message


def test_bounds_are_inclusive_unless_declared_exclusive():
    opt = Option(float, 0.5, "a ratio", min=0, max=1)
    assert opt.convert("b", "r", 0) == 0.0 and opt.convert("b", "r", 1) == 1.0
    positive = Option(float, 1.0, "a timeout", min=0, min_exclusive=True)
    with pytest.raises(BadOptionError, match="> 0"):
        positive.convert("b", "t", 0.0)
    assert positive.convert("b", "t", "1e-9") == 1e-9


def test_finite_false_allows_infinity_but_never_nan():
    opt = Option(float, 1.0, "a limit", min=0, finite=False)
    assert opt.convert("b", "x", "inf") == math.inf
    with pytest.raises(BadOptionError):
        opt.convert("b", "x", "nan")


def test_a_default_outside_its_own_range_is_a_declaration_error():
    with pytest.raises(ValueError, match="not allowed by its own declaration"):
        Option(int, 0, "a count", min=1)
    with pytest.raises(ValueError):
        Option(str, "", "a name", nonempty=True)


def test_type_errors_still_come_first_and_alone():
    message = bad("indexed_fs", segment_size="big")
    assert "segment_size='big' is not a valid int" in message


def test_every_backend_says_what_kind_it_is_and_whether_it_keeps_a_directory():
    """Callers ask the class (``kind``, ``keeps_a_directory``) instead of probing its options
    or keeping lists of names: the two must agree for every registered backend."""
    from backends import backend_class, backend_names

    for name in backend_names():
        cls = backend_class(name)
        assert cls.kind in ("file", "embedded", "server", "memory"), name
        assert cls.keeps_a_directory() == ("path" in cls.all_options()), name
        assert (cls.kind == "memory") == (not cls.persistent), name
    assert backend_names(kind="file") == ["default_fs", "indexed_fs"]
    assert backend_names(kind="server") == ["redis", "hbase", "minio"]
