"""ConfigMaps and Secrets that would set NVIDIA's device variables through `envFrom`.

An `envFrom` without a prefix hands a container every key of its ConfigMap or Secret as a
variable, and which keys those are is unknown when the pod is admitted: the object may not exist
yet, and may be edited after. So the keys are judged where they are written: a ConfigMap (its
`data`, all that kubelet reads for envFrom) or Secret whose key is NVIDIA_VISIBLE_DEVICES (or
another DEVICE_ENV name) with a value that grants devices, or keys that make a GPU-less
container taking them a legacy CUDA image to the toolkit, handed every GPU (CUDA_VERSION with no
NVIDIA_REQUIRE_CUDA beside it or an empty one, or an empty NVIDIA_REQUIRE_CUDA over an image's
CUDA_VERSION, and no NVIDIA_VISIBLE_DEVICES: policies.gpu.devices.legacy_cause), is a breach of
`security.envFrom`, as the pod would have been. A prefix that could spell those names is judged on the pod (in any pod:
policies.judge.security), so only the names themselves need keeping out here.

Which settings hold: those of the policies that apply to every pod of the namespace (no pod
selector, no condition), since any of its pods may take the object by envFrom; with policies
there that apply only to some pods, the defaults. A namespace no policy reaches is not judged,
as its pods are not. Values are never quoted back: a Secret's are secret.
"""

from __future__ import annotations

import binascii
from base64 import b64decode
from collections.abc import Mapping

from policies.errors import InputError
from policies.gpu.devices import DEVICE_ENV, LEGACY_ENV, REQUIRE_ENV, TOOLKIT_ENV, as_set, grants_devices, legacy_cause
from policies.judge.security import applying_to_every_pod, settings
from policies.judge.validation import Decision, subject_of
from policies.judge.verdict import Verdict
from policies.model.policy import DEFAULT_SECURITY, Action, DeviceCheck
from policies.model.policyset import PolicySet
from policies.review.cluster import ClusterState
from policies.review.document import JSON

ENV_SOURCE_KINDS = ("ConfigMap", "Secret")


def _value(kind: str, raw: object) -> str | None:
    """The text a container would see; None where it cannot be read (so it may grant)."""
    if not isinstance(raw, str):
        return None
    if kind == "ConfigMap":
        return raw
    try:
        return b64decode(raw, validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None


def _why(kind: str, key: str) -> str:
    if key in (LEGACY_ENV, REQUIRE_ENV):
        what = "CUDA_VERSION without NVIDIA_REQUIRE_CUDA" if key == LEGACY_ENV else "an empty NVIDIA_REQUIRE_CUDA"
        return (
            f"{kind} key {key}: {what} makes the NVIDIA runtime take any GPU-less container of the namespace "
            "that takes it by envFrom (over a CUDA image) for a legacy CUDA image and hand it every GPU: "
            "give NVIDIA_REQUIRE_CUDA a value (e.g. cuda>=12.0)"
        )
    return (
        f"{kind} key {key} grants GPU devices to any container of the namespace that takes it by envFrom, "
        "past the device plugin (only empty, void and none may be set)"
    )


def judge_env_source(
    raw: JSON, kind: str, namespace: str | None, policy_set: PolicySet, cluster: ClusterState
) -> Decision:
    """The verdict on a ConfigMap or Secret in `namespace` (the API server's word; the object's
    own, or `default`, where none is given, as for `gpu-admission validate`)."""
    if not isinstance(raw, dict):
        raise InputError("", f"expected a {kind}")
    metadata = raw.get("metadata")
    if not namespace:
        written = metadata.get("namespace") if isinstance(metadata, dict) else None
        namespace = written if isinstance(written, str) and written else "default"
    data = raw.get("data")
    if data is None:
        return Decision(True)
    if not isinstance(data, Mapping):
        raise InputError("data", "must be a map of keys to values")
    # Read as the toolkit reads a container that takes them all: by value (an empty
    # NVIDIA_REQUIRE_CUDA is none; the image may hold the CUDA_VERSION it would clear).
    written = {key: _value(kind, data[key]) for key in TOOLKIT_ENV if key in data}
    named = [key for key in DEVICE_ENV if key in written and grants_devices(written[key])]
    cause = legacy_cause({key: as_set(value) for key, value in written.items()})
    if cause is not None:
        named.append(cause)
    if not named:
        return Decision(True)
    reached = policy_set.in_namespace(namespace, cluster.namespace_labels(namespace))
    if not reached:
        return Decision(True)
    every_pod = applying_to_every_pod(reached)
    if every_pod:
        spec, owner = settings(every_pod)
    else:
        spec, owner = DEFAULT_SECURITY, f"{reached[0].name}, default security"
    if DeviceCheck.ENV_FROM in spec.allow:
        return Decision(True, policies=tuple(p.name for p in reached))
    policy, subject = owner.split(",")[0], subject_of(raw, namespace)
    verdicts = tuple(
        Verdict(
            policy,
            f"security.{DeviceCheck.ENV_FROM.value}",
            f"data.{key}",
            f"{_why(kind, key)} (policy {owner})",
            spec.action,
        ).about(subject)
        for key in sorted(named)
    )
    return Decision(spec.action is not Action.DENY, verdicts, policies=tuple(p.name for p in reached))
