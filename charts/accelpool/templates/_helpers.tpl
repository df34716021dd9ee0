{{/*
Names, labels and the few derived values every template shares.
*/}}

{{- define "accelpool.name" -}}
{{- .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* The release's base name: "<release>" when it already says accelpool, else "<release>-accelpool". */}}
{{- define "accelpool.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else if contains .Chart.Name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}

{{- define "accelpool.operatorName" -}}
{{- printf "%s-operator" (include "accelpool.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "accelpool.agentName" -}}
{{- printf "%s-agent" (include "accelpool.fullname" .) | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "accelpool.labels" -}}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
app.kubernetes.io/name: {{ include "accelpool.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
app.kubernetes.io/part-of: accelpool
{{- end }}

{{- define "accelpool.operatorSelectorLabels" -}}
app.kubernetes.io/name: {{ include "accelpool.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "accelpool.operatorLabels" -}}
{{ include "accelpool.labels" . }}
app.kubernetes.io/component: operator
{{- end }}

{{- define "accelpool.agentLabels" -}}
{{ include "accelpool.labels" . }}
app.kubernetes.io/component: agent
{{- end }}

{{/* Where the operator runs its per-pool agent DaemonSets; the release namespace unless set. */}}
{{- define "accelpool.agentNamespace" -}}
{{- .Values.agent.namespace | default .Release.Namespace }}
{{- end }}

{{/* Where the two NVIDIA ConfigMaps live (the GPU Operator's namespace, usually). */}}
{{- define "accelpool.nvidiaNamespace" -}}
{{- .Values.nvidia.namespace | default .Release.Namespace }}
{{- end }}

{{/* An image reference from an image block and the chart: "<repository>@<digest>" when a digest is
set (the tag is then ignored: a digest names exactly one image), else "<repository>:<tag or appVersion>". */}}
{{- define "accelpool.imageRef" -}}
{{- $image := index . 0 }}{{- $chart := index . 1 }}
{{- if $image.digest }}
{{- printf "%s@%s" $image.repository $image.digest }}
{{- else }}
{{- printf "%s:%s" $image.repository ($image.tag | default $chart.AppVersion) }}
{{- end }}
{{- end }}

{{- define "accelpool.operatorImage" -}}
{{- include "accelpool.imageRef" (list .Values.image .Chart) }}
{{- end }}

{{- define "accelpool.agentImage" -}}
{{- include "accelpool.imageRef" (list .Values.agent.image .Chart) }}
{{- end }}

{{/* The labels the operator gives every agent pod it renders (accelpool.render._labels): the agents'
NetworkPolicy and the PodMonitor select on them. */}}
{{- define "accelpool.agentPodSelectorLabels" -}}
app.kubernetes.io/name: accelpool-agent
app.kubernetes.io/component: agent
{{- end }}

{{- define "accelpool.testLabels" -}}
{{ include "accelpool.labels" . }}
app.kubernetes.io/component: helm-test
{{- end }}

{{/* The hardened container security context shared by every container the chart runs. */}}
{{- define "accelpool.containerSecurityContext" -}}
runAsNonRoot: true
readOnlyRootFilesystem: true
allowPrivilegeEscalation: false
capabilities:
  drop: [ALL]
seccompProfile:
  type: RuntimeDefault
{{- end }}
