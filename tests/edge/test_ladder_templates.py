"""The replicas publish the DRA claim back-end's ResourceClaimTemplates ahead: in every namespace a
policy may hold pods of, each ladder its pods may be given, and nothing where no claim can be
given; a template already there (another replica's) is left as it is."""

from __future__ import annotations

from typing import Any

from tests.support.builders import engine_from, policy
from tests.support.dra import GPU_CLASS, MIG_CLASS, resource_slice, slice_device
from webhook.cluster.ladders import LadderPublisher
from webhook.cluster.live import LiveCluster
from webhook.events import Events

CLAIMING = policy(
    "team-a",
    """
    match: {namespaces: ["team-*"]}
    mig: {gpuModels: [H100-80GB], allowedProfiles: [1g.20gb, 3g.40gb], backend: draClaim}
    """,
)
SLICE = resource_slice("dra-1", slice_device("mig-0", "NVIDIA H100 80GB HBM3", "1g.20gb", "20096Mi"))


def namespace(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "labels": {"kubernetes.io/metadata.name": name}}}


class AlreadyThere(Exception):
    status = 409


def view_of(*documents: str) -> LiveCluster:
    engine = engine_from(*documents)
    view = LiveCluster(lambda: engine.policy_set, Events())
    view.namespaces.replace_all([namespace(n) for n in ("team-a", "team-b", "other", "kube-system")])
    view.device_class_cache.replace_all([GPU_CLASS, MIG_CLASS])
    view.slices.slices_listed([SLICE])
    for template in (False, True):
        view.claims.lister(template)([])
    return view


def test_each_ladder_is_published_once_in_every_namespace_the_policy_reaches():
    view = view_of(CLAIMING)
    made: list[tuple[str, dict[str, Any]]] = []
    publisher = LadderPublisher(view, view.policy_set, lambda ns, body: made.append((ns, body)))
    assert publisher.reconcile() == len(made) > 0
    assert {ns for ns, _ in made} == {"team-a", "team-b"}
    body = made[0][1]
    assert body["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "gpu-admission"}
    assert body["metadata"]["annotations"]["gpu-admission.io/policy"] == "team-a"
    view.claims.lister(True)([{**b, "kind": "ResourceClaimTemplate"} for _, b in made])  # the watch shows them
    assert publisher.reconcile() == 0


def test_a_template_another_replica_made_is_not_an_error():
    view = view_of(CLAIMING)

    def there(ns: str, body: dict[str, Any]) -> None:
        raise AlreadyThere()

    assert LadderPublisher(view, view.policy_set, there).reconcile() == 0


def test_nothing_is_published_where_no_claim_can_be_given():
    auto = policy("plain", "mig: {gpuModels: [H100-80GB]}")
    view = view_of(auto)
    view.slices.slices_listed([])  # no DRA devices: auto never gives a claim
    made: list[Any] = []
    assert LadderPublisher(view, view.policy_set, lambda ns, body: made.append(ns)).reconcile() == 0 and not made


def test_the_thread_stops():
    view = view_of(CLAIMING)
    made: list[str] = []
    publisher = LadderPublisher(view, view.policy_set, lambda ns, body: made.append(ns), every=3600)
    publisher.start()
    publisher.wake()
    publisher.stop()
    assert not publisher.running
