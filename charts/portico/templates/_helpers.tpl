{{/* Names, labels and the settings the templates share. */}}

{{- define "portico.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 40 | trimSuffix "-" -}}
{{- end -}}

{{/* <release>-portico, or <release> when it already contains the chart name; at most 52 characters
so that "-controller" and "-ratelimit" keep names within 63. */}}
{{- define "portico.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 52 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 52 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "portico.controller.fullname" -}}
{{- printf "%s-controller" (include "portico.fullname" .) -}}
{{- end -}}

{{- define "portico.ratelimit.fullname" -}}
{{- printf "%s-ratelimit" (include "portico.fullname" .) -}}
{{- end -}}

{{- define "portico.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of every object; pass (dict "ctx" $ "component" "controller"). */}}
{{- define "portico.labels" -}}
helm.sh/chart: {{ include "portico.chart" .ctx }}
{{ include "portico.selectorLabels" . }}
app.kubernetes.io/version: {{ .ctx.Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .ctx.Release.Service }}
app.kubernetes.io/part-of: portico
{{- with .ctx.Values.commonLabels }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "portico.selectorLabels" -}}
app.kubernetes.io/name: {{ include "portico.name" .ctx }}
app.kubernetes.io/instance: {{ .ctx.Release.Name }}
app.kubernetes.io/component: {{ .component }}
{{- end -}}

{{- define "portico.controller.serviceAccountName" -}}
{{- if .Values.controller.serviceAccount.create -}}
{{- default (include "portico.controller.fullname" .) .Values.controller.serviceAccount.name -}}
{{- else -}}
{{- required "controller.serviceAccount.name is required when controller.serviceAccount.create is false" .Values.controller.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{- define "portico.ratelimit.serviceAccountName" -}}
{{- if .Values.rateLimitServer.serviceAccount.create -}}
{{- default (include "portico.ratelimit.fullname" .) .Values.rateLimitServer.serviceAccount.name -}}
{{- else -}}
{{- required "rateLimitServer.serviceAccount.name is required when rateLimitServer.serviceAccount.create is false" .Values.rateLimitServer.serviceAccount.name -}}
{{- end -}}
{{- end -}}

{{/* The image reference: repository:tag, repository@digest or repository:tag@digest (the
digest is what is pulled). Neither tag nor digest (a chart from a source checkout, whose version
no release pushed): fail, naming the image that would be pulled and what to set. */}}
{{- define "portico.image" -}}
{{- $repo := .Values.image.repository -}}
{{- $tag := .Values.image.tag -}}
{{- $digest := .Values.image.digest -}}
{{- if and (not $tag) (not $digest) -}}
{{- fail (printf "image: %s:%s is not an image a release pushed: this chart (version %s) is from a source checkout, with image.tag and image.digest empty. Set image.digest (sha256:...) or image.tag to an image you built and pushed (scripts/build-image.sh; docs/install.md, \"Building the image\"), or install a released chart: helm install portico oci://<registry>/portico --version <version>" $repo .Chart.AppVersion .Chart.Version) -}}
{{- end -}}
{{- $ref := $repo -}}
{{- if $tag -}}
{{- $ref = printf "%s:%s" $ref $tag -}}
{{- end -}}
{{- if $digest -}}
{{- $ref = printf "%s@%s" $ref $digest -}}
{{- end -}}
{{- $ref -}}
{{- end -}}

{{/* fqdn:port of the HTTP-01 challenge server, as the Ingresses reach it. */}}
{{- define "portico.http01Service" -}}
{{- if .Values.acme.http01.service -}}
{{- .Values.acme.http01.service -}}
{{- else -}}
{{- printf "%s.%s.svc.%s:%d" (include "portico.controller.fullname" .) .Release.Namespace .Values.clusterDomain (int .Values.controller.service.http01Port) -}}
{{- end -}}
{{- end -}}

{{/* The Lease the controller replicas elect a leader on (fixed by the controller). */}}
{{- define "portico.leaseName" -}}portico-controller{{- end -}}

{{/* The ConfigMaps between the controller and the rate-limit service (fixed names). */}}
{{- define "portico.ratelimitConfigName" -}}portico-ratelimit-config{{- end -}}
{{- define "portico.ratelimitStatusName" -}}portico-ratelimit-status{{- end -}}

{{/* Values the templates check beyond what values.schema.json can say. */}}
{{- define "portico.validate" -}}
{{- $le := .Values.controller.leaderElection -}}
{{- if not (lt (int $le.renewDeadlineSeconds) (int $le.leaseDurationSeconds)) -}}
{{- fail (printf "controller.leaderElection.renewDeadlineSeconds (%v) must be less than leaseDurationSeconds (%v): the leader must give up before its Lease can be taken" $le.renewDeadlineSeconds $le.leaseDurationSeconds) -}}
{{- end -}}
{{- if not (lt (int $le.retryPeriodSeconds) (int $le.renewDeadlineSeconds)) -}}
{{- fail (printf "controller.leaderElection.retryPeriodSeconds (%v) must be less than renewDeadlineSeconds (%v): the leader needs more than one renewal attempt per deadline" $le.retryPeriodSeconds $le.renewDeadlineSeconds) -}}
{{- end -}}
{{- if and (gt (int .Values.controller.replicas) 1) (not $le.enabled) -}}
{{- fail (printf "controller.replicas is %v but controller.leaderElection.enabled is false: more than one replica reconciling at once would order certificates twice; enable leader election or set replicas to 1" .Values.controller.replicas) -}}
{{- end -}}
{{- if and (eq .Values.routing.mode "gateway") (not .Values.routing.gateway.parentRefs) -}}
{{- fail "routing.mode=gateway needs routing.gateway.parentRefs: the Gateway(s) the HTTPRoutes attach to, e.g. --set routing.gateway.parentRefs={infra/public:https}" -}}
{{- end -}}
{{- if and .Values.metrics.serviceMonitor.enabled .Values.metrics.podMonitor.enabled -}}
{{- fail "metrics.serviceMonitor.enabled and metrics.podMonitor.enabled are both true: each would scrape every replica, and every series would be stored twice; enable one" -}}
{{- end -}}
{{- if not .Values.platform.cnameTarget -}}
{{- fail "platform.cnameTarget is required: the hostname every customer CNAME points to, e.g. --set platform.cnameTarget=sites.example.net" -}}
{{- end -}}
{{- end -}}

{{/*
The ACME issuers as the controller reads them (PORTICO_ACME_ISSUERS, JSON): acme.issuers with each
caBundle ConfigMap turned into the file it is mounted as (caBundleFile).
*/}}
{{- define "portico.acmeIssuers" -}}
{{- $out := list -}}
{{- range .Values.acme.issuers -}}
{{- $issuer := omit . "caBundle" -}}
{{- if and .caBundle .caBundle.configMapName -}}
{{- $_ := set $issuer "caBundleFile" (printf "/etc/portico/acme-ca-issuers/%s/%s" .name (.caBundle.key | default "ca.crt")) -}}
{{- end -}}
{{- $out = append $out $issuer -}}
{{- end -}}
{{- toJson $out -}}
{{- end -}}

{{/*
A Deployment's spec.strategy from a component's updateStrategy value: rollingUpdate only with
type RollingUpdate (the API server refuses it with Recreate, which a values override of type alone
would otherwise keep from the defaults).
*/}}
{{- define "portico.updateStrategy" -}}
type: {{ .type }}
{{- if and (eq .type "RollingUpdate") .rollingUpdate }}
rollingUpdate:
  {{- toYaml .rollingUpdate | nindent 2 }}
{{- end }}
{{- end }}
