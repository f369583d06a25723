"""``app/engine`` has no import cycle: the module graph read from the sources (``ast``) is acyclic.

Every ``import`` and ``from … import`` counts, at any depth (inside functions and methods too: an import deferred
into a function still makes the two modules depend on each other). Imports under ``if TYPE_CHECKING:`` do not
count: they never run. ``from pkg import name`` is an edge to ``pkg.name`` when that is a module, else to ``pkg``
(a package's ``__init__`` is the module ``pkg``; the implicit import of a submodule's parent package is not an
edge). A package that exports names lazily (a ``_LAZY`` table of name ->
submodule, PEP 562) makes ``from pkg import name`` an edge to that submodule too, since that is what runs.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.conftest import REPO_ROOT

ENGINE = REPO_ROOT / "app" / "engine"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO_ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _lazy_table(tree: ast.Module) -> dict[str, str]:
    """A package's ``_LAZY = {"Name": "submodule", ...}`` table (empty when it has none)."""
    for node in tree.body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets)
                and isinstance(node.value, ast.Dict)):
            pairs = zip(node.value.keys, node.value.values, strict=True)
            return {ast.literal_eval(k): ast.literal_eval(v) for k, v in pairs if k is not None}
    return {}


def _imported(tree: ast.AST, module: str, is_package: bool, known: set[str],
              lazy: dict[str, dict[str, str]]) -> set[str]:
    """The modules of ``known`` that ``tree`` (the source of ``module``) imports, outside ``if TYPE_CHECKING:``;
    ``lazy``: package -> its lazy-export table."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import):
            for alias in node.names:
                found.add(alias.name)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                package = module.split(".") if is_package else module.split(".")[:-1]
                base_parts = package[:len(package) - (node.level - 1)]
                base = ".".join([*base_parts, *([node.module] if node.module else [])])
            else:
                base = node.module or ""
            for alias in node.names:
                if f"{base}.{alias.name}" in known:  # a submodule
                    found.add(f"{base}.{alias.name}")
                elif alias.name in lazy.get(base, {}):  # a name the package imports on first use
                    found.add(f"{base}.{lazy[base][alias.name]}")
                else:  # a name the module defines
                    found.add(base)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return {m for m in found if m in known and m != module}


def engine_graph() -> dict[str, set[str]]:
    """Module -> the engine modules it imports."""
    trees = {p: ast.parse(p.read_text(encoding="utf-8"), str(p)) for p in sorted(ENGINE.rglob("*.py"))}
    known = {_module_name(p) for p in trees}
    lazy = {_module_name(p): _lazy_table(t) for p, t in trees.items() if p.name == "__init__.py"}
    return {_module_name(p): _imported(t, _module_name(p), p.name == "__init__.py", known, lazy)
            for p, t in trees.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted; a self-import counts."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def connect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                connect(w)
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
            if len(component) > 1 or v in graph[v]:
                found.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            connect(v)
    return found


def test_the_graph_sees_the_engine() -> None:
    graph = engine_graph()
    assert len(graph) > 50
    assert "app.engine.tokenizer" in graph["app.engine.encoding"]  # a top-level relative import
    assert "app.engine.native" in graph["app.engine.tokenizer"]  # an import inside a method
    assert "app.engine.pipeline.pipeline" in graph["app.engine.pipeline.hf_json"]


def test_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"a": {"b"}, "b": set()}) == []


def test_engine_has_no_import_cycle() -> None:
    found = cycles(engine_graph())
    assert found == [], "import cycles in app/engine:\n" + "\n".join(" <-> ".join(c) for c in found)
