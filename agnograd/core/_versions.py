"""Version counters: backward raises if an array it saved was overwritten since.

A FunctionNode that keeps arrays for backward records their versions when its
forward runs; backward compares them with the versions now and raises instead of
computing a gradient from values that the forward never saw.

Versions belong to memory, not to array objects: a write through any view counts
for the buffer behind it, so every saved array that shares that buffer sees it.
Like PyTorch's one counter per storage this is conservative: a write anywhere in a
buffer invalidates every saved view of it, even a view of elements that the write
did not touch. Each library's adapter says what owns an array's memory
(``Adapter.memory``: NumPy and CuPy follow ``.base``, array-api-strict its wrapped
NumPy array). Where the library counts writes itself (``Adapter.write_count``:
PyTorch's ``Tensor._version``, shared by views), its count is recorded, so writes
made behind agnograd's back (``v.array[0] = 1``) are caught too; elsewhere only
agnograd's own writes count: ``x[key] = value`` on a Variable, ``copydata``, and an
in-place operation on a Variable's array, which hands the array back to its setter
(``v.array -= 0.1``; see :func:`note_write`). A raw write into the array
(``v.array[0] = 1``) is seen only in debug mode, which fingerprints what nodes keep
(agnograd.core._debug). JAX arrays are immutable and a Dask write builds a new graph,
so they share nothing.

Catching agnograd's own writes costs nodes nothing measurable: every write into
memory of any library moves one global write clock and notes the clock's value
for that memory (:data:`last_write`). A node of a library without a counter of its
own (NumPy) records the clock when it links (nothing while the clock reads 0, as no
write has happened) and, at backward, looks at the memory of what it kept only
where the clock moved since: a write after the node linked is one whose clock
value is later than the node's. So a training loop that updates its parameters in
place (``p.array -= lr * p.grad``) between backward and the next forward pays no
lookup per node.

A write that the graph follows (``x[key] = value`` while backprop is enabled) also
makes the other Variables of the memory computed before it stale: their graphs no
longer describe their values, so using one in a graph raises (:func:`check_inputs`).
That too costs only what it concerns: while such memory is alive, each node computed
records the clock of those writes (:data:`graph_clock`), and an operation looks up
the memory of an input only where the input was computed before the last of them.
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any, NoReturn

from agnograd.backends._backend import _adapter_cache, adapter_for
from agnograd.core._config import BACKPROP, MODE

# id(owner of a buffer) -> number of agnograd's in-place writes into the buffer;
# entries leave with their owners. While it is empty no write has happened.
versions: dict[int, int] = {}

#: The write clock: how many writes agnograd made into memory so far (one item of a
#: list, which the nodes' code reads with one lookup). It never goes down.
clock: list[int] = [0]
#: id(owner of a buffer) -> the clock's value at agnograd's last write into it;
#: entries leave with their owners, as those of ``versions``.
last_write: dict[int, int] = {}

#: Namespaces of libraries that keep no write counter of their own, learned from
#: the arrays nodes save: while ``versions`` is empty their nodes record nothing.
uncounted: set[Any] = set()
#: Namespaces of libraries that do (PyTorch), with that count (``Adapter.write_count``):
#: their nodes always read it, where they link and where they run backward, and
#: record it where it is not 0.
counted: dict[Any, Callable[[Any], int | None]] = {}

#: The source of the sum of the counts of the arrays of the tuple ``{0}`` through
#: ``count``, a library's write count, without a loop for one or two arrays (nodes read
#: it where they link: see agnograd.core._link.LINK). Counts never go down, so a sum of
#: 0 says that every one is 0; an array without a count (None) raises TypeError.
COUNT_SUM = (
    "(0 if not {0} else count({0}[0]) + 0 if len({0}) == 1 else "
    "count({0}[0]) + count({0}[1]) if len({0}) == 2 else sum(map(count, {0})))"
)

# type(array) -> the library's write count (None: it keeps none), else agnograd's
# count of its memory (the general path's reader: version_steps, check and record).
_version_of: dict[type, Callable[[Any], int | None]] = {}


def memory_of(array: Any) -> Any:
    """The object that owns ``array``'s memory: the same for every view of it."""
    adapter = adapter_for(array)
    return array if adapter is None else adapter.get_memory(array)


# id(owner of a buffer) -> the write clock's value at agnograd's last write into it
# made while backprop was enabled: such a write makes the other Variables of the
# buffer computed before it stale (check_inputs); a write inside no_backprop_mode
# changes values that the graph does not follow, as in torch.no_grad.
graph_writes: dict[int, int] = {}
#: The write clock's value at the last of those writes, into any buffer. A node
#: computed in the graph records it as its ``version`` (while ``graph_writes`` is not
#: empty; see agnograd.core._link.LINK): an input whose version reads it now was
#: computed after every write that could have changed it, which operations see
#: without looking its memory up, so that a write costs only the Variables computed
#: before it.
graph_clock: list[int] = [0]


def _forget(key: int) -> None:
    versions.pop(key, None)
    last_write.pop(key, None)
    graph_writes.pop(key, None)


def bump(array: Any, graph: bool = True) -> None:
    """Record one more in-place write into ``array``'s memory; with ``graph`` (a write
    of agnograd's ``x[key] = value``), one that the graph follows while backprop is
    enabled, which makes the other Variables of the memory stale (check_inputs)."""
    owner = memory_of(array)
    key = id(owner)
    if key not in versions:
        try:
            weakref.finalize(owner, _forget, key)
        except TypeError:  # not weak-referenceable: cannot be tracked safely
            return
        versions[key] = 0
    versions[key] += 1
    now = clock[0] + 1
    clock[0] = now
    last_write[key] = now
    if graph and MODE.get()[BACKPROP]:
        graph_writes[key] = graph_clock[0] = now


def note_write(array: Any) -> None:
    """Record a write into ``array`` that agnograd sees after it was made: an in-place
    operation on a Variable's array, which hands the array back to its setter
    (``v.array -= 0.1``, ``v.d *= 2``). What nodes kept of that memory is refused at
    backward, inside ``no_backprop_mode()`` too (torch's counter counts writes made
    under ``torch.no_grad()``); the Variables keep their graphs, as after any
    assignment to ``.array``. A library that counts writes itself (PyTorch) has
    counted it already."""
    adapter = adapter_for(array)
    if adapter is None or adapter.write_count is None:
        bump(array, graph=False)


def _own(array: Any) -> int:
    return versions.get(id(memory_of(array)), 0)


def _version_function(array: Any) -> Callable[[Any], int | None]:
    adapter = adapter_for(array)
    if adapter is not None and adapter.write_count is not None:
        return adapter.write_count
    return _own


def _version(array: Any) -> int:
    cls = array.__class__
    version = _version_of.get(cls)
    if version is None or cls not in _adapter_cache:  # new, or the adapters changed
        version = _version_of[cls] = _version_function(array)
    n = version(array)
    return _own(array) if n is None else n


def of(arrays: tuple[Any, ...]) -> tuple[int, ...]:
    """The current versions of ``arrays``: the library's count where it keeps one."""
    # PyTorch's nodes that record come here, with one or two arrays of one class: the count
    # is read through the function found once for that class, without a frame per
    # array; anything else goes through _version.
    first = arrays[0]
    cls = first.__class__
    version = _version_of.get(cls)
    if version is not None and cls in _adapter_cache:
        n = len(arrays)
        if n == 1:
            v = version(first)
            if v is not None:
                return (v,)
        elif n == 2 and arrays[1].__class__ is cls:
            v = version(first)
            w = version(arrays[1])
            if v is not None and w is not None:
                return (v, w)
    return tuple([_version(a) for a in arrays])


def record(
    xp: Any, saved_inputs: tuple[Any, ...], saved_outputs: tuple[Any, ...], sample: Any
) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The versions a node of namespace ``xp`` that saved these arrays keeps: ``None``
    when every one is 0 (or it saved none), which :func:`check` takes for 0s, and for
    a library that counts no writes of its own, whose nodes record the clock instead
    (:func:`stamp`); ``sample``, an array of ``xp``, tells whether the library counts
    writes itself, the first time ``xp`` is seen."""
    if xp not in counted and xp not in uncounted:
        adapter = adapter_for(sample)
        if adapter is not None and adapter.write_count is not None:
            counted[xp] = adapter.write_count
        else:
            uncounted.add(xp)
    if xp in uncounted:
        return None
    versions = (
        of(saved_inputs) if saved_inputs else (),
        of(saved_outputs) if saved_outputs else (),
    )
    return versions if any(versions[0]) or any(versions[1]) else None


def stamp(
    func: Any, saved_inputs: tuple[Any, ...], saved_outputs: tuple[Any, ...], sample: Any
) -> None:
    """Record on ``func`` what its backward compares to tell whether what it kept
    (these arrays; ``sample`` as in :func:`record`) was written since: the versions
    of a library that counts writes (``func._saved_versions``), else the clock
    (``func._saved_at``)."""
    xp = func.xp
    if xp not in uncounted:
        func._saved_versions = record(xp, saved_inputs, saved_outputs, sample)
        if xp not in uncounted:  # (record learns whether it counts)
            return
    func._saved_versions = None
    func._saved_at = clock[0]


def note_outputs(outputs: tuple[Any, ...]) -> None:
    """Record on each output Variable's node when its data was computed: the clock of
    the graph's writes (:data:`graph_clock`), which a later write into its memory
    passes."""
    now = graph_clock[0]
    for var in outputs:
        var._node.version = now


def check_inputs(func: Any, nodes: Any, arrays: Any) -> None:
    """Raise if an input that the graph computed was written in place since, through
    another Variable of its memory (a view, or its base): its graph would no longer
    describe its values, and its gradient would be wrong. Leaves are data, free to
    change between graphs (a parameter update). Only an input computed before the
    last write (its version is older than :data:`graph_clock`) has its memory
    looked up."""
    if func._takes_written_inputs:
        return
    now = graph_clock[0]
    for i, (node, array) in enumerate(zip(nodes, arrays, strict=True)):
        if (
            node.creator_node is not None
            and node.version != now
            and graph_writes.get(id(memory_of(array)), 0) > node.version
        ):
            var = node._variable()
            what = "the Variable" if var is None else var._describe()
            raise RuntimeError(
                f"{func.label}: input {i}, {what}, was changed by a write into another "
                "Variable that shares its memory (a view of it, or the array it views) "
                "after it was computed, so its graph no longer describes its values and "
                "its gradient would be wrong; take the view after the write, or write "
                "into a copy (v = v * 1)"
            )


def check(func: Any, what: str, arrays: tuple[Any, ...], recorded: tuple[int, ...] | None) -> None:
    """Raise if one of ``arrays`` was written in place after ``func`` saved it.

    ``recorded`` is ``None`` where every array was at version 0 when the node kept
    it: the node then recorded nothing (see agnograd.core._link.LINK).
    """
    # The common case of PyTorch (all were 0), read at once; a recorded version, which
    # only a write before the forward leaves, goes through of() below.
    count = counted.get(func.xp)
    if (
        count is not None
        and recorded is None
        and len(arrays) <= 2
        and count(arrays[0]) == 0
        and (len(arrays) == 1 or count(arrays[1]) == 0)
    ):
        return
    now = of(arrays)
    before = (0,) * len(arrays) if recorded is None else recorded
    if now == before:  # the common case, compared at once
        return
    for i, (a, b) in enumerate(zip(now, before, strict=True)):
        if a != b:
            _overwritten(func, what, i, f"version {b} then, {a} now")


def check_kept(func: Any, what: str, arrays: tuple[Any, ...], index: int) -> None:
    """Raise if one of the ``arrays`` (``what``: "input" or "output"; ``index``: 0 or 1
    into ``_saved_versions``) that ``func`` kept was written since: through the
    library's counts where it keeps them (or the node recorded versions), else through
    the write clock. ``FunctionNode``'s accessors call it where either may apply."""
    recorded = func._saved_versions
    if recorded is not None or func.xp in counted:
        check(func, what, arrays, None if recorded is None else recorded[index])
    elif clock[0] and func._saved_at != clock[0]:  # some write since it kept them
        check_since(func, what, arrays, func._saved_at)


def check_since(func: Any, what: str, arrays: tuple[Any, ...], at: int) -> None:
    """Raise if agnograd wrote into the memory of one of ``arrays`` after the clock
    read ``at``: what a node of a library without a write count of its own checks at
    backward where the clock moved since it linked (``at``, its ``_saved_at``)."""
    i = written_since(arrays, at)
    if i is not None:
        now = versions.get(id(memory_of(arrays[i])), 0)
        _overwritten(func, what, i, f"version {now} now, written since")


def written_since(arrays: tuple[Any, ...], at: int) -> int | None:
    """The index of the first of ``arrays`` whose memory agnograd wrote into after the
    clock read ``at``; None where there is none."""
    for i, array in enumerate(arrays):
        if last_write.get(id(memory_of(array)), 0) > at:
            return i
    return None


def _overwritten(func: Any, what: str, i: int, versions: str) -> NoReturn:
    raise RuntimeError(
        f"backward of {func.label}: saved {what} {i} was overwritten in place after "
        f"the forward used it ({versions}; a write into any view of the same memory "
        "counts), so its gradient would be wrong; write into a copy instead "
        "(x = xp.asarray(x, copy=True)) or set the values before using them"
    )
