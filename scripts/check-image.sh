#!/usr/bin/env bash
# Proves what the Dockerfile builds without a Docker engine: runs each stage's steps as plain
# commands in a temporary directory (one root directory per stage, WORKDIR and COPY mapped into
# it, RUN through bash with the stage's ENV), then checks the final stage's filesystem and runs its
# ENTRYPOINT:
#
#   - the Node.js running the steps has the major version of the Dockerfile's base images (their
#     names, pinned by digest), which is the one package.json's engines asks for;
#   - the image holds package.json, dist/ and node_modules/ and nothing else, no sourcemaps, no tests;
#   - node_modules has every production dependency (`npm ls --omit=dev`) and no dev dependency;
#   - `portico --help` and `portico controller --help` (which loads every controller module and
#     so every dependency it imports) exit 0 from outside the app directory; and so does
#     `portico ratelimit-server --help` once the CLI lists that command;
#   - the final stage runs as a numeric non-root user.
#
# The build context is this checkout minus .dockerignore (matched by tar's --exclude-from, the same
# for the simple patterns used there). The base images' own contents (node, npm) are replaced by
# the Node.js 24 that package.json pins (node_modules/.bin/node) and the npm on PATH.
#
#   scripts/check-image.sh            KEEP=1 keeps the temporary directory
set -euo pipefail

here=$(cd "$(dirname "$0")/.." && pwd)
dockerfile="$here/Dockerfile"
work=$(mktemp -d "${TMPDIR:-/tmp}/portico-image.XXXXXX")
if [[ "${KEEP:-}" == 1 ]]; then echo "check-image: keeping $work" >&2; else trap 'rm -rf "$work"' EXIT; fi

fail() { echo "check-image: FAIL: $*" >&2; exit 1; }
log() { echo "check-image: $*" >&2; }

# --- Node.js 24 for the RUN steps and the entrypoint ---------------------------------------------
node_bin="$here/node_modules/.bin/node"
[[ -x "$node_bin" ]] || fail "$node_bin is missing: run npm ci first (the node devDependency pins Node.js)"
mkdir -p "$work/bin"
ln -s "$(readlink -f "$node_bin")" "$work/bin/node"
export PATH="$work/bin:$PATH"
node_major=$(node -p 'process.versions.node.split(".")[0]')
engines=$(node -p "require('$here/package.json').engines.node")

# --- the build context ---------------------------------------------------------------------------
context="$work/context"
mkdir -p "$context"
tar -C "$here" --exclude-from="$here/.dockerignore" --exclude=./.dockerignore -cf - . | tar -C "$context" -xf -

# --- the Dockerfile, one instruction per line (continuations joined, comments dropped) -----------
mapfile -t instructions < <(
  sed -e 's/\r$//' "$dockerfile" | awk '
    /^[[:space:]]*#/ && !cont { next }
    { line = cont ? cont " " $0 : $0 }
    /\\$/ { sub(/\\$/, "", line); cont = line; next }
    { cont = ""; if (line ~ /[^[:space:]]/) print line }'
)

declare -A args=()
stage="" root="" cwd="" user="" entrypoint="" cmd="" from_image=""
declare -a stage_env=()

expand() { # ${VAR} and $VAR from ARG values
  local s=$1 k
  for k in "${!args[@]}"; do s=${s//\$\{$k\}/${args[$k]}}; s=${s//\$$k/${args[$k]}}; done
  printf '%s' "$s"
}
in_root() { # an image path -> the stage's directory; relative paths are against WORKDIR
  local p=$1
  [[ $p == /* ]] || p="$cwd/$p"
  printf '%s%s' "$root" "$p"
}
json_array() { node -e 'const a = JSON.parse(process.argv[1]); if (!Array.isArray(a)) process.exit(1); console.log(a.join("\n"))' "$1"; }

for line in "${instructions[@]}"; do
  keyword=${line%%[[:space:]]*}
  rest=${line#"$keyword"}
  rest=${rest#"${rest%%[![:space:]]*}"}
  case "${keyword^^}" in
    ARG)
      name=${rest%%=*}
      [[ $rest == *=* ]] && args[$name]=${rest#*=} ;;
    FROM)
      rest=$(expand "$rest")
      from_image=${rest%% *}
      stage=final
      [[ $rest =~ [[:space:]][Aa][Ss][[:space:]]+([A-Za-z0-9_-]+) ]] && stage=${BASH_REMATCH[1]}
      root="$work/stages/$stage"
      mkdir -p "$root"
      cwd=/ user="" entrypoint="" cmd="" stage_env=()
      log "stage $stage (FROM $from_image)"
      if [[ $from_image =~ node(js)?:?([0-9]+) ]] && [[ ${BASH_REMATCH[2]} != "$node_major" ]]; then
        fail "$from_image is Node.js ${BASH_REMATCH[2]}, but the steps run on Node.js $node_major"
      fi ;;
    WORKDIR)
      [[ $rest == /* ]] || rest="$cwd/$rest"
      cwd=$rest
      mkdir -p "$root$cwd" ;;
    ENV)
      stage_env+=("${rest%%=*}=${rest#*=}") ;;
    COPY)
      read -ra words <<<"$rest"
      src_root=$context
      files=()
      for w in "${words[@]}"; do
        case $w in
          --from=*) src_root="$work/stages/${w#--from=}" ;;
          --chown=* | --chmod=* | --link) ;;
          *) files+=("$w") ;;
        esac
      done
      dest=$(in_root "${files[-1]}")
      unset 'files[-1]'
      for f in "${files[@]}"; do
        src="$src_root/${f#/}"
        [[ -e $src ]] || fail "COPY $f: not in the $([[ $src_root == "$context" ]] && echo "build context (.dockerignore?)" || echo "stage") "
        if [[ $dest == */ ]]; then mkdir -p "$dest"; cp -a "$src" "$dest"; else mkdir -p "$(dirname "$dest")"; cp -a "$src" "$dest"; fi
      done ;;
    RUN)
      log "  RUN $rest"
      (cd "$root$cwd" && env "${stage_env[@]}" bash -euo pipefail -c "$rest") >"$work/run.log" 2>&1 ||
        { tail -n 30 "$work/run.log" >&2; fail "RUN $rest"; } ;;
    USER) user=$rest ;;
    ENTRYPOINT) entrypoint=$rest ;;
    CMD) cmd=$rest ;;
    LABEL | EXPOSE) ;;
    *) fail "the Dockerfile uses $keyword, which this script does not run: teach it or keep to the listed instructions" ;;
  esac
done

[[ $stage == final ]] || fail "the last stage should have no name (it is the image)"
app="$root/app"

# --- checks --------------------------------------------------------------------------------------
[[ $engines == *">=$node_major"* ]] || fail "package.json engines ($engines) does not ask for Node.js $node_major"
[[ $user =~ ^[0-9]+(:[0-9]+)?$ ]] || fail "USER must be numeric (runAsNonRoot), got '$user'"
[[ ${user%%:*} != 0 ]] || fail "USER must not be root"

entries=$(cd "$root" && find . -mindepth 1 -maxdepth 2 | sort | tr '\n' ' ')
[[ $entries == "./app ./app/dist ./app/node_modules ./app/package.json ./app/proto " ]] || fail "unexpected files in the image: $entries"
[[ -z $(find "$app/dist" -name '*.map' -o -name '*.test.js' | head -1) ]] || fail "sourcemaps or tests in dist/"

# Every package the lockfile marks dev-only (needed by devDependencies alone) must be absent.
dev_only=$(node -e '
  const fs = require("node:fs"), path = require("node:path");
  const [lock, app] = process.argv.slice(1);
  const found = Object.entries(JSON.parse(fs.readFileSync(lock, "utf8")).packages)
    .filter(([p, v]) => p && v.dev && fs.existsSync(path.join(app, p)))
    .map(([p]) => p);
  console.log(found.slice(0, 5).join(" "));
' "$here/package-lock.json" "$app")
[[ -z $dev_only ]] || fail "dev-only packages in the image: $dev_only"
(cd "$app" && npm ls --omit=dev --all >/dev/null 2>"$work/npm-ls.log") || { cat "$work/npm-ls.log" >&2; fail "npm ls --omit=dev: production dependencies incomplete"; }

mapfile -t entry < <(json_array "$entrypoint") || fail "ENTRYPOINT must be an exec-form JSON array"
[[ ${entry[0]} == */node ]] || fail "ENTRYPOINT should start with the image's node, got ${entry[0]}"
script="$root${entry[1]}"
run_image() { (cd / && env -i PATH=/usr/bin:/bin "${stage_env[@]}" "$work/bin/node" "$script" "$@"); }

mapfile -t default_args < <(json_array "${cmd:-[]}") || fail "CMD must be an exec-form JSON array"
run_image "${default_args[@]}" >"$work/help.txt" || fail "ENTRYPOINT + CMD (${entry[*]} $cmd) did not exit 0"
grep -q '^usage: portico' "$work/help.txt" || fail "portico --help printed no usage"
run_image controller --help >"$work/controller-help.txt" || fail "portico controller --help did not exit 0"
grep -q -- '--platform-cname-target' "$work/controller-help.txt" || fail "portico controller --help lists no flags"
checked="portico --help, portico controller --help"
if grep -q 'ratelimit-server' "$work/help.txt"; then
  run_image ratelimit-server --help >/dev/null || fail "portico ratelimit-server --help did not exit 0"
  checked+=", portico ratelimit-server --help"
fi

size=$(du -sh "$app" | cut -f1)
modules=$(find "$app/node_modules" -name package.json -path '*/node_modules/*/package.json' -not -path '*/node_modules/*/node_modules/*/*' | wc -l)
log "OK: Node.js $(node --version), user $user, /app $size ($modules packages), $checked exit 0"
