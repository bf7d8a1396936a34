"""The GPUPolicy JSON Schema as shipped (`policies/model/gpupolicy.schema.json`) and the field
reference rendered from it (`docs/policy-fields.md`)."""

from __future__ import annotations

import json
from pathlib import Path

from tools.policy_schema.docs import render
from tools.policy_schema.schema import gpupolicy_schema

ROOT = Path(__file__).resolve().parent.parent
SCHEMA_FILE = ROOT / "policies" / "model" / "gpupolicy.schema.json"
DOC = ROOT / "docs" / "policy-fields.md"


def outputs() -> dict[Path, str]:
    schema = gpupolicy_schema()
    return {SCHEMA_FILE: json.dumps(schema, indent=2) + "\n", DOC: render(schema)}
