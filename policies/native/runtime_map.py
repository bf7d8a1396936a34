"""Runtime settings as a MutatingAdmissionPolicy the API server applies itself: what the mutating
webhook writes into a GPU pod from the matching policies' `runtime` sections (policies.mutate.
runtime), with no call out.

Which value a key takes depends on which policies match: the first in precedence order that sets
it wins (a runtime class, a toleration, a node selector key, an env variable, the /dev/shm size),
so one object, `gpu-admission-runtime`, is made from the whole set. Each policy's match is a
variable (policies.native.matching); a setting of policy i is written where i matches and no
policy before it that sets the same key does, in the order the webhook's merge gives.

The API server runs mutating admission policies before mutating webhooks. So the webhook finds
what this object wrote already there and writes it again nowhere: the pod it admits is the pod
the webhook alone makes. For that the object acts only where it is sure to do what the webhook
does; elsewhere it writes nothing and the webhook writes it all:

- pods whose containers (or init containers) ask for `nvidia.com/gpu` or a MIG slice, an amount
  other than zero, limits winning over requests: GPU pods to the engine, for certain; env and
  /dev/shm go to those containers only;
- at most SLOTS containers and SLOTS init containers (a JSON patch names each by its index), and
  bounded lists, so the cost has a ceiling;
- no `gpu-admission.io/mutated` record yet (this object writes the record, and cannot read one
  to merge: the webhook merges), no Triton sidecar asked for (its /dev/shm volume comes first in
  the webhook), not a kubelet's mirror pod;
- `failurePolicy: Ignore`: a policy's condition that fails to evaluate makes the engine skip that
  policy; here it leaves the pod to the webhook.

The record it writes lists its changes in the webhook's words; the webhook adds its own after
(the MIG rewrite's), so the entries may come in another order than the webhook alone writes them.
A set whose runtime sections set the node selector the MIG rewrite steers by
(`nvidia.com/gpu.product`) is left to the webhook whole.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from jsonpointer import escape

from policies.gpu.models import PRODUCT_LABEL
from policies.model.policy import GPUPolicy, RuntimeSpec, Toleration
from policies.mutate.mutation import MUTATED_ANNOTATION
from policies.mutate.runtime import SHM_VOLUME
from policies.native.matching import cel_string, matches, reachable
from policies.native.objects import (
    TOO_LONG,
    Uncovered,
    metadata,
    mutating_binding,
    mutating_policy,
    too_long,
)
from policies.native.reach import MIRROR_PODS
from policies.native.runtime_cel import (
    Winner,
    add,
    appended,
    cel_map,
    holds_gpu,
    joined,
    json_text,
    literal,
    made,
    tolerated,
    winners,
)
from policies.review.containers import SHM_PATH
from policies.review.pod import ANNOTATION_PREFIX

NAME = "gpu-admission-runtime"
SLOTS = 16  # containers, and init containers, a pod may have for this object to act on it
_LIST_BOUND = 64  # tolerations, volumes, a container's env and mounts: past it, left to the webhook
_CONTAINERS = ("initContainers", "containers")  # the webhook's order: init containers first
_TRITON = ANNOTATION_PREFIX + "triton"
_SHM_PATHS = f"[{cel_string(SHM_PATH)}, {cel_string(SHM_PATH + '/')}]"  # as the engine reads a mount
MUTATION = "variables.patches.map(p, JSONPatch{op: p.op, path: p.path, value: p.value})"


def _scope() -> str:
    """The one matchCondition: the pods this object acts on (the module's docstring says which)."""
    spec, annotations = "object.spec", "object.metadata.annotations"
    parts = [
        f"size({spec}.containers) <= {SLOTS}",
        f"!has({spec}.initContainers) || size({spec}.initContainers) <= {SLOTS}",
    ]
    each = " && ".join(f"(!has(c.{f}) || size(c.{f}) <= {_LIST_BOUND})" for f in ("env", "volumeMounts"))
    parts += [f"!has({spec}.{field}) || {spec}.{field}.all(c, {each})" for field in _CONTAINERS]
    parts += [f"!has({spec}.{f}) || size({spec}.{f}) <= {_LIST_BOUND}" for f in ("tolerations", "volumes")]
    marks = f"{cel_string(MUTATED_ANNOTATION)} in {annotations} || {cel_string(_TRITON)} in {annotations}"
    parts.append(f"!has({annotations}) || !({marks})")
    parts.append(" || ".join(f"(has({spec}.{f}) && {spec}.{f}.exists(c, {holds_gpu('c')}))" for f in _CONTAINERS))
    parts.append("\n".join(MIRROR_PODS))
    return " &&\n".join(f"({part})" for part in parts)


class _Generator:
    """The object's variables for `owners`: the cluster policies with a runtime section, in
    precedence order, none after one that matches every pod. Each setting carries its record
    entry, a JSON string in the webhook's words (policies.mutate.runtime)."""

    def __init__(self, owners: Sequence[GPUPolicy]) -> None:
        self.owners = owners
        self.names = [json_text(p.name) for p in owners]
        self.env = winners(owners, lambda r: r.env)
        self.shm_sizes = winners(owners, lambda r: [("", r.shm_size)] if r.shm_size else [])

    def entry(self, owner: int, path: str, what: str) -> str:
        """CEL: a record entry known here, as its JSON."""
        return cel_string(f'"{json_text(path)}: {json_text(what)} (policy {self.names[owner]})"')

    @staticmethod
    def first(found: list[Winner], items: Callable[[Winner], str]) -> str:
        """CEL: what `items` says of the value a single-valued setting takes, or []."""
        chain = "[]"
        for winner in reversed(found):
            chain = f"variables.p{winner.owner} ? [{items(winner)}] : {chain}"
        return chain

    def variables(self) -> list[tuple[str, str]]:
        found = [(f"p{i}", matches(p)) for i, p in enumerate(self.owners)]
        found += [self.runtime_class(), self.tolerations(), self.node_selector()]
        # Env and /dev/shm are written container by container, SLOTS of each kind: only where a
        # policy sets some.
        if self.env:
            found.append(self.env_wanted())
            found.append(("envOwners", "[" + ", ".join(str(o) for o in sorted({w.owner for w in self.env})) + "]"))
            found.append(("policyNames", "[" + ", ".join(cel_string(name) for name in self.names) + "]"))
            found += [(f"{field}Env", self.env_lacking(field)) for field in _CONTAINERS]
        if self.shm_sizes:
            found.append(self.shm())
            found += [(f"{field}Shm", self.shm_lacking(field)) for field in _CONTAINERS]
            spec = "object.spec"
            taken = f"has({spec}.volumes) && {spec}.volumes.exists(v, v.name == {cel_string(SHM_VOLUME)})"
            needed = " || ".join(f"variables.{field}Shm.exists(b, b)" for field in _CONTAINERS)
            found.append(("shmVolume", f"({needed}) && !({taken})"))
        found.append(("record", self.record()))
        found.append(("patches", self.patches()))
        return found

    def runtime_class(self) -> tuple[str, str]:
        """[class, its record entry], or []."""
        found = winners(self.owners, lambda r: [("", r.runtime_class_name)] if r.runtime_class_name else [])
        path = "spec.runtimeClassName"
        chain = self.first(found, lambda w: f"{cel_string(str(w.value))}, {self.entry(w.owner, path, str(w.value))}")
        return "runtimeClass", f"has(object.spec.runtimeClassName) ? [] : {chain}"

    def tolerations(self) -> tuple[str, str]:
        """The tolerations to add: {value, entry} each."""
        items = []
        for w in winners(self.owners, lambda r: [(t.normalised().identity(), t.normalised()) for t in r.tolerations]):
            toleration = w.value
            assert isinstance(toleration, Toleration)
            entry = self.entry(w.owner, "spec.tolerations", f"{toleration.key or '*'} {toleration.operator}")
            item = cel_map({"value": literal(toleration.to_json()), "entry": entry})
            items.append(f"({w.condition} && !{tolerated(toleration)} ? [{item}] : [])")
        return "tolerations", joined(items)

    def node_selector(self) -> tuple[str, str]:
        """The node selector keys to add: {key (as a JSON pointer segment), value, entry} each."""
        items = []
        selector = "object.spec.nodeSelector"
        for w in winners(self.owners, lambda r: r.node_selector):
            key, value = str(w.key), str(w.value)
            entry = self.entry(w.owner, f"spec.nodeSelector.{key}", value)
            item = cel_map({"key": cel_string(escape(key)), "value": cel_string(value), "entry": entry})
            items.append(f"({w.condition} && !(has({selector}) && {cel_string(key)} in {selector}) ? [{item}] : [])")
        return "nodeSelector", joined(items)

    def env_wanted(self) -> tuple[str, str]:
        """The env variables the matching policies set: {name, value, owner, said (the name
        inside a JSON string)} each, whatever the containers hold."""
        items = []
        for w in self.env:
            name, value = str(w.key), str(w.value)
            said = cel_string(json_text(name))
            item = cel_map({"name": cel_string(name), "value": cel_string(value), "owner": str(w.owner), "said": said})
            items.append(f"({w.condition} ? [{item}] : [])")
        return "env", joined(items)

    def shm(self) -> tuple[str, str]:
        """[size, the volume's record entry, its policy's name], or []."""

        def items(w: Winner) -> str:
            entry = self.entry(w.owner, "spec.volumes", f"{SHM_VOLUME} emptyDir Memory {w.value}")
            return f"{cel_string(str(w.value))}, {entry}, {cel_string(self.names[w.owner])}"

        return "shm", self.first(self.shm_sizes, items)

    @staticmethod
    def env_lacking(field: str) -> str:
        """For each container of `field`: the policies' env it lacks, where it holds a GPU."""
        items = f"object.spec.{field}"
        lacking = "variables.env.filter(e, !(has(c.env) && c.env.exists(x, x.name == e.name)))"
        return f"!has({items}) ? [] : {items}.map(c, {holds_gpu('c')} ? {lacking} : [])"

    @staticmethod
    def shm_lacking(field: str) -> str:
        """For each container of `field`: whether /dev/shm is to be mounted in it."""
        items = f"object.spec.{field}"
        mounted = f"has(c.volumeMounts) && c.volumeMounts.exists(m, m.mountPath in {_SHM_PATHS})"
        return f"!has({items}) ? [] : {items}.map(c, size(variables.shm) > 0 && {holds_gpu('c')} && !({mounted}))"

    def record(self) -> str:
        """CEL: the record's entries, each a JSON string, in the order the webhook writes them."""
        parts = [
            "(size(variables.runtimeClass) > 0 ? [variables.runtimeClass[1]] : [])",
            "variables.tolerations.map(i, i.entry)",
            "variables.nodeSelector.map(i, i.entry)",
        ]
        # Each container's env entries, one a policy that added some, in the policies' order:
        # the policies are listed once (envOwners, policyNames), not written out a container each.
        for field in _CONTAINERS if self.env else ():
            listed = f"variables.{field}Env"
            for slot in range(SLOTS):
                added = f"{listed}[{slot}].filter(e, e.owner == o)"
                head = cel_string(f'"spec.{field}[{slot}].env: ')
                text = f"{head} + {added}.map(e, e.said).join(', ') + ' (policy ' + variables.policyNames[o] + ')\"'"
                owners = f"variables.envOwners.filter(o, {listed}[{slot}].exists(e, e.owner == o))"
                parts.append(f"(size({listed}) > {slot} ? {owners}.map(o, {text}) : [])")
        if self.shm_sizes:
            parts.append("(variables.shmVolume ? [variables.shm[1]] : [])")
        for field in _CONTAINERS if self.shm_sizes else ():
            listed = f"variables.{field}Shm"
            for slot in range(SLOTS):
                head = cel_string(f'"spec.{field}[{slot}].volumeMounts: {SHM_VOLUME} at {SHM_PATH} (policy ')
                parts.append(
                    f"(size({listed}) > {slot} && {listed}[{slot}] ? [{head} + variables.shm[2] + ')\"'] : [])"
                )
        return joined(parts)

    def patches(self) -> str:
        """CEL: the JSON patch, as maps, in the record's order."""
        spec = "object.spec"
        runtime_class = add("'/spec/runtimeClassName'", "variables.runtimeClass[0]")
        selector = "variables.nodeSelector"
        parts = [
            f"(size(variables.runtimeClass) > 0 ? [{runtime_class}] : [])",
            appended(f"{spec}.tolerations", "/spec/tolerations", "variables.tolerations", "i.value"),
            made(f"{spec}.nodeSelector", "/spec/nodeSelector", selector, "{}"),
            f"{selector}.map(i, {add(chr(39) + '/spec/nodeSelector/' + chr(39) + ' + i.key', 'i.value')})",
        ]
        for field in _CONTAINERS if self.env else ():
            listed = f"variables.{field}Env"
            for slot in range(SLOTS):
                where, at = f"{spec}.{field}[{slot}].env", f"/spec/{field}/{slot}/env"
                env = appended(where, at, f"{listed}[{slot}]", "{'name': i.name, 'value': i.value}")
                parts.append(f"(size({listed}) > {slot} ? {env} : [])")
        if self.shm_sizes:
            empty_dir = "{'medium': 'Memory', 'sizeLimit': variables.shm[0]}"
            volume = f"[{cel_map({'name': cel_string(SHM_VOLUME), 'emptyDir': empty_dir})}]"
            parts.append(f"(variables.shmVolume ? {appended(f'{spec}.volumes', '/spec/volumes', volume, 'i')} : [])")
        mount = f"[{{'name': {cel_string(SHM_VOLUME)}, 'mountPath': {cel_string(SHM_PATH)}}}]"
        for field in _CONTAINERS if self.shm_sizes else ():
            listed = f"variables.{field}Shm"
            for slot in range(SLOTS):
                where, at = f"{spec}.{field}[{slot}].volumeMounts", f"/spec/{field}/{slot}/volumeMounts"
                parts.append(f"(size({listed}) > {slot} && {listed}[{slot}] ? {appended(where, at, mount, 'i')} : [])")
        annotations = "object.metadata.annotations"
        annotated = made(annotations, "/metadata/annotations", "variables.record", "{}")
        where = cel_string("/metadata/annotations/" + escape(MUTATED_ANNOTATION))
        record = add(where, "'[' + variables.record.join(',') + ']'")
        parts.append(f"{annotated} + (size(variables.record) == 0 ? [] : [{record}])")
        return joined(parts)


def _unsafe(runtime: RuntimeSpec) -> str | None:
    """Why the webhook alone must write these settings, if it must: what its other steps read
    before its runtime step writes them. (A device variable the loader refuses in a runtime
    section; CUDA_VERSION in a GPU container names no devices the engine reads.)"""
    if any(key == PRODUCT_LABEL for key, _ in runtime.node_selector):
        return f"it sets the node selector {PRODUCT_LABEL}, which the MIG rewrite steers by"
    return None


def runtime_settings(
    ordered: Sequence[GPUPolicy], left_alone: Sequence[str]
) -> tuple[list[dict[str, object]], list[str], list[Uncovered]]:
    """The object and its binding for `ordered` (policies in precedence order), the policies whose
    settings it writes, and what it leaves to the webhook."""
    cluster = reachable([p for p in ordered if p.namespace is None])
    owners = [p for p in cluster if p.runtime is not None]
    unsafe = [f"{p.name}: {why}" for p in owners if p.runtime is not None and (why := _unsafe(p.runtime))]
    if unsafe:
        why = "the set's runtime settings stay with the webhook whole; " + "; ".join(unsafe)
        return [], [], [Uncovered(p.name, "native runtime settings", why) for p in owners]
    if not owners:
        return [], [], []
    meta = metadata(None, NAME)
    policy = mutating_policy(meta, _scope(), _Generator(owners).variables(), MUTATION, left_alone)
    if too_long(policy):
        return [], [], [Uncovered(p.name, "native runtime settings", TOO_LONG) for p in owners]
    return [policy, mutating_binding(NAME, meta)], [p.name for p in owners], []
