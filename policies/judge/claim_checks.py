"""DRA claims judged as GPU requests are: the same policy holds whether a pod names
`nvidia.com/mig-7g.80gb` or a claim pinned to `7g.80gb`, and wherever the claim is judged (at its
own creation, or when a pod names it).

- `mig.allowedProfiles`, `mig.gpuModels` and `mig.multiGpu` of the policy that decides the pod's
  MIG rewrite (the first matching one with a `mig` section) hold for every alternative a request
  may be met by (the scheduler picks any of a `firstAvailable` list);
- the guardrails of `security` (policies.judge.security.settings): `adminAccess` (devices
  already allocated to others), tolerations of device taints, opaque driver configuration, each
  denied unless allowed (`draAdminAccess`, `draDeviceTaints`, `draOpaqueConfig`), and
  `deviceClasses`, the only classes a claim may name where it is set.
"""

from __future__ import annotations

from collections.abc import Iterator

from policies.gpu.catalog import Catalog
from policies.gpu.claims import ClaimDemand, ClaimRequest, DeviceAsk, Resolved, resolve
from policies.gpu.device_classes import DeviceClasses
from policies.gpu.device_reach import DeviceReach
from policies.gpu.models import MIG_RESOURCE_PREFIX
from policies.judge.claim_usage import ClaimsCharge, kind_of
from policies.judge.security import settings
from policies.judge.verdict import Verdict
from policies.model.policy import Action, DeviceCheck, GPUPolicy, MigSpec, MultiGpu

Alternatives = tuple[tuple[DeviceAsk, Resolved], ...]  # a request's, each with what it can allocate


def _mig_problems(
    request: ClaimRequest, alternatives: Alternatives, spec: MigSpec, catalog: Catalog
) -> Iterator[tuple[str, str]]:
    for ask, resolved in alternatives:
        if not resolved.reaches_gpu:
            continue  # no GPU: nothing of the mig section applies
        problem = _alternative_problem(ask, resolved, spec, catalog)
        if problem:
            yield ask.path, f"request {request.name} ({ask.device_class}){problem}"


def _alternative_problem(ask: DeviceAsk, resolved: Resolved, spec: MigSpec, catalog: Catalog) -> str:
    """What of the policy's mig section one alternative breaks ("" for nothing): each MIG profile
    a device it may get is of (what the shown devices are, or what its selectors pin)."""
    allowed = ", ".join(sorted(spec.allowed_profiles))
    for profile in resolved.profiles:
        if profile is None:
            if spec.allowed_profiles:
                return (
                    " may be met by a MIG device of any profile: pin one with a selector on "
                    f"device.attributes['gpu.nvidia.com'].profile (allowed: {allowed})"
                )
            continue
        if not spec.allows(profile):
            return f": profile {profile} is not allowed (allowed: {allowed})"
        if spec.gpu_models:
            known = catalog.resource(MIG_RESOURCE_PREFIX + profile).profile or profile
            models = ", ".join(m.key for m in spec.gpu_models)
            if not any(model.profile(known) is not None for model in spec.gpu_models):
                return f": profile {profile} is not a profile of {models}"
            keys = {m.key for m in spec.gpu_models}
            other = next(
                (
                    k.model
                    for k in resolved.kinds
                    if k.mig and k.profile == profile and k.model is not None and k.model not in keys
                ),
                None,
            )
            if other is not None:
                return (
                    f" may get a {profile} of {other}, not a model the policy allows ({models}): pin the "
                    "model with a selector on device.attributes['gpu.nvidia.com'].productName"
                )
    if spec.multi_gpu is MultiGpu.DENY and (resolved.amount is None or resolved.amount > 1):
        many = "every device its selectors admit" if resolved.amount is None else f"{resolved.amount} devices"
        return f" asks for {many}; the policy allows one GPU device a request (multiGpu: deny)"
    return ""


def _guard_problems(
    request: ClaimRequest, allowed: frozenset[DeviceCheck], classes: frozenset[str] | None
) -> Iterator[tuple[DeviceCheck | None, str, str]]:
    if classes is not None:
        names = ", ".join(sorted(classes)) or "none"
        for ask in request.alternatives:
            if ask.device_class not in classes:
                message = f"request {request.name}: device class {ask.device_class} is not allowed (allowed: {names})"
                yield None, f"{ask.path}.deviceClassName", message
    if request.admin_access and DeviceCheck.DRA_ADMIN_ACCESS not in allowed:
        yield (
            DeviceCheck.DRA_ADMIN_ACCESS,
            request.path,
            f"request {request.name} asks adminAccess, which reaches devices already allocated to others, "
            "past every quota",
        )
    if request.tolerations and DeviceCheck.DRA_DEVICE_TAINTS not in allowed:
        yield (
            DeviceCheck.DRA_DEVICE_TAINTS,
            request.path,
            f"request {request.name} tolerates device taints, which take devices out of service "
            "(failing, or being drained)",
        )


def claim_checks(
    demand: ClaimDemand, policies: tuple[GPUPolicy, ...], classes: DeviceClasses, devices: DeviceReach, catalog: Catalog
) -> list[Verdict]:
    """What `policies` say of a claim's requests, at field paths inside the claim's spec: kept
    with the claim per policies, classes and devices (the value holds them, so the identities in
    its key are never another's)."""
    if not policies or not demand.requests:
        return []
    key = ("checks", tuple(id(p) for p in policies), id(classes), devices.generation, id(catalog))
    build = lambda: (policies, classes, catalog, _claim_checks(demand, policies, classes, devices, catalog))  # noqa: E731
    return list(demand.memo.get(key, build)[3])


def _claim_checks(
    demand: ClaimDemand, policies: tuple[GPUPolicy, ...], classes: DeviceClasses, devices: DeviceReach, catalog: Catalog
) -> list[Verdict]:
    verdicts: list[Verdict] = []
    resolved = [(r, tuple((a, resolve(a, classes, devices)) for a in r.alternatives)) for r in demand.requests]
    reaching = [(r, found) for r, found in resolved if any(done.reaches_gpu for _, done in found)]
    decider = next((p for p in policies if p.mig is not None), None)
    if decider is not None and decider.mig is not None:
        for request, found in reaching:
            for path, message in _mig_problems(request, found, decider.mig, catalog):
                message = f"{message} (policy {decider.name})"
                verdicts.append(Verdict(decider.name, "mig.claims", path, message, Action.DENY))
    spec, owner = settings(policies)
    policy = owner.split(",")[0]
    for request in demand.requests:
        for check, path, message in _guard_problems(request, spec.allow, spec.device_classes):
            if check is not None and all(request is not r for r, _ in reaching):
                continue  # adminAccess and taints of a NIC's request are not ours to judge
            rule = f"security.{check.value}" if check is not None else "security.deviceClasses"
            verdicts.append(Verdict(policy, rule, path, f"{message} (policy {owner})", spec.action))
    if reaching and DeviceCheck.DRA_OPAQUE_CONFIG not in spec.allow:
        message = (
            "opaque driver configuration can change how the driver shares or hands out devices, "
            "past what the claim is charged; NVIDIA's own (GpuConfig, MigDeviceConfig, "
            f"VfioDeviceConfig of resource.nvidia.com/v1beta1) is charged as it shares (policy {owner})"
        )
        rule = f"security.{DeviceCheck.DRA_OPAQUE_CONFIG.value}"
        verdicts += [Verdict(policy, rule, path, message, spec.action) for path in demand.opaque_config]
    return verdicts


def pod_claim_checks(
    charge: ClaimsCharge,
    policies: tuple[GPUPolicy, ...],
    classes: DeviceClasses,
    devices: DeviceReach,
    catalog: Catalog,
) -> list[Verdict]:
    """The same checks on the claims a pod names (made before a policy, or judged by none): each
    at the pod's reference, saying which claim and which field of it."""
    verdicts: list[Verdict] = []
    for ref, demand in charge.demands:
        for v in claim_checks(demand, policies, classes, devices, catalog):
            verdicts.append(Verdict(v.policy, v.rule, ref.path, f"{kind_of(ref)} {v.path}: {v.message}", v.action))
    return verdicts
