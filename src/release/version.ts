/**
 * The version rule of `npm run release`: a SemVer 2.0.0 version, written without a leading `v`,
 * above every version released before (semver's precedence: 0.10.0 > 0.9.0, 1.0.0 > 1.0.0-rc.1).
 * Pure; parsing and comparison are the `semver` package's (npm's own).
 */
import semver from 'semver';
import { ReleaseError } from './errors.js';

/**
 * Checks `next` against the versions already released.
 * @param next the version asked for, e.g. `0.2.0` or `1.0.0-rc.1`.
 * @param released versions already released (package.json's version, the `vX.Y.Z` tags without
 *   their `v`); entries that are not SemVer are ignored.
 * @returns the last released version (the highest of `released`), or undefined when there is none.
 * @throws ReleaseError when `next` is not SemVer, has a leading `v` or build metadata, or is not
 *   above the last released version.
 */
export function checkNextVersion(next: string, released: readonly string[]): string | undefined {
  const parsed = semver.valid(next);
  if (parsed === null) {
    throw new ReleaseError(
      `--version ${next}: not a SemVer version (MAJOR.MINOR.PATCH, e.g. 0.2.0 or 1.0.0-rc.1)`,
    );
  }
  if (semver.parse(next)?.build.length) {
    throw new ReleaseError(
      `--version ${next}: build metadata (+...) is not allowed: Helm and OCI tags would differ from the version`,
    );
  }
  if (parsed !== next) {
    throw new ReleaseError(`--version ${next}: write it as ${parsed} (no leading "v" or spaces)`);
  }
  const last = semver.rsort(released.filter((v) => semver.valid(v) !== null))[0];
  if (last !== undefined && !semver.gt(next, last)) {
    throw new ReleaseError(`--version ${next}: not above the last release ${last}; choose a higher version`);
  }
  return last;
}

/** The versions named by git tags of the form `vX.Y.Z` (other tags are left out). */
export function versionsFromTags(tags: readonly string[]): string[] {
  return tags
    .filter((t) => t.startsWith('v'))
    .map((t) => t.slice(1))
    .filter((v) => semver.valid(v) === v);
}
