"""A strict quota's Lease on the wire: read, written at a resourceVersion, and the expired
ones deleted, through the CoordinationV1Api, each call bounded by TIMEOUT. What is kept of what
was read, and when an entry counts, is webhook.cluster.quota.leases.ledger_leases'."""

from __future__ import annotations

import logging
from typing import Any

import orjson
from kubernetes.client.exceptions import ApiException

from webhook.cluster.quota.leases.lease_entries import (
    LEDGER_LABEL,
    RESERVATIONS,
    Entry,
    Key,
    LeaseState,
    encode_entries,
    lease_name,
    parse_lease,
)

log = logging.getLogger("gpu_admission.quota")
TIMEOUT = (1.0, 2.0)  # connect, read: well inside the webhook's own timeout


class LedgerUnavailable(RuntimeError):
    """The Lease could not be read or written: a strict quota cannot be judged, so it denies."""


class LeaseWire:
    """The ledger Leases in `namespace`, written by this replica (`identity`, their holder)."""

    def __init__(self, api: Any, namespace: str, identity: str) -> None:
        self.api = api  # a CoordinationV1Api
        self.namespace = namespace
        self.identity = identity

    def read(self, key: Key) -> LeaseState:
        """The Lease of `key` as the API server has it (none yet: version \"\")."""
        try:
            response = self.api.read_namespaced_lease(
                lease_name(key), self.namespace, _preload_content=False, _request_timeout=TIMEOUT
            )
        except ApiException as error:
            if error.status == 404:
                return LeaseState("")
            raise LedgerUnavailable(f"{lease_name(key)}: {error.status} {error.reason}") from None
        except Exception as error:  # refused, reset, timed out
            raise LedgerUnavailable(f"{lease_name(key)}: {type(error).__name__}") from None
        return parse_lease(orjson.loads(response.data))

    def write(self, key: Key, version: str, entries: list[Entry]) -> LeaseState:
        """The Lease of `key` written with `entries`, at `version` (\"\": created); as written."""
        policy, scope = key
        metadata: dict[str, Any] = {
            "name": lease_name(key),
            "namespace": self.namespace,
            "labels": {LEDGER_LABEL: "true"},
            "annotations": {
                "gpu-admission.io/policy": policy,
                "gpu-admission.io/scope": scope or "(policy-wide)",
                RESERVATIONS: encode_entries(entries),
            },
        }
        body = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": metadata}
        body["spec"] = {"holderIdentity": self.identity}
        if version:
            metadata["resourceVersion"] = version
            response = self.api.replace_namespaced_lease(lease_name(key), self.namespace, body, _preload_content=False)
        else:
            response = self.api.create_namespaced_lease(self.namespace, body, _preload_content=False)
        return parse_lease(orjson.loads(response.data))

    def sweep(self, horizon: float) -> int:
        """Delete the ledger Leases whose every reservation expired by `horizon` (wall clock, by
        their own `expires`: the caller's grace covers replicas' skew), each on the version
        read (a reservation written meanwhile makes the delete a 409, and the Lease stays). A
        replica still holding a deleted version gets a 404 on its next write, reads again and
        creates it afresh. Returns how many were deleted; run by one replica (the status leader)."""
        listed = self.api.list_namespaced_lease(
            self.namespace, label_selector=f"{LEDGER_LABEL}=true", _preload_content=False, _request_timeout=TIMEOUT
        )
        deleted = 0
        for lease in orjson.loads(listed.data).get("items") or []:
            state = parse_lease(lease)
            if any(entry.expires > horizon for entry in state.entries):
                continue
            name = lease["metadata"]["name"]
            try:
                self.api.delete_namespaced_lease(
                    name,
                    self.namespace,
                    body={"preconditions": {"resourceVersion": state.version}},
                    _request_timeout=TIMEOUT,
                )
                deleted += 1
            except ApiException as error:
                if error.status not in (404, 409):
                    raise
        if deleted:
            log.info("strict quota leases deleted", extra={"fields": {"deleted": deleted}})
        return deleted
