"""The NVIDIA container toolkit's legacy-image rule, read as the toolkit applies it.

The toolkit (internal/config/image/cuda_image.go) reads the environment a container ends with:
the image's, then the pod's (kubelet keeps the last entry of a name). It calls an image legacy when
CUDA_VERSION is non-empty and NVIDIA_REQUIRE_CUDA is empty, lengths compared; a legacy image with
NVIDIA_VISIBLE_DEVICES not set at all gets every GPU. The law: wherever some image and some value
of what the pod cannot show (valueFrom, `$(VAR)`) make the toolkit hand a GPU-less container every
GPU through what the pod wrote, the engine refuses the pod; and it refuses nothing else.
"""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from policies.review.pod import parse_pod
from tests.support.builders import plain_container, pod

NAMES = ("CUDA_VERSION", "NVIDIA_REQUIRE_CUDA", "NVIDIA_VISIBLE_DEVICES")
FROM_ELSEWHERE = {"valueFrom": {"configMapKeyRef": {"name": "v", "key": "k"}}}
WRITTEN = ("", "12.4", "cuda>=12.4", "void", "$(OTHER)", None)  # None: valueFrom
# What an image may hold of the two legacy variables (absent, empty, or a value).
IMAGE_STATES = (None, "", "x")
# What a value the pod cannot show may turn out to be.
UNKNOWN_OUTCOMES = ("", "x")


def toolkit_hands_every_gpu(environment: dict[str, str]) -> bool:
    """cuda_image.go: IsLegacy, and devicesFromEnvvars defaulting to "all" when unset."""
    legacy = len(environment.get("CUDA_VERSION", "")) > 0 and len(environment.get("NVIDIA_REQUIRE_CUDA", "")) == 0
    return legacy and "NVIDIA_VISIBLE_DEVICES" not in environment


def some_world_hands_every_gpu(entries: list[tuple[str, str | None]]) -> bool:
    last = dict(entries)  # kubelet keeps the last entry of a name
    unknown = [name for name, value in last.items() if value is None or "$(" in value]
    for image in itertools.product(IMAGE_STATES, repeat=2):
        for outcome in itertools.product(UNKNOWN_OUTCOMES, repeat=len(unknown)):
            environment = {name: value for name, value in zip(NAMES[:2], image, strict=True) if value is not None}
            resolved = dict(zip(unknown, outcome, strict=True))
            environment.update({name: resolved.get(name, value or "") for name, value in last.items()})
            if toolkit_hands_every_gpu(environment):
                return True
    return False


def refused_for_legacy(entries: list[tuple[str, str | None]]) -> bool:
    written = [{"name": n, "value": v} if v is not None else {"name": n, **FROM_ELSEWHERE} for n, v in entries]
    view = parse_pod(pod(dict(plain_container(), env=written)))
    return any(found.legacy for found in view.device_env)


@given(st.lists(st.tuples(st.sampled_from(NAMES), st.sampled_from(WRITTEN)), max_size=5))
def test_a_gpu_less_container_the_toolkit_may_hand_every_gpu_by_what_the_pod_wrote_is_refused(entries):
    legacy_names = {name for name, _ in entries} & set(NAMES[:2])
    # Only what the pod writes is the pod's: an image alone is the image's (and its registry's).
    expected = bool(legacy_names) and some_world_hands_every_gpu(entries)
    assert refused_for_legacy(entries) == expected


def test_each_spelling_of_the_rule():
    assert refused_for_legacy([("CUDA_VERSION", "12.4")])
    assert refused_for_legacy([("CUDA_VERSION", "12.4"), ("NVIDIA_REQUIRE_CUDA", "")])
    assert refused_for_legacy([("NVIDIA_REQUIRE_CUDA", "cuda>=12"), ("NVIDIA_REQUIRE_CUDA", "")])
    assert refused_for_legacy([("NVIDIA_REQUIRE_CUDA", None)])
    assert refused_for_legacy([("NVIDIA_REQUIRE_CUDA", "$(OTHER)")])
    assert not refused_for_legacy([("CUDA_VERSION", "12.4"), ("NVIDIA_REQUIRE_CUDA", "cuda>=12.4")])
    assert not refused_for_legacy([("CUDA_VERSION", ""), ("NVIDIA_REQUIRE_CUDA", "")])
    assert not refused_for_legacy([("NVIDIA_REQUIRE_CUDA", ""), ("NVIDIA_VISIBLE_DEVICES", "")])
    assert not refused_for_legacy([])
