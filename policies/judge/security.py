"""GPU device access past the device plugin: a pod that could reach a GPU may not hand its
containers devices itself, since nothing it takes that way is counted by any quota.

Checked (policies.model.policy.DeviceCheck), in every container, init and ephemeral ones too:
NVIDIA_VISIBLE_DEVICES, NVIDIA_MIG_CONFIG_DEVICES and NVIDIA_MIG_MONITOR_DEVICES set to anything
but empty, `void` or `none` (or from valueFrom, which cannot be known here); envFrom sources whose
keys could spell them (in a pod that can reach a GPU any without a prefix; in any pod one with a
prefix of those names, "NVIDIA_"; a key named so outright is kept out of ConfigMaps and Secrets by
policies.judge.env_sources); hostPath volumes on the node's devices; CDI annotations naming NVIDIA
devices. All are on by default.

Which settings hold: those of the first cluster policy, in precedence order, that has a
`security` section (the defaults where none has); a namespaced policy may only tighten them
(take allowances away, make the action stricter), never loosen the platform's.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.gpu.devices import LEGACY_ENV, grants_devices
from policies.judge.verdict import Verdict
from policies.model.policy import DEFAULT_SECURITY, Action, DeviceCheck, GPUPolicy, SecuritySpec
from policies.review.containers import DeviceEnv
from policies.review.pod import PodView

_STRICTNESS = {Action.AUDIT: 0, Action.WARN: 1, Action.DENY: 2}


def applying_to_every_pod(policies: tuple[GPUPolicy, ...]) -> tuple[GPUPolicy, ...]:
    """Those of `policies` that pick no pods by label or condition: what holds for an object any
    pod of the namespace may use (a ConfigMap by envFrom, a DRA claim)."""
    return tuple(p for p in policies if p.match.pod_selector is None and p.match.condition is None)


def settings(policies: tuple[GPUPolicy, ...]) -> tuple[SecuritySpec, str]:
    """The security settings in force for a pod matched by `policies`, and who set them."""
    decider = next((p for p in policies if p.namespace is None and p.security is not None), None)
    spec = decider.security if decider is not None and decider.security is not None else DEFAULT_SECURITY
    owner = decider.name if decider is not None else f"{policies[0].name}, default security"
    allow, action, classes = spec.allow, spec.action, spec.device_classes
    for policy in policies:
        if policy.namespace is not None and policy.security is not None:
            allow &= policy.security.allow
            if _STRICTNESS[policy.security.action] > _STRICTNESS[action]:
                action = policy.security.action
            narrower = policy.security.device_classes
            if narrower is not None:
                classes = narrower if classes is None else classes & narrower
    return SecuritySpec(action, allow, classes), owner


# What each breach is told, in the engine's words and the native checks' (policies.native.device_access):
# the parts around what the pod wrote.
GRANTS = " would hand the container GPU devices past the device plugin (only empty, void and none may be set)"
FROM_VALUE = "from valueFrom, which cannot be checked"
LEGACY = (
    " makes the NVIDIA runtime treat the container as a legacy CUDA image (CUDA_VERSION set, "
    "NVIDIA_REQUIRE_CUDA empty) and hand it every GPU: set NVIDIA_VISIBLE_DEVICES=void"
)
PREFIXED = " could spell NVIDIA_VISIBLE_DEVICES from an ordinary key: give it a prefix no NVIDIA variable starts with"
UNPREFIXED = (
    "envFrom without a prefix could set NVIDIA_VISIBLE_DEVICES in a pod that can reach a GPU: "
    "give it a prefix, or name its variables in env"
)
DEVICE_LIST = " is read by the NVIDIA runtime as a device list past the device plugin"
HOST_DEVICES = " reaches the node's GPU devices (or what hands them out) past the device plugin"
CDI = " asks the container runtime for NVIDIA devices past the device plugin"


def _legacy(found: DeviceEnv) -> str:
    if found.name == LEGACY_ENV:
        return f"CUDA_VERSION without NVIDIA_REQUIRE_CUDA{LEGACY}"
    told = FROM_VALUE if found.value is None else f"= {found.value!r}"
    return f"NVIDIA_REQUIRE_CUDA {told} beside a CUDA_VERSION (the pod's or the image's){LEGACY}"


def _breaches(pod: PodView) -> Iterator[tuple[DeviceCheck, str, str]]:
    for found in pod.device_env:
        if found.legacy:
            yield DeviceCheck.DEVICE_ENV, found.path, _legacy(found)
        elif grants_devices(found.value):
            told = FROM_VALUE if found.value is None else f"= {found.value!r}"
            yield DeviceCheck.DEVICE_ENV, found.path, f"{found.name} {told}{GRANTS}"
    for path, prefix in pod.env_from:
        if prefix:  # in any pod: no ConfigMap check can tell VISIBLE_DEVICES from an ordinary key
            yield DeviceCheck.ENV_FROM, path, f"envFrom prefix {prefix!r}{PREFIXED}"
        elif pod.reaches_gpu:
            yield DeviceCheck.ENV_FROM, path, UNPREFIXED
    for path, host in pod.host_devices:
        if ".volumeMounts[" in path:
            yield DeviceCheck.HOST_DEVICES, path, f"a volume mounted at {host}{DEVICE_LIST}"
        else:
            yield DeviceCheck.HOST_DEVICES, path, f"hostPath {host}{HOST_DEVICES}"
    for annotation, value in pod.cdi_devices:
        yield DeviceCheck.CDI_DEVICES, f"metadata.annotations.{annotation}", f"{annotation}: {value}{CDI}"


def check_security(pod: PodView, policies: tuple[GPUPolicy, ...], only: str = "") -> list[Verdict]:
    """Verdicts on device access; `only`: just the fields under this path (an ephemeral
    container being added)."""
    if not policies:
        return []
    found = [breach for breach in _breaches(pod) if breach[1].startswith(only)]
    if not found:  # the usual case: no settings to work out
        return []
    spec, owner = settings(policies)
    policy = owner.split(",")[0]
    return [
        Verdict(policy, f"security.{check.value}", path, f"{message} (policy {owner})", spec.action)
        for check, path, message in found
        if check not in spec.allow
    ]
