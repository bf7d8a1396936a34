"""The replica's events (webhook.events): each reaches the parts subscribed to its type, in the
order subscribed, in the publisher's thread; what a reactor raises reaches the publisher unless it
says how a failure ends (the policy store: logged, and loading goes on)."""

from __future__ import annotations

import pytest

from webhook.events import ClaimsChanged, Events, NamespaceLabelsChanged, PolicySetInForce, SourceProblems
from webhook.sources.store import PolicyStore
from webhook.state import EngineHolder


def test_an_event_reaches_the_reactors_to_its_type_in_the_order_subscribed():
    events, heard = Events(), []
    events.subscribe(PolicySetInForce, lambda _: heard.append("first"))
    events.subscribe(NamespaceLabelsChanged, lambda e: heard.append(sorted(e.namespaces)))
    events.subscribe(PolicySetInForce, lambda _: heard.append("second"))
    events.publish(PolicySetInForce())
    events.publish(NamespaceLabelsChanged(frozenset({"team-b", "team-a"})))
    events.publish(ClaimsChanged())  # nobody reacts
    assert heard == ["first", "second", ["team-a", "team-b"]]
    assert events.reactors(PolicySetInForce) == 2 and events.reactors(ClaimsChanged) == 0
    events.silence(PolicySetInForce)  # a replica told to say nothing more
    events.publish(PolicySetInForce())
    assert events.reactors(PolicySetInForce) == 0 and len(heard) == 3


def test_a_failing_reactor_reaches_the_publisher_unless_it_names_how_a_failure_ends():
    events, heard, failures = Events(), [], []

    def fails(_: PolicySetInForce) -> None:
        raise RuntimeError("broken reactor")

    events.subscribe(PolicySetInForce, fails)
    events.subscribe(PolicySetInForce, lambda _: heard.append("after"))
    with pytest.raises(RuntimeError):
        events.publish(PolicySetInForce())
    assert heard == []
    events.publish(PolicySetInForce(), lambda: failures.append("logged"))
    assert failures == ["logged"] and heard == ["after"]


def test_a_new_policy_set_is_published_and_a_failing_status_reactor_stops_no_load(caplog):
    holder, heard = EngineHolder(), []
    holder.events.subscribe(PolicySetInForce, lambda e: heard.append(e))
    store = PolicyStore(holder.swap, holder.events)

    def fails(_: object) -> None:
        raise RuntimeError("status writer down")

    holder.events.subscribe(SourceProblems, fails)
    store.update(
        "bundled",
        (("p.yaml", "kind: GPUPolicy\napiVersion: gpu-admission.io/v1alpha1\nmetadata: {name: p}\nspec: {}\n"),),
    )
    assert heard == [PolicySetInForce()] and holder.ready  # loading went on past the failing reactor
    assert "policy status listener failed" in caplog.text
