{{/* Names, labels and the decisions the templates share. */}}

{{- define "gpu-device-plugin.name" -}}
{{- default .Chart.Name .Values.nameOverride | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Release name, with the chart name appended unless it already contains it. */}}
{{- define "gpu-device-plugin.fullname" -}}
{{- if .Values.fullnameOverride -}}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- $name := default .Chart.Name .Values.nameOverride -}}
{{- if contains $name .Release.Name -}}
{{- .Release.Name | trunc 63 | trimSuffix "-" -}}
{{- else -}}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{- define "gpu-device-plugin.namespace" -}}
{{- default .Release.Namespace .Values.namespaceOverride -}}
{{- end -}}

{{- define "gpu-device-plugin.chart" -}}
{{- printf "%s-%s" .Chart.Name .Chart.Version | replace "+" "_" | trunc 63 | trimSuffix "-" -}}
{{- end -}}

{{/* Labels of the pods; the selector uses the same unless overridden. */}}
{{- define "gpu-device-plugin.templateLabels" -}}
app.kubernetes.io/name: {{ include "gpu-device-plugin.name" . }}
app.kubernetes.io/instance: {{ .Release.Name }}
{{- with .Values.selectorLabelsOverride }}
{{ toYaml . }}
{{- end }}
{{- end -}}

{{- define "gpu-device-plugin.selectorLabels" -}}
{{- if .Values.selectorLabelsOverride -}}
{{ toYaml .Values.selectorLabelsOverride }}
{{- else -}}
{{ include "gpu-device-plugin.templateLabels" . }}
{{- end -}}
{{- end -}}

{{- define "gpu-device-plugin.labels" -}}
helm.sh/chart: {{ include "gpu-device-plugin.chart" . }}
{{ include "gpu-device-plugin.templateLabels" . }}
app.kubernetes.io/version: {{ .Chart.AppVersion | quote }}
app.kubernetes.io/managed-by: {{ .Release.Service }}
{{- end -}}

{{- define "gpu-device-plugin.image" -}}
{{- printf "%s:%s" .Values.image.repository (.Values.image.tag | default (printf "v%s" .Chart.AppVersion)) -}}
{{- end -}}

{{- define "gpu-device-plugin.configManagerImage" -}}
{{- printf "%s:%s" .Values.configManager.image.repository .Values.configManager.image.tag -}}
{{- end -}}

{{/* Name of the ConfigMap with the named configs, empty when there is none. */}}
{{- define "gpu-device-plugin.configMapName" -}}
{{- if .Values.config.name -}}
{{- .Values.config.name -}}
{{- else if .Values.config.map -}}
{{- printf "%s-configs" (include "gpu-device-plugin.fullname" .) -}}
{{- end -}}
{{- end -}}

{{/*
The one named config every node uses when config-manager is off, chosen at
render time with config-manager's own rules (default, then the fallbacks).
*/}}
{{- define "gpu-device-plugin.staticConfigKey" -}}
{{- $c := .Values.config -}}
{{- if $c.default -}}
{{- $c.default -}}
{{- else if and (has "named" $c.fallbackStrategies) (or $c.name (hasKey $c.map "default")) -}}
default
{{- else if and (has "single" $c.fallbackStrategies) (eq (len $c.map) 1) -}}
{{- range $key, $_ := $c.map }}{{ $key }}{{ end -}}
{{- else -}}
{{- fail "config: no config selected: set config.default, or configSelection=plugin to pick one per node" -}}
{{- end -}}
{{- end -}}

{{/*
"true" when some node may run with a MIG strategy other than none: set in
values, or in any embedded config, or unknowable (external ConfigMap).
*/}}
{{- define "gpu-device-plugin.migPossible" -}}
{{- $result := false -}}
{{- if typeIs "string" .Values.migStrategy -}}
{{- $result = ne .Values.migStrategy "none" -}}
{{- else if .Values.config.name -}}
{{- $result = true -}}
{{- else -}}
{{- range $_, $text := .Values.config.map -}}
{{- $flags := (fromYaml $text).flags | default dict -}}
{{- if and (typeIs "string" $flags.migStrategy) (ne (toString $flags.migStrategy) "none") -}}
{{- $result = true -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $result -}}
{{- end -}}

{{/* "true" when the volume-mounts device list strategy may be in use. */}}
{{- define "gpu-device-plugin.volumeMountsPossible" -}}
{{- $result := false -}}
{{- if .Values.deviceListStrategy -}}
{{- $result = contains "volume-mounts" (include "gpu-device-plugin.csv" .Values.deviceListStrategy) -}}
{{- else if .Values.config.name -}}
{{- $result = true -}}
{{- else -}}
{{- range $_, $text := .Values.config.map -}}
{{- $flags := (fromYaml $text).flags | default dict -}}
{{- $plugin := $flags.plugin | default dict -}}
{{- if $plugin.deviceListStrategy -}}
{{- if contains "volume-mounts" (include "gpu-device-plugin.csv" $plugin.deviceListStrategy) -}}
{{- $result = true -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $result -}}
{{- end -}}

{{/* A string, or a list joined with commas. */}}
{{- define "gpu-device-plugin.csv" -}}
{{- if kindIs "slice" . -}}
{{- join "," . -}}
{{- else -}}
{{- toString . -}}
{{- end -}}
{{- end -}}

{{/*
Container security context, the same rule as NVIDIA's chart: the values'
securityContext if set; privileged for CPU manager compatibility (stat of
device nodes for PASS_DEVICE_SPECS); with gfd.enabled, gfd.securityContext if
set (NVIDIA gives it to its GFD container; here this container computes GFD's
labels); SYS_ADMIN when MIG or volume-mounts may be used; otherwise nothing at all.
*/}}
{{- define "gpu-device-plugin.securityContext" -}}
{{- if .Values.securityContext -}}
{{ toYaml .Values.securityContext }}
{{- else if .Values.compatWithCPUManager -}}
privileged: true
{{- else if and .Values.gfd.enabled .Values.gfd.securityContext -}}
{{ toYaml .Values.gfd.securityContext }}
{{- else if or (eq (include "gpu-device-plugin.migPossible" .) "true") (eq (include "gpu-device-plugin.volumeMountsPossible" .) "true") -}}
capabilities:
  add: ["SYS_ADMIN"]
{{- else -}}
allowPrivilegeEscalation: false
capabilities:
  drop: ["ALL"]
{{- end -}}
{{- end -}}

{{/* Environment of config-manager (init container: oneshot, sidecar: watch and signal). */}}
{{- define "gpu-device-plugin.configManagerEnv" -}}
- name: ONESHOT
  value: {{ .oneshot | quote }}
- name: KUBECONFIG
  value: ""
- name: NODE_NAME
  valueFrom:
    fieldRef:
      fieldPath: spec.nodeName
- name: NODE_LABEL
  value: {{ .root.Values.configManager.nodeLabel | quote }}
- name: CONFIG_FILE_SRCDIR
  value: /available-configs
- name: CONFIG_FILE_DST
  value: /config/config.yaml
- name: DEFAULT_CONFIG
  value: {{ .root.Values.config.default | quote }}
- name: FALLBACK_STRATEGIES
  value: {{ join "," .root.Values.config.fallbackStrategies | quote }}
- name: SEND_SIGNAL
  value: {{ not .oneshot | quote }}
- name: SIGNAL
  value: {{ ternary "" "1" .oneshot | quote }}
- name: PROCESS_TO_SIGNAL
  value: {{ ternary "" "gpu-device-plugin" .oneshot | quote }}
{{- end -}}

{{/*
How a node's config is chosen from the ConfigMap: "" (no ConfigMap), "plugin" (the
plugin watches its Node's label itself), "config-manager" (NVIDIA's sidecar writes
the file and sends SIGHUP) or "static" (one config for every node, chosen here).
*/}}
{{- define "gpu-device-plugin.configMode" -}}
{{- if include "gpu-device-plugin.configMapName" . -}}
{{- if .Values.configManager.enabled -}}
config-manager
{{- else -}}
{{- .Values.configSelection | default "plugin" -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "true" when GFD's labels go through the NodeFeature API (NVIDIA's nfd.enableNodeFeatureApi). */}}
{{- define "gpu-device-plugin.nodeFeatureApi" -}}
{{- and .Values.gfd.enabled (not .Values.gfd.nodeLabelsPatch) (ne (toString .Values.nfd.enableNodeFeatureApi) "false") -}}
{{- end -}}

{{/* "true" when the plugin talks to the API server, so it needs its node name. */}}
{{- define "gpu-device-plugin.usesApi" -}}
{{- or .Values.gfd.enabled .Values.dra.enabled (eq (include "gpu-device-plugin.configMode" .) "plugin") (eq (toString .Values.events.enabled) "true") -}}
{{- end -}}

{{/*
"true" when the DaemonSet is rendered: for the device plugin, or for DRA alone (the same
process; with devicePlugin.enabled=false it serves every GPU through DRA).
*/}}
{{- define "gpu-device-plugin.deployed" -}}
{{- or .Values.devicePlugin.enabled .Values.dra.enabled -}}
{{- end -}}

{{/*
Other NVIDIA device plugins in the cluster, each as "namespace/name " ("" when none). A
DaemonSet counts when its pod mounts the host's kubelet device-plugin directory (so it can
serve a resource) and its name, or a container's name, image, command or arguments, says
nvidia-device-plugin, k8s-device-plugin (NVIDIA's image, also the GPU Operator's) or
gpu-device-plugin (ours, another release). NVIDIA's GFD and MPS daemons run NVIDIA's image
but mount no such directory; other vendors' device plugins (SR-IOV, RDMA) mount it but are
named otherwise. This release's own DaemonSet (an upgrade) is skipped. Helm's lookup sees
the cluster only at install and upgrade: helm template and client-side dry runs get an
empty answer, so nothing is found there.
*/}}
{{- define "gpu-device-plugin.otherDevicePlugins" -}}
{{- $self := include "gpu-device-plugin.fullname" . -}}
{{- $ns := include "gpu-device-plugin.namespace" . -}}
{{- range (lookup "apps/v1" "DaemonSet" "" "").items | default list -}}
{{- $pod := .spec.template.spec -}}
{{- if not (and (eq (toString .metadata.name) $self) (eq (toString .metadata.namespace) $ns)) -}}
{{- $mounts := false -}}
{{- range $pod.volumes | default list -}}
{{- if .hostPath -}}
{{- if has (trimSuffix "/" (toString .hostPath.path)) (list "/var/lib/kubelet/device-plugins" "/var/lib/kubelet") -}}
{{- $mounts = true -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- $words := toString .metadata.name -}}
{{- range $pod.initContainers | default list -}}
{{- $words = printf "%s %s %s %s %s" $words (toString .name) (toString .image) (join " " .command) (join " " .args) -}}
{{- end -}}
{{- range $pod.containers | default list -}}
{{- $words = printf "%s %s %s %s %s" $words (toString .name) (toString .image) (join " " .command) (join " " .args) -}}
{{- end -}}
{{- if and $mounts (or (contains "nvidia-device-plugin" $words) (contains "k8s-device-plugin" $words) (contains "gpu-device-plugin" $words)) -}}
{{- printf "%s/%s " .metadata.namespace .metadata.name -}}
{{- end -}}
{{- end -}}
{{- end -}}
{{- end -}}

{{/* "true" when the plugin posts Events: with API access, unless events.enabled=false. */}}
{{- define "gpu-device-plugin.eventsOn" -}}
{{- and (eq (include "gpu-device-plugin.usesApi" .) "true") (ne (toString .Values.events.enabled) "false") -}}
{{- end -}}

{{/*
The RBAC rules the enabled features need, least privilege, each as a YAML list ("" when
none), in three scopes (docs/deployment.md, "RBAC, least privilege"):
- rbacClusterRules, the ClusterRole: nodes are cluster-scoped, so reading and patching
  the own Node can only be granted cluster-wide (RBAC's resourceNames cannot name "the
  node this pod runs on"): get/list/watch for label-based config selection (a
  field-selected watch of the own Node) and what nodeLabelsPatch watches, +patch for our
  config annotation and for nodeLabelsPatch; get/list/watch for DRA (the Node owns its
  slices: a metadata watch of it for its UID, a GET where list/watch is not granted).
  DRA's ResourceSlices are cluster-scoped, and the claims it prepares are in any
  namespace: resourceslices list/watch (the own slices' watch) and create/update/delete
  (dra/dra-publish.c: POST, PUT, DELETE; no GET or PATCH), resourceclaims get.
- rbacNamespaceRules, a Role in the release namespace: NFD NodeFeatures (the object is
  created in the plugin's own namespace) and pods get (the own pod, for the owner
  references) for GFD's NodeFeature mode.
- rbacEventRules, a Role in namespace "default": events create/patch. An Event about a
  cluster-scoped object (the Node) must be in "default" (kube-apiserver's
  legacyValidateEvent), as the kubelet's are.
rbacRules: all of them ("" when none), for whether a ServiceAccount is needed at all.
*/}}
{{- define "gpu-device-plugin.rbacClusterRules" -}}
{{- $mode := include "gpu-device-plugin.configMode" . -}}
{{- /* DRA's publisher watches its Node's metadata for the slices' owner (a GET without it) */ -}}
{{- $watch := or (eq $mode "plugin") (eq $mode "config-manager") (and .Values.gfd.enabled .Values.gfd.nodeLabelsPatch) .Values.dra.enabled -}}
{{- $patch := or (eq $mode "plugin") (and .Values.gfd.enabled .Values.gfd.nodeLabelsPatch) -}}
{{- if or $watch $patch .Values.dra.enabled }}
- apiGroups: [""]
  resources: ["nodes"]
  verbs: ["get"{{ if $watch }}, "list", "watch"{{ end }}{{ if $patch }}, "patch"{{ end }}]
{{- end }}
{{- if .Values.dra.enabled }}
- apiGroups: ["resource.k8s.io"]
  resources: ["resourceslices"]
  verbs: ["list", "watch", "create", "update", "delete"]
- apiGroups: ["resource.k8s.io"]
  resources: ["resourceclaims"]
  verbs: ["get"]
{{- end }}
{{- end -}}

{{- define "gpu-device-plugin.rbacNamespaceRules" -}}
{{- if eq (include "gpu-device-plugin.nodeFeatureApi" .) "true" }}
- apiGroups: ["nfd.k8s-sigs.io"]
  resources: ["nodefeatures"]
  verbs: ["get", "list", "watch", "create", "update"]
- apiGroups: [""]
  resources: ["pods"]
  verbs: ["get"]
{{- end }}
{{- end -}}

{{- define "gpu-device-plugin.rbacEventRules" -}}
{{- if eq (include "gpu-device-plugin.eventsOn" .) "true" }}
- apiGroups: [""]
  resources: ["events"]
  verbs: ["create", "patch"]
{{- end }}
{{- end -}}

{{- define "gpu-device-plugin.rbacRules" -}}
{{- include "gpu-device-plugin.rbacClusterRules" . -}}
{{- include "gpu-device-plugin.rbacNamespaceRules" . -}}
{{- include "gpu-device-plugin.rbacEventRules" . -}}
{{- end -}}
