"""What the deploy tests read manifests with: the kubernetes client's models, GPU-less copies."""

from __future__ import annotations

from kubernetes.client import ApiClient

API = ApiClient()


MODELS = {
    "Namespace": "V1Namespace",
    "ServiceAccount": "V1ServiceAccount",
    "Role": "V1Role",
    "ClusterRole": "V1ClusterRole",
    "RoleBinding": "V1RoleBinding",
    "ClusterRoleBinding": "V1ClusterRoleBinding",
    "ConfigMap": "V1ConfigMap",
    "Secret": "V1Secret",
    "Service": "V1Service",
    "PriorityClass": "V1PriorityClass",
    "Deployment": "V1Deployment",
    "PodDisruptionBudget": "V1PodDisruptionBudget",
    "NetworkPolicy": "V1NetworkPolicy",
    "MutatingWebhookConfiguration": "V1MutatingWebhookConfiguration",
    "ValidatingWebhookConfiguration": "V1ValidatingWebhookConfiguration",
    "CustomResourceDefinition": "V1CustomResourceDefinition",
    "DeviceClass": "V1DeviceClass",
}


def strip_gpus(node):
    """`node` asking for no GPU: no nvidia.com/ resource, and no operator's `gpu` count either."""
    if isinstance(node, dict):
        return {
            k: strip_gpus(v)
            for k, v in node.items()
            if not (isinstance(k, str) and (k.startswith("nvidia.com/") or k in ("gpu", "gpuType", "custom")))
        }
    if isinstance(node, list):
        return [strip_gpus(v) for v in node]
    return node
