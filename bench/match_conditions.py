"""What the workloads matchConditions cost the real API server, side by side in one run.

Starts the e2e control plane (tests/e2e: built from Go modules on the first run), installs
CustomResourceDefinitions for three workload kinds (schemaless, as a tenant's object reaches
admission), and two ValidatingWebhookConfigurations at once, both `failurePolicy: Ignore`,
pointing nowhere and never called (each has a second condition, `false`, so the API server
records every evaluation's time):

- `before`: the single condition of earlier releases, every kind's branch in one expression
  (`object.kind == ... && ...`, 45,877 characters for the whole table), its comprehensions
  unbounded;
- `now`: one webhook per kind, each with its own kind's condition (tools/webhook_manifests.py),
  every comprehension bounded (past `BOUND` items the object goes to the webhook).

The pod condition is measured the same way, unbounded as before and bounded as now, on two
mutating webhooks for pods. Then it sends objects with `dryRun=All`: the largest corpus
workloads of those kinds with their GPUs taken out (the condition must read all of them to say
no), and adversarial objects up to about 1.5 MiB (a wide map of replica specs, a long container
list, many resource keys; pods with many containers or a long env), and reads the
API server's own `apiserver_admission_match_condition_evaluation_seconds` (sum and count per
webhook) and `..._errors_total` (a condition over its runtime cost budget errs) from /metrics.

    python bench/match_conditions.py
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml
from control_plane import histograms, metric_lines  # the script's own folder is on the path

from policies.native.reach import pod_condition
from policies.native.workload_conditions import custom_kinds, kind_condition
from tests.e2e.controlplane.build import ensure_binaries
from tests.e2e.controlplane.cluster import ControlPlane
from tests.e2e.kubectl import Kubectl
from tests.support.deploy import strip_gpus

CORPUS = Path(__file__).resolve().parent.parent / "tests" / "corpus"
KINDS = {"PyTorchJob", "RayService", "InferenceService"}
NOWHERE = "https://127.0.0.1:1/validate"


def crd(entry: Any) -> dict[str, Any]:
    version = {"PyTorchJob": "v1", "RayService": "v1", "InferenceService": "v1beta1"}[entry.kind]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{entry.resource}.{entry.group}"},
        "spec": {
            "group": entry.group,
            "scope": "Namespaced",
            "names": {"kind": entry.kind, "plural": entry.resource, "singular": entry.kind.lower()},
            "versions": [
                {
                    "name": version,
                    "served": True,
                    "storage": True,
                    "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": True}},
                }
            ],
        },
    }


def webhook(name: str, entries: list[Any], expression: str) -> dict[str, Any]:
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "sideEffects": "None",
        "failurePolicy": "Ignore",
        "timeoutSeconds": 1,
        "clientConfig": {"url": NOWHERE},
        "rules": [
            {
                "apiGroups": [e.group],
                "apiVersions": ["*"],
                "operations": ["CREATE"],
                "resources": [e.resource],
                "scope": "Namespaced",
            }
            for e in entries
        ],
        # The API server records the time only of a condition set that comes out false (or errs):
        # a second, always false, has every evaluation recorded and no webhook ever called.
        "matchConditions": [
            {"name": "templates-that-ask-for-a-gpu", "expression": expression},
            {"name": "never-call", "expression": "false"},
        ],
    }


def pod_configurations() -> list[dict[str, Any]]:
    """The pod condition as earlier releases wrote it (unbounded) and as now (bounded), on a
    mutating webhook each: pods meet their conditions before validation, so size is no bar."""
    now = " ".join(pod_condition("object"))
    before = re.sub(r"size\([^()]*\) > \d+ \|\| ", "", now)
    pods = {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
    configurations = []
    for name, expression in (("pods-before", before), ("pods-now", now)):
        hook = webhook(f"{name}.bench.gpu-admission.io", [], expression)
        hook["rules"] = [{**pods, "scope": "Namespaced"}]
        configurations.append(
            {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "MutatingWebhookConfiguration",
             "metadata": {"name": name}, "webhooks": [hook]}
        )  # fmt: skip
    return configurations


def adversarial_pods(scale: float) -> dict[str, dict[str, Any]]:
    env = [{"name": f"E{i}", "value": "x"} for i in range(int(12000 * scale))]
    many = {"containers": [container(i) for i in range(int(9000 * scale))]}
    long_env = {"containers": [{"name": "c", "image": "busybox", "env": env}]}
    return {
        f"pod: {name} x{scale:g}": {"apiVersion": "v1", "kind": "Pod", "spec": spec}
        for name, spec in (("many containers", many), ("long env", long_env))
    }


def configurations(entries: list[Any]) -> list[dict[str, Any]]:
    every_kind = " || ".join(kind_condition(entry) for entry in custom_kinds())  # as one webhook had it
    unbounded = re.sub(r"size\([^()]*\) > \d+ \|\| ", "", every_kind)
    before = [webhook("before.bench.gpu-admission.io", entries, unbounded)]
    now = [webhook(f"{e.resource}.now.bench.gpu-admission.io", [e], kind_condition(e)) for e in entries]
    return [
        {"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration",
         "metadata": {"name": name}, "webhooks": hooks}
        for name, hooks in (("bench-before", before), ("bench-now", now))
    ]  # fmt: skip


def corpus_objects() -> dict[str, dict[str, Any]]:
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(CORPUS.glob("*.yaml")):
        for document in yaml.safe_load_all(path.read_text()):
            if document and document.get("kind") in KINDS:
                size = len(json.dumps(document))
                if size > len(json.dumps(found.get(document["kind"], {}))):
                    found[document["kind"]] = strip_gpus(document)  # type: ignore[no-untyped-call]
    return found


def container(i: int, keys: int = 2) -> dict[str, Any]:
    limits = {f"example.com/device-{k}": "1" for k in range(keys)}
    return {"name": f"c{i}", "image": "busybox", "resources": {"limits": limits, "requests": dict(limits)}}


def adversarial(kind_objects: dict[str, dict[str, Any]], scale: float) -> dict[str, dict[str, Any]]:
    """About 1.5 MiB each at scale 1, no GPU anywhere: a condition must read all of it to say no."""
    template = {"metadata": {"annotations": {f"a{i}": "x" for i in range(4)}}, "spec": {"containers": [container(0)]}}
    wide = {f"r{i}": {"replicas": 1, "template": copy.deepcopy(template)} for i in range(int(6000 * scale))}
    containers = [container(i) for i in range(int(9000 * scale))]
    long_list = {"Worker": {"replicas": 1, "template": {"spec": {"containers": containers}}}}
    keyed = [container(i, 300) for i in range(int(60 * scale))]
    many_keys = {"Worker": {"replicas": 1, "template": {"spec": {"containers": keyed}}}}
    base = kind_objects["PyTorchJob"]
    shapes = {"wide replica map": wide, "long container list": long_list, "many resource keys": many_keys}
    return {f"{name} x{scale:g}": {**base, "spec": {"pytorchReplicaSpecs": s}} for name, s in shapes.items()}


def evaluation(plane: ControlPlane) -> tuple[dict[str, dict[str, float]], float]:
    errors = sum(v for _, _, v in metric_lines(plane, "apiserver_admission_match_condition_evaluation_errors_total"))
    return histograms(plane, "apiserver_admission_match_condition_evaluation_seconds"), errors


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="gpu-admission-bench-"))
    plane = ControlPlane(ensure_binaries(), workdir / "control-plane")
    plane.start()
    try:
        kubectl = Kubectl(plane.bin_dir / "kubectl", plane.kubeconfig)
        entries = [e for e in custom_kinds() if e.kind in KINDS]
        for entry in entries:
            kubectl.apply(json.dumps(crd(entry)))
        for entry in entries:
            kubectl.run("wait", "--for=condition=Established", f"crd/{entry.resource}.{entry.group}", "--timeout=60s")
        for configuration in configurations(entries) + pod_configurations():
            kubectl.apply(json.dumps(configuration))
        kubectl.run("create", "namespace", "bench")
        time.sleep(2)  # the API server's informers pick the configurations up
        objects = corpus_objects()
        cases = {f"corpus {kind}": obj for kind, obj in objects.items()}
        for scale in (0.25, 0.5, 1):  # how the cost grows with the object
            cases |= adversarial(objects, scale)
        for scale in (0.25, 0.5, 1):
            cases |= adversarial_pods(scale)
        print(f"{'object':<28} {'KiB':>6} {'before ms':>10} {'now ms':>8} {'before/now':>10} {'request ms':>10} errors")
        for name, obj in cases.items():
            obj = {**obj, "metadata": {"name": "bench", "namespace": "bench"}}
            text = json.dumps(obj)
            before, errors_before = evaluation(plane)
            started = time.perf_counter()
            done = kubectl.create(text, "--dry-run=server", "-o", "name", check=False)
            elapsed = (time.perf_counter() - started) * 1000
            after, errors_after = evaluation(plane)
            if obj.get("kind") == "Pod":
                old, new = (_ms(before, after, f"pods-{v}.bench.gpu-admission.io") for v in ("before", "now"))
            else:
                old = _ms(before, after, "before.bench.gpu-admission.io")
                new = sum(_ms(before, after, k) for k in after if k.endswith(".now.bench.gpu-admission.io"))
            ratio = old / new if new > 0 else float("inf")
            status = "" if done.code == 0 else f" ({done.stderr.strip()[:80]})"
            print(
                f"{name:<28} {len(text) / 1024:>6.0f} {old:>10.3f} {new:>8.3f} {ratio:>10.0f} {elapsed:>10.0f} "
                f"{errors_after - errors_before:.0f}{status}"
            )
    finally:
        plane.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def _ms(before: dict[str, dict[str, float]], after: dict[str, dict[str, float]], name: str) -> float:
    return (after.get(name, {}).get("sum", 0.0) - before.get(name, {}).get("sum", 0.0)) * 1000


if __name__ == "__main__":
    main()
