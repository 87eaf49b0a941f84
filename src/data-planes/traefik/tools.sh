# Traefik's tools, sourced by scripts/install-tools.sh (which defines build_once and the variables
# it uses: here, tools_dir, bin_dir). Built with `--traefik` (`sandbox up --data-plane traefik`
# passes it) or `--test`.
#
# Traefik, the data plane that serves HTTPS itself in the sandbox (`--data-plane traefik`) and in
# test/e2e/traefik-*.test.ts (docs/routing.md, "Traefik"). Its go.mod has replace and exclude
# directives, which go install refuses, so it is built in the module test/tools/traefik/, which repeats
# them (v3.7.x does not build from the proxy at all: it replaces a nested module by a local path the
# module zip lacks). Its CRDs (Middleware, IngressRoute, ...; the CRD provider watches them all) come
# from the same module version (docs/content/reference/dynamic-configuration/
# kubernetes-crd-definition-v1.yml), copied beside the binary.
tool_flag=--traefik
TRAEFIK_VERSION=$(awk '/^require github.com\/traefik\/traefik\/v3/ {print $3}' "$here/test/tools/traefik/go.mod")

build_traefik() {
  cd "$here/test/tools/traefik"
  go build -trimpath -ldflags "-s -w -X github.com/traefik/traefik/v3/pkg/version.Version=$TRAEFIK_VERSION" \
    -o "$GOBIN/traefik" github.com/traefik/traefik/v3/cmd/traefik
  local module_dir
  module_dir=$(go mod download -json "github.com/traefik/traefik/v3@$TRAEFIK_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  cp "$module_dir/docs/content/reference/dynamic-configuration/kubernetes-crd-definition-v1.yml" "$GOBIN/traefik-crds.yaml"
  chmod 0644 "$GOBIN/traefik-crds.yaml"
}
data_plane_tools() {
  build_once traefik "$TRAEFIK_VERSION" build_traefik
  ln -sf "$tools_dir/traefik-$TRAEFIK_VERSION/traefik-crds.yaml" "$bin_dir/traefik-crds.yaml"
}
