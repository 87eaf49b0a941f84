#!/usr/bin/env bash
# Fetches the CRDs that Portico's routing objects are validated against, from the Go module proxy into
# the Go module cache (no YAML copies in the repository), and prints the path of each CRD file, one a
# line:
#   - Gateway API, standard channel (sigs.k8s.io/gateway-api config/crd/standard/): GatewayClass,
#     Gateway, HTTPRoute, ReferenceGrant, ListenerSet (standard channel from v1.5.0: each domain's
#     certificate is attached to the Gateway with one);
#   - Traefik's CRDs (github.com/traefik/traefik/v3
#     docs/content/reference/dynamic-configuration/kubernetes-crd-definition-v1.yml): Middleware and
#     the others of traefik.io/v1alpha1.
# The test/e2e/routing*.test.ts tests apply them to the sandbox's API server.
#
#   GATEWAY_API_VERSION   default below; 307/308 in RequestRedirect and ListenerSet need v1.5.0 or later
#   TRAEFIK_VERSION       default below
#
# Requires: go. Downloads are cached by Go, so a second run is instant and works offline.
set -euo pipefail

# v1.7.0 and later need Go 1.27 to download (their go.mod); v1.6.3 is the last for Go 1.26.
GATEWAY_API_VERSION=${GATEWAY_API_VERSION:-v1.6.3}
TRAEFIK_VERSION=${TRAEFIK_VERSION:-v3.7.13}

log() { printf '[fetch-routing-crds] %s\n' "$*" >&2; }

# module_dir MODULE@VERSION: downloads the module (if needed) and prints its directory in the cache.
module_dir() {
  local json dir
  json=$(go mod download -json "$1")
  dir=$(printf '%s\n' "$json" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
  if [[ -z "$dir" || ! -d "$dir" ]]; then
    log "go mod download $1 gave no directory:"
    printf '%s\n' "$json" >&2
    return 1
  fi
  printf '%s\n' "$dir"
}

# Run outside any module, so that no go.mod of the repository (test/tools/) is read or changed.
cd "$(mktemp -d)"
trap 'rm -rf "$PWD"' EXIT

gateway=$(module_dir "sigs.k8s.io/gateway-api@$GATEWAY_API_VERSION")
traefik=$(module_dir "github.com/traefik/traefik/v3@$TRAEFIK_VERSION")

for kind in gatewayclasses gateways httproutes referencegrants listenersets; do
  file="$gateway/config/crd/standard/gateway.networking.k8s.io_$kind.yaml"
  [[ -f "$file" ]] || { log "missing $file"; exit 1; }
  printf '%s\n' "$file"
done
file="$traefik/docs/content/reference/dynamic-configuration/kubernetes-crd-definition-v1.yml"
[[ -f "$file" ]] || { log "missing $file"; exit 1; }
printf '%s\n' "$file"
