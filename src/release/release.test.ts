import { describe, expect, it } from 'vitest';
import { DARWIN_CAVEAT, PLUGIN_PLATFORMS, krewManifest, pluginArchiveName, sha256Sums } from './artifacts.js';
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
  it('names each platform archive: tar.gz for linux and darwin, zip for windows', () => {
    expect(PLUGIN_PLATFORMS.map((p) => pluginArchiveName('0.2.0', p))).toEqual([
      'kubectl-portico_v0.2.0_linux_amd64.tar.gz',
      'kubectl-portico_v0.2.0_linux_arm64.tar.gz',
      'kubectl-portico_v0.2.0_darwin_amd64.tar.gz',
      'kubectl-portico_v0.2.0_darwin_arm64.tar.gz',
      'kubectl-portico_v0.2.0_windows_amd64.zip',
      'kubectl-portico_v0.2.0_windows_arm64.zip',
    ]);
  });

  it('writes a krew manifest with one platform per archive: its os and arch, URL, sum, files and bin', () => {
    const archives = PLUGIN_PLATFORMS.map((p, i) => ({
      ...p,
      file: pluginArchiveName('0.2.0', p),
      sha256: String(i).repeat(64),
    }));
    const manifest = parse(krewManifest('0.2.0', 'https://example.net/v0.2.0', archives)) as {
      kind: string;
      metadata: { name: string };
      spec: { version: string; caveats?: string; platforms: Record<string, unknown>[] };
    };
    expect(manifest.kind).toBe('Plugin');
    expect(manifest.metadata.name).toBe('portico');
    expect(manifest.spec.version).toBe('v0.2.0');
    expect(manifest.spec.platforms).toHaveLength(6);
    expect(manifest.spec.platforms[0]).toEqual({
      selector: { matchLabels: { os: 'linux', arch: 'amd64' } },
      uri: 'https://example.net/v0.2.0/kubectl-portico_v0.2.0_linux_amd64.tar.gz',
      sha256: '0'.repeat(64),
      files: [
        { from: 'kubectl-portico', to: '.' },
        { from: 'LICENSE', to: '.' },
        { from: 'NODE-LICENSE', to: '.' },
      ],
      bin: 'kubectl-portico',
    });
    expect(manifest.spec.platforms[5]).toEqual({
      selector: { matchLabels: { os: 'windows', arch: 'arm64' } },
      uri: 'https://example.net/v0.2.0/kubectl-portico_v0.2.0_windows_arm64.zip',
      sha256: '5'.repeat(64),
      files: [
        { from: 'kubectl-portico.exe', to: '.' },
        { from: 'LICENSE', to: '.' },
        { from: 'NODE-LICENSE', to: '.' },
      ],
      bin: 'kubectl-portico.exe',
    });
    // What a macOS user must know about the ad-hoc signature, shown by krew after install.
    expect(manifest.spec.caveats).toBe(DARWIN_CAVEAT);
    expect(DARWIN_CAVEAT).toContain('codesign --force --sign -');
    const linuxOnly = parse(krewManifest('0.2.0', 'https://example.net', archives.slice(0, 2))) as {
      spec: { caveats?: string };
    };
    expect(linuxOnly.spec.caveats).toBeUndefined();
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
