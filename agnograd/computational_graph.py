"""Pictures of the graph, as in Chainer's ``chainer.computational_graph``.

:func:`build_computational_graph` walks back from some outputs through the
graph's nodes and returns a :class:`ComputationalGraph`, whose
:meth:`~ComputationalGraph.dump` is the graph in Graphviz's DOT language and whose
:meth:`~ComputationalGraph.render` draws it (with the optional ``graphviz``
package: ``pip install agnograd[graph]``). In Jupyter the graph shows itself.

The walk goes from the outputs through ``creator_node`` and ``inputs`` -- the
VariableNodes and FunctionNodes, not the Variables -- so it sees a graph whose
intermediate Variables are gone, and the graph of a gradient computed with
``enable_double_backprop=True``. It is iterative (no recursion limit) and visits
inputs left to right, so the same graph always gives the same nodes, ids and DOT
text.

Examples
--------
>>> import numpy as np, agnograd, agnograd.functions as F
>>> from agnograd.computational_graph import build_computational_graph
>>> x = agnograd.Variable(np.array([1.0, 2.0]), name="x")
>>> loss = F.sum(F.tanh(x) ** 2)
>>> graph = build_computational_graph([loss])
>>> graph
<ComputationalGraph of 7 nodes and 6 edges>
>>> dot = graph.dump()  # write it to a file and run `dot -Tsvg graph.dot`
>>> dot.splitlines()[3]
'  1 [label="Tanh", shape="record", fillcolor="#6495ED", style="filled"];'
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, TypeAlias

from agnograd.backends._backend import is_array
from agnograd.backends._device import Device, device_of
from agnograd.core._function import FunctionNode
from agnograd.core._variable import Variable
from agnograd.core._variable_node import VariableNode
from agnograd.functions._transfer import Copy

Node: TypeAlias = VariableNode | FunctionNode
Style: TypeAlias = Mapping[str, Any] | str | None

# Chainer's defaults, so that pictures look the same as there.
_VARIABLE_STYLE = {"shape": "octagon", "fillcolor": "#E0E0E0", "style": "filled"}
_FUNCTION_STYLE = {"shape": "record", "fillcolor": "#6495ED", "style": "filled"}
_RANKDIRS = ("TB", "BT", "LR", "RL")
_GRAPHVIZ = (
    "Graphviz's dot program (apt-get install graphviz, brew install graphviz or conda "
    "install graphviz)"
)
_WITHOUT = "; dump() gives the DOT text without Graphviz, to draw elsewhere"


class ComputationalGraph:
    """Nodes and edges of a graph, with its DOT text and its picture.

    Made by :func:`build_computational_graph`; the arguments are those of Chainer's
    ``ComputationalGraph``. The graph is assumed to be directed and acyclic.

    Parameters
    ----------
    nodes : list of VariableNode and FunctionNode
        The nodes; their position in the list is their id in the DOT text.
    edges : list of (node, node) pairs
        Each edge goes from an input variable to a function, or from a function to
        one of its outputs.
    variable_style, function_style : dict, "default" or None
        DOT attributes of variable and function nodes (``shape``, ``color``,
        ``fillcolor``, ``style``, ...): ``"default"`` for Chainer's (grey octagons,
        blue records), ``None`` for none (plain ovals and boxes).
    rankdir : {"TB", "BT", "LR", "RL"}
        Direction of the picture: top to bottom, bottom to top, left to right or
        right to left.
    remove_variable : bool
        Keep only the function nodes; an edge joins the function that created a
        variable to each function that took it. ``nodes`` and ``edges`` are then
        those of the picture.
    show_name : bool
        Show the ``name`` of variable nodes that have one.

    Attributes
    ----------
    nodes : list of VariableNode and FunctionNode
        The nodes of the picture, inputs before the functions that take them.
    edges : list of (node, node) pairs
        The edges of the picture, each once.
    """

    def __init__(
        self,
        nodes: Iterable[Node],
        edges: Iterable[tuple[Node, Node]],
        variable_style: Style = "default",
        function_style: Style = "default",
        rankdir: str = "TB",
        remove_variable: bool = False,
        show_name: bool = True,
    ) -> None:
        if rankdir not in _RANKDIRS:
            raise ValueError(
                f"ComputationalGraph: rankdir must be 'TB' (top to bottom), 'BT', 'LR' or "
                f"'RL', got {rankdir!r}"
            )
        self.nodes: list[Node] = list(nodes)
        self.edges: list[tuple[Node, Node]] = list(edges)
        self.variable_style = _style(variable_style, _VARIABLE_STYLE, "variable_style")
        self.function_style = _style(function_style, _FUNCTION_STYLE, "function_style")
        self.rankdir = rankdir
        self.remove_variable = bool(remove_variable)
        self.show_name = bool(show_name)
        # Read now, while the Variables that made the graph are likeliest to be alive.
        self._devices: dict[int, Device] = {}
        if self.remove_variable:
            self.nodes, self.edges = _skip_variables(self.nodes, self.edges)
        else:
            self._devices = _devices(self.nodes)

    def dump(self, format: str = "dot") -> str:  # noqa: A002 - Chainer's name
        """The graph as text in the DOT language of Graphviz.

        Node ids are the positions in :attr:`nodes`, so the same graph always gives
        the same text. A variable node's label has up to three lines: its name (with
        ``show_name``), its shape and dtype, and its :class:`~agnograd.Device`
        specifier, which names the backend and the device (``@numpy``,
        ``@torch:cuda:0``). For a node whose array is gone, the device comes from an
        array a function kept for backward, else from its neighbours (a function's
        outputs are where its first input is, a copy's at its destination); it is
        left out where nothing tells it.

        Parameters
        ----------
        format : {"dot"}
            The language of the text; DOT is the only one (:meth:`render` draws it).

        Examples
        --------
        >>> import numpy as np, agnograd
        >>> from agnograd.computational_graph import build_computational_graph
        >>> x = agnograd.Variable(np.ones(3, dtype=np.float32), name="x")
        >>> graph = build_computational_graph(x * 2, variable_style=None, function_style=None)
        >>> print(graph.dump())
        digraph computational_graph {
          rankdir=TB;
          0 [label="x\\n(3), float32\\n@numpy", shape="oval"];
          1 [label="MulConstant", shape="box"];
          2 [label="(3), float32\\n@numpy", shape="oval"];
          0 -> 1;
          1 -> 2;
        }
        """
        if format == "graphml":  # Chainer's other format: known, not written here
            raise NotImplementedError(
                "ComputationalGraph.dump: the 'graphml' format is not implemented; use "
                "format='dot' (or render(path, format='svg') for an image)"
            )
        if format != "dot":
            raise ValueError(
                f"ComputationalGraph.dump: format must be 'dot', got {format!r}; to draw "
                "the graph as an image, call render(path, format='svg') or 'png'"
            )
        ids = {id(node): i for i, node in enumerate(self.nodes)}
        devices = self._devices
        lines = ["digraph computational_graph {", f"  rankdir={self.rankdir};"]
        # Most nodes repeat a label seen before: their attributes are made once.
        made: dict[tuple[bool, str], str] = {}
        shapes: dict[tuple[Any, Any], str] = {}
        for i, node in enumerate(self.nodes):
            if isinstance(node, VariableNode):
                key = (True, _variable_label(node, devices.get(id(node)), self.show_name, shapes))
            else:
                key = (False, node.label)
            text = made.get(key)
            if text is None:
                shape, style = (
                    ("oval", self.variable_style) if key[0] else ("box", self.function_style)
                )
                text = made[key] = _attributes({"label": key[1], "shape": shape, **style})
            lines.append(f"  {i} [{text}];")
        for head, tail in self.edges:
            lines.append(f"  {ids[id(head)]} -> {ids[id(tail)]};")
        lines.append("}")
        return "\n".join(lines)

    def render(self, path: str | Path, format: str | None = None) -> Path:  # noqa: A002
        """Draw the graph into an image file with Graphviz; return its path.

        Needs the optional ``graphviz`` Python package (``pip install
        agnograd[graph]``) and Graphviz's ``dot`` program.

        Parameters
        ----------
        path : str or Path
            The file to write.
        format : str, optional
            A Graphviz output format (``"svg"``, ``"png"``, ``"pdf"``, ...); by
            default the suffix of ``path``, else ``"svg"``.
        """
        path = Path(path)
        kind = format or path.suffix.removeprefix(".") or "svg"
        path.write_bytes(self._draw(kind, "ComputationalGraph.render"))
        return path

    def _repr_svg_(self) -> str | None:
        """The picture for Jupyter; ``None`` without Graphviz, so that the notebook
        shows the text representation instead of an error."""
        try:
            return self._draw("svg", "ComputationalGraph._repr_svg_").decode()
        except (ImportError, RuntimeError):
            return None

    def _draw(self, format: str, op: str) -> bytes:  # noqa: A002
        try:
            import graphviz
        except ImportError as error:
            raise ImportError(
                f"{op}: drawing needs the graphviz Python package, which is not "
                f"installed (pip install graphviz, or pip install agnograd[graph]), and "
                f"{_GRAPHVIZ}{_WITHOUT}"
            ) from error
        if format not in graphviz.FORMATS:
            raise ValueError(
                f"{op}: {format!r} is not a Graphviz output format; use 'svg', 'png', "
                "'pdf' or another of graphviz.FORMATS"
            )
        try:
            data: bytes = graphviz.Source(self.dump()).pipe(format=format)
        except graphviz.ExecutableNotFound as error:
            raise RuntimeError(
                f"{op}: Graphviz's dot program is not on PATH (the graphviz Python "
                f"package only runs it); install {_GRAPHVIZ}{_WITHOUT}"
            ) from error
        return data

    def __repr__(self) -> str:
        return f"<ComputationalGraph of {len(self.nodes)} nodes and {len(self.edges)} edges>"


def build_computational_graph(
    outputs: Variable | Node | Iterable[Variable | Node],
    remove_split: bool = True,
    variable_style: Style = "default",
    function_style: Style = "default",
    rankdir: str = "TB",
    remove_variable: bool = False,
    show_name: bool = True,
) -> ComputationalGraph:
    """The graph of the functions and variables that ``outputs`` were computed from.

    Chainer's ``chainer.computational_graph.build_computational_graph``, with the
    same arguments: it walks back from ``outputs`` through each variable's creator
    and each function's inputs, and stops where a variable has no creator (a leaf,
    a constant, or a variable after ``unchain_backward``). What cannot be reached
    backwards from ``outputs`` is left out.

    Parameters
    ----------
    outputs : Variable, VariableNode, FunctionNode or an iterable of them
        Where the walk starts.
    remove_split : bool
        Must be ``True``, as in Chainer, where it is kept for compatibility: agnograd
        never inserts Split nodes (a variable used twice has two outgoing edges).
    variable_style, function_style : dict, "default" or None
        DOT attributes of variable and function nodes (``shape``, ``color``,
        ``fillcolor``, ``style``, ...): ``"default"`` for Chainer's (grey octagons,
        blue records), ``None`` for none (plain ovals and boxes).
    rankdir : {"TB", "BT", "LR", "RL"}
        Direction of the picture: top to bottom, bottom to top, left to right or
        right to left.
    remove_variable : bool
        Keep only the function nodes, joined directly.
    show_name : bool
        Show the ``name`` of variable nodes that have one.

    Returns
    -------
    ComputationalGraph
        Its :meth:`~ComputationalGraph.dump` is the DOT text;
        :meth:`~ComputationalGraph.render` draws it, and Jupyter shows it.

    Examples
    --------
    >>> import numpy as np, agnograd, agnograd.functions as F
    >>> from agnograd.computational_graph import build_computational_graph
    >>> x = agnograd.Variable(np.array([1.0, 2.0]), name="x")
    >>> y = F.sum(F.exp(x) * x)
    >>> graph = build_computational_graph(y)
    >>> [getattr(node, "name", None) or node.label for node in graph.nodes]
    ['x', 'Exp', '(2), float64', 'Mul', '(2), float64', 'Sum', 'float64']
    >>> print(build_computational_graph(y, remove_variable=True, function_style=None).dump())
    digraph computational_graph {
      rankdir=TB;
      0 [label="Exp", shape="box"];
      1 [label="Mul", shape="box"];
      2 [label="Sum", shape="box"];
      0 -> 1;
      1 -> 2;
    }
    """
    if not remove_split:
        raise ValueError(
            "build_computational_graph: remove_split=False is not supported (as in "
            "Chainer): agnograd never inserts Split nodes, a variable used twice simply "
            "has two outgoing edges; leave remove_split=True"
        )
    roots = _roots(outputs)
    nodes = _walk(roots)
    return ComputationalGraph(
        nodes, _edges(nodes), variable_style, function_style, rankdir, remove_variable, show_name
    )


def _roots(outputs: Any) -> list[Node]:
    if isinstance(outputs, Variable | VariableNode | FunctionNode):
        outputs = [outputs]
    elif not isinstance(outputs, Iterable) or isinstance(outputs, str) or is_array(outputs):
        raise TypeError(
            f"build_computational_graph: outputs must be a Variable, VariableNode, "
            f"FunctionNode or a list of them, got {type(outputs).__module__}."
            f"{type(outputs).__qualname__}{_NO_GRAPH if is_array(outputs) else ''}"
        )
    roots: list[Node] = []
    for i, out in enumerate(outputs):
        if isinstance(out, Variable):
            roots.append(out.node)
        elif isinstance(out, VariableNode | FunctionNode):
            roots.append(out)
        else:
            raise TypeError(
                f"build_computational_graph: outputs[{i}] is a {type(out).__module__}."
                f"{type(out).__qualname__}; pass Variables, VariableNodes or "
                f"FunctionNodes{_NO_GRAPH if is_array(out) else ''}"
            )
    return roots


_NO_GRAPH = " (an array has no graph: wrap it in agnograd.Variable before computing)"


def _parents(node: Node) -> tuple[Node, ...]:
    """What ``node`` was computed from: its creator, or the function's inputs."""
    if isinstance(node, VariableNode):
        creator = node.creator_node
        return () if creator is None else (creator,)
    return node.inputs or ()


def _walk(roots: list[Node]) -> list[Node]:
    """Every node behind ``roots``, each once, in a depth-first post-order: inputs
    (left to right) before the functions that take them, creators before their
    outputs. Iterative, so a chain of any length fits."""
    order: list[Node] = []
    # By id: a FunctionNode subclass may define __eq__. Every node in `entered` stays
    # referenced by `stack` or `order`, so no id is reused while this runs.
    entered: set[int] = set()
    for root in roots:
        if id(root) in entered:
            continue
        entered.add(id(root))
        stack: list[tuple[Node, Iterator[Node]]] = [(root, iter(_parents(root)))]
        while stack:
            node, parents = stack[-1]
            for parent in parents:
                if id(parent) not in entered:
                    entered.add(id(parent))
                    stack.append((parent, iter(_parents(parent))))
                    break
            else:
                stack.pop()
                order.append(node)
    return order


def _edges(nodes: list[Node]) -> list[tuple[Node, Node]]:
    """Creator → variable and input → function edges, each once (``x * x`` gives one
    edge from ``x``, as in Chainer), in the order of their second node."""
    edges: list[tuple[Node, Node]] = []
    for node in nodes:
        if isinstance(node, VariableNode):
            if node.creator_node is not None:
                edges.append((node.creator_node, node))
        else:
            taken: set[int] = set()
            for x in node.inputs or ():
                if id(x) not in taken:
                    taken.add(id(x))
                    edges.append((x, node))
    return edges


def _skip_variables(
    nodes: list[Node], edges: list[tuple[Node, Node]]
) -> tuple[list[Node], list[tuple[Node, Node]]]:
    """The function nodes, and an edge from each variable's creator to each function
    that took the variable (both in the graph)."""
    functions: list[Node] = [node for node in nodes if isinstance(node, FunctionNode)]
    present = {id(f) for f in functions}
    joined: list[tuple[Node, Node]] = []
    seen: set[tuple[int, int]] = set()
    for head, tail in edges:
        if isinstance(head, VariableNode) and isinstance(tail, FunctionNode):
            creator = head.creator_node
            if creator is not None and id(creator) in present and id(tail) in present:
                key = (id(creator), id(tail))
                if key not in seen:
                    seen.add(key)
                    joined.append((creator, tail))
    return functions, joined


def _devices(nodes: list[Node]) -> dict[int, Device]:
    """The Device of each variable node, by id, where it can be told.

    From the node's array, or one a function kept for backward; else from its
    neighbours, by define-then-run's rule: a function's outputs are where its first
    input is (a copy's, at its destination), and its inputs are where the others
    are. A forward pass then a backward pass over ``nodes``, which are in forward
    order: a function comes after its inputs and before its outputs.
    """
    found: dict[int, Device] = {}
    made_on: dict[int, Device] = {}  # function -> the device of its outputs
    for node in nodes:
        if isinstance(node, VariableNode):
            device = _device_of(node.data)
            if device is None and node.creator_node is not None:
                device = made_on.get(id(node.creator_node))
            if device is not None:
                found[id(node)] = device
            continue
        inputs = node.inputs or ()
        for i, data in zip(node._retain_in, node._saved_inputs or (), strict=False):
            if i < len(inputs) and id(inputs[i]) not in found:
                device = _device_of(data)
                if device is not None:
                    found[id(inputs[i])] = device
        if len(inputs) > 1:
            _share(inputs, found)
        if isinstance(node, Copy):
            made_on[id(node)] = node.dst
        elif node._saved_outputs and (device := _device_of(node._saved_outputs[0])):
            made_on[id(node)] = device
        elif inputs and id(inputs[0]) in found:
            made_on[id(node)] = found[id(inputs[0])]
    # Backwards, for what only later nodes tell: a leaf whose Variable is gone, read
    # by a function that kept no input (its outputs are on the leaf's device).
    for node in reversed(nodes):
        if isinstance(node, VariableNode):
            creator = node.creator_node
            if creator is not None and id(node) in found:
                made_on.setdefault(id(creator), found[id(node)])
            continue
        inputs = node.inputs or ()
        device = node.src if isinstance(node, Copy) else made_on.get(id(node))
        if device is not None and inputs:
            found.setdefault(id(inputs[0]), device)
        if len(inputs) > 1:
            _share(inputs, found)
    return found


def _share(inputs: tuple[VariableNode, ...], found: dict[int, Device]) -> None:
    """Inputs of one function whose device is unknown: where the others are."""
    known = next((found[id(x)] for x in inputs if id(x) in found), None)
    if known is not None:
        for x in inputs:
            found.setdefault(id(x), known)


def _device_of(data: Any) -> Device | None:
    if data is None:
        return None
    try:
        return device_of(data)
    except TypeError:  # no installed adapter owns the array's type
        return None


def _variable_label(
    node: VariableNode, device: Device | None, show_name: bool, shapes: dict[tuple[Any, Any], str]
) -> str:
    # node.label, remembered by shape and dtype: naming a dtype takes microseconds.
    try:
        lines = [shapes[node.shape, node.dtype]]
    except KeyError:
        lines = [shapes.setdefault((node.shape, node.dtype), node.label)]
    except TypeError:  # a dtype that cannot be hashed
        lines = [node.label]
    if show_name and node.name is not None:
        lines.insert(0, str(node.name))
    if device is not None:
        lines.append(str(device))
    return "\n".join(lines)


def _style(style: Style, default: dict[str, str], argument: str) -> dict[str, Any]:
    if style is None:
        return {}
    if isinstance(style, str):
        if style == "default":
            return dict(default)
        raise ValueError(
            f"build_computational_graph: {argument} must be a dict of DOT attributes, "
            f"'default' or None, got {style!r}"
        )
    if not isinstance(style, Mapping):
        raise TypeError(
            f"build_computational_graph: {argument} must be a dict of DOT attributes "
            f"(e.g. {{'shape': 'box', 'color': 'red'}}), 'default' or None, got "
            f"{type(style).__name__}"
        )
    return dict(style)


_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_RECORD_SPECIAL = re.compile(r"([{}|<>])")


def _attributes(attributes: dict[str, Any]) -> str:
    record = str(attributes.get("shape")) in ("record", "Mrecord")
    parts = []
    for key, value in attributes.items():
        text = str(value)
        if key == "label":
            text = _label_text(text, record)
        name = key if _ID.match(key) else _quote(key)
        parts.append(f"{name}={_quote(text)}")
    return ", ".join(parts)


def _label_text(text: str, record: bool) -> str:
    """Plain text as a Graphviz label: a backslash shows as itself (Graphviz would
    read ``\\n``, ``\\N``, ... in a label), a newline starts a line, and in a record
    shape the characters that would split the record into fields are escaped."""
    text = text.replace("\\", "\\\\").replace("\r\n", "\n").replace("\n", "\\n")
    if record:
        text = _RECORD_SPECIAL.sub(r"\\\1", text)
    return text


def _quote(text: str) -> str:
    # In a DOT string only \" is an escape; \\ passes through as two characters.
    return '"' + text.replace('"', '\\"') + '"'


__all__ = ["ComputationalGraph", "build_computational_graph"]
