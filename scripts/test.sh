#!/usr/bin/env bash
# `npm test` (README.md, "Tests"): ESLint and Prettier, and `tsc --noEmit`, run beside the build and
# the tests rather than before them; the build comes before vitest, since the e2e tests run dist/.
# Arguments go to `vitest run` (e.g. a project or a file).
#
# The exit status is 0 only when every part passed: lint, typecheck, build and tests. The output of
# lint and typecheck is held back and printed after the tests, so it does not interleave with
# vitest's; a summary line per part ends the output.
set -uo pipefail
cd "$(dirname "$0")/.."
bin=node_modules/.bin

logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT

"$bin/eslint" . >"$logs/lint" 2>&1 && "$bin/prettier" --check . >>"$logs/lint" 2>&1 &
lint_pid=$!
"$bin/tsc" -p tsconfig.json --noEmit >"$logs/typecheck" 2>&1 &
typecheck_pid=$!

build=0
tests=skipped
npm run --silent build || build=$?
if [ "$build" -eq 0 ]; then
  tests=0
  "$bin/vitest" run "$@" || tests=$?
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

verdict() { if [ "$1" = skipped ]; then echo "skipped (the build failed)"; elif [ "$1" -eq 0 ]; then echo ok; else echo "FAILED (exit $1)"; fi; }
echo
echo "npm test: lint $(verdict "$lint"), typecheck $(verdict "$typecheck"), build $(verdict "$build"), tests $(verdict "$tests")"
[ "$lint" -eq 0 ] && [ "$typecheck" -eq 0 ] && [ "$build" -eq 0 ] && [ "$tests" = 0 ]
