{{- define "rekey.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else if contains .Chart.Name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name .Chart.Name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}

{{- /* The manager's Deployment, ServiceAccount and PodDisruptionBudget: config/default's names with release "rekey". */ -}}
{{- define "rekey.managerName" -}}
{{- printf "%s-controller-manager" (include "rekey.fullname" .) | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{- define "rekey.image" -}}
{{- if .Values.image.digest -}}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest -}}
{{- else -}}
{{- printf "%s:%s" .Values.image.repository (default .Chart.AppVersion .Values.image.tag) -}}
{{- end -}}
{{- end -}}

{{- define "rekey.selectorLabels" -}}
app.kubernetes.io/name: {{ .Chart.Name }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- end -}}

{{- define "rekey.labels" -}}
{{ include "rekey.selectorLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
helm.sh/chart: {{ printf "%s-%s" .Chart.Name .Chart.Version }}
{{- end -}}

{{- define "rekey.serviceAccountName" -}}
{{- if .Values.serviceAccount.create -}}
{{- default (include "rekey.managerName" .) .Values.serviceAccount.name -}}
{{- else -}}
{{- default "default" .Values.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "rekey.subject" -}}
- kind: ServiceAccount
  name: {{ include "rekey.serviceAccountName" . }}
  namespace: {{ .Release.Namespace }}
{{- end -}}

{{- /* Secrets are read live with get; list and watch serve a cache of only the Secrets labelled as rekey's; never deleted. */ -}}
{{- define "rekey.secretsRules" -}}
- apiGroups: [""]
  resources: ["secrets"]
  verbs: ["get", "list", "watch", "create", "update"]
{{- end -}}

{{- define "rekey.managerRules" -}}
- apiGroups: ["rekey.io"]
  resources: ["credentialsets"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["rekey.io"]
  resources: ["credentialsets/status"]
  verbs: ["patch"]
- apiGroups: ["events.k8s.io"]
  resources: ["events"]
  verbs: ["create", "patch"]
- apiGroups: ["apps"]
  resources: ["statefulsets", "deployments", "daemonsets"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["batch"]
  resources: ["cronjobs"]
  verbs: ["get", "list", "watch", "patch"]
- apiGroups: ["batch"]
  resources: ["jobs"]
  verbs: ["list"]
{{- end -}}
