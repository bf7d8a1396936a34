"""The first-day script (tools/first_day.py) against the real control plane, as part of the e2e
suite (#41): a platform team's first day, each step through real kubectl, the outage a real one
(every replica stopped, one started afresh)."""

from __future__ import annotations

from tests.e2e.harness import Installation
from tools.first_day import FirstDay


def test_a_platform_teams_first_day_goes_as_the_docs_say(installation: Installation):
    kubectl = installation.kubectl

    def outage() -> None:
        for replica in installation.replicas:
            replica.stop()

    def restart() -> None:
        installation.replica("gpu-admission-0").wait_ready()

    day = FirstDay([str(kubectl.binary)], outage, restart, env=kubectl.env())
    outcomes = day.day()
    assert len(outcomes) >= 12
    assert [str(o) for o in outcomes if not o.ok] == []
    # It leaves nothing behind: no pod of its own holding a GPU slice the next tests need.
    assert kubectl.run("get", "namespace", "first-day", check=False).code != 0
