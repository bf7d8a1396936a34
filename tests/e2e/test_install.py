"""Installing gpu-admission into a real control plane, in the order a user would."""

from __future__ import annotations

import yaml

from tests.e2e.harness import Installation


def test_before_the_first_replica_is_ready_plain_pods_are_created_and_gpu_pods_are_refused_with_the_reason(
    installation: Installation,
):
    before = installation.before_ready
    assert before["plain"].code == 0, before["plain"].stderr
    assert before["gpu"].code != 0
    assert 'failed calling webhook "mutate.gpu-admission.io"' in before["gpu"].stderr


def test_once_a_replica_is_ready_a_gpu_pod_is_admitted(installation: Installation):
    from tests.e2e.harness import pod

    created = installation.kubectl.create(pod("gpu-after", "install-order", gpus=1))
    assert created.code == 0


def test_the_helm_chart_with_webhook_url_renders_the_webhook_configurations_the_cluster_was_given(
    installation: Installation,
):
    """The same install through Helm: the chart rendered with webhookURL on the replica's address
    gives the webhook configurations `kubectl apply -k` of the e2e overlay gave the cluster."""
    from tests.test_helm_chart import keyed, render

    kinds = ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
    rendered = keyed(o for o in render(webhookURL=f"https://127.0.0.1:{installation.port}") if o["kind"] in kinds)
    overlay = installation.kubectl.run("kustomize", str(installation.workdir / "overlay")).stdout
    applied = keyed(o for o in yaml.safe_load_all(overlay) if o and o["kind"] in kinds)
    for configuration in (*rendered.values(), *applied.values()):
        configuration["metadata"].pop("labels", None)
    assert rendered == applied
