"""The example policies as the API server's own admission policies (rules, gates, device checks,
runtime settings): `examples/native/<file>.yaml` for each file of examples/policies with rules, written by
`gpu-admission native` (webhook/cli/native.py), the same command users run on their own.
"""

from __future__ import annotations

from pathlib import Path

from policies import load_texts, native_policies
from webhook.cli.native import render

ROOT = Path(__file__).resolve().parent.parent
EXAMPLES = ROOT / "examples" / "policies"
NATIVE = ROOT / "examples" / "native"


def outputs() -> dict[Path, str]:
    found: dict[Path, str] = {}
    for path in sorted(EXAMPLES.glob("*.yaml")):
        result = load_texts([(path.relative_to(ROOT).as_posix(), path.read_text(encoding="utf-8"))])
        native = native_policies(result.policies)
        if native.objects:
            found[NATIVE / path.name] = render(native.objects)
    return found
