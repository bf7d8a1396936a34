"""The composition root (docs/architecture.md): a connected replica is built whole before
gunicorn forks, making no request and starting no thread; started in the worker, its parts
start in order, the pod watch last; stopped, every part ends."""

from __future__ import annotations

import threading

from kubernetes import client

from tests.support.builders import policy
from tests.support.cluster import NS, eventually
from webhook.cluster.api.identity import api_client
from webhook.cluster.api.leadership import Leadership
from webhook.cluster.wiring import ConnectedReplica, cluster_link
from webhook.sources.store import PolicyStore
from webhook.state import AdmissionSettings, EngineHolder


def built(kube) -> tuple[EngineHolder, ConnectedReplica]:
    api = api_client(client.Configuration(host=f"http://127.0.0.1:{kube.port}"), identity="replica-root")
    holder = EngineHolder(AdmissionSettings(policy_namespace=NS), link=cluster_link(api, NS, "replica-root"))
    store = PolicyStore(holder.swap, holder.events)
    replica = ConnectedReplica(holder.view, store, NS, api, "replica-root", watch_seconds=1, backoff=(0.05, 0.2))
    holder.gates.append(replica.not_ready)  # as webhook.replica does
    return holder, replica


def test_a_replica_built_whole_makes_no_request_and_starts_no_thread(kube):
    before = {t.ident for t in threading.enumerate()}
    holder, replica = built(kube)
    assert kube.requests == []
    assert {t.ident for t in threading.enumerate()} == before
    assert holder.tracking.budgets.shared is not None  # strict budgets through their Leases, from the start
    assert isinstance(replica.services[0], Leadership) and replica.watches[-1].name == "pods"


def test_started_it_serves_once_every_watch_has_listed_and_stopped_every_part_ends(kube):
    kube.put(NS, "p", {"p.yaml": policy("p")})
    before = {t.ident for t in threading.enumerate()}
    holder, replica = built(kube)
    replica.start()
    try:
        assert all(watch.synced.wait(10) for watch in replica.watches) and eventually(lambda: holder.ready)
    finally:
        replica.stop()
    left = [t.name for t in threading.enumerate() if t.ident not in before and t.is_alive()]
    assert eventually(lambda: not [t for t in threading.enumerate() if t.ident not in before and t.is_alive()]), left
