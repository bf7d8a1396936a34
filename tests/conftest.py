"""The suite's fixtures and its end; what tests share lives in tests/support."""

from __future__ import annotations

import os
import sys
import threading

import pytest

from policies.engine import COMPILED, Engine
from tests.support.builders import PatchCheckingEngine

if os.environ.get("GPU_ADMISSION_EXPECT_COMPILED") and not COMPILED:  # tests/engine/test_compiled_engine.py
    raise RuntimeError("the suite was to run against the compiled engine, but imported the source")


@pytest.fixture
def default_engine() -> Engine:
    from webhook.sources.policy_files import load_policies

    policy_set, result = load_policies(None)
    assert not result.problems
    return PatchCheckingEngine(policy_set)


@pytest.fixture
def kube():
    """The in-process API server (tests/support/kube_fake.py), empty; files that need objects in it at
    the start request this fixture from their own `kube` and add them."""
    from tests.support.kube_fake import FakeKube

    fake = FakeKube()
    fake.start()
    yield fake
    fake.stop()


@pytest.fixture
def replicas(kube):
    """Webhook replicas a test starts against `kube` (tests.support.cluster.start), each stopped
    at its end."""
    started: list = []
    yield started
    for replica in started:
        replica.stop()


@pytest.fixture
def kube_on_path(kube, tmp_path, monkeypatch):
    """The fake API server as KUBECONFIG names it, for code that loads its own configuration."""
    monkeypatch.setenv("KUBECONFIG", str(kube.kubeconfig(tmp_path / "kubeconfig")))
    return kube


# -- the end of the run -------------------------------------------------------------------------------
# Every thread a test starts is stopped by it (the quick suite ends with the main thread alone and
# the interpreter finalizes as usual). A thread left running used to make CPython abort while it
# finalized, after every test had passed and been reported (exit 134: a watch thread of a test that
# stopped its watches but not the replica's background threads, writing to stderr). Should one be
# left again, the run names it and leaves with the verdict already reached, as os._exit does.
_EXIT_STATUS: list[int] = []


@pytest.hookimpl(trylast=True)
def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    _EXIT_STATUS.append(int(exitstatus))


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config: pytest.Config) -> None:
    if not _EXIT_STATUS or threading.active_count() == 1:
        return  # nothing left running: finalize as usual
    left = sorted(t.name for t in threading.enumerate() if t is not threading.main_thread())
    print(f"threads a test left running: {', '.join(left)}", file=sys.stderr)  # each one is a test to fix
    # The summary line is in the terminal writer's buffer (its own file, not sys.stdout, while
    # output is captured): flushed, it reaches a pipe too (`pytest | tail`).
    config.get_terminal_writer().flush()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_EXIT_STATUS[-1])
