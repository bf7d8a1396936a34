"""Policy ConfigMaps as sources: those labelled gpu-admission.io/policy=true, each data key a
file. One in the webhook's own namespace holds cluster-wide policies; one elsewhere holds
namespaced policies, which may match only their own namespace. The watch that feeds them to the
store is the cluster's (webhook.cluster.wiring)."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from webhook.sources.store import Texts

JSON = dict[str, Any]

POLICY_LABEL_KEY = "gpu-admission.io/policy"
POLICY_LABEL = f"{POLICY_LABEL_KEY}=true"
SOURCE_PREFIX = "configmap/"
# A namespace opened to namespaced policies under --labelled-namespaces.
POLICIES_LABEL = "gpu-admission.io/policies"
ENABLED = "enabled"
# The texts of a policy ConfigMap's files as they last all loaded, written by the status leader.
LAST_GOOD_ANNOTATION = "gpu-admission.io/last-good"


def is_policy_configmap(configmap: JSON) -> bool:
    metadata = configmap.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    return isinstance(labels, dict) and labels.get(POLICY_LABEL_KEY) == "true"


def policy_owner(namespace: str, policy_namespace: str) -> str | None:
    """None for a ConfigMap of cluster-wide policies (in the webhook's namespace), else its namespace."""
    return None if not policy_namespace or namespace == policy_namespace else namespace


def holds_policies(
    namespace: str, policy_namespace: str, namespaced: str, labels: Callable[[str], Mapping[str, str] | None]
) -> bool:
    """Whether a labelled ConfigMap in `namespace` is a policy source the replica reads: one in
    its own namespace always (or any, run on files), one elsewhere only where namespaced policies
    are on (`namespaced`: "all", or "labelled" and the namespace opened; one whose labels are not
    known yet is taken as opened, so its policies are linted rather than let through unread)."""
    if not policy_namespace or namespace == policy_namespace:
        return True
    if namespaced == "all":
        return True
    if namespaced != "labelled":
        return False
    found = labels(namespace)
    return found is None or found.get(POLICIES_LABEL) == ENABLED


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


def persisted_of(configmap: JSON, namespace: str = "") -> dict[str, str]:
    """The versions a replica persisted on a policy ConfigMap once they loaded (its
    `gpu-admission.io/last-good` annotation), by file: what a fresh replica keeps in force where
    the ConfigMap's own texts do not load. Unreadable, it says nothing."""
    metadata = configmap.get("metadata") or {}
    found = (metadata.get("annotations") or {}).get(LAST_GOOD_ANNOTATION)
    if not isinstance(found, str):
        return {}
    try:
        versions = json.loads(found)
    except ValueError:
        return {}
    if not isinstance(versions, dict):
        return {}
    source = texts_of(configmap, namespace)[0]
    return {f"{source}/{key}": text for key, text in versions.items() if isinstance(text, str)}
