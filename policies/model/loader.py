"""Policy documents to checked GPUPolicy objects (and WorkloadKind entries, which tell where pod
templates live in more kinds of object): every problem with file, line and field path.

A document with any problem is left out and reported; the good documents of the same file load.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import yaml

from policies.errors import PolicyProblem
from policies.gpu.catalog import CATALOG, Catalog
from policies.model.fields import FieldReader
from policies.model.policy import (
    API_VERSION,
    KIND,
    GPUPolicy,
    Match,
    Source,
)
from policies.model.sections import SectionReader
from policies.model.workload_kinds import BUILT_IN_TABLE
from policies.model.workloads import WILDCARD, Form, Site, WorkloadKind, split
from policies.model.yamldoc import Document, read_documents

NO_DOCUMENT = "no policy document in it (empty, or cut off before its first)"
_SPEC = frozenset({"priority", "match", "mig", "runtime", "triton", "variables", "rules", "quota", "security"})
_MATCH = frozenset({"namespaces", "podSelector", "namespaceSelector", "condition"})


WORKLOAD_KIND = "WorkloadKind"
_WORKLOAD_SPEC = frozenset({"group", "kind", "resource", "templates", "madeBy", "clusterScoped"})
_SITE = frozenset({"path", "form", "replicas", "pod"})


@dataclass(frozen=True, slots=True)
class LoadResult:
    policies: tuple[GPUPolicy, ...]
    problems: tuple[PolicyProblem, ...]
    workloads: tuple[WorkloadKind, ...] = ()
    advice: tuple[PolicyProblem, ...] = ()  # loads anyway; `lint` reports it


def load_texts(
    files: Iterable[tuple[str, str]],
    catalog: Catalog = CATALOG,
    namespace: str | None = None,
) -> LoadResult:
    """Load every GPUPolicy in (file name, text) pairs; the edge does the reading.

    Total: whatever goes wrong in one file (YAML, nesting too deep, a value no reader foresaw)
    is a problem of that file, never an exception; a file with no document at all (empty, or cut
    off before its first) is one too.

    `namespace`: the texts come from a ConfigMap in that namespace (not the webhook's own), so
    their policies are namespaced: they may match only that namespace.
    """
    policies: list[GPUPolicy] = []
    problems: list[PolicyProblem] = []
    workloads: list[WorkloadKind] = []
    advice: list[PolicyProblem] = []
    seen: dict[str, Source] = {}
    for file, text in files:
        try:
            _load_file(file, text, catalog, namespace, seen, policies, problems, workloads, advice)
        except (RecursionError, MemoryError):
            problems.append(PolicyProblem(file, 1, "", "", "nested too deep to read"))
        except Exception as error:  # a reader's gap must cost one file, not the whole set
            problems.append(PolicyProblem(file, 1, "", "", f"could not be read: {type(error).__name__}: {error}"))
    return LoadResult(tuple(policies), tuple(problems), tuple(workloads), tuple(advice))


def _load_file(
    file: str,
    text: str,
    catalog: Catalog,
    namespace: str | None,
    seen: dict[str, Source],
    policies: list[GPUPolicy],
    problems: list[PolicyProblem],
    workloads: list[WorkloadKind],
    advice: list[PolicyProblem],
) -> None:
    try:
        documents = list(read_documents(file, text))
    except yaml.YAMLError as error:
        mark = getattr(error, "problem_mark", None)
        line = mark.line + 1 if mark is not None else 1
        problems.append(PolicyProblem(file, line, "", "", f"not valid YAML: {_yaml_reason(error)}"))
        return
    if not documents:
        problems.append(PolicyProblem(file, 1, "", "", NO_DOCUMENT))
    found: list[GPUPolicy] = []
    for document in documents:
        if isinstance(document.data, Mapping) and document.data.get("kind") == WORKLOAD_KIND:
            workload_reader = WorkloadReader(document, namespace)
            entry = workload_reader.read()
            problems.extend(workload_reader.problems)
            advice.extend(workload_reader.advice)
            if entry is not None:
                workloads.append(entry)
            continue
        reader = PolicyReader(document, catalog, namespace)
        policy = reader.read()
        if policy is not None and policy.name in seen:
            reader.problem("metadata.name", f"duplicate policy name (first defined at {seen[policy.name]})")
            policy = None
        problems.extend(reader.problems)
        advice.extend(reader.advice)
        if policy is not None:
            seen[policy.name] = policy.source
            found.append(policy)
    policies.extend(found)


def _yaml_reason(error: yaml.YAMLError) -> str:
    return str(getattr(error, "problem", None) or error).splitlines()[0]


class PolicyReader(SectionReader):
    """One GPUPolicy document, read whole; each spec section by SectionReader."""

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
            triton=self.triton(spec["triton"], "spec.triton", mig) if "triton" in spec else None,
            variables=self.variables(spec.get("variables"), "spec.variables"),
            rules=self.rules(spec.get("rules"), "spec.rules"),
            quota=self.quota(spec["quota"], "spec.quota", models) if "quota" in spec else None,
            security=self.security(spec["security"], "spec.security") if "security" in spec else None,
        )
        self.check_variable_use(policy)
        return None if self.problems else policy

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


class WorkloadReader(FieldReader):
    """One WorkloadKind document: a kind of object and where its pod templates are."""

    def __init__(self, document: Document, namespace: str | None) -> None:
        super().__init__(document)
        self.namespace = namespace

    def read(self) -> WorkloadKind | None:
        top = self.mapping(self.document.data, "", frozenset({"apiVersion", "kind", "metadata", "spec"}))
        metadata = top.get("metadata")
        name = metadata.get("name") if isinstance(metadata, Mapping) else None
        self.policy = name if isinstance(name, str) else ""
        if top.get("apiVersion") != API_VERSION:
            self.problem("apiVersion", f"must be {API_VERSION}")
        if not self.policy:
            self.problem("metadata.name", "every WorkloadKind needs a name")
        if self.namespace is not None:
            self.problem(
                "kind", "WorkloadKind documents belong in the webhook's namespace: they change every namespace"
            )
        spec = self.mapping(top.get("spec"), "spec", _WORKLOAD_SPEC)
        group = spec.get("group", "")
        if not isinstance(group, str):
            self.problem("spec.group", 'must be a string ("" for the core group)')
        kind = self.string(spec.get("kind"), "spec.kind")
        if kind is None:
            self.problem("spec.kind", "the kind of object, e.g. TrainJob")
        resource = spec.get("resource", "")
        if not isinstance(resource, str):
            self.problem("spec.resource", "must be a string (the plural the API server serves)")
        made_by = spec.get("madeBy", "")
        if not isinstance(made_by, str):
            self.problem("spec.madeBy", "must be a string (who makes the kind's pods)")
        cluster_scoped = spec.get("clusterScoped", False)
        if not isinstance(cluster_scoped, bool):
            self.problem("spec.clusterScoped", "must be true or false")
        sites = self.sites(spec.get("templates"), "spec.templates")
        if self.problems or kind is None:
            return None
        built_in = BUILT_IN_TABLE.find(f"{group}/v1" if group else "v1", kind)
        if built_in is not None:
            reads = ", ".join(site.dotted for site in built_in.sites)
            self.advise(
                "spec.kind", f"replaces the built-in {kind} of {group or 'the core group'}, which reads {reads}"
            )
        where = f"{self.document.file}:{self.document.line}"
        source = f"WorkloadKind {self.policy} ({where})"
        return WorkloadKind(str(group), kind, sites, str(resource), source, str(made_by), bool(cluster_scoped))

    def sites(self, raw: object, path: str) -> tuple[Site, ...]:
        if not isinstance(raw, list) or not raw:
            self.problem(path, "a list of {path, form, replicas, pod}: where the kind's pods' asks are")
            return ()
        sites = []
        for i, item in enumerate(raw):
            at = f"{path}[{i}]"
            fields = self.mapping(item, at, _SITE)
            dotted = self.string(fields.get("path"), f"{at}.path")
            if dotted is None:
                self.problem(f"{at}.path", "a dotted path such as spec.workers.*.template")
                continue
            form_text = fields.get("form", Form.TEMPLATE.value)
            try:
                form = Form(form_text)
            except ValueError:
                self.problem(f"{at}.form", f"must be one of: {', '.join(f.value for f in Form)}")
                continue
            counted = self.strings(fields.get("replicas"), f"{at}.replicas")
            wildcards = split(dotted).count(WILDCARD)
            for j, replicas in enumerate(counted):
                if split(replicas).count(WILDCARD) > wildcards:
                    self.problem(f"{at}.replicas[{j}]", f"has more {WILDCARD} than the path it counts")
            pod = fields.get("pod", "")
            if not isinstance(pod, str) or (pod and form is not Form.RESOURCES):
                self.problem(f"{at}.pod", "a dotted path to the pod-level fields, for a `resources` site only")
                continue
            if split(pod).count(WILDCARD) > wildcards:
                self.problem(f"{at}.pod", f"has more {WILDCARD} than the path it goes with")
                continue
            sites.append(Site(split(dotted), form, tuple(split(r) for r in counted), pod=split(pod)))
        return tuple(sites)
