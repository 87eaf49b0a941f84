#!/usr/bin/env bash
# Builds the real parts the sandbox and the integration tests run, from the Go module proxy, into a
# cache outside the repository. Each tool lives in a directory named after its pinned version, so a
# tool is rebuilt only when its pin changes. Prints the bin directory on its last line.
#
#   PORTICO_TOOLS_DIR   where the binaries go (default: ${XDG_CACHE_HOME:-~/.cache}/portico/tools)
#   --test              also build what only the tests run (npm test passes it; the sandbox does not):
#                       helm, promtool, envoyproxy/ratelimit's client_cmd, Envoy Gateway, the OCI
#                       registry, qemu-user with Debian's arm64 runtimes (to run the arm64
#                       kubectl-portico), and Knot DNS and BIND 9 from Debian's packages
#   --envoy-gateway     also build Envoy Gateway and egctl, with its CRDs (`sandbox up --data-plane
#                       envoy-gateway` passes it; --test implies it)
#   --traefik           also build Traefik, with its CRDs (`sandbox up --data-plane traefik` passes
#                       it; --test implies it)
#                       (each data plane's flag is its src/data-planes/<name>/tools.sh's tool_flag;
#                       a data plane without one, Contour, is always built)
#   --kubelet           also build a node for the stack (`sandbox up --kubelet` passes it; --test
#                       implies it): kubelet, kube-scheduler and kube-controller-manager from the same
#                       Kubernetes module as kube-apiserver, the pause image (test/tools/pause) as a
#                       docker-archive, and containerd and runc from Debian's packages
#   --bench             also build the benchmark's tools: envoyproxy/ratelimit's service_cmd and ghz
#   --quill             also build quill, which signs the darwin kubectl-portico ad hoc
#                       (scripts/build-plugin-sea.ts runs it with --quill; --test implies it)
#   --prometheus        also build the Prometheus server (same release as promtool), for
#                       `npm run dashboard:render` (test/bench/render-dashboard.ts); not needed by npm test
#
# Requires: go (1.26+), curl. Installs redis-server, redis-sentinel, redis-cli (and with --test,
# qemu-user) from Debian's packages when missing.
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
tools_dir=${PORTICO_TOOLS_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/portico/tools}
bin_dir="$tools_dir/bin"
mkdir -p "$bin_dir"

# One build at a time per cache: a second caller waits for the first instead of building alongside.
exec 9>"$tools_dir/.lock"
flock 9

KUBERNETES_VERSION=$(awk '/^require k8s.io\/kubernetes/ {print $3}' "$here/test/tools/kubernetes/go.mod")
ETCD_VERSION=$(awk '/^require go.etcd.io\/etcd\/server\/v3/ {print $3}' "$here/test/tools/etcd/go.mod")
PEBBLE_VERSION=v2.10.1
HELM_VERSION=v3.22.0
# envoyproxy/ratelimit has no tagged release on the module proxy since v1.4.0; this pseudo-version
# pins the commit 3fb702589d36 (2026-01-22). Its go.mod has no replace directives, so go install works.
ENVOY_RATELIMIT_VERSION=v1.4.1-0.20260122083618-3fb702589d36
GHZ_VERSION=v0.93.0
# promtool, for the alert rules' unit tests (`promtool test rules`, test/e2e/alert-rules.test.ts) and
# the dashboard's expression check. Prometheus publishes its Go module as v0.3XX.Y for release 3.XX.Y;
# v0.316.0 (Prometheus 3.16.0) is the newest the module proxy serves here (`go list -m -versions`:
# v0.313.x to v0.316.0; newer releases are not served), and it builds with go install as it is (its
# go.mod has no replace directives), so no older one had to be tried. About 5 minutes on 2 cores.
# The `prometheus` server of the same module version builds the same way (about 2.5 more minutes
# once promtool's modules are cached); without the builtinassets build tag it serves the HTTP API
# and no web UI, which is all the dashboard renderer needs.
PROMETHEUS_VERSION=v0.316.0
# CNCF Distribution's registry: the OCI registry on loopback that the release test pushes the image
# (`podman push`) and the chart (`helm push`) to, and pulls and installs them from
# (test/e2e/support/registry.ts starts it on a free port; README.md, "Install with Helm"). Its go.mod
# has no replace directives, so go install builds it as it is.
DISTRIBUTION_VERSION=v3.1.2
# quill, for the ad-hoc signature of the darwin kubectl-portico: built in test/tools/quill/ (see its
# tools.go for why not with go install).
QUILL_VERSION=$(awk '/^require github.com\/anchore\/quill/ {print $3}' "$here/test/tools/quill/go.mod")

bench=false
prometheus=false
test_tools=false
# The data planes' tool scripts and the flags they answer to (src/data-planes/<name>/tools.sh).
data_plane_scripts=("$here"/src/data-planes/*/tools.sh)
mapfile -t data_plane_flags < <(sed -n 's/^tool_flag=\(--.*\)$/\1/p' "${data_plane_scripts[@]}")
requested_flags=()
kubelet=false
knot=false
quill=false
for arg in "$@"; do
  case $arg in
    --test) test_tools=true; kubelet=true; quill=true ;;
    --quill) quill=true ;;
    --kubelet) kubelet=true ;;
    --knot) knot=true ;;
    --bench) bench=true ;;
    --prometheus) prometheus=true ;;
    *)
      if [[ " ${data_plane_flags[*]} " == *" $arg "* ]]; then
        requested_flags+=("$arg")
      else
        printf 'usage: %s [--test]%s [--kubelet] [--knot] [--quill] [--bench] [--prometheus]\n' "$0" "$(printf ' [%s]' "${data_plane_flags[@]}")" >&2
        exit 2
      fi
      ;;
  esac
done

log() { printf '[install-tools] %s\n' "$*" >&2; }

# build_once NAME VERSION COMMAND...: runs COMMAND with GOBIN set to a versioned directory when
# that directory does not yet hold NAME, then links NAME into bin/.
build_once() {
  local name=$1 version=$2
  shift 2
  local dir="$tools_dir/$name-$version"
  if [[ ! -x "$dir/$name" ]]; then
    log "building $name $version (first time only; cached in $dir)"
    mkdir -p "$dir"
    (export GOBIN="$dir"; "$@")
  fi
  ln -sf "$dir/$name" "$bin_dir/$name"
}

# go_install_as NAME PACKAGE@VERSION: go install into a scratch directory, then move the binary
# (named after the package's last path element) to $GOBIN/NAME.
go_install_as() {
  local name=$1 pkg=$2 scratch
  scratch=$(mktemp -d)
  GOBIN="$scratch" go install -trimpath -ldflags "-s -w" "$pkg"
  mv "$scratch/$(basename "${pkg%@*}")" "$GOBIN/$name"
  rm -rf "$scratch"
}

build_kubernetes() {
  local minor=${KUBERNETES_VERSION#v1.}
  minor=${minor%%.*}
  local pkg=k8s.io/component-base/version
  local ldflags="-s -w -X $pkg.gitVersion=$KUBERNETES_VERSION -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
  ldflags+=" -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
  cd "$here/test/tools/kubernetes"
  go build -trimpath -ldflags "$ldflags" -o "$GOBIN/$1" "k8s.io/kubernetes/cmd/$1"
}

build_etcd() {
  cd "$here/test/tools/etcd"
  go build -trimpath -ldflags "-s -w" -o "$GOBIN/etcd" go.etcd.io/etcd/server/v3
}

build_once kube-apiserver "$KUBERNETES_VERSION" build_kubernetes kube-apiserver
build_once kubectl "$KUBERNETES_VERSION" build_kubernetes kubectl
build_once etcd "$ETCD_VERSION" build_etcd
build_once pebble "$PEBBLE_VERSION" go install -trimpath "github.com/letsencrypt/pebble/v2/cmd/pebble@$PEBBLE_VERSION"
build_once pebble-challtestsrv "$PEBBLE_VERSION" go install -trimpath "github.com/letsencrypt/pebble/v2/cmd/pebble-challtestsrv@$PEBBLE_VERSION"
# Each data plane's tools (docs/architecture.md, "A data plane is one folder"): its folder's
# tools.sh, sourced in turn, sets tool_flag (the flag that asks for them; empty: always built) and
# defines data_plane_tools, which builds them with build_once and links them into bin/.
for tools_script in "${data_plane_scripts[@]}"; do
  unset -f data_plane_tools
  tool_flag=
  # shellcheck source=/dev/null
  source "$tools_script"
  if [[ -z $tool_flag || $test_tools == true || " ${requested_flags[*]} " == *" $tool_flag "* ]]; then
    data_plane_tools
  fi
done
build_quill() {
  cd "$here/test/tools/quill"
  go build -trimpath -ldflags "-s -w" -o "$GOBIN/quill" github.com/anchore/quill/cmd/quill
}
if [[ $quill == true ]]; then
  build_once quill "$QUILL_VERSION" build_quill
fi
# The pause image, the container every Pod sandbox holds its namespaces with (containerd's
# sandbox_image): test/tools/pause built static, as a docker-archive that `ctr images import` takes,
# made here byte for byte the same each time (fixed mtime, owner and order), so its digest is stable.
PAUSE_IMAGE=localhost/portico-pause:3.10
build_pause() {
  local scratch layer_sha config config_sha
  scratch=$(mktemp -d)
  mkdir -p "$scratch/rootfs" "$scratch/archive"
  (cd "$here/test/tools/pause" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$scratch/rootfs/pause" .)
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=1970-01-01 -C "$scratch/rootfs" -cf "$scratch/archive/layer.tar" pause
  layer_sha=$(sha256sum "$scratch/archive/layer.tar" | cut -d' ' -f1)
  config='{"architecture":"amd64","os":"linux","config":{"Entrypoint":["/pause"],"User":"65535:65535"},"rootfs":{"type":"layers","diff_ids":["sha256:'$layer_sha'"]}}'
  config_sha=$(printf '%s' "$config" | sha256sum | cut -d' ' -f1)
  printf '%s' "$config" >"$scratch/archive/$config_sha.json"
  printf '[{"Config":"%s.json","RepoTags":["%s"],"Layers":["layer.tar"]}]' "$config_sha" "$PAUSE_IMAGE" >"$scratch/archive/manifest.json"
  tar --sort=name --owner=0 --group=0 --numeric-owner --mtime=1970-01-01 -C "$scratch/archive" -cf "$GOBIN/pause.tar" manifest.json "$config_sha.json" layer.tar
  cp "$scratch/rootfs/pause" "$GOBIN/pause"
  rm -rf "$scratch"
}
if [[ $kubelet == true ]]; then
  build_once kubelet "$KUBERNETES_VERSION" build_kubernetes kubelet
  build_once kube-scheduler "$KUBERNETES_VERSION" build_kubernetes kube-scheduler
  build_once kube-controller-manager "$KUBERNETES_VERSION" build_kubernetes kube-controller-manager
  pause_version=$(sha256sum "$here/test/tools/pause/main.go" | cut -c1-12)
  build_once pause "$pause_version" build_pause
  ln -sf "$tools_dir/pause-$pause_version/pause.tar" "$bin_dir/pause.tar"
  # containerd and runc from Debian's packages (containerd 1.6 serves the CRI the kubelet 1.37 needs;
  # the kubelet falls back to its cgroupDriver without CRI RuntimeConfig). Nothing is started: the
  # sandbox runs containerd itself (src/sandbox/kubelet.ts).
  if ! command -v containerd >/dev/null 2>&1 || ! command -v runc >/dev/null 2>&1 || [[ ! -x /usr/lib/cni/loopback ]]; then
    log "installing containerd, runc and the CNI plugins from Debian's packages"
    if [[ $(id -u) -eq 0 ]]; then
      apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends containerd runc containernetworking-plugins >/dev/null
    else
      sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends containerd runc containernetworking-plugins >/dev/null
    fi
  fi
  for tool in containerd containerd-shim-runc-v2 ctr runc; do
    ln -sf "$(command -v "$tool")" "$bin_dir/$tool"
  done
fi
if [[ $test_tools == true ]]; then
  build_once helm "$HELM_VERSION" go install -trimpath "helm.sh/helm/v3/cmd/helm@$HELM_VERSION"
  build_once promtool "$PROMETHEUS_VERSION" go install -trimpath \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=3.${PROMETHEUS_VERSION#v0.3}" \
    "github.com/prometheus/prometheus/cmd/promtool@$PROMETHEUS_VERSION"
  # An independent client of Envoy's rate-limit protocol, for the e2e tests.
  build_once envoy-ratelimit-client "$ENVOY_RATELIMIT_VERSION" \
    go_install_as envoy-ratelimit-client "github.com/envoyproxy/ratelimit/src/client_cmd@$ENVOY_RATELIMIT_VERSION"
  build_once registry "$DISTRIBUTION_VERSION" go install -trimpath -ldflags "-s -w" \
    "github.com/distribution/distribution/v3/cmd/registry@$DISTRIBUTION_VERSION"
fi
if [[ $bench == true ]]; then
  build_once envoy-ratelimit-server "$ENVOY_RATELIMIT_VERSION" \
    go_install_as envoy-ratelimit-server "github.com/envoyproxy/ratelimit/src/service_cmd@$ENVOY_RATELIMIT_VERSION"
  build_once ghz "$GHZ_VERSION" go install -trimpath "github.com/bojand/ghz/cmd/ghz@$GHZ_VERSION"
fi
if [[ $prometheus == true ]]; then
  build_once prometheus "$PROMETHEUS_VERSION" go install -trimpath \
    -ldflags "-s -w -X github.com/prometheus/common/version.Version=3.${PROMETHEUS_VERSION#v0.3}" \
    "github.com/prometheus/prometheus/cmd/prometheus@$PROMETHEUS_VERSION"
fi

# redis-server for the counters; redis-sentinel and redis-cli for the failover and Cluster tests
# (test/e2e/ratelimit-redis-*.test.ts): Debian's redis-server, redis-sentinel and redis-tools.
redis_pkgs=()
command -v redis-server >/dev/null 2>&1 || redis_pkgs+=(redis-server)
command -v redis-sentinel >/dev/null 2>&1 || redis_pkgs+=(redis-sentinel)
command -v redis-cli >/dev/null 2>&1 || redis_pkgs+=(redis-tools)
if [[ ${#redis_pkgs[@]} -gt 0 ]]; then
  log "installing ${redis_pkgs[*]} from Debian's packages"
  if [[ $(id -u) -eq 0 ]]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${redis_pkgs[@]}" >/dev/null
  else
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${redis_pkgs[@]}" >/dev/null
  fi
fi
for tool in redis-server redis-sentinel redis-cli; do
  ln -sf "$(command -v "$tool")" "$bin_dir/$tool"
done

# Knot DNS, the authoritative server of the DNS-01 challenge zone the e2e tests update with RFC 2136,
# and BIND 9 as the resolver a second Pebble validates through (test/e2e/dns-update-knot.test.ts,
# dns01-delegation.test.ts); `--knot` for the sandbox's apps zone alone (src/sandbox/apps-zone.ts).
if [[ $test_tools == true || $knot == true ]] && { [[ ! -x /usr/sbin/knotd ]] || [[ ! -x /usr/sbin/named ]]; }; then
  log "installing knot (Knot DNS) and bind9 from Debian's packages"
  if [[ $(id -u) -eq 0 ]]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq knot bind9 >/dev/null
  else
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq knot bind9 >/dev/null
  fi
fi
if [[ $test_tools == true || $knot == true ]]; then
  ln -sf /usr/sbin/knotd "$bin_dir/knotd"
  ln -sf /usr/sbin/named "$bin_dir/named"
fi

# zip and osslsigncode, for the windows kubectl-portico of a release (scripts/build-plugin-sea.ts
# removes node.exe's Authenticode signature and zips the archive; the release test builds them).
if [[ $test_tools == true || $quill == true ]] && { ! command -v zip >/dev/null || ! command -v osslsigncode >/dev/null; }; then
  log "installing zip and osslsigncode from Debian's packages"
  if [[ $(id -u) -eq 0 ]]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zip osslsigncode >/dev/null
  else
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zip osslsigncode >/dev/null
  fi
fi

# The release test (test/e2e/release.test.ts) runs the linux-arm64 kubectl-portico under user-mode
# emulation: qemu-aarch64 with Debian's arm64 C and C++ runtimes as its sysroot (/usr/aarch64-linux-gnu).
if [[ $test_tools == true ]] && [[ $(uname -m) != aarch64 ]] &&
  { ! command -v qemu-aarch64 >/dev/null 2>&1 || [[ ! -e /usr/aarch64-linux-gnu/lib/libstdc++.so.6 ]]; }; then
  log "installing qemu-user and the arm64 runtimes from Debian's packages"
  pkgs=(qemu-user libc6-arm64-cross libstdc++6-arm64-cross libgcc-s1-arm64-cross)
  if [[ $(id -u) -eq 0 ]]; then
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
  else
    sudo apt-get update -qq && sudo DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
  fi
fi

echo "$bin_dir"
