"""Quota usage in the server: reservations between admission and the pod watch, concurrency,
dry-run, expiry, and pod events releasing what they free."""

from __future__ import annotations

import concurrent.futures
import threading

import pytest

from policies.engine import COMPILED, Engine
from tests.support.builders import engine_from, plain_container, pod, policy
from tests.support.cluster import NS, OwnedLock, start
from tests.support.reviews import review
from webhook.cluster.quota.counting.pod_counting import PodCounting
from webhook.serving import admission
from webhook.serving.review import parse_review
from webhook.state import EngineHolder

QUOTA = policy(
    "team-a",
    """
match: {namespaces: [team-a]}
mig: {gpuModels: [A100-80GB]}
quota:
  limits: {pods: 5}
""",
)


STRICT = "match: {namespaces: [team-a]}\nquota: {limits: {pods: 1000}, consistency: strict}\n"


def slice_pod(name: str, generate_name: str = "", phase: str | None = None) -> dict:
    container = {"name": "main", "image": "cuda", "resources": {"limits": {"nvidia.com/mig-1g.10gb": "1"}}}
    obj = pod(container, namespace="team-a")
    obj["metadata"]["name"] = name
    if generate_name:
        obj["metadata"]["generateName"] = generate_name
    obj["metadata"]["uid"] = f"uid-{name or generate_name}"
    if phase:
        obj["status"] = {"phase": phase}
    return obj


def holder(clock=None) -> EngineHolder:
    held = EngineHolder(clock=clock) if clock is not None else EngineHolder()
    held.swap(engine_from(QUOTA))
    return held


def admit(held: EngineHolder, obj: dict, dry_run: bool = False) -> bool:
    request = parse_review(review(obj, uid=obj["metadata"].get("uid", "review-1"), dry_run=dry_run))
    return admission.validate(held, request).allowed


def pods_held(held: EngineHolder) -> int:
    return held.budgets.usage(held.engine.policy_set.by_name("team-a"), "team-a").pods


def test_concurrent_admissions_admit_exactly_the_limit():
    held = holder()
    results: list[bool] = []
    start = threading.Barrier(16)

    def one(i: int) -> None:
        start.wait()
        results.append(admit(held, slice_pod(f"p{i}")))

    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert results.count(True) == 5 and pods_held(held) == 5


def test_dry_run_never_reserves():
    held = holder()
    assert all(admit(held, slice_pod(f"p{i}"), dry_run=True) for i in range(10))
    assert held.view.counting.reserved_pods() == 0


def test_a_reservation_is_released_when_the_pod_shows_up_and_not_counted_twice():
    held = holder()
    assert admit(held, slice_pod("p0"))
    assert held.view.counting.reserved_pods() == 1 and pods_held(held) == 1
    held.view.counting.observe("ADDED", slice_pod("p0"))
    assert held.view.counting.reserved_pods() == 0 and pods_held(held) == 1


def test_pods_known_only_by_generate_name_claim_their_reservation_by_prefix():
    """The validating webhook sees a pod's final name and uid; an object without them (an older
    API server) is claimed by the first pod of its generateName that shows up."""
    held = holder()
    anonymous = slice_pod("", generate_name="job-")
    del anonymous["metadata"]["uid"]
    assert admit(held, anonymous)
    held.view.counting.observe("ADDED", slice_pod("job-x7k2p"))
    assert held.view.counting.reserved_pods() == 0 and pods_held(held) == 1


def test_a_reservation_expires_when_the_pod_never_shows_up():
    now = [1000.0]
    held = holder(clock=lambda: now[0])
    assert admit(held, slice_pod("p0"))
    now[0] += held.view.counting.ttl - 1
    assert pods_held(held) == 1
    now[0] += 2
    assert pods_held(held) == 0


def test_deleted_and_finished_pods_free_their_share():
    held = holder()
    for i in range(5):
        held.view.counting.observe("ADDED", slice_pod(f"p{i}"))
    assert not admit(held, slice_pod("new"))
    held.view.counting.observe("DELETED", slice_pod("p0"))
    held.view.counting.observe("MODIFIED", slice_pod("p1", phase="Succeeded"))
    assert pods_held(held) == 3
    assert admit(held, slice_pod("new"))


def test_only_finished_and_deleted_pods_are_gone_each_for_its_own_time():
    # A running pod that holds nothing is not gone (a gone pod's UPDATE reservation counts nothing),
    # and a pod whose time starts again keeps no other from running out.
    now = [0.0]
    counting = PodCounting(lambda: None, clock=lambda: now[0], ttl=30.0)
    plain = pod(plain_container(), namespace="team-a")
    plain["metadata"] |= {"name": "plain", "uid": "uid-plain"}
    plain["status"] = {"phase": "Running"}
    counting.observe("ADDED", plain)
    counting.replace_all([plain])
    done = slice_pod("done", phase="Succeeded")
    counting.observe("ADDED", done)
    now[0] = 10.0
    deleted = slice_pod("deleted")
    counting.observe("ADDED", deleted)
    counting.observe("DELETED", deleted)
    gone = counting._gone
    assert "uid-plain" not in gone
    assert "uid-done" in gone and "uid-deleted" in gone
    now[0] = 20.0
    counting.observe("MODIFIED", done)  # a finished pod's status again: gone until 50 now
    now[0] = 41.0
    assert counting.reserved_pods() == 0  # any read forgets what has run out
    assert "uid-done" in gone and "uid-deleted" not in gone


def test_a_relist_rebuilds_the_counters():
    held = holder()
    for i in range(3):
        held.view.counting.observe("ADDED", slice_pod(f"p{i}"))
    held.view.counting.replace_all([slice_pod("only")])
    assert pods_held(held) == 1


def test_a_pod_the_engine_cannot_read_is_left_out_and_the_relist_goes_on():
    held = holder()
    odd = slice_pod("odd")
    odd["spec"]["containers"][0]["resources"]["limits"]["nvidia.com/mig-1g.10gb"] = "lots"
    odd_status = slice_pod("odd-status")
    odd_status["status"] = ["Running"]
    held.view.counting.replace_all([slice_pod("p0"), odd, odd_status, slice_pod("p1")])
    assert pods_held(held) == 2
    held.view.counting.observe("MODIFIED", odd_status)
    assert pods_held(held) == 2


def test_pod_events_are_counted_while_an_admission_is_being_judged():
    """The engine runs outside the counters' lock: the pod watch, a strict turn and the keeper
    never wait on an admission's rules, only on its budgets' check."""
    entered, release = threading.Event(), threading.Event()

    class PausedEngine(Engine):
        def judge(self, *args, **kwargs):
            entered.set()
            assert release.wait(10)
            return super().judge(*args, **kwargs)

    held = EngineHolder()
    held.swap(PausedEngine(engine_from(QUOTA).policy_set))
    results: list[bool] = []
    admitting = threading.Thread(target=lambda: results.append(admit(held, slice_pod("p0"))))
    admitting.start()
    try:
        assert entered.wait(10)
        counted = threading.Event()
        watch = threading.Thread(
            target=lambda: (held.view.counting.observe("ADDED", slice_pod("running")), counted.set())
        )
        watch.start()
        assert counted.wait(10), "a pod event waited on an engine run"
        watch.join()
        assert pods_held(held) == 1
    finally:
        release.set()
        admitting.join()
    assert results == [True] and pods_held(held) == 2


@pytest.mark.skipif(COMPILED, reason="counts calls by patching the engine's class, which compiled is native")
def test_a_strict_admission_runs_the_engine_once_however_often_its_lease_moves(monkeypatch, kube, replicas):
    judged: list[int] = []
    real = Engine.judge
    monkeypatch.setattr(Engine, "judge", lambda self, *a, **k: judged.append(1) or real(self, *a, **k))
    kube.put(NS, "strict", {"s.yaml": policy("strict", STRICT)})
    started = [start(kube, replicas, strict_shares=False) for _ in range(3)]  # a Lease write a pod: they conflict
    with concurrent.futures.ThreadPoolExecutor(12) as pool:
        allowed = list(pool.map(lambda i: started[i % 3].validate(slice_pod(f"s{i}")).allowed, range(60)))
    conflicts = sum(r.holder.budgets.shared.leases.conflicts for r in started)
    assert all(allowed) and conflicts > 0  # written again after conflicts, and settled again each time
    assert len(judged) == 60


def test_no_lease_is_read_from_the_api_server_under_the_counters_lock(kube, replicas):
    """A slow API server may slow a strict admission, never every admission and the pod watch:
    a Lease never read yet is read before the counters' lock is taken."""
    kube.put(NS, "strict", {"s.yaml": policy("strict", STRICT)})
    replica = start(kube, replicas, strict_shares=False)
    budgets, reads = replica.holder.budgets, []
    real = budgets.shared.leases.wire.read
    counters = budgets.counting._lock = OwnedLock()  # the counters' own lock, its holder told

    def read(key):
        reads.append(counters.held_here())
        return real(key)

    budgets.shared.leases.wire.read = read
    assert replica.validate(slice_pod("s0")).allowed
    assert replica.quota_pods("strict", "team-a") == 1  # its reservation, through the Lease read
    assert reads and not any(reads), f"Lease reads under the counters' lock: {reads.count(True)} of {len(reads)}"
