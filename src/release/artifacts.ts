/**
 * What a release publishes besides the chart: the kubectl plugin's archives and their krew manifest
 * (https://krew.sigs.k8s.io/docs/developer-guide/plugin-manifest/), and the SHA-256 sums of every
 * artifact in `sha256sum` form. Pure.
 */
import { stringify } from 'yaml';

/** Platforms the plugin is built for: Node's `process.arch` name and the Go/krew name. */
export const PLUGIN_PLATFORMS = [
  { nodeArch: 'x64', arch: 'amd64' },
  { nodeArch: 'arm64', arch: 'arm64' },
] as const;

export type PluginArch = (typeof PLUGIN_PLATFORMS)[number]['arch'];

/** The archive of one platform's `kubectl-portico`, e.g. `kubectl-portico_v0.2.0_linux_amd64.tar.gz`. */
export function pluginArchiveName(version: string, arch: PluginArch): string {
  return `kubectl-portico_v${version}_linux_${arch}.tar.gz`;
}

export interface PluginArchive {
  arch: PluginArch;
  /** The archive's file name (pluginArchiveName). */
  file: string;
  /** Lowercase hex SHA-256 of the archive. */
  sha256: string;
}

/**
 * The krew manifest of the plugin `portico` (`kubectl krew install --manifest=portico.yaml
 * --archive=<archive>` installs it from a local file; an index serves it by URL).
 * @param downloadUrl where the archives will be, without a trailing slash: each platform's `uri` is
 *   `<downloadUrl>/<archive file>`.
 */
export function krewManifest(
  version: string,
  downloadUrl: string,
  archives: readonly PluginArchive[],
): string {
  const manifest = {
    apiVersion: 'krew.googlecontainertools.github.com/v1alpha2',
    kind: 'Plugin',
    metadata: { name: 'portico' },
    spec: {
      version: `v${version}`,
      homepage: 'https://github.com/portico-dev/portico',
      shortDescription: "Explain and re-verify Portico's CustomDomains",
      description:
        'Tells the story of a Portico CustomDomain (conditions, DNS found vs wanted, certificate,\n' +
        'next check, Events), explains what holds it back with the fix, and asks for a DNS check\n' +
        'now. A single executable: no Node.js needed.\n',
      platforms: archives.map((a) => ({
        selector: { matchLabels: { os: 'linux', arch: a.arch } },
        uri: `${downloadUrl}/${a.file}`,
        sha256: a.sha256,
        bin: 'kubectl-portico',
      })),
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
