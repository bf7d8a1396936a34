"""docs/policy-fields.md and the loader agree: every field the loader reads is documented, and
every documented field loads."""

import re
from pathlib import Path

from policies.model import loader, sections

DOC = Path(__file__).parent.parent / "docs" / "policy-fields.md"
ROW = re.compile(r"^\| `([^`]+)` \|", re.MULTILINE)


def documented(kind: str) -> set[str]:
    text = DOC.read_text()
    start = text.index(f"## {kind}")
    end = text.find("\n## ", start + 1)
    return {path.replace("[]", "") for path in ROW.findall(text[start : end if end > 0 else None])}


def loader_fields() -> set[str]:
    nested = {
        "spec": loader._SPEC,
        "spec.match": loader._MATCH,
        "spec.mig": sections._MIG,
        "spec.runtime": sections._RUNTIME,
        "spec.runtime.tolerations": sections._TOLERATION,
        "spec.triton": sections._TRITON,
        "spec.triton.resources": sections._TRITON_RESOURCES,
        "spec.rules": sections._RULE,
        "spec.variables": sections._VARIABLE,
        "spec.quota": sections._QUOTA,
        "spec.quota.limits": sections._LIMITS,
        "spec.security": sections._SECURITY,
    }
    fields = {"metadata.name", "spec.quota.perPod"}
    for parent, keys in nested.items():
        fields |= {f"{parent}.{key}" for key in keys}
    return fields - {"spec"}


def test_every_field_the_loader_reads_is_documented_and_nothing_else():
    assert documented("GPUPolicy") == loader_fields()


def test_every_workload_kind_field_is_documented_and_nothing_else():
    fields = {"metadata.name"} | {f"spec.{k}" for k in loader._WORKLOAD_SPEC}
    fields |= {f"spec.templates.{k}" for k in loader._SITE}
    assert documented("WorkloadKind") == fields


def test_the_readme_links_the_reference_inside_the_repository():
    readme = (DOC.parent.parent / "README.md").read_text()
    assert "docs/policy-fields.md" in readme and "../shared" not in readme
