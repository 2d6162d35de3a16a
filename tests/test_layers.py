"""agnograd's folders are its layers, and imports go down them, never up.

Lowest first (``docs/design.md`` has the tree): ``backends`` (array libraries as
agnograd sees them), ``core`` (the graph), ``functions`` (the rules, the
differentiable namespace and what builds on them), ``static`` (define-then-run and
compiled plans), ``transforms`` (``agnograd.functional``), ``interop`` and
``testing``; above them all the package's top level: ``agnograd/__init__.py``, the
command line and the public modules (``functional.py``, ``type_check.py``, ...),
which nothing inside a folder imports.

The import graph is read from the source (function-local imports included, imports
for type checkers only excluded), so an import that happens to run late, or only
on some path, counts as much as one at the top of a module.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "agnograd"
CONFORMANCE = PACKAGE.parent / "conformance"  # installed as agnograd.conformance

TOP = ""  # the package's top level: __init__, __main__, the public modules
# Lowest first. A module may import its own folder and the folders before it.
FOLDERS: list[tuple[str, str]] = [
    ("backends", "array libraries as agnograd sees them: registry, adapters, devices"),
    ("core", "the graph: Variable, VariableNode, FunctionNode, the engine, configuration"),
    ("functions", "the rules, the differentiable namespace, operators, transfer, checkpoint"),
    ("static", "define-then-run and compiled plans"),
    ("transforms", "agnograd.functional: vjp, jvp, jacobian, hessian"),
    ("interop", "the bridges to PyTorch and JAX"),
    ("testing", "the gradient-checking kit and its pytest plug-in"),
    (TOP, "the package's top level: agnograd/__init__.py and the public modules"),
]
RANK = {folder: i for i, (folder, _) in enumerate(FOLDERS)}
MAX_LINES = 600


def _name(path: Path) -> str:
    """``functions._core`` for ``agnograd/functions/_core.py``; packages by their name."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def folder_of(module: str) -> str:
    """``core`` for ``core._engine``; :data:`TOP` for a module at the package's top."""
    head = module.split(".")[0]
    return head if (PACKAGE / head / "__init__.py").exists() else TOP


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


@functools.cache  # read by three tests for each module; the sources do not change
def imports_of(path: Path) -> frozenset[str]:
    """The agnograd modules ``path`` imports (names relative to the package)."""
    found: set[str] = set()

    def visit(node: ast.AST) -> None:
        if _type_checking_only(node):
            return
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            if node.module == "agnograd":
                found.update(alias.name for alias in node.names)
            elif node.module.startswith("agnograd."):
                base = node.module.removeprefix("agnograd.")
                found.add(base)
                # `from agnograd.functions import _elementwise` names a module
                found.update(
                    f"{base}.{alias.name}"
                    for alias in node.names
                    if (PACKAGE / base.replace(".", "/") / f"{alias.name}.py").exists()
                )
        elif isinstance(node, ast.Import):
            found.update(
                alias.name.removeprefix("agnograd.")
                for alias in node.names
                if alias.name.startswith("agnograd.")
            )
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text()))
    return frozenset(
        m
        for m in found
        if (PACKAGE / m.replace(".", "/")).with_suffix(".py").exists()
        or (PACKAGE / m.replace(".", "/") / "__init__.py").exists()
    )


MODULES = sorted(PACKAGE.rglob("*.py"))


def import_graph() -> dict[str, set[str]]:
    return {_name(path): imports_of(path) for path in MODULES}


def folder_graph(modules: Mapping[str, set[str]]) -> dict[str, set[str]]:
    """Which folders each folder imports (its own left out)."""
    graph: dict[str, set[str]] = {}
    for module, imported in modules.items():
        mine = folder_of(module)
        graph.setdefault(mine, set()).update(folder_of(m) for m in imported)
        graph[mine].discard(mine)
    return graph


def a_circle(graph: Mapping[str, set[str]]) -> list[str] | None:
    """One import circle of ``graph`` (its nodes, the first repeated at the end), or None."""
    done: set[str] = set()
    path: list[str] = []

    def visit(node: str) -> list[str] | None:
        if node in path:
            return [*path[path.index(node) :], node]
        if node in done:
            return None
        path.append(node)
        for nxt in sorted(graph.get(node, ())):
            if circle := visit(nxt):
                return circle
        path.pop()
        done.add(node)
        return None

    return next(filter(None, map(visit, sorted(graph))), None)


def test_every_folder_is_a_layer() -> None:
    folders = {p.parent.name for p in PACKAGE.glob("*/__init__.py")}
    assert folders == set(RANK) - {TOP}, "list each folder of agnograd/ in FOLDERS, in order"


@pytest.mark.parametrize("path", MODULES, ids=[_name(p) for p in MODULES])
def test_no_module_imports_a_higher_folder(path: Path) -> None:
    module = _name(path)
    mine = folder_of(module)
    upward = {m for m in imports_of(path) if RANK[folder_of(m)] > RANK[mine]}
    assert not upward, (
        f"agnograd.{module} ({dict(FOLDERS)[mine]}) imports higher folders: {sorted(upward)}; "
        "reach them through an extension point (agnograd.core._extension) instead"
    )


def test_no_import_circle_between_folders() -> None:
    assert a_circle(folder_graph(import_graph())) is None


def test_the_circle_check_finds_circles() -> None:
    assert a_circle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert a_circle({"a": {"b", "c"}, "b": {"c"}, "c": set()}) is None
    # a module of core importing one of static is a circle between the two folders
    modules = {"core._engine": {"static._compiled"}, "static._compiled": {"core._engine"}}
    assert a_circle(folder_graph(modules)) == ["core", "static", "core"]


@pytest.mark.parametrize(
    "path",
    [*MODULES, *sorted(CONFORMANCE.rglob("*.py"))],
    ids=lambda p: str(p.relative_to(PACKAGE.parent)),
)
def test_modules_are_short(path: Path) -> None:
    lines = len(path.read_text().splitlines())
    assert lines <= MAX_LINES, (
        f"{path.relative_to(PACKAGE.parent)} has {lines} lines (at most {MAX_LINES}): split "
        "it where it holds two concerns"
    )


def test_the_check_sees_function_local_imports(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from agnograd.functions._transfer import copy\n"
        "def f():\n    from agnograd.static._define_then_run import forward_all\n"
    )
    assert imports_of(source) == {"static._define_then_run"}


def test_the_graph_core_stands_on_its_own() -> None:
    core = [p for p in MODULES if folder_of(_name(p)) in {"backends", "core"}]
    assert {_name(p) for p in core} >= {"core._variable", "core._function", "core._engine"}
    for path in core:
        assert {folder_of(m) for m in imports_of(path)} <= {"backends", "core"}, _name(path)


def _defined_in_body(cls: type) -> set[str]:
    """The names a class statement binds: methods, assignments, slots."""
    tree = ast.parse(textwrap.dedent(inspect.getsource(cls)))
    body = tree.body[0]
    assert isinstance(body, ast.ClassDef)
    names: set[str] = set()
    for node in ast.walk(body):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node in body.body:
            names.add(node.name)
        elif isinstance(node, ast.Assign) and node in body.body:
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif isinstance(node, ast.AnnAssign) and node in body.body and node.value is not None:
            names.add(node.target.id)  # type: ignore[union-attr]
    names.update(getattr(cls, "__slots__", ()))
    return names


# What Python itself puts in a class's namespace.
_AUTOMATIC = {"__module__", "__qualname__", "__doc__", "__dict__", "__weakref__",
              "__annotations__", "__firstlineno__", "__static_attributes__"}  # fmt: skip


def test_variable_is_defined_in_one_place() -> None:
    # Everything Variable and its mixins hold comes from their class statements:
    # the layers above the core fill in extension points, they add no method.
    import agnograd

    for cls in agnograd.Variable.__mro__[:-1]:
        added = set(vars(cls)) - _defined_in_body(cls) - _AUTOMATIC
        assert not added, f"{cls.__name__} got {sorted(added)} from outside its class statement"
    from agnograd.core import _extension

    filled = (_extension.operators, _extension.namespace, _extension.transfer,
              _extension.define_then_run)  # fmt: skip
    assert None not in filled
