"""``import agnograd`` must not import any array library other than NumPy, nor
einops (whose backend for Variables agnograd defines only once einops is imported:
tests/test_einops.py).

Checked in a fresh interpreter, because this test process has imported them all.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

FORBIDDEN = ("torch", "jax", "jaxlib", "cupy", "dask", "array_api_strict", "tensorflow", "einops")

_PROBE = """
import json, sys
{imports}
print(json.dumps(sorted({{name.partition(".")[0] for name in sys.modules}})))
"""


@pytest.mark.parametrize(
    "imports",
    [
        "import agnograd",
        "import agnograd.functions",
        "import agnograd.interop, agnograd.functional, agnograd.computational_graph",
        "import agnograd, agnograd.functions as F, numpy as np\n"
        "x = agnograd.Variable(np.ones(3))\n"
        "F.sum(F.exp(x) * x[np.array([0, 0, 2])]).backward()\n"
        "assert x.grad is not None",
    ],
    # The last case also loads the adapters (scatter-add of repeated indices).
    ids=["agnograd", "agnograd.functions", "tools", "numpy-backprop"],
)
def test_import_pulls_in_no_other_array_library(imports):
    result = subprocess.run(
        [sys.executable, "-c", _PROBE.format(imports=imports)],
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    loaded = set(json.loads(result.stdout.splitlines()[-1]))
    assert "agnograd" in loaded
    assert not loaded & set(FORBIDDEN), f"imported {sorted(loaded & set(FORBIDDEN))}"
