"""Webhook replicas against the in-process API server (kube_fake): started, waited on, stopped;
the objects the cluster tests put in it."""

from __future__ import annotations

import base64
import json
import threading
from typing import Any

from kubernetes import client

from tests.support.builders import pod, policy
from tests.support.kube_fake import FakeKube
from tests.support.reviews import review
from webhook.cluster.api.identity import api_client
from webhook.cluster.wiring import cluster_link, connect
from webhook.serving import admission
from webhook.serving.review import parse_review
from webhook.sources.store import PolicyStore
from webhook.state import AdmissionSettings, EngineHolder

NS = "gpu-admission"


# What one replica watches, in the order it starts them (tests.server.test_replicas counts the streams).
WATCHED = (
    "configmaps",
    "gpupolicies",
    "namespaces",
    "nodes",
    "resourcequotas",
    "resourceclaims",
    "resourceclaimtemplates",
    "deviceclasses",
    "resourceslices",
    "devicetaintrules",
    "podgroups.v1beta1",
    "podgroups.v1alpha2",
    "leases",
    "pods",
)
# The resources a replica keeps a watch stream open on, one each, where the API server serves
# PodGroups at v1beta1 alone (as Kubernetes 1.37 and the fake do).
STREAMS = tuple(name.partition(".")[0] for name in WATCHED if name != "podgroups.v1alpha2")


LINK_OPTIONS = ("strict_ttl", "strict_shares", "confirm_after")  # how a replica reaches its cluster (cluster_link)


class Replica:
    """One webhook instance: its own engine, counters, watches and API client."""

    count = 0

    def __init__(self, kube: FakeKube, all_namespaces: bool = False, page: int = 500, **connected: Any) -> None:
        Replica.count += 1
        self.identity = f"replica-{Replica.count}"
        api = api_client(client.Configuration(host=f"http://127.0.0.1:{kube.port}"))  # the replica's pool
        api.user_agent = f"gpu-admission/test ({self.identity})"
        linked = {key: connected.pop(key) for key in LINK_OPTIONS if key in connected}
        link = cluster_link(api, NS, self.identity, **linked)
        self.holder = EngineHolder(AdmissionSettings(policy_namespace=NS), link=link)
        self.store = PolicyStore(self.holder.swap, self.holder.events)
        options: dict[str, Any] = {"watch_seconds": 1, "backoff": (0.05, 0.2), "page": page}
        options.update(connected)
        self.connected = connect(
            self.holder.view,
            self.holder.gates,
            self.store,
            NS,
            api,
            self.identity,
            all_namespaces=all_namespaces,
            **options,
        )
        self.watches = self.connected.watches

    def wait_ready(self) -> None:
        assert all(w.synced.wait(10) for w in self.watches) and self.holder.ready

    def validate(self, obj: dict[str, Any], dry_run: bool = False) -> Any:
        uid = obj["metadata"].get("uid", "review")
        namespace = obj["metadata"]["namespace"]  # as the API server sends it: the object's own
        return admission.validate(self.holder, parse_review(review(obj, uid=uid, dry_run=dry_run, namespace=namespace)))

    def mutate(self, obj: dict[str, Any]) -> Any:
        return admission.mutate(self.holder, parse_review(review(obj, namespace=obj["metadata"]["namespace"])))

    def quota_pods(self, policy_name: str, scope: str) -> int:
        found = self.holder.engine.policy_set.by_name(policy_name)
        return self.holder.budgets.usage(found, scope).pods

    @property
    def leadership(self) -> Any:
        """Its part that leads status (webhook.cluster.api.leadership), started first."""
        return self.connected.services[0]

    def stop(self) -> None:
        self.connected.stop()


def start(kube: FakeKube, replicas: list[Replica], **options: Any) -> Replica:
    replica = Replica(kube, **options)
    replicas.append(replica)
    replica.wait_ready()
    return replica


def slice_pod(name: str, namespace: str = "team-a", node: str | None = None, **labels: str) -> dict[str, Any]:
    container = {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/mig-1g.10gb": "1"}}}
    obj = pod(container, namespace=namespace, labels=labels or None)
    obj["metadata"].update(name=name, uid=f"uid-{namespace}-{name}")
    if node:
        obj["spec"]["nodeName"] = node
    return obj


def namespace(name: str, **labels: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def node(name: str, product: str, allocatable: dict[str, str]) -> dict[str, Any]:
    resources = {f"nvidia.com/{resource}": amount for resource, amount in allocatable.items()}
    metadata = {"name": name, "labels": {"nvidia.com/gpu.product": product}}
    return {"apiVersion": "v1", "kind": "Node", "metadata": metadata, "status": {"allocatable": resources}}


def patch_of(response: Any) -> list[dict[str, Any]]:
    return json.loads(base64.b64decode(response.to_review("admission.k8s.io/v1")["response"]["patch"]))


def eventually(predicate: Any, timeout: float = 10) -> bool:
    done = threading.Event()
    for _ in range(int(timeout / 0.02)):
        if predicate():
            return True
        done.wait(0.02)
    return bool(predicate())


TEAM_QUOTA = policy(
    "team-quota",
    """
match: {namespaces: [team-a]}
mig: {gpuModels: [A100-80GB]}
quota: {limits: {pods: 3}}
""",
)


class OwnedLock:
    """A plain lock that can tell whether the calling thread holds it (threading.Lock cannot):
    put in place of a part's own lock by a test that asks what runs under it."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._owner: int | None = None

    def __enter__(self) -> bool:
        self._lock.acquire()
        self._owner = threading.get_ident()
        return True

    def __exit__(self, *exc: object) -> None:
        self._owner = None
        self._lock.release()

    def held_here(self) -> bool:
        return self._owner == threading.get_ident()
