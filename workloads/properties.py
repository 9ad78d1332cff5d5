"""YCSB's workload files and ``-p`` properties, read into a :class:`~workloads.core.WorkloadSpec`.

A workload file is a Java ``.properties`` file: ``key=value`` (or ``key: value``, or
``key value``) per line, ``#`` and ``!`` start comments, a trailing backslash continues a line.
Files given later and ``-p`` assignments override earlier ones, as in ``ycsb -P a -P b -p k=v``.
The shipped files are in ``workloads/ycsb/``: YCSB's six core workloads ``workloada`` ..
``workloadf`` with YCSB's properties and values, and ckptbench's ``write-heavy`` and
``checkpoint``; :func:`workload_file` finds one by name.

Properties left out take CoreWorkload's defaults (:data:`DEFAULTS`), not the ``bench ycsb-a``
shorthands' presets: ``requestdistribution=uniform``, ``maxscanlength=1000`` and YCSB's record of
``fieldcount=10`` fields of ``fieldlength=100`` bytes.  ``valuesize`` is ckptbench's own property:
the thesis' model, one opaque value of that many bytes per key (fields do not apply then).

Properties that are not workload properties (a binding's ``redis.host``, say) are kept in the
result's configuration and otherwise ignored, as YCSB ignores the ones no component reads.
"""

from __future__ import annotations

import dataclasses
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
}

#: properties the client (not the workload) reads; see ``bench load --help``
CLIENT_PROPERTIES = ("threadcount", "target", "status.interval", "exporter", "exportfile",
                     "hdrhistogram.percentiles", "hdrhistogram.fileoutput",
                     "hdrhistogram.output.path", "workload", "db")


def parse_lines(text: str, source: str = "<properties>") -> dict[str, str]:
    """The ``key -> value`` pairs of a ``.properties`` text (see the module docstring)."""
    out: dict[str, str] = {}
    logical, pending = [], ""
    for raw in text.splitlines():
        line = pending + raw.lstrip() if pending else raw.strip()
        if not pending and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            pending = line[:-1]
            continue
        pending = ""
        logical.append(line)
    if pending:
        logical.append(pending)
    for line in logical:
        cut = min((i for i in (line.find("="), line.find(":")) if i >= 0), default=-1)
        if cut < 0:
            parts = line.split(None, 1)
            key, value = parts[0], parts[1] if len(parts) > 1 else ""
        else:
            key, value = line[:cut].strip(), line[cut + 1 :].strip()
        if not key:
            raise WorkloadError(f"{source}: a line without a property name: {line!r}")
        out[key] = value
    return out


def workload_file(name: str) -> Path:
    """The shipped workload file ``name`` (``workloada``, ``ycsb-a``, ``write-heavy`` ...)."""
    path = WORKLOAD_DIR / ALIASES.get(name, name)
    if not path.is_file() or "/" in name:
        known = ", ".join(sorted(p.name for p in WORKLOAD_DIR.iterdir() if p.is_file()))
        raise WorkloadError(f"unknown workload {name!r}; shipped: {known} (or give a file "
                            f"with -P FILE)")
    return path


def read_file(path: str | Path) -> dict[str, str]:
    """The properties of the workload file at ``path``, read as UTF-8 text (ASCII, which every
    shipped and YCSB workload file is, included); a file that is not, one of Java's ISO-8859-1
    files with accented text or a binary file given by mistake, is a :class:`WorkloadError`
    naming the first bad byte's line, since guessing its encoding could misread a value."""
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise WorkloadError(f"cannot read workload file {str(path)!r}: "
                            f"{exc.strerror or exc}") from None
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
