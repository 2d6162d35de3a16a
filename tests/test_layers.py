"""agnograd's modules import in one direction: a layer never imports one above it.

The import graph is read from the source (function-local imports included, imports
for type checkers only excluded), so an import that happens to run late, or only
on some path, counts as much as one at the top of a module.
"""

from __future__ import annotations

import ast
import inspect
import textwrap
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "agnograd"

# Lowest first. A module may import its own layer and those before it.
LAYERS: list[tuple[str, set[str]]] = [
    (
        "base: configuration, backend registry, devices as values, extension points",
        {
            "_config",
            "_backend",
            "_adapter",
            "_versions",
            "_device",
            "_extension",
            "_graph",
            "_debug",
            "initializers",
            "type_check",
        },
    ),
    (
        "graph core",
        {
            "_variable",
            "_variable_operators",
            "_printing",
            "_nnabla",
            "_function",
            "_function_v1",
            "_parameter",
            "_engine",
        },
    ),
    ("abstract evaluation", {"_abstract"}),
    (
        "rules and the differentiable namespace",
        {"functions.*", "_namespace", "_inplace", "_convert", "function_hooks"},
    ),
    ("devices and transfer", {"_transfer"}),
    (
        "define-then-run and its compiled plans",
        {
            "_define_then_run",
            "_compiled",
            "_compiled_jax",
            "_compiled_steps",
            "_compiled_trace",
            "_replay",
        },
    ),
    (
        "the package, its operators and tools (transforms, checkpointing, pictures)",
        {
            "__init__",
            "functions",
            "_operators",
            "__main__",
            "testing",
            "testing.*",
            "functional",
            "_transforms",
            "_checkpoint",
            "_checkpoint_reads",
            "_graph_picture",
            "computational_graph",
            "interop",
            "interop.*",
        },
    ),
]


def _name(path: Path) -> str:
    """``functions._core`` for ``agnograd/functions/_core.py``; packages by their name."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    if parts[-1] == "__init__" and len(parts) > 1:
        parts = parts[:-1]
    return ".".join(parts)


def layer_of(module: str) -> int:
    for i, (_, members) in enumerate(LAYERS):
        head = module.split(".")[0]
        if module in members or (f"{head}.*" in members and "." in module):
            return i
    raise AssertionError(f"agnograd.{module} is in no layer: add it to tests/test_layers.py")


def _type_checking_only(node: ast.AST) -> bool:
    return isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test)


def imports_of(path: Path) -> set[str]:
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
    return {m for m in found if (PACKAGE / m.replace(".", "/")).with_suffix(".py").exists()
            or (PACKAGE / m.replace(".", "/") / "__init__.py").exists()}  # fmt: skip


MODULES = sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", MODULES, ids=[_name(p) for p in MODULES])
def test_no_module_imports_a_higher_layer(path: Path) -> None:
    module = _name(path)
    mine = layer_of(module)
    upward = {m: LAYERS[layer_of(m)][0] for m in sorted(imports_of(path)) if layer_of(m) > mine}
    assert not upward, (
        f"agnograd.{module} ({LAYERS[mine][0]}) imports higher layers: {upward}; reach them "
        "through an extension point (agnograd._extension) instead"
    )


def test_the_check_sees_function_local_imports(tmp_path: Path) -> None:
    source = tmp_path / "probe.py"
    source.write_text(
        "from typing import TYPE_CHECKING\n"
        "if TYPE_CHECKING:\n    from agnograd._transfer import copy\n"
        "def f():\n    from agnograd._define_then_run import forward_all\n"
    )
    assert imports_of(source) == {"_define_then_run"}


def test_the_graph_core_stands_on_its_own() -> None:
    core = [p for p in MODULES if layer_of(_name(p)) <= 1]
    assert {_name(p) for p in core} >= {"_variable", "_function", "_engine"}
    for path in core:
        assert all(layer_of(m) <= 1 for m in imports_of(path)), _name(path)


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
    from agnograd import _extension

    filled = (_extension.operators, _extension.namespace, _extension.transfer,
              _extension.define_then_run)  # fmt: skip
    assert None not in filled
