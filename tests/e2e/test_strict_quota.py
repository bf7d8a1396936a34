"""Strict quotas across three server processes behind one webhook address: a budget of N pods,
20*N concurrent creates, exactly N pods afterwards; deleting one frees exactly one."""

from __future__ import annotations

import concurrent.futures
import json
import time
import uuid
from collections.abc import Iterator
from fractions import Fraction

import pytest
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from policies.judge.usage import Usage
from tests.e2e.harness import Installation, pod, policy_configmap, replicas_behind_balancer, wait_for, wait_rewritten
from tests.e2e.install import Replica
from tests.e2e.policies import QUOTA
from tools.compile_engine import build
from webhook.cluster.quota.leases.lease_entries import (
    LEDGER_LABEL,
    RESERVATIONS,
    Entry,
    encode_entries,
    lease_name,
    parse_lease,
)

BUDGET = 5
NAMESPACE = "race-a"


@pytest.fixture(scope="module")
def three_replicas(installation: Installation) -> Iterator[list[Replica]]:
    """replica-0 gives its address to a balancer in front of three replicas, and gets it back after."""
    kubectl = installation.kubectl
    kubectl.apply(
        policy_configmap(
            "e2e-race", QUOTA.replace("e2e-quota", "e2e-race").replace("quota-*", "race-*").format(limit=BUDGET)
        )
    )
    kubectl.run("create", "namespace", NAMESPACE)
    for replica in installation.replicas:
        replica.stop()
    # The first runs the engine compiled, as the image does: source and compiled replicas share
    # the budget through its Lease.
    replicas, balancer = replicas_behind_balancer(installation, compiled=build())
    try:
        probe = pod("probe", NAMESPACE, gpus=1)
        wait_rewritten(kubectl, probe, "the quota policy loaded")
        yield replicas
    finally:
        for replica in replicas:
            replica.stop()
        balancer.stop()
        installation.replica("gpu-admission-0").wait_ready()


def engine_compiled(replica: Replica) -> bool | None:
    """What the replica's last `serving` log line says of its engine (None: no such line; the
    log of a name started before in the session holds that one's too)."""
    said = None
    for line in replica.log.read_text().splitlines():
        if line.startswith("{") and '"engineCompiled"' in line:
            said = bool(json.loads(line)["engineCompiled"])
    return said


def test_one_replica_runs_the_engine_compiled_beside_two_from_source(three_replicas: list[Replica]):
    assert [engine_compiled(replica) for replica in three_replicas] == [True, False, False]


def core_api(installation: Installation) -> client.CoreV1Api:
    configuration = client.Configuration()
    config.load_kube_config(str(installation.control_plane.kubeconfig), client_configuration=configuration)
    configuration.connection_pool_maxsize = 128
    return client.CoreV1Api(client.ApiClient(configuration))


def create_all(api: client.CoreV1Api, names: list[str]) -> dict[str, int]:
    """Concurrent creates; the HTTP status of each (201 admitted, 403 denied by the quota)."""

    def create(name: str) -> int:
        try:
            api.create_namespaced_pod(NAMESPACE, json.loads(pod(name, NAMESPACE, gpus="1")))
            return 201
        except ApiException as error:
            return int(error.status)

    with concurrent.futures.ThreadPoolExecutor(len(names)) as pool:
        return dict(zip(names, pool.map(create, names), strict=True))


def gpu_pods(api: client.CoreV1Api) -> list[str]:
    return sorted(p.metadata.name for p in api.list_namespaced_pod(NAMESPACE).items)


def test_three_replicas_admit_exactly_the_budget_of_twenty_times_as_many_concurrent_creates(
    installation: Installation, three_replicas: list[Replica]
):
    api = core_api(installation)
    statuses = create_all(api, [f"race-{i}" for i in range(20 * BUDGET)])
    admitted = sorted(name for name, status in statuses.items() if status == 201)
    assert len(admitted) == BUDGET, statuses
    assert set(statuses.values()) <= {201, 403}, statuses
    assert gpu_pods(api) == admitted
    served = [sum(1 for r in replica.reviews() if r.get("endpoint") == "validate") for replica in three_replicas]
    assert all(served), f"every replica judged some of the creates: {served}"

    # Deleting one frees exactly one: once the replicas have seen it go, 20 more creates admit one.
    api.delete_namespaced_pod(admitted[0], NAMESPACE, grace_period_seconds=0)
    wait_for(lambda: admitted[0] not in gpu_pods(api), "the deleted pod gone")
    kubectl = installation.kubectl
    wait_for(
        lambda: kubectl.create(pod("probe", NAMESPACE, gpus=1), "--dry-run=server", check=False).code == 0,
        "the replicas to see the freed pod",
    )
    statuses = create_all(api, [f"again-{i}" for i in range(20)])
    assert sorted(statuses.values()).count(201) == 1, statuses
    assert len(gpu_pods(api)) == BUDGET


SHARED = 100  # pods: room for shares (granted while 64 more pods fit), then per-pod near the limit


def test_under_load_three_replicas_admit_every_pod_the_budget_holds_then_none(
    installation: Installation, three_replicas: list[Replica]
):
    """Far from the limit replicas admit from shares; near it each pod is judged per pod, and a
    replica that would deny while the others' entries hold budget (left in their shares, or
    counted again for pods they admitted lately) reads the Lease again and asks for it back.
    Against real etcd, through real watches: no pod is refused as over a budget that holds it (one
    may be refused as contended, "try again"), the budget then fills exactly, and holds."""
    kubectl = installation.kubectl
    text = QUOTA.replace("e2e-quota", "e2e-shares").replace("quota-*", "shares-*").format(limit=SHARED)
    kubectl.apply(policy_configmap("e2e-shares", text))
    kubectl.run("create", "namespace", "shares-a")
    wait_for(
        lambda: kubectl.create(pod("probe", "shares-a", gpus=1), "--dry-run=server", check=False).code == 0,
        "the shares policy loaded",
    )
    api = core_api(installation)
    refusals: dict[str, str] = {}

    def create(name: str) -> int:
        try:
            api.create_namespaced_pod("shares-a", json.loads(pod(name, "shares-a", gpus="1")))
            return 201
        except ApiException as error:
            refusals[name] = str(error.body)
            return int(error.status)

    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        statuses = list(pool.map(create, [f"s-{i}" for i in range(SHARED)]))
    over_budget = {name: body[:300] for name, body in refusals.items() if "contended" not in body}
    assert not over_budget, f"refused as over a budget that held them: {over_budget}"
    print(f"{len(refusals)} of {SHARED} refused as contended")
    left = SHARED - statuses.count(201)
    assert [create(f"t-{i}") for i in range(left)] == [201] * left  # one by one: what is left, exactly
    with concurrent.futures.ThreadPoolExecutor(16) as pool:
        over = list(pool.map(create, [f"over-{i}" for i in range(10)]))
    assert over == [403] * 10
    assert len(api.list_namespaced_pod("shares-a").items) == SHARED


PARITY = 100  # pods: shares far from the limit, then near it (fewer than 64 more fit) per pod


def test_near_the_limit_a_dry_run_says_what_the_create_itself_then_does(
    installation: Installation, three_replicas: list[Replica]
):
    """`kubectl create --dry-run=server` writes nothing, so it cannot ask the replicas holding
    shares to give them back, as a real create near the limit does. The holders give them back
    unasked once their Lease watch shows the budget near the limit: then, through real kubectl,
    every create up to the limit and two past it is told by its dry run what the create is."""
    kubectl = installation.kubectl
    text = QUOTA.replace("e2e-quota", "e2e-parity").replace("quota-*", "parity-*").format(limit=PARITY)
    kubectl.apply(policy_configmap("e2e-parity", text))
    kubectl.run("create", "namespace", "parity-a")
    wait_for(
        lambda: kubectl.create(pod("probe", "parity-a", gpus=1), "--dry-run=server", check=False).code == 0,
        "the parity policy loaded",
    )
    api = core_api(installation)

    def create(name: str) -> int:
        try:
            api.create_namespaced_pod("parity-a", json.loads(pod(name, "parity-a", gpus="1")))
            return 201
        except ApiException as error:
            return int(error.status)

    with concurrent.futures.ThreadPoolExecutor(8) as pool:  # shares granted, then near the limit
        admitted = list(pool.map(create, [f"p-{i}" for i in range(60)])).count(201)
    left = PARITY - admitted
    verdicts = []
    for i in range(left + 2):
        dry = kubectl.create(pod(f"q-{i}", "parity-a", gpus=1), "--dry-run=server", check=False).code == 0
        verdicts.append((dry, kubectl.create(pod(f"q-{i}", "parity-a", gpus=1), check=False).code == 0))
    assert verdicts == [(True, True)] * left + [(False, False)] * 2
    assert len(api.list_namespaced_pod("parity-a").items) == PARITY


BIG = """\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: e2e-big-ledger
spec:
  match:
    namespaces: [big-ledger]
  quota:
    scope: namespace
    limits:
      pods: 6000
    action: deny
    consistency: strict
"""


def test_a_ledger_of_five_thousand_reservations_stays_within_the_api_servers_limits(installation: Installation):
    """An object's annotations may hold 256 KiB in all: the API server answers 422 past that. The
    ledger of 4,999 live reservations is written, then a real admission adds the 5,000th."""
    kubectl = installation.kubectl
    kubectl.apply(policy_configmap("e2e-big-ledger", BIG))
    kubectl.run("create", "namespace", "big-ledger")
    wait_for(
        lambda: kubectl.create(pod("probe", "big-ledger", gpus=1), "--dry-run=server", check=False).code == 0,
        "the big-ledger policy loaded",
    )
    usage = Usage(Fraction(1), {}, 1, 1)
    expires = time.time() + 3600
    entries = [Entry(str(uuid.uuid4()), expires, usage) for _ in range(4999)]
    name = lease_name(("e2e-big-ledger", "big-ledger"))
    lease = {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "namespace": "gpu-admission",
            "labels": {LEDGER_LABEL: "true"},
            "annotations": {RESERVATIONS: encode_entries(entries)},
        },
        "spec": {"holderIdentity": "e2e"},
    }
    kubectl.run("apply", "--server-side", "-f", "-", stdin=json.dumps(lease))
    assert kubectl.create(pod("five-thousandth", "big-ledger", gpus=1)).code == 0
    stored = kubectl.get("lease", name, "-n", "gpu-admission")
    assert len(parse_lease(stored).entries) == 5000
