"""Checks that a checkpointed block's recomputation reads what its first run read.

A checkpoint node (:mod:`agnograd.functions._checkpoint`) drops the graph of its block and, in
backward, runs the block again to get it back. The gradient is right only if the
recomputation reads the values that the first run read. Without checkpoint a node
that saved an array raises in backward if that array was written in place since
(:mod:`agnograd.core._versions`); here the block's nodes are gone, so the checkpoint node
does that check for them, with what this module records. Three things would make
the recomputation read other values; each makes backward raise ``RuntimeError``
naming the node, the block and what changed, instead of returning a wrong gradient:

- *Writes in place* (``c[...] = 0``, through any view of the memory). The first run
  records the memory of every array that any operation of the block reads (a
  :class:`Recorder` hook, so operations outside a checkpoint pay nothing) and, once
  the block's own intermediate arrays are freed, the versions of the memory still
  alive (:class:`Reads`), which backward compares before recomputing.
- *New arrays* (``c.array = c.array + 1``, or a write on JAX, whose arrays are
  immutable). Variables without a gradient that the block reads keep their array in
  :class:`Reads`; the closed-over ones that require a gradient are inputs of the
  node, which keeps their arrays (:func:`check_closures`).
- *Rebound closure names* (``c = c + 1``, or ``c += 1``, which binds a new
  Variable). Nothing the first run read has changed, but the recomputation would
  read the new object: its recorder compares the array read at each place where the
  first run read one that outlived it.

Examples
--------
>>> import numpy as np, agnograd, agnograd.functions as F
>>> c = agnograd.Variable(np.array([1.0, 2.0]), requires_grad=False)
>>> def block(x):
...     return x * c
>>> y = agnograd.checkpoint(block, agnograd.Variable(np.array([3.0, 4.0])))
>>> c = c + 1  # block now reads another Variable than in its first run
>>> F.sum(y).backward()  # doctest: +ELLIPSIS
Traceback (most recent call last):
RuntimeError: Checkpoint(block): recomputing block in backward, Mul read another array ...
"""

from __future__ import annotations

import weakref
from collections.abc import Sequence
from typing import Any

from agnograd.backends._backend import label
from agnograd.core import _versions
from agnograd.core._function import FunctionNode
from agnograd.core._hooks import FunctionHook
from agnograd.core._variable import Variable
from agnograd.core._variable_node import VariableNode

# One memory the first run read, and where it was first read (see Recorder.reads).
_Read = tuple["weakref.ref[Any]", tuple[int, ...], Any, str, int, int, type]
# Where the first run first read an array that outlived it: the index of the read,
# what was read, and the Variable holding it then (a weak reference) with its name.
_Place = tuple[int, _Read, "weakref.ref[Variable] | None", "str | None"]
_NEVER = 1 << 62  # no place left to compare


class Recorder(FunctionHook):
    """Collects the function nodes applied while it is entered; with ``reads`` (the
    first run of a block) also the memory of every array they read and where it was
    first read; with ``expect`` (a recomputation) compares what is read at those
    places with what the first run read there (:class:`Reads`), keeping the first
    difference in ``other``. Nodes of the class ``nested`` (checkpoint nodes) are
    left out."""

    def __init__(self, nested: type, reads: bool = False, expect: Reads | None = None) -> None:
        self.name = f"agnograd.checkpoint.{id(self):x}"  # nested checkpoints: one each
        self._nested = nested
        self.functions: weakref.WeakSet[FunctionNode] = weakref.WeakSet()
        # id(memory) -> (weak reference to it, shape and dtype of the array read, what
        # read it first, and where: the index of that read among all, of that function
        # among all, and its class). Weak: the block's intermediate arrays must not
        # outlive it.
        self.reads: dict[int, _Read] | None = {} if reads else None
        # The functions applied so far (nested checkpoint nodes left out) and the arrays
        # they read.
        self._count = 0
        self._read = 0
        # A recomputation: the places to compare, by read, the index and read of the
        # next one; ``other``: the first place that read another array, the function
        # that read it there, and that array.
        self._places = () if expect is None else expect.places
        self._at = 0
        self._next = self._places[0][0] if self._places else _NEVER
        self.other: tuple[_Place, str, Any] | None = None

    def forward_preprocess(self, function: Any, in_data: tuple[Any, ...]) -> None:
        # Every operation of a checkpointed block comes here, twice: kept short.
        kind = function.__class__
        if kind is self._nested:
            # A nested checkpoint's node is applied only where its inputs require a
            # gradient, which the recomputation may change; the functions of its block,
            # applied either way, read the same arrays.
            return
        reads = self.reads
        count = self._count
        start = self._read
        if reads is None:  # a recomputation
            if self._next != _NEVER:  # places left to compare
                self._count = count + 1
                end = self._read = start + len(in_data)
                if self._next < end:
                    self._compare(function, in_data, count, start, end)
            return
        self._count = count + 1
        self._read = start + len(in_data)
        i = start
        for array in in_data:
            memory = _versions.memory_of(array)
            seen = reads.get(id(memory))
            # (an id of a freed intermediate array can come back)
            if seen is None or seen[0]() is not memory:
                try:
                    ref = weakref.ref(memory)
                except TypeError:  # not weak-referenceable: cannot be tracked safely
                    i += 1
                    continue
                shape = tuple(array.shape)
                reads[id(memory)] = (ref, shape, array.dtype, function.label, i, count, kind)
            i += 1

    def _compare(
        self, function: FunctionNode, in_data: tuple[Any, ...], count: int, start: int, end: int
    ) -> None:
        """Compare the reads ``start`` to ``end`` of the recomputation, those of its
        ``count``-th function, with the first run's at the places among them."""
        places = self._places
        while self._next < end:
            place = places[self._at]
            first = place[1]
            if first[5] != count or first[6] is not function.__class__:
                # Not the function that read there in the first run: the recomputation
                # applies others (it does not compute the same thing), compare no more.
                self._next = _NEVER
                return
            array = in_data[place[0] - start]
            if first[0]() is not _versions.memory_of(array):
                self.other = (place, function.label, array)
                self._next = _NEVER  # one is enough
                return
            self._at += 1
            self._next = places[self._at][0] if self._at < len(places) else _NEVER

    def forward_postprocess(self, function: Any, in_data: tuple[Any, ...]) -> None:
        self.functions.add(function)


class Reads:
    """What the first run of a block read besides the checkpoint node's inputs, taken
    once the block's intermediate arrays are freed: the memory still alive with its
    version then, the Variables without a gradient with their array then, and where
    the arrays still alive were first read (the places).

    Backward checks the first two before recomputing, as a node that saved an array
    checks its version (:func:`agnograd.core._versions.check`): the block's nodes, which
    would have, are gone. The recomputation must read the same array at each place
    (else a name that the block reads was rebound to another one): its
    :class:`Recorder` compares, as long as the same functions come in the same order.
    """

    __slots__ = ("constants", "memory", "places")

    def __init__(
        self,
        memory: list[tuple[_Read, int, weakref.ref[Variable] | None]],
        constants: list[tuple[weakref.ref[Variable], weakref.ref[Any]]],
        places: list[_Place],
    ) -> None:
        self.memory = memory
        self.constants = constants
        self.places = places

    @classmethod
    def after(
        cls,
        recorder: Recorder,
        watched: list[weakref.ref[Variable]],
        skip: set[int],
        anew: set[int] | None,
    ) -> Reads | None:
        """The reads to check from those the first run (``recorder``) recorded;
        ``skip`` holds the memory that the node's own checks cover (its inputs) or
        that the recomputation makes anew (its outputs), as do the functions of the
        block still alive (kept by an intermediate result stored outside it). With
        ``anew`` (more memory the recomputation makes anew), the places too."""
        reads = recorder.reads
        assert reads is not None
        names: dict[int, tuple[weakref.ref[Variable], str | None]] = {}
        constants = []
        for ref in watched:
            var = ref()
            if var is None or var._data is None:
                continue  # made inside the block, and gone with it
            try:
                constants.append((ref, weakref.ref(var._data)))
            except TypeError:
                continue
            names.setdefault(id(_versions.memory_of(var._data)), (ref, var.name))
        made = set(skip)
        for function in recorder.functions:  # usually none: the block's graph is gone
            for out in function.outputs or ():
                data = None if (node := out()) is None else node.data
                if data is not None:
                    made.add(id(_versions.memory_of(data)))
        memory = []
        places: list[_Place] = []
        for key, read in reads.items():
            owner = read[0]()
            if owner is None or key in made:
                continue  # freed (an intermediate array), or checked elsewhere
            var_ref, var_name = names.get(key, (None, None))
            memory.append((read, _versions.of((owner,))[0], var_ref))
            if anew is not None and key not in anew:
                places.append((read[4], read, var_ref, var_name))
        if not (memory or constants):
            return None
        places.sort()  # by the index of the read (one each): the order of the recomputation
        return cls(memory, constants, places)

    def check(self, where: str, name: str, op: str) -> None:
        """Raise if something the block ``name`` read changed since its first run;
        ``where`` is the checkpoint node's label, ``op`` the function that made it."""
        for ref, kept in self.constants:
            var = ref()
            if var is not None and var._data is not kept():
                raise RuntimeError(
                    f"{where}: the {var._describe()} that {name} reads was given a new "
                    "array between forward and backward (an assignment to .array or .d, or "
                    "a write into an immutable array such as JAX's), so recomputing "
                    f"{name} in backward would read other values than the forward pass and "
                    "its gradient would be wrong; change it after backward, or pass it to "
                    f"{op}() as an argument"
                )
        for (ref, shape, dtype, reader, *_), version, var_ref in self.memory:
            memory = ref()
            if memory is None:
                continue  # freed: nothing can have written into it
            now = _versions.of((memory,))[0]
            if now != version:
                var = None if var_ref is None else var_ref()
                what = (
                    f"array ({label(shape, dtype)}, first read by {reader})"
                    if var is None
                    else var._describe()
                )
                raise RuntimeError(
                    f"{where}: the {what} that {name} reads was written in place "
                    f"between forward and backward (version {version} then, {now} now; a "
                    "write into any view of the same memory counts), so recomputing "
                    f"{name} in backward would read other values than the forward pass and "
                    "its gradient would be wrong; make the write after backward, or into "
                    "another array"
                )


def rebound_error(
    where: str, name: str, op: str, place: _Place, reader: str, array: Any
) -> RuntimeError:
    """The error for a recomputation of the block ``name`` (in the checkpoint node
    ``where``, made by ``op``) that read ``array`` where the first run read another
    array that outlived it (``place``): a name was rebound."""
    _, (_, shape, dtype, *_), var_ref, var_name = place
    var = None if var_ref is None else var_ref()
    if var is not None:
        then = f"the {var._describe()}"
    elif var_name:
        then = f"the array of the Variable {var_name!r} ({label(shape, dtype)})"
    else:
        then = f"an array ({label(shape, dtype)})"
    now = label(tuple(array.shape), array.dtype)
    return RuntimeError(
        f"{where}: recomputing {name} in backward, {reader} read another array "
        f"({now}) where the forward pass read {then}: a name that {name} reads through a "
        "closure now refers to another array or Variable (it was rebound between forward "
        "and backward, as `c = c + 1` or `c += 1` do), so the recomputation would read "
        "other values than the forward pass and its gradient would be wrong; pass it to "
        f"{op}() as an argument, or rebind it after backward"
    )


def check_closures(
    where: str, name: str, nodes: Sequence[VariableNode], kept: Sequence[Any]
) -> None:
    """Raise if a closed-over Variable (``nodes``: the checkpoint node's inputs after
    the block's arguments) was given another array than the one ``kept`` since
    forward: the recomputation would read the new one."""
    for node, array in zip(nodes, kept, strict=True):
        var = node.get_variable_or_none()
        array = array.array if isinstance(array, Variable) else array
        if var is not None and var.array is not array:
            raise RuntimeError(
                f"{where}: the Variable {var.label} that {name} reads "
                "was given a new array between forward and backward, so the "
                "recomputation would differ from the forward pass; update parameters "
                "after backward"
            )
