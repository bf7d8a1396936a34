"""Real kubectl against the e2e control plane: every case goes through it, as a user would."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.e2e.controlplane.cluster import loopback_env

VENV_BIN = Path(os.sys.executable).parent  # kubectl-gpu_admission, for `kubectl gpu-admission`


@dataclass(frozen=True)
class Kubectl:
    binary: Path
    kubeconfig: Path

    def env(self) -> dict[str, str]:
        env = loopback_env()
        env["KUBECONFIG"] = str(self.kubeconfig)
        env["PATH"] = f"{VENV_BIN}{os.pathsep}{env.get('PATH', '')}"
        return env

    def run(self, *args: str, stdin: str | None = None, check: bool = True, timeout: float = 60, **env: str) -> Result:
        done = subprocess.run(
            [str(self.binary), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env() | env,
            timeout=timeout,
        )
        result = Result(done.returncode, done.stdout, done.stderr)
        if check and done.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({done.returncode}):\n{done.stderr}")
        return result

    def apply(self, manifest: str, *args: str, check: bool = True) -> Result:
        return self.run("apply", "-f", "-", *args, stdin=manifest, check=check)

    def create(self, manifest: str, *args: str, check: bool = True) -> Result:
        return self.run("create", "-f", "-", *args, stdin=manifest, check=check)

    def get(self, *args: str) -> Any:
        return json.loads(self.run("get", *args, "-o", "json").stdout)


@dataclass(frozen=True)
class Result:
    code: int
    stdout: str
    stderr: str

    @property
    def warnings(self) -> list[str]:
        return [line.removeprefix("Warning: ") for line in self.stderr.splitlines() if line.startswith("Warning: ")]
