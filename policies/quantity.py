"""Kubernetes quantities as the engine reads them: the parser is handed in by the caller, so the
engine never depends on how a quantity is parsed, only on what comes back (an exact Decimal)."""

from __future__ import annotations

from collections.abc import Callable
from decimal import Decimal

QuantityParser = Callable[[object], Decimal]
