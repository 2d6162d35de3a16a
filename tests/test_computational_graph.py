"""Pictures of the graph: ``agnograd.computational_graph`` (Chainer's API, DOT text)."""

from __future__ import annotations

import re
import shutil
import sys
from typing import Any

import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd import FunctionNode, Variable, VariableNode
from agnograd.computational_graph import ComputationalGraph, build_computational_graph

PLAIN = {"variable_style": None, "function_style": None}


def small() -> tuple[Variable, Variable]:
    x = Variable(np.array([1.0, 2.0]), name="x")
    return x, F.sum(F.exp(x) * x)


def names(graph: ComputationalGraph) -> list[str]:
    """Each node as a short word: a variable's name or label, a function's label."""
    return [
        (node.name or node.label) if isinstance(node, VariableNode) else node.label
        for node in graph.nodes
    ]


def edges(graph: ComputationalGraph) -> list[tuple[int, int]]:
    ids = {id(node): i for i, node in enumerate(graph.nodes)}
    return [(ids[id(a)], ids[id(b)]) for a, b in graph.edges]


def node_lines(dot: str) -> dict[int, str]:
    return {int(m[1]): m[2] for m in re.finditer(r"^  (\d+) \[(.*)\];$", dot, re.M)}


def edge_lines(dot: str) -> list[tuple[int, int]]:
    return [(int(a), int(b)) for a, b in re.findall(r"^  (\d+) -> (\d+);$", dot, re.M)]


LABEL = re.compile(r'label="((?:[^"\\]|\\.)*)"')


def labels(dot: str) -> dict[int, str]:
    """Each node's label as the DOT text writes it (escapes kept)."""
    found = {i: LABEL.match(text) for i, text in node_lines(dot).items()}
    return {i: m[1] for i, m in found.items() if m is not None}


# -- the DOT text --------------------------------------------------------------------


def test_dot_text_of_a_small_graph() -> None:
    _, y = small()
    var = 'shape="octagon", fillcolor="#E0E0E0", style="filled"'
    func = 'shape="record", fillcolor="#6495ED", style="filled"'
    assert build_computational_graph(y).dump() == "\n".join(
        [
            "digraph computational_graph {",
            "  rankdir=TB;",
            f'  0 [label="x\\n(2), float64\\n@numpy", {var}];',
            f'  1 [label="Exp", {func}];',
            f'  2 [label="(2), float64\\n@numpy", {var}];',
            f'  3 [label="Mul", {func}];',
            f'  4 [label="(2), float64\\n@numpy", {var}];',
            f'  5 [label="Sum", {func}];',
            f'  6 [label="float64\\n@numpy", {var}];',
            "  0 -> 1;",
            "  1 -> 2;",
            "  2 -> 3;",
            "  0 -> 3;",
            "  3 -> 4;",
            "  4 -> 5;",
            "  5 -> 6;",
            "}",
        ]
    )


def test_nodes_and_edges_are_the_graph_objects_in_forward_order() -> None:
    x, y = small()
    graph = build_computational_graph([y])
    exp = y.creator.inputs[0].creator.inputs[0].creator
    assert graph.nodes[0] is x.node
    assert graph.nodes[1] is exp
    assert graph.nodes[-1] is y.node
    assert names(graph) == ["x", "Exp", "(2), float64", "Mul", "(2), float64", "Sum", "float64"]
    assert edges(graph) == [(0, 1), (1, 2), (2, 3), (0, 3), (3, 4), (4, 5), (5, 6)]
    assert repr(graph) == "<ComputationalGraph of 7 nodes and 7 edges>"


def test_the_text_is_deterministic() -> None:
    # The same computation twice, and the same graph dumped twice: the same text.
    texts = {build_computational_graph(small()[1]).dump() for _ in range(3)}
    assert len(texts) == 1
    graph = build_computational_graph(small()[1])
    assert graph.dump() == graph.dump() == texts.pop()


def test_an_input_used_twice_has_one_edge() -> None:
    # As in Chainer: x * x has one edge from x to Mul.
    x = Variable(np.array([3.0]), name="x")
    graph = build_computational_graph(x * x)
    assert names(graph) == ["x", "Mul", "(1), float64"]
    assert edges(graph) == [(0, 1), (1, 2)]


def test_only_what_the_outputs_come_from() -> None:
    # Chainer's example: x feeds f -> y and g -> z; from y alone, g and z are left out.
    x = Variable(np.array([1.0]), name="x")
    y, z = F.exp(x), F.sin(x)
    y.name, z.name = "y", "z"
    assert names(build_computational_graph([y])) == ["x", "Exp", "y"]
    assert names(build_computational_graph([y, z])) == ["x", "Exp", "y", "Sin", "z"]
    assert names(build_computational_graph([z, y])) == ["x", "Sin", "z", "Exp", "y"]
    # An output listed twice, or reachable from another, appears once.
    assert names(build_computational_graph([y, y, x])) == ["x", "Exp", "y"]


def test_outputs_may_be_variables_nodes_functions_or_iterables_of_them() -> None:
    x, y = small()
    whole = names(build_computational_graph(y))
    assert names(build_computational_graph(y.node)) == whole
    assert names(build_computational_graph(v for v in [y])) == whole
    # From a function: its inputs and what they come from, not its outputs.
    assert names(build_computational_graph(y.creator)) == whole[:-1]
    assert names(build_computational_graph([x])) == ["x"]
    assert build_computational_graph([]).dump() == "digraph computational_graph {\n  rankdir=TB;\n}"


@pytest.mark.parametrize(
    ("outputs", "message"),
    [
        (np.ones(2), r"got numpy.ndarray \(an array has no graph: wrap it in agnograd"),
        ([np.ones(1)], r"outputs\[0\] is a numpy.ndarray; pass .* \(an array has no graph"),
        ([Variable(np.ones(1)), 3.0], r"outputs\[1\] is a builtins.float; pass Variables"),
        (3, "outputs must be a Variable, VariableNode, FunctionNode or a list of them, got"),
        ("y", "got builtins.str"),
    ],
)
def test_other_outputs_are_refused(outputs: Any, message: str) -> None:
    with pytest.raises(TypeError, match=message):
        build_computational_graph(outputs)


def test_the_walk_stops_where_the_graph_was_cut() -> None:
    x = Variable(np.array([1.0]), name="x")
    h = F.exp(x)
    h.name = "h"
    y = F.sin(h)
    h.unchain()
    assert names(build_computational_graph(y)) == ["h", "Sin", "(1), float64"]
    y.unchain_backward()
    assert names(build_computational_graph(y)) == ["(1), float64"]


# -- the options -----------------------------------------------------------------------


def test_default_styles_are_chainers() -> None:
    dot = build_computational_graph(small()[1]).dump()
    lines = node_lines(dot)
    assert lines[0].endswith('shape="octagon", fillcolor="#E0E0E0", style="filled"')
    assert lines[1].endswith('shape="record", fillcolor="#6495ED", style="filled"')


def test_styles_none_give_plain_ovals_and_boxes() -> None:
    lines = node_lines(build_computational_graph(small()[1], **PLAIN).dump())
    assert lines[0] == 'label="x\\n(2), float64\\n@numpy", shape="oval"'
    assert lines[1] == 'label="Exp", shape="box"'


def test_styles_as_dicts_override_and_add_attributes() -> None:
    graph = build_computational_graph(
        small()[1],
        variable_style={"shape": "ellipse", "color": "red", "font-name": 'A "b"'},
        function_style={"style": "rounded"},
    )
    lines = node_lines(graph.dump())
    assert lines[0] == (
        'label="x\\n(2), float64\\n@numpy", shape="ellipse", color="red", "font-name"="A \\"b\\""'
    )
    assert lines[1] == 'label="Exp", shape="box", style="rounded"'


@pytest.mark.parametrize("argument", ["variable_style", "function_style"])
def test_bad_styles_are_refused(argument: str) -> None:
    with pytest.raises(ValueError, match=f"{argument} must be a dict of DOT attributes"):
        build_computational_graph(small()[1], **{argument: "fancy"})
    with pytest.raises(TypeError, match=f"{argument} must be a dict of DOT attributes"):
        build_computational_graph(small()[1], **{argument: ["shape", "box"]})


@pytest.mark.parametrize("rankdir", ["TB", "BT", "LR", "RL"])
def test_rankdir(rankdir: str) -> None:
    dot = build_computational_graph(small()[1], rankdir=rankdir).dump()
    assert dot.splitlines()[1] == f"  rankdir={rankdir};"


def test_a_bad_rankdir_is_refused() -> None:
    with pytest.raises(ValueError, match=r"rankdir must be 'TB'.* got 'XY'"):
        build_computational_graph(small()[1], rankdir="XY")


def test_show_name() -> None:
    y = small()[1]
    y.name = "y"
    shown = labels(build_computational_graph(y).dump())
    hidden = labels(build_computational_graph(y, show_name=False).dump())
    assert (shown[0], shown[6]) == ("x\\n(2), float64\\n@numpy", "y\\nfloat64\\n@numpy")
    assert (hidden[0], hidden[6]) == ("(2), float64\\n@numpy", "float64\\n@numpy")
    assert {i: t for i, t in shown.items() if i not in (0, 6)} == {
        i: t for i, t in hidden.items() if i not in (0, 6)
    }


def test_remove_split_must_be_true() -> None:
    # As in Chainer, where the argument stays for compatibility.
    assert build_computational_graph(small()[1], remove_split=True).dump()
    with pytest.raises(ValueError, match=r"remove_split=False is not supported.*leave remove"):
        build_computational_graph(small()[1], remove_split=False)


def test_remove_variable_joins_functions_directly() -> None:
    x, y = small()
    graph = build_computational_graph(y, remove_variable=True, **PLAIN)
    assert all(isinstance(node, FunctionNode) for node in graph.nodes)
    assert names(graph) == ["Exp", "Mul", "Sum"]
    assert edges(graph) == [(0, 1), (1, 2)]
    assert graph.dump() == "\n".join(
        [
            "digraph computational_graph {",
            "  rankdir=TB;",
            '  0 [label="Exp", shape="box"];',
            '  1 [label="Mul", shape="box"];',
            '  2 [label="Sum", shape="box"];',
            "  0 -> 1;",
            "  1 -> 2;",
            "}",
        ]
    )
    # Leaves have no creator: a graph of leaves only has no function left.
    assert build_computational_graph(x, remove_variable=True).nodes == []


def test_remove_variable_gives_one_edge_per_pair_of_functions() -> None:
    # Two outputs of Unstack both go into Mul: one edge Unstack -> Mul.
    x = Variable(np.array([1.0, 2.0]))
    a, b = F.unstack(x)
    graph = build_computational_graph(F.sum(a * b + a), remove_variable=True)
    assert names(graph) == ["Unstack", "Mul", "Add", "Sum"]
    assert edges(graph) == [(0, 1), (1, 2), (0, 2), (2, 3)]


def test_computational_graph_takes_chainers_arguments() -> None:
    full = build_computational_graph(small()[1])
    again = ComputationalGraph(full.nodes, full.edges, "default", "default", "TB", False, True)
    assert again.dump() == full.dump()
    only = ComputationalGraph(full.nodes, full.edges, remove_variable=True)
    assert names(only) == ["Exp", "Mul", "Sum"]
    with pytest.raises(ValueError, match="rankdir"):
        ComputationalGraph(full.nodes, full.edges, rankdir="up")


def test_dump_speaks_dot_only() -> None:
    graph = build_computational_graph(small()[1])
    assert graph.dump("dot") == graph.dump()
    with pytest.raises(ValueError, match=r"format must be 'dot', got 'svg'; .*render"):
        graph.dump("svg")
    with pytest.raises(NotImplementedError, match="graphml"):  # Chainer's other format
        graph.dump("graphml")


# -- what the labels say ---------------------------------------------------------------


def test_labels_name_shape_dtype_backend_and_device(backend: Any) -> None:
    x = backend.variable([[1.0, 2.0, 3.0]], name="x")
    y = F.sum(F.tanh(x) * 2.0)
    device = str(x.device)
    assert device.startswith(f"@{backend.name}")
    got = labels(build_computational_graph(y).dump())
    assert got[0] == f"x\\n(1, 3), float32\\n{device}"
    assert got[2] == f"(1, 3), float32\\n{device}"  # Tanh's output, whose Variable is gone
    assert got[6] == f"float32\\n{device}"


def test_torch_variables() -> None:
    torch = pytest.importorskip("torch")
    x = Variable(torch.ones((2, 3), dtype=torch.float64), name="x")
    got = labels(build_computational_graph(F.sum(x @ x.mT)).dump())
    assert got[0] == "x\\n(2, 3), float64\\n@torch:cpu"
    assert got[len(got) - 1] == "float64\\n@torch:cpu"


def test_devices_of_intermediates_after_a_copy() -> None:
    xs = pytest.importorskip("array_api_strict")
    x = Variable(xs.asarray([1.0, 2.0], device=xs.Device("device1")), name="x")
    y = (x * 3).to_device("@array_api_strict:device2")  # a Copy: its own device
    z = F.sum(y * y)
    del y
    got = labels(build_computational_graph(z).dump())
    assert [t.rsplit("\\n", 1)[-1] for t in got.values() if "float64" in t] == [
        "@array_api_strict:device1",  # x
        "@array_api_strict:device1",  # x * 3, gone: where its input is
        "@array_api_strict:device2",  # the copy, gone: at its destination
        "@array_api_strict:device2",  # y * y
        "@array_api_strict:device2",  # z
    ]


def test_the_graph_outlives_its_variables() -> None:
    # Only the output is alive; the walk goes through the nodes, and the devices come
    # from the arrays functions kept for backward or from the neighbours.
    def loss() -> Variable:
        w = Variable(np.ones((2, 3), dtype=np.float32), name="w")
        x = np.ones((4, 3), dtype=np.float32)
        return F.sum(F.tanh(F.linear(x, w)))

    got = labels(build_computational_graph(loss()).dump())
    variables = [t for t in got.values() if "float32" in t]
    assert variables[0] == "(4, 3), float32\\n@numpy"  # the constant x
    assert "w\\n(2, 3), float32\\n@numpy" in variables
    assert all(t.endswith("\\n@numpy") for t in variables)


def test_a_variable_without_data_has_no_device_line() -> None:
    graph = build_computational_graph(Variable(name="empty"))
    assert labels(graph.dump()) == {0: "empty\\nNone"}


def test_define_then_run_graphs_before_they_run() -> None:
    x = Variable(shape=(2,), need_grad=True)
    x.name = "x"
    with agnograd.auto_forward(False):
        y = F.sum(F.exp(x) * 2.0)
    assert y.array is None
    got = labels(build_computational_graph(y).dump())
    assert got == {
        0: "x\\n(2), float32\\n@numpy",
        1: "Exp",
        2: "(2), float32\\n@numpy",
        3: "MulConstant",
        4: "(2), float32\\n@numpy",
        5: "Sum",
        6: "float32\\n@numpy",
    }


def test_double_backprop_graph() -> None:
    x = Variable(np.array([0.5, -1.0]), name="x")
    y = F.sum(F.tanh(x))
    (gx,) = agnograd.grad([y], [x], enable_double_backprop=True)
    gx.name = "gx"
    graph = build_computational_graph(gx)
    # The gradient's graph reaches back into the forward graph: to x through Tanh.
    assert any(node is x.node for node in graph.nodes)
    assert graph.nodes[-1] is gx.node
    assert "Tanh" in names(graph)
    assert any(a is x.node for a, _ in graph.edges)
    assert labels(graph.dump())[len(graph.nodes) - 1] == "gx\\n(2), float64\\n@numpy"
    # Forward and gradient in one picture share the forward nodes.
    both = build_computational_graph([y, gx])
    assert len(both.nodes) == len(graph.nodes) + 2  # Sum and y
    # And a second-order gradient's graph.
    (ggx,) = agnograd.grad([F.sum(gx)], [x], enable_double_backprop=True)
    assert any(node is x.node for node in build_computational_graph(ggx).nodes)


# -- escaping ----------------------------------------------------------------------------


class Odd(FunctionNode):
    """A function whose label uses the characters that split a record."""

    @property
    def label(self) -> str:
        return 'a|b {c} <d> "e" f\\'

    def forward(self, inputs: tuple[Any, ...]) -> tuple[Any, ...]:
        return (inputs[0] * 2,)


def odd_graph() -> ComputationalGraph:
    x = Variable(np.array([1.0]), name='say "hi"\\n\nback\\')
    (y,) = Odd().apply((x,))
    return build_computational_graph(y)


def test_labels_are_escaped() -> None:
    got = labels(odd_graph().dump())
    # Backslashes doubled, newlines as \n, quotes as \"; in a record, |{}<> escaped.
    assert got[0] == 'say \\"hi\\"\\\\n\\nback\\\\\\n(1), float64\\n@numpy'
    assert got[1] == 'a\\|b \\{c\\} \\<d\\> \\"e\\" f\\\\'
    plain = labels(build_computational_graph(odd_graph().nodes[-1], **PLAIN).dump())
    assert plain[1] == 'a|b {c} <d> \\"e\\" f\\\\'  # a box: nothing to split


# -- drawing -----------------------------------------------------------------------------


def needs_graphviz() -> Any:
    graphviz = pytest.importorskip("graphviz")
    if shutil.which("dot") is None:
        pytest.skip("Graphviz's dot program is not installed")
    return graphviz


@pytest.mark.parametrize("suffix", ["svg", "png"])
def test_render(tmp_path: Any, suffix: str) -> None:
    needs_graphviz()
    out = build_computational_graph(small()[1]).render(tmp_path / f"graph.{suffix}")
    assert out == tmp_path / f"graph.{suffix}"
    data = out.read_bytes()
    assert data.startswith(b"\x89PNG") if suffix == "png" else b"<svg" in data
    # An explicit format wins over the suffix; no suffix gives SVG.
    assert b"<svg" in build_computational_graph(small()[1]).render(tmp_path / "g").read_bytes()
    png = build_computational_graph(small()[1]).render(tmp_path / "g.img", format="png")
    assert png.read_bytes().startswith(b"\x89PNG")


def test_repr_svg_for_notebooks() -> None:
    needs_graphviz()
    svg = build_computational_graph(small()[1])._repr_svg_()
    assert svg is not None
    assert svg.lstrip().startswith("<?xml")
    assert "<svg" in svg
    for word in ("Exp", "Mul", "Sum", "(2), float64", "@numpy"):
        assert f">{word}</text>" in svg


def test_escaped_labels_render_as_written() -> None:
    needs_graphviz()
    svg = odd_graph()._repr_svg_()
    assert svg is not None
    texts = re.findall(r">([^<>]*)</text>", svg)
    assert texts[:3] == ["say &quot;hi&quot;\\n", "back\\", "(1), float64"]
    assert "a|b {c} &lt;d&gt; &quot;e&quot; f\\" in texts


def test_render_refuses_unknown_formats(tmp_path: Any) -> None:
    needs_graphviz()
    with pytest.raises(ValueError, match="'bogus' is not a Graphviz output format"):
        build_computational_graph(small()[1]).render(tmp_path / "graph.bogus")


def test_without_the_graphviz_package(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    monkeypatch.setitem(sys.modules, "graphviz", None)  # `import graphviz` fails
    graph = build_computational_graph(small()[1])
    with pytest.raises(ImportError, match=r"ComputationalGraph.render: .*pip install graphviz"):
        graph.render(tmp_path / "graph.svg")
    assert not (tmp_path / "graph.svg").exists()
    assert graph._repr_svg_() is None  # a notebook falls back to the text repr
    assert graph.dump().startswith("digraph")  # the text needs nothing


def test_without_the_dot_program(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    pytest.importorskip("graphviz")
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot to be found
    graph = build_computational_graph(small()[1])
    with pytest.raises(RuntimeError, match=r"dot program is not on PATH.*apt-get install graphviz"):
        graph.render(tmp_path / "graph.svg")
    assert graph._repr_svg_() is None


# -- size --------------------------------------------------------------------------------


@pytest.mark.slow
def test_a_long_chain_needs_no_recursion() -> None:
    n = 20 * sys.getrecursionlimit()  # a recursive walk would fail 20 times over
    x = Variable(np.array([0.0]), name="x")
    y = x
    for i in range(n):
        y = y + 1.0 if i % 1000 == 0 else F.identity(y)
    limit = sys.getrecursionlimit()
    graph = build_computational_graph(y)
    assert len(graph.nodes) == 2 * n + 1
    assert len(graph.edges) == 2 * n
    dot = graph.dump()
    assert dot.count("\n") == 2 * n + 1 + 2 * n + 2
    assert dot.count("\\n@numpy") == n + 1
    assert len(build_computational_graph(y, remove_variable=True).edges) == n - 1
    assert sys.getrecursionlimit() == limit
