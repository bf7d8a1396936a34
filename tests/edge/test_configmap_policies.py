"""Policies from ConfigMaps, through the real kubernetes client against an in-process API server:
reload on change, last good version kept, 410 Gone relist, API server down then back."""

from __future__ import annotations

import pytest
from kubernetes import client

from tests.support.builders import policy
from webhook.cluster.watches.policy_configmaps import configmap_watch
from webhook.events import SourceLoaded, SourceProblems
from webhook.sources.store import PolicyStore
from webhook.state import EngineHolder

NS = "gpu-admission"


def names(holder: EngineHolder) -> list[str]:
    return [p.name for p in holder.engine.policy_set.policies]


@pytest.fixture
def watching(kube):
    holder = EngineHolder()
    reported: list[tuple[str, list]] = []
    holder.events.subscribe(SourceProblems, lambda e: e.problems and reported.append((e.source, e.problems)))
    store = PolicyStore(holder.swap, holder.events)
    api = client.CoreV1Api(client.ApiClient(client.Configuration(host=f"http://127.0.0.1:{kube.port}")))
    watcher = configmap_watch(api, NS, store, watch_seconds=1, backoff=(0.05, 0.2))
    yield holder, store, watcher, reported
    watcher.stop()


def serving_team_a(kube, watcher, store) -> None:
    """The common opening: one policy ConfigMap, the watch started, its first set in force."""
    kube.put(NS, "team-a", {"a.yaml": policy("team-a")})
    watcher.start()
    assert store.wait_for_generation(1, 10)


def test_ready_after_the_first_full_list_with_the_policies_it_found(kube, watching):
    holder, store, watcher, _ = watching
    kube.put(NS, "team-a", {"a.yaml": policy("team-a")})
    kube.put(NS, "unlabelled", {"x.yaml": policy("ignored")}, labels={})
    assert not holder.ready
    watcher.start()
    assert watcher.synced.wait(10) and store.wait_for_generation(1, 10)
    assert holder.ready and names(holder) == ["team-a"]


def test_a_change_builds_a_new_set_and_swaps_it_in(kube, watching):
    holder, store, watcher, _ = watching
    serving_team_a(kube, watcher, store)
    generation = store.generation
    kube.put(NS, "team-b", {"b.yaml": policy("team-b")})
    assert store.wait_for_generation(generation + 1, 10)
    assert names(holder) == ["team-a", "team-b"]
    kube.delete(NS, "team-a")
    assert store.wait_for_generation(generation + 2, 10)
    assert names(holder) == ["team-b"]


def test_a_bad_document_keeps_the_last_good_version_of_that_configmap(kube, watching):
    holder, store, watcher, reported = watching
    kube.put(NS, "team-a", {"a.yaml": policy("team-a", "mig: {defaultProfile: 1g.10gb}")})
    watcher.start()
    assert store.wait_for_generation(1, 10)
    kube.put(NS, "team-a", {"a.yaml": policy("team-a", "mig: {defaultProfile: 1g.11gb}")})
    kube.put(NS, "team-b", {"b.yaml": policy("team-b")})
    assert store.wait_for_generation(2, 10)
    assert names(holder) == ["team-a", "team-b"]
    assert holder.engine.policy_set.by_name("team-a").mig.default_profile == "1g.10gb"
    source, problems = reported[0]
    assert source == f"configmap/{NS}/team-a"
    assert "configmap/gpu-admission/team-a/a.yaml:" in str(problems[0]) and "spec.mig.defaultProfile" in str(
        problems[0]
    )


def test_410_gone_relists_and_catches_up(kube, watching):
    holder, store, watcher, _ = watching
    serving_team_a(kube, watcher, store)
    kube.paused, kube.bookmarks = True, False  # the watch falls behind ...
    kube.put(NS, "team-b", {"b.yaml": policy("team-b")})
    kube.compact()  # ... and its resourceVersion is compacted away
    kube.paused = False
    assert store.wait_for_generation(2, 20)
    assert names(holder) == ["team-a", "team-b"]
    assert watcher.expired >= 1 and watcher.relists >= 2


def test_with_the_api_server_down_the_last_set_keeps_serving_and_changes_arrive_once_back(kube, watching):
    holder, store, watcher, _ = watching
    serving_team_a(kube, watcher, store)
    port = kube.port
    kube.stop()
    assert not store.wait_for_generation(2, 1.5)
    assert holder.ready and names(holder) == ["team-a"]
    kube.start(port)
    kube.put(NS, "team-c", {"c.yaml": policy("team-c")})
    assert store.wait_for_generation(2, 20)
    assert names(holder) == ["team-a", "team-c"]


def test_a_policy_directory_reloads_on_change_and_keeps_its_last_good_version(tmp_path):
    from webhook.sources.directories import DirectoryWatcher

    holder = EngineHolder()
    store = PolicyStore(holder.swap, holder.events)
    (tmp_path / "a.yaml").write_text(policy("team-a"))
    watcher = DirectoryWatcher([tmp_path], store)
    assert watcher.check_once(settle=False) and names(holder) == ["team-a"]
    assert not watcher.check_once()
    (tmp_path / "b.yaml").write_text(policy("team-b"))
    assert not watcher.check_once()  # just changed: it may still be being written
    assert watcher.check_once() and names(holder) == ["team-a", "team-b"]
    (tmp_path / "b.yaml").write_text(policy("team-b", "mig: {strategy: half}"))
    watcher.check_once()
    watcher.check_once()
    assert names(holder) == ["team-a", "team-b"]


def test_a_source_seen_for_the_first_time_loads_its_good_documents_and_reports_the_bad():
    holder = EngineHolder()
    reported = []
    holder.events.subscribe(SourceProblems, lambda e: reported.append(e.problems))
    store = PolicyStore(holder.swap, holder.events)
    bad = policy("bad", "mig: {strategy: half}")
    store.update("configmap/ns/mixed", (("configmap/ns/mixed/a.yaml", policy("good") + "---\n" + bad),))
    assert holder.ready and names(holder) == ["good"]
    assert "policy bad: spec.mig.strategy" in str(reported[0][0])
    # The bad document's policy never loaded: it is out of force and fails closed, named (#41).
    (lapsed,) = holder.engine.policy_set.lapsed
    assert lapsed.policy == "bad" and lapsed.namespace is None


GOOD_CAP = policy("cap", "match: {namespaces: [team-a]}\nquota: {perPod: {gpus: 1}}")
BROKEN_CAP = GOOD_CAP.replace("gpus: 1", "gpus: x")
FILE = "configmap/team-a/caps/c.yaml"


def test_a_policy_that_never_loaded_fails_closed_in_its_namespace_until_it_loads():
    holder = EngineHolder()
    store = PolicyStore(holder.swap, holder.events)
    store.update("configmap/team-a/caps", ((FILE, BROKEN_CAP),), namespace="team-a")
    (lapsed,) = holder.engine.policy_set.lapsed
    assert (lapsed.policy, lapsed.file, lapsed.namespace) == ("team-a/cap", FILE, "team-a")
    assert holder.engine.policy_set.lapsed_in("team-a") and not holder.engine.policy_set.lapsed_in("team-b")
    store.update("configmap/team-a/caps", ((FILE, GOOD_CAP),), namespace="team-a")
    assert not holder.engine.policy_set.lapsed and names(holder) == ["team-a/cap"]


def test_a_broken_file_with_a_persisted_version_keeps_it_and_a_clean_source_is_offered_for_persisting():
    holder = EngineHolder()
    store = PolicyStore(holder.swap, holder.events)
    offered = []
    holder.events.subscribe(SourceLoaded, lambda e: offered.append((e.source, e.texts)))
    store.update("configmap/team-a/caps", ((FILE, BROKEN_CAP),), namespace="team-a", persisted={FILE: GOOD_CAP})
    assert names(holder) == ["team-a/cap"] and not holder.engine.policy_set.lapsed
    assert store.problems_of("configmap/team-a/caps") and offered == []  # broken: nothing to persist
    store.update("configmap/team-a/caps", ((FILE, GOOD_CAP),), namespace="team-a")
    assert offered == [("configmap/team-a/caps", ((FILE, GOOD_CAP),))]
    # A persisted version that does not load either is no version: out of force.
    fresh = EngineHolder()
    PolicyStore(fresh.swap, fresh.events).update(
        "configmap/team-a/caps", ((FILE, BROKEN_CAP),), namespace="team-a", persisted={FILE: BROKEN_CAP + "x"}
    )
    assert fresh.engine is not None and fresh.engine.policy_set.lapsed
