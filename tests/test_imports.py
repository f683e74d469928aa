"""The package's import graph, read from the source: no circle at import time, and none (lazy imports
counted) through the settings, the config reader and the model client's rooms."""

from __future__ import annotations

import ast
from pathlib import Path

import hermes_exp

PACKAGE = Path(hermes_exp.__file__).parent
# Foundations: what they import must never import them back, not even inside a function.
FOUNDATIONS = ["hermes_exp.settings.resolved", "hermes_exp.settings.sections", "hermes_exp.money.budget", "hermes_exp.money.cost"]


def modules() -> dict[str, Path]:
    found = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ("hermes_exp", *path.relative_to(PACKAGE).with_suffix("").parts)
        found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def _is_type_checking(node: ast.AST) -> bool:
    test = getattr(node, "test", None)
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(test)


def _imports(node: ast.AST, lazy: bool) -> list[ast.Import | ast.ImportFrom]:
    """Import statements run at import time (lazy: also those inside functions); never TYPE_CHECKING ones."""
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [node]
    if _is_type_checking(node) or (not lazy and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))):
        return []
    return [found for child in ast.iter_child_nodes(node) for found in _imports(child, lazy)]


def graph(lazy: bool) -> dict[str, set[str]]:
    known = modules()
    edges: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for node in _imports(ast.parse(path.read_text(encoding="utf-8")), lazy):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            else:
                base = node.module or ""
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in known else base for a in node.names]
            edges[name] |= {t for t in targets if t in known and t != name}
    return edges


def cycles(edges: dict[str, set[str]]) -> list[set[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iteratively)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[set[str]] = []
    for root in edges:
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    work.append((child, iter(sorted(edges[child]))))
                elif child in stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = set()
                while True:
                    member = stack.pop()
                    component.add(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(component)
    return found


def test_cycle_finder_finds_a_circle() -> None:
    edges = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(edges) == [{"a", "b", "c"}]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_import_walker_tells_import_time_from_lazy() -> None:
    tree = ast.parse("import a\nif TYPE_CHECKING:\n    import b\ntry:\n    import c\nexcept ImportError:\n    pass\n"
                     "class K:\n    import d\ndef f():\n    import e\n")

    def names(lazy: bool) -> list[str]:
        return [alias.name for node in _imports(tree, lazy) for alias in node.names]

    assert names(lazy=False) == ["a", "c", "d"]
    assert names(lazy=True) == ["a", "c", "d", "e"]


def test_no_import_cycle_at_module_level() -> None:
    edges = graph(lazy=False)
    assert "hermes_exp.model.retry" in edges["hermes_exp.model.client"]
    assert cycles(edges) == []


def test_settings_and_the_model_client_are_in_no_circle_even_lazily() -> None:
    edges = graph(lazy=True)
    assert "hermes_exp.model.checks" in edges["hermes_exp.run.checks"]  # the graph sees lazy imports
    rooms = {name for name in edges if name.startswith("hermes_exp.agent.")} | set(FOUNDATIONS)
    tangled = [sorted(component & rooms) for component in cycles(edges) if component & rooms]
    assert tangled == []
    # The client is handed its key: it never reaches back into the settings.
    assert "hermes_exp.settings.resolved" not in edges["hermes_exp.model.client"]
