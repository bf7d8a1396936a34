{{/* The labels kustomize's deploy/base puts on every object, and Helm's own (which release, which
chart): on objects, never on selectors or the pod template (a chart upgrade alone restarts nothing). */}}
{{- define "gpu-admission.labels" -}}
app.kubernetes.io/name: gpu-admission
app.kubernetes.io/part-of: gpu-admission
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" }}
{{- end }}

{{/* Namespaces the pod webhooks leave out: the configured ones and the release's own. */}}
{{- define "gpu-admission.excluded" -}}
{{- $all := concat .Values.excludedNamespaces (list .Release.Namespace) | uniq -}}
[{{ join ", " $all }}]
{{- end }}

{{/* Where the API server calls the webhook: its Service, or webhookURL (a webhook served outside
the cluster) with the endpoint's path. */}}
{{- define "gpu-admission.clientConfig" -}}
{{- if .root.Values.webhookURL -}}
url: {{ printf "%s%s" (trimSuffix "/" .root.Values.webhookURL) .path }}
{{- else -}}
service: {name: gpu-admission, namespace: {{ .root.Release.Namespace }}, path: {{ .path }}, port: 443}
{{- end -}}
{{- end -}}
