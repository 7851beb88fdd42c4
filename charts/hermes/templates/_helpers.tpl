{{/*
Names. Kubernetes names are at most 63 characters; every name here is the
full name plus a suffix, so the full name is cut to leave room for the
longest suffix ("-redis-url", 10 characters).
*/}}
{{- define "hermes.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" }}
{{- end }}

{{- define "hermes.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 53 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 53 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 53 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}

{{- define "hermes.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" }}
{{- end }}

{{/* Labels every object carries. */}}
{{- define "hermes.labels" -}}
helm.sh/chart: {{ include "hermes.chart" . }}
app.kubernetes.io/name: {{ include "hermes.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/version: {{ include "hermes.imageTag" . | trunc 63 | trimSuffix "-" | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end }}

{{/* Selector labels of the runner pods. */}}
{{- define "hermes.selectorLabels" -}}
app.kubernetes.io/name: {{ include "hermes.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: runner
{{- end }}

{{/* Selector labels of the bundled Redis. */}}
{{- define "hermes.redisSelectorLabels" -}}
app.kubernetes.io/name: {{ include "hermes.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
app.kubernetes.io/component: redis
{{- end }}

{{- define "hermes.serviceAccountName" -}}
{{- if .Values.serviceAccount.create }}
{{- default (include "hermes.fullname" .) .Values.serviceAccount.name }}
{{- else }}
{{- default "default" .Values.serviceAccount.name }}
{{- end }}
{{- end }}

{{- define "hermes.imageTag" -}}
{{- default .Chart.AppVersion .Values.image.tag }}
{{- end }}

{{- define "hermes.image" -}}
{{- if .Values.image.digest }}
{{- printf "%s@%s" .Values.image.repository .Values.image.digest }}
{{- else }}
{{- printf "%s:%s" .Values.image.repository (include "hermes.imageTag" .) }}
{{- end }}
{{- end }}

{{/* The Secret holding the tokens file, and its key. */}}
{{- define "hermes.tokensSecret" -}}
{{- default (printf "%s-tokens" (include "hermes.fullname" .)) .Values.auth.existingSecret }}
{{- end }}

{{- define "hermes.tokensKey" -}}
{{- if .Values.auth.existingSecret }}{{ .Values.auth.existingSecretKey }}{{ else }}tokens{{ end }}
{{- end }}

{{/* Where the container finds things. */}}
{{- define "hermes.home" -}}/var/lib/hermes{{- end }}
{{- define "hermes.tokensDir" -}}/etc/hermes/tokens{{- end }}
{{- define "hermes.tlsDir" -}}/etc/hermes/tls{{- end }}
{{- define "hermes.dindSocketDir" -}}/run/dind{{- end }}

{{/* The backends callers may use: serve.backends, else the executor. */}}
{{- define "hermes.backends" -}}
{{- if .Values.serve.backends }}{{ join "," .Values.serve.backends }}{{ else }}{{ .Values.executor }}{{ end }}
{{- end }}

{{/* "true" when some jobs may run on Kubernetes: the runner needs RBAC. */}}
{{- define "hermes.usesKubernetes" -}}
{{- if has "kubernetes" (splitList "," (include "hermes.backends" .)) }}true{{ end }}
{{- end }}

{{/* "true" when every job runs on Kubernetes: any replica answers for any job. */}}
{{/* The namespace of job pods. */}}
{{- define "hermes.jobsNamespace" -}}
{{- default .Release.Namespace .Values.kubernetes.namespace }}
{{- end }}

{{/* The receipt store: "bundled", "url", "secret" or "file". */}}
{{- define "hermes.storeKind" -}}
{{- if .Values.redis.bundled.enabled }}bundled
{{- else if .Values.redis.existingSecret }}secret
{{- else if .Values.redis.url }}url
{{- else }}file
{{- end }}
{{- end }}

{{/*
Checks that values.schema.json cannot express: combinations. Included by the
Deployment so that a bad combination fails `helm template` and `helm install`.
*/}}
{{- define "hermes.validate" -}}
{{- $store := include "hermes.storeKind" . }}
{{- $redisSources := 0 }}
{{- if .Values.redis.bundled.enabled }}{{ $redisSources = add1 $redisSources }}{{ end }}
{{- if .Values.redis.url }}{{ $redisSources = add1 $redisSources }}{{ end }}
{{- if .Values.redis.existingSecret }}{{ $redisSources = add1 $redisSources }}{{ end }}
{{- if gt $redisSources 1 }}
{{- fail "redis: set only one of redis.url, redis.existingSecret and redis.bundled.enabled" }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) (eq $store "file") }}
{{- fail "replicaCount > 1 needs a shared receipt store: set redis.url, redis.existingSecret or redis.bundled.enabled" }}
{{- end }}
{{- if and (gt (int .Values.replicaCount) 1) .Values.persistence.enabled }}
{{- fail "persistence (a ReadWriteOnce home volume) is for a single replica: use Redis to share receipts between replicas" }}
{{- end }}
{{- if and .Values.autoscaling.enabled (eq $store "file") }}
{{- fail "autoscaling needs a shared receipt store (replicas share Redis): set redis.url, redis.existingSecret or redis.bundled.enabled" }}
{{- end }}
{{- if and .Values.autoscaling.enabled .Values.persistence.enabled }}
{{- fail "autoscaling runs several replicas: persistence (a ReadWriteOnce home volume) is for a single one" }}
{{- end }}
{{- if and .Values.auth.tokens .Values.auth.existingSecret }}
{{- fail "auth: set auth.tokens or auth.existingSecret, not both" }}
{{- end }}
{{- if and (eq .Values.docker.mode "none") (has "docker" (splitList "," (include "hermes.backends" .))) }}
{{- fail "the docker backend is used (executor or serve.backends) but docker.mode is none: pick a container engine (socket or dind)" }}
{{- end }}
{{- end }}
