"""The value-class rule of docs/architecture.md, held to what the engine does.

A value's class follows how often it is made: many times a review (per container, policy,
device, patch edit), a plain class with `__slots__`; otherwise a frozen dataclass, or a
NamedTuple where its callers take it apart like a tuple (and then it is made per review).
The value classes are found by walking `policies/`, not listed here (only the exceptions are,
each with its reason), and how often each is made is counted while the engine judges sample reviews (the public corpus
under every example policy set, a pod holding its GPU through a DRA claim, a pod pinned by a
cloud label and reaching devices through its environment)."""

from __future__ import annotations

import collections
import dataclasses
import functools
import importlib
import inspect
import pkgutil
import sys
from collections.abc import Callable, Iterator
from types import CodeType
from typing import Any

import pytest

import policies
import policies.engine
from policies.engine import Engine
from policies.judge.ledger import Ledger
from policies.review.cluster import KnownCluster
from tests.support import dra
from tests.support.builders import gpu_container, plain_container, pod
from tests.support.corpus import CLUSTER, SETS, engine_for, manifests, placed

PLAIN, NAMED_TUPLE, DATACLASS = "plain class with __slots__", "NamedTuple", "dataclass"
# Dataclasses that are records filled in as they go, not values.
MUTABLE_RECORDS = {
    "policies.audit.judging.AuditReport": "the audit's findings, appended pod by pod",
    "policies.judge.ledger._NamedClaim": "a claim's pods and charge, updated as pods name it",
}
# More than twice per pod judged, where the rule asks for a plain class: owed, with the reason it
# is not one yet. An entry the samples no longer show made that often fails too: take it out.
OWED: dict[str, str] = {}
MANY = 2  # per pod judged: a value made more often is made per container, policy or device


def value_classes() -> dict[str, tuple[type, str]]:
    """Every value class defined in policies/, by qualified name, with its style."""
    found: dict[str, tuple[type, str]] = {}
    for module_info in pkgutil.walk_packages(policies.__path__, "policies."):
        module = importlib.import_module(module_info.name)
        for name, cls in vars(module).items():
            if not inspect.isclass(cls) or cls.__module__ != module.__name__:
                continue
            if dataclasses.is_dataclass(cls):
                style = DATACLASS
            elif issubclass(cls, tuple) and hasattr(cls, "_fields"):
                style = NAMED_TUPLE
            elif "__slots__" in cls.__dict__ and "__init__" in cls.__dict__:
                style = PLAIN
            else:
                continue
            found[f"{module.__name__}.{name}"] = (cls, style)
    return found


VALUES = value_classes()


def constructor(cls: type, style: str) -> CodeType | None:
    """The code that runs once for each value made (None if compiled: then nothing is counted)."""
    function = cls.__new__ if style == NAMED_TUPLE else cls.__init__
    return getattr(function, "__code__", None)


CONSTRUCTORS = {code: name for name, (cls, style) in VALUES.items() if (code := constructor(cls, style)) is not None}


def made_while(judge: Callable[[], Any]) -> tuple[Any, collections.Counter[str]]:
    """What `judge` returns, and how many of each value class it makes."""
    counts: collections.Counter[str] = collections.Counter()

    def count(frame: Any, event: str, arg: Any) -> None:
        if event == "call" and (name := CONSTRUCTORS.get(frame.f_code)) is not None:
            counts[name] += 1

    sys.setprofile(count)
    try:
        return judge(), counts
    finally:
        sys.setprofile(None)


def samples() -> Iterator[tuple[str, Engine, dict[str, Any], KnownCluster]]:
    """(label, engine, object, cluster): each judged by mutate, then its result by validate."""
    engines = {name: engine_for(name) for name in SETS}
    for stem, index, document in manifests():
        for name, (_, namespace) in SETS.items():
            engine = engines[name]
            if engine.judges(document.get("apiVersion"), document.get("kind")):
                yield f"{stem}[{index}] under {name}", engine, placed(document, namespace), CLUSTER
    slices = engines["slices-everywhere"]
    claim = dra.claim("one-slice", "ml", dra.claim_spec(dra.exactly("mig.nvidia.com", 1)))
    yield "a pod holding a slice through a DRA claim", slices, dra.claim_pod("one-slice"), dra.cluster(claim)
    env = [{"name": "NVIDIA_VISIBLE_DEVICES", "value": "all"}]
    pinned = pod(
        gpu_container(),
        dict(plain_container(), env=env),
        nodeSelector={"cloud.google.com/gke-accelerator": "nvidia-tesla-a100"},
    )
    yield "a pod pinned by a cloud label, with devices in its environment", slices, pinned, CLUSTER


def _answered(engine: Engine, document: dict[str, Any], cluster: KnownCluster) -> object:
    return engine.validate(document, Ledger(), cluster=cluster).answer


def census() -> tuple[collections.Counter[str], dict[str, tuple[float, str]]]:
    """Values made over all samples, and the most of each made per pod judged in one review."""
    total: collections.Counter[str] = collections.Counter()
    most: dict[str, tuple[float, str]] = {}

    def tally(label: str, counts: collections.Counter[str]) -> None:
        total.update(counts)
        pods_judged = max(1, counts["policies.review.pod.PodView"])
        for name, made in counts.items():
            if made / pods_judged > most.get(name, (0.0, ""))[0]:
                most[name] = (made / pods_judged, label)

    for label, engine, document, cluster in samples():
        mutated, counts = made_while(functools.partial(engine.mutate_any, document, cluster=cluster))
        tally(label, counts)
        # As the webhook answers: the decision, then the answer it reads of it (Decision.answer).
        answered = functools.partial(_answered, engine, mutated.object, cluster)
        _, counts = made_while(answered)
        tally(label, counts)
    return total, most


@pytest.fixture(scope="module")
def counted() -> tuple[collections.Counter[str], dict[str, tuple[float, str]]]:
    if not str(policies.engine.__file__).endswith(".py"):
        pytest.skip("the engine is compiled: its constructors run as C, and are not counted")
    return census()


def test_every_dataclass_is_frozen_but_the_records_filled_in_as_they_go():
    mutable = {
        name
        for name, (cls, style) in VALUES.items()
        if style == DATACLASS and not cls.__dataclass_params__.frozen  # type: ignore[attr-defined]
    }
    assert mutable == set(MUTABLE_RECORDS)


def test_every_dataclass_is_slotted():
    """Per load or per review, a value's fields are fixed: slots, as the rule says (its values
    carry no __dict__; compiled, a native class never does either)."""
    unslotted = sorted(name for name, (cls, style) in VALUES.items() if style == DATACLASS and cls.__dictoffset__)
    assert not unslotted, f"dataclasses without slots=True (docs/architecture.md): {unslotted}"


def test_a_value_made_more_than_twice_a_pod_is_a_plain_class(counted):
    _, most = counted
    often = {name: f"{per_pod:g} a pod in {label}" for name, (per_pod, label) in most.items() if per_pod > MANY}
    wrong = {name: seen for name, seen in often.items() if VALUES[name][1] != PLAIN and name not in OWED}
    assert not wrong, f"made many times a review: a plain class with __slots__ (docs/architecture.md): {wrong}"
    assert set(OWED) <= set(often), f"no longer made that often, no longer owed: {set(OWED) - set(often)}"


def test_a_named_tuple_is_made_per_review_and_never_only_as_a_load_reads(counted):
    """A NamedTuple the samples never make is made only as policies or the cluster load: a
    frozen dataclass, which compares by its own type, not as any tuple of the same values."""
    total, _ = counted
    named_tuples = {name for name, (_, style) in VALUES.items() if style == NAMED_TUPLE}
    assert named_tuples - set(total) == set()


def test_the_samples_judge_what_they_are_meant_to(counted):
    """The census reaches the reviews' own values, the DRA path's and the cloud and env paths'."""
    total, _ = counted
    for name in ("PodView", "Decision", "MutationResult", "ClaimRef", "CloudPin", "DeviceEnv", "Requirement"):
        assert any(made.rsplit(".", 1)[1] == name for made in total), name
