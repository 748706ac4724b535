"""The shape of the code: no import circle, no oversized module.

The import graph comes from the source (ast), function-level imports
included: an import inside a function still ties the two modules together.
Known exceptions are listed here by name, each as a strict xfail, so the test
flips to a failure (and the entry must go) the day the exception is fixed.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("orchestrator", "hostside")
MAX_LINES = 600

# Modules over MAX_LINES today, each several concepts, to be split: strict xfails.
OVERSIZED: dict[str, str] = {}
# Over the limit but one concept each: allowed, with the reason.
ONE_CONCEPT = {
    "orchestrator/fleet.py": "the fleet model and its validation (pydantic models of one document)",
    "orchestrator/restart_check.py": "the warm-restart check: plan two runs, judge each process",
}


def modules() -> dict[str, Path]:
    """Every module of the packages, by dotted name (a package by its own name)."""
    out = {}
    for package in PACKAGES:
        for path in sorted((ROOT / package).rglob("*.py")):
            parts = path.relative_to(ROOT).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


def imports_of(name: str, path: Path, known: set[str]) -> set[str]:
    """The package modules `name` imports anywhere in its source (functions included)."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # `from mod import name` imports mod; `from pkg import mod` imports pkg.mod and runs pkg
            # first, so it ties the module to pkg too (a package that imports its modules would circle)
            targets = [base, *(f"{base}.{a.name}" for a in node.names if f"{base}.{a.name}" in known)]
        for target in targets:
            while target and target not in known:  # `import a.b.c` of a non-module attribute: its module
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph() -> dict[str, set[str]]:
    found = modules()
    known = set(found)
    return {name: imports_of(name, path, known) for name, path in found.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []
    counter = 0

    def visit(v: str) -> None:
        nonlocal counter
        index[v] = low[v] = counter
        counter += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
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
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return sorted(out)


def cycle_path(graph: dict[str, set[str]], component: list[str]) -> str:
    """One concrete circle through a component, for the failure message: a -> b -> a."""
    members = set(component)
    start = component[0]
    path, seen = [start], {start}
    while True:
        step = sorted(graph[path[-1]] & members)
        nxt = next((m for m in step if m == start and len(path) > 1), None) or next(
            (m for m in step if m not in seen), step[0]
        )
        path.append(nxt)
        if nxt in seen:
            return " -> ".join(path[path.index(nxt) :])
        seen.add(nxt)


def test_the_import_graph_sees_function_level_and_relative_imports(tmp_path):
    mod = tmp_path / "m.py"
    mod.write_text("def f():\n    from orchestrator import deploy as core\n    import hostside.layout\n")
    assert imports_of("orchestrator.x", mod, {"orchestrator", "orchestrator.deploy", "hostside.layout"}) == {
        "orchestrator",  # `from orchestrator import deploy` runs the package first
        "orchestrator.deploy",
        "hostside.layout",
    }


def test_a_module_that_imports_a_sibling_through_its_package_circles_with_a_package_that_imports_it(tmp_path):
    pkg = tmp_path / "pkg"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("from pkg.a import thing\n")
    (pkg / "a.py").write_text("from pkg import b\nthing = b\n")
    known = {"pkg", "pkg.a", "pkg.b"}
    graph = {
        "pkg": imports_of("pkg", pkg / "__init__.py", known),
        "pkg.a": imports_of("pkg.a", pkg / "a.py", known),
        "pkg.b": set(),
    }
    assert circles(graph) == [["pkg", "pkg.a"]]
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert cycle_path({"a": {"b"}, "b": {"a"}}, ["a", "b"]) == "a -> b -> a"


def test_no_import_circle_in_orchestrator_or_hostside():
    graph = import_graph()
    found = circles(graph)
    assert not found, "import circles:\n  " + "\n  ".join(cycle_path(graph, c) for c in found)


def _size_cases() -> list[object]:
    cases: list[object] = []
    for path in modules().values():
        rel = path.relative_to(ROOT).as_posix()
        if rel in OVERSIZED:
            mark = pytest.mark.xfail(strict=True, reason=f"over {MAX_LINES} lines: {OVERSIZED[rel]}")
            cases.append(pytest.param(rel, marks=mark, id=rel))
        elif rel not in ONE_CONCEPT:
            cases.append(pytest.param(rel, id=rel))
    return cases


@pytest.mark.parametrize("rel", _size_cases())
def test_no_module_is_over_600_lines(rel):
    lines = len((ROOT / rel).read_text().splitlines())
    assert lines <= MAX_LINES, f"{rel} has {lines} lines (limit {MAX_LINES}): split it by concept"
