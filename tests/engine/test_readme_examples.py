"""The documentation's examples are run: every YAML block of the README and docs/ that is a policy,
a part of one, a WorkloadKind or a manifest the engine judges is loaded as `lint` loads it, or
judged as `validate` judges it. An example that does not load is a failing test, not a reader's
surprise (the README's TrainJob WorkloadKind once named fields TrainJob does not have)."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import pytest
import yaml

from policies.engine import Engine
from policies.judge.quota import NoUsage
from policies.model import loader
from policies.model.loader import load_texts
from webhook.sources.policy_files import load_policies

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
BLOCK = re.compile(r"^( *)```yaml\n(.*?)^ *```", re.S | re.M)
OURS = "gpu-admission.io/"


def blocks() -> list[object]:
    found = []
    for page in PAGES:
        text = page.read_text()
        for match in BLOCK.finditer(text):
            line = text[: match.start()].count("\n") + 1
            body = textwrap.dedent(match.group(2))
            found.append(pytest.param(body, id=f"{page.relative_to(ROOT)}:{line}"))
    return found


def as_policy(fragment: dict) -> str:
    """A part of a policy's spec (`rules:`, `quota:` ...) as the policy it belongs in."""
    document = {"apiVersion": f"{OURS}v1alpha1", "kind": "GPUPolicy", "metadata": {"name": "readme"}}
    return yaml.safe_dump({**document, "spec": fragment})


ENGINE = Engine(load_policies(None)[0])


@pytest.mark.parametrize("body", blocks())
def test_every_yaml_example_in_the_docs_loads_or_is_judged(body):
    documents = [d for d in yaml.safe_load_all(body) if d is not None]
    assert documents, "an empty example"
    for document in documents:
        if not isinstance(document, dict):
            continue
        if str(document.get("apiVersion", "")).startswith(OURS):
            if document.get("kind") == "Test":
                continue  # policy tests: run from examples/policies/tests by test_policy_tests.py
            result = load_texts((("readme.yaml", yaml.safe_dump(document)),))
            assert not result.problems, [str(p) for p in result.problems]
        elif "apiVersion" not in document and set(document) <= loader._SPEC:
            result = load_texts((("readme.yaml", as_policy(document)),))
            assert not result.problems, [str(p) for p in result.problems]
        elif ENGINE.judges(document.get("apiVersion"), document.get("kind")):
            mutated = ENGINE.mutate_any(document)
            ENGINE.validate(mutated.object if document["kind"] == "Pod" else document, NoUsage())


def test_the_docs_have_examples_of_each_kind():
    kinds = {
        str(d.get("kind"))
        for param in blocks()
        for d in yaml.safe_load_all(param.values[0])
        if isinstance(d, dict) and "kind" in d
    }
    assert {"Pod", "WorkloadKind", "Test"} <= kinds


def test_the_readme_is_a_front_page_with_the_two_set_up_commands_linking_every_docs_page():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 200
    assert "pip install -c constraints.txt -e '.[dev]' && .venv/bin/python -m pytest" in text
    assert "pip install -c constraints.txt -e . && .venv/bin/gpu-admission serve" in text
    pages = {p.name for p in (ROOT / "docs").glob("*.md")} - {"index.md"}
    assert pages == set(re.findall(r"\]\(docs/([\w-]+\.md)\)", text))
