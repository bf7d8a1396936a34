"""The policies the e2e cases install as ConfigMaps, beside the shipped default, and the
ValidatingAdmissionPolicy of the team rule the neighbours test and bench/control_plane.py compare."""

TEAMS = """\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: e2e-teams
spec:
  match:
    namespaces: ["team-*"]
  mig:
    strategy: mixed
    gpuModels: [H100-80GB, A100-80GB]
    defaultProfile: 1g.10gb
    allowedProfiles: [1g.10gb, 2g.20gb, 3g.40gb]
  rules:
    - name: require-team-label
      expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
      message: "GPU pods need a team label"
      action: deny
    - name: prefer-owner
      expression: "has(object.metadata.annotations) && 'owner' in object.metadata.annotations"
      message: |
        GPU pods should say who owns them.
        Add the annotation owner=<you>.
      action: warn
    - name: record-image
      expression: "object.spec.containers.all(c, c.image.startsWith('registry.corp/'))"
      message: "image outside registry.corp"
      action: audit
"""

QUOTA = """\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: e2e-quota
spec:
  match:
    namespaces: ["quota-*"]
  mig:
    strategy: mixed
    gpuModels: [A100-80GB, H100-80GB]
    defaultProfile: 1g.10gb
  quota:
    scope: namespace
    limits:
      pods: {limit}
    action: deny
    consistency: strict
"""

BROKEN = """\
apiVersion: gpu-admission.io/v1alpha1
kind: GPUPolicy
metadata:
  name: e2e-broken
spec:
  mig:
    defaultProfile: 9g.900gb
  rules:
    - name: unclosed
      expression: "object.metadata.name == "
      message: "never compiles"
"""

TEAM_LABEL_VAP = """\
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: require-team-label}
spec:
  failurePolicy: Fail
  matchConstraints:
    resourceRules:
      - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  validations:
    - expression: "has(object.metadata.labels) && 'team' in object.metadata.labels"
      message: "GPU pods need a team label"
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: require-team-label}
spec:
  policyName: require-team-label
  validationActions: [Deny]
  matchResources:
    namespaceSelector: {matchLabels: {kubernetes.io/metadata.name: vap-side}}
"""
