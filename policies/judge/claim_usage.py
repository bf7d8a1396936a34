"""A pod's DRA claims, and its extended resources that DeviceClasses serve, charged in the units
quotas count.

Every claim the pod names is allocated when it is scheduled, whichever containers use it, so each
is charged: what its requests can allocate (policies.gpu.claims, resolved against the cluster's
DeviceClasses), each request at the most of its alternatives, dimension by dimension, where the
pod may run. What cannot be known is said, not guessed: a claim the cluster does not have
(`missing`), and requests for all the devices a selector admits (`unbounded`), which no budget
can hold.
"""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction

from policies.gpu.catalog import UNKNOWN_NODE, Catalog, is_network_resource
from policies.gpu.claims import ClaimDemand, ClaimRequest, DeviceAsk
from policies.gpu.device_cel import ANY_DEVICE
from policies.gpu.device_classes import DeviceClasses
from policies.gpu.device_reach import DeviceReach
from policies.gpu.placement import admitted
from policies.judge.device_charge import demand_charge, request_charge
from policies.judge.usage import EMPTY, Usage, charged, effective_gpu_requests
from policies.judge.verdict import Verdict
from policies.model.policy import Action, GPUPolicy
from policies.review.cluster import ClusterState
from policies.review.containers import GPU_RESOURCE_DOMAIN
from policies.review.pod import ClaimRef, PodView

SharedClaims = tuple[tuple[str, Usage], ...]  # ("namespace/name", what the claim can allocate)


@dataclass(frozen=True, slots=True)
class ClaimsCharge:
    """What a pod's claims can allocate: its own (claims made for it from templates, extended
    resources served by classes) and the ResourceClaims it names, which other pods may name too
    (`shared`: a budget charges each once, however many of its pods name it)."""

    own: Usage = EMPTY
    shared: SharedClaims = ()
    missing: tuple[ClaimRef, ...] = ()
    unbounded: tuple[tuple[ClaimRef, str], ...] = ()  # (claim, request name)
    demands: tuple[tuple[ClaimRef, ClaimDemand], ...] = ()  # the claims found, for the gates

    @property
    def usage(self) -> Usage:
        """All the pod can get through its claims (per-pod caps, gates, what it reserves)."""
        return self.apart(())

    def apart(self, held: Collection[str]) -> Usage:
        """What the claims add to a budget that charges the named claims in `held` already."""
        total = self.own
        for key, usage in self.shared:
            if key not in held:
                total = total + usage
        return total


NO_CLAIMS = ClaimsCharge()


def claim_key(namespace: str, name: str) -> str:
    """How budgets tell a named ResourceClaim from another: claims are namespaced."""
    return f"{namespace}/{name}"


def group_claim_key(namespace: str, group: str, entry: str) -> str:
    """How budgets tell the claim a PodGroup makes for all its pods (no claim name is a DNS
    label with a space, so none is taken for another)."""
    return f"{namespace}/PodGroup {group} {entry}"


def awaiting_key(namespace: str, template: str, pod: str) -> str:
    """How budgets remember a pod waiting for a claim to be made from a template the cluster does
    not hold (deleted under it before its claim was made, as under a pod waiting for its
    PodGroup): the template made again is judged against those budgets, once a pod waiting."""
    return f"{awaiting_prefix(namespace, template)}{pod}"


def awaiting_prefix(namespace: str, template: str) -> str:
    return f"{namespace}/ResourceClaimTemplate {template} for "


def _shared_key(pod: PodView, ref: ClaimRef, namespace: str, cluster: ClusterState) -> str | None:
    """The key budgets charge a pod's claim under where other pods may hold the same claim; None
    for a claim that is the pod's alone. A claim by name is keyed by its name. A template claim
    of a pod in a PodGroup that makes that claim for all its pods (the same name and template,
    as the resourceclaim controller matches them) is the group's one claim: keyed by the name the
    group's status gives it, or the pod's own status, or the group's entry until either is
    written. A pod of a group holding a made claim (its status names it) whose group is not known
    (deleted, or not yet seen) is keyed by that claim: a claim made for the pod alone is unique to
    it, one made for the group is charged once. A claim made for the pod before its group made
    one (the two statuses differ) is the pod's."""
    if not ref.template:
        return claim_key(namespace, ref.name)
    if not pod.group:
        return None
    claims = cluster.group_claims(namespace, pod.group)
    made_for_group = claims.get((ref.entry, ref.name)) if claims is not None else None
    if made_for_group is None:
        return claim_key(namespace, ref.made) if ref.made else None
    if made_for_group and ref.made and ref.made != made_for_group:
        return None
    made = made_for_group or ref.made
    return claim_key(namespace, made) if made else group_claim_key(namespace, pod.group, ref.entry)


def _served(
    resource: str, amount: int, classes: DeviceClasses, devices: DeviceReach, pod: PodView, catalog: Catalog
) -> Usage | None:
    """What `amount` of an extended resource a DeviceClass serves can allocate: the scheduler
    makes a claim of that class for it (None where no class serves it)."""
    device_class = classes.serving(resource)
    if device_class is None:
        return None
    ask = DeviceAsk(device_class.name, amount, ANY_DEVICE, resource)
    held, _ = request_charge(ClaimRequest(resource, resource, (ask,)), classes, devices, pod.placement, catalog)
    return held


def _beyond_the_plugin(
    resource: str, units: Decimal, classes: DeviceClasses, devices: DeviceReach, pod: PodView, catalog: Catalog
) -> Usage:
    """What a class serving one of NVIDIA's own names may hand out beyond the device plugin's
    reading of it (kept per name, amount, placement and what the class reaches: most GPU pods
    ask alike)."""
    device_class = classes.serving(resource)
    if device_class is None:
        return EMPTY
    reach = devices.reach(device_class.selectors) if device_class.selection.reaches_gpu else None

    def build() -> Usage:
        dra = _served(resource, int(units), classes, devices, pod, catalog)
        return EMPTY if dra is None else dra.more_than(charged({resource: units}, pod.placement, catalog))

    return classes.memo.get(("beyond", resource, units, pod.placement, reach), build)


def _asks_served(pod: PodView, classes: DeviceClasses) -> bool:
    """Whether a container asks for one of NVIDIA's own names a class serves."""
    served = classes.nvidia_names
    return bool(served) and any(name in served for c in pod.all_containers for name in c.gpus)


def served_by_classes(pod: PodView, classes: DeviceClasses, devices: DeviceReach, catalog: Catalog) -> Usage:
    """What the pod's extended resources can allocate beyond what the device plugin's reading of
    them charges (policies.judge.usage): a name a DeviceClass serves (its `extendedResourceName`,
    `nvidia.com/*` included, or the implicit `deviceclass.resource.kubernetes.io/` name) what the
    class selects, the worse of the two readings where a node may serve it either way; an
    `nvidia.com/` name nothing explains a whole GPU a unit (a device plugin may have renamed
    NVIDIA's GPUs to it), but a network device's."""
    usage = EMPTY
    for resource, amount in pod.extended:
        held = _served(resource, amount, classes, devices, pod, catalog)
        if held is None and resource.startswith(GPU_RESOURCE_DOMAIN) and not is_network_resource(resource):
            held = Usage(Fraction(amount), {}, amount)
        if held is not None:
            usage = usage + held
    if _asks_served(pod, classes) and UNKNOWN_NODE in admitted(pod.placement, catalog):
        # A node without a known GPU label (a DRA node) may serve NVIDIA's own names by a class.
        for name, units in effective_gpu_requests(pod).items():
            usage = usage + _beyond_the_plugin(name, units, classes, devices, pod, catalog)
    return usage


def claims_charge(pod: PodView, namespace: str, cluster: ClusterState, catalog: Catalog) -> ClaimsCharge:
    """What the pod's claims in `namespace` (the API server's word) can allocate, with what its
    extended resources served by DeviceClasses can."""
    classes = cluster.device_classes
    if not (pod.claims or pod.extended or _asks_served(pod, classes)):
        return NO_CLAIMS
    devices = cluster.devices
    serving = pod.extended or _asks_served(pod, classes)
    own = served_by_classes(pod, classes, devices, catalog) if serving else EMPTY
    if not pod.claims and own.is_zero:
        return NO_CLAIMS
    shared: list[tuple[str, Usage]] = []
    missing: list[ClaimRef] = []
    unbounded: list[tuple[ClaimRef, str]] = []
    found: list[tuple[ClaimRef, ClaimDemand]] = []
    for ref in pod.claims:
        # The claim made from a template for this pod, once there, is what it holds: deleting or
        # replacing the template after changes nothing of it.
        demand = cluster.claim_demand(namespace, False, ref.made) if ref.made else None
        if demand is None:
            demand = cluster.claim_demand(namespace, ref.template, ref.name)
        # A claim by name, or the one a pod's PodGroup makes for all its pods, is charged once.
        key = _shared_key(pod, ref, namespace, cluster)
        if demand is None:
            missing.append(ref)
            if key is not None:  # named still: made again, it is judged for what it adds to this pod's budgets
                shared.append((key, EMPTY))
            if ref.template:  # and so is a template, charged in its stead (its claim not made, or gone)
                shared.append((awaiting_key(namespace, ref.name, pod.uid or pod.name), EMPTY))
            continue
        found.append((ref, demand))
        held, endless = demand_charge(demand, classes, devices, pod.placement, catalog)
        if key is not None:
            shared.append((key, held))
        else:
            own = own + held
        unbounded += [(ref, name) for name in endless]
    return ClaimsCharge(own, tuple(shared), tuple(missing), tuple(unbounded), tuple(found))


def with_claims(base: Usage, charge: ClaimsCharge, held: Collection[str] = ()) -> Usage:
    """A pod's usage with what its claims can allocate (but the named claims in `held`, which a
    budget charges already): one pod, however it holds its GPUs."""
    if charge.usage.is_zero:
        return base
    total = base + charge.apart(held)
    return total if total.pods else total.with_pods(1)


def kind_of(ref: ClaimRef) -> str:
    return f"{'ResourceClaimTemplate' if ref.template else 'ResourceClaim'} {ref.name}"


def claim_verdicts(charge: ClaimsCharge, policies: tuple[GPUPolicy, ...], cluster: ClusterState) -> list[Verdict]:
    """What the quotas of `policies` say of claims they cannot charge: one not found is denied
    where the cluster's claims are all known (create the claim first), warned of where they are
    not (offline); a request for every device is denied as the quota's action says."""
    if not (charge.missing or charge.unbounded):
        return []
    verdicts = []
    for policy in policies:
        if policy.quota is None:
            continue
        rule = "quota.claims"
        for ref in charge.missing:
            action = Action.DENY if cluster.knows_claims else Action.WARN
            told = "not found: create it before the pod" if cluster.knows_claims else "not known here: not charged"
            verdicts.append(
                Verdict(policy.name, rule, ref.path, f"{kind_of(ref)} {told} (policy {policy.name})", action)
            )
        verdicts += [
            unbounded_verdict(policy, f"{kind_of(ref)} request {name}", ref.path) for ref, name in charge.unbounded
        ]
    return verdicts


def unbounded_verdict(policy: GPUPolicy, what: str, path: str) -> Verdict:
    """A request for every device its selectors admit, under a quota, with no device shown to bound
    it (offline, or none of the cluster's ResourceSlices admitted): the quota's action says what follows."""
    message = (
        f"{what} asks allocationMode All, every GPU its selectors admit, and no device the cluster's "
        f"ResourceSlices show bounds that here: ask a count (policy {policy.name})"
    )
    action = policy.quota.action if policy.quota is not None else Action.DENY
    return Verdict(policy.name, "quota.claims", path, message, action)
