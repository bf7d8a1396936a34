"""GPUPolicy objects as sources: the cluster-scoped custom resource `gpupolicies.gpu-admission.io`
(deploy/base/gpupolicy-crd.yaml), one source per object, one file per source. An object is read
as the policy document it is (apiVersion, kind, metadata.name, spec) and loaded by the same loader
as a ConfigMap's file: one loader and one verdict for both. Objects are cluster-wide policies, like
the ConfigMaps of the webhook's own namespace.

The last version that loaded is kept on the object's status (`status.lastGood`, written by the
status leader, webhook.cluster.api.gpupolicy_status): a replica that starts while an object is
broken keeps that version in force, as a ConfigMap's `gpu-admission.io/last-good` does.
"""

from __future__ import annotations

from typing import Any

import yaml

from webhook.sources.store import Texts

JSON = dict[str, Any]

GROUP = "gpu-admission.io"
VERSION = "v1alpha1"
PLURAL = "gpupolicies"
KIND = "GPUPolicy"
SOURCE_PREFIX = "gpupolicy/"


def name_of(obj: JSON) -> str:
    metadata = obj.get("metadata")
    return str(metadata.get("name") or "") if isinstance(metadata, dict) else ""


def source_of(name: str) -> str:
    return f"{SOURCE_PREFIX}{name}"


def gpupolicy_name(source: str) -> str | None:
    """The object's name of a GPUPolicy source name, None for other sources."""
    return source.removeprefix(SOURCE_PREFIX) if source.startswith(SOURCE_PREFIX) else None


def document_text(obj: JSON, name: str = "") -> str:
    """The object as the policy document the loader reads: what it says, not what the API server
    keeps beside it (status, managed fields, uid). An object under admission may not carry its
    name yet (generateName): the request's is passed instead."""
    document = {
        "apiVersion": obj.get("apiVersion", f"{GROUP}/{VERSION}"),
        "kind": obj.get("kind", KIND),
        "metadata": {"name": name_of(obj) or name},
        "spec": obj.get("spec"),
    }
    return yaml.safe_dump(document, sort_keys=False, default_flow_style=False, allow_unicode=True)


def texts_of(obj: JSON, name: str = "") -> tuple[str, Texts]:
    """The source name and its one (file, text) pair."""
    source = source_of(name_of(obj) or name)
    return source, ((source, document_text(obj, name)),)


def persisted_of(obj: JSON) -> dict[str, str]:
    """The version the status leader kept on the object once it loaded, by file; none where the
    status holds none (or not as text)."""
    status = obj.get("status")
    last_good = status.get("lastGood") if isinstance(status, dict) else None
    if not isinstance(last_good, str) or not last_good:
        return {}
    return {source_of(name_of(obj)): last_good}
