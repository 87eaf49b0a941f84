/**
 * A release as a platform team meets it (docs/install.md, "Releasing Portico"): CNCF Distribution's
 * registry on loopback and `npm run release` in a copy of this work tree (support/release.ts)
 * refusing bad input with nothing changed, failing with nothing pushed when its image build fails,
 * then releasing a version into the registry: the image (scripts/build-image.sh on the release
 * commit, pushed with podman), the chart naming that image by the digest the registry answered, the
 * linux-amd64 plugin and an SBOM of the npm and Debian packages; the image pulled back by digest
 * into an empty podman storage is the one built; `helm install` of that version from
 * `oci://127.0.0.1:<port>/charts/portico` into the stack's API server; a second release and `helm
 * upgrade --reset-then-reuse-values` to it; the released linux-amd64 `kubectl-portico` single
 * executable, its archive and header checks (src/release/executable.ts), found by the real kubectl on
 * a PATH with no Node.js on it, explaining a domain the stack's operator reconciled.
 *
 * The other five platforms' executables (darwin and windows, arm64 under qemu-user), the krew
 * manifest of all six and a second build of the released image from its tag are
 * test/release/release-platforms.test.ts's, in `npm run release:check` (docs/testing.md, "The
 * release's other platforms"): building them takes about 10 minutes on 2 shared cores.
 *
 * The images: each release builds its own (its version and commit are in the image), with
 * `--cached-bases --layer-cache`: on the Debian bases and with the layers of the image scripts/test.sh
 * builds beside the tests (the file waits for that build first, support/image-build.ts), whose `npm
 * ci` and tsc steps the Dockerfile keys by the dependencies and sources alone, not the version. So a
 * release here runs the bundle step and the runtime stage, and the build that fails, tsc.
 */
import { mkdir, readFile, readdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { PackageURL } from 'packageurl-js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { createCustomDomain, createProject, sandbox, unique, waitForCondition } from './support/cluster.js';
import { PLUGIN_NODE } from '../../scripts/build-plugin-sea.js';
import { pluginArchiveName, type PluginPlatform } from '../../src/release/artifacts.js';
import { REPO, helm, kubectl, run, runOk } from './support/helm.js';
import {
  CRD_PLURALS,
  ReleaseWorkspace,
  builtImageId,
  checkPluginArchive,
  readSums,
  releasedImage,
  sha256,
} from './support/release.js';

const id = unique('rel');
const CRD_GROUP = `${id}.portico.dev`;
const RELEASE = unique('portico-rel');
const SETS = [
  'platform.cnameTarget=sites.example.net',
  'admissionPolicy.hostnameClaims.enabled=false',
  'admissionPolicy.rateLimitDescriptors.enabled=false',
  'admissionPolicy.externalNameServices.enabled=false',
];
/** The plugin's one platform here (the others: `npm run release:check`). */
const LINUX_AMD64: PluginPlatform = { os: 'linux', arch: 'amd64' };
/** What every release here passes: the cached bases and layers (see the header), linux-amd64 alone. */
const QUICK = ['--plain-http', '--cached-bases', '--layer-cache', '--plugin-platforms', 'linux-amd64'];

const ws = new ReleaseWorkspace(CRD_GROUP);
const git = ws.git.bind(ws);
const release = ws.release.bind(ws);
const repoState = ws.repoState.bind(ws);
const catalog = ws.catalog.bind(ws);
const manifestDigest = ws.manifestDigest.bind(ws);
const podmanIn = ws.podmanIn.bind(ws);
let work = '';
let copy = '';
let bin = '';
let registryUrl = '';
let v1 = '';
let v2 = '';

let released1 = { stdout: '', stderr: '' };

beforeAll(async () => {
  await ws.setUp();
  ({ work, copy, bin, registryUrl, v1, v2 } = ws);
}, 1_200_000);

afterAll(async () => {
  await ws.tearDown(RELEASE, 'release.test.ts');
}, 120_000);

describe('what runs says its version', () => {
  it('the operator and the rate-limit service export portico_build_info with the version and commit of the build', async () => {
    const built = JSON.parse(await readFile(path.join(REPO, 'dist/build-info.json'), 'utf8')) as {
      version: string;
      commit: string;
    };
    const { version } = JSON.parse(await readFile(path.join(REPO, 'package.json'), 'utf8')) as {
      version: string;
    };
    expect(built.version).toBe(version);
    expect(built.commit).toMatch(/^([0-9a-f]{40}(-dirty)?|unknown)$/);
    const series = `portico_build_info{version="${version}",commit="${built.commit}",node_version="${process.version}"} 1`;
    for (const url of [sandbox.controllerMetricsUrl, sandbox.ratelimitMetricsUrl]) {
      const text = await (await fetch(`${url}?name[]=portico_build_info`)).text();
      expect(text, url).toContain(series);
    }
    const cli = await run(process.execPath, [path.join(REPO, 'dist/cli.js'), '--version']);
    expect(cli.stdout).toBe(`portico ${version} (commit ${built.commit}, Node.js ${process.version})\n`);
  });
});

describe('npm run release', () => {
  it('refuses a dirty tree, a version that is not SemVer and one not above the last, and bad flags, and changes nothing', async () => {
    const clean = await repoState();
    const cases = [
      ['1.2', /not a SemVer version/],
      ['v9.0.0', /write it as 9\.0\.0/],
      ['0.0.1', /not above the last release/],
    ] as const;
    // At once: each refuses before it writes anything.
    const refusals = await Promise.all(
      cases.map(([version]) => release(['--version', version, '--registry', registryUrl, '--plain-http'])),
    );
    for (const [i, refused] of refusals.entries()) {
      expect(refused.code, refused.stdout).toBe(1);
      expect(refused.stderr).toMatch(cases[i]?.[1] ?? /never/);
    }
    expect(await repoState()).toBe(clean);
    const insecure = await release([
      '--version',
      v1,
      '--registry',
      'oci://registry.example.net/charts',
      '--plain-http',
    ]);
    expect(insecure.code).toBe(2);
    expect(insecure.stderr).toContain('--plain-http: registry.example.net is not on loopback');
    expect(await repoState()).toBe(clean);
    const platform = await release([
      '--version',
      v1,
      '--registry',
      registryUrl,
      '--plugin-platforms',
      'linux-amd64,plan9-amd64',
    ]);
    expect(platform.code).toBe(2);
    expect(platform.stderr).toContain('--plugin-platforms: unknown "plan9-amd64" (known: linux-amd64,');
    expect(await repoState()).toBe(clean);
    await writeFile(path.join(copy, 'README.md'), 'changed\n', { flag: 'a' });
    const dirtyState = await repoState();
    const dirty = await release(['--version', v1, '--registry', registryUrl, '--plain-http']);
    expect(dirty.code).toBe(1);
    expect(dirty.stderr).toContain('the work tree has uncommitted changes');
    expect(dirty.stderr).toContain('M README.md');
    expect(await repoState()).toBe(dirtyState);
    await git(['checkout', 'README.md']);
  });

  it('a release whose image build fails (a type error in src/) pushes nothing, neither image nor chart, and changes nothing', async () => {
    await writeFile(
      path.join(copy, 'src/release-test-broken.ts'),
      "export const broken: number = 'not a number';\n",
    );
    await git(['add', 'src/release-test-broken.ts']);
    await git(['commit', '--quiet', '-m', 'a commit whose image does not build']);
    try {
      const before = await repoState();
      const failed = await release(['--version', v1, '--registry', registryUrl, ...QUICK, '--artifacts', '']);
      expect(failed.code, failed.stdout).toBe(1);
      expect(failed.stderr).toMatch(
        /the image build failed \(scripts\/build-image\.sh exited \d+\); nothing was pushed/,
      );
      expect(failed.stderr).toContain("Type 'string' is not assignable to type 'number'");
      expect(await catalog()).toEqual([]);
      expect(await repoState()).toBe(before);
    } finally {
      // Off the broken commit whatever happened, so the releases after this one build.
      await git(['reset', '--quiet', '--hard', 'HEAD~1']);
    }
  }, 900_000);

  it('sets the version, commits and tags it, pushes the image and the chart naming it by digest, writes the files and their sums', async () => {
    const released = await release(['--version', v1, '--registry', registryUrl, ...QUICK]);
    released1 = released;
    expect(released.code, released.stderr).toBe(0);
    expect(released.stdout).toContain(`released Portico ${v1}`);
    const commit = (await git(['rev-parse', 'HEAD'])).trim();
    expect((await git(['rev-parse', `v${v1}^{commit}`])).trim()).toBe(commit);
    expect(await git(['log', '-1', '--format=%s'])).toBe(`Release ${v1}\n`);
    expect(await git(['status', '--porcelain'])).toBe('');
    const chartYaml = parse(await readFile(path.join(copy, 'charts/portico/Chart.yaml'), 'utf8')) as Record<
      string,
      string
    >;
    expect([chartYaml['version'], chartYaml['appVersion']]).toEqual([v1, v1]);
    const changelog = await readFile(path.join(copy, 'CHANGELOG.md'), 'utf8');
    expect(changelog).toMatch(
      new RegExp(`## \\[Unreleased\\]\\n\\n## \\[${v1}\\] - \\d{4}-\\d{2}-\\d{2}\\n`),
    );
    // The image: pushed to <registry host>/portico (the registry's path less its last /charts),
    // tagged with the version, and the digest printed is the one the registry answers for the tag.
    const image = releasedImage(released.stdout);
    expect(image.repository).toBe(`${ws.registry?.host ?? ''}/portico`);
    expect(image.tag).toBe(v1);
    expect(await manifestDigest('portico', v1)).toBe(image.digest);
    expect((await catalog()).sort()).toEqual(['charts/portico', 'portico']);
    // The release commit names the image by repository and tag (the digest comes after it, in the
    // packaged chart), and deploy/ is rendered with it.
    const committed = parse(await readFile(path.join(copy, 'charts/portico/values.yaml'), 'utf8')) as {
      image: Record<string, string>;
    };
    expect(committed.image).toMatchObject({ repository: image.repository, tag: v1, digest: '' });
    expect(await readFile(path.join(copy, 'deploy/portico.yaml'), 'utf8')).toContain(
      `image: ${image.repository}:${v1}\n`,
    );

    const out = ws.out(v1);
    const files = (await readdir(out)).sort();
    expect(files).toEqual(
      [
        'SHA256SUMS',
        'kubectl-portico.krew.yaml',
        pluginArchiveName(v1, LINUX_AMD64),
        `portico-${v1}.cdx.json`,
        `portico-${v1}.tgz`,
      ].sort(),
    );
    const sums = await readSums(out);
    expect([...sums.keys()].sort()).toEqual(files.filter((f) => f !== 'SHA256SUMS'));
    for (const [name, hex] of sums) expect(sha256(await readFile(path.join(out, name))), name).toBe(hex);

    const krew = parse(await readFile(path.join(out, 'kubectl-portico.krew.yaml'), 'utf8')) as {
      spec: {
        version: string;
        platforms: { selector: { matchLabels: { arch: string } }; uri: string; sha256: string }[];
      };
    };
    expect(krew.spec.version).toBe(`v${v1}`);
    expect(krew.spec.platforms.map((p) => p.selector.matchLabels)).toEqual([LINUX_AMD64]);
    for (const p of krew.spec.platforms) {
      const file = p.uri.split('/').at(-1) ?? '';
      expect(p.sha256, file).toBe(sums.get(file));
    }
    // The archive: its executable, LICENSE and NODE-LICENSE; the executable of its platform, with
    // the blob in it.
    await checkPluginArchive(out, v1, LINUX_AMD64, work);

    const sbom = JSON.parse(await readFile(path.join(out, `portico-${v1}.cdx.json`), 'utf8')) as {
      bomFormat: string;
      metadata: { component: { name: string; version: string } };
      components: { group?: string; name: string; version?: string; purl?: string }[];
    };
    expect(sbom.bomFormat).toBe('CycloneDX');
    expect(sbom.metadata.component).toMatchObject({ name: 'portico', version: v1 });
    const names = sbom.components.map((c) => (c.group ? `${c.group}/${c.name}` : c.name));
    expect(names).toEqual(
      expect.arrayContaining(['@kubernetes/client-node', 'ioredis', 'acme-client', 'axios']),
    );
    expect(names).not.toContain('vitest'); // production packages only
    // ... and the image's Debian packages (the next test compares them with the pulled image's).
    const debian = sbom.components.filter((c) => c.purl?.startsWith('pkg:deb/debian/'));
    expect(debian.map((c) => c.name).sort()).toEqual(
      ['base-files', 'ca-certificates', 'libc6', 'libgcc-s1', 'libstdc++6', 'netbase', 'tzdata'].sort(),
    );
    for (const c of debian) {
      // Read back with the purl library: the name and version of the component, distro Debian 12.
      const purl = PackageURL.fromString(c.purl ?? '');
      expect([purl.type, purl.namespace, purl.name, purl.version], c.purl).toEqual([
        'deb',
        'debian',
        c.name,
        c.version,
      ]);
      expect(purl.qualifiers?.['distro'], c.purl).toBe('debian-12');
    }

    const chartRef = registryUrl.replace(/\/charts$/, '/charts/portico');
    const shown = await helm(['show', 'chart', chartRef, '--version', v1, '--plain-http']);
    expect(shown.code, shown.stderr).toBe(0);
    expect(parse(shown.stdout)).toMatchObject({ name: 'portico', version: v1, appVersion: v1 });
    // The pushed chart's default image: the pushed image, by the digest the registry answered.
    const values = await helm(['show', 'values', chartRef, '--version', v1, '--plain-http']);
    expect(values.code, values.stderr).toBe(0);
    expect((parse(values.stdout) as { image: unknown }).image).toMatchObject({
      repository: image.repository,
      tag: v1,
      digest: image.digest,
    });
  }, 1_800_000);

  it('the pushed image, pulled back by digest into an empty podman storage, is the one the release built', async () => {
    const image = releasedImage(released1.stdout);
    const dir = path.join(work, 'podman-pull');
    await mkdir(dir, { recursive: true });
    await writeFile(
      path.join(dir, 'storage.conf'),
      `[storage]\ndriver = "overlay"\ngraphroot = "${dir}/storage"\nrunroot = "${dir}/run"\n`,
    );
    const ref = `${image.repository}@${image.digest}`;
    try {
      await podmanIn(dir, ['pull', '--tls-verify=false', '--quiet', ref]);
      const [inspected] = JSON.parse(await podmanIn(dir, ['image', 'inspect', ref])) as {
        Id: string;
        Digest: string;
        Config: { User: string };
      }[];
      expect(`sha256:${inspected?.Id ?? ''}`).toBe(builtImageId(released1.stderr));
      expect(inspected?.Digest).toBe(image.digest);
      expect(inspected?.Config.User).toBe('65532:65532');
      const commit = (await git(['rev-parse', `v${v1}^{commit}`])).trim();
      const version = await podmanIn(dir, [
        'run',
        '--rm',
        '--network',
        'host',
        '--pull=never',
        ref,
        '--version',
      ]);
      expect(version).toMatch(
        new RegExp(`^portico ${v1.replaceAll('.', '\\.')} \\(commit ${commit}, Node\\.js v24\\.`),
      );
      // The Debian packages the SBOM lists are the ones the pulled image names.
      const container = (await podmanIn(dir, ['create', '--pull=never', ref])).trim();
      await podmanIn(dir, [
        'cp',
        `${container}:/var/lib/portico/debian-packages.txt`,
        path.join(dir, 'packages.txt'),
      ]);
      await podmanIn(dir, ['rm', container]);
      const inImage = (await readFile(path.join(dir, 'packages.txt'), 'utf8'))
        .trim()
        .split('\n')
        .map((line) => line.split('\t').slice(0, 2).join('@'))
        .sort();
      const sbom = JSON.parse(
        await readFile(path.join(copy, `dist/release/v${v1}/portico-${v1}.cdx.json`), 'utf8'),
      ) as { components: { name: string; version: string; purl?: string }[] };
      expect(
        sbom.components
          .filter((c) => c.purl?.startsWith('pkg:deb/'))
          .map((c) => `${c.name}@${c.version}`)
          .sort(),
      ).toEqual(inImage);
    } finally {
      await podmanIn(dir, ['rmi', '--all', '--force']).catch(() => '');
    }
  }, 600_000);
});

describe('installing the released chart from the OCI registry', () => {
  const chartRef = (): string => `${registryUrl}/portico`;

  it('helm install creates the controller Deployment, the CRDs and the RBAC', async () => {
    const sets = SETS.flatMap((s) => ['--set', s]);
    const install = await helm([
      'install',
      RELEASE,
      chartRef(),
      '--version',
      v1,
      '--plain-http',
      '-n',
      RELEASE,
      '--create-namespace',
      ...sets,
    ]);
    expect(install.code, install.stderr).toBe(0);
    const deployment = JSON.parse(
      (await kubectl(['get', 'deployment', `${RELEASE}-controller`, '-n', RELEASE, '-o', 'json'])).stdout,
    ) as { spec: { template: { spec: { containers: { image: string }[] } } } };
    const image = releasedImage(released1.stdout);
    expect(deployment.spec.template.spec.containers[0]?.image).toBe(
      `${image.repository}:${v1}@${image.digest}`,
    );
    for (const plural of CRD_PLURALS) {
      const crd = await kubectl(['get', 'crd', `copy${plural}.${CRD_GROUP}`]);
      expect(crd.code, crd.stderr).toBe(0);
    }
    for (const [kind, ns] of [
      ['clusterrole', undefined],
      ['clusterrolebinding', undefined],
      ['role', RELEASE],
      ['rolebinding', RELEASE],
      ['serviceaccount', RELEASE],
    ] as const) {
      const got = await kubectl(['get', kind, `${RELEASE}-controller`, ...(ns ? ['-n', ns] : [])]);
      expect(got.code, `${kind}: ${got.stderr}`).toBe(0);
    }
  });

  it('helm upgrade --reset-then-reuse-values moves the release to a second released version and its image', async () => {
    const changelog = path.join(copy, 'CHANGELOG.md');
    const text = await readFile(changelog, 'utf8');
    await writeFile(
      changelog,
      text.replace('## [Unreleased]\n', '## [Unreleased]\n\n### Fixed\n\n- A fix.\n'),
    );
    await git(['commit', '--quiet', '-am', 'a fix']);
    const second = await release(['--version', v2, '--registry', registryUrl, ...QUICK, '--artifacts', '']);
    expect(second.code, second.stderr).toBe(0);
    const secondImage = releasedImage(second.stdout);
    expect(await manifestDigest('portico', v2)).toBe(secondImage.digest);

    const upgrade = await helm([
      'upgrade',
      RELEASE,
      chartRef(),
      '--version',
      v2,
      '--plain-http',
      '-n',
      RELEASE,
      '--reset-then-reuse-values',
    ]);
    expect(upgrade.code, upgrade.stderr).toBe(0);
    const history = JSON.parse((await helm(['history', RELEASE, '-n', RELEASE, '-o', 'json'])).stdout) as {
      revision: number;
      chart: string;
      app_version: string;
    }[];
    expect(history.map((h) => [h.revision, h.chart, h.app_version])).toEqual([
      [1, `portico-${v1}`, v1],
      [2, `portico-${v2}`, v2],
    ]);
    const values = parse((await helm(['get', 'values', RELEASE, '-n', RELEASE])).stdout) as {
      platform: { cnameTarget: string };
    };
    expect(values.platform.cnameTarget).toBe('sites.example.net');
    const image = await kubectl([
      'get',
      'deployment',
      `${RELEASE}-controller`,
      '-n',
      RELEASE,
      '-o',
      'jsonpath={.spec.template.spec.containers[0].image}',
    ]);
    expect(image.stdout).toBe(`${secondImage.repository}:${v2}@${secondImage.digest}`);
  }, 900_000);
});

describe('the released kubectl-portico executable', () => {
  const ns = unique('rel-plugin');
  const pathDir = (): string => path.join(work, 'path');

  beforeAll(async () => {
    await mkdir(pathDir(), { recursive: true });
    const dir = path.join(work, 'plugin-amd64');
    await mkdir(dir, { recursive: true });
    await runOk('tar', ['-xzf', path.join(ws.out(v1), pluginArchiveName(v1, LINUX_AMD64)), '-C', dir]);
    await runOk('cp', [path.join(dir, 'kubectl-portico'), pathDir()]);
    await createProject(ns, { plan: 'free' });
    await createCustomDomain(ns, 'www', { hostname: `www.${ns}.example`, service: { name: 'web' } });
    await waitForCondition(ns, 'www', 'Accepted', 'False', 'PlanNotEligible');
  }, 120_000);

  it('is found by kubectl on a PATH with no Node.js and explains a domain', async () => {
    // Nothing on PATH but the plugin: no node, no npm, no shell.
    expect(await readdir(pathDir())).toEqual(['kubectl-portico']);
    const env = { PATH: pathDir(), HOME: work, KUBECONFIG: sandbox.kubeconfig };
    const kubectlBin = `${bin}/kubectl`;
    const version = await run(kubectlBin, ['portico', '--version'], { env });
    expect(version.code, version.stderr).toBe(0);
    const commit = (await git(['rev-parse', `v${v1}^{commit}`])).trim();
    expect(version.stdout).toBe(
      `kubectl-portico ${v1} (commit ${commit}, Node.js v${PLUGIN_NODE['linux-amd64'].version})\n`,
    );
    const plugins = await run(kubectlBin, ['plugin', 'list'], { env });
    expect(plugins.stdout).toContain(path.join(pathDir(), 'kubectl-portico'));
    const explained = await run(kubectlBin, ['portico', 'explain', 'www', '-n', ns], { env });
    expect(explained.code, explained.stderr).toBe(0);
    expect(explained.stdout).toContain('PlanNotEligible');
  });
});
