"""GPUPolicy objects read once, for the commands that judge with the cluster's policies
(`audit --live`, `quota`): every object, or none where the API server serves no GPUPolicy (its
CRD is not installed). Other refusals (403) are the caller's to say."""

from __future__ import annotations

from typing import Any

import orjson
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from webhook.sources.gpupolicy_objects import GROUP, PLURAL, VERSION, texts_of

TIMEOUT = (2.0, 30.0)


def read_gpupolicy_texts(api: client.ApiClient) -> list[tuple[str, str]]:
    """(file, text) of every GPUPolicy object, as the webhook's store loads them."""
    custom = client.CustomObjectsApi(api)
    try:
        listed: Any = custom.list_cluster_custom_object(
            GROUP, VERSION, PLURAL, _preload_content=False, _request_timeout=TIMEOUT
        )
    except ApiException as error:
        if error.status == 404:
            return []
        raise
    items = orjson.loads(listed.data).get("items") or []
    return [pair for obj in items for pair in texts_of(obj)[1]]
