/**
 * The image's Debian packages in the release's CycloneDX SBOM (https://cyclonedx.org/docs/1.6/json/),
 * beside the npm packages `cyclonedx-npm` lists. The runtime image keeps no dpkg database (its base
 * holds only the packages' files, scripts/build-image.sh); it carries
 * /var/lib/portico/debian-packages.txt, one `Package<TAB>Version<TAB>Architecture` line per package
 * (`dpkg-query -W` over the dpkg status of the build rootfs that installed the same packages from
 * the same mirror), and /usr/lib/os-release. Each package becomes a component with its package URL
 * (purl type `deb`, https://github.com/package-url/purl-spec). Pure.
 */
import { PackageURL } from 'packageurl-js';
import { ReleaseError } from './errors.js';

export interface DebianPackage {
  name: string;
  version: string;
  architecture: string;
}

/**
 * Parses `dpkg-query -W -f '${Package}\t${Version}\t${Architecture}\n'` output.
 * @throws ReleaseError for a line without three non-empty tab-separated fields, or no line at all.
 */
export function parseDebianPackages(text: string): DebianPackage[] {
  const packages = text
    .split('\n')
    .filter((line) => line.trim() !== '')
    .map((line, i) => {
      const [name = '', version = '', architecture = '', ...rest] = line.split('\t');
      if (name === '' || version === '' || architecture === '' || rest.length > 0) {
        throw new ReleaseError(
          `the image's Debian package list, line ${String(i + 1)}: "${line}" is not "Package\\tVersion\\tArchitecture"`,
        );
      }
      return { name, version, architecture };
    });
  if (packages.length === 0) throw new ReleaseError("the image's Debian package list is empty");
  return packages;
}

/**
 * The purl `distro` qualifier from an os-release file (`ID` and `VERSION_ID`, e.g. `debian-12`).
 * @throws ReleaseError when either is missing.
 */
export function distroFromOsRelease(osRelease: string): string {
  const field = (key: string): string | undefined => {
    const m = new RegExp(`^${key}=(?:"([^"]*)"|(\\S*))$`, 'm').exec(osRelease);
    return m?.[1] ?? m?.[2];
  };
  const id = field('ID');
  const versionId = field('VERSION_ID');
  if (!id || !versionId) throw new ReleaseError("the image's os-release names no ID and VERSION_ID");
  return `${id}-${versionId}`;
}

interface Component {
  type: string;
  name: string;
  version?: string;
  purl?: string;
  'bom-ref'?: string;
  [key: string]: unknown;
}

/** A CycloneDX BOM as `cyclonedx-npm` writes it, loosely typed: only `components` is changed. */
export interface Bom {
  bomFormat: string;
  components?: Component[];
  [key: string]: unknown;
}

/**
 * @returns `bom` with one `library` component per Debian package appended (purl
 *   `pkg:deb/debian/<name>@<version>?arch=<arch>&distro=<distro>`, also its `bom-ref`), the npm
 *   components kept as they are.
 * @throws ReleaseError when `bom` is not CycloneDX.
 */
export function addDebianPackages(bom: Bom, packages: readonly DebianPackage[], distro: string): Bom {
  if (bom.bomFormat !== 'CycloneDX') throw new ReleaseError('the SBOM is not a CycloneDX document');
  const debian = packages.map((p): Component => {
    const purl = new PackageURL('deb', 'debian', p.name, p.version, {
      arch: p.architecture,
      distro,
    }).toString();
    return { type: 'library', name: p.name, version: p.version, purl, 'bom-ref': purl };
  });
  return { ...bom, components: [...(bom.components ?? []), ...debian] };
}
