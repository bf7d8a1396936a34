"""The control plane's go.mod is derived, never typed: what it declares is what gomod.render makes
of k8s.io/kubernetes' own go.mod at the pinned release (regenerate: build.py --regenerate)."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

from tests.e2e.controlplane import build, gomod


def declared_in(go_mod: Path) -> dict[str, object]:
    go = shutil.which("go")
    assert go, "the e2e suite needs Go on PATH"
    done = subprocess.run([go, "mod", "edit", "-json", str(go_mod)], capture_output=True, text=True, check=True)
    return gomod.declared(json.loads(done.stdout))


def test_the_checked_in_go_mod_declares_what_the_generator_derives_from_kubernetes_own(tmp_path):
    rendered = tmp_path / "go.mod"
    rendered.write_text(gomod.render(build.KUBERNETES_VERSION, build.kubernetes_go_mod()))
    assert declared_in(build.MODULE_DIR / "go.mod") == declared_in(rendered)


def test_every_staging_module_is_replaced_by_its_published_version():
    staging = gomod.staging_modules(build.kubernetes_go_mod())
    assert "k8s.io/apiserver" in staging and len(staging) >= 30
    assert gomod.staging_version("v1.34.4") == "v0.34.4"
    assert gomod.staging_version("v1.35.0-rc.1") == "v0.35.0-rc.1"
