"""The workloads webhook's matchCondition, written from the workload kinds table.

The API server evaluates it before calling the webhook, so objects whose pod templates ask for
no GPU never leave it: a ConfigMap-sized Workflow with no GPU costs the cluster nothing, and an
outage of the webhook (failurePolicy Ignore there) delays nothing. It is generated, not written,
so a kind added to the table is covered the same way; `deploy/base/webhooks.yaml` holds the
output and a test keeps the two equal.

Webhook match conditions see `object` untyped (one webhook serves many resources), so a `*` in a
site's path, which may stand for list items or map values, is written for both.
"""

from __future__ import annotations

from collections.abc import Callable

from policies.model.workload_kinds import BUILT_IN
from policies.model.workloads import KSERVE_MODEL_FIELDS, WILDCARD, Form, Over, WorkloadKind
from policies.native.reach import BOUND  # every comprehension reads at most BOUND items

_ASKS = "r.startsWith('nvidia.com/')"


def bounded(collection: str, predicate: str, variable: str) -> str:
    """`collection.exists(variable, predicate)`, or true past BOUND items (the webhook decides)."""
    return f"(size({collection}) > {BOUND} || {collection}.exists({variable}, {predicate}))"


def _is(x: str, kind: str) -> str:
    # A custom resource may carry an empty YAML key as null (`annotations:`): test the type
    # before use, since an error in a matchCondition skips the webhook.
    return f"has({x}) && type({x}) == {kind}"


def _container(c: str) -> str:
    limits, requests = f"{c}.resources.limits", f"{c}.resources.requests"
    return (
        f"{_is(f'{c}.resources', 'map')} && (({_is(limits, 'map')} && {bounded(limits, _ASKS, 'r')}) || "
        f"({_is(requests, 'map')} && {bounded(requests, _ASKS, 'r')}))"
    )


def _pod_spec(s: str, depth: int) -> str:
    c = f"c{depth}"
    lists = (
        f"({_is(f'{s}.{field}', 'list')} && {bounded(f'{s}.{field}', f'type({c}) == map && {_container(c)}', c)})"
        for field in ("containers", "initContainers")
    )
    runtime = f"({_is(f'{s}.runtimeClassName', 'string')} && {s}.runtimeClassName.startsWith('nvidia'))"
    return " || ".join((*lists, runtime, _claims(s, "resourceClaims")))


def _claims(s: str, field: str) -> str:
    """DRA claims every pod made from it names (each allocated, used by a container or not)."""
    return f"({_is(f'{s}.{field}', 'list')} && size({s}.{field}) > 0)"


def _operator_claims(x: str, depth: int) -> str:
    """An operator's pod-level fields: a PodSpec's resourceClaims (Dynamo's extraPodSpec) or the
    NIM Operator's draResources."""
    return f"{_claims(x, 'resourceClaims')} || {_claims(x, 'draResources')}"


def _at_site(x: str, form: Form, depth: int, model: bool = True) -> str:
    if form is Form.TEMPLATE:
        annotations = f"{x}.metadata.annotations"
        triton = (
            f"({_is(f'{x}.metadata', 'map')} && {_is(annotations, 'map')} && "
            f"'gpu-admission.io/triton' in {annotations})"
        )
        return f"({_is(f'{x}.spec', 'map')} && ({_pod_spec(f'{x}.spec', depth)})) || {triton}"
    if form is Form.RESOURCES:
        # A ResourceRequirements, or an operator's map: a bare `gpu` count, or `custom` resources.
        asks = f"{_ASKS} || r == 'gpu' || r == 'custom'"
        parts = (
            f"({_is(f'{x}.{part}', 'map')} && {bounded(f'{x}.{part}', asks, 'r')})" for part in ("limits", "requests")
        )
        return " || ".join((*parts, bounded(x, asks, "r")))
    if form is Form.PODSPEC and not model:
        return _pod_spec(x, depth)
    if form is Form.PODSPEC:
        fields = ", ".join(f"'{m}'" for m in KSERVE_MODEL_FIELDS)
        m = f"m{depth}"
        in_model = f"{m} in {x} && type({x}[{m}]) == map && {_container(f'{x}[{m}]')}"
        return f"{_pod_spec(x, depth)} || [{fields}].exists({m}, {in_model})"
    return " || ".join(f"({_is(f'{x}.{f}', 'map')} && {_container(f'{x}.{f}')})" for f in ("container", "script"))


def _path(
    base: str,
    path: tuple[str, ...],
    form: Form,
    over: Over,
    depth: int = 0,
    model: bool = True,
    at: Callable[[str, int], str] | None = None,
) -> str:
    """The condition that `path` from `base` leads to a site of `form` asking for GPUs (or what
    `at` says of the value there)."""
    if not path:
        return at(base, depth) if at is not None else _at_site(base, form, depth, model)
    head, rest = path[0], path[1:]
    if head == WILDCARD:
        k, v = f"k{depth}", f"v{depth}"
        on_map = bounded(base, _path(f"{base}[{k}]", rest, form, over, depth + 1, model, at), k)
        on_list = bounded(base, _path(v, rest, form, over, depth + 1, model, at), v)
        if over is Over.MAP:
            return on_map
        if over is Over.LIST:
            return on_list
        return f"(type({base}) == map ? {on_map} : {on_list})"
    field = f"{base}.{head}"
    inner = _path(field, rest, form, over, depth, model, at)
    if rest and rest[0] == WILDCARD:
        kind = {Over.MAP: "map", Over.LIST: "list"}.get(over)
        return f"{_is(field, kind) if kind else f'has({field})'} && ({inner})"
    return f"{_is(field, 'map')} && ({inner})"


def kind_condition(entry: WorkloadKind) -> str:
    sites = [f"({_path('object', site.path, site.form, site.over, model=site.model)})" for site in entry.sites]
    # Where an operator builds the pods, the claims it gives each sit beside the resources.
    sites += [
        f"({_path('object', site.pod, site.form, site.over, at=_operator_claims)})"
        for site in entry.sites
        if site.form is Form.RESOURCES and site.pod
    ]
    return f"(object.kind == '{entry.kind}' && ({' || '.join(sites)}))"


def custom_kinds(kinds: tuple[WorkloadKind, ...] = BUILT_IN) -> tuple[WorkloadKind, ...]:
    """The kinds the workloads webhook serves: the core controllers have their own entry."""
    return tuple(k for k in kinds if k.group not in ("apps", "batch"))
