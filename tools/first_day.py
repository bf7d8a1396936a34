"""A platform team's first day, re-runnable against any cluster gpu-admission is installed in:
`python -m tools.first_day [--kubeconfig K] [--context C]`. Each step is what a new user does,
through real kubectl, and says what they would see; the exit code is the number of steps that
did not go as the docs say (0: all did). The e2e suite runs it against its real control plane
(tests/e2e/test_first_day.py); run it after an install or an upgrade to see the same.

The day: the webhook answers; a platform admin applies a team's policy as a GPUPolicy object and
waits for it to be Ready; a broken one is refused at apply; a tenant with `edit` in the team's
namespace gets a MIG slice for `nvidia.com/gpu: 1`, is refused past the budget with the policy
named, sees `kubectl scale` refused past it, reads the quota and the PolicyReports; then an
outage: a broken policy applied while no replica answers, the webhook restarted, and the budget
still held with the last good version said on the policy's status. Everything it makes is in one
namespace and one GPUPolicy, both removed first (so a run after a failed one starts clean) and
at the end.
"""

from __future__ import annotations

import argparse
import json
import shlex
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

NAMESPACE = "first-day"
POLICY = "first-day"
TENANT = ("--as", "first-day-tenant", "--as-group", "system:authenticated")
WEBHOOK_NAMESPACE = "gpu-admission"
TIMEOUT = 90.0

TEAM_POLICY: dict[str, Any] = {
    "apiVersion": "gpu-admission.io/v1alpha1",
    "kind": "GPUPolicy",
    "metadata": {"name": POLICY},
    "spec": {
        "match": {"namespaces": [NAMESPACE]},
        "mig": {"strategy": "mixed", "gpuModels": ["A100-80GB", "H100-80GB"], "defaultProfile": "1g.10gb"},
        "quota": {"limits": {"pods": 1}, "action": "deny", "consistency": "strict"},
    },
}
BROKEN_RULE = [{"name": "never-compiles", "expression": "object.metadata.(", "message": "broken"}]


def broken_policy() -> dict[str, Any]:
    """The team's policy with a rule whose CEL never compiles."""
    return {**TEAM_POLICY, "spec": {**TEAM_POLICY["spec"], "rules": BROKEN_RULE}}


@dataclass(frozen=True)
class Outcome:
    step: str
    ok: bool
    detail: str

    def __str__(self) -> str:
        return f"{'ok  ' if self.ok else 'FAIL'} {self.step}" + ("" if self.ok else f"\n     {self.detail}")


@dataclass(frozen=True)
class Ran:
    code: int
    stdout: str
    stderr: str


def gpu_pod(name: str) -> dict[str, Any]:
    container = {
        "name": "main",
        "image": "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04",
        "resources": {"limits": {"nvidia.com/gpu": 1}},
    }
    metadata = {"name": name, "namespace": NAMESPACE, "labels": {"team": "first-day"}}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": metadata, "spec": {"containers": [container]}}


def deployment(replicas: int) -> dict[str, Any]:
    template = {"metadata": {"labels": {"app": "serve", "team": "first-day"}}, "spec": gpu_pod("unused")["spec"]}
    spec = {"replicas": replicas, "selector": {"matchLabels": {"app": "serve"}}, "template": template}
    metadata = {"name": "serve", "namespace": NAMESPACE}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": metadata, "spec": spec}


class FirstDay:
    def __init__(
        self,
        kubectl: Sequence[str],
        stop: Callable[[], None],
        start: Callable[[], None],
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.kubectl = list(kubectl)  # the command and its connection flags
        self.stop, self.start = stop, start
        self.env = dict(env) if env is not None else None  # None: this process's
        self.outcomes: list[Outcome] = []

    def run(self, *args: str, stdin: object = None) -> Ran:
        text = None if stdin is None else (stdin if isinstance(stdin, str) else json.dumps(stdin))
        done = subprocess.run(
            [*self.kubectl, *args], input=text, capture_output=True, text=True, timeout=120, env=self.env
        )
        return Ran(done.returncode, done.stdout, done.stderr)

    def step(self, name: str, ok: bool, detail: str = "") -> bool:
        self.outcomes.append(Outcome(name, ok, detail.strip()[-600:]))
        print(self.outcomes[-1], flush=True)
        return ok

    def until(self, check: Callable[[], bool], seconds: float = TIMEOUT) -> bool:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if check():
                return True
            time.sleep(0.5)
        return check()

    def clean(self) -> None:
        self.run("delete", "gpupolicy", POLICY, "--ignore-not-found", "--wait=false")
        # Its pods at once: a bound pod's GPU slice stays taken until its kubelet confirms it gone
        # (and a cluster without kubelets, as the e2e suite's, never does).
        self.run("delete", "pods", "--all", "-n", NAMESPACE, "--grace-period=0", "--force", "--ignore-not-found")
        self.run("delete", "namespace", NAMESPACE, "--ignore-not-found", "--wait=true", "--timeout=60s")

    def day(self) -> list[Outcome]:
        self.clean()
        answering = self.run("get", "validatingwebhookconfiguration", "gpu-admission")
        self.step("the webhook configurations are installed", answering.code == 0, answering.stderr)
        self.run("create", "namespace", NAMESPACE)
        self.run(
            "create", "rolebinding", "tenant-edit", "-n", NAMESPACE, "--clusterrole=edit", "--user=first-day-tenant"
        )
        self.admin_applies_the_team_policy()
        self.tenant_works_within_the_budget()
        self.outage_keeps_the_budget()
        self.clean()
        return self.outcomes

    def admin_applies_the_team_policy(self) -> None:
        broken = broken_policy()
        refused = self.run("apply", "-f", "-", stdin=broken)
        self.step(
            "a broken GPUPolicy is refused at apply, naming the field",
            refused.code != 0 and "spec.rules[0].expression" in refused.stderr,
            refused.stderr,
        )
        applied = self.run("apply", "-f", "-", stdin=TEAM_POLICY)
        ready = self.run("wait", "--for=condition=Ready", f"gpupolicy/{POLICY}", f"--timeout={int(TIMEOUT)}s")
        self.step(
            "the team's GPUPolicy is applied and Ready", applied.code == ready.code == 0, applied.stderr + ready.stderr
        )

    def tenant_works_within_the_budget(self) -> None:
        def slice_on_dry_run() -> bool:
            answer = self.run("create", "-f", "-", "--dry-run=server", "-o", "json", *TENANT, stdin=gpu_pod("probe"))
            return "nvidia.com/mig-1g.10gb" in answer.stdout

        self.step("a tenant's nvidia.com/gpu: 1 becomes a 1g.10gb MIG slice", self.until(slice_on_dry_run))
        first = self.run("create", "-f", "-", *TENANT, stdin=gpu_pod("first"))
        self.step("the tenant's first GPU pod is admitted", first.code == 0, first.stderr)
        second = self.run("create", "-f", "-", *TENANT, stdin=gpu_pod("second"))
        self.step(
            "past the budget the tenant is refused, the policy named",
            second.code != 0 and POLICY in second.stderr,
            second.stderr or second.stdout,
        )
        made = self.run("apply", "-f", "-", *TENANT, stdin=deployment(0))
        scaled = self.run("scale", "deployment/serve", "--replicas=3", "-n", NAMESPACE, *TENANT)
        self.step(
            "kubectl scale past the budget is refused at scale time",
            made.code == 0 and scaled.code != 0 and POLICY in scaled.stderr,
            made.stderr + scaled.stderr + scaled.stdout,
        )
        quota = self.run("gpu-admission", "quota", "-n", NAMESPACE, *TENANT)
        self.step(
            "the tenant reads the quota: the policy and what its pods hold",
            quota.code == 0 and POLICY in quota.stdout,
            quota.stderr + quota.stdout,
        )
        can = self.run("auth", "can-i", "list", "policyreports.wgpolicyk8s.io", "-n", NAMESPACE, *TENANT)
        self.step("the tenant may read the PolicyReports of the namespace", can.stdout.strip() == "yes", can.stderr)

    def outage_keeps_the_budget(self) -> None:
        broken = broken_policy()
        self.stop()
        try:
            stored = self.run("apply", "-f", "-", stdin=broken)  # nobody answers: Ignore lets it in
            self.step("while no replica answers, a broken policy gets in", stored.code == 0, stored.stderr)
        finally:
            self.start()

        def refused() -> bool:
            answer = self.run("create", "-f", "-", "--dry-run=server", *TENANT, stdin=gpu_pod("third"))
            return answer.code != 0 and POLICY in answer.stderr

        self.step("after the restart the budget still holds", self.until(refused))

        def said() -> bool:
            found = self.run("get", "gpupolicy", POLICY, "-o", "jsonpath={.status.inForce}")
            return found.stdout.strip() == "lastGood"

        self.step("the policy's status says its last good version is in force", self.until(said))


def shell(command: str) -> Callable[[], None]:
    def run() -> None:
        subprocess.run(shlex.split(command), check=True, timeout=300)

    return run


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0], allow_abbrev=False)
    parser.add_argument("--kubeconfig", help="the cluster's kubeconfig (default: kubectl's)")
    parser.add_argument("--context", help="its context")
    parser.add_argument("--kubectl", default="kubectl", help="the kubectl to run (default: kubectl)")
    replicas = f"kubectl -n {WEBHOOK_NAMESPACE} scale deployment gpu-admission --replicas"
    parser.add_argument("--outage", default=f"{replicas}=0", help="how to stop every replica")
    parser.add_argument(
        "--restart",
        default=f"{replicas}=3",
        help="how to start them again (the step waits until the webhook answers)",
    )
    args = parser.parse_args(argv)
    kubectl = [args.kubectl]
    kubectl += ["--kubeconfig", args.kubeconfig] if args.kubeconfig else []
    kubectl += ["--context", args.context] if args.context else []
    outcomes = FirstDay(kubectl, shell(args.outage), shell(args.restart)).day()
    failed = [o for o in outcomes if not o.ok]
    print(f"{len(outcomes) - len(failed)} of {len(outcomes)} steps as the docs say", file=sys.stderr)
    return len(failed)


if __name__ == "__main__":
    sys.exit(main())
