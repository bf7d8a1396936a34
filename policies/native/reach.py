"""Which pods could reach a GPU, as CEL the API server evaluates: the matchConditions that send
pods to the webhook (tools/webhook_manifests.py writes them into both webhook configurations) and
that scope the native ValidatingAdmissionPolicies (policies/native/validating.py) to the same pods.

Every comprehension is bounded, so a condition's cost has a ceiling whatever the object.
"""

from __future__ import annotations

from policies.gpu.devices import TOOLKIT_ENV

# Kubernetes evaluates conditions with cost tracking on, and each step of a comprehension over a
# tenant's list or map then costs more the longer it is: reading N items costs about N squared
# (bench/match_conditions.py, on the real API server). So every comprehension reads at most
# BOUND items; a bigger list or map sends the object to the webhook, which reads it once.
BOUND = 64
# The namespaces no GPU policy reaches: the control plane's and the GPU stack's own.
EXCLUDED = [
    "kube-system",
    "kube-node-lease",
    "gpu-operator",
    "nvidia-gpu-operator",
    "nvidia-dra-driver-gpu",
    "nvidia-device-plugin",
]
NAMESPACE = "gpu-admission"  # the webhook's own, kustomize's default
# The variables the NVIDIA runtime reads as a device list, and CUDA_VERSION and NVIDIA_REQUIRE_CUDA
# (by their values a legacy CUDA image gets every GPU), as a CEL list (the engine's own set).
DEVICE_ENV = "[" + ", ".join(f"'{name}'" for name in sorted(TOOLKIT_ENV)) + "]"
# NVIDIA's resources, and DRA extended resources of a device class (KEP-5004)
ASKS = "r.startsWith('nvidia.com/') || r.startsWith('deviceclass.resource.kubernetes.io/')"
# For validation, any extended resource (a name with a domain): a DeviceClass may serve any name
# (`extendedResourceName`), and what it selects is the cluster's to say, not the name's.
ANY_EXTENDED = "r.contains('/')"
LONG_BOUND = 256  # env, volumes and annotations: ordinary pods carry more of them than of containers


def _each(collection: str, bound: int) -> str:
    """The head of a bounded comprehension: past `bound` items the object goes to the webhook
    (BOUND says why)."""
    return f"size({collection}) > {bound} || {collection}.exists"


def pod_condition(pod: str, template: bool = False, asks: str = ASKS) -> list[str]:
    """Lines of the condition "this pod (or pod template at `pod`) could reach a GPU"; every
    comprehension bounded, so its cost has a ceiling whatever the object. `asks`: which resource
    names `r` could be a GPU."""
    spec, metadata = f"{pod}.spec", f"{pod}.metadata"
    limits, requests = "c.resources.limits", "c.resources.requests"
    resources = (
        f"((has({limits}) && ({_each(limits, BOUND)}(r, {asks}))) ||",
        f" (has({requests}) && ({_each(requests, BOUND)}(r, {asks}))))",
    )
    env = f"has(c.env) && ({_each('c.env', LONG_BOUND)}(e, e.name in {DEVICE_ENV}))"
    listed = "m.mountPath.contains('nvidia-container-devices')"  # the toolkit's device list by mounts
    mounts = f"has(c.volumeMounts) && ({_each('c.volumeMounts', BOUND)}(m, {listed}))"
    prefixed = f"has(f.prefix) && f.prefix != '' && {DEVICE_ENV}.exists(n, n.startsWith(f.prefix))"
    env_from = f"has(c.envFrom) && ({_each('c.envFrom', BOUND)}(f, {prefixed}))"
    env = f"({env}) || ({mounts}) || ({env_from})"
    lines = [
        f"({_each(f'{spec}.containers', BOUND)}(c, has(c.resources) &&",
        f"  {resources[0]}",
        f"  {resources[1]})) ||",
        f"(has({spec}.initContainers) && ({_each(f'{spec}.initContainers', BOUND)}(c, has(c.resources) &&",
        f"  {resources[0]}",
        f"  {resources[1]}))) ||",
        f"({_each(f'{spec}.containers', BOUND)}(c, {env})) ||",
        f"(has({spec}.initContainers) && ({_each(f'{spec}.initContainers', BOUND)}(c, {env}))) ||",
    ]
    if not template:  # debug containers are added to pods, never to templates
        lines.append(
            f"(has({spec}.ephemeralContainers) && ({_each(f'{spec}.ephemeralContainers', BOUND)}(c, {env}))) ||"
        )
    guard = f"has({metadata}) && " if template else ""
    annotations = f"{metadata}.annotations"
    lines += [
        f"(has({spec}.runtimeClassName) && {spec}.runtimeClassName.startsWith('nvidia')) ||",
        f"(has({spec}.resourceClaims) && size({spec}.resourceClaims) > 0) ||",
        f"(has({spec}.volumes) && ({_each(f'{spec}.volumes', LONG_BOUND)}(v, has(v.hostPath) &&",
        "  v.hostPath.path.matches('^/*$|dev|nvidia|run|cdi|kubelet|^/etc/*$|^/var(/lib)?/*$|[.]|//')))) ||",
        f"({guard}has({annotations}) && ('gpu-admission.io/triton' in {annotations} ||",
        f"  'gpu-fraction' in {annotations} || 'gpu-memory' in {annotations} ||",
        f"  {_each(annotations, LONG_BOUND)}(k, k.startsWith('cdi.k8s.io/') || k.startsWith('nvidia.cdi.k8s.io'))))",
    ]
    return lines


# A pod that held a GPU share by KAI's or Run:ai's annotation: an UPDATE that drops it leaves the
# pod reaching no GPU by itself, yet the webhook must see it (a bound pod keeps its share).
SHARED_BEFORE = (
    "(oldObject != null && has(oldObject.metadata.annotations) &&"
    " ('gpu-fraction' in oldObject.metadata.annotations || 'gpu-memory' in oldObject.metadata.annotations))"
)


def or_shared_before(lines: list[str]) -> list[str]:
    """A pod condition's lines, or the old pod held a share by annotation."""
    return [*lines[:-1], f"{lines[-1]} ||", SHARED_BEFORE]


MIRROR_PODS = [
    "!(request.userInfo.username.startsWith('system:node:') &&",
    "  has(request.userInfo.groups) && 'system:nodes' in request.userInfo.groups &&",
    "  has(object.metadata.annotations) && 'kubernetes.io/config.mirror' in object.metadata.annotations)",
]
