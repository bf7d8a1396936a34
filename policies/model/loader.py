"""Policy documents to checked GPUPolicy objects: every problem with file, line and field path.

A document with any problem is left out and reported; the good documents of the same file load.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import yaml

from policies.errors import PolicyProblem
from policies.gpu.catalog import CATALOG, Catalog, CatalogError, GpuModel
from policies.model.cel import CelCompileError, CompiledExpression, compile_expression
from policies.model.fields import FieldReader
from policies.model.policy import (
    API_VERSION,
    DEFAULT_TRITON_IMAGE,
    KIND,
    Action,
    Consistency,
    GPUPolicy,
    Limits,
    Match,
    MigSpec,
    MultiGpu,
    Quota,
    QuotaScope,
    Rule,
    RuntimeSpec,
    Source,
    Strategy,
    Toleration,
    TritonSpec,
)
from policies.model.selectors import LabelSelector, SelectorError, parse_selector
from policies.model.yamldoc import Document, read_documents
from policies.quantity import QuantityParser

_SPEC = frozenset({"priority", "match", "mig", "runtime", "triton", "rules", "quota"})
_MATCH = frozenset({"namespaces", "podSelector", "namespaceSelector", "condition"})
_MIG = frozenset({"strategy", "gpuModels", "defaultProfile", "allowedProfiles", "multiGpu"})
_RUNTIME = frozenset({"runtimeClassName", "tolerations", "nodeSelector", "env", "shmSize"})
_TOLERATION = frozenset({"key", "operator", "value", "effect", "tolerationSeconds"})
_TRITON = frozenset({"image", "modelRepository", "profile", "nativeSidecar"})
_RULE = frozenset({"name", "expression", "message", "messageExpression", "action"})
_QUOTA = frozenset({"scope", "limits", "perPod", "action", "consistency"})
_LIMITS = frozenset({"gpuEquivalents", "slices", "gpus", "pods"})


@dataclass(frozen=True, slots=True)
class LoadResult:
    policies: tuple[GPUPolicy, ...]
    problems: tuple[PolicyProblem, ...]


def load_texts(
    files: Iterable[tuple[str, str]],
    parse_quantity: QuantityParser,
    catalog: Catalog = CATALOG,
    namespace: str | None = None,
) -> LoadResult:
    """Load every GPUPolicy in (file name, text) pairs; the edge does the reading.

    `namespace`: the texts come from a ConfigMap in that namespace (not the webhook's own), so
    their policies are namespaced: they may match only that namespace.
    """
    policies: list[GPUPolicy] = []
    problems: list[PolicyProblem] = []
    seen: dict[str, Source] = {}
    for file, text in files:
        try:
            documents = list(read_documents(file, text))
        except yaml.YAMLError as error:
            mark = getattr(error, "problem_mark", None)
            line = mark.line + 1 if mark is not None else 1
            problems.append(PolicyProblem(file, line, "", "", f"not valid YAML: {_yaml_reason(error)}"))
            continue
        for document in documents:
            reader = PolicyReader(document, parse_quantity, catalog, namespace)
            policy = reader.read()
            if policy is not None and policy.name in seen:
                reader.problem("metadata.name", f"duplicate policy name (first defined at {seen[policy.name]})")
                policy = None
            problems.extend(reader.problems)
            if policy is not None:
                seen[policy.name] = policy.source
                policies.append(policy)
    return LoadResult(tuple(policies), tuple(problems))


def _yaml_reason(error: yaml.YAMLError) -> str:
    return str(getattr(error, "problem", None) or error).splitlines()[0]


class PolicyReader(FieldReader):
    def __init__(
        self, document: Document, parse_quantity: QuantityParser, catalog: Catalog, namespace: str | None = None
    ) -> None:
        super().__init__(document)
        self.parse_quantity = parse_quantity
        self.catalog = catalog
        self.namespace = namespace

    def read(self) -> GPUPolicy | None:
        top = self.mapping(self.document.data, "", frozenset({"apiVersion", "kind", "metadata", "spec"}))
        metadata = top.get("metadata")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        if isinstance(name, str):
            self.policy = name
        if top.get("apiVersion") != API_VERSION:
            self.problem("apiVersion", f"must be {API_VERSION}")
        if top.get("kind") != KIND:
            self.problem("kind", f"must be {KIND}")
        if not isinstance(name, str) or not name:
            self.problem("metadata.name", "every policy needs a name")
            return None
        if self.namespace is not None:
            name = f"{self.namespace}/{name}"
        self.policy = name
        spec = self.mapping(top.get("spec"), "spec", _SPEC)
        priority = spec.get("priority", 0)
        if isinstance(priority, bool) or not isinstance(priority, int):
            self.problem("spec.priority", "must be an integer")
            priority = 0
        mig = self.mig(spec["mig"], "spec.mig") if "mig" in spec else None
        models = mig.gpu_models if mig else ()
        policy = GPUPolicy(
            name=name,
            source=Source(self.document.file, self.document.line),
            namespace=self.namespace,
            priority=priority,
            match=self.match(spec.get("match"), "spec.match"),
            mig=mig,
            runtime=self.runtime(spec["runtime"], "spec.runtime") if "runtime" in spec else None,
            triton=self.triton(spec["triton"], "spec.triton", models) if "triton" in spec else None,
            rules=self.rules(spec.get("rules"), "spec.rules"),
            quota=self.quota(spec["quota"], "spec.quota", models) if "quota" in spec else None,
        )
        return None if self.problems else policy

    def expression(self, raw: object, path: str) -> CompiledExpression | None:
        source = self.string(raw, path)
        if source is None:
            return None
        try:
            return compile_expression(source)
        except CelCompileError as error:
            self.problem(path, f"CEL: {error}")
            return None

    def match(self, raw: object, path: str) -> Match:
        fields = self.mapping(raw, path, _MATCH)
        namespaces = self.strings(fields.get("namespaces"), f"{path}.namespaces")
        if self.namespace is not None:
            if any(n != self.namespace for n in namespaces):
                self.problem(
                    f"{path}.namespaces",
                    f"a policy in namespace {self.namespace} may match only {self.namespace}; "
                    "put cluster-wide policies in the webhook's namespace",
                )
            namespaces = (self.namespace,)
        return Match(
            namespaces=namespaces,
            pod_selector=self.selector(fields.get("podSelector"), f"{path}.podSelector"),
            namespace_selector=self.selector(fields.get("namespaceSelector"), f"{path}.namespaceSelector"),
            condition=self.expression(fields.get("condition"), f"{path}.condition"),
        )

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
        return RuntimeSpec(
            runtime_class_name=self.string(fields.get("runtimeClassName"), f"{path}.runtimeClassName"),
            tolerations=tuple(tolerations),
            node_selector=self.string_map(fields.get("nodeSelector"), f"{path}.nodeSelector"),
            env=self.string_map(fields.get("env"), f"{path}.env"),
            shm_size=self.quantity(fields.get("shmSize"), f"{path}.shmSize", self.parse_quantity),
        )

    def triton(self, raw: object, path: str, models: tuple[GpuModel, ...]) -> TritonSpec:
        fields = self.mapping(raw, path, _TRITON)
        image = self.string(fields.get("image"), f"{path}.image")
        return TritonSpec(
            image=image or DEFAULT_TRITON_IMAGE,
            model_repository=self.string(fields.get("modelRepository"), f"{path}.modelRepository"),
            profile=self.profile(fields.get("profile"), f"{path}.profile", models),
            native_sidecar=self.boolean(fields.get("nativeSidecar"), f"{path}.nativeSidecar", False),
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
            if "expression" not in fields:
                self.problem(f"{item_path}.expression", "every rule needs an expression")
            message = self.string(fields.get("message"), f"{item_path}.message")
            action = self.choice(fields.get("action"), f"{item_path}.action", Action, Action.DENY, "deny, warn, audit")
            message_expression = self.expression(fields.get("messageExpression"), f"{item_path}.messageExpression")
            if name is not None and expression is not None:
                names.add(name)
                rules.append(Rule(name, expression, message or f"rule {name} failed", action, message_expression))
        return tuple(rules)

    def limits(self, raw: object, path: str, models: tuple[GpuModel, ...]) -> Limits:
        fields = self.mapping(raw, path, _LIMITS)
        slices: list[tuple[str, int]] = []
        raw_slices = self.mapping(
            fields.get("slices"),
            f"{path}.slices",
            frozenset(p.name for m in (models or self.catalog.models) for p in m.profiles),
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
                fields.get("consistency"), f"{path}.consistency", Consistency, Consistency.LOCAL, "local, strict"
            ),
        )
