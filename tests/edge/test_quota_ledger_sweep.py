"""Strict quota Leases do not pile up: the status leader deletes a ledger Lease once every
reservation in it expired (by its own `expires`, plus a grace for replicas' clocks), on the
version it read, so a reservation written meanwhile keeps it; a replica still holding the deleted
version creates it afresh on its next reservation."""

from __future__ import annotations

from kubernetes import client

from policies.judge.usage import EMPTY
from webhook.cluster.quota.counting.reservations import PodRef
from webhook.cluster.quota.leases.lease_entries import LEDGER_LABEL, lease_name
from webhook.cluster.quota.leases.ledger_leases import LedgerLeases
from webhook.cluster.quota.leases.shared_quota import SharedReservations


class Clock:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def __call__(self) -> float:
        return self.now


def ledger(kube, clock: Clock, identity: str = "replica-a") -> SharedReservations:
    api = client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{kube.port}"))
    leases = LedgerLeases(client.CoordinationV1Api(api), "gpu-admission", identity, clock=clock, monotonic=clock)
    return SharedReservations(leases)


def leases(kube) -> list[str]:
    return sorted(lease["metadata"]["name"] for lease in kube.items("leases"))


def pod(name: str) -> PodRef:
    return PodRef("team-a", name, uid=f"uid-{name}")


def test_a_lease_whose_reservations_all_expired_is_deleted_after_the_grace(kube):
    clock = Clock()
    replica = ledger(kube, clock)
    key = ("team-quota", "team-a")
    assert replica.reserve((key,), pod("p1"), EMPTY)
    assert leases(kube) == [lease_name(key)]
    clock.now += 60  # expired (30 s TTL), within the grace
    assert replica.leases.sweep() == 0 and leases(kube) == [lease_name(key)]
    clock.now += 300
    assert replica.leases.sweep() == 1 and leases(kube) == []


def test_a_lease_with_a_live_reservation_stays(kube):
    clock = Clock()
    replica = ledger(kube, clock)
    old, live = ("q", "team-a"), ("q", "team-b")
    assert replica.reserve((old,), pod("p1"), EMPTY)
    clock.now += 400
    assert replica.reserve((live,), pod("p2"), EMPTY)
    assert replica.leases.sweep() == 1
    assert leases(kube) == [lease_name(live)]


def test_a_replica_holding_a_deleted_version_creates_the_lease_afresh(kube):
    clock = Clock()
    leader, other = ledger(kube, clock, "leader"), ledger(kube, clock, "other")
    key = ("q", "team-a")
    assert other.reserve((key,), pod("p1"), EMPTY)
    clock.now += 400
    assert leader.leases.sweep() == 1
    assert not other.reserve((key,), pod("p2"), EMPTY)  # its version is gone: read again, judge again
    assert other.reserve((key,), pod("p2"), EMPTY)
    (stored,) = kube.items("leases")
    assert stored["metadata"]["labels"] == {LEDGER_LABEL: "true"}


def test_a_reservation_written_between_the_read_and_the_delete_keeps_the_lease(kube, monkeypatch):
    clock = Clock()
    leader, other = ledger(kube, clock, "leader"), ledger(kube, clock, "other")
    key = ("q", "team-a")
    assert other.reserve((key,), pod("p1"), EMPTY)
    clock.now += 400
    listed = leader.leases.wire.api.list_namespaced_lease

    def list_then_reserve(*args, **kwargs):
        answer = listed(*args, **kwargs)
        other.leases.read_again(key)
        assert other.reserve((key,), pod("p2"), EMPTY)  # lands after the leader read the list
        return answer

    monkeypatch.setattr(leader.leases.wire.api, "list_namespaced_lease", list_then_reserve)
    assert leader.leases.sweep() == 0
    assert leases(kube) == [lease_name(key)]
