"""`gpu-admission test DIR`: policy tests, as `kyverno test` and `gator verify` users write them.

A test file (any YAML under DIR holding `kind: Test` documents) names policy files, resource
files, an optional cluster state and what is expected of each resource:

    apiVersion: gpu-admission.io/v1alpha1
    kind: Test
    metadata: {name: team-a}
    policies: [../training-quota.yaml]      # files or directories, relative to this file
    resources: [resources/team-a.yaml]
    clusterState: cluster.yaml              # optional: counted pods, namespace labels, nodes
    namespace: team-a                       # optional: for resources that name none
    results:
      - resource: Pod/train                 # Kind/name, as the resource files have it
        result: denied                      # allowed | denied | warned
        policy: team-a-training             # optional: the verdict must be this policy's ...
        rule: require-team-label            # ... and this rule's
        patched:                            # optional: fields after mutation
          spec.containers[0].resources.limits: {nvidia.com/mig-3g.40gb: "1"}

Resources are judged in file order as `validate` judges them (earlier pods count against quotas
for later ones). Exit 0 when every result holds, 1 on any mismatch, 2 when a test, policy or
resource cannot be read.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.etree import ElementTree

from policies import Engine, InputError
from webhook.cli.inputs import DEFAULT_NAMESPACE, files_of
from webhook.cli.offline import Judged, judge_all
from webhook.cli.parsing import command, regex
from webhook.sources.policy_files import load_policies, read_manifests

EXIT_OK, EXIT_FAILED, EXIT_BAD_INPUT = 0, 1, 2
TEST_KIND = "Test"
_TEST_FIELDS = frozenset(
    {"apiVersion", "kind", "metadata", "policies", "resources", "clusterState", "namespace", "results"}
)
_RESULT_FIELDS = frozenset({"resource", "result", "policy", "rule", "patched"})
_OUTCOMES = ("allowed", "denied", "warned")
_PATH_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


@dataclass
class Outcome:
    test: str
    resource: str
    expected: str
    passed: bool
    reason: str = ""


@dataclass
class Report:
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def failed(self) -> list[Outcome]:
        return [o for o in self.outcomes if not o.passed]


def _bad(where: str, message: str) -> InputError:
    return InputError("", message, where)


def find_tests(directory: str) -> list[tuple[Path, dict[str, Any]]]:
    found: list[tuple[Path, dict[str, Any]]] = []
    for name in files_of(directory):
        path = Path(name)
        for label, document in read_manifests(name):
            if isinstance(document, dict) and document.get("kind") == TEST_KIND:
                unknown = set(document) - _TEST_FIELDS
                if unknown:
                    raise _bad(label, f"unknown test fields: {', '.join(sorted(unknown))}")
                found.append((path, document))
    return found


def _paths(base: Path, raw: object, where: str) -> list[Path]:
    if raw is None:
        return []
    if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
        raise _bad(where, "must be a list of paths")
    return [base / item for item in raw]


def _at(document: object, dotted: str) -> object:
    node = document
    for key, index in _PATH_PART.findall(dotted):
        if index:
            node = node[int(index)] if isinstance(node, list) and int(index) < len(node) else None
        else:
            node = node.get(key) if isinstance(node, dict) else None
    return node


def _check(expected: dict[str, Any], judged: Judged) -> str:
    """Why a result does not hold ("" when it does)."""
    outcome = expected.get("result")
    policy, rule = expected.get("policy"), expected.get("rule")
    verdicts = judged.decision.verdicts
    of_interest = [v for v in verdicts if (policy is None or v.policy == policy) and (rule is None or v.rule == rule)]
    denials = [v for v in of_interest if v.action.value == "deny"]
    warnings = [v for v in of_interest if v.action.value == "warn"]
    said = "; ".join(f"{v.action.value} by {v.policy}/{v.rule}" for v in verdicts) or "no verdict"
    by = f" by {policy or '*'}/{rule or '*'}" if policy or rule else ""
    if outcome == "denied" and (judged.decision.allowed or not denials):
        return f"expected denied{by}, got {'allowed' if judged.decision.allowed else 'denied'} ({said})"
    if outcome == "warned" and (not judged.decision.allowed or not warnings):
        return f"expected warned{by}, got {'allowed' if judged.decision.allowed else 'denied'} ({said})"
    if outcome == "allowed" and (not judged.decision.allowed or (by and (denials or warnings))):
        return f"expected allowed{by}, got {'allowed' if judged.decision.allowed else 'denied'} ({said})"
    for dotted, value in (expected.get("patched") or {}).items():
        found = _at(judged.mutation.object, str(dotted))
        if found != value:
            return f"expected {dotted} = {json.dumps(value)}, got {json.dumps(found)}"
    return ""


def run_test(path: Path, test: dict[str, Any]) -> list[Outcome]:
    metadata = test.get("metadata")
    name = str((metadata.get("name") if isinstance(metadata, dict) else None) or path.name)
    where = f"{path} (test {name})"
    policies = _paths(path.parent, test.get("policies"), f"{where}: policies")
    policy_set, loaded = load_policies(policies or None)
    if loaded.problems:
        raise _bad(where, "; ".join(str(p) for p in loaded.problems))
    engine = Engine(policy_set)
    state = test.get("clusterState")
    namespace = str(test.get("namespace") or DEFAULT_NAMESPACE)
    resources = [str(p) for p in _paths(path.parent, test.get("resources"), f"{where}: resources")]
    cluster_state = str(path.parent / state) if isinstance(state, str) else None
    _, results = judge_all(engine, resources, namespace, cluster_state, webhook=None)
    judged = {_resource_key(r.mutation.object): r for r in results}
    outcomes = []
    for i, expected in enumerate(test.get("results") or []):
        if not isinstance(expected, dict) or set(expected) - _RESULT_FIELDS or expected.get("result") not in _OUTCOMES:
            raise _bad(
                where,
                f"results[{i}]: needs resource and result ({', '.join(_OUTCOMES)}); may name policy, rule, patched",
            )
        resource = str(expected.get("resource"))
        found = judged.get(resource)
        reason = _check(expected, found) if found else f"no judged resource {resource} in {', '.join(resources)}"
        outcomes.append(Outcome(name, resource, str(expected["result"]), not reason, reason))
    return outcomes


def _resource_key(document: object) -> str:
    """`Kind/name`, as a test's results name a resource."""
    metadata = document.get("metadata") if isinstance(document, dict) else None
    name = metadata.get("name") if isinstance(metadata, dict) else ""
    return f"{document.get('kind') if isinstance(document, dict) else ''}/{name}"


def _junit(report: Report) -> str:
    suite = ElementTree.Element(
        "testsuite", name="gpu-admission", tests=str(len(report.outcomes)), failures=str(len(report.failed))
    )
    for outcome in report.outcomes:
        case = ElementTree.SubElement(
            suite, "testcase", classname=outcome.test, name=f"{outcome.resource} {outcome.expected}"
        )
        if not outcome.passed:
            ElementTree.SubElement(case, "failure", message=outcome.reason)
    return str(ElementTree.tostring(suite, encoding="unicode"))


def cmd_test(args: argparse.Namespace) -> int:
    report = Report()
    tests = [found for directory in args.paths for found in find_tests(directory)]
    if not tests:
        print(f"no {TEST_KIND} documents under {', '.join(args.paths)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    for path, test in tests:
        report.outcomes.extend(run_test(path, test))
    if args.selected:  # --run, as gator verify's: only the results whose test or resource it finds
        pattern = re.compile(args.selected)
        report.outcomes = [o for o in report.outcomes if pattern.search(o.test) or pattern.search(o.resource)]
        if not report.outcomes:
            print(f"no test or resource matches --run {args.selected!r}", file=sys.stderr)
            return EXIT_BAD_INPUT
    passed = len(report.outcomes) - len(report.failed)
    if args.output == "json":
        summary = {"tests": len(tests), "results": len(report.outcomes), "passed": passed, "failed": len(report.failed)}
        print(json.dumps({"summary": summary, "results": [o.__dict__ for o in report.outcomes]}, indent=2))
    elif args.output == "junit":
        print(_junit(report))
    else:
        for outcome in report.outcomes:
            mark = "PASS" if outcome.passed else "FAIL"
            print(
                f"{mark} {outcome.test}: {outcome.resource} {outcome.expected}"
                + (f": {outcome.reason}" if outcome.reason else "")
            )
    print(f"{len(tests)} tests, {passed} results passed, {len(report.failed)} failed", file=sys.stderr)
    return EXIT_FAILED if report.failed else EXIT_OK


def register(commands: Any, root: argparse.ArgumentParser) -> None:
    """The command, its options and exit codes."""
    test = command(
        commands,
        "test",
        "run policy tests (kind: Test files)",
        "Runs every `kind: Test` document under DIR: its policies judge its resources (with its cluster "
        "state) and each expected result (allowed, denied or warned, by which policy and rule, patched "
        "fields) is checked. The format is in webhook/cli/policytest.py and the README.",
        "0 every result holds; 1 a result does not; 2 a test, policy or resource that cannot be read",
    )
    test.add_argument("paths", nargs="+", metavar="DIR", help="directories (or files) holding Test documents")
    test.add_argument("-o", "--output", choices=("text", "json", "junit"), default="text", help="default text")
    test.add_argument(
        "--run",
        dest="selected",
        metavar="REGEX",
        type=regex,
        help="only the results whose test or resource name this finds",
    )
    test.set_defaults(run=cmd_test)
