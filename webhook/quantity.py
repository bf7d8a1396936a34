"""The one place the edge hands Kubernetes quantity parsing to the engine."""

from __future__ import annotations

from decimal import Decimal
from functools import lru_cache

from kubernetes.utils import parse_quantity as _parse


@lru_cache(maxsize=4096)
def _parse_text(value: str) -> Decimal:
    result: Decimal = _parse(value)
    return result


def parse_quantity(value: object) -> Decimal:
    """Pods repeat the same few quantities ("1", "100m", "15Gi"): parse each text once."""
    if isinstance(value, str):
        return _parse_text(value)
    result: Decimal = _parse(value)
    return result
