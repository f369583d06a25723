"""The import structure of ``app/``: no import cycle (imports inside functions count too) and no private
(``_name``) name imported from another module.

The graph is built with :mod:`ast` from the sources (nothing is imported): a module imports ``x.y`` for ``import
x.y`` and ``from x.y import z``, or ``x.y.z`` instead when ``z`` is a submodule. The parent packages' ``__init__``
files, which Python runs first, are not counted as edges (every submodule would otherwise "import" its package), so
a cycle through a package is one whose ``__init__`` imports a submodule that imports the package by name. A
package that exports names lazily (a ``_LAZY`` table of name -> submodule, PEP 562, as ``app.engine`` does) makes
``from pkg import name`` an edge to that submodule too, since that is what runs. Imports under ``if TYPE_CHECKING:``
count as well: a type-only cycle is still a cycle in the plan."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

from .conftest import REPO_ROOT

APP = REPO_ROOT / "app"


def _module_name(path: Path, top: Path) -> str:
    parts = list(path.relative_to(top).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _modules(package: Path = APP) -> dict[str, Path]:
    """Dotted name -> file of every module of ``package`` (a directory)."""
    return {_module_name(p, package.parent): p for p in sorted(package.rglob("*.py"))}


def _absolute(module: str, path: Path, node: ast.ImportFrom) -> str:
    """The absolute module name of a ``from ... import`` in ``module`` (defined in ``path``)."""
    if node.level == 0:
        return node.module or ""
    package = module.split(".") if path.name == "__init__.py" else module.split(".")[:-1]
    base = package[: len(package) - (node.level - 1)]
    return ".".join([*base, node.module] if node.module else base)


def _import_nodes(path: Path) -> Iterator[ast.Import | ast.ImportFrom]:
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def _lazy_table(path: Path) -> dict[str, str]:
    """A package's ``_LAZY = {"Name": "submodule", ...}`` table (empty when it has none)."""
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if (isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_LAZY" for t in node.targets)
                and isinstance(node.value, ast.Dict)):
            pairs = zip(node.value.keys, node.value.values, strict=True)
            return {ast.literal_eval(k): ast.literal_eval(v) for k, v in pairs if k is not None}
    return {}


def import_graph(package: Path = APP) -> dict[str, set[str]]:
    """Module -> the modules of ``package`` it imports (anywhere in the file, functions included)."""
    modules = _modules(package)
    lazy = {name: _lazy_table(path) for name, path in modules.items() if path.name == "__init__.py"}
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        edges: set[str] = set()
        for node in _import_nodes(path):
            if isinstance(node, ast.Import):
                edges |= {alias.name for alias in node.names}
                continue
            target = _absolute(name, path, node)
            for alias in node.names:  # a submodule, a lazily exported name, else a name of the module ``target``
                sub = f"{target}.{alias.name}"
                lazily = lazy.get(target, {}).get(alias.name)
                edges.add(sub if sub in modules else f"{target}.{lazily}" if lazily else target)
        graph[name] = {e for e in edges if e in modules and e != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module (Tarjan's algorithm, iterative), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = 0
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter
        counter += 1
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    top = stack.pop()
                    on_stack.discard(top)
                    component.append(top)
                    if top == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_the_cycle_finder_finds_cycles() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}, "e": {"e"}, "f": set()}
    assert cycles(graph) == [["a", "b", "c"]]
    assert cycles({"x": {"y"}, "y": set()}) == []


def test_the_graph_sees_imports_inside_functions(tmp_path: Path) -> None:
    pkg = tmp_path / "pkg"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "sub" / "__init__.py").write_text("from . import b\n")
    (pkg / "a.py").write_text("import os\nfrom .sub import b\n")
    (pkg / "sub" / "b.py").write_text("def f():\n    from ..a import g\n    import pkg.sub\n")
    assert import_graph(pkg) == {"pkg": set(), "pkg.a": {"pkg.sub.b"}, "pkg.sub": {"pkg.sub.b"},
                                 "pkg.sub.b": {"pkg.a", "pkg.sub"}}
    assert cycles(import_graph(pkg)) == [["pkg.a", "pkg.sub", "pkg.sub.b"]]
    graph = import_graph()
    assert len(graph) > 100
    assert "app.api.ops.common" in graph["app.api.ops.encode"]
    assert "app.cli.chat" in graph["app.cli.tokenize"]  # imported inside cmd_count
    assert "app.engine.native" in graph["app.engine.tokenizer"]  # an import inside a method
    assert "app.engine.pipeline.pipeline" in graph["app.engine.pipeline.hf_json"]


def test_no_import_cycle_in_app() -> None:
    found = cycles(import_graph())
    assert not found, found


def private_imports() -> list[str]:
    """Every ``from x import _name`` of ``app`` with ``x`` in ``app`` (a function, class, constant or module named
    with one leading underscore), as ``module: from x import _name``. A package-private module (``app.cli._io``)
    imported by its public names is not one."""
    offenders = []
    for name, path in _modules().items():
        for node in _import_nodes(path):
            if isinstance(node, ast.ImportFrom):
                target = _absolute(name, path, node)
                private = [a.name for a in node.names if a.name.startswith("_") and not a.name.startswith("__")]
                if private and target.startswith("app"):
                    offenders.append(f"{name}: from {target} import {', '.join(private)}")
    return sorted(offenders)


def test_no_private_name_is_imported_across_modules() -> None:
    offenders = private_imports()
    assert not offenders, offenders


def test_the_ops_package_re_exports_nothing() -> None:
    """``app/api/ops/__init__.py`` is its docstring only: callers import the operation module they use."""
    body = ast.parse((APP / "api" / "ops" / "__init__.py").read_text(encoding="utf-8")).body
    assert len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)


#: Class names that two modules of ``app`` may both define: the client package (``app.client``, which imports neither
#: the engine nor the web layer) mirrors the server's response schemas and the engine's error classes under the same
#: names, so that code reads the same against the library and against the service.
CLIENT_MIRRORS = "app.client."


def test_no_two_classes_in_app_share_a_name() -> None:
    """One name, one class: no class name is defined twice in ``app/`` (a client mirror of a server or engine class
    excepted, see :data:`CLIENT_MIRRORS`)."""
    defined: dict[str, list[str]] = {}
    for module, path in _modules().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                defined.setdefault(node.name, []).append(module)
    shared = {name: modules for name, modules in defined.items()
              if len([m for m in modules if not m.startswith(CLIENT_MIRRORS)]) > 1
              or len([m for m in modules if m.startswith(CLIENT_MIRRORS)]) > 1}
    assert not shared, shared
    assert any(len(modules) > 1 for modules in defined.values())  # the client's mirrors exist: the check reads them
