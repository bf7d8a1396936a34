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
    found = {copy: source.read_text() for source, copies in COPIES.items() for copy in copies}
    return found | site_index()


REPOSITORY = "https://github.com/gpu-admission/gpu-admission/blob/main/"
INDEX = ROOT / "docs" / "index.md"


def site_index() -> dict[Path, str]:
    """The docs site's home page: the README, its links made to work from docs/ (pages there by
    their names, files outside by the repository's address)."""
    text = (ROOT / "README.md").read_text()
    text = text.replace("](docs/", "](")
    for outside in ("CONTRIBUTING.md", "CHANGELOG.md"):
        text = text.replace(f"]({outside})", f"]({REPOSITORY}{outside})")
    header = "<!-- Generated from README.md by tools/copies.py (python -m tools.generate). -->\n"
    return {INDEX: header + text}
