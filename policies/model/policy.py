"""The policy model: what a GPUPolicy document means once loaded and checked."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field
from fractions import Fraction

from policies.gpu.models import GpuModel
from policies.model.cel import CompiledExpression, Variables  # at run time: mypyc builds the fields' types
from policies.model.selectors import LabelSelector

API_VERSION = "gpu-admission.io/v1alpha1"
KIND = "GPUPolicy"
DEFAULT_TRITON_IMAGE = "nvcr.io/nvidia/tritonserver:24.08-py3"
DEFAULT_TRITON_CPU = "1"
DEFAULT_TRITON_MEMORY = "4Gi"


class Strategy(enum.Enum):
    MIXED = "mixed"
    SINGLE = "single"


class MultiGpu(enum.Enum):
    """What happens to `nvidia.com/gpu: N > 1`: one MIG device per container, so never N slices."""

    KEEP = "keep"
    DENY = "deny"


class DualAdvertised(enum.Enum):
    """What a GPU pod gets on nodes whose GPUs both the device plugin and NVIDIA's DRA driver
    advertise (each can hand out a GPU the other already did)."""

    ALLOW = "allow"  # nothing said or done, as before
    WARN = "warn"  # a warning naming the nodes
    AVOID = "avoid"  # kept off them: kubernetes.io/hostname NotIn the nodes


class Backend(enum.Enum):
    """How a container's MIG slice reaches it (docs/mig-backends.md): `auto` picks per pod from
    what the cluster shows."""

    AUTO = "auto"
    DEVICE_PLUGIN = "devicePlugin"  # nvidia.com/mig-<profile>, served by the device plugin
    DRA_EXTENDED_RESOURCE = "draExtendedResource"  # the same name, served by a DeviceClass (KEP-5004)
    DRA_CLAIM = "draClaim"  # a ResourceClaimTemplate whose request is a firstAvailable ladder


class Action(enum.Enum):
    DENY = "deny"
    WARN = "warn"
    AUDIT = "audit"


class QuotaScope(enum.Enum):
    NAMESPACE = "namespace"
    POLICY = "policy"


class Consistency(enum.Enum):
    """How replicas agree on a quota: each on its own (fast), or through the API server (strict)."""

    LOCAL = "local"
    STRICT = "strict"


@dataclass(frozen=True, slots=True)
class Source:
    file: str
    line: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True, slots=True)
class Match:
    namespaces: tuple[str, ...] = ()
    pod_selector: LabelSelector | None = None
    namespace_selector: LabelSelector | None = None
    condition: CompiledExpression | None = None


@dataclass(frozen=True, slots=True)
class MigSpec:
    strategy: Strategy = Strategy.MIXED
    gpu_models: tuple[GpuModel, ...] = ()
    default_profile: str | None = None
    allowed_profiles: frozenset[str] = frozenset()
    multi_gpu: MultiGpu = MultiGpu.KEEP
    backend: Backend = Backend.AUTO
    whole_gpu_fallback: bool = False  # a claim's ladder ends with a whole GPU
    dual_advertised: DualAdvertised = DualAdvertised.ALLOW

    def allows(self, profile: str) -> bool:
        return not self.allowed_profiles or profile in self.allowed_profiles


@dataclass(frozen=True, slots=True)
class Toleration:
    key: str | None = None
    operator: str | None = None
    value: str | None = None
    effect: str | None = None
    toleration_seconds: int | None = None

    @classmethod
    def from_json(cls, raw: Mapping[str, object]) -> Toleration:
        seconds = raw.get("tolerationSeconds")
        return cls(
            key=_str_or_none(raw.get("key")),
            operator=_str_or_none(raw.get("operator")),
            value=_str_or_none(raw.get("value")),
            effect=_str_or_none(raw.get("effect")),
            toleration_seconds=seconds if isinstance(seconds, int) else None,
        )

    def to_json(self) -> dict[str, object]:
        pairs = {
            "key": self.key,
            "operator": self.operator,
            "value": self.value,
            "effect": self.effect,
            "tolerationSeconds": self.toleration_seconds,
        }
        return {k: v for k, v in pairs.items() if v is not None}

    def normalised(self) -> Toleration:
        """The API server treats a missing operator as Equal: compare tolerations that way."""
        return Toleration(self.key, self.operator or "Equal", self.value, self.effect, self.toleration_seconds)

    def identity(self) -> TolerationIdentity:
        """What the API server compares, as a tuple (of a normalised toleration)."""
        return (self.key, self.operator, self.value, self.effect, self.toleration_seconds)

    @staticmethod
    def identity_of(raw: Mapping[str, object]) -> TolerationIdentity:
        """from_json(raw).normalised().identity(), without making two frozen dataclasses: run
        for every toleration of every GPU pod mutated."""
        seconds = raw.get("tolerationSeconds")
        return (
            _str_or_none(raw.get("key")),
            _str_or_none(raw.get("operator")) or "Equal",
            _str_or_none(raw.get("value")),
            _str_or_none(raw.get("effect")),
            seconds if isinstance(seconds, int) else None,
        )


TolerationIdentity = tuple[str | None, str | None, str | None, str | None, int | None]


def _str_or_none(value: object) -> str | None:
    return value if isinstance(value, str) else None


@dataclass(frozen=True, slots=True)
class RuntimeSpec:
    runtime_class_name: str | None = None
    tolerations: tuple[Toleration, ...] = ()
    node_selector: tuple[tuple[str, str], ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    shm_size: str | None = None


@dataclass(frozen=True, slots=True)
class TritonSpec:
    image: str = DEFAULT_TRITON_IMAGE
    model_repository: str | None = None
    profile: str | None = None
    native_sidecar: bool = False
    # What the scheduler reserves for the server beside its GPU: requests, and the memory limit
    # (a CPU limit would throttle model loading; Triton's own charts set none).
    cpu: str = DEFAULT_TRITON_CPU
    memory: str = DEFAULT_TRITON_MEMORY


@dataclass(frozen=True, slots=True)
class Rule:
    name: str
    expression: CompiledExpression
    message: str
    action: Action
    message_expression: CompiledExpression | None = None


@dataclass(frozen=True, slots=True)
class Bound:
    """One limit, as quota checks read it (made once per load): its amount also as an integer ratio, so a check
    cross-multiplies ints (Fraction's operators and even its properties cost several times more)."""

    name: str  # as messages name the dimension: gpuEquivalents, slices <profile>, gpus, pods
    path: str  # under spec.quota.limits or .perPod
    kind: str  # gpuEquivalents, slices, gpus or pods
    profile: str  # of a slices limit, else ""
    limit: Fraction | int
    numerator: int
    denominator: int


@dataclass(frozen=True, slots=True)
class Limits:
    gpu_equivalents: Fraction | None = None
    slices: tuple[tuple[str, int], ...] = ()
    gpus: int | None = None
    pods: int | None = None
    # Every limit that is set, in the order messages list them: derived once, read per review.
    bounds: tuple[Bound, ...] = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        bounds: list[Bound] = []
        if self.gpu_equivalents is not None:
            equivalents = self.gpu_equivalents
            numerator, denominator = equivalents.as_integer_ratio()
            name = "gpuEquivalents"
            bounds.append(Bound(name, name, name, "", equivalents, numerator, denominator))
        bounds.extend(Bound(f"slices {p}", f"slices.{p}", "slices", p, n, n, 1) for p, n in self.slices)
        if self.gpus is not None:
            bounds.append(Bound("gpus", "gpus", "gpus", "", self.gpus, self.gpus, 1))
        if self.pods is not None:
            bounds.append(Bound("pods", "pods", "pods", "", self.pods, self.pods, 1))
        object.__setattr__(self, "bounds", tuple(bounds))


@dataclass(frozen=True, slots=True)
class Quota:
    scope: QuotaScope = QuotaScope.NAMESPACE
    limits: Limits = field(default_factory=Limits)
    per_pod: Limits | None = None
    action: Action = Action.DENY
    consistency: Consistency = Consistency.STRICT  # exact across replicas unless a quota opts out
    shared_weight: Fraction = Fraction(1)  # what a share of a device weighs, of the device (0 to 1)


class DeviceCheck(enum.Enum):
    """Ways a container can reach GPU devices past the device plugin (and so past every quota)."""

    DEVICE_ENV = "deviceEnv"  # NVIDIA_VISIBLE_DEVICES & co. set to something that grants devices
    ENV_FROM = "envFrom"  # envFrom whose keys could spell those variables
    HOST_DEVICES = "hostDevices"  # hostPath on /dev/nvidia*, /dev, /dev/char, /
    CDI_DEVICES = "cdiDevices"  # cdi.k8s.io/ annotations naming nvidia.com devices
    # DRA requests that reach past what a claim's count says (policies.judge.claim_checks):
    DRA_ADMIN_ACCESS = "draAdminAccess"  # adminAccess: devices already allocated to others
    DRA_DEVICE_TAINTS = "draDeviceTaints"  # tolerations of device taints (devices taken out of service)
    DRA_OPAQUE_CONFIG = "draOpaqueConfig"  # opaque driver configuration (sharing, MPS, time-slicing)


@dataclass(frozen=True, slots=True)
class SecuritySpec:
    """Device access checks: all on unless allowed; a breach denies unless the action says otherwise."""

    action: Action = Action.DENY
    allow: frozenset[DeviceCheck] = frozenset()
    # DRA device classes a claim may name; None: any (a class that reaches no GPU is never charged)
    device_classes: frozenset[str] | None = None


DEFAULT_SECURITY = SecuritySpec()


@dataclass(frozen=True, slots=True)
class GPUPolicy:
    """A loaded policy. One from a ConfigMap outside the webhook's namespace is `namespaced`: it is
    named `<namespace>/<name>`, matches only its own namespace, and yields to cluster policies."""

    name: str
    source: Source
    namespace: str | None = None
    priority: int = 0
    match: Match = field(default_factory=Match)
    mig: MigSpec | None = None
    runtime: RuntimeSpec | None = None
    triton: TritonSpec | None = None
    variables: Variables = ()  # named CEL expressions the rules read as variables.<name>
    rules: tuple[Rule, ...] = ()
    quota: Quota | None = None
    security: SecuritySpec | None = None
