"""The sections of a GPUPolicy's spec, each read field by field with a problem (path and line)
for every field that is wrong: mig, runtime, triton, rules, quota, security, and the selectors,
CEL expressions, models and profiles they name."""

from __future__ import annotations

import re
from fractions import Fraction

from policies.gpu.catalog import Catalog, CatalogError
from policies.gpu.devices import DEVICE_ENV, grants_devices
from policies.gpu.models import GpuModel
from policies.model.advice import expression_advice
from policies.model.cel import CelCompileError, CompiledExpression, Variables, compile_expression
from policies.model.fields import FieldReader
from policies.model.policy import (
    DEFAULT_TRITON_CPU,
    DEFAULT_TRITON_IMAGE,
    DEFAULT_TRITON_MEMORY,
    Action,
    Backend,
    Consistency,
    DeviceCheck,
    DualAdvertised,
    GPUPolicy,
    Limits,
    MigSpec,
    MultiGpu,
    Quota,
    QuotaScope,
    Rule,
    RuntimeSpec,
    SecuritySpec,
    Strategy,
    Toleration,
    TritonSpec,
)
from policies.model.selectors import LabelSelector, SelectorError, parse_selector
from policies.model.yamldoc import Document

_SECURITY = frozenset({"action", "allow", "deviceClasses"})
_MIG = frozenset(
    {
        "strategy",
        "gpuModels",
        "defaultProfile",
        "allowedProfiles",
        "multiGpu",
        "backend",
        "wholeGpuFallback",
        "dualAdvertisedNodes",
    }
)
_BACKENDS = "auto, devicePlugin, draExtendedResource, draClaim"
_RUNTIME = frozenset({"runtimeClassName", "tolerations", "nodeSelector", "env", "shmSize"})
_TOLERATION = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})
_TRITON = frozenset({"image", "modelRepository", "profile", "nativeSidecar", "resources"})
_TRITON_RESOURCES = frozenset({"cpu", "memory"})
_RULE = frozenset({"name", "expression", "message", "messageExpression", "action"})
_VARIABLE = frozenset({"name", "expression"})
# What a match condition may read only while a request is admitted, never of a running pod.
_ADMISSION_ONLY = re.compile(r"\b(namespaceObject|oldObject|request\.userInfo|request\.dryRun|authorizer)\b")
_VARIABLE_USE = re.compile(r"\bvariables\s*\.\s*([A-Za-z_][A-Za-z0-9_]*)")
_QUOTA = frozenset({"scope", "limits", "perPod", "action", "consistency", "sharedWeight"})
_LIMITS = frozenset({"gpuEquivalents", "slices", "gpus", "pods"})


class SectionReader(FieldReader):
    def __init__(self, document: Document, catalog: Catalog, namespace: str | None = None) -> None:
        super().__init__(document)
        self.catalog = catalog
        self.namespace = namespace

    def expression(self, raw: object, path: str, verdict: bool = True) -> CompiledExpression | None:
        """A CEL expression; `verdict`: its value decides (a rule or condition, not a message)."""
        source = self.string(raw, path)
        if source is None:
            return None
        try:
            compiled = compile_expression(source)
        except CelCompileError as error:
            self.problem(path, f"CEL: {error}")
            return None
        for advice in expression_advice(source, verdict):
            self.advise(path, advice)
        return compiled

    def selector(self, raw: object, path: str) -> LabelSelector | None:
        if raw is None:
            return None
        try:
            return parse_selector(raw, path)
        except SelectorError as error:
            self.problem(error.path, str(error))
            return None

    def models(self, raw: object, path: str) -> tuple[GpuModel, ...]:
        models: list[GpuModel] = []
        for i, key in enumerate(self.strings(raw, path)):
            try:
                models.append(self.catalog.model(key))
            except CatalogError as error:
                self.problem(f"{path}[{i}]", str(error))
        return tuple(models)

    def profile(self, raw: object, path: str, models: tuple[GpuModel, ...]) -> str | None:
        name = self.string(raw, path)
        if name is not None:
            try:
                self.catalog.check_profile(name, models)
            except CatalogError as error:
                self.problem(path, str(error))
                return None
        return name

    def mig(self, raw: object, path: str) -> MigSpec:
        fields = self.mapping(raw, path, _MIG)
        models = self.models(fields.get("gpuModels"), f"{path}.gpuModels")
        allowed = [
            self.profile(name, f"{path}.allowedProfiles[{i}]", models)
            for i, name in enumerate(self.strings(fields.get("allowedProfiles"), f"{path}.allowedProfiles"))
        ]
        spec = MigSpec(
            strategy=self.choice(fields.get("strategy"), f"{path}.strategy", Strategy, Strategy.MIXED, "mixed, single"),
            gpu_models=models,
            default_profile=self.profile(fields.get("defaultProfile"), f"{path}.defaultProfile", models),
            allowed_profiles=frozenset(name for name in allowed if name is not None),
            multi_gpu=self.choice(fields.get("multiGpu"), f"{path}.multiGpu", MultiGpu, MultiGpu.KEEP, "keep, deny"),
            backend=self.choice(fields.get("backend"), f"{path}.backend", Backend, Backend.AUTO, _BACKENDS),
            whole_gpu_fallback=self.boolean(fields.get("wholeGpuFallback"), f"{path}.wholeGpuFallback", False),
            dual_advertised=self.choice(
                fields.get("dualAdvertisedNodes"),
                f"{path}.dualAdvertisedNodes",
                DualAdvertised,
                DualAdvertised.ALLOW,
                "allow, warn, avoid",
            ),
        )
        if spec.default_profile and not spec.allows(spec.default_profile):
            self.problem(f"{path}.defaultProfile", f"{spec.default_profile} is not in allowedProfiles")
        return spec

    def runtime(self, raw: object, path: str) -> RuntimeSpec:
        fields = self.mapping(raw, path, _RUNTIME)
        tolerations: list[Toleration] = []
        raw_tolerations = fields.get("tolerations") or []
        if not isinstance(raw_tolerations, list):
            self.problem(f"{path}.tolerations", "must be a list")
            raw_tolerations = []
        for i, item in enumerate(raw_tolerations):
            item_path = f"{path}.tolerations[{i}]"
            toleration = Toleration.from_json(self.mapping(item, item_path, _TOLERATION))
            if toleration.operator not in (None, "Equal", "Exists"):
                self.problem(f"{item_path}.operator", "must be Equal or Exists")
            if toleration.effect not in (None, "NoSchedule", "PreferNoSchedule", "NoExecute"):
                self.problem(f"{item_path}.effect", "must be NoSchedule, PreferNoSchedule or NoExecute")
            tolerations.append(toleration)
        env = self.string_map(fields.get("env"), f"{path}.env")
        for name, value in env:
            if name in DEVICE_ENV and grants_devices(value):
                self.problem(f"{path}.env.{name}", "hands out GPU devices past the device plugin, which sets it itself")
        return RuntimeSpec(
            runtime_class_name=self.string(fields.get("runtimeClassName"), f"{path}.runtimeClassName"),
            tolerations=tuple(tolerations),
            node_selector=self.string_map(fields.get("nodeSelector"), f"{path}.nodeSelector"),
            env=env,
            shm_size=self.quantity(fields.get("shmSize"), f"{path}.shmSize"),
        )

    def triton(self, raw: object, path: str, mig: MigSpec | None) -> TritonSpec:
        fields = self.mapping(raw, path, _TRITON)
        image = self.string(fields.get("image"), f"{path}.image")
        profile = self.profile(fields.get("profile"), f"{path}.profile", mig.gpu_models if mig else ())
        if profile and mig and not mig.allows(profile):
            # The sidecar's slice meets the same gate as the pod's: it would be denied.
            self.problem(f"{path}.profile", f"{profile} is not in spec.mig.allowedProfiles")
        resources = self.mapping(fields.get("resources"), f"{path}.resources", _TRITON_RESOURCES)
        cpu = self.quantity(resources.get("cpu"), f"{path}.resources.cpu")
        memory = self.quantity(resources.get("memory"), f"{path}.resources.memory")
        return TritonSpec(
            image=image or DEFAULT_TRITON_IMAGE,
            model_repository=self.string(fields.get("modelRepository"), f"{path}.modelRepository"),
            profile=profile,
            native_sidecar=self.boolean(fields.get("nativeSidecar"), f"{path}.nativeSidecar", False),
            cpu=cpu or DEFAULT_TRITON_CPU,
            memory=memory or DEFAULT_TRITON_MEMORY,
        )

    def variables(self, raw: object, path: str) -> Variables:
        """VAP's `variables`: named expressions, each computed once per request, that rules and
        messages (and later variables) read as `variables.<name>`."""
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.problem(path, "must be a list of {name, expression}")
            return ()
        found: list[tuple[str, CompiledExpression]] = []
        for i, item in enumerate(raw):
            at = f"{path}[{i}]"
            fields = self.mapping(item, at, _VARIABLE)
            name = self.string(fields.get("name"), f"{at}.name")
            if name is None or not name.isidentifier():
                self.problem(f"{at}.name", "every variable needs a name that is a CEL identifier")
                continue
            if any(name == earlier for earlier, _ in found):
                self.problem(f"{at}.name", f"duplicate variable name {name!r}")
            expression = self.expression(fields.get("expression"), f"{at}.expression", verdict=False)
            if fields.get("expression") is None:
                self.problem(f"{at}.expression", "every variable needs an expression")
            if expression is not None:
                self.undeclared(expression, f"{at}.expression", {n for n, _ in found})
                found.append((name, expression))
        return tuple(found)

    def undeclared(self, expression: CompiledExpression, path: str, declared: set[str]) -> None:
        for name in _VARIABLE_USE.findall(expression.source):
            if name not in declared:
                known = ", ".join(sorted(declared)) or "none"
                self.problem(path, f"variables.{name} is not declared before it (spec.variables: {known})")

    def check_variable_use(self, policy: GPUPolicy) -> None:
        declared = {name for name, _ in policy.variables}
        for i, rule in enumerate(policy.rules):
            self.undeclared(rule.expression, f"spec.rules[{i}].expression", declared)
            if rule.message_expression is not None:
                self.undeclared(rule.message_expression, f"spec.rules[{i}].messageExpression", declared)
        condition = policy.match.condition
        if condition is not None and condition.reads_variables:
            self.problem("spec.match.condition", "a match condition cannot read variables (as in VAP)")
        if condition is not None and policy.quota is not None:
            unknown = sorted(set(_ADMISSION_ONLY.findall(condition.source)))
            if unknown:
                # Running pods are counted against the budget by this match too (the watch, a
                # relist, another replica): what only an admission request has would let a pod
                # in one by one and out of the count once it runs.
                self.problem(
                    "spec.match.condition",
                    f"a quota's match must hold for running pods too, which have no {', '.join(unknown)}: "
                    "match users by namespace, and namespaces by match.namespaceSelector",
                )

    def rules(self, raw: object, path: str) -> tuple[Rule, ...]:
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.problem(path, "must be a list of rules")
            return ()
        rules: list[Rule] = []
        names: set[str] = set()
        for i, item in enumerate(raw):
            item_path = f"{path}[{i}]"
            fields = self.mapping(item, item_path, _RULE)
            name = self.string(fields.get("name"), f"{item_path}.name")
            if name is None:
                self.problem(f"{item_path}.name", "every rule needs a name")
            elif name in names:
                self.problem(f"{item_path}.name", f"duplicate rule name {name!r}")
            expression = self.expression(fields.get("expression"), f"{item_path}.expression")
            if fields.get("expression") is None:
                self.problem(f"{item_path}.expression", "every rule needs an expression")
            message = self.string(fields.get("message"), f"{item_path}.message")
            action = self.choice(fields.get("action"), f"{item_path}.action", Action, Action.DENY, "deny, warn, audit")
            message_expression = self.expression(
                fields.get("messageExpression"), f"{item_path}.messageExpression", verdict=False
            )
            if name is not None and expression is not None:
                names.add(name)
                rules.append(Rule(name, expression, message or f"rule {name} failed", action, message_expression))
        return tuple(rules)

    def limits(self, raw: object, path: str, models: tuple[GpuModel, ...]) -> Limits:
        fields = self.mapping(raw, path, _LIMITS)
        slices: list[tuple[str, int]] = []
        raw_slices = (
            self.mapping(
                fields["slices"],
                f"{path}.slices",
                frozenset(p.name for m in (models or self.catalog.models) for p in m.profiles),
            )
            if "slices" in fields  # the profiles allowed are worth gathering only then
            else {}
        )
        for profile, amount in raw_slices.items():
            number = self.count(amount, f"{path}.slices.{profile}")
            if number is not None:
                slices.append((str(profile), number))
        return Limits(
            gpu_equivalents=self.fraction(fields.get("gpuEquivalents"), f"{path}.gpuEquivalents"),
            slices=tuple(slices),
            gpus=self.count(fields.get("gpus"), f"{path}.gpus"),
            pods=self.count(fields.get("pods"), f"{path}.pods"),
        )

    def quota(self, raw: object, path: str, models: tuple[GpuModel, ...]) -> Quota:
        fields = self.mapping(raw, path, _QUOTA)
        action = self.choice(fields.get("action"), f"{path}.action", Action, Action.DENY, "deny, warn")
        if action is Action.AUDIT:
            self.problem(f"{path}.action", "must be one of: deny, warn")
        return Quota(
            scope=self.choice(
                fields.get("scope"), f"{path}.scope", QuotaScope, QuotaScope.NAMESPACE, "namespace, policy"
            ),
            limits=self.limits(fields.get("limits"), f"{path}.limits", models),
            per_pod=self.limits(fields["perPod"], f"{path}.perPod", models) if "perPod" in fields else None,
            action=action,
            consistency=self.choice(
                fields.get("consistency"), f"{path}.consistency", Consistency, Consistency.STRICT, "strict, local"
            ),
            shared_weight=self.shared_weight(fields.get("sharedWeight"), f"{path}.sharedWeight"),
        )

    def security(self, raw: object, path: str) -> SecuritySpec:
        fields = self.mapping(raw, path, _SECURITY)
        names = ", ".join(c.value for c in DeviceCheck)
        allowed = [
            self.choice(name, f"{path}.allow[{i}]", DeviceCheck, None, names)
            for i, name in enumerate(self.strings(fields.get("allow"), f"{path}.allow"))
        ]
        return SecuritySpec(
            action=self.choice(fields.get("action"), f"{path}.action", Action, Action.DENY, "deny, warn, audit"),
            allow=frozenset(check for check in allowed if check is not None),
            device_classes=(
                frozenset(self.strings(fields["deviceClasses"], f"{path}.deviceClasses"))
                if fields.get("deviceClasses") is not None
                else None
            ),
        )

    def shared_weight(self, raw: object, path: str) -> Fraction:
        weight = self.fraction(raw, path)
        if weight is None:
            return Fraction(1)
        if weight > 1:
            # A share charged above its device would let a pod that may land on either kind of node
            # be charged less than it could hold.
            self.problem(path, "must be between 0 and 1: a share weighs at most its device")
            return Fraction(1)
        return weight
