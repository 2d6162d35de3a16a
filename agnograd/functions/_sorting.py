"""Sorting functions of the array API standard and their rules."""

from __future__ import annotations

from typing import Any

DIFFERENTIABLE: dict[str, Any] = {}
NON_DIFFERENTIABLE: dict[str, Any] = {}
UNSUPPORTED: dict[str, str] = {}
