"""Team policies with least privilege: ConfigMaps are read only in namespaces labelled
gpu-admission.io/policies=enabled, a watch each, started and stopped as the label comes and goes;
the webhook's own namespace keeps its cluster policies whatever the team namespaces do."""

from __future__ import annotations

from kubernetes import client

from tests.support.builders import Calls, policy
from webhook.cluster.watches.policy_configmaps import configmap_watch
from webhook.cluster.watches.policy_namespaces import PolicyNamespaces
from webhook.sources.store import PolicyStore
from webhook.state import EngineHolder

NS = "gpu-admission"


def namespace(name: str, opened: bool) -> dict:
    labels = {"gpu-admission.io/policies": "enabled"} if opened else {}
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def names(holder: EngineHolder) -> list[str]:
    return sorted(p.name for p in holder.engine.policy_set.policies) if holder.engine else []


def test_only_opened_namespaces_are_read_and_closing_one_drops_its_policies(kube, monkeypatch):
    holder = EngineHolder()
    swaps = Calls(monkeypatch, holder, "swap")  # each new policy set is an event to wait on
    store = PolicyStore(holder.swap, holder.events)
    api = client.CoreV1Api(client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{kube.port}")))
    kube.put(NS, "cluster", {"c.yaml": policy("cluster-wide")})
    kube.put("team-a", "mine", {"a.yaml": policy("team-a-policy")})
    kube.put("team-b", "mine", {"b.yaml": policy("team-b-policy")})
    own = configmap_watch(api, NS, store, watch_seconds=1, backoff=(0.05, 0.2))
    options = {"watch_seconds": 1, "backoff": (0.05, 0.2)}
    teams = PolicyNamespaces(lambda team: configmap_watch(api, team, store, own_namespace=NS, **options), store, NS)
    own.start()
    try:
        teams.replace_all(iter([namespace(NS, True), namespace("team-a", True), namespace("team-b", False)]))
        assert swaps.wait_for(lambda: names(holder) == ["cluster-wide", "team-a/team-a-policy"])
        assert sorted(teams.watches) == ["team-a"]  # its own namespace is the cluster policies' watch
        assert "team-b" not in teams.watches  # nothing of team-b is read
        teams.observe("MODIFIED", namespace("team-b", True))
        assert swaps.wait_for(lambda: names(holder) == ["cluster-wide", "team-a/team-a-policy", "team-b/team-b-policy"])
        teams.observe("MODIFIED", namespace("team-a", False))
        assert swaps.wait_for(lambda: names(holder) == ["cluster-wide", "team-b/team-b-policy"])
        own.relist()  # the own namespace's relist never touches the teams' sources
        kube.put(NS, "cluster", {"c.yaml": policy("cluster-wide-2")})
        assert swaps.wait_for(lambda: names(holder) == ["cluster-wide-2", "team-b/team-b-policy"])
        teams.observe("DELETED", namespace("team-b", True))
        assert swaps.wait_for(lambda: names(holder) == ["cluster-wide-2"])
    finally:
        teams.stop()
        own.stop()
