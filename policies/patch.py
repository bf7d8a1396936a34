"""The RFC 6902 patch between the object as sent and as mutated.

Mutation touches a few leaves of a large Pod, so the walk skips every subtree that the
copy-on-write draft left as the original object, and descends only where something differs.
Appends to a list (a new toleration, a sidecar) become `add` operations; any other list change
is handed to jsonpatch's own differ. Pointers are escaped by jsonpointer (`/` as `~1`, `~` as `~0`).
"""

from __future__ import annotations

from typing import Any

import jsonpatch
from jsonpointer import escape

Operation = dict[str, Any]


def json_patch(original: Any, mutated: Any) -> list[Operation]:
    if original is mutated:
        return []
    operations: list[Operation] = []
    _diff(original, mutated, "", operations)
    return operations


_MISSING = object()


def _diff(before: Any, after: Any, path: str, out: list[Operation]) -> None:
    if isinstance(before, dict) and isinstance(after, dict):
        # No deep == here: untouched subtrees of a copy-on-write draft are the original objects.
        for key in before.keys() - after.keys():
            out.append({"op": "remove", "path": f"{path}/{escape(key)}"})
        for key, value in after.items():
            old = before.get(key, _MISSING)
            if old is value:
                continue
            if old is _MISSING:
                out.append({"op": "add", "path": f"{path}/{escape(key)}", "value": value})
            else:
                _diff(old, value, f"{path}/{escape(key)}", out)
        return
    if isinstance(before, list) and isinstance(after, list):
        _diff_list(before, after, path, out)
        return
    if before != after:
        out.append({"op": "replace", "path": path, "value": after})


def _diff_list(before: list[Any], after: list[Any], path: str, out: list[Operation]) -> None:
    # Identity first: a draft's list holds the original items except where it wrote.
    shared = len(before) <= len(after) and all(old is new for old, new in zip(before, after, strict=False))
    if shared or (len(before) <= len(after) and after[: len(before)] == before):
        out.extend({"op": "add", "path": f"{path}/{i}", "value": after[i]} for i in range(len(before), len(after)))
        return
    if len(before) == len(after):
        for i, (old, new) in enumerate(zip(before, after, strict=True)):
            if old is not new:
                _diff(old, new, f"{path}/{i}", out)
        return
    nested: list[Operation] = jsonpatch.make_patch(before, after).patch
    for operation in nested:
        operation["path"] = path + operation["path"]
        if "from" in operation:
            operation["from"] = path + operation["from"]
    out.extend(nested)
