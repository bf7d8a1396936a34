"""Reading JSON the requester wrote: an object or a list, each named by its field path when it is
something else (InputError). The path is built by the caller only where it is needed; these run
for every field of every pod reviewed."""

from __future__ import annotations

from collections.abc import Mapping

from policies.errors import InputError


def mapping(raw: object, path: str) -> Mapping[str, object]:
    if type(raw) is dict:  # what JSON decodes to; the ABC check below costs ten times more
        return raw
    if raw is None:
        return {}
    if not isinstance(raw, Mapping):
        raise InputError(path, "must be an object")
    return raw


def json_list(raw: object, path: str) -> list[object]:
    if raw is None:
        return []
    if not isinstance(raw, list):
        raise InputError(path, "must be a list")
    return raw
