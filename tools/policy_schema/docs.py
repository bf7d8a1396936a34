"""docs/policy-fields.md, rendered from the JSON Schema (tools.policy_schema.schema): one table per
document kind, a row per field with its kind, default and meaning."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

from tools.policy_schema.fields import Schema

HEADER = """# Policy field reference

Generated from the JSON Schema (`policies/model/gpupolicy.schema.json`, built by
`tools/policy_schema/schema.py`); `tests/engine/test_schema.py` keeps this page, the schema file and the
loader in agreement (`python -m tools.generate` rewrites both). Editors validate policy files against the
schema with a first line `# yaml-language-server: $schema=<path or URL of the schema>`.

The schema checks each field on its own; what depends on two fields or on running code is the
loader's and `gpu-admission lint`'s: a profile the listed models lack, `defaultProfile` outside
`allowedProfiles`, CEL that does not compile, variables used before they are declared, duplicate
names, `sharedWeight` above 1, quantities above 2^63-1. `null` stands for an absent optional
field, as in the loader.
"""


def _bare(schema: Schema) -> Schema:
    """The non-null alternative of a nullable field."""
    options: list[Schema] = schema.get("anyOf", [])
    for option in options:
        if option.get("type") != "null" and ("properties" in option or option.get("type") == "array"):
            return option
    return schema


def _rows(schema: Schema, prefix: str, required: frozenset[str]) -> Iterator[tuple[str, str, str, str]]:
    for name, field in schema.get("properties", {}).items():
        path = f"{prefix}{name}"
        if "x-kind" in field:
            default = "required" if name in required else _default(field)
            yield path, field["x-kind"], default, field.get("description", "")
        inner = _bare(field)
        if inner.get("type") == "array":
            items = _bare(inner.get("items", {}))
            yield from _rows(items, f"{path}[].", frozenset(items.get("required", ())))
        elif "properties" in inner:
            yield from _rows(inner, f"{path}.", frozenset(inner.get("required", ())))


def _default(field: Schema) -> str:
    if "default" not in field:
        return ""
    value = field["default"]
    return f"`{json.dumps(value) if not isinstance(value, str) else value}`"


def render(schema: Schema) -> str:
    parts = [HEADER]
    for document in schema["oneOf"]:
        kind = document["properties"]["kind"]["const"]
        parts.append(f"\n## {kind} (`apiVersion: {document['properties']['apiVersion']['const']}`)\n")
        parts.append("| field | kind | default | meaning |\n|---|---|---|---|")
        metadata: Any = document["properties"]["metadata"]
        spec = _bare(document["properties"]["spec"])
        rows = [
            *_rows(metadata, "metadata.", frozenset({"name"})),
            *_rows(spec, "spec.", frozenset(spec.get("required", ()))),
        ]
        for path, kind_of, default, meaning in rows:
            cell = kind_of.replace("|", "\\|")  # a pipe inside a table cell
            parts.append(f"| `{path}` | {cell} | {default} | {meaning} |")
    return "\n".join(parts) + "\n"
