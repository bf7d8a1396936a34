"""Files kept in two places because each tool reads only its own tree: kustomize loads nothing
outside a kustomization's directory, Helm's `.Files` nothing outside the chart. One is the source,
the others are written from it (`python -m tools.generate`; `--check` fails where one drifted)."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
COPIES = {
    # the policies the package ships as its embedded default ...
    ROOT / "policies" / "bundled" / "default.yaml": (
        ROOT / "deploy" / "base" / "policies" / "default.yaml",  # ... kustomize's ConfigMap of them
        ROOT / "charts" / "gpu-admission" / "files" / "default.yaml",  # ... the chart's
    ),
    # the PolicyReport CRDs (wg-policy-prototypes), for clusters without them
    ROOT / "deploy" / "components" / "policyreport-crds" / "policyreport-crds.yaml": (
        ROOT / "charts" / "gpu-admission" / "files" / "policyreport-crds.yaml",
    ),
}


def outputs() -> dict[Path, str]:
    return {copy: source.read_text() for source, copies in COPIES.items() for copy in copies}
