/**
 * A release as a platform team meets it (docs/install.md, "Releasing Portico"): CNCF Distribution's
 * registry on loopback (built by scripts/install-tools.sh --test); `npm run release` in a copy of
 * this work tree (a git repository of its own, so the release's commit and tag stay there) refusing
 * bad input with nothing changed, then releasing a version into the registry with its files; `helm
 * install` of that version from `oci://127.0.0.1:<port>/charts/portico` into the stack's API
 * server; a second release and `helm upgrade --reuse-values` to it; the released `kubectl-portico`
 * single executables: each platform's archive and its header checks (src/release/executable.ts),
 * the linux-amd64 one found by the real kubectl on a PATH with no Node.js on it, explaining a domain
 * the stack's operator reconciled, and the linux-arm64 one under qemu-user. Building the six
 * platforms takes minutes on 2 shared cores (10 under a load of 17), hence the 20-minute bound.
 *
 * The copy's CRDs are renamed into a group of their own (copy<plural>.<id>.portico.dev), as in
 * helm.test.ts: the stack's API server already serves Portico's CRDs, and Helm skips a chart's
 * crds/ whose CRDs exist, so only renamed ones show that the released chart creates its CRDs.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import path from 'node:path';
import semver from 'semver';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse, stringify } from 'yaml';
import {
  createCustomDomain,
  createProject,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import { PLUGIN_NODE } from '../../scripts/build-plugin-sea.js';
import {
  PLUGIN_PLATFORMS,
  pluginArchiveFiles,
  pluginArchiveName,
  pluginExecutableName,
} from '../../src/release/artifacts.js';
import { checkPluginExecutable } from '../../src/release/executable.js';
import { REPO, helm, kubectl, run, runOk, toolsBin, type Manifest } from './support/helm.js';

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
let registry: ChildProcess | undefined;
let registryUrl = '';
let v1 = '';
let v2 = '';
const timings: Record<string, number> = {};

/** A TCP port free on loopback now. */
function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const address = server.address();
      server.close(() => {
        resolve(typeof address === 'object' && address ? address.port : 0);
      });
    });
  });
}

/** `git` in the copy. */
function git(args: readonly string[]): Promise<string> {
  return runOk('git', args, { cwd: copy, env: { ...process.env, ...GIT_IDENTITY } });
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
    timeoutMs: 1_200_000,
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
  // The registry: CNCF Distribution, filesystem storage, plain HTTP on loopback.
  const port = await freePort();
  const config = path.join(work, 'registry.yml');
  await writeFile(
    config,
    stringify({
      version: 0.1,
      log: { level: 'warn' },
      storage: { filesystem: { rootdirectory: path.join(work, 'registry') } },
      http: { addr: `127.0.0.1:${String(port)}` },
    }),
  );
  registry = spawn(`${bin}/registry`, ['serve', config], { stdio: 'ignore' });
  registryUrl = `oci://127.0.0.1:${String(port)}/charts`;
  await waitFor('the registry', async () => {
    const res = await fetch(`http://127.0.0.1:${String(port)}/v2/`).catch(() => undefined);
    return res?.status === 200 ? true : undefined;
  });

  // The copy: the work tree's files as they are now (tracked and new, not ignored), committed in a
  // repository of its own; node_modules hard-linked (cyclonedx-npm reads it; a symlink makes
  // `npm ls` see every package as extraneous).
  copy = path.join(work, 'repo');
  await mkdir(copy);
  await runOk('bash', [
    '-c',
    `git -C "${REPO}" ls-files -z --cached --others --exclude-standard | tar --null -C "${REPO}" -T - -cf - | tar -C "${copy}" -xf -`,
  ]);
  const linked = await run('cp', ['-al', `${REPO}node_modules`, path.join(copy, 'node_modules')]);
  if (linked.code !== 0) await runOk('cp', ['-a', `${REPO}node_modules`, path.join(copy, 'node_modules')]);
  await renameCrds();
  await git(['init', '--quiet']);
  await git(['add', '--all']);
  await git(['commit', '--quiet', '-m', 'the work tree under test']);
  const { version } = JSON.parse(await readFile(path.join(copy, 'package.json'), 'utf8')) as {
    version: string;
  };
  v1 = semver.inc(version, 'minor') ?? '';
  v2 = semver.inc(v1, 'minor') ?? '';
}, 600_000);

afterAll(async () => {
  await helm(['uninstall', RELEASE, '-n', RELEASE, '--wait=false']).catch(() => undefined);
  await kubectl(['delete', 'namespace', RELEASE, '--wait=false', '--ignore-not-found']);
  for (const plural of CRD_PLURALS) {
    await kubectl(['delete', 'crd', `copy${plural}.${CRD_GROUP}`, '--ignore-not-found', '--wait=false']);
  }
  registry?.kill();
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
    await writeFile(path.join(copy, 'README.md'), 'changed\n', { flag: 'a' });
    const dirtyState = await repoState();
    const dirty = await release(['--version', v1, '--registry', registryUrl, '--plain-http']);
    expect(dirty.code).toBe(1);
    expect(dirty.stderr).toContain('the work tree has uncommitted changes');
    expect(dirty.stderr).toContain('M README.md');
    expect(await repoState()).toBe(dirtyState);
    await git(['checkout', 'README.md']);
  });

  it('sets the version, commits and tags it, writes the files and their sums, and pushes the chart', async () => {
    const released = await release(['--version', v1, '--registry', registryUrl, '--plain-http']);
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
    // deploy/ re-rendered with the new image tag.
    expect(await readFile(path.join(copy, 'deploy/portico.yaml'), 'utf8')).toContain(
      `image: ghcr.io/portico-dev/portico:${v1}`,
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
      components: { group?: string; name: string }[];
    };
    expect(sbom.bomFormat).toBe('CycloneDX');
    expect(sbom.metadata.component).toMatchObject({ name: 'portico', version: v1 });
    const names = sbom.components.map((c) => (c.group ? `${c.group}/${c.name}` : c.name));
    expect(names).toEqual(
      expect.arrayContaining(['@kubernetes/client-node', 'ioredis', 'acme-client', 'axios']),
    );
    expect(names).not.toContain('vitest'); // production packages only

    const shown = await helm([
      'show',
      'chart',
      registryUrl.replace(/\/charts$/, '/charts/portico'),
      '--version',
      v1,
      '--plain-http',
    ]);
    expect(shown.code, shown.stderr).toBe(0);
    expect(parse(shown.stdout)).toMatchObject({ name: 'portico', version: v1, appVersion: v1 });
  }, 1_200_000);
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
    expect(deployment.spec.template.spec.containers[0]?.image).toBe(`ghcr.io/portico-dev/portico:${v1}`);
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

  it('helm upgrade --reuse-values moves the release to a second released version', async () => {
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
      '--artifacts',
      '',
    ]);
    expect(second.code, second.stderr).toBe(0);

    const upgrade = await helm([
      'upgrade',
      RELEASE,
      chartRef(),
      '--version',
      v2,
      '--plain-http',
      '-n',
      RELEASE,
      '--reuse-values',
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
    expect(image.stdout).toBe(`ghcr.io/portico-dev/portico:${v2}`);
  }, 300_000);
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
