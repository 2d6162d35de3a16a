"""The fft extension of the array API standard and its rules (keys ``"fft.<name>"``)."""

from __future__ import annotations

from typing import Any

DIFFERENTIABLE: dict[str, Any] = {}
NON_DIFFERENTIABLE: dict[str, Any] = {}
UNSUPPORTED: dict[str, str] = {}
