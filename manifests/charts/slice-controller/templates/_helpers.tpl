{{/*
Object names are fixed, not derived from the release name: the controller's webhook and
leader-election code and the reference deployment use these names, so one release per cluster.
*/}}

{{/*
The namespace is fixed too: the binary writes its webhook certificate to the Secret
slice-controller-system/slice-controller-webhook-server-cert and signs it for
slice-controller-webhook-service.slice-controller-system.svc (internal/util/cert/cert.go upstream).
In any other namespace its webhooks would never become ready, so the chart refuses to render.
*/}}
{{- define "slice-controller.namespace" -}}
{{- if ne .Release.Namespace "slice-controller-system" -}}
{{- fail (printf "the slice controller must be installed in slice-controller-system (its certificate code hard-codes it), not %q" .Release.Namespace) -}}
{{- end -}}
{{ .Release.Namespace }}
{{- end }}

{{/* Selector labels: the reference deployment's, and immutable on a Deployment once created. */}}
{{- define "slice-controller.selectorLabels" -}}
app.kubernetes.io/name: slice-controller
control-plane: controller-manager
{{- end }}

{{/* Labels on every object. */}}
{{- define "slice-controller.labels" -}}
app.kubernetes.io/name: slice-controller
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Pinned by digest when one is given (a tag can move), else by tag, defaulting to appVersion. */}}
{{- define "slice-controller.image" -}}
{{- with .Values.image -}}
{{- if .digest -}}
{{ .repository }}@{{ .digest }}
{{- else -}}
{{ .repository }}:{{ .tag | default $.Chart.AppVersion }}
{{- end -}}
{{- end -}}
{{- end }}

{{/* The ServiceAccount as a binding subject. */}}
{{- define "slice-controller.subject" -}}
- kind: ServiceAccount
  name: slice-controller-controller-manager
  namespace: {{ include "slice-controller.namespace" . }}
{{- end }}
