"""Policy ConfigMaps (labelled gpu-admission.io/policy=true) listed and watched into the policy
store: the webhook's own namespace's (cluster-wide policies), a team's (namespaced), or every
namespace's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client

from webhook.cluster.watches.listwatch import ListWatch
from webhook.cluster.watches.watch_stream import JSON
from webhook.sources.configmaps import POLICY_LABEL, SOURCE_PREFIX, persisted_of, policy_owner, texts_of
from webhook.sources.store import PolicyStore


def configmap_watch(
    api: client.CoreV1Api,
    namespace: str,
    store: PolicyStore,
    all_namespaces: bool = False,
    own_namespace: str | None = None,
    **options: Any,
) -> ListWatch:
    """The policy ConfigMaps of `namespace` (with `all_namespaces`, of every namespace) into the
    store; `own_namespace`, the webhook's, holds cluster policies (default: `namespace`), any
    other a team's (webhook.cluster.watches.policy_namespaces)."""
    own = namespace if own_namespace is None else own_namespace

    def owner(obj: JSON) -> str | None:
        return policy_owner(str((obj.get("metadata") or {}).get("namespace", "")), own)

    def on_event(kind: str, obj: JSON) -> None:
        if kind == "DELETED":
            store.remove(texts_of(obj)[0])
        else:
            store.update(*texts_of(obj), namespace=owner(obj), persisted=persisted_of(obj))

    # Of the store's ConfigMap sources, this watch lists its namespace's (or, all_namespaces, all).
    within = SOURCE_PREFIX if all_namespaces else f"{SOURCE_PREFIX}{namespace}/"

    def on_list(items: Any) -> None:
        listed = list(items)  # a stream of list pages, read twice here
        sources = {source: (texts, owner(cm)) for cm in listed for source, texts in [texts_of(cm)]}
        store.replace_all(sources, within=within, persisted={texts_of(cm)[0]: persisted_of(cm) for cm in listed})

    lister: Callable[..., Any] = api.list_namespaced_config_map
    args: tuple[str, ...] = (namespace,)
    if all_namespaces:
        lister, args = api.list_config_map_for_all_namespaces, ()
    name = "configmaps" if namespace == own else f"configmaps/{namespace}"
    return ListWatch(name, lister, args, on_list, on_event, label_selector=POLICY_LABEL, **options)
