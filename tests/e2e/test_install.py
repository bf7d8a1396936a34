"""Installing gpu-admission into a real control plane, in the order a user would."""

from __future__ import annotations

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


def test_while_the_first_replica_starts_no_gpu_pod_meets_a_certificate_the_api_server_refuses(
    installation: Installation,
):
    answers = installation.while_starting
    assert answers, "no GPU pod was tried while the replica started"
    for answer in answers:
        assert "x509" not in answer.stderr and "certificate" not in answer.stderr, answer.stderr
        assert answer.code == 0 or 'failed calling webhook "mutate.gpu-admission.io"' in answer.stderr, answer.stderr
