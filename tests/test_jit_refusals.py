"""``agnograd.jit`` refuses what it cannot trace, and bad arguments, with errors
that name the function, the line of code or the argument, and the way out.

While ``jit`` traces a function its arrays have no values: Python control flow on
them, conversions to Python numbers or NumPy and data-dependent shapes raise
``ConcretizationTypeError`` naming the function, the file and line, and the fixes
(``static_argnums``, or calling it without ``jit``); nothing is kept in the cache.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from test_jit import mlp, same

import agnograd
import agnograd.functions as F
from agnograd import Variable
from agnograd.static._jit_trace import ConcretizationTypeError

# -- data-dependent Python is refused -------------------------------------------------


def _line(fun: Callable[..., Any], text: str) -> str:
    """``file:line`` of the line of ``fun``'s source that contains ``text``."""
    lines, first = inspect.getsourcelines(fun)
    (k,) = [i for i, line in enumerate(lines) if text in line]
    return f"{inspect.getsourcefile(fun)}:{first + k}"


def branch_on_float(x: Any) -> Any:
    if float(F.sum(x)) > 0:
        return x
    return -x


def branch_on_bool(x: Any) -> Any:
    return x if bool(F.sum(x) > 0) else -x


def branch_on_comparison(x: Any) -> Any:
    return x * 2.0 if F.max(x) > 0 else x


def loop_on_int(x: Any) -> Any:
    for _ in range(int(F.sum(x))):
        x = x * 2.0
    return x


def read_item(x: Any) -> Any:
    return x * F.sum(x).item()


def to_numpy(x: Any) -> Any:
    return np.asarray(x * 2.0).sum()


def array_to_list(x: Any) -> Any:
    return x * len(x.array.tolist())


def index_with_value(x: Any) -> Any:
    return [1.0, 2.0, 3.0][agnograd.namespace(x).argmax(x)] * x


def boolean_mask(x: Any) -> Any:
    return x[x > 0.0]


REFUSED = {
    branch_on_float: ("float() needs the value", "if float(F.sum(x)) > 0:"),
    branch_on_bool: ("bool() needs the value", "bool(F.sum(x) > 0)"),
    branch_on_comparison: ("bool() needs the value", "F.max(x) > 0 else"),
    loop_on_int: ("int() needs the value", "range(int(F.sum(x)))"),
    read_item: (r"Variable.item\(\) needs the value", ".item()"),
    to_numpy: (r"numpy.asarray\(\) needs the value", "np.asarray(x * 2.0)"),
    array_to_list: (".tolist() of None", "x.array.tolist()"),
    index_with_value: ("use as an index needs the value", ".argmax(x)]"),
    boolean_mask: ("the shape of a result depends on the values", "x[x > 0.0]"),
}


@pytest.mark.parametrize("fun", list(REFUSED), ids=lambda f: f.__name__)
def test_data_dependent_python_is_refused(fun: Callable[..., Any]) -> None:
    what, text = REFUSED[fun]
    jitted = agnograd.jit(fun)
    with pytest.raises(ConcretizationTypeError) as info:
        # A Variable that requires a gradient: numpy.asarray refuses what derives from it
        jitted(Variable(np.array([1.0, -2.0, 3.0])))
    message = str(info.value)
    assert message.startswith(f"jit({fun.__name__}): ")
    assert what.replace("\\", "") in message.replace("\\", "")
    assert _line(fun, text) in message  # the user's file and line
    assert "call " + fun.__name__ + " without jit" in message
    assert isinstance(info.value, TypeError)  # as JAX's ConcretizationTypeError
    assert jitted.cache_info() == (0, 0, 0, 0, 8)  # nothing kept
    fun(Variable(np.array([1.0, -2.0, 3.0]), requires_grad=False))  # eagerly it runs


def test_numpy_asarray_of_a_value_without_gradient_is_refused() -> None:
    with pytest.raises(ConcretizationTypeError, match=r"numpy.asarray\(\) needs the value"):
        agnograd.jit(to_numpy)(np.array([1.0, -2.0, 3.0]))


def test_refusal_suggests_static_argnums() -> None:
    jitted = agnograd.jit(branch_on_float)
    with pytest.raises(ConcretizationTypeError, match=r"static_argnums"):
        jitted(np.ones(2))


def test_static_argument_makes_python_control_flow_work() -> None:
    def f(x: Any, flag: bool) -> Any:
        return x * 2.0 if flag else x

    jitted = agnograd.jit(f, static_argnums=1)
    same(jitted(np.ones(2), True), np.full(2, 2.0))
    same(jitted(np.ones(2), False), np.ones(2))


def test_other_errors_keep_their_type_and_say_jit_traced() -> None:
    def f(x: Any) -> Any:
        return x @ agnograd.Variable(np.ones((5, 2)))

    with pytest.raises(ValueError, match="do not align") as info:
        agnograd.jit(f)(np.ones((2, 3)))
    assert any("agnograd.jit traced" in note for note in info.value.__notes__)


# -- bad arguments ------------------------------------------------------------------------


def test_bad_jit_arguments() -> None:
    with pytest.raises(TypeError, match="jit: fun must be callable, got int"):
        agnograd.jit(3)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="jit: static_argnums must be an int or a sequence"):
        agnograd.jit(mlp, static_argnums="0")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="static_argnums must be an int or a sequence"):
        agnograd.jit(mlp, static_argnums=(0.5,))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="jit: cache_size must be an int of at least 1, got 0"):
        agnograd.jit(mlp, cache_size=0)
    with pytest.raises(ValueError, match="jit: max_traces must be an int of at least 0"):
        agnograd.jit(mlp, max_traces=-1)
    with pytest.raises(ValueError, match="jit: max_functions must be None or an int of at"):
        agnograd.jit(mlp, max_functions=1.5)


def test_argument_of_unknown_type_is_named() -> None:
    jitted = agnograd.jit(lambda x, cfg: x)
    with pytest.raises(TypeError, match=r"jit\(<lambda>\): argument 1\['opt'\]\[0\] is a object"):
        jitted(np.ones(2), {"opt": [object()]})
    with pytest.raises(TypeError, match=r"argument 'k' is a set; .*static_argnums"):
        agnograd.jit(lambda x, k: x)(np.ones(2), k={1})


def test_variable_without_data_is_refused() -> None:
    with pytest.raises(TypeError, match=r"argument 'w' is a Variable without data \(uninit"):
        agnograd.jit(lambda x, w: x * w)(np.ones(2), w=Variable())


def test_torch_tensor_that_requires_grad_is_refused() -> None:
    torch = pytest.importorskip("torch")
    jitted = agnograd.jit(lambda x: x * 2.0)
    with pytest.raises(TypeError, match=r"jit\(<lambda>\): argument 0 requires a gradient"):
        jitted(torch.ones(2, requires_grad=True))
    with pytest.raises(TypeError, match=r"argument 1\[0\] requires a gradient in torch"):
        agnograd.jit(lambda x, ys: x)(torch.ones(2), [torch.ones(2, requires_grad=True)])
    same(jitted(torch.ones(2)), torch.full((2,), 2.0), lambda t: t.numpy())
