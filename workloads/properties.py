"""YCSB's workload files and ``-p`` properties, read into a :class:`~workloads.core.WorkloadSpec`.

A workload file is a Java ``.properties`` file, read as Java's ``Properties.load`` reads it:
``key=value``, ``key: value`` or ``key value`` per logical line, ``#`` and ``!`` start comments,
a line ending in an odd number of backslashes continues on the next, and ``\\t``, ``\\n``,
``\\uXXXX`` and ``\\x`` (= ``x``, e.g. an escaped ``:`` in a key) escapes are decoded.
Files given later and ``-p`` assignments override earlier ones, as in ``ycsb -P a -P b -p k=v``.
The shipped files are in ``workloads/ycsb/``: YCSB's six core workloads ``workloada`` ..
``workloadf`` with YCSB's properties and values, and ckptbench's ``write-heavy`` and
``checkpoint``; :func:`workload_file` finds one by name.

Properties left out take CoreWorkload's defaults (:data:`DEFAULTS`), not the ``bench ycsb-a``
shorthands' presets: ``requestdistribution=uniform``, ``maxscanlength=1000`` and YCSB's record of
``fieldcount=10`` fields of ``fieldlength=100`` bytes.  ``valuesize`` is ckptbench's own property:
the thesis' model, one opaque value of that many bytes per key (fields do not apply then).

Properties that are not workload properties (a binding's ``redis.host``, say) are kept in the
result's configuration and otherwise ignored, as YCSB ignores the ones no component reads; the
client's own (``maxexecutiontime``, ``measurement.interval`` ...) and the names YCSB acts on
that ckptbench does not are :mod:`workloads.client_properties`' job.
"""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path
from typing import Any, Callable

from .core import WorkloadError, WorkloadSpec

#: where the shipped workload files are
WORKLOAD_DIR = Path(__file__).resolve().parent / "ycsb"
#: the shorthands' names for YCSB's files
ALIASES = {f"ycsb-{c}": f"workload{c}" for c in "abcdef"}

#: CoreWorkload's defaults where they differ from WorkloadSpec's
DEFAULTS: dict[str, str] = {
    "recordcount": "1000",
    "operationcount": "1000",
    "readproportion": "0.95",
    "updateproportion": "0.05",
    "insertproportion": "0",
    "scanproportion": "0",
    "readmodifywriteproportion": "0",
    "requestdistribution": "uniform",
    "maxscanlength": "1000",
    "fieldcount": "10",
}


def _bool(text: str) -> bool:
    return text.strip().lower() == "true"  # Java's Boolean.parseBoolean


def _insert_order(text: str) -> bool:
    return text.strip() != "hashed"  # YCSB: anything but "hashed" is ordered


#: property -> (WorkloadSpec field, parser)
FIELDS: dict[str, tuple[str, Callable[[str], Any]]] = {
    "recordcount": ("records", int),
    "operationcount": ("operations", int),
    "readproportion": ("read", float),
    "updateproportion": ("update", float),
    "insertproportion": ("insert", float),
    "scanproportion": ("scan", float),
    "readmodifywriteproportion": ("rmw", float),
    "requestdistribution": ("distribution", str.strip),
    "zipfianconstant": ("zipfian_constant", float),
    "exponential.percentile": ("exponential_percentile", float),
    "exponential.frac": ("exponential_frac", float),
    "hotspotdatafraction": ("hotspot_data_fraction", float),
    "hotspotopnfraction": ("hotspot_op_fraction", float),
    "insertorder": ("ordered_inserts", _insert_order),
    "insertstart": ("insert_start", int),
    "insertcount": ("insert_count", int),
    "fieldcount": ("field_count", int),
    "fieldlength": ("field_length", int),
    "minfieldlength": ("min_field_length", int),
    "fieldlengthdistribution": ("field_length_distribution", str.strip),
    "fieldnameprefix": ("field_name_prefix", str.strip),
    "readallfields": ("read_all_fields", _bool),
    "writeallfields": ("write_all_fields", _bool),
    "minscanlength": ("min_scan_length", int),
    "maxscanlength": ("max_scan_length", int),
    "scanlengthdistribution": ("scan_length_distribution", str.strip),
    "valuesize": ("value_size", int),
    "zeropadding": ("zero_padding", int),
    "dataintegrity": ("data_integrity", _bool),
}

#: properties the client (not the workload) reads; see ``bench load --help``
CLIENT_PROPERTIES = ("threadcount", "target", "status.interval", "exporter", "exportfile",
                     "hdrhistogram.percentiles", "hdrhistogram.fileoutput",
                     "hdrhistogram.output.path", "workload", "db", "maxexecutiontime",
                     "measurement.interval", "measurementtype", "timeseries.granularity")


def _logical_lines(text: str) -> list[str]:
    """Java's logical lines: comment and blank lines dropped, a line ending in an odd number of
    backslashes joined to the next with the next one's leading whitespace removed."""
    out: list[str] = []
    pending: str | None = None
    for raw in re.split(r"\r\n|\r|\n", text):
        line = raw.lstrip(" \t\f")
        if pending is None and (not line or line[0] in "#!"):
            continue
        trailing = len(line) - len(line.rstrip("\\"))
        joined = line if pending is None else pending + line
        if trailing % 2:
            pending = joined[:-1]
            continue
        pending = None
        out.append(joined)
    if pending is not None:
        out.append(pending)
    return out


def _unescape(text: str, source: str) -> str:
    """Java's escapes: ``\\t \\n \\r \\f``, ``\\uXXXX``, and ``\\x`` = ``x`` otherwise."""
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 == len(text):
            out.append("" if c == "\\" else c)
            i += 1
            continue
        c = text[i + 1]
        if c == "u":
            digits = text[i + 2 : i + 6]
            if len(digits) < 4 or not all(d in "0123456789abcdefABCDEF" for d in digits):
                raise WorkloadError(f"{source}: malformed \\uXXXX escape in {text!r}")
            out.append(chr(int(digits, 16)))
            i += 6
            continue
        out.append({"t": "\t", "n": "\n", "r": "\r", "f": "\f"}.get(c, c))
        i += 2
    return "".join(out)


def _split(line: str) -> tuple[str, str]:
    """A logical line's raw key and raw value: the key ends at the first unescaped ``=``, ``:``
    or whitespace; whitespace, then one ``=`` or ``:``, then whitespace separate it from the
    value (Java's ``Properties.load``)."""
    i = 0
    while i < len(line) and line[i] not in "=: \t\f":
        i += 2 if line[i] == "\\" else 1
    key, rest = line[:i], line[i:]
    rest = rest.lstrip(" \t\f")
    if rest[:1] in ("=", ":"):
        rest = rest[1:].lstrip(" \t\f")
    return key, rest


def parse_lines(text: str, source: str = "<properties>") -> dict[str, str]:
    """The ``key -> value`` pairs of a ``.properties`` text, as Java's ``Properties.load`` reads
    it (see the module docstring); values keep trailing whitespace, as Java's do."""
    out: dict[str, str] = {}
    for line in _logical_lines(text):
        key, value = _split(line)
        out[_unescape(key, source)] = _unescape(value, source)
    return out


def workload_file(name: str) -> Path:
    """The shipped workload file ``name`` (``workloada``, ``ycsb-a``, ``write-heavy`` ...)."""
    path = WORKLOAD_DIR / ALIASES.get(name, name)
    if not path.is_file() or "/" in name:
        known = ", ".join(sorted(p.name for p in WORKLOAD_DIR.iterdir() if p.is_file()))
        raise WorkloadError(f"unknown workload {name!r}; shipped: {known} (or give a file "
                            f"with -P FILE)")
    return path


def resolve_file(path: str) -> Path:
    """``-P path``: the file at ``path``, or, when there is none and ``path`` is a bare name
    of a shipped workload (``-P workloada``, as YCSB's own ``-P workloads/workloada`` reads
    from its distribution), the shipped file."""
    given = Path(path)
    if given.exists() or "/" in path or not (WORKLOAD_DIR / ALIASES.get(path, path)).is_file():
        return given
    return workload_file(path)


def read_file(path: str | Path) -> dict[str, str]:
    """The properties of the workload file at ``path``, read as UTF-8 text (ASCII, which every
    shipped and YCSB workload file is, included); a file that is not, one of Java's ISO-8859-1
    files with accented text or a binary file given by mistake, is a :class:`WorkloadError`
    naming the first bad byte's line, since guessing its encoding could misread a value."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        known = ", ".join(sorted(p.name for p in WORKLOAD_DIR.iterdir() if p.is_file()))
        raise WorkloadError(f"cannot read workload file {str(path)!r}: "
                            f"{exc.strerror or exc}; give a file's path, or a shipped "
                            f"workload's name: {known}") from None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        raise WorkloadError(f"workload file {str(path)!r} is not UTF-8 text (byte "
                            f"0x{data[exc.start]:02x} on line {line}); save it as UTF-8, e.g. "
                            f"iconv -f latin1 -t utf-8") from None
    return parse_lines(text, str(path))


def assignment(text: str) -> tuple[str, str]:
    """One ``-p key=value``."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise WorkloadError(f"-p {text!r} is not key=value (e.g. -p recordcount=2000)")
    return key.strip(), value.strip()


def spec_from(props: dict[str, str], name: str = "custom") -> WorkloadSpec:
    """The workload ``props`` describe, on CoreWorkload's defaults, validated."""
    merged = {**DEFAULTS, **props}
    if "valuesize" in props:
        if "fieldcount" in props:
            raise WorkloadError("give valuesize (one opaque value) or fieldcount (YCSB's "
                                "fields), not both")
        merged["fieldcount"] = "0"
    values: dict[str, Any] = {}
    for prop, (field, parse) in FIELDS.items():
        if prop not in merged:
            continue
        try:
            values[field] = parse(merged[prop])
        except ValueError:
            raise WorkloadError(f"property {prop}={merged[prop]!r} is not a valid "
                                f"{getattr(parse, '__name__', 'value')}") from None
    return dataclasses.replace(WorkloadSpec(name=name), **values).validate()


def client_property(props: dict[str, str], key: str, parse: Callable[[str], Any],
                    default: Any = None) -> Any:
    """A client property parsed, or ``default`` when absent; one clear line when malformed."""
    if key not in props:
        return default
    try:
        return parse(props[key])
    except ValueError:
        raise WorkloadError(f"property {key}={props[key]!r} is not valid") from None


def percentiles(props: dict[str, str]) -> list[float]:
    """``hdrhistogram.percentiles`` (comma-separated); ckptbench's default adds the median and
    99.9 to YCSB's 95 and 99."""
    text = props.get("hdrhistogram.percentiles")
    if text is None:
        return [50.0, 95.0, 99.0, 99.9]
    try:
        out = [float(p) for p in text.split(",") if p.strip()]
    except ValueError:
        out = []
    if not out or not all(0 < p <= 100 for p in out):
        raise WorkloadError(f"hdrhistogram.percentiles={text!r}: give comma-separated "
                            "percentiles in (0, 100], e.g. 95,99")
    return out
