"""The version is written in one place, pyproject.toml; everything that says it agrees."""

from __future__ import annotations

import tomllib
from pathlib import Path

import yaml

from webhook.cluster.api.identity import VERSION

ROOT = Path(__file__).resolve().parents[2]
PROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]


def test_the_installed_package_the_chart_the_image_and_the_krew_manifest_say_the_projects_version():
    chart = yaml.safe_load((ROOT / "charts" / "gpu-admission" / "Chart.yaml").read_text())
    deployment = next(
        d
        for d in yaml.safe_load_all((ROOT / "deploy" / "base" / "deployment.yaml").read_text())
        if d and d["kind"] == "Deployment"
    )
    (container,) = [c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "webhook"]
    krew = yaml.safe_load((ROOT / "plugins" / "krew" / "gpu-admission.yaml").read_text())
    assert VERSION == PROJECT
    assert chart["version"] == chart["appVersion"] == PROJECT
    assert container["image"].rsplit(":", 1)[1] == PROJECT
    assert krew["spec"]["version"] == f"v{PROJECT}"


def test_the_changelog_has_an_entry_for_the_version():
    assert f"## {PROJECT}" in (ROOT / "CHANGELOG.md").read_text()
