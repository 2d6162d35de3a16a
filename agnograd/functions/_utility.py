"""Utility functions of the array API standard (``all``, ``any``, ``diff``)."""

from __future__ import annotations

from typing import Any

DIFFERENTIABLE: dict[str, Any] = {}
NON_DIFFERENTIABLE: dict[str, Any] = {}
UNSUPPORTED: dict[str, str] = {}
