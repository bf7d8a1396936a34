"""Each lane's go.mod is derived, never typed: what it declares is what gomod.render makes of
k8s.io/kubernetes' own go.mod at the lane's release (regenerate: build.py --regenerate --version V)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from tests.e2e.controlplane import build, gomod


def declared_in(go_mod: Path) -> dict[str, object]:
    go = shutil.which("go")
    assert go, "the e2e suite needs Go on PATH"
    done = subprocess.run([go, "mod", "edit", "-json", str(go_mod)], capture_output=True, text=True, check=True)
    return gomod.declared(json.loads(done.stdout))


@pytest.mark.parametrize("version", build.VERSIONS)
def test_the_checked_in_go_mod_declares_what_the_generator_derives_from_kubernetes_own(tmp_path, version):
    rendered = tmp_path / "go.mod"
    rendered.write_text(gomod.render(version, build.kubernetes_go_mod(version)))
    assert declared_in(build.module_dir(version) / "go.mod") == declared_in(rendered)


def test_the_lanes_are_the_newest_release_and_the_oldest_supported_one_each_in_a_module_of_its_own():
    assert build.VERSIONS == (build.KUBERNETES_VERSION, build.OLDEST_VERSION)
    assert build.module_dir("v1.37.2").name == "v1.37" and build.module_dir("v1.34.4").name == "v1.34"
    assert build.OLDEST_VERSION.startswith("v1.34.")


def test_every_staging_module_is_replaced_by_its_published_version():
    staging = gomod.staging_modules(build.kubernetes_go_mod())
    assert "k8s.io/apiserver" in staging and len(staging) >= 30
    assert gomod.staging_version("v1.34.4") == "v0.34.4"
    assert gomod.staging_version("v1.35.0-rc.1") == "v0.35.0-rc.1"
