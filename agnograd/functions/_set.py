"""Set functions of the array API standard (no gradients: they return indices and counts)."""

from __future__ import annotations

from typing import Any

DIFFERENTIABLE: dict[str, Any] = {}
NON_DIFFERENTIABLE: dict[str, Any] = {}
UNSUPPORTED: dict[str, str] = {}
