"""Admission as the real API server measures it, side by side in one run.

Starts the e2e control plane (tests/e2e: built from Go modules on the first run), then:

1. GPU pods created through the API server (per second by 16 client threads, and ms a pod one at
   a time) with no admission webhook or policy, with the team-label rule as a hand-written
   ValidatingAdmissionPolicy, as the one `gpu-admission native` generates from the GPUPolicy
   (the webhook's scope in its matchConditions), and with gpu-admission installed (MIG rewrite
   and the same rule; and where it writes only its runtime settings, alone and after the
   MutatingAdmissionPolicy `native` makes of them), and with a fixed-answer Go webhook
   (bench/fixed_webhook: every review allowed, no patch; then answering the patch gpu-admission
   answered) behind gpu-admission's own configurations in its place; then pods with no GPU,
   without and with gpu-admission installed (its matchConditions keep them from the webhook:
   the API server still evaluates them);
2. the API server's own admission latency (`apiserver_admission_webhook_admission_duration_seconds`
   from its /metrics: mean, p50 and p99 from the histogram) for our mutating and validating
   webhooks, `apiserver_validating_admission_policy_check_duration_seconds` for the VAPs and
   `apiserver_mutating_admission_policy_check_duration_seconds` for the runtime settings' policy;
3. with `--backends`, the same pod under a policy of each MIG back-end (docs/mig-backends.md):
   the device plugin's name, the same name served by DRA, a DRA claim from a ladder template
   (whose claims Kubernetes' resourceclaim controller then makes, one a pod).

    PYTHONPATH=. python bench/control_plane.py [--pods 400] [--compiled] [--replicas 3] [--backends]

`--compiled`: the replica runs the engine compiled by mypyc, as the image does
(tools/compile_engine.py); without it, the source, as a plain install does. `--replicas 3`: also
three replicas behind one address (a round-robin TCP balancer in this process), as deploy/base
and the chart run them: each replica is one Python process, so one replica uses one core.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import itertools
import json
import os
import re
import shutil
import statistics
import tempfile
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import fixed_answer  # bench/fixed_answer.py: the script's own folder is on the path
from kubernetes import client, config

from policies import load_texts, native_policies
from policies.native.runtime_map import NAME as RUNTIME_OBJECT
from tests.e2e.balancer import Balancer
from tests.e2e.controlplane.build import ensure_binaries
from tests.e2e.controlplane.cluster import ControlPlane
from tests.e2e.harness import (
    Installation,
    install,
    pod,
    policy_configmap,
    register_nodes,
    replicas_behind_balancer,
    wait_for,
    wait_refused,
)
from tests.e2e.kubectl import Kubectl
from tests.e2e.policies import TEAM_LABEL_VAP
from tests.support.dra import GPU_CLASS, MIG_CLASS
from tools.compile_engine import ROOT, build
from webhook.cli.native import render
from webhook.sources.policy_files import load_policies

TEAM_RULE = """\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {name: bench-team-label}
spec:
  match: {namespaces: ["bench-*"]}
  rules:
    - name: require-team-label
      expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
      message: "GPU pods need a team label"
      action: deny
"""
NATIVE_RULE = TEAM_RULE.replace("bench-team-label", "bench-native").replace('"bench-*"', "bench-native")
# The same rule with a MIG gate beside it: generated, it also brings the default device-access checks.
NATIVE_ALL = NATIVE_RULE.replace("bench-native", "bench-native-all").replace(
    "  rules:", "  mig: {allowedProfiles: [1g.10gb, 2g.20gb]}\n  rules:"
)
NATIVE_LABEL = "gpu-admission.io/native=true"
WEBHOOK_METRIC = "apiserver_admission_webhook_admission_duration_seconds"
MAP_METRIC = "apiserver_mutating_admission_policy_check_duration_seconds"
_ROUNDS = itertools.count()
SHIPPED = {
    "GPU_ADMISSION_AUDIT_SECONDS": "600",
    "GPU_ADMISSION_LOG_LEVEL": "INFO",
    "GPU_ADMISSION_CERT_SYNC_SECONDS": "30",
}
SAMPLE = re.compile(r"^(?P<name>[a-z_]+)(?:\{(?P<labels>[^}]*)\})? (?P<value>[-0-9.e+]+)$")


def metric_lines(plane: ControlPlane, metric: str) -> Iterator[tuple[str, dict[str, str], float]]:
    _, body = plane.get("/metrics", timeout=30)
    for line in body.decode().splitlines():
        match = SAMPLE.match(line)
        if match and match["name"].startswith(metric):
            yield match["name"], dict(re.findall(r'(\w+)="([^"]*)"', match["labels"] or "")), float(match["value"])


def admission_seconds(plane: ControlPlane) -> dict[str, float]:
    """The API server's own account so far, in seconds: its admission steps of every CREATE
    (mutating and validating, built-in plugins, policies and webhooks included) and its
    matchCondition evaluations. Read one pod at a time, steady to a few µs a pod where the CPU a
    pod of a loaded plane moves by tenths of a ms."""
    found = {"admission": 0.0, "conditions": 0.0}
    for name, labels, value in metric_lines(plane, "apiserver_admission_"):
        if name == "apiserver_admission_step_admission_duration_seconds_sum" and labels.get("operation") == "CREATE":
            found["admission"] += value
        elif name == "apiserver_admission_match_condition_evaluation_seconds_sum":
            found["conditions"] += value
    return found


def in_turn(arms: list[str], rounds: int) -> Iterator[tuple[int, str]]:
    """(round index, arm) for `rounds` passes over `arms`, each pass starting one arm later, so no
    arm always follows the same one (what a switch leaves behind is spread over all of them)."""
    for index in range(rounds * len(arms)):
        yield index, arms[(index + index // len(arms)) % len(arms)]


def medians(rows: dict[str, list[dict[str, float]]]) -> dict[str, dict[str, float]]:
    """Per arm, the median of each figure over its rounds."""
    return {arm: {f: statistics.median(r[f] for r in taken) for f in taken[0]} for arm, taken in rows.items()}


def histograms(plane: ControlPlane, metric: str) -> dict[str, dict[str, float]]:
    """Per webhook or policy: cumulative buckets ('le' bounds as text), 'sum' and 'count', CREATE only."""
    found: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    for name, labels, value in metric_lines(plane, metric):
        if labels.get("operation", "CREATE") != "CREATE":
            continue
        who = labels.get("name") or labels.get("policy") or "?"
        key = labels["le"] if name.endswith("_bucket") else name.rsplit("_", 1)[-1]
        found[who][key] += value
    return found


def quantile(before: dict[str, float], after: dict[str, float], q: float) -> float:
    """The q-quantile (s) of what was observed between two readings, interpolated in its bucket."""
    bounds = sorted((float(k), k) for k in after if k not in ("sum", "count"))
    counts = [after[k] - before.get(k, 0.0) for _, k in bounds]
    total = counts[-1] if counts else 0
    if total <= 0:
        return float("nan")
    rank, lower, below = q * total, 0.0, 0.0
    for (bound, _), cumulative in zip(bounds, counts, strict=True):
        if cumulative >= rank:
            if bound == float("inf"):
                return lower
            return lower + (bound - lower) * (rank - below) / max(cumulative - below, 1e-9)
        lower, below = bound, cumulative
    return lower


def mean(before: dict[str, float], after: dict[str, float]) -> float:
    count = after.get("count", 0.0) - before.get("count", 0.0)
    return (after.get("sum", 0.0) - before.get("sum", 0.0)) / count if count else float("nan")


def create_pods(
    api: client.CoreV1Api, namespace: str, count: int, threads: int, prefix: str, gpus: bool = True
) -> float:
    """Pods created per second by `threads` threads (GPU pods, or plain ones); every create must succeed."""

    def create(index: int) -> None:
        asks = {"gpus": "1"} if gpus else {"resources": {"cpu": "100m"}}
        body = json.loads(pod(f"{prefix}{index}", namespace, labels={"team": "a"}, **asks))
        api.create_namespaced_pod(namespace, body)

    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(create, range(count)))
    return count / (time.perf_counter() - started)


@contextlib.contextmanager
def started() -> Iterator[tuple[ControlPlane, Kubectl, client.CoreV1Api, Path]]:
    """The e2e control plane started in a fresh folder, GPU nodes registered: the plane, kubectl,
    an API client for many threads, and the folder; stopped and removed on the way out."""
    workdir = Path(tempfile.mkdtemp(prefix="gpu-admission-bench-"))
    plane = ControlPlane(ensure_binaries(), workdir / "control-plane")
    plane.start()
    try:
        kubectl = Kubectl(plane.bin_dir / "kubectl", plane.kubeconfig)
        register_nodes(kubectl)
        configuration = client.Configuration()
        config.load_kube_config(str(plane.kubeconfig), client_configuration=configuration)  # type: ignore[no-untyped-call]
        configuration.connection_pool_maxsize = 32
        yield plane, kubectl, client.CoreV1Api(client.ApiClient(configuration)), workdir
    finally:
        plane.stop()
        shutil.rmtree(workdir, ignore_errors=True)


def measure(api: client.CoreV1Api, namespace: str, pods: int, gpus: bool = True) -> tuple[float, float]:
    """(pods/s with 16 threads, ms a pod one at a time)."""
    kind = ("g" if gpus else "p") + str(next(_ROUNDS))  # names of their own, however often it runs
    rate = create_pods(api, namespace, pods, 16, f"{kind}c", gpus)
    sequential = create_pods(api, namespace, pods // 2, 1, f"{kind}s", gpus)
    return rate, 1000 / sequential


def process_cpu(pid: int) -> float:
    """CPU seconds (user and system) a process has used so far (Linux's /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def tree_cpu(pid: int) -> float:
    """process_cpu of `pid` and every process under it (gunicorn's worker is the master's child)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    return process_cpu(pid) + sum(tree_cpu(int(child)) for child in children)


def measure_cpu(api: client.CoreV1Api, namespace: str, pods: int, pid: int) -> tuple[tuple[float, float], float]:
    """measure() of GPU pods, and the CPU ms a pod the webhook's processes (`pid` and those under
    it) used meanwhile (its reviews, its watches, its TLS: what it asks of a machine it shares)."""
    before = tree_cpu(pid)
    figures = measure(api, namespace, pods)
    return figures, (tree_cpu(pid) - before) * 1000 / (pods + pods // 2)


def measure_plain(plane: ControlPlane, api: client.CoreV1Api, namespace: str, pods: int) -> tuple[float, float, float]:
    """measure() of pods with no GPU, and the API server's own CPU ms a pod meanwhile: what a
    webhook costs the API server, apart from what its process costs a machine it shares."""
    (apiserver,) = [p.popen.pid for p in plane.processes if p.name == "kube-apiserver" and p.popen]
    before = process_cpu(apiserver)
    rate, ms = measure(api, namespace, pods, gpus=False)
    return rate, ms, (process_cpu(apiserver) - before) * 1000 / (pods + pods // 2)


def measure_fixed_answers(
    plane: ControlPlane,
    kubectl: Kubectl,
    api: client.CoreV1Api,
    installed: Installation,
    pods: int,
    patch: Path,
    figures: dict[str, tuple[float, float]],
    webhook_cpu: dict[str, float],
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """GPU pods with the fixed-answer Go webhook in gpu-admission's place (its replicas stopped),
    answering no patch, then the patch gpu-admission answered (`patch`): rates and the Go
    process's CPU into `figures` and `webhook_cpu`; the API server's latency histograms of its
    calls before and after, named for the answer."""
    before: dict[str, dict[str, float]] = {}
    after: dict[str, dict[str, float]] = {}
    for namespace, answer, suffix in (("bench-go", None, "fixed Go"), ("bench-go-patch", patch, "fixed Go, our patch")):
        with fixed_answer.serving(installed, answer) as go_pid:
            probe = pod("probe", namespace, gpus=1, labels={"team": "a"})

            def answering(probe: str = probe, patched: bool = answer is not None) -> bool:
                """Admitted, and by this answer (a GPU toleration is what the patch writes)."""
                got = kubectl.create(probe, "--dry-run=server", "-o", "json", check=False)
                if got.code != 0:
                    return False
                tolerations = json.loads(got.stdout)["spec"].get("tolerations", [])
                return patched == any(t.get("key") == "nvidia.com/gpu" for t in tolerations)

            wait_for(answering, f"the {suffix} webhook answering")
            before |= {f"{n} ({suffix})": h for n, h in histograms(plane, WEBHOOK_METRIC).items()}
            setup = "a fixed-answer Go webhook in its place" + (", answering our patch" if answer else "")
            figures[setup], webhook_cpu[setup] = measure_cpu(api, namespace, pods, go_pid)
            after |= {f"{n} ({suffix})": h for n, h in histograms(plane, WEBHOOK_METRIC).items()}
    return before, after


BACKENDS = ("devicePlugin", "draExtendedResource", "draClaim")


def backend_policy(backend: str) -> str:
    return f"""\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata: {{name: bench-{backend.lower()}}}
spec:
  priority: 10
  match: {{namespaces: [bench-{backend.lower()}]}}
  mig: {{gpuModels: [H100-80GB], defaultProfile: 1g.10gb, backend: {backend}}}
"""


def measure_backends(kubectl: Kubectl, api: client.CoreV1Api, pods: int) -> None:
    """The same GPU pod under each back-end's policy, side by side, gpu-admission installed."""
    for made in (GPU_CLASS, MIG_CLASS):
        kubectl.apply(json.dumps(made))
    figures = {}
    for backend in BACKENDS:
        namespace = f"bench-{backend.lower()}"
        kubectl.run("create", "namespace", namespace)
        kubectl.apply(policy_configmap(namespace, backend_policy(backend)))
        probe = pod("probe", namespace, gpus="1", labels={"team": "a"})

        def rewritten(probe: str = probe, backend: str = backend, namespace: str = namespace) -> bool:
            answer = kubectl.create(probe, "--dry-run=server", "-o", "json", check=False)
            if answer.code != 0:
                return False
            spec = json.loads(answer.stdout)["spec"]
            if backend != "draClaim":
                return "nvidia.com/mig-1g.10gb" in spec["containers"][0]["resources"]["limits"]
            template = spec.get("resourceClaims", [{}])[0].get("resourceClaimTemplateName")
            got = kubectl.run("get", "resourceclaimtemplate", str(template), "-n", namespace, check=False)
            return bool(template) and got.code == 0

        wait_for(rewritten, f"the {backend} policy (and its template) in force", seconds=120)
        figures[backend] = measure(api, namespace, pods)
    base_rate, base_ms = figures[BACKENDS[0]]
    print(f"MIG back-ends, the same pod ({pods} by 16 threads, {pods // 2} one at a time):")
    for backend, (rate, ms) in figures.items():
        print(f"  {backend:46s} {rate:8.1f} {rate / base_rate:5.2f}x {ms:9.2f} {ms / base_ms:5.2f}x")


def measure_runtime_settings(
    plane: ControlPlane, kubectl: Kubectl, api: client.CoreV1Api, pods: int, figures: dict[str, tuple[float, float]]
) -> tuple[dict[str, dict[str, float]], dict[str, dict[str, float]]]:
    """GPU pods in namespaces where the bundled default only adds its runtime settings (no
    rewrite): written by the webhook alone, then by the MutatingAdmissionPolicy `gpu-admission
    native` makes of them, before the webhook (bound to its namespace only). Returns the
    policy's latency histograms before and after."""
    for namespace in ("bench-runtime", "bench-runtime-map"):
        kubectl.run("create", "namespace", namespace)
    figures["gpu-admission, runtime settings only (no rewrite)"] = measure(api, "bench-runtime", pods)
    policy_set, _ = load_policies(None)
    objects = [o for o in native_policies(policy_set.policies).objects if str(o["kind"]).startswith("Mutating")]
    binding = objects[1]["spec"]
    assert isinstance(binding, dict)
    binding["matchResources"] = {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "bench-runtime-map"}}
    }
    kubectl.apply(render(objects))
    probe = pod("probe", "bench-runtime-map", gpus=1, labels={"team": "a"})

    def applied() -> bool:
        kubectl.create(probe, "--dry-run=server", check=False)
        return histograms(plane, MAP_METRIC).get(RUNTIME_OBJECT, {}).get("count", 0) > 0

    wait_for(applied, "the runtime settings in force")
    before = histograms(plane, MAP_METRIC)
    figures["the same, the settings written natively first"] = measure(api, "bench-runtime-map", pods)
    after = histograms(plane, MAP_METRIC)
    kubectl.run("delete", "mutatingadmissionpolicy,mutatingadmissionpolicybinding", "-l", NATIVE_LABEL)
    return before, after


def measure_three_replicas(
    installed: Installation,
    kubectl: Kubectl,
    api: client.CoreV1Api,
    pods: int,
    settings: dict[str, str],
    figures: dict[str, tuple[float, float]],
) -> Balancer:
    """GPU pods as deploy/base and the chart run gpu-admission: three replicas (each one Python
    process) behind one address, here a round-robin TCP balancer in this process (no kube-proxy).
    The single replica gives the address up first."""
    for replica in installed.replicas:
        replica.stop()
    _, balancer = replicas_behind_balancer(installed, None, **settings)
    kubectl.run("create", "namespace", "bench-three")
    kubectl.run("label", "namespace", "bench-three", "gpu-admission.io/mig=default")
    wait_refused(kubectl, pod("probe", "bench-three", gpus=1), "the team rule loaded by the three")
    figures["gpu-admission, three replicas behind one address"] = measure(api, "bench-three", pods)
    return balancer


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pods", type=int, default=400)
    parser.add_argument("--backends", action="store_true", help="also each MIG back-end, side by side")
    parser.add_argument("--compiled", action="store_true", help="the replica runs the compiled engine, as the image")
    parser.add_argument(
        "--replicas",
        type=int,
        choices=(1, 3),
        default=1,
        help="3: also three replicas behind one address, as deploy/base and the chart run them",
    )
    parser.add_argument("--json", help="also write the figures here (docs/figures/data/: tools/figures.py draws them)")
    args = parser.parse_args()
    installed = None
    balancer: Balancer | None = None
    webhook_cpu: dict[str, float] = {}
    replica_plain_cpu = float("nan")
    vap_metric = "apiserver_validating_admission_policy_check_duration_seconds"
    with started() as (plane, kubectl, api, workdir):
        try:
            for namespace in (
                "bench-without",
                "bench-with",
                "vap-side",
                "bench-native",
                "bench-native-all",
                "bench-go",
                "bench-go-patch",
            ):
                kubectl.run("create", "namespace", namespace)
                kubectl.run("label", "namespace", namespace, "gpu-admission.io/mig=default")
            create_pods(api, "bench-without", 100, 16, "warm")  # the plane's caches and connections, once
            # A GPU pod as the API server hands it to a webhook (defaulted, the built-in plugins'
            # changes made): what gpu-admission's patch, answered again by the Go webhook, is for.
            arriving_pod = pod("arriving", "bench-without", gpus=1, labels={"team": "a"})
            arriving = json.loads(kubectl.create(arriving_pod, "--dry-run=server", "-o", "json").stdout)
            figures = {"no admission webhook or policy": measure(api, "bench-without", args.pods)}
            plain = {"no admission webhook or policy": measure_plain(plane, api, "bench-without", args.pods)}

            kubectl.apply(TEAM_LABEL_VAP)
            wait_refused(kubectl, pod("probe", "vap-side", gpus=1), "the ValidatingAdmissionPolicy in force")
            vap_before = histograms(plane, vap_metric)
            figures["the team rule as a ValidatingAdmissionPolicy"] = measure(api, "vap-side", args.pods)
            vap_after = histograms(plane, vap_metric)

            # The rule's own objects: the same rule as the hand-written VAP, not the default device checks
            made = native_policies(load_texts([("team.yaml", NATIVE_RULE)]).policies)
            generated = made.only(["bench-native"]).objects
            kubectl.apply(render(generated))
            wait_refused(kubectl, pod("probe", "bench-native", gpus=1), "the generated policy in force")
            native_before = histograms(plane, vap_metric)
            figures["the team rule generated by gpu-admission native"] = measure(api, "bench-native", args.pods)
            native_after = histograms(plane, vap_metric)
            kubectl.run("delete", "validatingadmissionpolicy,validatingadmissionpolicybinding", "-l", NATIVE_LABEL)

            everything = native_policies(load_texts([("all.yaml", NATIVE_ALL)]).policies).objects
            kubectl.apply(render(everything))
            hosted = json.loads(pod("probe", "bench-native-all", gpus=1, labels={"team": "a"}))
            hosted["spec"]["volumes"] = [{"name": "dev", "hostPath": {"path": "/dev/nvidia0"}}]
            wait_refused(kubectl, json.dumps(hosted), "the device-access checks in force")
            setup = "the rule, a MIG gate and the device checks, generated"
            figures[setup] = measure(api, "bench-native-all", args.pods)
            kubectl.run("delete", "validatingadmissionpolicy,validatingadmissionpolicybinding", "-l", NATIVE_LABEL)

            installed = install(kubectl, plane, workdir / "gpu-admission")
            # The e2e suite's replica audits every 5 s and logs every review at DEBUG: measured as
            # shipped instead (the chart's and deploy/base's settings).
            settings = SHIPPED | ({"PYTHONPATH": os.pathsep.join([str(build()), str(ROOT)])} if args.compiled else {})
            replica = installed.replica("gpu-admission-0", None, **settings)
            replica.wait_ready()
            kubectl.apply(policy_configmap("bench-team-label", TEAM_RULE))
            wait_refused(kubectl, pod("probe", "bench-with", gpus=1), "the team rule loaded")
            hooks_before = histograms(plane, WEBHOOK_METRIC)
            assert replica.process is not None
            ours = "gpu-admission (MIG rewrite + the team rule)"
            figures[ours], webhook_cpu[ours] = measure_cpu(api, "bench-with", args.pods, replica.process.pid)
            hooks_after = histograms(plane, WEBHOOK_METRIC)
            map_before, map_after = measure_runtime_settings(plane, kubectl, api, args.pods, figures)
            replica_before = tree_cpu(replica.process.pid)
            plain["gpu-admission installed"] = measure_plain(plane, api, "bench-with", args.pods)
            replica_plain_cpu = (tree_cpu(replica.process.pid) - replica_before) * 1000 / (args.pods + args.pods // 2)
            if args.replicas == 3:
                balancer = measure_three_replicas(installed, kubectl, api, args.pods, settings, figures)
            # The same cluster (as many pods, as much for the scheduler) without the webhook's
            # process, then without its configurations: what each costs a plain pod.
            go_before: dict[str, dict[str, float]] = {}
            go_after: dict[str, dict[str, float]] = {}
            patch = workdir / "answered-patch.json"
            patch.write_bytes(fixed_answer.answered_patch(installed, arriving, "bench-go-patch"))
            if not args.backends:  # the back-ends are measured through the webhook, at the end
                for replica in installed.replicas:
                    replica.stop()
                if balancer is not None:
                    balancer.stop()
                go_before, go_after = measure_fixed_answers(
                    plane, kubectl, api, installed, args.pods, patch, figures, webhook_cpu
                )
                plain["its configurations only (replicas stopped)"] = measure_plain(plane, api, "bench-with", args.pods)
                kubectl.run("delete", "mutatingwebhookconfiguration,validatingwebhookconfiguration", "gpu-admission")
                again = measure_plain(plane, api, "bench-with", args.pods)
                plain["no admission again (configurations deleted)"] = again

            base_rate, base_ms = figures["no admission webhook or policy"]
            print(f"GPU pods through the API server ({args.pods} by 16 threads, {args.pods // 2} one at a time):")
            print(f"  {'':46s} {'pods/s':>8s} {'ratio':>6s} {'ms a pod':>9s} {'ratio':>6s}")
            for setup, (rate, ms) in figures.items():
                print(f"  {setup:46s} {rate:8.1f} {rate / base_rate:5.2f}x {ms:9.2f} {ms / base_ms:5.2f}x")
            plain_rate, plain_ms, plain_cpu = plain["no admission webhook or policy"]
            print("the webhook process's own CPU ms a GPU pod (its two reviews, its watches, TLS):")
            for setup, cpu in webhook_cpu.items():
                print(f"  {setup:46s} {cpu:8.2f}")
            print(f"  {'gpu-admission, a pod with no GPU (its watches)':46s} {replica_plain_cpu:8.2f}")
            print("pods with no GPU (the webhooks' matchConditions keep them away); the API server's CPU ms a pod:")
            for setup, (rate, ms, cpu) in plain.items():
                print(
                    f"  {setup:46s} {rate:8.1f} {rate / plain_rate:5.2f}x {ms:9.2f} {ms / plain_ms:5.2f}x "
                    f"{cpu:6.2f} {cpu / plain_cpu:5.2f}x"
                )
            print("admission latency as the API server measures it, CREATE (ms):")
            rows = [
                (n, hooks_before, hooks_after)
                for n in sorted(hooks_after)
                if n.startswith(("mutate.", "validate-pods."))
            ]
            rows += [(n, go_before, go_after) for n in sorted(go_after) if n.startswith(("mutate.", "validate-pods."))]
            rows += [(n, vap_before, vap_after) for n in sorted(vap_after) if n == "require-team-label"]
            rows += [(n, native_before, native_after) for n in sorted(native_after) if n.startswith("gpu-admission.")]
            rows += [(n, map_before, map_after) for n in sorted(map_after) if n == RUNTIME_OBJECT]
            rows = [(n, b, a) for n, b, a in rows if a[n].get("count", 0) > b.get(n, {}).get("count", 0)]
            for name, before, after in rows:
                p50, p99 = (quantile(before.get(name, {}), after[name], q) * 1000 for q in (0.5, 0.99))
                average = mean(before.get(name, {}), after[name]) * 1000
                print(f"  {name:34s} mean {average:7.3f}   p50 {p50:7.3f}   p99 {p99:7.3f}")
            if not any(after.get("count") for after in vap_after.values()):
                print(f"  the VAP: no {vap_metric} samples in the API server's /metrics")
            if args.json:
                latency = {
                    name: {
                        "p50": quantile(before.get(name, {}), after[name], 0.5) * 1000,
                        "p99": quantile(before.get(name, {}), after[name], 0.99) * 1000,
                    }
                    for name, before, after in rows
                }
                latency = {name: q for name, q in latency.items() if q["p50"] == q["p50"]}  # NaN: no samples
                rates = {setup: {"pods_per_s": rate, "ms_a_pod": ms} for setup, (rate, ms) in figures.items()}
                plain_rates = {
                    setup: {"pods_per_s": rate, "ms_a_pod": ms, "apiserver_cpu_ms_a_pod": cpu}
                    for setup, (rate, ms, cpu) in plain.items()
                }
                written = {
                    "bench": "bench/control_plane.py",
                    "pods": args.pods,
                    "setups": rates,
                    "plain_pods": plain_rates,
                    "latency": latency,
                }
                Path(args.json).write_text(json.dumps(written, indent=2) + "\n")
            if args.backends:
                measure_backends(kubectl, api, args.pods)
        finally:
            for replica in installed.replicas if installed else ():
                replica.stop()
            if balancer is not None:
                balancer.stop()


if __name__ == "__main__":
    main()
