{{/* The labels kustomize's deploy/base puts on every object. */}}
{{- define "gpu-admission.labels" -}}
app.kubernetes.io/name: gpu-admission
app.kubernetes.io/part-of: gpu-admission
{{- end }}

{{/* Namespaces the pod webhooks leave out: the configured ones and the release's own. */}}
{{- define "gpu-admission.excluded" -}}
{{- $all := concat .Values.excludedNamespaces (list .Release.Namespace) | uniq -}}
[{{ join ", " $all }}]
{{- end }}
