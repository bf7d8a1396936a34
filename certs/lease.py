"""A Lease held by one replica at a time: the thin I/O around certs.leader.

`try_lead()` reads the Lease, asks certs.leader whether this replica may hold it, and if so
writes its claim at the resourceVersion it read, so two replicas that both think they may
cannot both succeed (the second gets 409 Conflict). `release()` gives it up on the way out, so
the next replica need not wait the Lease's duration.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable
from typing import Any

import orjson
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from certs.leader import LeaseRecord, Observed, may_lead, observe

TIMEOUT = (2.0, 5.0)


def _wall() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class LeaseLock:
    def __init__(
        self,
        api_client: client.ApiClient | None,
        namespace: str,
        name: str,
        identity: str,
        duration: float,
        monotonic: Callable[[], float] = time.monotonic,
        wall: Callable[[], dt.datetime] = _wall,
    ) -> None:
        self.api: Any = client.CoordinationV1Api(api_client)
        self.namespace = namespace
        self.name = name
        self.identity = identity
        self.duration = duration
        self.monotonic = monotonic
        self.wall = wall  # only written into renewTime, for people reading the Lease
        self._observed: Observed | None = None
        self._held_until = float("-inf")  # our monotonic clock: when our last claim runs out
        self._lock = threading.Lock()

    @property
    def held(self) -> bool:
        """Whether this replica holds the Lease now (its last claim has not run out)."""
        return self.monotonic() < self._held_until

    def try_lead(self) -> bool:
        """Take or renew the Lease if this replica may; False if another holds it (or won the race).
        API failures other than a lost race raise: the caller retries later."""
        with self._lock:
            started = self.monotonic()
            lease = self._read()
            spec = (lease or {}).get("spec") or {}
            record = None
            if lease is not None:
                holder, renewed = str(spec.get("holderIdentity") or ""), str(spec.get("renewTime") or "")
                record = LeaseRecord(holder, renewed, float(spec.get("leaseDurationSeconds") or 0))
            self._observed = observe(self._observed, record, started)
            if not may_lead(self._observed, self.identity, started):
                self._held_until = float("-inf")
                return False
            ours = record is not None and record.holder == self.identity
            stamp = _stamp(self.wall())
            claim: dict[str, Any] = {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": int(self.duration),
                "renewTime": stamp,
                "acquireTime": spec.get("acquireTime") if ours else stamp,
                "leaseTransitions": int(spec.get("leaseTransitions") or 0) + (0 if ours or record is None else 1),
            }
            if not self._write(lease, claim):
                self._held_until = float("-inf")
                return False
            # Counted from before the read: the other replicas' clocks start when they see the write.
            self._held_until = started + self.duration
            return True

    def release(self) -> None:
        """Give the Lease up if this replica holds it (best effort: it runs out anyway)."""
        with self._lock:
            if not self.held:
                return
            self._held_until = float("-inf")
            try:
                lease = self._read()
                spec = (lease or {}).get("spec") or {}
                if lease is not None and spec.get("holderIdentity") == self.identity:
                    self._write(lease, {**spec, "holderIdentity": "", "renewTime": _stamp(self.wall())})
            except Exception:  # noqa: BLE001  (on the way out: the Lease runs out by itself)
                pass

    def _read(self) -> dict[str, Any] | None:
        try:
            response = self.api.read_namespaced_lease(
                self.name, self.namespace, _preload_content=False, _request_timeout=TIMEOUT
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return dict(orjson.loads(response.data))

    def _write(self, lease: dict[str, Any] | None, spec: dict[str, Any]) -> bool:
        body: dict[str, Any] = {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "spec": spec}
        options = {"_preload_content": False, "_request_timeout": TIMEOUT}
        try:
            if lease is None:
                body["metadata"] = {"name": self.name, "namespace": self.namespace}
                self.api.create_namespaced_lease(self.namespace, body, **options)
            else:
                body["metadata"] = lease["metadata"]  # its resourceVersion: another claim in between fails
                self.api.replace_namespaced_lease(self.name, self.namespace, body, **options)
        except ApiException as error:
            if error.status == 409:
                return False
            raise
        return True


def _stamp(moment: dt.datetime) -> str:
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
