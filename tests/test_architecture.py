"""The house keeps its shape (docs/architecture.md): the import graph of hermes_exp (module- and
function-level imports alike) has no circle, no package imports one above it in the flow, the top level
holds only the doors and the ground floor, and no function grows past 40 lines."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "hermes_exp"
# The flow, top to bottom: a package may import its own modules and any package ranked below it.
LAYERS = [
    {"launch", "__main__", "cli", "report", "secret_guard"},
    {"run"},
    {"compress"},
    {"store", "executor"},
    {"worker"},
    {"verify", "agent"},
    {"tools"},
    {"dataset"},
    {"model", "sandbox"},
    {"mock", "money"},
    {"settings"},
    {"errors", "stops", "optional"},
]
RANK = {name: rank for rank, names in enumerate(LAYERS) for name in names}
TOP_LEVEL = {"__init__", "__main__", "launch", "errors", "stops", "optional", "secret_guard"}
MAX_FUNCTION_LINES = 40


def _modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


MODULES = _modules()


def _resolve(name: str) -> str | None:
    while name and name not in MODULES:
        name = name.rpartition(".")[0]
    return name or None


def _imports(module: str, path: Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out.update(_resolve(a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            for alias in node.names:  # `from pkg import module` imports that module
                out.add(_resolve(f"{node.module}.{alias.name}"))
    return {m for m in out if m and m != module and m.startswith("hermes_exp")}


GRAPH = {module: _imports(module, path) for module, path in MODULES.items()}


def _package(module: str) -> str:
    return module.split(".")[1] if "." in module else module


def _cycles() -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan, iteratively)."""
    index, low, stack, on, out, counter = {}, {}, [], set(), [], [0]

    def visit(root: str) -> None:
        work = [(root, iter(sorted(GRAPH[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            node, edges = work[-1]
            for nxt in edges:
                if nxt not in index:
                    index[nxt] = low[nxt] = counter[0]
                    counter[0] += 1
                    stack.append(nxt)
                    on.add(nxt)
                    work.append((nxt, iter(sorted(GRAPH[nxt]))))
                    break
                if nxt in on:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    comp = []
                    while True:
                        member = stack.pop()
                        on.discard(member)
                        comp.append(member)
                        if member == node:
                            break
                    if len(comp) > 1:
                        out.append(sorted(comp))

    for module in sorted(GRAPH):
        if module not in index:
            visit(module)
    return out


def test_the_import_graph_has_no_circle():
    assert _cycles() == []


def test_every_package_has_its_place_in_the_flow():
    unplaced = {_package(m) for m in MODULES if m != "hermes_exp"} - set(RANK)
    assert not unplaced, f"add {sorted(unplaced)} to LAYERS (and to docs/architecture.md)"


def test_no_package_imports_one_above_it():
    upward = [f"{a} -> {b}" for a, targets in GRAPH.items() if a != "hermes_exp" for b in targets
              if _package(a) != _package(b) and RANK[_package(b)] < RANK[_package(a)]]
    assert upward == []


def test_the_top_level_holds_the_doors_and_the_ground_floor_only():
    top = {p.stem for p in PACKAGE.glob("*.py")}
    assert top <= TOP_LEVEL, sorted(top - TOP_LEVEL)
    assert len(top - {"__init__"}) <= 6


def test_no_function_is_over_40_lines():
    long = []
    for module, path in MODULES.items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{module}.{node.name}: {lines} lines")
    assert long == []


def test_every_package_says_what_its_modules_are():
    """Each package's __init__ docstring names each of its modules (one line each)."""
    missing = []
    for init in PACKAGE.rglob("__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))) or ""
        for module in init.parent.glob("*.py"):
            if module.stem not in ("__init__", "__main__") and module.stem not in doc:
                missing.append(str(module.relative_to(PACKAGE)))
        for sub in init.parent.iterdir():
            if (sub / "__init__.py").is_file() and sub.name not in doc:
                missing.append(str(sub.relative_to(PACKAGE)) + "/")
    assert missing == []
