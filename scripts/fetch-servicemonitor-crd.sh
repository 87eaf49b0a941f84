#!/usr/bin/env bash
# Prints the path of Prometheus Operator's ServiceMonitor CRD (monitoring.coreos.com/v1), fetched
# from the Go module proxy into the Go module cache (no YAML copy in the repository), so that the
# chart's optional ServiceMonitor is validated by a real API server against the real schema
# (test/e2e/helm.test.ts).
#
#   PROMETHEUS_OPERATOR_VERSION   default below
#
# Requires: go. Go caches the download, so a second run is instant and works offline.
set -euo pipefail

version=${PROMETHEUS_OPERATOR_VERSION:-v0.85.0}
module=github.com/prometheus-operator/prometheus-operator

json=$(go mod download -json "$module@$version")
dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
crd="$dir/example/prometheus-operator-crd/monitoring.coreos.com_servicemonitors.yaml"
if [[ ! -f "$crd" ]]; then
  echo "fetch-servicemonitor-crd: $module@$version has no $crd" >&2
  printf '%s\n' "$json" >&2
  exit 1
fi
echo "$crd"
