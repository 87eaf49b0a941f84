/**
 * What a release publishes besides the chart: the kubectl plugin's archives and their krew manifest
 * (https://krew.sigs.k8s.io/docs/developer-guide/plugin-manifest/), and the SHA-256 sums of every
 * artifact in `sha256sum` form. Pure.
 */
import { stringify } from 'yaml';

/** Operating systems the plugin is built for, by their Go/krew names (krew's `os` label). */
export const PLUGIN_OSES = ['linux', 'darwin', 'windows'] as const;
export type PluginOs = (typeof PLUGIN_OSES)[number];

/** CPU architectures the plugin is built for, by their Go/krew names (krew's `arch` label). */
export const PLUGIN_ARCHES = ['amd64', 'arm64'] as const;
export type PluginArch = (typeof PLUGIN_ARCHES)[number];

export interface PluginPlatform {
  os: PluginOs;
  arch: PluginArch;
}

/** Every platform a release builds the plugin for: each OS on each architecture, linux first. */
export const PLUGIN_PLATFORMS: readonly PluginPlatform[] = PLUGIN_OSES.flatMap((os) =>
  PLUGIN_ARCHES.map((arch) => ({ os, arch })),
);

/** `linux-amd64`, the key of a platform in tables. Pure. */
export function platformKey(p: PluginPlatform): `${PluginOs}-${PluginArch}` {
  return `${p.os}-${p.arch}`;
}

/** The executable's file name: `kubectl-portico.exe` on Windows, `kubectl-portico` elsewhere. Pure. */
export function pluginExecutableName(os: PluginOs): string {
  return os === 'windows' ? 'kubectl-portico.exe' : 'kubectl-portico';
}

/**
 * The archive of one platform's `kubectl-portico`: a zip on Windows, a tar.gz elsewhere, e.g.
 * `kubectl-portico_v0.2.0_linux_amd64.tar.gz`, `kubectl-portico_v0.2.0_windows_arm64.zip`. Pure.
 */
export function pluginArchiveName(version: string, p: PluginPlatform): string {
  return `kubectl-portico_v${version}_${p.os}_${p.arch}.${p.os === 'windows' ? 'zip' : 'tar.gz'}`;
}

/**
 * The files of a platform's archive: the executable, Portico's LICENSE (Apache-2.0) and
 * NODE-LICENSE, the license of the Node.js inside the executable (with its bundled parts'). Pure.
 */
export function pluginArchiveFiles(os: PluginOs): string[] {
  return [pluginExecutableName(os), 'LICENSE', 'NODE-LICENSE'];
}

export interface PluginArchive extends PluginPlatform {
  /** The archive's file name (pluginArchiveName). */
  file: string;
  /** Lowercase hex SHA-256 of the archive. */
  sha256: string;
}

/**
 * What `kubectl krew install` prints after installing on macOS: the executable carries an ad-hoc
 * signature (scripts/build-plugin-sea.ts), not a Developer ID one, and is not notarized.
 */
export const DARWIN_CAVEAT =
  'On macOS, kubectl-portico carries an ad-hoc code signature and is not notarized. krew\n' +
  'installs it without the quarantine attribute, so it runs; one downloaded with a browser is\n' +
  'refused by Gatekeeper until you run: xattr -d com.apple.quarantine <path to kubectl-portico>.\n' +
  'If macOS kills it at start, re-sign it: codesign --force --sign - <path to kubectl-portico>.\n';

/**
 * The krew manifest of the plugin `portico` (`kubectl krew install --manifest=portico.yaml
 * --archive=<archive>` installs it from a local file; an index serves it by URL): one platform per
 * archive, selected by krew's `os` and `arch` labels, each extracting the archive's files.
 * @param downloadUrl where the archives will be, without a trailing slash: each platform's `uri` is
 *   `<downloadUrl>/<archive file>`.
 */
export function krewManifest(
  version: string,
  downloadUrl: string,
  archives: readonly PluginArchive[],
): string {
  const darwin = archives.some((a) => a.os === 'darwin');
  const manifest = {
    apiVersion: 'krew.googlecontainertools.github.com/v1alpha2',
    kind: 'Plugin',
    metadata: { name: 'portico' },
    spec: {
      version: `v${version}`,
      homepage: 'https://github.com/portico-dev/portico',
      shortDescription: "Explain Portico's CustomDomains, Projects and rate-limit policies",
      description:
        'Tells the story of a Portico CustomDomain (conditions, DNS found vs wanted, certificate,\n' +
        'next check, Events), explains what holds it back with the fix, and asks for a DNS check\n' +
        "now; shows a Project's hostnames and a RateLimitPolicy's state. A single executable: no\n" +
        'Node.js needed.\n',
      ...(darwin ? { caveats: DARWIN_CAVEAT } : {}),
      platforms: archives.map((a) => {
        const bin = pluginExecutableName(a.os);
        return {
          selector: { matchLabels: { os: a.os, arch: a.arch } },
          uri: `${downloadUrl}/${a.file}`,
          sha256: a.sha256,
          files: pluginArchiveFiles(a.os).map((from) => ({ from, to: '.' })),
          bin,
        };
      }),
    },
  };
  return stringify(manifest, { lineWidth: 0 });
}

/** `sha256sum`'s output for the files (`<hex>  <name>` a line), sorted by name; `sha256sum -c` checks it. */
export function sha256Sums(files: ReadonlyMap<string, string>): string {
  return [...files]
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0))
    .map(([name, hex]) => `${hex}  ${name}\n`)
    .join('');
}
