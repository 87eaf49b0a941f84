import { describe, expect, it } from 'vitest';
import { krewManifest, pluginArchiveName, sha256Sums } from './artifacts.js';
import { releaseChangelog, unreleasedNotes } from './changelog.js';
import { setChartVersion } from './chart.js';
import { isReleaseError } from './errors.js';
import { checkNextVersion, versionsFromTags } from './version.js';
import { parse } from 'yaml';

describe('checkNextVersion', () => {
  it('accepts a SemVer version above every released one and returns the last', () => {
    expect(checkNextVersion('0.2.0', ['0.1.0'])).toBe('0.1.0');
    expect(checkNextVersion('0.10.0', ['0.9.0', '0.2.0'])).toBe('0.9.0');
    expect(checkNextVersion('1.0.0', ['1.0.0-rc.1'])).toBe('1.0.0-rc.1');
    expect(checkNextVersion('1.0.0-rc.2', ['1.0.0-rc.1', 'junk'])).toBe('1.0.0-rc.1');
    expect(checkNextVersion('0.1.0', [])).toBeUndefined();
  });

  it.each([
    ['1.2', /not a SemVer version/],
    ['latest', /not a SemVer version/],
    ['v0.2.0', /write it as 0\.2\.0/],
    ['0.2.0+build.5', /build metadata/],
    ['0.1.0', /not above the last release 0\.1\.0/],
    ['0.0.9', /not above the last release 0\.1\.0/],
    ['0.1.0-rc.1', /not above the last release 0\.1\.0/],
  ])('refuses %s', (next, message) => {
    let caught: unknown;
    try {
      checkNextVersion(next, ['0.1.0']);
    } catch (err) {
      caught = err;
    }
    expect(isReleaseError(caught)).toBe(true);
    expect((caught as Error).message).toMatch(message);
  });

  it('reads versions from vX.Y.Z tags only', () => {
    expect(versionsFromTags(['v0.1.0', 'v0.2.0-rc.1', 'release-3', 'v1', '0.5.0'])).toEqual([
      '0.1.0',
      '0.2.0-rc.1',
    ]);
  });
});

const CHANGELOG = `# Changelog

Intro.

## [Unreleased]

### Added

- A thing.

### Upgrading

- Do this.

## [0.1.0] - 2026-11-22

- First.
`;

describe('releaseChangelog', () => {
  it('moves the Unreleased notes under the version and leaves Unreleased empty', () => {
    const out = releaseChangelog(CHANGELOG, '0.2.0', '2026-11-27');
    expect(out).toBe(`# Changelog

Intro.

## [Unreleased]

## [0.2.0] - 2026-11-27

### Added

- A thing.

### Upgrading

- Do this.

## [0.1.0] - 2026-11-22

- First.
`);
    expect(unreleasedNotes(out)).toBe('');
  });

  it('refuses an empty Unreleased section, a missing heading and a version released already', () => {
    const released = releaseChangelog(CHANGELOG, '0.2.0', '2026-11-27');
    expect(() => releaseChangelog(released, '0.3.0', '2026-11-28')).toThrow(
      /nothing under "## \[Unreleased\]"/,
    );
    expect(() => releaseChangelog('# Changelog\n', '0.3.0', '2026-11-28')).toThrow(/no "## \[Unreleased\]"/);
    expect(() => releaseChangelog(CHANGELOG, '0.1.0', '2026-11-28')).toThrow(/already has a section/);
  });
});

describe('setChartVersion', () => {
  it('sets version and appVersion, keeping comments', () => {
    const chart =
      "apiVersion: v2\n# The version.\nversion: 0.1.0\nappVersion: '0.1.0'\nkubeVersion: '>=1.29.0-0'\n";
    expect(setChartVersion(chart, '0.2.0')).toBe(
      "apiVersion: v2\n# The version.\nversion: 0.2.0\nappVersion: '0.2.0'\nkubeVersion: '>=1.29.0-0'\n",
    );
    expect(() => setChartVersion('apiVersion: v2\n', '0.2.0')).toThrow(/one top-level "version:"/);
  });
});

describe('release artifacts', () => {
  it('writes a krew manifest with one platform per archive, its URL and its sum', () => {
    const file = pluginArchiveName('0.2.0', 'amd64');
    expect(file).toBe('kubectl-portico_v0.2.0_linux_amd64.tar.gz');
    const manifest = parse(
      krewManifest('0.2.0', 'https://example.net/v0.2.0', [{ arch: 'amd64', file, sha256: 'ab'.repeat(32) }]),
    ) as { kind: string; metadata: { name: string }; spec: { version: string; platforms: unknown[] } };
    expect(manifest.kind).toBe('Plugin');
    expect(manifest.metadata.name).toBe('portico');
    expect(manifest.spec.version).toBe('v0.2.0');
    expect(manifest.spec.platforms).toEqual([
      {
        selector: { matchLabels: { os: 'linux', arch: 'amd64' } },
        uri: `https://example.net/v0.2.0/${file}`,
        sha256: 'ab'.repeat(32),
        bin: 'kubectl-portico',
      },
    ]);
  });

  it('writes sums in sha256sum form, sorted by name', () => {
    expect(
      sha256Sums(
        new Map([
          ['b.tgz', '22'],
          ['a.tgz', '11'],
        ]),
      ),
    ).toBe('11  a.tgz\n22  b.tgz\n');
  });
});
