"""GPUPolicy objects as policy sources and their status (#41): one loader for objects and
ConfigMaps, the version in force said on each object's status by the status leader only, written
where it is behind and never again once it agrees (the write comes back as a watch event)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from policies import PolicyProblem, load_texts
from webhook.cluster.api.gpupolicy_status import GPUPolicyStatusWriter, Verdict, desired_status
from webhook.events import Events, SourceRetried
from webhook.sources.gpupolicy_objects import document_text, persisted_of, texts_of
from webhook.sources.store import PolicyStore

NOW = dt.datetime(2026, 12, 5, 3, 0, tzinfo=dt.UTC)


def gpupolicy(name: str = "team-a", generation: int = 1, status: Any = None, **spec: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "gpu-admission.io/v1alpha1",
        "kind": "GPUPolicy",
        "metadata": {"name": name, "generation": generation, "uid": "u", "managedFields": [{"manager": "kubectl"}]},
        "spec": {"match": {"namespaces": ["team-a"]}, **spec},
    }
    if status is not None:
        obj["status"] = status
    return obj


class FakeCustomObjects:
    def __init__(self, fail: int | None = None) -> None:
        self.patches: list[tuple[str, dict[str, Any]]] = []
        self.fail = fail

    def patch_cluster_custom_object_status(self, group, version, plural, name, body, **options):
        assert (group, version, plural) == ("gpu-admission.io", "v1alpha1", "gpupolicies")
        assert options["_content_type"] == "application/merge-patch+json"
        if self.fail is not None:
            error = RuntimeError("refused")
            error.status = self.fail  # type: ignore[attr-defined]
            raise error
        self.patches.append((name, body))


def test_an_object_is_read_as_the_policy_document_it_is_and_loads_as_a_configmaps_file_would():
    obj = gpupolicy(quota={"limits": {"gpus": 2}})
    source, ((file, text),) = texts_of(obj)
    assert source == file == "gpupolicy/team-a"
    assert "managedFields" not in text and "uid" not in text and "generation" not in text
    loaded = load_texts(((file, text),))
    assert not loaded.problems and [p.name for p in loaded.policies] == ["team-a"]
    assert loaded.policies[0].source.file == "gpupolicy/team-a"


def test_a_new_object_without_its_name_yet_takes_the_requests():
    obj = gpupolicy()
    del obj["metadata"]["name"]
    assert "name: from-request" in document_text(obj, "from-request")


def test_the_last_good_version_is_read_from_the_status_only_as_text():
    assert persisted_of(gpupolicy(status={"lastGood": "kind: GPUPolicy"})) == {"gpupolicy/team-a": "kind: GPUPolicy"}
    assert persisted_of(gpupolicy(status={"lastGood": {"not": "text"}})) == {}
    assert persisted_of(gpupolicy()) == {}


def test_the_store_says_which_version_is_in_force():
    store = PolicyStore(lambda engine: None, Events())
    good, broken = gpupolicy(), gpupolicy(rules=[{"name": "bad", "expression": "object.("}])
    source = texts_of(good)[0]
    assert store.in_force(source, source) == (None, None)
    store.update(*texts_of(good))
    assert store.in_force(source, source) == ("current", texts_of(good)[1][0][1])
    store.update(*texts_of(broken))
    assert store.in_force(source, source) == ("lastGood", texts_of(good)[1][0][1])
    fresh = PolicyStore(lambda engine: None, Events())
    fresh.update(*texts_of(broken))
    assert fresh.in_force(source, source) == ("none", None)
    persisted = PolicyStore(lambda engine: None, Events())
    persisted.update(*texts_of(broken), persisted={source: texts_of(good)[1][0][1]})
    assert persisted.in_force(source, source) == ("lastGood", texts_of(good)[1][0][1])


PROBLEM = PolicyProblem("gpupolicy/team-a", 9, "team-a", "spec.rules[0].expression", "does not compile")


def test_the_ready_condition_says_what_is_in_force_and_why():
    loaded = desired_status(Verdict(2, (), "current", "text"), {}, "t0")
    assert loaded["conditions"][0] | {"lastTransitionTime": None} == {
        "type": "Ready",
        "status": "True",
        "reason": "Loaded",
        "message": "loaded and in force",
        "observedGeneration": 2,
        "lastTransitionTime": None,
    }
    assert loaded["inForce"] == "current" and loaded["lastGood"] == "text" and loaded["observedGeneration"] == 2
    kept = desired_status(Verdict(3, (PROBLEM,), "lastGood", "text"), loaded, "t1")
    assert kept["conditions"][0]["reason"] == "LastGoodInForce" and kept["conditions"][0]["status"] == "False"
    assert "spec.rules[0].expression" in kept["conditions"][0]["message"] and kept["lastGood"] == "text"
    assert kept["conditions"][0]["lastTransitionTime"] == "t1"
    closed = desired_status(Verdict(1, (PROBLEM,), "none", None), {}, "t2")
    assert closed["conditions"][0]["reason"] == "OutOfForce" and "lastGood" not in closed
    assert "denied until it loads" in closed["conditions"][0]["message"]


def test_a_condition_keeps_its_transition_time_while_its_status_stays():
    first = desired_status(Verdict(1, (PROBLEM,), "none", None), {}, "t0")
    again = desired_status(Verdict(2, (PROBLEM,), "none", None), first, "t1")
    assert again["conditions"][0]["lastTransitionTime"] == "t0"


def test_only_the_leader_writes_and_only_what_is_behind():
    api, leading = FakeCustomObjects(), [False]
    writer = GPUPolicyStatusWriter(api, leads=lambda: leading[0], clock=lambda: NOW)
    writer.observe(gpupolicy(), (), "current", "text")
    assert api.patches == []
    leading[0] = True
    writer.reconcile()
    ((name, body),) = api.patches
    assert name == "team-a" and body["status"]["conditions"][0]["lastTransitionTime"] == "2026-12-05T03:00:00Z"
    # The write comes back as an event: its status agrees, nothing more is written.
    writer.observe(gpupolicy(status=body["status"]), (), "current", "text")
    assert len(api.patches) == 1
    writer.observe(gpupolicy(generation=2, status=body["status"]), (PROBLEM,), "lastGood", "text")
    assert len(api.patches) == 2 and api.patches[1][1]["status"]["observedGeneration"] == 2


def test_a_refused_write_is_tried_again_and_a_gone_object_forgotten():
    api = FakeCustomObjects(fail=500)
    writer = GPUPolicyStatusWriter(api, clock=lambda: NOW)
    writer.observe(gpupolicy(), (), "current", "text")  # logged, not raised
    api.fail = None
    writer.reconcile()
    assert len(api.patches) == 1
    gone = GPUPolicyStatusWriter(FakeCustomObjects(fail=404), clock=lambda: NOW)
    gone.observe(gpupolicy(), (), "current", "text")
    gone.api.fail = None
    gone.reconcile()
    assert gone.api.patches == []


def test_a_policy_kept_out_for_its_name_takes_over_once_the_holder_goes():
    engines, retried = [], []
    events = Events()
    events.subscribe(SourceRetried, lambda e: retried.append((e.source, e.problems)))
    store = PolicyStore(engines.append, events)
    store.update(
        "configmap/gpu-admission/old", (("configmap/gpu-admission/old/p.yaml", document_text(gpupolicy("moving"))),)
    )
    obj = gpupolicy("moving")
    source = texts_of(obj)[0]
    (problem,) = store.update(*texts_of(obj))
    assert problem.message.startswith("duplicate policy name")
    assert store.in_force(source, source) == ("none", None)
    store.remove("configmap/gpu-admission/old")
    assert store.problems_of(source) == [] and retried == [(source, [])]
    assert store.in_force(source, source)[0] == "current"
    assert [p.source.file for p in engines[-1].policy_set.policies] == [source]


def test_a_policy_waiting_for_its_name_says_so_not_that_it_fails_closed():
    clash = PolicyProblem("gpupolicy/team-a", 4, "team-a", "metadata.name", "duplicate policy name (also in cm/p.yaml)")
    waiting = desired_status(Verdict(1, (clash,), "none", None), {}, "t0")["conditions"][0]
    assert waiting["reason"] == "NameHeldElsewhere" and "takes over once that one is gone" in waiting["message"]
