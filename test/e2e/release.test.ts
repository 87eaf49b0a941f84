/**
 * A release as a platform team meets it (docs/install.md, "Releasing Portico"): CNCF Distribution's
 * registry on loopback (built by scripts/install-tools.sh --test; support/registry.ts); `npm run
 * release` in a copy of this work tree (a git repository of its own, so the release's commit and tag
 * stay there) refusing bad input with nothing changed, failing with nothing pushed when its image
 * build fails, then releasing a version into the registry: the image (scripts/build-image.sh on the
 * release commit, pushed with podman), the chart naming that image by the digest the registry
 * answered, the plugin and an SBOM of the npm and Debian packages; the image pulled back by digest
 * into an empty podman storage is the one built; `helm install` of that version from
 * `oci://127.0.0.1:<port>/charts/portico` into the stack's API server; a second release and `helm
 * upgrade --reset-then-reuse-values` to it; the released `kubectl-portico` single executables: each platform's archive and its header
 * checks (src/release/executable.ts), the linux-amd64 one found by the real kubectl on a PATH with no
 * Node.js on it, explaining a domain the stack's operator reconciled, and the linux-arm64 one under
 * qemu-user. Building the image and the six platforms' executables takes minutes on 2 shared cores,
 * hence the 30-minute bounds.
 *
 * The images: each release builds its own (its version is in package.json, which the image holds,
 * so the archive scripts/test.sh builds beside the tests is not one of them). The file waits for
 * that build first (support/image-build.ts) and dates the copy's first commit at the work tree's
 * last change of scripts/build-image.sh, which the Debian base images are made at, so the releases
 * find those bases in podman's cache instead of making them again.
 *
 * The copy's CRDs are renamed into a group of their own (copy<plural>.<id>.portico.dev), as in
 * helm.test.ts: the stack's API server already serves Portico's CRDs, and Helm skips a chart's
 * crds/ whose CRDs exist, so only renamed ones show that the released chart creates its CRDs.
 */
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, realpath, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import { PackageURL } from 'packageurl-js';
import semver from 'semver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import { createCustomDomain, createProject, sandbox, unique, waitForCondition } from './support/cluster.js';
import { PLUGIN_NODE } from '../../scripts/build-plugin-sea.js';
import {
  PLUGIN_PLATFORMS,
  pluginArchiveFiles,
  pluginArchiveName,
  pluginExecutableName,
} from '../../src/release/artifacts.js';
import { checkPluginExecutable } from '../../src/release/executable.js';
import { REPO, helm, kubectl, run, runOk, toolsBin, type Manifest } from './support/helm.js';
import { imageBuildEnded } from './support/image-build.js';
import { startRegistry, type LocalRegistry } from './support/registry.js';

const id = unique('rel');
const CRD_GROUP = `${id}.portico.dev`;
const CRD_PLURALS = ['customdomains', 'hostnameclaims', 'ratelimitpolicies'];
const RELEASE = unique('portico-rel');
const SETS = [
  'platform.cnameTarget=sites.example.net',
  'admissionPolicy.hostnameClaims.enabled=false',
  'admissionPolicy.rateLimitDescriptors.enabled=false',
  'admissionPolicy.externalNameServices.enabled=false',
];
const GIT_IDENTITY = {
  GIT_AUTHOR_NAME: 'Release Test',
  GIT_AUTHOR_EMAIL: 'release-test@example.net',
  GIT_COMMITTER_NAME: 'Release Test',
  GIT_COMMITTER_EMAIL: 'release-test@example.net',
};

let work = '';
let copy = '';
let bin = '';
let registry: LocalRegistry | undefined;
let registryUrl = '';
let v1 = '';
let v2 = '';
const timings: Record<string, number> = {};

/** `git` in the copy. */
function git(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<string> {
  return runOk('git', args, { cwd: copy, env: { ...process.env, ...GIT_IDENTITY, ...env } });
}

/** `npm run release -- <args>` in the copy, with the tools' helm. */
async function release(
  args: readonly string[],
): Promise<{ code: number | null; stdout: string; stderr: string }> {
  const started = Date.now();
  const result = await run('npm', ['run', '--silent', 'release', '--', ...args], {
    cwd: copy,
    env: {
      ...process.env,
      ...GIT_IDENTITY,
      HELM: `${bin}/helm`,
      PATH: [path.dirname(process.execPath), process.env.PATH ?? ''].join(':'),
    },
    timeoutMs: 1_800_000,
  });
  timings[`release ${args.join(' ')}`] = Date.now() - started;
  return result;
}

/** Everything a refused release must leave as it was. */
async function repoState(): Promise<string> {
  const [head, status, tags, pkg] = await Promise.all([
    git(['rev-parse', 'HEAD']),
    git(['status', '--porcelain']),
    git(['tag', '--list']),
    readFile(path.join(copy, 'package.json'), 'utf8'),
  ]);
  const out = await readdir(path.join(copy, 'dist')).catch(() => []);
  return JSON.stringify({ head, status, tags, pkg, out });
}

/** The registry's repositories (`GET /v2/_catalog`, Distribution's catalog API). */
async function catalog(): Promise<string[]> {
  const res = await fetch(`${registry?.url ?? ''}/v2/_catalog`);
  expect(res.status).toBe(200);
  return ((await res.json()) as { repositories: string[] }).repositories;
}

/** The digest the registry answers for `<name>:<tag>` (HEAD of its manifest, OCI or Docker). */
async function manifestDigest(name: string, tag: string): Promise<string | null> {
  const res = await fetch(`${registry?.url ?? ''}/v2/${name}/manifests/${tag}`, {
    method: 'HEAD',
    headers: {
      accept:
        'application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json',
    },
  });
  return res.status === 200 ? res.headers.get('docker-content-digest') : null;
}

/** podman with its storage in `dir` (empty at first) and scripts/build-image.sh's configuration. */
function podmanIn(dir: string, args: readonly string[]): Promise<string> {
  const state = path.join(process.env.XDG_CACHE_HOME ?? path.join(homedir(), '.cache'), 'portico/podman');
  return runOk('podman', ['--root', path.join(dir, 'storage'), '--runroot', path.join(dir, 'run'), ...args], {
    env: {
      ...process.env,
      CONTAINERS_CONF: path.join(process.env.PORTICO_PODMAN_DIR ?? state, 'containers.conf'),
      CONTAINERS_STORAGE_CONF: path.join(dir, 'storage.conf'),
    },
    timeoutMs: 300_000,
  });
}

/** What `release` printed for the image: `image: <repository>:<tag>@<digest>`. */
function releasedImage(stdout: string): { repository: string; tag: string; digest: string } {
  const m = /^image: (\S+):([^:@\s]+)@(sha256:[0-9a-f]{64})$/m.exec(stdout);
  expect(m, stdout).not.toBeNull();
  return { repository: m?.[1] ?? '', tag: m?.[2] ?? '', digest: m?.[3] ?? '' };
}

/** The image ID scripts/build-image.sh printed, as the release logged it (`built <ref> (<id>)`). */
function builtImageId(stderr: string): string {
  const m = /\[release\] built \S+ \((sha256:[0-9a-f]{64})\)/.exec(stderr);
  expect(m, stderr.slice(-2000)).not.toBeNull();
  return m?.[1] ?? '';
}

let released1 = { stdout: '', stderr: '' };

/**
 * Renames the CRDs into CRD_GROUP (see the header): in crds/, which the release copies into the
 * chart (scripts/render-deploy.sh), and in the chart's copy.
 */
async function renameCrds(): Promise<void> {
  for (const dir of [path.join(copy, 'crds'), path.join(copy, 'charts/portico/crds')])
    await renameCrdsIn(dir);
}

async function renameCrdsIn(dir: string): Promise<void> {
  for (const file of (await readdir(dir)).filter((f) => f.endsWith('.yaml'))) {
    const crd = parse(await readFile(path.join(dir, file), 'utf8')) as Manifest & {
      spec: { group: string; names: { kind: string; listKind?: string; plural: string; singular?: string } };
    };
    const { names } = crd.spec;
    crd.spec.group = CRD_GROUP;
    crd.spec.names = {
      kind: `Copy${names.kind}`,
      listKind: `Copy${names.listKind ?? `${names.kind}List`}`,
      plural: `copy${names.plural}`,
      singular: `copy${names.singular ?? names.kind.toLowerCase()}`,
    };
    crd.metadata.name = `${crd.spec.names.plural}.${CRD_GROUP}`;
    await writeFile(path.join(dir, file), stringify(crd));
  }
}

function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

beforeAll(async () => {
  bin = await toolsBin();
  work = await mkdtemp(path.join(tmpdir(), 'portico-release-'));
  registry = await startRegistry(path.join(work, 'registry'));
  registryUrl = `oci://${registry.host}/charts`;

  // The copy: the work tree's files as they are now (tracked and new, not ignored), committed in a
  // repository of its own; node_modules hard-linked (cyclonedx-npm reads it; a symlink makes
  // `npm ls` see every package as extraneous). The commit carries the time of the work tree's last
  // change of scripts/build-image.sh (see the header).
  copy = path.join(work, 'repo');
  await mkdir(copy);
  await runOk('bash', [
    '-c',
    `git -C "${REPO}" ls-files -z --cached --others --exclude-standard | tar --null -C "${REPO}" -T - -cf - | tar -C "${copy}" -xf -`,
  ]);
  // (The directory itself: in a git worktree node_modules may be a symlink to the main checkout's.)
  const modules = await realpath(`${REPO}node_modules`);
  const linked = await run('cp', ['-al', modules, path.join(copy, 'node_modules')]);
  if (linked.code !== 0) await runOk('cp', ['-a', modules, path.join(copy, 'node_modules')]);
  await renameCrds();
  const basesAt = (await runOk('git', ['log', '-1', '--format=%ct', '--', 'scripts/build-image.sh'])).trim();
  await git(['init', '--quiet']);
  await git(['add', '--all']);
  await git(['commit', '--quiet', '-m', 'the work tree under test'], {
    GIT_AUTHOR_DATE: `@${basesAt}`,
    GIT_COMMITTER_DATE: `@${basesAt}`,
  });
  const { version } = JSON.parse(await readFile(path.join(copy, 'package.json'), 'utf8')) as {
    version: string;
  };
  v1 = semver.inc(version, 'minor') ?? '';
  v2 = semver.inc(v1, 'minor') ?? '';
  await imageBuildEnded();
}, 1_200_000);

afterAll(async () => {
  await helm(['uninstall', RELEASE, '-n', RELEASE, '--wait=false']).catch(() => undefined);
  await kubectl(['delete', 'namespace', RELEASE, '--wait=false', '--ignore-not-found']);
  for (const plural of CRD_PLURALS) {
    await kubectl(['delete', 'crd', `copy${plural}.${CRD_GROUP}`, '--ignore-not-found', '--wait=false']);
  }
  // The releases' images, tagged <registry host>/portico:<version> in scripts/build-image.sh's
  // podman storage (their layers stay, shared with later builds).
  if (registry) {
    const state =
      process.env.PORTICO_PODMAN_DIR ??
      path.join(process.env.XDG_CACHE_HOME ?? path.join(homedir(), '.cache'), 'portico/podman');
    const host = registry.host;
    await run(
      'podman',
      [
        '--root',
        path.join(state, 'storage'),
        '--runroot',
        path.join(state, 'run'),
        'rmi',
        '--ignore',
        ...[v1, v2].map((v) => `${host}/portico:${v}`),
      ],
      {
        env: {
          ...process.env,
          CONTAINERS_CONF: path.join(state, 'containers.conf'),
          CONTAINERS_STORAGE_CONF: path.join(state, 'storage.conf'),
        },
      },
    );
  }
  await registry?.stop();
  if (work) await rm(work, { recursive: true, force: true });
  process.stderr.write(`release.test.ts timings (ms): ${JSON.stringify(timings)}\n`);
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
  it('refuses a dirty tree, a version that is not SemVer and one not above the last, and changes nothing', async () => {
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
      const failed = await release([
        '--version',
        v1,
        '--registry',
        registryUrl,
        '--plain-http',
        '--cached-bases',
        '--artifacts',
        '',
      ]);
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
    const released = await release([
      '--version',
      v1,
      '--registry',
      registryUrl,
      '--plain-http',
      '--cached-bases',
    ]);
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
    expect(image.repository).toBe(`${registry?.host ?? ''}/portico`);
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

    const out = path.join(copy, `dist/release/v${v1}`);
    const files = (await readdir(out)).sort();
    expect(files).toEqual(
      [
        'SHA256SUMS',
        'kubectl-portico.krew.yaml',
        ...PLUGIN_PLATFORMS.map((p) => pluginArchiveName(v1, p)),
        `portico-${v1}.cdx.json`,
        `portico-${v1}.tgz`,
      ].sort(),
    );
    const sums = new Map(
      (await readFile(path.join(out, 'SHA256SUMS'), 'utf8'))
        .trim()
        .split('\n')
        .map((line) => {
          const [hex = '', name = ''] = line.split('  ');
          return [name, hex] as const;
        }),
    );
    expect([...sums.keys()].sort()).toEqual(files.filter((f) => f !== 'SHA256SUMS'));
    for (const [name, hex] of sums) expect(sha256(await readFile(path.join(out, name))), name).toBe(hex);

    const krew = parse(await readFile(path.join(out, 'kubectl-portico.krew.yaml'), 'utf8')) as {
      spec: {
        version: string;
        platforms: { selector: { matchLabels: { arch: string } }; uri: string; sha256: string }[];
      };
    };
    expect(krew.spec.version).toBe(`v${v1}`);
    expect(krew.spec.platforms.map((p) => p.selector.matchLabels)).toEqual(
      PLUGIN_PLATFORMS.map(({ os, arch }) => ({ os, arch })),
    );
    for (const p of krew.spec.platforms) {
      const file = p.uri.split('/').at(-1) ?? '';
      expect(p.sha256, file).toBe(sums.get(file));
    }
    // Each archive: its executable, LICENSE and NODE-LICENSE; the executable of its platform, with
    // the blob in it (and for darwin an ad-hoc signature that matches its bytes).
    for (const platform of PLUGIN_PLATFORMS) {
      const archive = path.join(out, pluginArchiveName(v1, platform));
      const dir = await mkdtemp(path.join(work, 'archive-'));
      const listed = platform.os === 'windows' ? ['unzip', '-Z1', archive] : ['tar', '-tzf', archive];
      expect((await runOk(listed[0] ?? '', listed.slice(1))).trim().split('\n').sort()).toEqual(
        pluginArchiveFiles(platform.os).sort(),
      );
      await runOk(
        platform.os === 'windows' ? 'unzip' : 'tar',
        platform.os === 'windows' ? ['-q', archive, '-d', dir] : ['-xzf', archive, '-C', dir],
      );
      const exe = await readFile(path.join(dir, pluginExecutableName(platform.os)));
      expect(
        () => {
          checkPluginExecutable(exe, platform);
        },
        pluginArchiveName(v1, platform),
      ).not.toThrow();
      await rm(dir, { recursive: true, force: true });
    }

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
    const second = await release([
      '--version',
      v2,
      '--registry',
      registryUrl,
      '--plain-http',
      '--cached-bases',
      '--artifacts',
      '',
    ]);
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
    for (const arch of ['amd64', 'arm64']) {
      const dir = path.join(work, `plugin-${arch}`);
      await mkdir(dir, { recursive: true });
      await runOk('tar', [
        '-xzf',
        path.join(copy, `dist/release/v${v1}/kubectl-portico_v${v1}_linux_${arch}.tar.gz`),
        '-C',
        dir,
      ]);
    }
    await runOk('cp', [path.join(work, 'plugin-amd64/kubectl-portico'), pathDir()]);
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

  it('the arm64 executable is an aarch64 binary that explains the same domain (under qemu-user)', async () => {
    const executable = path.join(work, 'plugin-arm64/kubectl-portico');
    const header = (await readFile(executable)).subarray(0, 20);
    expect(header.readUInt16LE(18)).toBe(0xb7); // ELF e_machine EM_AARCH64
    const qemu = (await runOk('bash', ['-c', 'command -v qemu-aarch64'])).trim();
    const explained = await run(
      qemu,
      [
        '-L',
        '/usr/aarch64-linux-gnu',
        executable,
        'explain',
        'www',
        '-n',
        ns,
        '--kubeconfig',
        sandbox.kubeconfig,
      ],
      { env: { PATH: '' }, timeoutMs: 90_000 },
    );
    expect(explained.code, explained.stderr).toBe(0);
    expect(explained.stdout).toContain('PlanNotEligible');
  }, 120_000);
});
