#!/usr/bin/env bash
# `npm test` (README.md, "Tests"): ESLint and Prettier, and `tsc --noEmit`, run beside the build and
# the tests rather than before them; the build comes before vitest, since the e2e tests run dist/.
# Arguments go to one `vitest run` (e.g. a project or a file). Without arguments the unit tests run
# in one vitest process and the e2e files in PORTICO_E2E_SHARDS processes (3 by default), each on a
# stack of its own (PORTICO_E2E_SANDBOX_DIR=.sandbox-e2e-<i>) with its share of the files dealt by
# their measured time (test/e2e-shards.ts; docs/testing.md, "In parallel"). Each process's output is
# held in a log and printed in the order started (unit, e2e-1, ...), each once it has ended; each
# writes its own test-results/durations-<part>.json.
# PORTICO_TEST_SHUFFLE_SEED=<n> runs each process's files in an order shuffled with that seed
# (test/e2e-shards.ts), to show no file depends on the files before it.
#
# The exit status is 0 only when every part passed: lint, typecheck, build and tests. The output of
# lint and typecheck is held back and printed after the tests, so it does not interleave with
# vitest's; a summary line per part ends the output.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=node_modules/.bin

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

# Node's on-disk compile cache (Node 22+; entries keyed by each file's content) for every Node
# process of the run: vitest's, and the operators, rate-limit servers and plugins the e2e files
# start, which load the same bundles hundreds of times. Loading dist/controller.bundle.js takes
# about 0.6 CPU-seconds with the cache instead of 0.85 (`NODE_COMPILE_CACHE=<dir> /usr/bin/time
# node -e "await import('./dist/controller.bundle.js')"`). Kept beside the Go tools' cache.
export NODE_COMPILE_CACHE="${NODE_COMPILE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/portico/node-compile-cache}"

"$bin/eslint" . >"$logs/lint" 2>&1 && "$bin/prettier" --check . >>"$logs/lint" 2>&1 &
lint_pid=$!
"$bin/tsc" -p tsconfig.json --noEmit >"$logs/typecheck" 2>&1 &
typecheck_pid=$!

# Portico's image for test/e2e/helm-kubelet.test.ts (the chart installed onto a real node), built
# beside everything else by scripts/build-image.sh (about 4 minutes with its Debian base images
# cached in ~/.cache/portico/podman; 20 the first time). The file waits for the exit status this
# writes to PORTICO_E2E_IMAGE_BUILD_STATUS, and fails with the build's log when it is not 0. Only in
# a whole run: a run with arguments uses the archive already built (the file says how to build it).
image=skipped
if [ "$#" -eq 0 ]; then
  export PORTICO_E2E_IMAGE_ARCHIVE="${PORTICO_E2E_IMAGE_ARCHIVE:-${XDG_CACHE_HOME:-$HOME/.cache}/portico/images/portico-e2e.tar}"
  export PORTICO_E2E_IMAGE_BUILD_STATUS="$logs/image.status" PORTICO_E2E_IMAGE_BUILD_LOG="$logs/image"
  (
    code=0
    scripts/build-image.sh --tag localhost/portico:e2e --output "$PORTICO_E2E_IMAGE_ARCHIVE" >"$logs/image" 2>&1 || code=$?
    echo "$code" >"$logs/image.status.tmp" && mv "$logs/image.status.tmp" "$logs/image.status"
  ) &
  image_pid=$!
fi

# The unit project, and the e2e project in shards, side by side. Returns non-zero when any failed.
run_sharded() {
  local shards=${PORTICO_E2E_SHARDS:-3}
  local parts=(unit) pids=() status=0 i part
  PORTICO_TEST_DURATIONS_FILE=test-results/durations-unit.json "$bin/vitest" run --project unit >"$logs/unit" 2>&1 &
  pids+=($!)
  for ((i = 1; i <= shards; i++)); do
    PORTICO_E2E_SANDBOX_DIR=".sandbox-e2e-$i" PORTICO_TEST_DURATIONS_FILE="test-results/durations-e2e-$i.json" \
      "$bin/vitest" run --project e2e --shard="$i/$shards" >"$logs/e2e-$i" 2>&1 &
    pids+=($!)
    parts+=("e2e-$i")
  done
  echo "vitest: unit and $shards e2e shards started; their outputs follow in that order, each once it has ended"
  for i in "${!pids[@]}"; do
    part=${parts[$i]}
    local code=0
    wait "${pids[$i]}" || code=$?
    echo
    echo "=== vitest $part (exit $code) ==="
    cat "$logs/$part"
    [ "$code" -eq 0 ] || status=$code
  done
  return "$status"
}

# The failed files and cases of every part run_sharded held a log of, one line each, for the end of
# the output: a CI log shown from its end then names every failure, whichever part printed it.
failed_cases() {
  local log
  for log in "$logs"/unit "$logs"/e2e-*; do
    [ -f "$log" ] || continue
    sed 's/\x1b\[[0-9;]*m//g' "$log" | grep -E '^ *FAIL ' | sed "s/^ */  ${log##*/}: /" | sort -u | head -20
  done
}

build=0
tests=skipped
npm run --silent build || build=$?
if [ "$build" -eq 0 ]; then
  tests=0
  if [ "$#" -gt 0 ]; then
    "$bin/vitest" run "$@" || tests=$?
  else
    run_sharded || tests=$?
  fi
fi

if [ "$image" = skipped ] && [ -n "${image_pid:-}" ]; then
  wait "$image_pid" || true
  image=$(cat "$logs/image.status" 2>/dev/null || echo 1)
  if [ "$image" -ne 0 ]; then
    echo
    echo "--- image build (exit $image) ---"
    cat "$logs/image"
  fi
fi

lint=0
wait "$lint_pid" || lint=$?
typecheck=0
wait "$typecheck_pid" || typecheck=$?

for part in lint typecheck; do
  if [ "${!part}" -ne 0 ]; then
    echo
    echo "--- $part (exit ${!part}) ---"
    cat "$logs/$part"
  fi
done

failed=$(failed_cases)
if [ -n "$failed" ]; then
  echo
  echo "Failed (each part's output above has the errors):"
  echo "$failed"
fi

verdict() { if [ "$1" = skipped ]; then echo "skipped (the build failed)"; elif [ "$1" -eq 0 ]; then echo ok; else echo "FAILED (exit $1)"; fi; }
echo
echo "npm test: lint $(verdict "$lint"), typecheck $(verdict "$typecheck"), build $(verdict "$build"), image $(if [ "$image" = skipped ]; then echo "not built (a run with arguments)"; else verdict "$image"; fi), tests $(verdict "$tests")"
[ "$lint" -eq 0 ] && [ "$typecheck" -eq 0 ] && [ "$build" -eq 0 ] && [ "$tests" = 0 ]
