"""The house's layering, checked from the code's own imports (stdlib ``ast``, nothing run).

Layers, bottom up: ``backends`` and ``services`` -> ``workloads`` and ``spark_integration`` ->
``experiments`` -> ``bench`` (the CLI).  The rules:

* no import runs up a layer (function-local imports included: they run too);
* ``backends`` imports nothing of the project above it, and ``services`` only ``backends``;
* no two files import each other, directly or around a longer circle;
* ``workloads`` uses the backend interface, never one backend's own modules;
* nothing below ``experiments`` draws charts (matplotlib lives in ``experiments/report/plots.py``);
* the CLI stays thin: every ``bench/*.py`` is at most 400 lines.

Imports under ``if TYPE_CHECKING:`` are left out: they never run.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
LAYER = {"backends": 0, "services": 0, "workloads": 1, "spark_integration": 1,
         "experiments": 2, "bench": 3}
#: packages a package of the same layer may still import (same floor, one direction)
SAME_FLOOR = {"services": {"backends"}, "spark_integration": {"workloads"}}
#: the families of ``experiments``, bottom up (same number: neither imports the other)
EXPERIMENT_FLOORS = {"core": 0, "audit": 1, "spark": 1, "report": 2, "storage": 3, "reproduce": 4}
#: the backends' own packages (their internals are nobody's business above backends)
BACKEND_PACKAGES = {p.name for p in (ROOT / "backends").iterdir()
                    if (p / "__init__.py").exists() and p.name != "media"}


def _module_of(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _files() -> dict[str, Path]:
    out = {}
    for top in LAYER:
        for path in sorted((ROOT / top).rglob("*.py")):
            out[_module_of(path)] = path
    return out


FILES = _files()


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _import_nodes(tree: ast.AST):
    """Every import that runs (anywhere in the file), skipping ``if TYPE_CHECKING:`` bodies."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.If) and _is_type_checking(node):
            stack.extend(node.orelse)
            continue
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
        stack.extend(ast.iter_child_nodes(node))


def _resolve(module: str, is_package: bool, node: ast.AST) -> list[str]:
    """Project modules ``node`` imports (the most specific existing module for each name)."""
    if isinstance(node, ast.Import):
        return [n.name for n in node.names]
    assert isinstance(node, ast.ImportFrom)
    if node.level:
        base = module.split(".")
        if not is_package:
            base = base[:-1]
        base = base[: len(base) - (node.level - 1)]
        target = ".".join(base + ([node.module] if node.module else []))
    else:
        target = node.module or ""
    out = []
    for alias in node.names:
        sub = f"{target}.{alias.name}"
        if sub in FILES:
            out.append(sub)
        elif not _is_extension(sub):  # a name defined in the package's __init__
            out.append(target)
    return out


def _is_extension(module: str) -> bool:
    """A compiled module (its C source sits where a .py would): not part of the Python graph."""
    return ROOT.joinpath(*module.split(".")).with_suffix(".c").exists()


def _graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for module, path in FILES.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        targets: set[str] = set()
        for node in _import_nodes(tree):
            for name in _resolve(module, path.name == "__init__.py", node):
                while name and name not in FILES and name.split(".")[0] in LAYER:
                    if _is_extension(name):
                        break
                    name = name.rpartition(".")[0]
                if name in FILES and name != module:
                    targets.add(name)
        graph[module] = targets
    return graph


GRAPH = _graph()


def _top(module: str) -> str:
    return module.split(".")[0]


def test_the_graph_sees_the_house():
    """The checker itself: it finds the imports it is meant to judge."""
    assert "experiments.core.run" in GRAPH["bench.run_cli"]
    assert "backends.base" in GRAPH["backends.registry"] or "backends.base" in GRAPH["backends"]
    assert "workloads.runner" in GRAPH["experiments.core.run"]


def test_no_import_runs_up_a_layer():
    upward = []
    for module, targets in GRAPH.items():
        mine = _top(module)
        for target in targets:
            theirs = _top(target)
            if theirs == mine:
                continue
            if LAYER[theirs] > LAYER[mine] or (
                    LAYER[theirs] == LAYER[mine] and theirs not in SAME_FLOOR.get(mine, ())):
                upward.append(f"{module} -> {target}")
    assert upward == []


def test_no_import_circles():
    """Tarjan's strongly connected components over file -> file imports."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    circles: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in GRAPH[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                circles.append(sorted(component))

    for v in sorted(GRAPH):
        if v not in index:
            visit(v)
    assert circles == []


def _family(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "experiments" and len(parts) > 2 else None


def test_experiment_families_import_only_downward():
    upward = []
    for module, targets in GRAPH.items():
        mine = _family(module)
        if _top(module) != "experiments":
            continue
        for target in targets:
            theirs = _family(target)
            if _top(target) != "experiments" or theirs == mine:
                continue
            if mine is None or theirs is None or (
                    EXPERIMENT_FLOORS[theirs] >= EXPERIMENT_FLOORS[mine]):
                upward.append(f"{module} -> {target}")
    assert upward == []


def test_experiments_keep_their_files_in_families():
    top = sorted(p.name for p in (ROOT / "experiments").glob("*.py"))
    families = sorted(p.name for p in (ROOT / "experiments").iterdir()
                      if (p / "__init__.py").exists())
    assert len(top) <= 8, top
    assert families == sorted(EXPERIMENT_FLOORS)


def test_workloads_use_the_interface_not_a_backends_internals():
    private = [f"{m} -> {t}" for m, ts in GRAPH.items() if _top(m) == "workloads" for t in ts
               if t.startswith("backends.") and t.split(".")[1] in BACKEND_PACKAGES]
    assert private == []


@pytest.mark.parametrize("top", ["backends", "services", "workloads", "spark_integration"])
def test_nothing_below_experiments_draws_charts(top):
    drawing = [m for m, p in FILES.items() if _top(m) == top
               if any(isinstance(n, (ast.Import, ast.ImportFrom)) and "matplotlib" in (
                   getattr(n, "module", None) or " ".join(a.name for a in n.names))
                   for n in _import_nodes(ast.parse(p.read_text(encoding="utf-8"))))]
    assert drawing == []


def test_the_cli_stays_thin():
    long = {p.name: n for p in (ROOT / "bench").glob("*.py")
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 400}
    assert long == {}
