"""Policies from ConfigMaps labelled gpu-admission.io/policy=true, listed and watched: in the
webhook's namespace (cluster-wide policies) and, if asked, in every namespace (namespaced ones,
which may match only their own namespace). With the API server unreachable the webhook keeps
serving what it has; it is ready after the first list."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kubernetes import client

from webhook.listwatch import JSON, ListWatch
from webhook.policy_store import PolicyStore, Texts

POLICY_LABEL_KEY = "gpu-admission.io/policy"
POLICY_LABEL = f"{POLICY_LABEL_KEY}=true"
SOURCE_PREFIX = "configmap/"


def is_policy_configmap(configmap: JSON) -> bool:
    return ((configmap.get("metadata") or {}).get("labels") or {}).get(POLICY_LABEL_KEY) == "true"


def policy_owner(namespace: str, policy_namespace: str) -> str | None:
    """None for a ConfigMap of cluster-wide policies (in the webhook's namespace), else its namespace."""
    return None if not policy_namespace or namespace == policy_namespace else namespace


def texts_of(configmap: JSON, namespace: str = "", name: str = "") -> tuple[str, Texts]:
    """The source name and the (file, text) pairs of a policy ConfigMap, one file per data key.

    An object under admission may not carry its namespace yet: the request's is passed instead.
    """
    metadata = configmap.get("metadata") or {}
    source = f"{SOURCE_PREFIX}{metadata.get('namespace') or namespace}/{metadata.get('name') or name}"
    data = configmap.get("data") or {}
    return source, tuple((f"{source}/{key}", str(data[key])) for key in sorted(data))


def configmap_source(source: str) -> tuple[str, str] | None:
    """(namespace, name) of a ConfigMap source name, None for other sources."""
    if not source.startswith(SOURCE_PREFIX):
        return None
    namespace, _, name = source.removeprefix(SOURCE_PREFIX).partition("/")
    return namespace, name


def configmap_watch(
    api: client.CoreV1Api, namespace: str, store: PolicyStore, all_namespaces: bool = False, **options: Any
) -> ListWatch:
    """`namespace` is the webhook's own; with `all_namespaces`, every namespace is watched."""

    def owner(obj: JSON) -> str | None:
        return policy_owner(str((obj.get("metadata") or {}).get("namespace", "")), namespace)

    def on_event(kind: str, obj: JSON) -> None:
        if kind == "DELETED":
            store.remove(texts_of(obj)[0])
        else:
            store.update(*texts_of(obj), namespace=owner(obj))

    def on_list(items: Any) -> None:
        store.replace_all({source: (texts, owner(cm)) for cm in items for source, texts in [texts_of(cm)]})

    lister: Callable[..., Any] = api.list_namespaced_config_map
    args: tuple[str, ...] = (namespace,)
    if all_namespaces:
        lister, args = api.list_config_map_for_all_namespaces, ()
    return ListWatch("configmaps", lister, args, on_list, on_event, label_selector=POLICY_LABEL, **options)
