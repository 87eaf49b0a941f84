/**
 * CHANGELOG.md in the Keep a Changelog 1.1.0 form (https://keepachangelog.com/en/1.1.0/): changes
 * gather under `## [Unreleased]`; a release moves them under `## [X.Y.Z] - YYYY-MM-DD` and leaves an
 * empty Unreleased section above. Pure.
 */
import { ReleaseError } from './errors.js';

const UNRELEASED = /^## \[Unreleased\][^\n]*\n/m;
const NEXT_SECTION = /^## \[/m;

/** The text under `## [Unreleased]` up to the next `## [` heading (or the end), trimmed. */
export function unreleasedNotes(changelog: string): string {
  const heading = UNRELEASED.exec(changelog);
  if (!heading) throw new ReleaseError('CHANGELOG.md has no "## [Unreleased]" heading');
  const rest = changelog.slice(heading.index + heading[0].length);
  const end = NEXT_SECTION.exec(rest);
  return (end ? rest.slice(0, end.index) : rest).trim();
}

/**
 * Moves the Unreleased notes under a heading of their own.
 * @param changelog the whole CHANGELOG.md.
 * @param version the version released, e.g. `0.2.0`.
 * @param date the release day, `YYYY-MM-DD` (UTC).
 * @returns the new CHANGELOG.md.
 * @throws ReleaseError when there is no Unreleased heading, nothing under it, or a section for
 *   `version` already.
 */
export function releaseChangelog(changelog: string, version: string, date: string): string {
  const notes = unreleasedNotes(changelog);
  if (notes === '') {
    throw new ReleaseError(
      'CHANGELOG.md: nothing under "## [Unreleased]"; write what this release changes (and an "### Upgrading" note for anything users must act on) before releasing',
    );
  }
  if (changelog.includes(`## [${version}]`)) {
    throw new ReleaseError(`CHANGELOG.md already has a section "## [${version}]"`);
  }
  const heading = UNRELEASED.exec(changelog);
  if (!heading) throw new ReleaseError('CHANGELOG.md has no "## [Unreleased]" heading');
  const before = changelog.slice(0, heading.index);
  const rest = changelog.slice(heading.index + heading[0].length);
  const end = NEXT_SECTION.exec(rest);
  const after = end ? rest.slice(end.index) : '';
  const released = `## [Unreleased]\n\n## [${version}] - ${date}\n\n${notes}\n`;
  return `${before}${released}${after ? `\n${after}` : ''}`;
}
