"""GPU runtime settings from the matching policies: runtimeClassName, tolerations, node selector,
env and a memory-backed /dev/shm. The first policy in precedence order wins each key; what the
user wrote always wins, with a warning where it differs from the policy.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from policies.model.policy import GPUPolicy, Toleration
from policies.review.containers import SHM_PATH, ContainerView
from policies.review.document import JSON, Change, Draft
from policies.review.pod import PodView

SHM_VOLUME = "gpu-admission-shm"


@dataclass(frozen=True, slots=True)
class Merged:
    """Runtime settings of several policies folded into one, each value with its policy."""

    runtime_class: tuple[str, str] | None
    tolerations: tuple[tuple[Toleration, str], ...]
    node_selector: dict[str, tuple[str, str]]
    env: dict[str, tuple[str, str]]
    shm_size: tuple[str, str] | None
    env_groups: tuple[tuple[str, str], ...] = ()  # (policy, "NAME, NAME"): the record when all env is added


def merge(policies: Sequence[GPUPolicy]) -> Merged | None:
    runtime_class: tuple[str, str] | None = None
    shm: tuple[str, str] | None = None
    tolerations: dict[Toleration, str] = {}
    node_selector: dict[str, tuple[str, str]] = {}
    env: dict[str, tuple[str, str]] = {}
    found = False
    for policy in policies:
        spec = policy.runtime
        if spec is None:
            continue
        found = True
        if runtime_class is None and spec.runtime_class_name:
            runtime_class = (spec.runtime_class_name, policy.name)
        if shm is None and spec.shm_size:
            shm = (spec.shm_size, policy.name)
        for toleration in spec.tolerations:
            tolerations.setdefault(toleration.normalised(), policy.name)
        for key, value in spec.node_selector:
            node_selector.setdefault(key, (value, policy.name))
        for key, value in spec.env:
            env.setdefault(key, (value, policy.name))
    if not found:
        return None
    return Merged(runtime_class, tuple(tolerations.items()), node_selector, env, shm, _env_groups(env))


def _env_groups(env: dict[str, tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    names: dict[str, list[str]] = {}
    for name, (_, policy) in env.items():
        names.setdefault(policy, []).append(name)
    return tuple((policy, ", ".join(group)) for policy, group in names.items())


def apply_runtime(
    doc: Draft,
    pod: PodView,
    merged: Merged,
    gpu_containers: Sequence[ContainerView],
    changes: list[Change],
    warnings: list[str],
) -> None:
    spec = doc.spec()
    if merged.runtime_class:
        wanted, policy = merged.runtime_class
        if pod.runtime_class_name is None:
            doc.set(spec, "runtimeClassName", wanted)
            changes.append(Change("spec.runtimeClassName", wanted, policy))
        elif pod.runtime_class_name != wanted:
            warnings.append(f"keeps runtimeClassName {pod.runtime_class_name}; policy {policy} sets {wanted}")
    _tolerations(doc, spec, merged, changes)
    for key, (value, policy) in merged.node_selector.items():
        current = pod.node_selector.get(key)
        if current is None:
            doc.set(doc.child(spec, "nodeSelector"), key, value)
            changes.append(Change(f"spec.nodeSelector.{key}", value, policy))
        elif current != value:
            warnings.append(f"keeps nodeSelector {key}={current}; policy {policy} sets {value}")
    for container in gpu_containers:
        _env(doc, container, merged, changes, warnings)
    if merged.shm_size:
        add_shm(doc, gpu_containers, merged.shm_size[0], merged.shm_size[1], changes)


def _tolerations(doc: Draft, spec: dict[str, JSON], merged: Merged, changes: list[Change]) -> None:
    existing = spec.get("tolerations") or []
    present = {Toleration.identity_of(t) for t in existing if type(t) is dict}
    for toleration, policy in merged.tolerations:  # normalised already (merge)
        identity = toleration.identity()
        if identity not in present:
            doc.append(doc.child(spec, "tolerations", list), toleration.to_json())
            present.add(identity)
            changes.append(Change("spec.tolerations", f"{toleration.key or '*'} {toleration.operator}", policy))


def _env(doc: Draft, container: ContainerView, merged: Merged, changes: list[Change], warnings: list[str]) -> None:
    if not merged.env:
        return
    if container.env.keys().isdisjoint(merged.env):
        # The usual case, none of the policies' variables set yet: every one is added, as merged.
        listed = doc.child(doc.container(container.init, container.position), "env", list)
        doc.extend(listed, [{"name": name, "value": value} for name, (value, _) in merged.env.items()])
        path = f"{container.path}.env"
        changes.extend([Change(path, names, policy) for policy, names in merged.env_groups])
        return
    added: dict[str, list[str]] = {}
    env: list[JSON] | None = None
    for name, (value, policy) in merged.env.items():
        if name not in container.env:
            if env is None:
                env = doc.child(doc.container(container.init, container.position), "env", list)
            doc.append(env, {"name": name, "value": value})
            added.setdefault(policy, []).append(name)
        elif container.env[name] != value:
            warnings.append(f"{container.name}: keeps env {name} as set; policy {policy} sets {value!r}")
    for policy, names in added.items():
        changes.append(Change(f"{container.path}.env", ", ".join(names), policy))


def ensure_shm_volume(doc: Draft, size: str | None, policy: str, changes: list[Change]) -> None:
    volumes = doc.child(doc.spec(), "volumes", list)
    if any(isinstance(v, dict) and v.get("name") == SHM_VOLUME for v in volumes):
        return
    empty_dir: dict[str, JSON] = {"medium": "Memory"}
    if size:
        empty_dir["sizeLimit"] = size
    doc.append(volumes, {"name": SHM_VOLUME, "emptyDir": empty_dir})
    changes.append(Change("spec.volumes", f"{SHM_VOLUME} emptyDir Memory {size or ''}".rstrip(), policy))


def add_shm(
    doc: Draft, containers: Sequence[ContainerView], size: str | None, policy: str, changes: list[Change]
) -> None:
    """A memory-backed emptyDir at /dev/shm for each container that has none."""
    needing = [c for c in containers if not c.mounts_shm]
    if not needing:
        return
    ensure_shm_volume(doc, size, policy, changes)
    for container in needing:
        mounts = doc.child(doc.container(container.init, container.position), "volumeMounts", list)
        doc.append(mounts, {"name": SHM_VOLUME, "mountPath": SHM_PATH})
        changes.append(Change(f"{container.path}.volumeMounts", f"{SHM_VOLUME} at {SHM_PATH}", policy))
