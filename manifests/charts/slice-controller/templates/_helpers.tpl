{{/*
Object names are fixed, not derived from the release name: the controller's webhook and
leader-election code and the reference deployment use these names, so one release per cluster.
*/}}

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
  namespace: {{ .Release.Namespace }}
{{- end }}
