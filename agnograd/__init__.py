"""agnograd: reverse-mode automatic differentiation for any array API library.

Examples
--------
>>> import numpy as np, agnograd
>>> x = agnograd.Variable(np.array([1.0, 2.0]))
>>> y = agnograd.functions.sum(agnograd.functions.exp(x) * x)
>>> y.backward()
>>> x.grad
array([ 5.43656366, 22.1671683 ])
"""

# The layers above the graph core fill in its extension points when imported.
from agnograd import (
    computational_graph,
    func,
    functional,
    functions,
    initializers,
    interop,  # noqa: F401 - einops' backend for Variables, defined once einops is imported
    type_check,
)
from agnograd.backends._adapter import Adapter
from agnograd.backends._backend import register_adapter
from agnograd.backends._device import CopyWarning, Device, get_device, view
from agnograd.computational_graph import build_computational_graph
from agnograd.core._config import (
    auto_forward,
    config,
    force_backprop_mode,
    get_auto_forward,
    no_backprop_mode,
    recompute,
    set_auto_forward,
    using_config,
)
from agnograd.core._convert import as_array, as_variable
from agnograd.core._debug import is_debug, set_debug
from agnograd.core._engine import backward_outputs as backward
from agnograd.core._function import FunctionNode
from agnograd.core._function_v1 import Function
from agnograd.core._parameter import Parameter
from agnograd.core._variable import Variable
from agnograd.core._variable_node import VariableNode
from agnograd.function_hooks import FunctionHook, PrintHook, TimerHook
from agnograd.functions import (
    _namespace,  # noqa: F401 - Variable.__array_namespace__
    _operators,  # noqa: F401 - the functions behind Variable's operators
    _transfer,  # noqa: F401 - Variable.to_device, view, to_chx, ...
)
from agnograd.functions._checkpoint import checkpoint
from agnograd.functions._namespace import namespace, namespace_of
from agnograd.static import (
    _define_then_run,  # noqa: F401 - running graphs defined with auto-forward off
    _replay,  # noqa: F401 - y.forward() and y.backward() by compiled plans
)
from agnograd.static._compiled import CompiledGraph, compile  # noqa: A004 - agnograd.compile
from agnograd.static._define_then_run import forward_all
from agnograd.static._jit import JitWarning, jit
from agnograd.static._jit_trace import ConcretizationTypeError
from agnograd.transforms._batching_rules import VmapFallbackWarning
from agnograd.transforms._front_door import grad
from agnograd.transforms._vmap import vmap

__version__ = "0.2.0.dev0"

__all__ = [
    "Adapter",
    "CompiledGraph",
    "ConcretizationTypeError",
    "CopyWarning",
    "Device",
    "Function",
    "FunctionHook",
    "FunctionNode",
    "JitWarning",
    "Parameter",
    "PrintHook",
    "TimerHook",
    "Variable",
    "VariableNode",
    "VmapFallbackWarning",
    "as_array",
    "as_variable",
    "auto_forward",
    "backward",
    "build_computational_graph",
    "checkpoint",
    "compile",
    "computational_graph",
    "config",
    "force_backprop_mode",
    "forward_all",
    "func",
    "functional",
    "functions",
    "get_auto_forward",
    "get_device",
    "grad",
    "initializers",
    "is_debug",
    "jit",
    "namespace",
    "namespace_of",
    "no_backprop_mode",
    "recompute",
    "register_adapter",
    "set_auto_forward",
    "set_debug",
    "type_check",
    "using_config",
    "view",
    "vmap",
]
