"""GPUPolicy objects (cluster-scoped, gpu-admission.io/v1alpha1) listed and watched into the policy
store beside the ConfigMaps, each then told on its status how it loaded. Optional: a cluster
without the CustomResourceDefinition has none, and is asked again later (the CRD may come)."""

from __future__ import annotations

import functools
from typing import Any

from kubernetes import client

from webhook.cluster.api.gpupolicy_status import GPUPolicyStatusWriter
from webhook.cluster.watches.listwatch import ListWatch
from webhook.cluster.watches.watch_stream import JSON
from webhook.sources.gpupolicy_objects import GROUP, PLURAL, SOURCE_PREFIX, VERSION, name_of, persisted_of, texts_of
from webhook.sources.store import PolicyStore


def gpupolicy_watch(
    api: client.CustomObjectsApi, store: PolicyStore, status: GPUPolicyStatusWriter, **options: Any
) -> ListWatch:
    def tell(source: str, obj: JSON) -> None:
        status.observe(obj, store.problems_of(source), *store.in_force(source, source))

    def on_event(kind: str, obj: JSON) -> None:
        source, texts = texts_of(obj)
        if kind == "DELETED":
            store.remove(source)
            status.forget(name_of(obj))
            return
        store.update(source, texts, None, persisted=persisted_of(obj))
        tell(source, obj)

    def on_list(items: Any) -> None:
        # Each object rendered as its document once: (source, texts, object).
        listed = [(*texts_of(obj), obj) for obj in items if name_of(obj)]
        sources = {source: (texts, None) for source, texts, _ in listed}
        store.replace_all(sources, within=SOURCE_PREFIX, persisted={s: persisted_of(o) for s, _, o in listed})
        for source, _, obj in listed:
            tell(source, obj)

    lister = functools.partial(api.list_cluster_custom_object, GROUP, VERSION, PLURAL)
    return ListWatch("gpupolicies", lister, (), on_list, on_event, optional=True, **options)
