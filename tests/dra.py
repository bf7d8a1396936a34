"""DRA objects as the tests write them (resource.k8s.io/v1): DeviceClasses, ResourceClaims and
templates, their requests and selectors; shaped after NVIDIA's DRA driver (its chart's classes,
its extended-resources demo), written here, not copied."""

from __future__ import annotations

from typing import Any

API_VERSION = "resource.k8s.io/v1"
DRIVER = "gpu.nvidia.com"


def cel(expression: str) -> list[dict[str, Any]]:
    return [{"cel": {"expression": expression}}]


def nvidia(attribute: str, value: str) -> str:
    return f"device.attributes['{DRIVER}'].{attribute} == '{value}'"


def mig_profile(profile: str) -> str:
    return f"device.driver == '{DRIVER}' && {nvidia('type', 'mig')} && {nvidia('profile', profile)}"


def device_class(name: str, expression: str = "", extended: str = "", created: str = "") -> dict[str, Any]:
    spec: dict[str, Any] = {}
    if expression:
        spec["selectors"] = cel(expression)
    if extended:
        spec["extendedResourceName"] = extended
    metadata: dict[str, Any] = {"name": name}
    if created:
        metadata["creationTimestamp"] = created
    return {"apiVersion": API_VERSION, "kind": "DeviceClass", "metadata": metadata, "spec": spec}


# NVIDIA's classes as its driver's chart publishes them, and a per-profile class of its demo.
GPU_CLASS = device_class("gpu.nvidia.com", f"device.driver == '{DRIVER}' && {nvidia('type', 'gpu')}", "nvidia.com/gpu")
MIG_CLASS = device_class("mig.nvidia.com", f"device.driver == '{DRIVER}' && {nvidia('type', 'mig')}")
NIC_CLASS = device_class("nic.example.com", "device.driver == 'nic.example.com'")


def profile_class(profile: str) -> dict[str, Any]:
    """NVIDIA's extended-resources demo: one class a profile, serving the device plugin's name."""
    return device_class(
        f"mig-{profile.replace('.', '-')}.gpu.nvidia.com", mig_profile(profile), f"nvidia.com/mig-{profile}"
    )


def exactly(device_class: str, count: int | None = None, expression: str = "", **more: Any) -> dict[str, Any]:
    request: dict[str, Any] = {"deviceClassName": device_class, **more}
    if count is not None:
        request["count"] = count
    if expression:
        request["selectors"] = cel(expression)
    return request


def claim_spec(*requests: dict[str, Any], config: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """A claim's spec of requests (`exactly` ones, or whole request bodies with firstAvailable)."""
    listed = [r if "firstAvailable" in r else {"exactly": r} for r in requests]
    devices: dict[str, Any] = {"requests": [{"name": f"r{i}", **r} for i, r in enumerate(listed)]}
    if config:
        devices["config"] = config
    return {"devices": devices}


def claim(name: str, namespace: str, spec: dict[str, Any], template: bool = False) -> dict[str, Any]:
    kind = "ResourceClaimTemplate" if template else "ResourceClaim"
    body = {"spec": spec} if template else spec
    return {"apiVersion": API_VERSION, "kind": kind, "metadata": {"name": name, "namespace": namespace}, "spec": body}
