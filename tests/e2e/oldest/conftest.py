"""This lane's control plane, on the oldest release we support: its own, started when the lane's
first test needs it and stopped after its last, before the newest release's plane starts (pytest
collects this folder before the test modules beside it)."""

from __future__ import annotations

from tests.e2e.controlplane.build import OLDEST_VERSION
from tests.e2e.lanes import lane

control_plane, kubectl, installation = lane(OLDEST_VERSION)
