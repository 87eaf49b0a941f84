import { describe, expect, it } from 'vitest';
import { DARWIN_CAVEAT, PLUGIN_PLATFORMS, krewManifest, pluginArchiveName, sha256Sums } from './artifacts.js';
import { releaseChangelog, unreleasedNotes } from './changelog.js';
import { setChartImage, setChartVersion } from './chart.js';
import { isReleaseError } from './errors.js';
import { addDebianPackages, distroFromOsRelease, parseDebianPackages } from './sbom.js';
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

describe('setChartImage', () => {
  const values = [
    '# top',
    'image:',
    '  # -- The image.',
    '  repository: ghcr.io/portico-dev/portico',
    "  tag: ''",
    "  digest: ''",
    '  pullPolicy: IfNotPresent',
    'other: 1',
    '',
  ].join('\n');
  const digest = `sha256:${'ab'.repeat(32)}`;

  it('sets repository, tag and digest, keeping comments and the other keys', () => {
    const out = setChartImage(values, { repository: '127.0.0.1:5000/portico', tag: '0.2.0', digest });
    expect(parse(out)).toEqual({
      image: { repository: '127.0.0.1:5000/portico', tag: '0.2.0', digest, pullPolicy: 'IfNotPresent' },
      other: 1,
    });
    expect(out).toContain('# -- The image.');
    expect(out).toContain('# top');
  });

  it('leaves the digest as it is when none is given (the release commit)', () => {
    const out = parse(setChartImage(values, { repository: 'r/portico', tag: '0.2.0' })) as {
      image: { digest: string };
    };
    expect(out.image.digest).toBe('');
  });

  it('refuses values without an image map and a digest that is not sha256', () => {
    expect(() => setChartImage('other: 1\n', { repository: 'r', tag: '1' })).toThrow(/no top-level "image:"/);
    expect(() => setChartImage(values, { repository: 'r', tag: '1', digest: 'sha256:abc' })).toThrow(
      /not sha256:<64 lowercase hex>/,
    );
  });
});

describe('the SBOM with the image Debian packages', () => {
  it('parses dpkg-query lines and refuses a malformed or empty list', () => {
    expect(parseDebianPackages('libc6\t2.36-9+deb12u13\tamd64\ntzdata\t2025b-0+deb12u2\tall\n')).toEqual([
      { name: 'libc6', version: '2.36-9+deb12u13', architecture: 'amd64' },
      { name: 'tzdata', version: '2025b-0+deb12u2', architecture: 'all' },
    ]);
    expect(() => parseDebianPackages('libc6 2.36 amd64\n')).toThrow(/line 1/);
    expect(() => parseDebianPackages('\n')).toThrow(/empty/);
  });

  it('reads the distro from os-release, quoted or not', () => {
    expect(
      distroFromOsRelease('PRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\nVERSION_ID="12"\nID=debian\n'),
    ).toBe('debian-12');
    expect(() => distroFromOsRelease('NAME=x\n')).toThrow(/no ID and VERSION_ID/);
  });

  it('appends one component per package with its deb purl, keeping the npm components', () => {
    const bom = {
      bomFormat: 'CycloneDX',
      specVersion: '1.6',
      components: [{ type: 'library', name: 'ioredis', version: '6.0.0', purl: 'pkg:npm/ioredis@6.0.0' }],
    };
    const out = addDebianPackages(
      bom,
      [{ name: 'libc6', version: '1:2.36-9+deb12u13', architecture: 'amd64' }],
      'debian-12',
    );
    expect(out.components).toEqual([
      bom.components[0],
      {
        type: 'library',
        name: 'libc6',
        version: '1:2.36-9+deb12u13',
        purl: 'pkg:deb/debian/libc6@1:2.36-9+deb12u13?arch=amd64&distro=debian-12',
        'bom-ref': 'pkg:deb/debian/libc6@1:2.36-9+deb12u13?arch=amd64&distro=debian-12',
      },
    ]);
    expect(() => addDebianPackages({ bomFormat: 'SPDX' }, [], 'debian-12')).toThrow(/not a CycloneDX/);
  });
});
