/**
 * What was built: Portico's version and the commit it was built from, for `portico --version`,
 * `kubectl portico --version` and the operator's `portico_build_info` metric.
 *
 * `npm run build` (scripts/bundle.ts) writes them to `dist/build-info.json` beside the compiled
 * modules and the bundles; the single-executable plugin (scripts/build-plugin-sea.ts), which has no
 * file beside it, gets the same object compiled in as `__PORTICO_BUILD_INFO__`. From the sources
 * (tsx, vitest) neither exists and the version is `0.0.0-dev`.
 */
import { readFileSync } from 'node:fs';

/** The version and commit of this build. */
export interface BuildInfo {
  /** SemVer of the package, e.g. `0.2.0` (`package.json` `version`, set by `npm run release`). */
  version: string;
  /**
   * The full 40-hex commit the build was made from, with `-dirty` appended when the work tree had
   * uncommitted changes; `unknown` when it was built outside a git checkout without `PORTICO_COMMIT`.
   */
  commit: string;
}

/** What a build run from the sources reports. */
export const DEV_BUILD_INFO: BuildInfo = { version: '0.0.0-dev', commit: 'unknown' };

declare const __PORTICO_BUILD_INFO__: BuildInfo | undefined;

/**
 * Checks the parsed content of a `build-info.json`.
 * @throws TypeError when `value` is not an object with string `version` and `commit`.
 */
export function parseBuildInfo(value: unknown): BuildInfo {
  const v = value as Partial<BuildInfo> | null;
  if (typeof v !== 'object' || v === null || typeof v.version !== 'string' || typeof v.commit !== 'string') {
    throw new TypeError('build-info.json must be an object with string "version" and "commit"');
  }
  return { version: v.version, commit: v.commit };
}

let cached: BuildInfo | undefined;

/**
 * This process's build: the compiled-in object of a single executable, else `build-info.json`
 * beside this module (dist/), else `DEV_BUILD_INFO`. Read once; never throws.
 */
export function buildInfo(): BuildInfo {
  if (cached) return cached;
  if (typeof __PORTICO_BUILD_INFO__ !== 'undefined') {
    cached = __PORTICO_BUILD_INFO__;
    return cached;
  }
  try {
    cached = parseBuildInfo(JSON.parse(readFileSync(new URL('./build-info.json', import.meta.url), 'utf8')));
  } catch {
    cached = DEV_BUILD_INFO;
  }
  return cached;
}

/** One line for `--version`, e.g. `portico 0.2.0 (commit 60eee06…, Node.js v24.21.0)`. */
export function formatVersion(program: string, info: BuildInfo, nodeVersion: string): string {
  return `${program} ${info.version} (commit ${info.commit}, Node.js ${nodeVersion})\n`;
}
