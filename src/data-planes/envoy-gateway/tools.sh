# Envoy Gateway's tools, sourced by scripts/install-tools.sh (which defines build_once and the
# variables it uses: here, tools_dir, bin_dir). Built with `--envoy-gateway` (`sandbox up
# --data-plane envoy-gateway` passes it) or `--test`.
#
# Envoy Gateway, the Gateway API implementation the sandbox (`--data-plane envoy-gateway`) and the
# test/e2e/envoy-gateway-*.test.ts tests run (docs/routing.md, "Envoy Gateway"), and egctl, its CLI.
# Its go.mod (go 1.26.7) has no replace directives, so go install builds both as they are. The CRDs
# come from the same module version: charts/gateway-crds-helm/templates/, whose Helm `{{ }}` lines
# are stripped: Gateway API's experimental channel (the Gateway API version Envoy Gateway requires)
# and Envoy Gateway's own (EnvoyPatchPolicy, EnvoyProxy, ...), one file beside the binary.
tool_flag=--envoy-gateway
ENVOY_GATEWAY_VERSION=v1.9.1

# Two listeners of the server are fixed in v1.9.1 and bound on every interface: controller-runtime's
# metrics (:8080, its metricsserver.DefaultBindAddress) and the health probe (:8081, the Kubernetes
# provider's healthProbeBindAddress). Both are package variables, set to "0" (controller-runtime: do
# not listen) at link time, so parallel stacks cannot collide on them; the sandbox reads Envoy
# Gateway's admin API, on a port it picks (src/data-planes/envoy-gateway/sandbox-process.ts).
build_envoy_gateway() {
  local ldflags="-s -w -X github.com/envoyproxy/gateway/internal/cmd/version.envoyGatewayVersion=$ENVOY_GATEWAY_VERSION"
  ldflags+=" -X sigs.k8s.io/controller-runtime/pkg/metrics/server.DefaultBindAddress=0"
  ldflags+=" -X github.com/envoyproxy/gateway/internal/provider/kubernetes.healthProbeBindAddress=0"
  go install -trimpath -ldflags "$ldflags" \
    "github.com/envoyproxy/gateway/cmd/envoy-gateway@$ENVOY_GATEWAY_VERSION" \
    "github.com/envoyproxy/gateway/cmd/egctl@$ENVOY_GATEWAY_VERSION"
}
# envoy_gateway_crds FILE: the CRDs of the module version, from charts/gateway-crds-helm/templates/.
# Each template is one `{{- if ... }}` ... `{{- end }}` block of plain YAML documents. Gateway API's
# bundle also holds a ValidatingAdmissionPolicy and its binding (safe-upgrades) that refuse
# experimental CRDs over standard ones: the e2e tests apply both channels to one API server
# (test/e2e/support/routing-crds.ts), so those documents are left out (awk: a document is dropped
# when its `kind:` line names them).
envoy_gateway_crds() {
  local module_dir templates
  module_dir=$(go mod download -json "github.com/envoyproxy/gateway@$ENVOY_GATEWAY_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  templates="$module_dir/charts/gateway-crds-helm/templates"
  grep -hv '^{{' "$templates/experimental-gatewayapi-crds.yaml" "$templates"/generated/*.yaml |
    awk '/^---$/ { head = $0 "\n"; in_head = 1; skip = 0; next }
         in_head { head = head $0 "\n"; if ($0 ~ /^kind: /) { in_head = 0; skip = ($0 ~ /^kind: ValidatingAdmissionPolicy/); if (!skip) printf "%s", head }; next }
         !skip { print }' >"$1.tmp"
  chmod 0644 "$1.tmp"
  mv "$1.tmp" "$1"
}

data_plane_tools() {
  build_once envoy-gateway "$ENVOY_GATEWAY_VERSION" build_envoy_gateway
  local eg_dir="$tools_dir/envoy-gateway-$ENVOY_GATEWAY_VERSION"
  [[ -s "$eg_dir/envoy-gateway-crds.yaml" ]] || envoy_gateway_crds "$eg_dir/envoy-gateway-crds.yaml"
  ln -sf "$eg_dir/egctl" "$bin_dir/egctl"
  ln -sf "$eg_dir/envoy-gateway-crds.yaml" "$bin_dir/envoy-gateway-crds.yaml"
}
