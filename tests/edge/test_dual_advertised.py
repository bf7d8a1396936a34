"""Nodes whose GPUs both the device plugin and NVIDIA's DRA driver advertise (a device-plugin node
where the DRA driver was turned on too): found by each replica (a gauge), by `lint
--cluster-state` and by `quota`, and counted once as free capacity (tests/engine/test_dra_capacity.py)."""

from __future__ import annotations

import json
from typing import Any

from tests.support.builders import policy
from tests.support.cluster import eventually, node, start
from tests.support.dra import resource_slice, slice_device
from webhook.cli.main import main
from webhook.metrics import exposition

H100 = "NVIDIA H100 80GB HBM3"


def both_ways(name: str) -> list[dict[str, Any]]:
    """A node whose device plugin advertises two GPUs, and the DRA driver's slice of the same node."""
    return [node(name, "NVIDIA-H100-80GB-HBM3", {"gpu": "2"}), resource_slice(name, slice_device("gpu-0", H100))]


def gauge() -> float | None:
    for line in exposition().decode().splitlines():
        if line.startswith("gpu_admission_dual_advertised_nodes "):
            return float(line.split()[-1])
    return None


def test_a_replica_counts_the_nodes_its_watches_show_advertised_twice(kube, replicas):
    device_plugin_only = node("plugin-1", "NVIDIA-H100-80GB-HBM3", {"gpu": "8"})
    dra_only = resource_slice("dra-1", slice_device("gpu-0", H100))
    kube.store("nodes", device_plugin_only)
    kube.store("resourceslices", dra_only)
    start(kube, replicas)
    assert eventually(lambda: gauge() == 0)
    twice, its_slice = both_ways("mixed-1")
    kube.store("nodes", twice)
    kube.store("resourceslices", its_slice)
    assert eventually(lambda: gauge() == 1)
    kube.delete("", its_slice["metadata"]["name"], "resourceslices")
    assert eventually(lambda: gauge() == 0)


def state_file(tmp_path: Any, items: list[dict[str, Any]]) -> str:
    path = tmp_path / "cluster.json"
    path.write_text(json.dumps({"apiVersion": "v1", "kind": "List", "items": items}))
    return str(path)


def test_lint_with_the_cluster_state_names_them(tmp_path, capsys):
    (tmp_path / "p.yaml").write_text(policy("p", "mig: {allowedProfiles: [1g.10gb]}"))
    state = state_file(tmp_path, both_ways("mixed-1"))
    assert main(["lint", str(tmp_path / "p.yaml"), "--cluster-state", state, "--strict"]) == 1
    out = capsys.readouterr().out
    assert "nodes mixed-1: their GPUs are advertised both by the device plugin and by NVIDIA's DRA driver" in out
    assert "mig.dualAdvertisedNodes: avoid" in out


def test_quota_names_them_beside_the_budgets(tmp_path, capsys):
    (tmp_path / "p.yaml").write_text(policy("p", 'quota: {limits: {gpuEquivalents: "4"}}'))
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "default"}}
    state = state_file(tmp_path, [namespace, *both_ways("mixed-1")])
    assert main(["quota", "--cluster-state", state, "--policies", str(tmp_path / "p.yaml"), "-n", "default"]) == 0
    said = capsys.readouterr().err
    assert "nodes mixed-1: GPUs advertised both by the device plugin and by NVIDIA's DRA driver" in said
