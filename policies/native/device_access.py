"""Device-access checks as ValidatingAdmissionPolicies: what a pod writes itself to reach GPU
devices past the device plugin, refused by the API server, as the webhook refuses it
(policies.judge.security), where the pod alone says so.

Which settings hold is the first cluster policy in precedence order with a `security` section
(all checks on and denying where none has one): so the checks of a policy with one,
`gpu-admission.<policy>.security`, hold where it matches and no cluster policy before it with
one does, its allowances left out and its action the binding's; and `gpu-admission-default-
security`, every check denying, holds where some cluster policy matches and none with a
`security` section does. A team's namespaced policy may only tighten them: the webhook keeps
that.

Native only where the pod alone shows the breach, read so that every pod refused here is
refused by the webhook too (the webhook may refuse more):
- deviceEnv: NVIDIA_VISIBLE_DEVICES & co. from valueFrom, or set to a value of printable ASCII
  other than void and none; CUDA_VERSION without NVIDIA_REQUIRE_CUDA is left to the webhook (it
  turns on whether the container holds a GPU as the engine reads it);
- envFrom: a prefix NVIDIA's variables start with, in any pod; none, in a pod naming a GPU
  resource (`nvidia.com/gpu`, a MIG slice; other ways to reach a GPU are the webhook's);
- hostDevices: a hostPath, or a mount of the toolkit's device list, whose path is already in
  normal form (no `//`, `.` or `..`: Kubernetes resolves those, and so does the webhook);
- cdiDevices: a `cdi.k8s.io/` annotation naming `nvidia.com/` devices, or the NRI plugin's key
  with a value holding a letter or digit.
Containers and init containers (a pod is created without ephemeral ones). Each breach is
denied with the engine's words, its field path and the rule, `security.<check>`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from policies.gpu.devices import (
    CDI_ANNOTATION_PREFIX,
    CDI_VENDOR,
    DEVICE_ENV,
    DEVICE_LIST_MOUNT,
    DEVICE_ROOTS,
    NRI_CDI_ANNOTATION,
)
from policies.gpu.models import MIG_RESOURCE_PREFIX, WHOLE_GPU_RESOURCE
from policies.judge.security import CDI, DEVICE_LIST, FROM_VALUE, GRANTS, HOST_DEVICES, PREFIXED, UNPREFIXED
from policies.model.policy import DEFAULT_SECURITY, DeviceCheck, GPUPolicy, SecuritySpec
from policies.native.matching import cel_string, matches, reachable
from policies.native.objects import (
    SECURITY,
    TOO_LONG,
    Uncovered,
    admission_policy,
    binding,
    metadata,
    nonzero,
    object_name,
    one_line,
    scoped_policy,
    too_long,
)

# Not under `gpu-admission.`, where every policy's own objects are: no policy name can take it.
DEFAULT_NAME = "gpu-admission-default-security"
CONTAINERS = ("containers", "initContainers")
_NAMES = "[" + ", ".join(cel_string(n) for n in sorted(DEVICE_ENV)) + "]"
# A path already in normal form, which Kubernetes and the engine read as written.
_PLAIN = "!{path}.matches('//|(^|/)[.][.]?(/|$)')"
# A value the engine reads as this reads it: printable ASCII, white space only around it.
_ASCII = r"^\s*[!-~]([ -~]*[!-~])?\s*$"


def _host_reaches() -> str:
    """RE2 for a plain host path reaching the node's GPU devices: under a device root, or a
    directory above one, or the root; /var/run is the host's /run."""

    def spelled(root: str) -> str:
        body = re.escape(root.lstrip("/"))
        return f"(var/)?{body}" if root.startswith("/run/") else body

    ancestors: set[str] = set()
    for root in DEVICE_ROOTS:
        parts = root.strip("/").split("/")
        ancestors.update("/".join(parts[:i]) for i in range(1, len(parts)))
    ancestors |= {"var/" + a for a in ancestors if a == "run" or a.startswith("run/")}
    under = "|".join(spelled(root) for root in DEVICE_ROOTS)
    above = "|".join(re.escape(a) for a in sorted(ancestors))
    return f"^/?((?:{under})|(?:{above})/?$|$)"


_HOST = _host_reaches()
_LISTS = f"^/?(var/)?run/{re.escape(DEVICE_LIST_MOUNT.removeprefix('/var/run/'))}(/|$)"


def device_access(
    ordered: Sequence[GPUPolicy], left_alone: Sequence[str]
) -> tuple[list[dict[str, object]], list[str], bool, list[Uncovered]]:
    """The checks of `ordered` (policies in precedence order), the policies they come from,
    whether the default checks are among them, and what is left to the webhook (conditions past
    what the API server takes)."""
    cluster = reachable([p for p in ordered if p.namespace is None])
    deciders = reachable([p for p in cluster if p.security is not None])
    match = {p.name: matches(p) for p in cluster}  # each policy's, once: read by those after it
    breaches = _variables()
    objects: list[dict[str, object]] = []
    names: list[str] = []
    left: list[Uncovered] = []
    for index, policy in enumerate(deciders):
        spec = policy.security or DEFAULT_SECURITY  # set: a decider has one
        validations = _validations(spec, cel_string(one_line(policy.name)))
        if not validations:
            continue
        name = object_name(policy.name, SECURITY)
        unless = [match[before.name] for before in deciders[:index]]
        checks = admission_policy(policy, name, validations, left_alone, breaches, unless)
        if too_long(checks):
            left.append(Uncovered(policy.name, "security", f"{index} policies before it: {TOO_LONG}"))
            continue
        objects += [checks, binding(policy, name, spec.action)]
        names.append(policy.name)
    if not cluster:
        return objects, names, False, left
    if deciders and match[deciders[-1].name] == "true":
        return objects, names, False, left  # a policy's settings hold for every pod: no defaults
    # The first matching policy names the defaults in the engine's messages: a variable, as a
    # matchCondition cannot hand a value to the validations. A list, not a chain of ?: (which
    # nests once a policy, and CEL's parser stops at 250 deep).
    named = ", ".join(
        f"({match[p.name]}) ? {cel_string(one_line(p.name) + ', default security')} : ''" for p in cluster
    )
    variables = [*breaches, ("owner", f"[{named}].filter(n, n != '')[0]")]
    anyone = " || ".join(f"({match[p.name]})" for p in cluster)
    none_decides = [f"!({match[p.name]})" for p in deciders]
    meta = metadata(None, DEFAULT_NAME)
    validations = _validations(DEFAULT_SECURITY, "variables.owner")
    defaults = scoped_policy(meta, [anyone], none_decides, validations, left_alone, variables)
    if too_long(defaults):
        left.append(Uncovered("(the defaults)", "security", f"{len(cluster)} cluster policies: {TOO_LONG}"))
        return objects, names, False, left
    objects += [defaults, binding(None, DEFAULT_NAME, DEFAULT_SECURITY.action, meta)]
    return objects, names, True, left


def _variables() -> list[tuple[str, str]]:
    """Per container list, for each container, for each entry: whether it is a breach."""
    spec = "object.spec"
    found: list[tuple[str, str]] = []
    held = f"r.startsWith({cel_string(MIG_RESOURCE_PREFIX)}) || r == {cel_string(WHOLE_GPU_RESOURCE)}"
    holds = " || ".join(
        f"(has({spec}.{field}) && {spec}.{field}.exists(c, has(c.resources) && has(c.resources.limits) && "
        f"c.resources.limits.exists(r, ({held}) && {nonzero('c.resources.limits[r]')})))"
        for field in CONTAINERS
    )
    found.append(("holdsGpu", holds))  # first: a variable reads only those before it
    for field in CONTAINERS:
        items = f"{spec}.{field}"
        found.append((f"env_{field}", _per_item(items, "env", "e", _env_breach("e"))))
        found.append((f"envFrom_{field}", _per_item(items, "envFrom", "f", _env_from_breach("f"))))
        mount = f"({_PLAIN.format(path='m.mountPath')} && m.mountPath.matches({cel_string(_LISTS)}))"
        found.append((f"volumeMounts_{field}", _per_item(items, "volumeMounts", "m", mount)))
    path = "v.hostPath.path"
    host = f"has(v.hostPath) && {_PLAIN.format(path=path)} && {path}.matches({cel_string(_HOST)})"
    found.append(("volumes", f"!has({spec}.volumes) ? [] : {spec}.volumes.map(v, {host})"))
    annotations = "object.metadata.annotations"
    found.append(("cdi", f"!has({annotations}) ? [] : {annotations}.filter(k, {_cdi_breach(annotations, 'k')})"))
    return found


def _per_item(items: str, field: str, name: str, breach: str) -> str:
    return f"!has({items}) ? [] : {items}.map(c, !has(c.{field}) ? [] : c.{field}.map({name}, {breach}))"


def _env_breach(e: str) -> str:
    value = f"{e}.value"
    named = f"{e}.name in {_NAMES}"
    grants = f"!({value}.trim().lowerAscii() in ['void', 'none'])"
    from_value = f"(has({e}.valueFrom) && !has({value}))"
    written = f"(has({value}) && {value}.matches({cel_string(_ASCII)}) && {grants})"
    return f"{named} && ({from_value} || {written})"


def _env_from_breach(f: str) -> str:
    prefixed = f"has({f}.prefix) && {f}.prefix != ''"
    return f"({prefixed}) ? {_NAMES}.exists(n, n.startsWith({f}.prefix)) : variables.holdsGpu"


def _cdi_breach(annotations: str, k: str) -> str:
    value = f"{annotations}[{k}]"
    nri = f"({k} == {cel_string(NRI_CDI_ANNOTATION)} || {k}.startsWith({cel_string(NRI_CDI_ANNOTATION + '/')}))"
    cdi = f"{k}.startsWith({cel_string(CDI_ANNOTATION_PREFIX)}) && {value}.contains({cel_string(CDI_VENDOR)})"
    return f"{nri} ? {value}.matches('[A-Za-z0-9]') : ({cdi})"


def _told_env(entry: str) -> str:
    value = f'(has({entry}.valueFrom) ? {cel_string(" " + FROM_VALUE)} : " = \'" + {entry}.value + "\'")'
    return f"{entry}.name + {value} + {cel_string(GRANTS)}"


def _told_env_from(entry: str) -> str:
    prefixed = f'"envFrom prefix \'" + {entry}.prefix + "\'" + {cel_string(PREFIXED)}'
    return f"(has({entry}.prefix) && {entry}.prefix != '' ? {prefixed} : {cel_string(UNPREFIXED)})"


def _told_mount(entry: str) -> str:
    return f"'a volume mounted at ' + {entry}.mountPath + {cel_string(DEVICE_LIST)}"


# Checks over each entry of each container's list: the check, the list, the engine's words.
_PER_ENTRY = (
    (DeviceCheck.DEVICE_ENV, "env", _told_env),
    (DeviceCheck.ENV_FROM, "envFrom", _told_env_from),
    (DeviceCheck.HOST_DEVICES, "volumeMounts", _told_mount),
)
_FIELD = {"volumeMounts": ".mountPath"}  # the field of the entry a path names, where not the entry


def _validations(spec: SecuritySpec, owner: str) -> list[dict[str, object]]:
    """One validation per check and list, for the checks `spec` does not allow; `owner`: CEL for
    who the message names as setting them."""
    found: list[dict[str, object]] = []
    said = f"' (policy ' + {owner} + ') [rule security."

    def listed(variable: str, check: DeviceCheck, where: str, told: str) -> None:
        """A validation over a per-container variable: the first container, then its first entry."""
        rows = f"variables.{variable}"
        i = f"{rows}.map(l, l.exists(b, b)).indexOf(true)"
        j = f"{rows}[{i}].indexOf(true)"
        message = f"{told.format(i=i, j=j)} + {said}{check.value}, ' + {where.format(i=i, j=j)} + ']'"
        found.append(_validation(f"!{rows}.exists(l, l.exists(b, b))", message, check))

    for check, key, told in _PER_ENTRY:
        if check in spec.allow:
            continue
        for field in CONTAINERS:
            entry = f"object.spec.{field}[{{i}}].{key}[{{j}}]"
            where = f"'spec.{field}[' + string({{i}}) + '].{key}[' + string({{j}}) + ']{_FIELD.get(key, '')}'"
            listed(f"{key}_{field}", check, where, told(entry))
    if DeviceCheck.HOST_DEVICES not in spec.allow:
        i = "variables.volumes.indexOf(true)"
        path = f"object.spec.volumes[{i}].hostPath.path"
        where = f"spec.volumes[' + string({i}) + '].hostPath.path]'"
        message = f"'hostPath ' + {path} + {cel_string(HOST_DEVICES)} + {said}hostDevices, {where}"
        found.append(_validation("!variables.volumes.exists(b, b)", message, DeviceCheck.HOST_DEVICES))
    if DeviceCheck.CDI_DEVICES not in spec.allow:
        k = "variables.cdi[0]"
        named = f"{k} + ': ' + object.metadata.annotations[{k}] + {cel_string(CDI)}"
        message = f"{named} + {said}cdiDevices, metadata.annotations.' + {k} + ']'"
        found.append(_validation("size(variables.cdi) == 0", message, DeviceCheck.CDI_DEVICES))
    return found


def _validation(expression: str, message_expression: str, check: DeviceCheck) -> dict[str, object]:
    return {
        "expression": expression,
        "messageExpression": message_expression,
        "message": f"the pod reaches GPU devices past the device plugin [rule security.{check.value}]",
    }
