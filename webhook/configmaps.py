"""Policies from ConfigMaps labelled gpu-admission.io/policy=true, listed and watched. With the
API server unreachable the webhook keeps serving what it has; it is ready after the first list."""

from __future__ import annotations

from typing import Any

from kubernetes import client

from webhook.listwatch import JSON, ListWatch
from webhook.policy_store import PolicyStore, Texts

POLICY_LABEL_KEY = "gpu-admission.io/policy"
POLICY_LABEL = f"{POLICY_LABEL_KEY}=true"


def is_policy_configmap(configmap: JSON) -> bool:
    return ((configmap.get("metadata") or {}).get("labels") or {}).get(POLICY_LABEL_KEY) == "true"


def texts_of(configmap: JSON, namespace: str = "", name: str = "") -> tuple[str, Texts]:
    """The source name and the (file, text) pairs of a policy ConfigMap, one file per data key.

    An object under admission may not carry its namespace yet: the request's is passed instead.
    """
    metadata = configmap.get("metadata") or {}
    source = f"configmap/{metadata.get('namespace') or namespace}/{metadata.get('name') or name}"
    data = configmap.get("data") or {}
    return source, tuple((f"{source}/{key}", str(data[key])) for key in sorted(data))


def configmap_watch(api: client.CoreV1Api, namespace: str, store: PolicyStore, **options: Any) -> ListWatch:
    def on_event(kind: str, obj: JSON) -> None:
        if kind == "DELETED":
            store.remove(texts_of(obj)[0])
        else:
            store.update(*texts_of(obj))

    return ListWatch(
        "configmaps",
        api.list_namespaced_config_map,
        (namespace,),
        on_list=lambda items: store.replace_all(dict(texts_of(cm) for cm in items)),
        on_event=on_event,
        label_selector=POLICY_LABEL,
        **options,
    )


def pod_watch(api: client.CoreV1Api, observe: Any, replace_all: Any, **options: Any) -> ListWatch:
    """Pods of every namespace, for quota counters (only counters are kept, never the pods)."""
    return ListWatch("pods", api.list_pod_for_all_namespaces, (), on_list=replace_all, on_event=observe, **options)
