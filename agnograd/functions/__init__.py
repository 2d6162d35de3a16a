"""Differentiable functions (``import agnograd.functions as F``).

Each takes Variables or raw arrays of any array API library and returns Variables.
The names of the array API standard (``exp``, ``permute_dims``, ``concat``, ...)
come with Chainer's neural-network functions (``relu``, ``softmax``, ``linear``,
``softmax_cross_entropy``, ...). Each is declared once, as a row of its module (see
``_rows.py``), and the names exported here are derived from the rows.

Examples
--------
>>> import numpy as np, agnograd, agnograd.functions as F
>>> x = agnograd.Variable(np.array([[1.0, -2.0]]))
>>> loss = F.sum(F.relu(x) * 3)
>>> loss.backward(); x.grad
array([[3., 0.]])
"""

from agnograd.functions import _chainer, _misc, _nn, _rows, _table
from agnograd.functions._arithmetic import *  # noqa: F403
from agnograd.functions._binary import *  # noqa: F403 - each __all__ comes from the rows
from agnograd.functions._chainer import *  # noqa: F403
from agnograd.functions._checkpoint import forget
from agnograd.functions._creation import *  # noqa: F403
from agnograd.functions._cumulative import *  # noqa: F403
from agnograd.functions._elementwise import *  # noqa: F403
from agnograd.functions._fft import *  # noqa: F403
from agnograd.functions._indexing import *  # noqa: F403
from agnograd.functions._linalg import *  # noqa: F403
from agnograd.functions._linalg_decompositions import *  # noqa: F403
from agnograd.functions._linalg_eig import *  # noqa: F403
from agnograd.functions._linalg_inverse import *  # noqa: F403
from agnograd.functions._linalg_norms import *  # noqa: F403
from agnograd.functions._manipulation import *  # noqa: F403
from agnograd.functions._misc import *  # noqa: F403
from agnograd.functions._nn import *  # noqa: F403
from agnograd.functions._repetition import *  # noqa: F403
from agnograd.functions._searching import *  # noqa: F403
from agnograd.functions._set import *  # noqa: F403
from agnograd.functions._sorting import *  # noqa: F403
from agnograd.functions._statistical import *  # noqa: F403
from agnograd.functions._transfer import copy
from agnograd.functions._unary import *  # noqa: F403
from agnograd.functions._utility import *  # noqa: F403

# Extras written out above the functions' layer: copy moves Variables between devices,
# forget (Chainer's name for agnograd.checkpoint) recomputes a block in backward.
_ROWS = _rows.Rows(__name__)
_ROWS.declare("copy", standard=False)(copy)
_ROWS.declare("forget", standard=False)(forget)

# The functions the modules' rows declare, under the names the modules bind them to
# (their __all__; see _rows.py): those with a gradient outside the linalg and fft
# extensions, the elementwise ones, and the extras (Chainer's functions, copy).
__all__ = [
    *_ROWS.exports(globals()),
    *_rows.exported(*_table.CHAPTERS, _chainer, _misc, _nn),
]
