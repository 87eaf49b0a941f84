# Contour's tools, sourced by scripts/install-tools.sh (which defines build_once and the variables it
# uses: here, tools_dir, bin_dir). Contour is the sandbox's default data plane: always built.
#
# Contour, the ingress controller the sandbox and the e2e tests run (docs/routing.md, "Contour"). Its
# go.mod has no replace directives, so go install builds it as it is; its CRDs come from the same
# module version (examples/contour/01-crds.yaml), copied beside the binary.
tool_flag=
CONTOUR_VERSION=v1.33.8

build_contour() {
  go install -trimpath -ldflags "-s -w -X github.com/projectcontour/contour/internal/build.Version=$CONTOUR_VERSION" \
    "github.com/projectcontour/contour/cmd/contour@$CONTOUR_VERSION"
  local module_dir
  module_dir=$(go mod download -json "github.com/projectcontour/contour@$CONTOUR_VERSION" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
  cp "$module_dir/examples/contour/01-crds.yaml" "$GOBIN/contour-crds.yaml"
  chmod 0644 "$GOBIN/contour-crds.yaml"
}

data_plane_tools() {
  build_once contour "$CONTOUR_VERSION" build_contour
  ln -sf "$tools_dir/contour-$CONTOUR_VERSION/contour-crds.yaml" "$bin_dir/contour-crds.yaml"
}
