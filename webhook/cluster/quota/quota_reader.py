"""What `gpu-admission quota` reads from a live cluster, read-only, through the kubeconfig: the
pods (of one namespace, or all), the namespaces' labels, the policy ConfigMaps in the webhook's
namespace and the GPUPolicy objects, and the strict-quota Leases' reservations not yet seen as pods.

A tenant's kubeconfig may not read all of it; what is forbidden is said, not fatal: without
namespace labels, namespaceSelector budgets are shown only for the namespace asked; without the
policy ConfigMaps, `--policies` (or the bundled default) is used; without the Leases, reserved
is 0. Reservations' expiry is judged by the written time on this machine's clock (good enough
for a view; the webhook itself never compares clocks).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import orjson
import urllib3
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from policies import CATALOG, Ledger, Usage, dual_advertised, node_gpus, read_slice
from webhook.cluster.api.gpupolicy_reads import read_gpupolicy_texts
from webhook.cluster.api.identity import api_client, impersonate, load_kubeconfig
from webhook.cluster.quota.leases.lease_entries import GRANT_PREFIX, LEDGER_LABEL, lease_key, parse_lease
from webhook.sources.configmaps import POLICY_LABEL, texts_of

Texts = list[tuple[str, str]]


@dataclass
class LiveState:
    pods: list[dict[str, Any]] = field(default_factory=list)
    namespaces: dict[str, Mapping[str, str] | None] = field(default_factory=dict)
    policy_texts: Texts | None = None  # None: could not be read
    reserved: Ledger = field(default_factory=Ledger)
    notes: list[str] = field(default_factory=list)  # what could not be read, and so was left out
    dual_advertised: frozenset[str] = frozenset()  # nodes whose GPUs the device plugin and DRA both advertise


def _forbidden(error: ApiException) -> bool:
    return error.status in (401, 403, 404)


def _read(state: LiveState, what: str, call: Callable[[], Any]) -> Any:
    try:
        return call()
    except ApiException as error:
        if not _forbidden(error):
            raise
        state.notes.append(f"{what}: {error.status} {error.reason}, left out")
        return None


class Unreachable(RuntimeError):
    """No kubeconfig, or no API server behind it."""


def read_live(
    namespace: str | None,
    policy_namespace: str,
    kubeconfig: str | None = None,
    context: str | None = None,
    as_user: str | None = None,
    as_groups: Sequence[str] = (),
) -> LiveState:
    try:
        load_kubeconfig(kubeconfig, context)
    except (config.ConfigException, OSError) as error:
        raise Unreachable(f"no cluster to read ({error}); give --cluster-state FILE to work offline") from None
    api = api_client()
    try:
        impersonate(api, as_user, as_groups)
    except ValueError as error:
        raise Unreachable(str(error)) from None
    try:
        return _read_all(api, namespace, policy_namespace)
    except (ApiException, OSError, urllib3.exceptions.HTTPError) as error:
        raise Unreachable(f"the API server could not be read: {error}") from None


def _read_all(api: client.ApiClient, namespace: str | None, policy_namespace: str) -> LiveState:
    core, coordination = client.CoreV1Api(api), client.CoordinationV1Api(api)
    raw: dict[str, Any] = {"_preload_content": False}  # the JSON as served: no model round trip
    state = LiveState()

    def items(what: str, call: Callable[[], Any]) -> list[dict[str, Any]] | None:
        response = _read(state, what, call)
        return None if response is None else list(orjson.loads(response.data).get("items") or [])

    pods = items(
        "pods",
        lambda: core.list_namespaced_pod(namespace, **raw) if namespace else core.list_pod_for_all_namespaces(**raw),
    )
    state.pods = pods or []
    listed = items("namespaces", lambda: core.list_namespace(**raw))
    if listed is not None:
        state.namespaces = {n["metadata"]["name"]: dict(n["metadata"].get("labels") or {}) for n in listed}
    elif namespace:
        state.namespaces = {namespace: None}
    configmaps = items(
        f"policy ConfigMaps in {policy_namespace}",
        lambda: core.list_namespaced_config_map(policy_namespace, label_selector=POLICY_LABEL, **raw),
    )
    if configmaps is not None:
        state.policy_texts = [text for cm in configmaps for text in texts_of(cm, policy_namespace)[1]]
        objects = _read(state, "GPUPolicy objects", lambda: read_gpupolicy_texts(api))
        state.policy_texts += objects or []
    leases = items(
        f"strict-quota Leases in {policy_namespace}",
        lambda: coordination.list_namespaced_lease(policy_namespace, label_selector=f"{LEDGER_LABEL}=true", **raw),
    )
    if leases is not None:
        _reservations(state, leases)
    state.dual_advertised = _dual_advertised(api, raw)
    return state


def _dual_advertised(api: client.ApiClient, raw: dict[str, Any]) -> frozenset[str]:
    """Nodes whose GPUs both the device plugin and NVIDIA's DRA driver advertise, where the
    kubeconfig may read Nodes and ResourceSlices (a tenant's often may not: nothing is said then)."""
    try:
        nodes = orjson.loads(client.CoreV1Api(api).list_node(**raw).data).get("items") or []  # type: ignore[attr-defined]
        listed = client.ResourceV1Api(api).list_resource_slice(**raw)
        slices = orjson.loads(listed.data).get("items") or []  # type: ignore[attr-defined]
    except ApiException:
        return frozenset()
    return dual_advertised((node_gpus(n) for n in nodes), (read_slice(s, CATALOG) for s in slices))


def _reservations(state: LiveState, leases: list[dict[str, Any]]) -> None:
    """Entries not expired (by the time written in them) whose pods are not listed yet."""
    seen = {p["metadata"].get("uid") for p in state.pods}
    seen |= {f"{p['metadata'].get('namespace')}/{p['metadata'].get('name')}" for p in state.pods}
    now = time.time()
    for lease in leases:
        policy, scope = lease_key(lease) or ("", "")
        for entry in parse_lease(lease).entries:
            if entry.key.startswith(GRANT_PREFIX) and entry.expires > now:  # a replica's share: held
                state.reserved.charge([(policy, scope)], entry.usage)
                holder = entry.key.removeprefix(GRANT_PREFIX)
                state.notes.append(
                    f"{policy} {scope or '(policy-wide)'}: replica {holder} holds {describe(entry.usage)}"
                )
            elif entry.key not in seen and entry.expires > now:
                state.reserved.charge([(policy, scope)], entry.usage)


def describe(usage: Usage) -> str:
    """A share in words: what its limited dimensions hold (counted as reserved)."""
    parts = [f"gpuEquivalents {usage.gpu_equivalents}"] if usage.gpu_equivalents else []
    parts += [f"slices {name} {count}" for name, count in sorted(usage.slices.items())]
    parts += [f"gpus {usage.gpus}"] if usage.gpus else []
    parts += [f"pods {usage.pods}"] if usage.pods else []
    return ", ".join(parts) or "nothing"
