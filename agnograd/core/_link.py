"""How a node links into the graph the one output its forward computed.

:func:`link_source` writes the source of it; :func:`linked`, which
``FunctionNode.apply`` calls, is made of it (by :func:`render`), and the fast paths of
agnograd's own nodes (``agnograd.core._fast``) have it in their bodies, where the call
cost 5 % of an operation, with what the node keeps written in where its class says.
"""

from __future__ import annotations

import itertools
import linecache
import textwrap
import weakref
from collections.abc import Callable
from typing import Any

from agnograd.core import _versions
from agnograd.core._variable import Variable, _new_variable  # noqa: F401 - LINK reads it

_weakref = weakref.ref
# The registries of agnograd.core._versions, read by every operation: module globals, so
# that reading one costs one lookup (they are never rebound, only filled).
_graph_writes = _versions.graph_writes
_uncounted = _versions.uncounted
_counted = _versions.counted
_clock = _versions.clock
_graph_clock = _versions.graph_clock

_IN_ORDER = {n: tuple(range(n)) for n in range(1, 9)}


def inputs_of(func: Any) -> Any:
    """``FunctionNode.inputs``: its input nodes, a tuple (None before it links, or
    once unchained). One or two are kept in attributes, not a tuple, which Python's
    collector would track for each node of a graph and walk in each full collection."""
    x0 = func._node_in0
    if x0 is None:
        return func._node_ins
    x1 = func._node_in1
    return (x0,) if x1 is None else (x0, x1)


def set_inputs(func: Any, nodes: Any) -> None:
    """Set ``FunctionNode.inputs`` (see :func:`inputs_of`)."""
    if (
        nodes.__class__ is tuple
        and 0 < len(nodes) < 3
        and None is not nodes[0]
        and None is not nodes[-1]
    ):
        func._node_in0 = nodes[0]
        func._node_in1 = nodes[1] if len(nodes) == 2 else None
        func._node_ins = None
    else:
        func._node_in0 = func._node_in1 = None
        func._node_ins = nodes


def outputs_of(func: Any) -> Any:
    """``FunctionNode.outputs``: weak references to its output nodes (None before it
    links). A node of one output that the fast path linked keeps none: the engine
    knows its output as the node that queued it, and its output's ``creator_node``
    sets them when read (every route to a node but the engine's goes through it)."""
    outs = func._node_outs
    if outs is None and (func._node_in0 is not None or func._node_ins is not None):
        raise RuntimeError(
            f"{func.label}.outputs: this node was reached without its output's "
            "creator_node, which records its output (agnograd's fast path keeps no "
            "reference to it); read the node as y.creator_node"
        )
    return outs


def set_outputs(func: Any, refs: Any) -> None:
    """Set ``FunctionNode.outputs`` (see :func:`outputs_of`)."""
    func._node_outs = refs


# What a node keeps for backward of the inputs ``retain_in`` and the outputs
# ``retain_out``, one of which is not empty, and their versions ({versions}); the
# lines {kept_out} choose of its outputs (_KEPT_OUT_ONE, _KEPT_OUT_ANY).
_KEPT = """\
kept_in = kept_out = ()
if retain_in:  # all the inputs, in order, is the common case: no new tuple
    keep_all = retain_in == _IN_ORDER.get(len(arrays))
    kept_in = arrays if keep_all else tuple([arrays[i] for i in retain_in])
    func._saved_inputs = kept_in
if retain_out:
{kept_out}    func._saved_outputs = kept_out
{versions}"""
# Of the one output y; of the tuple (or list) outputs.
_KEPT_OUT_ONE = """\
    kept_out = (y,) if retain_out == (0,) else tuple([(y,)[i] for i in retain_out])
"""
_KEPT_OUT_ANY = """\
    keep_all = retain_out == _IN_ORDER.get(len(outputs)) and outputs.__class__ is tuple
    kept_out = outputs if keep_all else tuple([outputs[i] for i in retain_out])
"""

# What a node keeps for backward, and their versions, for any node: the indexes of
# what it keeps are read from it (see link_source); a node that says what each
# input's gradient reads keeps only what the gradients of the inputs that require one
# read (_read_by_gradients).
_KEEP = """\
retain_in = func._retain_in
if retain_in and func._gradient_reads is not None:
    retain_in = _read_by_gradients(func, nodes)
retain_out = func._retain_out
if retain_in or retain_out:
{kept}"""

# The versions of what it keeps (agnograd.core._versions): for a library that counts
# writes itself (PyTorch) always, read here through its count, recorded only where one
# is not 0 (no record says that all were); elsewhere the write clock, once it moved
# (no record says that it read 0). ``{moved}`` is the sum of the counts; ``{unmoved}``
# what a node that may have recorded versions in an earlier run does where it is 0.
_VERSIONS = """\
count = _counted.get(xp)
if count is not None:
    try:
        moved = {moved}
    except TypeError:  # an array without a count
        moved = 1
    if moved:
        _record_versions(func, {sample})
{unmoved}elif xp in _uncounted:
    if _clock[0]:
        func._saved_at = _clock[0]
else:  # a library not seen yet
    _record_versions(func, {sample})
"""


# {moved} of _VERSIONS where what is kept is read from the node.
_KEPT_COUNTS = "{} + {}".format(
    _versions.COUNT_SUM.format("kept_in"), _versions.COUNT_SUM.format("kept_out")
)


#: What a node class keeps, for :func:`link_source`: ``(retain_in, retain_out, n, reads)``
#: for a class of ``n`` inputs whose nodes keep what the class says, ``reads`` its
#: ``_gradient_reads``.
Keeps = tuple[tuple[int, ...], tuple[int, ...], int, tuple[tuple[int, ...], ...] | None]


def link_source(keeps: Keeps | None = None, record_output: bool = True) -> str:
    """The source of how the node ``func`` links into the graph the one output ``y``
    that its forward computed from ``arrays`` (of the input nodes ``nodes``, of
    namespace ``xp``, their largest rank ``rank``): its output Variable, and what it
    keeps for backward with their versions. It ends in ``return var``.

    With ``keeps`` (see :data:`Keeps`), what the class keeps is written in, else
    read from the node. A class whose inputs' gradients read different inputs keeps
    it all where every input requires a gradient, and only what those that do read
    otherwise (see ``FunctionNode._gradient_reads``). With ``record_output`` False
    (the fast paths'), the node keeps no reference to its output (see
    :func:`outputs_of`).

    Examples
    --------
    >>> from agnograd.core._link import link_source
    >>> print(link_source(((0,), (), 1, None)).splitlines()[4])
    func._saved_inputs = arrays
    """
    versions = _VERSIONS.format(sample="arrays[0]", moved=_KEPT_COUNTS, unmoved="")
    general = _KEEP.format(
        kept=textwrap.indent(_KEPT.format(kept_out=_KEPT_OUT_ONE, versions=versions), "    ")
    )
    if keeps is None:
        keep = general
    else:
        retain_in, retain_out, n, reads = keeps
        assert retain_out in ((), (0,)), retain_out  # one output
        lines, kept = [], []
        if retain_in:
            named = [f"arrays[{i}]" for i in retain_in]
            every = retain_in == tuple(range(n))  # no new tuple
            lines.append(
                "func._saved_inputs = " + ("arrays" if every else f"({', '.join(named)},)")
            )
            kept += named
        if retain_out:
            lines.append("func._saved_outputs = (y,)")
            kept.append("y")
        # (+ 0: a count of None, an array without one, raises TypeError as a sum does)
        moved = " + ".join(f"count({a})" for a in kept) + (" + 0" if len(kept) == 1 else "")
        versions = _VERSIONS.format(moved=moved, sample="arrays[0]", unmoved="")
        keep = "\n".join(lines) + "\n" + versions if kept else ""
        if reads is not None and retain_in and n > 1:
            needed = " and ".join(f"nodes[{i}].requires_grad" for i in range(n))
            keep = "if {}:\n{}else:\n{}".format(
                needed, textwrap.indent(keep, "    "), textwrap.indent(general, "    ")
            )
    return (
        "func.rank = rank\n"
        f"{_SET_INPUTS.get(keeps[2] if keeps else None, 'set_inputs(func, nodes)')}\n"
        "var = _new_variable(y, True, func, rank + 1)\n"
        f"{'func._node_outs = (_weakref(var._n),)' if record_output else ''}\n"
        f"{keep}"
        "if _graph_writes:  # when its data was computed (see _versions.note_outputs)\n"
        "    var._n.version = _graph_clock[0]\n"
        "return var\n"
    )


# What LINK writes for a class of one or two inputs (see inputs_of).
_SET_INPUTS: dict[int | None, str] = {
    1: "func._node_in0 = node",
    2: "func._node_in0 = n1\nfunc._node_in1 = n2",
}

#: :func:`link_source` for any node: what it keeps is read from it.
LINK = link_source()

# What keep_for_backward runs: _KEPT, for what the class keeps, in place of what an
# earlier run kept, and its versions (a count of 0 records nothing). Each attribute
# is replaced, never emptied first: other threads may be running the same graph's
# backward (see DESIGN.md's threads).
_KEEP_AGAIN = """\
retain_in = func._retain_in
retain_out = func._retain_out
if wanted and (retain_in or retain_out):
    xp = func.xp
    if xp not in _counted:  # (versions an earlier run recorded, of another library)
        func._saved_versions = None
    if not retain_in:
        func._saved_inputs = None
    if not retain_out:
        func._saved_outputs = None
{kept}else:
    func._saved_inputs = func._saved_outputs = func._saved_versions = None
"""
_UNMOVED_AGAIN = """\
    else:  # (an earlier run's)
        func._saved_versions = None
"""

#: The names that :data:`LINK` reads besides its arguments: this module's.
LINK_NAMES = (
    "_new_variable",
    "set_inputs",
    "_weakref",
    "_IN_ORDER",
    "_uncounted",
    "_counted",
    "_clock",
    "_record_versions",
    "_read_by_gradients",
    "_graph_writes",
    "_graph_clock",
)


_rendered = itertools.count()


def render(source: str, namespace: dict[str, Any], name: str | None = None) -> Any:
    """The function defined by ``source`` (one ``def``), its globals ``namespace``;
    ``name`` (by default the function's) names its source in tracebacks.

    Examples
    --------
    >>> from agnograd.core._link import render
    >>> render("def twice(x):\\n    return 2 * x", {})(21)
    42
    """
    # A file name of its own, its source in linecache (as attrs and dataclasses do):
    # tracebacks show the generated lines and inspect.getsource finds them.
    name = name or source.split("(", 1)[0][4:]
    filename = f"<agnograd: {name} #{next(_rendered)}>"
    linecache.cache[filename] = (len(source), None, source.splitlines(True), filename)
    code = compile(source, filename, "exec")
    local: dict[str, Any] = {}
    exec(code, namespace, local)
    (function,) = local.values()
    return function


def _record_versions(func: Any, sample: Any) -> None:
    _versions.stamp(func, func._saved_inputs or (), func._saved_outputs or (), sample)


def _read_by_gradients(func: Any, nodes: tuple[Any, ...]) -> tuple[int, ...]:
    """The inputs that ``func`` keeps of those its class keeps: the ones that the
    gradients of its inputs that require one read (``func._gradient_reads``), as
    torch's ``mul`` keeps ``other`` only where ``self`` requires a gradient. A node
    that keeps fewer says so in its ``_retain_in``, so that what reads its arrays
    (``get_retained_inputs``, double backprop, compiled plans) finds their places."""
    reads = func._gradient_reads
    wanted: set[int] = set()
    for i, node in enumerate(nodes):
        if node.requires_grad:
            wanted.update(reads[i])
    retain_in = func._retain_in
    kept = tuple([j for j in retain_in if j in wanted])
    if kept != retain_in:
        func._retain_in = kept
    return kept


def kept_inputs(func: Any, indexes: tuple[int, ...]) -> tuple[Any, ...]:
    """What ``func`` kept of its inputs (``get_retained_inputs``), one entry per input:
    None for one it did not keep, since no gradient it computes reads it (a class that
    declares ``_gradient_reads`` keeps what the gradients of the inputs that require
    one read, see :func:`_read_by_gradients`). Raises where a gradient of ``indexes`` reads
    an input it did not keep: its own input required no gradient when ``func`` ran.

    Examples
    --------
    >>> import numpy as np, agnograd
    >>> from agnograd.core._link import kept_inputs
    >>> c = agnograd.Variable(np.array([2.0]), requires_grad=False)
    >>> y = agnograd.Variable(np.array([3.0])) * c
    >>> kept_inputs(y.creator_node, (0,))  # x's gradient reads c alone
    (None, array([2.]))
    """
    kept = func.get_retained_inputs()
    reads = func._gradient_reads
    if reads is None or len(kept) == len(reads):
        return kept
    by_input: list[Any] = [None] * len(reads)
    for j, array in zip(func._retain_in, kept, strict=True):
        by_input[j] = array
    for i in indexes:
        for j in reads[i]:
            if j not in func._retain_in:
                raise RuntimeError(
                    f"backward of {func.label}: input {i} required no gradient when "
                    f"{func.label} ran, so it did not keep input {j}, which that gradient "
                    "reads; set requires_grad = True before computing with it, or "
                    "compute again"
                )
    return tuple(by_input)


#: ``keep_for_backward(func, arrays, outputs, wanted=True)``: what ``func``, whose
#: forward computed the tuple ``outputs`` from the tuple ``arrays``, keeps for its
#: backward, and their versions, as :data:`LINK` keeps them, for the nodes that
#: :func:`linked` does not link: one of several outputs (``apply``), and one that runs
#: again (define-then-run's ``forward_all``, the steps of compiled plans), whose earlier
#: run's arrays and versions it replaces. It keeps what the node's ``_retain_in``
#: says, not fewer by the inputs that require a gradient now (see
#: :func:`_read_by_gradients`): a graph that runs again may be asked for other
#: gradients. Without ``wanted`` it keeps nothing.
keep_for_backward: Callable[..., None] = render(
    "def keep_for_backward(func, arrays, outputs, wanted=True):\n"
    + textwrap.indent(
        _KEEP_AGAIN.format(
            kept=textwrap.indent(
                _KEPT.format(
                    kept_out=_KEPT_OUT_ANY,
                    versions=_VERSIONS.format(
                        sample="(arrays or outputs)[0]",
                        moved=_KEPT_COUNTS,
                        unmoved=_UNMOVED_AGAIN,
                    ),
                ),
                "    ",
            )
        ),
        "    ",
    ),
    globals(),
)

#: ``linked(func, nodes, arrays, y, rank, xp)``: link ``func``, whose forward computed
#: the one output ``y``, into the graph (see :data:`LINK`); return the output Variable.
linked: Callable[..., Variable] = render(
    "def linked(func, nodes, arrays, y, rank, xp):\n" + textwrap.indent(LINK, "    "), globals()
)
