{{/* Chart name, overridable. */}}
{{- define "pgwork.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Full name: release-scoped, 63 characters at most (DNS label). */}}
{{- define "pgwork.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "pgwork.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Selector labels: stable across upgrades (a Deployment's selector is immutable). */}}
{{- define "pgwork.selectorLabels" -}}
app.kubernetes.io/name: {{ include "pgwork.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{/* Standard labels on every object. */}}
{{- define "pgwork.labels" -}}
helm.sh/chart: {{ include "pgwork.chart" . }}
{{ include "pgwork.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/part-of: pgwork
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{- define "pgwork.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "pgwork.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "pgwork.image" -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) }}
{{- end }}

{{/* The operator's RBAC rules, synced from pgwork/operator/rbac.yaml by scripts/sync_chart.py. */}}
{{- define "pgwork.rbacRules" -}}
{{- $file := .Files.Get "files/rbac-rules.yaml" }}
{{- if not $file }}
{{- fail "files/rbac-rules.yaml is missing from the chart: run python scripts/sync_chart.py" }}
{{- end }}
{{- $file }}
{{- end }}
