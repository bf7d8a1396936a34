"""The one place the edge hands Kubernetes quantity parsing to the engine."""

from __future__ import annotations

from decimal import Decimal

from kubernetes.utils import parse_quantity as _parse


def parse_quantity(value: object) -> Decimal:
    result: Decimal = _parse(value)  # type: ignore[no-untyped-call]
    return result
