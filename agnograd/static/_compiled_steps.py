"""The lines of a compiled plan's steps (see :mod:`agnograd.static._compiled`).

One step per function of the graph, forward and backward: lines of their own for
the common elementwise nodes (the namespace's unary functions, ``+``, ``-``, ``*``,
``/`` and their forms with a Python scalar that keep nothing, their rules traced
into the lines), a call of
the node's own ``forward`` or ``backward`` for every other; then the lines that
give the graph's nodes their arrays, and the Python functions made of them.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Container
from typing import Any, NamedTuple

from agnograd.backends._backend import as_array, raw_namespace, writable
from agnograd.core import _versions
from agnograd.core._config import graph_mode
from agnograd.core._engine import _leaf_lock, _quiet
from agnograd.core._engine_loop import _follow_data, node_backward, per_target, tidy
from agnograd.core._function import FunctionNode
from agnograd.core._link import keep_for_backward
from agnograd.core._variable import Variable
from agnograd.core._variable_node import VariableNode
from agnograd.functions._arithmetic import Operator, WithScalar
from agnograd.functions._core import Unary
from agnograd.functions._rule_trace import trace, trace_rule
from agnograd.static._buffers import _unlinked, set_node_data

Step = Callable[..., None]


def _publish_code(
    published: list[tuple[int, VariableNode]], bind: Callable[[Any], str]
) -> list[str]:
    """The lines that give each published node, and its Variable if it had one at
    compile time and still has, its array (``set_node_data`` for the nodes with
    unlinked copies)."""
    lines = []
    for slot, node in published:
        if node in _unlinked:
            lines.append(f"{bind(set_node_data)}({bind(node)}, buf[{slot}])")
            continue
        if node.shape == ():  # NumPy answers a 0-d result with a scalar
            lines.append(f"buf[{slot}] = {bind(as_array)}(buf[{slot}])")
        name = bind(node)
        lines.append(f"{name}._data = buf[{slot}]")
        if node._variable() is not None:
            lines += [f"v = {name}._variable()", "if v is not None:", f"    v._data = buf[{slot}]"]
    return lines


# Steps per generated function. CPython compiles a long function in time and memory
# that grow faster than its length (a 32,000-function chain in one function: 10 s
# and 0.5 GB); pieces of this size keep both proportional to the graph.
_PIECE = 250


def _code(
    name: str, args: str, steps: list[tuple[list[str], list[int]]], env: dict[str, Any]
) -> tuple[Callable[..., None], str]:
    """The function ``name(args)`` running ``steps`` (each step's lines, then
    ``buf[k] = None`` for each array whose last reader the step was), and its
    source: straight-line code over the names bound in ``env``, with no loop and no
    call but the array operations (and the nodes that run their own forward and
    backward), in pieces of ``_PIECE`` steps."""
    namespace = dict(env)
    pieces = []
    sources = []
    for start in range(0, max(len(steps), 1), _PIECE):
        lines = [f"def {name}({args}):"]
        for code, free in steps[start : start + _PIECE]:
            lines += ["    " + line for line in code]
            lines += [f"    buf[{k}] = None" for k in free]
        sources.append("\n".join([*lines, "    return None"]))
        exec(sources[-1], namespace)  # our own lines, from bound names only
        pieces.append(namespace[name])
    if len(pieces) == 1:
        return pieces[0], sources[0]

    def run(*arrays: Any) -> None:
        for piece in pieces:
            piece(*arrays)

    return run, "\n".join(sources)


# -- forward steps --------------------------------------------------------------


def _plain(func: FunctionNode) -> bool:
    """Whether ``func`` may get a step of its own: one of agnograd's classes, on a
    library whose write counting is known (its nodes get their versions from
    :func:`version_steps` or :func:`clock_steps`)."""
    xp = func.xp
    return (
        not func._local_hooks
        and not func._defined_outside
        and (xp in _versions.uncounted or xp in _versions.counted)
        and all(n.shape is not None for n in func.inputs or ())
    )


def savers(
    funcs: list[FunctionNode],
    own: dict[FunctionNode, bool],
    slot_of: dict[VariableNode, int],
    libraries: Container[Any],
) -> list[tuple[FunctionNode, tuple[int, ...], tuple[int, ...]]]:
    """Each of the plan's own nodes (``own``) that keeps arrays of one of
    ``libraries`` (namespaces: ``_versions.counted`` or ``_versions.uncounted``), with
    the slots of the inputs and the outputs it keeps."""
    found = []
    for f in funcs:
        if own[f] and f.xp in libraries and (f._retain_in or f._retain_out):
            inputs: Any = f.inputs
            outputs: Any = f.outputs
            kept_in = tuple([slot_of[inputs[i]] for i in f._retain_in])
            kept_out = tuple([slot_of[outputs[i]()] for i in f._retain_out])
            found.append((f, kept_in, kept_out))
    return found


def version_steps(
    savers: list[tuple[FunctionNode, tuple[int, ...], tuple[int, ...]]],
    checked: set[FunctionNode],
    in_node: bool,
) -> tuple[Step, Step]:
    """The plan's version counting, for its own steps on a library that counts writes
    (PyTorch): ``record(buf)`` after the forward takes the versions of what each node
    of ``savers`` (node, slots of the inputs it keeps, of the outputs) keeps, as the
    node's own forward would (into the node too, with ``in_node``, for the engine);
    ``check(buf, g)`` before the backward raises the engine's error for an array
    kept by a node of ``checked`` (those whose backward the plan runs) that was
    written in place since."""
    recorded: list[tuple[tuple[int, ...], tuple[int, ...]]] = []
    of = _versions.of

    def record(buf: list[Any]) -> None:
        recorded.clear()
        for func, ins, outs in savers:
            versions = (
                of(tuple([buf[k] for k in ins])) if ins else (),
                of(tuple([buf[k] for k in outs])) if outs else (),
            )
            recorded.append(versions)
            if in_node:
                func._saved_versions = versions

    def check(buf: list[Any], g: list[Any]) -> None:
        for (func, ins, outs), (before_in, before_out) in zip(savers, recorded, strict=True):
            if func not in checked:
                continue
            if ins:
                _versions.check(func, "input", tuple([buf[k] for k in ins]), before_in)
            if outs:
                _versions.check(func, "output", tuple([buf[k] for k in outs]), before_out)

    return record, check


def clock_steps(
    savers: list[tuple[FunctionNode, tuple[int, ...], tuple[int, ...]]],
    checked: set[FunctionNode],
    in_node: bool,
) -> tuple[Step, Step]:
    """What :func:`version_steps` are for a library without a write count of its own
    (NumPy): ``record(buf)`` after the forward reads agnograd's write clock (and, with
    ``in_node``, puts it into the nodes of ``savers`` that it read something, for the
    engine, as their own forward would); ``check(buf, g)`` before the backward looks
    at the memory of what they keep only where the clock moved since, and raises the
    engine's error for an array kept by a node of ``checked`` that agnograd wrote
    into after the forward."""
    clock = _versions.clock
    at = [0]

    def record(buf: list[Any]) -> None:
        now = at[0] = clock[0]
        if in_node and now:  # (where it reads 0, so did it when each node last ran)
            for func, _, _ in savers:
                func._saved_at = now

    def check(buf: list[Any], g: list[Any]) -> None:
        then = at[0]
        if clock[0] == then:  # nothing written since the forward
            return
        for func, ins, outs in savers:
            if func not in checked:
                continue
            if ins:
                _versions.check_since(func, "input", tuple([buf[k] for k in ins]), then)
            if outs:
                _versions.check_since(func, "output", tuple([buf[k] for k in outs]), then)

    return record, check


def _forward_code(
    func: FunctionNode,
    slot_of: dict[VariableNode, int],
    bind: Callable[[Any], str],
    saves: bool,
    saves_in_node: bool,
) -> tuple[list[str], bool]:
    """The lines of ``func``'s forward, and whether they are its own (its backward is
    then the plan's too; otherwise the node runs ``forward``).

    ``saves``: whether the function keeps what its backward reads; a node that runs
    its own ``forward`` keeps it in itself, the plan's own lines in the plan's slots,
    and also in the node with ``saves_in_node`` (so that the engine can run the
    backward after the plan's forward, as it can after ``forward_all``).
    """
    ins = [slot_of[n] for n in func.inputs or ()]
    refs = [r() for r in func.outputs or ()]
    outs = [None if r is None else slot_of[r] for r in refs]
    cls = type(func)
    xp = func.xp
    line = None
    if _plain(func) and len(outs) == 1 and outs[0] is not None:
        o = outs[0]
        out_node: Any = refs[0]
        same = all(
            n.shape == out_node.shape and n.dtype == out_node.dtype for n in func.inputs or ()
        )
        if _own_unary(func) and same:
            if func.compute is None:  # type: ignore[attr-defined]
                line = f"buf[{o}] = {bind(getattr(xp, func.fn))}(buf[{ins[0]}])"  # type: ignore[attr-defined]
            else:
                compute = bind(func.compute)  # type: ignore[attr-defined]
                line = f"buf[{o}] = {compute}({bind(xp)}, buf[{ins[0]}])"
        elif _own_scalar(func) and same:
            x, c = f"buf[{ins[0]}]", bind(func.value)  # type: ignore[attr-defined]
            a, b = (c, x) if func.reflected else (x, c)  # type: ignore[attr-defined]
            line = f"buf[{o}] = {a} {cls.symbol} {b}"  # type: ignore[attr-defined]
        elif _own_operator(func):
            line = f"buf[{o}] = buf[{ins[0]}] {cls.symbol} buf[{ins[1]}]"  # type: ignore[attr-defined]
    if line is None:
        return [f"{bind(_generic_forward(func, ins, outs, saves))}(buf)"], False
    if not (saves and saves_in_node and (func._retain_in or func._retain_out)):
        return [line], True
    name = bind(func)
    # No version recorded here: the plan's own steps record and check them
    # (version_steps, clock_steps).
    lines = [line, f"{name}._saved_versions = None"]
    for attr, retained, slots in (
        ("_saved_inputs", func._retain_in, ins),
        ("_saved_outputs", func._retain_out, outs),
    ):
        if retained:
            lines.append(f"{name}.{attr} = ({''.join(f'buf[{slots[i]}], ' for i in retained)})")
    return lines, True


def _real(func: FunctionNode) -> bool:
    """Whether no input of ``func`` is complex."""
    xp = func.xp
    return not any(_complex(xp, n.dtype) for n in func.inputs or ())


@functools.cache
def _complex(xp: Any, dtype: Any) -> bool:
    # Asked for every operator of a graph: NumPy's isdtype costs a tenth of compiling.
    return bool(xp.isdtype(dtype, "complex floating"))


def _own_scalar(func: FunctionNode) -> bool:
    """Whether ``func`` is an operator's node with a Python scalar that keeps nothing
    (its plan's lines then keep nothing either)."""
    return (
        isinstance(func, WithScalar)
        and type(func).forward is WithScalar.forward
        and not (func._retain_in or func._retain_out)
    )


def _own_operator(func: FunctionNode) -> bool:
    """Whether ``func`` is an operator's node of two arrays whose rules trace (of real
    arrays where they read them: the complex ones conjugate)."""
    cls = type(func)
    return (
        isinstance(func, Operator)
        and cls.forward is Operator.forward
        and cls.backward is cls._row_backward  # type: ignore[attr-defined]
        and len(func.inputs or ()) == 2
        and (not func._retain_in or _real(func))
    )


def _own_unary(func: FunctionNode) -> bool:
    cls = type(func)
    return (
        isinstance(func, Unary)
        and cls.forward is Unary.forward
        and cls.backward is cls._row_backward  # type: ignore[attr-defined]
    )


def _generic_forward(
    func: FunctionNode, ins: list[int], outs: list[int | None], saves: bool
) -> Step:
    """What ``forward_all`` does for one node, with its slots and namespace bound
    (``saves``: whether it keeps what its backward reads)."""
    forward = func.forward

    def step(buf: list[Any]) -> None:
        arrays = tuple([buf[k] for k in ins])
        results = forward(arrays)
        for k, y in zip(outs, results, strict=True):
            if k is not None:
                buf[k] = y
        keep_for_backward(func, arrays, results, saves)

    return step


# -- backward steps -------------------------------------------------------------


class _Fit(NamedTuple):
    """What a plan's gradient of an input is tidied to (:func:`tidy`): the shape and
    dtype that its forward computed the input with. Its slots sum gradients there;
    a leaf moved since the forward gets their sum where its data is now
    (:func:`accumulate_into_leaves`), as the engine moves each of them."""

    shape: Any
    dtype: Any
    moved: bool = False


def _fit(node: VariableNode) -> _Fit:
    return _Fit(node.shape, node.dtype)


def _tidy_code(
    func: FunctionNode, i: int, out: VariableNode, bind: Callable[[Any], str]
) -> list[str]:
    """The line that tidies ``gx``, the gradient of input ``i`` of an elementwise
    ``func`` (whose gradients have its output's shape and dtype), as the engine does
    (:func:`tidy`: a sum to the input's shape, a cast to its dtype), where the shapes
    and dtypes say it is needed; none where they say it is not."""
    x = (func.inputs or ())[i]
    if x.shape == out.shape and x.dtype == out.dtype:
        return []
    return [f"gx = {bind(tidy)}({bind(func)}, {i}, gx, {bind(_fit(x))}, {bind(func.xp)}, False)"]


def _backward_code(
    func: FunctionNode,
    indexes: tuple[int, ...],
    slot_of: dict[VariableNode, int],
    own: bool,
    bind: Callable[[Any], str],
    state: dict[int, str],
    frees: bool,
) -> tuple[list[str], list[int]]:
    """The lines of ``func``'s backward and the value slots they read (``frees``: a
    node that runs its own backward drops what it kept afterwards).

    ``state`` says of each gradient slot what the steps before leave in it: nothing
    (absent), an array (``"set"``) or either (``"maybe"``, after a node's own
    backward, which may return None); the lines test for None only in the last case.
    """
    in_nodes = func.inputs or ()
    ins = [slot_of[n] for n in in_nodes]
    refs = [r() for r in func.outputs or ()]
    outs = [None if r is None else slot_of[r] for r in refs]
    if not own:
        for i in indexes:
            state.setdefault(ins[i], "maybe")
        return [f"{bind(_generic_backward(func, indexes, ins, outs, frees))}(buf, g)"], []
    o: Any = outs[0]
    known = state.get(o)
    if known is None:
        return [], []  # no gradient reaches it
    out_node: Any = refs[0]
    cls = type(func)
    body: list[str] = []
    uses: list[int] = []
    if isinstance(func, Unary):
        x = f"buf[{ins[0]}]" if func._retain_in else "None"
        y = f"buf[{o}]" if func._retain_out else "None"
        uses = [k for k, kept in ((ins[0], func._retain_in), (o, func._retain_out)) if kept]
        traced = trace_rule(func.rule, func.xp, x, y, out_node.dtype, bind)
        body += traced or [f"gx = {bind(func.rule)}({bind(func.xp)}, {x}, {y}, gy)"]
        body += _accumulate(ins[0], state)
    elif isinstance(func, WithScalar):  # keeps nothing (_own_scalar): the scalar bound
        (k,) = func.which
        rule, value = func.rules[k], func.value
        args = ("None", value) if k == 0 else (value, "None")
        traced = trace(rule, func.xp, (*args, "None"), out_node.dtype, bind)
        given = ("None", bind(value)) if k == 0 else (bind(value), "None")
        call = f"{bind(rule)}({bind(func.xp)}, {given[0]}, {given[1]}, None, gy)"
        body += traced or [f"gx = {call}"]
        body += _accumulate(ins[0], state)
    else:  # an Operator (_own_operator): its rules traced, on the slots they read
        kept = [f"buf[{ins[j]}]" if j in func._retain_in else "None" for j in (0, 1)]
        uses = [ins[j] for j in func._retain_in]
        for i in indexes:
            rule = cls.rules[i]  # type: ignore[attr-defined]
            traced = trace(rule, func.xp, (*kept, "None"), out_node.dtype, bind)
            call = f"{bind(rule)}({bind(func.xp)}, {kept[0]}, {kept[1]}, None, gy)"
            body += traced or [f"gx = {call}"]
            body += _tidy_code(func, i, out_node, bind)
            body += _accumulate(ins[i], state)
    if known == "set":
        return [f"gy = g[{o}]", f"g[{o}] = None", *body], uses
    lines = [f"gy = g[{o}]", "if gy is not None:", f"    g[{o}] = None"]
    return lines + ["    " + line for line in body], uses


def _accumulate(k: int, state: dict[int, str]) -> list[str]:
    """Add ``gx`` to the gradient in slot ``k`` (the first one is taken as it is)."""
    known = state.get(k)
    state[k] = "set"
    if known is None:
        return [f"g[{k}] = gx"]
    if known == "set":
        return [f"g[{k}] = g[{k}] + gx"]
    return [f"prev = g[{k}]", f"g[{k}] = gx if prev is None else prev + gx"]


# The gradients so far given to the nodes that do not read them (all but those that
# override backward_accumulate).
_NO_GRADIENTS: dict[VariableNode, Any] = {}


def _generic_backward(
    func: FunctionNode,
    indexes: tuple[int, ...],
    ins: list[int],
    outs: list[int | None],
    frees: bool,
) -> Step:
    """What the engine does for one node, with its slots, targets and the checks
    that the compile could not settle bound (and, with ``frees``, what the engine's
    ``clear_buffer`` does for the node afterwards). The node's backward is called by
    the engine's own :func:`node_backward`."""
    in_nodes = func.inputs or ()
    xp = func.xp
    # The target inputs: each one's index, gradient slot and fit.
    targets = [(i, ins[i], _fit(in_nodes[i])) for i in indexes]
    # The target inputs and their gradient slots, for a node that overrides
    # backward_accumulate, which takes their gradients so far.
    so_far = [(in_nodes[i], ins[i]) for i in indexes]

    def step(buf: list[Any], g: list[Any]) -> None:
        gys = tuple([None if k is None else g[k] for k in outs])
        if all(gy is None for gy in gys):
            return
        for k in outs:
            if k is not None:
                g[k] = None
        if func._accumulates:
            # The slots as the engine's gradients by node: what the node takes out
            # of them leaves its slot empty, and what it returns fills it again.
            grads = {node: g[k] for node, k in so_far if g[k] is not None}
            gxs = node_backward(func, in_nodes, indexes, gys, grads)
            for node, k in so_far:
                g[k] = grads.get(node)
        else:
            gxs = node_backward(func, in_nodes, indexes, gys, _NO_GRADIENTS)
        if frees:
            func._saved_inputs = func._saved_outputs = None
        gxs = per_target(func, gxs, indexes, len(in_nodes))
        for (i, k, x), gx in zip(targets, gxs, strict=True):
            if gx is not None:
                gx = tidy(func, i, gx, x, xp, False)
                prev = g[k]
                g[k] = gx if prev is None else prev + gx

    return step


def run_backward(code: Step, runs_rules: bool, buf: list[Any], g: list[Any]) -> None:
    """Run a plan's generated backward ``code`` over ``buf`` and ``g``, without the
    warnings of infinite derivatives, as the engine does; where nodes run their own
    backward (``runs_rules``), which may call agnograd's functions, in the engine's
    configuration too (which costs as much as a tenth of the chain's backward, so
    the plan's own steps, which call none, run without it)."""
    if runs_rules:
        with (
            graph_mode(False, True),
            _quiet(),
        ):
            code(buf, g)
    else:
        with _quiet():
            code(buf, g)


def accumulate_into_leaves(grads: list[tuple[VariableNode, Any]], seen: set[int]) -> None:
    """Add each gradient to its leaf's ``grad``: the engine's accumulation, less the
    checks of the gradients' library, shape and dtype, which a plan proved (its own
    steps) or made (:func:`tidy`, for the others); a leaf moved since the forward
    (``to_device``) gets it where its data is now. ``seen`` holds the ids of arrays
    handed out already (the seeds): an array that reaches two leaves (``a + b``) is
    copied, so that each leaf has its own."""
    for node, gx in grads:
        if gx is None:
            continue
        var = node._variable()
        if var is None:
            continue
        if node.moved:
            gx = _follow_data(node, gx)
        if id(gx) in seen:
            gx = raw_namespace(gx).asarray(gx, copy=True)
        seen.add(id(gx))
        with _leaf_lock:
            prev = var._grad_var
            var._grad_var = Variable._new(writable(gx) if prev is None else prev._data + gx, False)
