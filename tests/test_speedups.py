"""The C fast paths (agnograd/_speedups.c) against the Python reference.

The rest of the suite runs with the extension when it is built; here the core's
tests run again on the Python reference alone, and the C paths are checked for
what tests of behaviour do not see: references they leak or drop.
"""

import collections
import contextlib
import copy
import gc
import os
import subprocess
import sys
import weakref

import numpy as np
import pytest

import agnograd
import agnograd.functions as F
from agnograd import _function
from agnograd._namespace import namespace_of
from agnograd._reference import python_reference
from agnograd.functions import _elementwise as E
from agnograd.functions._core import Unary

CORE_TESTS = [
    "tests/test_engine.py",
    "tests/test_function_node.py",
    "tests/test_variable.py",
    "tests/test_hooks_config.py",
    "tests/test_inplace.py",
    "tests/test_operators.py",
    "tests/test_define_then_run.py",
]
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


@pytest.mark.skipif(not os.environ.get("CI"), reason="a machine without a compiler may lack it")
def test_extension_is_built_in_ci():
    assert _function.speedups is not None
    assert agnograd.FunctionNode.apply.__doc__.startswith("Run forward on ``inputs``")


@pytest.mark.slow
def test_core_tests_pass_on_the_python_reference():
    env = dict(os.environ, AGNOGRAD_PURE_PYTHON="1")
    check = "import agnograd._function as f; assert f.speedups is None"
    subprocess.run([sys.executable, "-c", check], env=env, check=True)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", *CORE_TESTS],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-2000:]


def test_graph_is_freed_by_reference_counting_alone(backend):
    # No reference leaked (objects would stay alive) and no cycle made (they would
    # wait for the cyclic collector, which is switched off here).
    x = agnograd.Variable(backend.asarray(np.linspace(-1.0, 1.0, 8)))
    w = agnograd.Variable(backend.asarray(np.ones(8)))
    gc.disable()
    try:
        h = F.tanh(x) * w + 1.0
        y = F.sum(F.sin(h) * 0.5)
        func = weakref.ref(h.creator_node)
        node = weakref.ref(h.node)
        try:
            data = weakref.ref(h.array)
        except TypeError:  # arrays of some libraries take no weak references
            data = None
        y.backward()
        del h
        assert func() is not None  # y's graph still holds it
        del y
        assert func() is None
        assert node() is None
        if data is not None:
            assert data() is None
    finally:
        gc.enable()


def test_inputs_and_gradients_keep_their_reference_counts(backend):
    a = backend.asarray(np.linspace(0.5, 1.5, 6))
    seed = backend.asarray(np.ones(6))
    x = agnograd.Variable(a)
    before = sys.getrefcount(a), sys.getrefcount(seed)
    for _ in range(50):
        y = F.exp(x) * x
        y.grad = seed
        y.backward()
        x.cleargrad()
        del y
    assert (sys.getrefcount(a), sys.getrefcount(seed)) == before


def test_forward_error_names_the_function():
    x = agnograd.Variable(np.ones(3))
    with pytest.raises(ValueError, match="operands could not be broadcast") as info:
        _ = x + np.ones(4)
    notes = info.value.__notes__
    assert "in agnograd Add.forward with inputs (3), float64, (4), float64" in notes


def test_an_error_while_noting_a_forward_error_is_chained_to_it():
    class BadLabel(agnograd.FunctionNode):
        @property
        def label(self):
            raise KeyError("label broken")

        def forward(self, inputs):
            raise ValueError("boom")

    with pytest.raises(KeyError, match="label broken") as info:
        BadLabel().apply((agnograd.Variable(np.ones(2)),))
    assert isinstance(info.value.__context__, ValueError)


def test_backward_returning_too_many_gradients_is_an_error():
    class Bad(agnograd.FunctionNode):
        def forward(self, inputs):
            return (inputs[0] * 2,)

        def backward(self, indexes, grad_outputs):
            return (grad_outputs[0], grad_outputs[0], grad_outputs[0])

    x = agnograd.Variable(np.ones(2))
    (y,) = Bad().apply((x,))
    y.grad = np.ones(2)
    with pytest.raises(ValueError, match=r"backward of Bad returned 3 gradients for 1 target"):
        y.backward()


def test_apply_takes_any_sequence_of_inputs():
    class Twice(agnograd.FunctionNode):
        def forward(self, inputs):
            return (inputs[0] * 2,)

        def backward(self, indexes, grad_outputs):
            return (grad_outputs[0] * 2,)

    x = agnograd.Variable(np.ones(2))
    # A deque is neither tuple nor list: the C path hands it to the reference.
    for inputs in ((x,), [x], collections.deque([x]), (np.ones(2),)):
        (y,) = Twice().apply(inputs)
        np.testing.assert_array_equal(y.array, [2.0, 2.0])
        assert y.requires_grad is (inputs[0] is x)


def test_apply_by_keyword_and_copied_nodes():
    x = agnograd.Variable(np.ones(2))
    (y,) = F.exp.node().apply(inputs=(x,))
    func = y.creator_node
    clone = copy.copy(func)
    assert clone.inputs == func.inputs
    assert clone.rank == func.rank == 0
    assert clone.outputs == func.outputs
    assert type(clone) is type(func)
    # Slots of subclasses are copied too: the scalar of `x * 3.0`.
    scalar = copy.copy((x * 3.0).creator_node)
    assert scalar.value == 3.0
    assert scalar.inputs == (x.node,)


def test_rank_of_a_node_is_the_largest_input_rank_but_at_least_zero():
    a = agnograd.Variable(np.ones(2))
    a.node.rank = -3  # rewire_on can leave ranks below zero
    assert (a * 2.0).creator_node.rank == -3  # one input: its rank
    assert (a * a).creator_node.rank == 0  # several: max(0, ranks)


# -- kernels: the C forward and backward of the commonest nodes --------------------

needs_speedups = pytest.mark.skipif(_function.speedups is None, reason="extension not built")


KERNEL_CASES = {
    "tanh": lambda x, w: F.tanh(x),
    "exp": lambda x, w: F.exp(x),
    "sin": lambda x, w: F.sin(x),
    "log": lambda x, w: F.log(x * x + 1.0),
    "sigmoid (own compute)": lambda x, w: F.sigmoid(x),
    "add": lambda x, w: x + w,
    "sub": lambda x, w: x - w,
    "mul": lambda x, w: x * w,
    "div": lambda x, w: x / (w * w + 1.0),
    "square by mul": lambda x, w: x * x,
    "broadcast": lambda x, w: F.reshape(x, (4, 1)) * w - F.reshape(w, (1, 4)) / 3.0,
    "constants": lambda x, w: (x + 2.0) * 3.0 / 4.0 - 1.0,
    "constant grad": lambda x, w: x * F.exp(w).array,
    "conj (keeps nothing)": lambda x, w: F.conj(x) * w,
}


@needs_speedups
@pytest.mark.parametrize("dtype", ["float32", "float64", "complex64"])
@pytest.mark.parametrize("case", list(KERNEL_CASES))
def test_kernels_match_the_python_reference(backend, case, dtype):
    if dtype == "complex64" and case in ("log", "sigmoid (own compute)"):
        pytest.skip("no complex input here")
    values = np.linspace(-0.9, 0.8, 4) + (
        0.3j * np.linspace(1.0, 2.0, 4) if "complex" in dtype else 0
    )
    results = []
    for reference in (False, True):
        x = agnograd.Variable(backend.asarray(values, dtype))
        w = agnograd.Variable(backend.asarray(values[::-1] + 0.25, dtype))
        with python_reference() if reference else contextlib.nullcontext():
            y = F.sum(KERNEL_CASES[case](x, w))
            y.backward()
            # Double backprop: the kernels hand Variables to the Python methods.
            (gx,) = agnograd.grad([y], [x], enable_double_backprop=True)
            (ggx,) = agnograd.grad([F.sum(gx * gx)], [x]) if gx is not None else (None,)
        arrays = (y.array, x.grad, w.grad, None if gx is None else gx.array, ggx)
        results.append([None if a is None else backend.to_numpy(a) for a in arrays])
    for a, b in zip(*results, strict=True):
        assert (a is None) == (b is None)
        if a is not None:
            np.testing.assert_array_equal(a, b)


def _python_frames(fn):
    """The code objects of agnograd's node methods that run while fn() does."""
    ran = set()

    def profile(frame, event, arg):
        code = frame.f_code
        node = frame.f_locals.get("self") if event == "call" else None
        if code.co_name in ("forward", "backward") and isinstance(node, agnograd.FunctionNode):
            ran.add(code)

    sys.setprofile(profile)
    try:
        fn()
    finally:
        sys.setprofile(None)
    return ran


@needs_speedups
def test_kernels_run_instead_of_the_python_methods():
    x = agnograd.Variable(np.linspace(0.1, 1.0, 4))
    w = agnograd.Variable(np.ones(4))

    def step():
        y = F.tanh(x) * w + x / w - 2.0 * x / 3.0
        y.grad = np.ones(4)
        y.backward()

    assert _python_frames(step) == set()
    # Functions outside the standard decline, and their Python forward runs.
    assert _python_frames(lambda: F.sigmoid(x)) == {E.PYTHON_METHODS[Unary][0].__code__}


@needs_speedups
def test_own_forward_or_backward_is_not_replaced_by_a_kernel():
    calls = []

    class LoudMul(E.Mul):
        def backward(self, indexes, grad_outputs):
            calls.append("backward")
            return super().backward(indexes, grad_outputs)

    x = agnograd.Variable(np.array([2.0, 3.0]))
    (y,) = LoudMul().apply((x, x))
    y.grad = np.ones(2)
    y.backward()
    assert calls == ["backward"]
    np.testing.assert_array_equal(x.grad, [4.0, 6.0])

    class PlainMul(E.Mul):  # no __slots__: its instances have a dict
        pass

    node = PlainMul()
    node.forward = lambda inputs: (inputs[0] - inputs[1],)  # on the instance only
    (y,) = node.apply((x, agnograd.Variable(np.array([1.0, 1.0]))))
    np.testing.assert_array_equal(y.array, [1.0, 2.0])
    node = PlainMul()
    node.differentiable = False  # what the class declares, overridden by the instance
    (y,) = node.apply((x, x))
    assert not y.requires_grad
    assert y.creator is None


@needs_speedups
def test_kernel_nodes_have_no_instance_dict():
    # So that apply and the loop read what the class declares from the class.
    node = E.Mul()
    with pytest.raises(AttributeError):
        node.forward = lambda inputs: inputs
    assert not hasattr(node, "__dict__")
    assert not hasattr(F.tanh.node(), "__dict__")


@needs_speedups
@pytest.mark.parametrize("inputs", [1, 3])
def test_kernels_leave_wrong_input_counts_to_the_python_methods(inputs):
    arrays = [agnograd.Variable(np.full(2, float(i + 1))) for i in range(inputs)]
    outcomes = []
    for reference in (False, True):
        with python_reference() if reference else contextlib.nullcontext():
            try:
                (y,) = E.Mul().apply(arrays)
                y.grad = np.ones(2)
                y.backward()
                outcomes.append(("ok", y.array.tolist(), arrays[0].grad.tolist()))
            except Exception as error:  # compared between the paths
                outcomes.append((type(error), str(error)))
            for a in arrays:
                a.cleargrad()
    assert outcomes[0] == outcomes[1]


def test_rules_conjugate_complex_arrays_only(backend):
    # _c is the C conjugate_if_complex when the extension is built.
    real = backend.asarray([1.0, -2.0])
    complex_ = backend.asarray([1 + 2j, 3 - 1j], "complex64")
    xp = namespace_of(real)
    assert E._c(xp, real) is real
    backend.assert_close(E._c(xp, complex_), [1 - 2j, 3 + 1j])
    assert E._c(xp, 2.5) == 2.5
    assert E._c(xp, 1 + 1j) == 1 - 1j
    assert E._c(xp, True) == 1


@needs_speedups
@pytest.mark.parametrize(
    ("dunder", "python"),
    [
        ("__add__", E._add),
        ("__radd__", E._add),
        ("__sub__", E._sub),
        ("__mul__", E._mul),
        ("__rmul__", E._mul),
        ("__truediv__", E._div),
    ],
)
def test_c_operators_match_the_python_ones(backend, dunder, python):
    method = vars(agnograd.Variable)[dunder]
    assert type(method).__name__ == "method_descriptor"  # the C one is installed
    others = [2, 2.5, True, 1 + 1j, "text", None]
    others += [backend.asarray([1.0, 2.0]), agnograd.Variable(backend.asarray([3.0, 4.0]))]
    for other in others:
        outcomes = []
        for fn in (method, python):
            x = agnograd.Variable(backend.asarray([0.5, -1.0]))
            try:
                y = fn(x, other)
                F.sum(y).backward()
                outcomes.append(
                    (type(y.creator_node).__name__, backend.to_numpy(y), backend.to_numpy(x.grad))
                )
            except Exception as error:  # compared between the two
                outcomes.append((type(error), str(error)))
        fast, slow = outcomes
        assert len(fast) == len(slow)
        assert fast[0] == slow[0], (other, fast, slow)
        for a, b in zip(fast[1:], slow[1:], strict=True):
            np.testing.assert_array_equal(a, b)


@needs_speedups
def test_kernels_of_a_node_never_applied_behave_as_the_python_methods():
    outcomes = []
    for reference in (False, True):
        with python_reference() if reference else contextlib.nullcontext():
            with pytest.raises(AttributeError):  # no namespace before apply
                F.exp.node().forward((np.ones(2),))
            outcomes.append(F.negative.node().backward((0,), (np.ones(2),))[0].tolist())
    assert outcomes == [[-1.0, -1.0]] * 2


@needs_speedups
def test_kernel_errors_are_the_library_errors(backend):
    # A second product computed after a failed first one hid torch's error.
    errors = []
    for reference in (False, True):
        x0 = agnograd.Variable(backend.asarray([2.0]))
        x1 = agnograd.Variable(backend.asarray([1.0, 2.0, 3.0]))
        mode = python_reference() if reference else contextlib.nullcontext()
        y = x0 * x1
        with mode, pytest.raises(Exception) as info:  # noqa: PT011 - compared below
            y.creator_node.backward((0, 1), (backend.asarray([1.0, 1.0]),))
        errors.append(type(info.value))
    assert errors[0] is errors[1]
    assert errors[0] is not SystemError


@needs_speedups
def test_kernels_keep_a_subclass_accessor_and_any_order_of_indexes():
    class Ones(E.Mul):
        def get_retained_inputs(self):
            return (np.ones(1), np.ones(1))

    x = agnograd.Variable(np.array([5.0]))
    w = agnograd.Variable(np.array([2.0]))
    (y,) = Ones().apply((x, w))
    y.backward()
    assert (x.grad.tolist(), w.grad.tolist()) == ([1.0], [1.0])

    results = []
    for reference in (False, True):
        with python_reference() if reference else contextlib.nullcontext():
            (y,) = E.Mul().apply((x, w))
            g = (np.ones(1),)
            results.append(
                [[a.tolist() for a in y.creator_node.backward(i, g)] for i in ((1, 0), (1,))]
            )
    assert results[0] == results[1] == [[[5.0], [2.0]], [[5.0]]]


def _passing_on(x):
    # + and - pass the gradient on unchanged, which the loop need not check.
    return ((x + 1.0) - x * 2.0 + x * 3.0) - 3.0  # 2 x - 2


@pytest.mark.parametrize("seed_dtype", ["float32", "float64"])
def test_gradients_passed_on_match_the_python_reference(backend, seed_dtype):
    outcomes = []
    for reference in (False, True):
        with python_reference() if reference else contextlib.nullcontext():
            x = backend.variable([0.5, -1.0, 2.0])
            seed = backend.asarray([1.0, 2.0, 3.0], dtype=seed_dtype)
            (gx,) = agnograd.grad([_passing_on(x)], [x], [seed])
            agnograd.backward([_passing_on(x)], [seed])
            outcomes.append([(str(g.dtype), backend.to_numpy(g).tolist()) for g in (gx, x.grad)])
    assert outcomes[0] == outcomes[1]
    assert outcomes[0][0] == (str(x.dtype), [2.0, 4.0, 6.0])


@pytest.mark.parametrize("n", [3, 6])
def test_backward_is_given_the_indexes_of_the_inputs_that_require_grad(n):
    seen = []

    class Total(agnograd.FunctionNode):
        def forward(self, inputs):
            return (sum(inputs[1:], inputs[0]),)

        def backward(self, indexes, grad_outputs):
            seen.append(indexes)
            return grad_outputs * len(indexes)

    for reference in (False, True):
        with python_reference() if reference else contextlib.nullcontext():
            xs = [agnograd.Variable(np.ones(2), requires_grad=i % 2 == 0) for i in range(n)]
            (y,) = Total().apply(xs)
            y.grad = np.ones(2)
            y.backward()
            assert [x.grad is not None for x in xs] == [i % 2 == 0 for i in range(n)]
    assert seen == [tuple(range(0, n, 2))] * 2


def test_a_cycle_through_a_node_is_collected():
    class Keeper(agnograd.FunctionNode):
        def forward(self, inputs):
            return (inputs[0] * 2.0,)

    node = Keeper()
    (y,) = node.apply((agnograd.Variable(np.ones(3)),))
    node.kept = y  # y -> its VariableNode -> node -> y
    if _function.speedups is not None:  # its weak references to outputs are untracked
        assert not gc.is_tracked(node.outputs)
    ref = weakref.ref(node)
    del node, y
    gc.collect()
    assert ref() is None


def test_operators_honour_a_scalar_nodes_own_init(monkeypatch):
    made = []
    plain_init = E.MulConstant.__init__

    def init(self, value):
        made.append(value)
        plain_init(self, value)

    monkeypatch.setattr(E.MulConstant, "__init__", init)
    y = agnograd.Variable(np.array([1.0, 2.0])) * 3.0
    assert made == [3.0]
    assert y.creator_node.value == 3.0


@pytest.mark.parametrize("probe_first", [True, False])
def test_a_backward_run_inside_another_on_the_same_graph(probe_first):
    # The inner run marks nodes the outer one queued (with the probe second, the
    # outer loop queues b's creator before the inner run and again after it); the
    # outer loop must still run each node once, with all of its gradients.
    inner = []

    class Probe(agnograd.FunctionNode):
        def forward(self, inputs):
            return (inputs[0] * 1.0,)

        def backward(self, indexes, grad_outputs):
            with agnograd.force_backprop_mode():  # ordinary backprop records nothing
                c = self.b * 1.0
            c.grad = np.ones(2)
            c.backward()  # into x.grad too: 6 for each element
            inner.append(self.x.grad.tolist())
            return grad_outputs

    results = []
    for reference in (False, True):
        with python_reference() if reference else contextlib.nullcontext():
            x = agnograd.Variable(np.array([1.0, 2.0]))
            b = (x * 2.0) * 3.0
            probe = Probe()
            probe.b, probe.x = b, x
            (p,) = probe.apply((b,))
            loss = p + b * 5.0 if probe_first else b * 5.0 + p
            loss.grad = np.ones(2)
            loss.backward()
            results.append(x.grad.tolist())
    assert results == [[42.0, 42.0]] * 2
    assert inner == [[6.0, 6.0]] * 2


def test_gradients_returned_as_an_array_are_checked_like_any_other():
    # Iterating the array makes new row objects, which may land at the address of
    # the gradient that was passed in and freed: that is no gradient passed on.
    class Rows(agnograd.FunctionNode):
        def forward(self, inputs):
            return (inputs[0] * 1.0,)

        def backward(self, indexes, grad_outputs):
            return np.ones((1, 2, 3), dtype=np.float32)  # one (2, 3) gradient

    results = []
    for reference in (False, True):
        with python_reference() if reference else contextlib.nullcontext():
            x = agnograd.Variable(np.array([1.0, 2.0, 3.0]))
            (y,) = Rows().apply((x,))
            (y * 2.0).backward(grad=np.ones(3))
            results.append((x.grad.shape, x.grad.dtype, x.grad.tolist()))
    assert results == [((3,), np.dtype("float64"), [2.0, 2.0, 2.0])] * 2


def test_a_borrowed_getset_descriptor_is_not_called_on_another_class():
    class Fake:  # holds ndarray's descriptors without being an ndarray
        shape = np.ndarray.__dict__["shape"]
        dtype = np.ndarray.__dict__["dtype"]

    class Odd(agnograd.FunctionNode):
        def forward(self, inputs):
            return (inputs[0] * 1.0,)

        def backward(self, indexes, grad_outputs):
            return (Fake(),)

    for reference in (False, True):
        with python_reference() if reference else contextlib.nullcontext():
            (y,) = Odd().apply((agnograd.Variable(np.array([1.0, 2.0])),))
            with pytest.raises(TypeError, match="doesn't apply to a 'Fake' object"):
                y.backward(grad=np.ones(2))


def test_operators_honour_a_scalar_nodes_own_new(monkeypatch):
    made = []

    def new(cls, value):
        made.append(value)
        return super(E.MulConstant, cls).__new__(cls)

    monkeypatch.setattr(E.MulConstant, "__new__", new)
    y = agnograd.Variable(np.array([1.0, 2.0])) * 3.0
    assert made == [3.0]
    assert y.creator_node.value == 3.0
