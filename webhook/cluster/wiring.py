"""The webhook connected to its cluster: policy ConfigMaps (with all namespaces: every namespace's)
and GPUPolicy objects, pods (quota counters), namespaces (labels for namespaceSelector), nodes (free GPU capacity),
ResourceQuotas (on whole GPUs, that a MIG rewrite sidesteps) and DRA claims (what pods naming
them can allocate), each listed and watched into the
replica's view; strict quotas' shared Leases; status Events and annotations on policy ConfigMaps.
With the API server unreachable the webhook keeps serving what it has.

`/readyz` turns ready once the policy set is loaded and every watch has listed once. Pods are
listed only once policies and namespaces are; a new policy set charges them again from what the
counters keep, and lists them again only if it matches on what they do not keep (a pod label
no quota policy selected on before, a new CEL condition), so the counters are always charged
by the policies in force.
"""

from __future__ import annotations

import functools
import logging
import threading
from collections.abc import Callable
from typing import Any

import orjson
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from certs.lease import LeaseLock
from webhook.cluster.api.gpupolicy_status import GPUPolicyStatusWriter
from webhook.cluster.api.leadership import Leadership
from webhook.cluster.api.policy_status import PolicyStatusReporter
from webhook.cluster.audit.background_audit import BackgroundAudit
from webhook.cluster.ladders import LadderPublisher
from webhook.cluster.live import ClusterLink, LiveCluster
from webhook.cluster.quota.counting.reservations import PodRef, updated_pod
from webhook.cluster.quota.leases.lease_entries import LEDGER_LABEL
from webhook.cluster.quota.quota_admission import CONFIRM_AFTER
from webhook.cluster.quota.tracking import strict_tracking
from webhook.cluster.watches.gpupolicies import gpupolicy_watch
from webhook.cluster.watches.listwatch import ListWatch
from webhook.cluster.watches.pod_groups import GROUP as POD_GROUPS_API
from webhook.cluster.watches.pod_groups import PLURAL as POD_GROUPS
from webhook.cluster.watches.pod_groups import VERSIONS as POD_GROUP_VERSIONS
from webhook.cluster.watches.policy_configmaps import configmap_watch
from webhook.cluster.watches.policy_namespaces import PolicyNamespaces
from webhook.cluster.watches.watch_stream import JSON
from webhook.events import (
    ClaimsChanged,
    DeviceClassesChanged,
    NamespaceLabelsChanged,
    PodGroupsChanged,
    PolicySetInForce,
    SourceLoaded,
    SourceProblems,
    SourceRetried,
)
from webhook.service import Loop, Service
from webhook.sources.store import PolicyStore

NAMESPACE_TIMEOUT = 2.0
STATUS_LEASE = "gpu-admission-status"  # who reports policy status on ConfigMaps
STATUS_LEASE_SECONDS = 30.0
LEASE_SWEEP_SECONDS = 60.0  # how often the leader looks for strict quota Leases to delete
log = logging.getLogger("gpu_admission.watches")


def _both(first: Callable[[str, JSON], None], second: Callable[[str, JSON], None]) -> Callable[[str, JSON], None]:
    def observe(kind: str, raw: JSON) -> None:
        first(kind, raw)
        second(kind, raw)

    return observe


def _both_lists(first: Callable[[Any], None], second: Callable[[Any], None]) -> Callable[[Any], None]:
    def listed(items: Any) -> None:
        kept = list(items)
        first(iter(kept))
        second(iter(kept))

    return listed


def cluster_link(
    api_client: client.ApiClient,
    namespace: str,
    identity: str,
    strict_ttl: float = 30.0,
    strict_shares: bool = True,
    confirm_after: float = CONFIRM_AFTER,
) -> ClusterLink:
    """How a replica reaches its cluster beyond its watches (webhook.cluster.live.ClusterLink):
    namespaces and workloads read on demand, and quota tracking whose strict budgets live in
    Leases of `namespace` (the webhook's own). `strict_ttl`: how long a strict quota's
    reservations and shares count after they are read; `strict_shares`: strict budgets lend
    shares to replicas (off: a Lease write a pod); `confirm_after`: seconds the pod watch has to
    show an admitted pod before it is asked for. Makes no request: the first is the watches'."""
    core = client.CoreV1Api(api_client)
    coordination = client.CoordinationV1Api(api_client)
    return ClusterLink(
        read_namespace=lambda name: _read_namespace(core, name),
        read_workload=_workload_reader(client.CustomObjectsApi(api_client)),
        tracking=strict_tracking(coordination, namespace, identity, strict_ttl, strict_shares, confirm_after),
    )


class ConnectedReplica:
    """A replica's part of the cluster, built whole from the holder's view (itself built over a
    `cluster_link`) and the policy store: the watches that feed the view and the store, what
    reports status and leads, the ladder publisher, the background audit, the keeper of quota
    shares and the sweep of forged reservations. Who reacts to what is subscribed here
    (webhook.events). `start` starts the parts in order, pods last, once policies, namespaces
    and DRA objects are known; `stop` stops them in the reverse order. `namespace`: the webhook's
    own; `audit_every`: the leader's background audit period (None: no audit)."""

    def __init__(
        self,
        view: LiveCluster,
        store: PolicyStore,
        namespace: str,
        api_client: client.ApiClient,
        identity: str,
        all_namespaces: bool = False,
        labelled_namespaces: bool = False,
        audit_every: float | None = None,
        **options: Any,
    ) -> None:
        core = client.CoreV1Api(api_client)
        custom = client.CustomObjectsApi(api_client)
        events, tracking = view.events, view.tracking
        if tracking.budgets.shared is None:
            raise ValueError("a connected replica's view is built over its cluster_link")
        ledger = tracking.budgets.shared.leases
        keeper = self._keeper = tracking.keeper

        # Status: the leader tells each policy source how it loaded, and keeps the Leases clean.
        status_lease = LeaseLock(api_client, namespace, STATUS_LEASE, identity, STATUS_LEASE_SECONDS)
        reporter = PolicyStatusReporter(core, identity, leads=lambda: status_lease.held)
        gpupolicy_status = GPUPolicyStatusWriter(custom, leads=lambda: status_lease.held)
        events.subscribe(SourceProblems, lambda loaded: reporter(loaded.source, loaded.problems))
        events.subscribe(SourceLoaded, lambda loaded: reporter.persist(loaded.source, loaded.texts))
        events.subscribe(
            SourceRetried,
            lambda retried: gpupolicy_status.revise(
                retried.source, retried.problems, *store.in_force(retried.source, retried.source)
            ),
        )

        def on_lead() -> None:
            reporter.reconcile()
            gpupolicy_status.reconcile()

        # The status leader also deletes strict quota Leases left with expired reservations only.
        chores = ((LEASE_SWEEP_SECONDS, ledger.sweep),)
        leadership = Leadership(status_lease, STATUS_LEASE_SECONDS / 3, on_lead=on_lead, chores=chores)
        auditor = BackgroundAudit(store.snapshot, leading=lambda: status_lease.held, every=audit_every or 0)
        if audit_every:
            events.subscribe(PolicySetInForce, lambda _: auditor.policy_set_changed())

        # The templates ladders want follow the policies, the namespaces they select and the classes.
        templates = client.ResourceV1Api(api_client).create_namespaced_resource_claim_template
        publisher = self._publisher = LadderPublisher(
            view,
            view.policy_set,
            lambda ns, body: templates(ns, body, _request_timeout=(2.0, 5.0)),  # type: ignore[arg-type]
            namespace,
        )
        events.subscribe(PolicySetInForce, publisher.wake)
        events.subscribe(NamespaceLabelsChanged, publisher.wake)
        events.subscribe(DeviceClassesChanged, publisher.wake)

        namespaces = view.namespaces
        namespaces_listed: Callable[[Any], None] = namespaces.replace_all
        namespace_seen: Callable[[str, JSON], None] = namespaces.observe
        teams: list[PolicyNamespaces] = []
        if labelled_namespaces:  # team policies: a ConfigMap watch per namespace opened to them
            teams.append(
                PolicyNamespaces(
                    lambda team: configmap_watch(core, team, store, own_namespace=namespace, **options),
                    store,
                    namespace,
                )
            )
            namespaces_listed, namespace_seen = (
                _both_lists(namespaces.replace_all, teams[0].replace_all),
                _both(namespaces.observe, teams[0].observe),
            )
        dra = self._dra = claim_watches(view, api_client, **options)
        self._configmaps = configmap_watch(core, namespace, store, all_namespaces, **options)
        self._gpupolicies = gpupolicy_watch(custom, store, gpupolicy_status, **options)
        self._namespaces = ListWatch(
            "namespaces", core.list_namespace, (), namespaces_listed, namespace_seen, **options
        )
        nodes = ListWatch(
            "nodes",
            core.list_node,
            (),
            _both_lists(view.nodes.replace_all, view.nodes_or_slices_changed),
            _both(_both(view.nodes.observe, auditor.node_seen), view.nodes_or_slices_changed),
            **options,
        )
        quotas = ListWatch(
            "resourcequotas",
            core.list_resource_quota_for_all_namespaces,
            (),
            view.quotas.replace_all,
            view.quotas.observe,
            **options,
        )
        self._leases = ListWatch(
            "leases",
            client.CoordinationV1Api(api_client).list_namespaced_lease,
            (namespace,),
            ledger.replace_all,
            ledger.observe,
            label_selector=f"{LEDGER_LABEL}=true",
            **options,
        )
        counting = view.counting
        pods = self._pods = ListWatch(
            "pods", core.list_pod_for_all_namespaces, (), counting.replace_all, counting.observe, **options
        )
        self.watches: tuple[ListWatch, ...] = (
            self._configmaps,
            self._gpupolicies,
            self._namespaces,
            nodes,
            quotas,
            *dra,
            self._leases,
            pods,
        )

        # The pods are charged by the policies in force: again from what the counters keep, or
        # listed again where the new set reads what they do not keep.
        def recharge_or_relist(_: PolicySetInForce) -> None:
            if not counting.recharge():
                pods.relist()
            if keeper is not None and pods.synced.is_set():  # shares of budgets the set changed, before admissions ask
                keeper.warm_soon()

        events.subscribe(PolicySetInForce, recharge_or_relist)
        # A pod's charge includes what its claims can allocate (once for all the pods of a group
        # that shares one) and what their classes can select.
        events.subscribe(ClaimsChanged, lambda _: pods.relist())
        events.subscribe(PodGroupsChanged, lambda _: pods.relist())
        events.subscribe(DeviceClassesChanged, lambda _: pods.relist())

        sweep = ForgedReservationSweep(view, pods, core)
        # Started in this order, stopped in the reverse; the pod watch is started apart, last.
        self.services: tuple[Service, ...] = (
            leadership,
            *((keeper,) if keeper is not None else ()),
            *((auditor,) if audit_every else ()),
            *teams,
            publisher,
            *self.watches[:-1],
        )
        self._sweep = sweep

    def not_ready(self) -> str:
        """Why the replica's view of its cluster cannot be trusted yet ("" once every watch has
        listed and none has stopped): a readiness gate of the holder (webhook.state)."""
        for watch in self.watches:
            if not watch.healthy:
                return f"watch {watch.name} {watch.error}"
            if not watch.synced.is_set():
                return f"watch {watch.name} has not listed yet"
        return ""

    def start(self) -> None:
        for service in self.services:
            service.start()
        threading.Thread(target=self._pods_once_the_rest_is_known, name="watch-pods-start", daemon=True).start()
        self._sweep.start()

    def _pods_once_the_rest_is_known(self) -> None:
        # Pods are charged by the policies (and namespace labels) in force when they are counted.
        for watch in (self._configmaps, self._gpupolicies, self._namespaces, *self._dra):
            watch.synced.wait()  # claims, templates and classes say what pods are charged
        self._publisher.wake()  # the templates ladders want, now that the cluster's are known
        self._pods.start()
        if self._keeper is not None:  # shares of the strict budgets in use, before admissions ask
            self._leases.synced.wait()
            self._pods.synced.wait()
            self._keeper.warm_soon()

    def stop(self, wait: bool = True) -> None:
        """Every part told to stop, in the reverse order of starting; then, with `wait`, each
        waited for (so one slow part does not hold the others' stop back)."""
        parts = (*self.services, self._pods, self._sweep)[::-1]
        for part in parts:
            part.stop(wait=False)
        if wait:
            for part in parts:
                part.stop()


def connect(
    view: LiveCluster,
    gates: list[Callable[[], str]],
    store: PolicyStore,
    namespace: str,
    api_client: client.ApiClient,
    identity: str,
    **options: Any,
) -> ConnectedReplica:
    """The replica's part of the cluster built over `view` (built with `cluster_link`), made one of
    the readiness `gates` of its holder (webhook.state.EngineHolder.gates), and started."""
    replica = ConnectedReplica(view, store, namespace, api_client, identity, **options)
    gates.append(replica.not_ready)
    replica.start()
    return replica


def claim_watches(view: LiveCluster, api_client: client.ApiClient, **options: Any) -> list[ListWatch]:
    """DRA ResourceClaims, ResourceClaimTemplates, DeviceClasses, ResourceSlices, PodGroups and
    DeviceTaintRules (resource.k8s.io/v1, Kubernetes 1.34 on, taint rules 1.37; optional: an API
    server without them has none). The
    claim watch feeds two keepers: what each claim asks for, and the devices its allocation holds."""
    resource = client.ResourceV1Api(api_client)
    kinds = (
        ("resourceclaims", resource.list_resource_claim_for_all_namespaces, False),
        ("resourceclaimtemplates", resource.list_resource_claim_template_for_all_namespaces, True),
    )
    claims = []
    for name, lister, template in kinds:
        listed, seen = view.claims.lister(template), view.claims.observer(template)
        if not template:  # what a claim's allocation holds is capacity taken
            listed, seen = _both_lists(listed, view.slices.claims_listed), _both(seen, view.slices.claim_seen)
        claims.append(ListWatch(name, lister, (), listed, seen, optional=True, **options))
    classes = view.device_class_cache
    device_classes = ListWatch(
        "deviceclasses",
        resource.list_device_class,
        (),
        classes.replace_all,
        classes.observe,
        optional=True,
        **options,
    )
    slices = ListWatch(
        "resourceslices",
        resource.list_resource_slice,
        (),
        _both_lists(view.slices.slices_listed, view.nodes_or_slices_changed),
        _both(view.slices.slice_seen, view.nodes_or_slices_changed),
        optional=True,
        **options,
    )
    # Devices a DeviceTaintRule keeps the scheduler off are no free capacity (resource.k8s.io/v1,
    # GA in Kubernetes 1.37; earlier servers serve none at v1).
    taints = ListWatch(
        "devicetaintrules",
        resource.list_device_taint_rule,
        (),
        view.slices.taint_rules_listed,
        view.slices.taint_rule_seen,
        optional=True,
        **options,
    )
    # The claims PodGroups make for all their pods (scheduling.k8s.io, served from 1.36 behind a
    # feature gate): each version served is listed apart.
    custom = client.CustomObjectsApi(api_client)
    groups = [
        ListWatch(
            f"podgroups.{version}",
            functools.partial(custom.list_cluster_custom_object, POD_GROUPS_API, version, POD_GROUPS),
            (),
            view.pod_groups.lister(version),
            view.pod_groups.observer(version),
            optional=True,
            **options,
        )
        for version in POD_GROUP_VERSIONS
    ]
    return [*claims, device_classes, slices, taints, *groups]


class ForgedReservationSweep:
    """Once the pod watch is live, reservations it has not shown the pod of are asked about, every
    `interval` seconds, until stopped (or the pod watch is)."""

    def __init__(self, view: LiveCluster, pods: ListWatch, core: client.CoreV1Api, interval: float = 1.0) -> None:
        self._view, self._pods, self._core = view, pods, core
        self._loop = Loop(
            "reservation-sweep",
            self._sweep,
            interval,
            lambda: log.exception("reservation sweep failed"),
            until=lambda: pods.stopping,
        )

    def start(self) -> None:
        self._loop.start()

    def stop(self, wait: bool = True) -> None:
        self._loop.stop(wait)

    def _sweep(self, _: bool) -> None:
        if self._pods.synced.is_set() and self._pods.healthy:
            self._view.tracking.admission.sweep_forged(lambda ref: _pod_exists(self._core, ref))


def _pod_exists(api: client.CoreV1Api, ref: PodRef) -> bool | None:
    """Whether the API server has the pod (the same one: its uid); None when it cannot be asked."""
    try:
        response = api.read_namespaced_pod(ref.name, ref.namespace, _preload_content=False, _request_timeout=(2.0, 5.0))
    except ApiException as error:
        return False if error.status == 404 else None
    except Exception:  # refused, reset, timed out: ask again later
        return None
    uid = (orjson.loads(response.data).get("metadata") or {}).get("uid")  # type: ignore[attr-defined]
    return not ref.uid or uid == (updated_pod(ref.uid) or ref.uid)


def _read_namespace(api: client.CoreV1Api, name: str) -> dict[str, Any] | None:
    try:
        response = api.read_namespace(name, _preload_content=False, _request_timeout=NAMESPACE_TIMEOUT)
    except ApiException as error:
        if error.status == 404:
            return None
        raise
    return dict(orjson.loads(response.data))  # type: ignore[attr-defined]


def _workload_reader(api: client.CustomObjectsApi) -> Callable[[str, str, str, str, str], dict[str, Any] | None]:
    """GET one workload by its group, version and plural (a Deployment's path is a custom
    object's: /apis/apps/v1/namespaces/NS/deployments/NAME); None where it is gone."""

    def read(group: str, version: str, plural: str, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            response = api.get_namespaced_custom_object(
                group, version, namespace, plural, name, _preload_content=False, _request_timeout=NAMESPACE_TIMEOUT
            )
        except ApiException as error:
            if error.status == 404:
                return None
            raise
        return dict(orjson.loads(response.data))  # type: ignore[attr-defined]

    return read
