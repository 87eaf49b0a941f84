#!/usr/bin/env -S npx tsx
// `npm run release -- --version X.Y.Z --registry oci://HOST[:PORT]/PATH [flags]`: one command from a
// clean work tree to a published image and chart and the files of a release (docs/install.md,
// "Releasing Portico").
//
//   1. Checks, changing nothing: the work tree is clean; X.Y.Z is SemVer and above the last release
//      (package.json's version and every vX.Y.Z tag); CHANGELOG.md has notes under [Unreleased].
//   2. Sets the version in one place each: package.json and package-lock.json (`npm version`), the
//      chart's `version` and `appVersion`, the chart's image (values.yaml `image.repository` and
//      `image.tag`: the image this release pushes), CHANGELOG.md's section; re-renders deploy/
//      (scripts/render-deploy.sh); commits "Release X.Y.Z".
//   3. Builds the image of that commit (scripts/build-image.sh --fresh --no-cache, tagged
//      <image repository>:X.Y.Z) and, beside it, `kubectl-portico` for linux, darwin and windows
//      on amd64 and arm64 (--plugin-platforms) as single executables in tar.gz (zip for windows) archives
//      (scripts/build-plugin-sea.ts) with their krew manifest; then a CycloneDX SBOM of the production npm packages (`cyclonedx-npm --omit dev`)
//      and the image's Debian packages (read from the built image, src/release/sbom.ts), into --out.
//   4. Pushes the image (`podman push`) and takes the digest the registry answered; packages the
//      chart with that digest in its values (`image.digest`, beside the repository and tag of step
//      2), writes SHA256SUMS of the files, pushes the chart (`helm push`) to --registry, then tags
//      the commit vX.Y.Z.
//   A failure in 2-4 resets the work tree to the commit it started from and removes --out. Nothing
//   is pushed before the image, the plugin and the SBOM are built, so a failed build pushes
//   nothing; a failure after the image push leaves that image in the registry (and nothing else).
//
// flags:
//   --version X.Y.Z           required: the version to release
//   --registry oci://...      required: where `helm push` sends the chart (its path, e.g.
//                             oci://ghcr.io/portico-dev/charts; the chart lands at <registry>/portico)
//   --image-repository REPO   where the image goes, as <REPO>:X.Y.Z (default: the registry's host
//                             and path without a last /charts, plus /portico: ghcr.io/portico-dev/portico
//                             for the example above; required when that would be the chart's own)
//   --plain-http              talk HTTP to the registry (only for one on loopback: 127.0.0.0/8, ::1,
//                             localhost)
//   --cached-bases            build the image on the Debian base images scripts/build-image.sh has
//                             cached, instead of making them fresh (which takes Debian's latest
//                             updates, and minutes)
//   --layer-cache             let podman reuse the layers of earlier builds (the dependencies' `npm
//                             ci` and tsc when their inputs are the same) instead of building every
//                             step again (--no-cache). Faster, for trying a release out and for the
//                             tests; the layers reused carry the time of the build that made them,
//                             so the image is not the one a rebuild of the tag from an empty cache
//                             gives (docs/install.md, "Verifying a released image")
//   --out DIR                 where the files go (default: dist/release/vX.Y.Z)
//   --download-url URL        where the plugin archives will be downloadable, for the krew manifest
//                             (default: https://github.com/portico-dev/portico/releases/download/vX.Y.Z)
//   --artifacts LIST          what to build besides the image and the chart: any of plugin,sbom
//                             (default: plugin,sbom; `--artifacts ""` builds neither)
//   --plugin-platforms LIST   the plugin's platforms, <os>-<arch> (default: all six, linux-amd64,
//                             linux-arm64, darwin-amd64, darwin-arm64, windows-amd64,
//                             windows-arm64; the krew manifest names those built). A release for
//                             users builds all six; `npm test` builds linux-amd64 alone and
//                             `npm run release:check` all six (docs/testing.md)
//   HELM                      the helm binary (default: the one scripts/install-tools.sh --test builds)
//   PORTICO_PODMAN_DIR        podman's storage, as scripts/build-image.sh uses it (default:
//                             ${XDG_CACHE_HOME:-~/.cache}/portico/podman)
//
// Exit codes: 0 released, 1 refused or failed (the message says why and what to do), 2 usage.
import { execFile, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { cp, mkdir, mkdtemp, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import {
  PLUGIN_PLATFORMS,
  krewManifest,
  platformKey,
  sha256Sums,
  type PluginPlatform,
} from '../src/release/artifacts.js';
import { releaseChangelog } from '../src/release/changelog.js';
import { setChartImage, setChartVersion, type ChartImage } from '../src/release/chart.js';
import { ReleaseError, isReleaseError } from '../src/release/errors.js';
import {
  addDebianPackages,
  distroFromOsRelease,
  parseDebianPackages,
  type Bom,
} from '../src/release/sbom.js';
import { checkNextVersion, versionsFromTags } from '../src/release/version.js';
import { buildPluginArchives } from './build-plugin-sea.js';

const exec = promisify(execFile);
const REPO = fileURLToPath(new URL('..', import.meta.url));
const CHART_DIR = path.join(REPO, 'charts/portico');
const ARTIFACTS = ['plugin', 'sbom'] as const;
type Artifact = (typeof ARTIFACTS)[number];

interface Options {
  version: string;
  registry: string;
  /** Where the image goes, without tag: `<imageRepository>:<version>`. */
  imageRepository: string;
  plainHttp: boolean;
  freshBases: boolean;
  /** podman's layer cache allowed (--layer-cache); else the build runs every step (--no-cache). */
  layerCache: boolean;
  out: string;
  downloadUrl: string;
  artifacts: Set<Artifact>;
  /** The plugin's platforms, in PLUGIN_PLATFORMS' order. */
  pluginPlatforms: PluginPlatform[];
}

class UsageError extends Error {}

function log(message: string): void {
  process.stderr.write(`[release] ${message}\n`);
}

/** Runs a command in the repository; throws ReleaseError with its output when it fails. */
async function sh(
  command: string,
  args: readonly string[],
  env: NodeJS.ProcessEnv = process.env,
): Promise<string> {
  try {
    const { stdout } = await exec(command, [...args], { cwd: REPO, env, maxBuffer: 64 << 20 });
    return stdout;
  } catch (err) {
    const e = err as { stderr?: string; stdout?: string; message: string };
    throw new ReleaseError(
      `${command} ${args.join(' ')} failed: ${(e.stderr ?? '') + (e.stdout ?? '') || e.message}`,
    );
  }
}

function parseOptions(argv: readonly string[]): Options {
  let values;
  try {
    ({ values } = parseArgs({
      args: [...argv],
      strict: true,
      options: {
        version: { type: 'string' },
        registry: { type: 'string' },
        'image-repository': { type: 'string' },
        'plain-http': { type: 'boolean', default: false },
        'cached-bases': { type: 'boolean', default: false },
        'layer-cache': { type: 'boolean', default: false },
        'plugin-platforms': { type: 'string', default: PLUGIN_PLATFORMS.map(platformKey).join(',') },
        out: { type: 'string' },
        'download-url': { type: 'string' },
        artifacts: { type: 'string', default: ARTIFACTS.join(',') },
      },
    }));
  } catch (err) {
    throw new UsageError((err as Error).message);
  }
  const { version, registry } = values;
  if (!version) throw new UsageError('--version X.Y.Z is required');
  if (!registry) throw new UsageError('--registry oci://HOST[:PORT]/PATH is required');
  if (!registry.startsWith('oci://')) throw new UsageError(`--registry ${registry}: must start with oci://`);
  const artifacts = new Set(listOption('--artifacts', values.artifacts, ARTIFACTS));
  const platforms = new Set<string>(
    listOption('--plugin-platforms', values['plugin-platforms'], PLUGIN_PLATFORMS.map(platformKey)),
  );
  if (platforms.size === 0 && artifacts.has('plugin')) {
    throw new UsageError(
      '--plugin-platforms: none given (leave plugin out of --artifacts to build no plugin)',
    );
  }
  const chartRegistry = registry.replace(/\/+$/, '');
  const host = chartRegistry.slice('oci://'.length).split('/')[0] ?? '';
  const imageRepository =
    values['image-repository'] ?? `${chartRegistry.slice('oci://'.length).replace(/\/charts$/, '')}/portico`;
  if (imageRepository === `${chartRegistry.slice('oci://'.length)}/portico`) {
    throw new UsageError(
      `the image would go to ${imageRepository}, where the chart goes: pass --image-repository (the default drops a last /charts from --registry)`,
    );
  }
  if (values['plain-http'] && !isLoopback(host)) {
    throw new UsageError(`--plain-http: ${host} is not on loopback (127.0.0.0/8, [::1], localhost)`);
  }
  return {
    version,
    registry: chartRegistry,
    imageRepository,
    plainHttp: values['plain-http'],
    freshBases: !values['cached-bases'],
    layerCache: values['layer-cache'],
    out: path.resolve(values.out ?? path.join(REPO, `dist/release/v${version}`)),
    downloadUrl: (
      values['download-url'] ?? `https://github.com/portico-dev/portico/releases/download/v${version}`
    ).replace(/\/+$/, ''),
    artifacts,
    pluginPlatforms: PLUGIN_PLATFORMS.filter((p) => platforms.has(platformKey(p))),
  };
}

/**
 * A comma-separated option's items (empty items dropped), each one of `known`.
 * @throws UsageError naming `flag` for an unknown item.
 */
function listOption<T extends string>(flag: string, value: string, known: readonly T[]): T[] {
  const items = value.split(',').filter((s) => s !== '');
  for (const item of items) {
    if (!(known as readonly string[]).includes(item)) {
      throw new UsageError(`${flag}: unknown "${item}" (known: ${known.join(', ')})`);
    }
  }
  return items as T[];
}

/** True for a registry host (with or without port) on loopback: 127.0.0.0/8, [::1], localhost. */
function isLoopback(host: string): boolean {
  const name = host.startsWith('[') ? host.slice(1, host.indexOf(']')) : host.replace(/:\d+$/, '');
  return name === 'localhost' || name === '::1' || /^127\.\d{1,3}\.\d{1,3}\.\d{1,3}$/.test(name);
}

/** The helm binary: $HELM, else the one scripts/install-tools.sh --test builds (built on first use). */
async function findHelm(): Promise<string> {
  if (process.env.HELM) return process.env.HELM;
  const out = await sh(path.join(REPO, 'scripts/install-tools.sh'), ['--test']);
  return `${out.trim().split('\n').at(-1) ?? ''}/helm`;
}

/** What the release will write, computed before anything is written. */
interface Plan {
  last: string | undefined;
  chartYaml: string;
  /** values.yaml naming the image by repository and the version's tag (the digest comes at push). */
  valuesYaml: string;
  changelog: string;
  head: string;
}

/** Step 1: every check, nothing written. @throws ReleaseError */
async function plan(options: Options): Promise<Plan> {
  const dirty = (await sh('git', ['status', '--porcelain'])).trim();
  if (dirty !== '') {
    throw new ReleaseError(
      `the work tree has uncommitted changes; commit or stash them first (a release is built from a commit):\n${dirty}`,
    );
  }
  const pkg = JSON.parse(await readFile(path.join(REPO, 'package.json'), 'utf8')) as { version: string };
  const tags = (await sh('git', ['tag', '--list', 'v*'])).split('\n').filter((t) => t !== '');
  const last = checkNextVersion(options.version, [pkg.version, ...versionsFromTags(tags)]);
  const date = new Date().toISOString().slice(0, 10);
  const changelog = releaseChangelog(
    await readFile(path.join(REPO, 'CHANGELOG.md'), 'utf8'),
    options.version,
    date,
  );
  const chartYaml = setChartVersion(
    await readFile(path.join(CHART_DIR, 'Chart.yaml'), 'utf8'),
    options.version,
  );
  const valuesYaml = setChartImage(await readFile(path.join(CHART_DIR, 'values.yaml'), 'utf8'), {
    repository: options.imageRepository,
    tag: options.version,
  });
  const head = (await sh('git', ['rev-parse', 'HEAD'])).trim();
  return { last, chartYaml, valuesYaml, changelog, head };
}

/** Step 2: the version set everywhere and committed; returns the release commit. */
async function setVersion(options: Options, p: Plan, helm: string): Promise<string> {
  await sh('npm', ['version', options.version, '--no-git-tag-version', '--ignore-scripts']);
  await writeFile(path.join(CHART_DIR, 'Chart.yaml'), p.chartYaml);
  await writeFile(path.join(CHART_DIR, 'values.yaml'), p.valuesYaml);
  await writeFile(path.join(REPO, 'CHANGELOG.md'), p.changelog);
  await sh(path.join(REPO, 'scripts/render-deploy.sh'), [], { ...process.env, HELM: helm });
  await sh('git', ['add', '--update']);
  await sh('git', ['commit', '--quiet', '-m', `Release ${options.version}`]);
  return (await sh('git', ['rev-parse', 'HEAD'])).trim();
}

async function sha256(file: string): Promise<string> {
  return createHash('sha256')
    .update(await readFile(file))
    .digest('hex');
}

/** The plugin's archives (one executable each, scripts/build-plugin-sea.ts) and their krew manifest. */
async function buildPlugin(options: Options, commit: string): Promise<void> {
  const archives = await buildPluginArchives(
    { version: options.version, commit },
    options.out,
    log,
    options.pluginPlatforms,
  );
  await writeFile(
    path.join(options.out, 'kubectl-portico.krew.yaml'),
    krewManifest(options.version, options.downloadUrl, archives),
  );
}

/** podman as scripts/build-image.sh runs it: its storage and configuration in PORTICO_PODMAN_DIR. */
function podmanCommand(): { args: string[]; env: NodeJS.ProcessEnv } {
  const state =
    process.env.PORTICO_PODMAN_DIR ??
    path.join(process.env.XDG_CACHE_HOME ?? path.join(homedir(), '.cache'), 'portico/podman');
  return {
    args: ['--root', path.join(state, 'storage'), '--runroot', path.join(state, 'run')],
    env: {
      ...process.env,
      CONTAINERS_CONF: path.join(state, 'containers.conf'),
      CONTAINERS_STORAGE_CONF: path.join(state, 'storage.conf'),
    },
  };
}

function podman(args: readonly string[]): Promise<string> {
  const { args: base, env } = podmanCommand();
  return sh('podman', [...base, ...args], env);
}

/** The image built on the release commit. */
interface BuiltImage {
  /** The local reference, `<imageRepository>:<version>`. */
  ref: string;
  /** `sha256:<hex>`, the image ID (its config's digest). */
  id: string;
}

/**
 * Step 3a: scripts/build-image.sh on the release commit; its log goes to stderr as it runs.
 * @throws ReleaseError with the end of its log when it fails.
 */
async function buildImage(options: Options, commit: string): Promise<BuiltImage> {
  const ref = `${options.imageRepository}:${options.version}`;
  const args = [
    '--tag',
    ref,
    ...(options.freshBases ? ['--fresh'] : []),
    ...(options.layerCache ? [] : ['--no-cache']),
  ];
  log(`scripts/build-image.sh ${args.join(' ')}`);
  const started = Date.now();
  const child = spawn(path.join(REPO, 'scripts/build-image.sh'), args, {
    cwd: REPO,
    env: { ...process.env, PORTICO_COMMIT: commit },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let tail: string[] = [];
  child.stdout.setEncoding('utf8').on('data', (c: string) => (stdout += c));
  child.stderr.setEncoding('utf8').on('data', (c: string) => {
    process.stderr.write(c);
    tail = [...tail, ...c.split('\n')].slice(-40);
  });
  const code = await new Promise<number | null>((resolve, reject) => {
    child.on('error', reject);
    child.on('close', resolve);
  });
  if (code !== 0) {
    throw new ReleaseError(
      `the image build failed (scripts/build-image.sh exited ${String(code)}); nothing was pushed. Its last lines:\n${tail.join('\n')}`,
    );
  }
  const id = /^id: (sha256:[0-9a-f]{64})$/m.exec(stdout)?.[1];
  if (id === undefined) throw new ReleaseError(`scripts/build-image.sh printed no image ID:\n${stdout}`);
  log(`built ${ref} (${id}) in ${((Date.now() - started) / 1000).toFixed(0)} s`);
  return { ref, id };
}

/** The image's Debian packages and its distro, read from the built image's files (src/release/sbom.ts). */
async function imageDebianPackages(image: BuiltImage): Promise<{ text: string; distro: string }> {
  const dir = await mkdtemp(path.join(tmpdir(), 'portico-image-files-'));
  const container = (await podman(['create', '--pull=never', image.ref])).trim();
  try {
    await podman(['cp', `${container}:/var/lib/portico/debian-packages.txt`, path.join(dir, 'packages.txt')]);
    await podman(['cp', `${container}:/usr/lib/os-release`, path.join(dir, 'os-release')]);
    return {
      text: await readFile(path.join(dir, 'packages.txt'), 'utf8'),
      distro: distroFromOsRelease(await readFile(path.join(dir, 'os-release'), 'utf8')),
    };
  } finally {
    await podman(['rm', container]).catch(() => '');
    await rm(dir, { recursive: true, force: true });
  }
}

/** The SBOM: cyclonedx-npm's production packages, then the image's Debian packages. */
async function buildSbom(options: Options, image: BuiltImage): Promise<void> {
  const sbom = path.join(options.out, `portico-${options.version}.cdx.json`);
  await sh('npx', [
    '--no-install',
    'cyclonedx-npm',
    '--omit',
    'dev',
    '--output-format',
    'JSON',
    '--output-file',
    sbom,
  ]);
  const debian = await imageDebianPackages(image);
  const bom = addDebianPackages(
    JSON.parse(await readFile(sbom, 'utf8')) as Bom,
    parseDebianPackages(debian.text),
    debian.distro,
  );
  await writeFile(sbom, `${JSON.stringify(bom, null, 2)}\n`);
}

/**
 * Step 3: the image, and beside it the plugin, then the SBOM (it reads the image), into --out.
 * Everything settles before a failure is thrown, so the roll-back never races a build still
 * writing into --out.
 */
async function build(options: Options, commit: string): Promise<BuiltImage> {
  const settled = (p: Promise<unknown>): Promise<Error | undefined> =>
    p.then(
      () => undefined,
      (err: unknown) => (err instanceof Error ? err : new Error(String(err))),
    );
  let image: BuiltImage | undefined;
  const failures = await Promise.all([
    settled(
      buildImage(options, commit).then(async (built) => {
        image = built;
        if (options.artifacts.has('sbom')) await buildSbom(options, built);
      }),
    ),
    settled(options.artifacts.has('plugin') ? buildPlugin(options, commit) : Promise.resolve()),
  ]);
  const failure = failures.find((f) => f !== undefined);
  if (failure !== undefined) throw failure;
  if (image === undefined) throw new ReleaseError('the image build returned no image');
  return image;
}

/** Step 4a: `podman push` of the image; returns the manifest digest the registry answered. */
async function pushImage(options: Options, image: BuiltImage): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'portico-push-'));
  try {
    const digestFile = path.join(dir, 'digest');
    await podman([
      'push',
      '--digestfile',
      digestFile,
      ...(options.plainHttp ? ['--tls-verify=false'] : []),
      image.ref,
      `docker://${image.ref}`,
    ]);
    const digest = (await readFile(digestFile, 'utf8')).trim();
    if (!/^sha256:[0-9a-f]{64}$/.test(digest))
      throw new ReleaseError(`podman push wrote the digest "${digest}"`);
    log(`pushed ${image.ref}@${digest}`);
    return digest;
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** Step 4b: `helm package` of a copy of the chart whose values name the pushed image by digest. */
async function packageChart(options: Options, helm: string, image: ChartImage): Promise<string> {
  const dir = await mkdtemp(path.join(tmpdir(), 'portico-chart-'));
  try {
    const chartDir = path.join(dir, 'portico');
    await cp(CHART_DIR, chartDir, { recursive: true });
    const values = path.join(chartDir, 'values.yaml');
    await writeFile(values, setChartImage(await readFile(values, 'utf8'), image));
    await sh(helm, ['package', chartDir, '--destination', options.out]);
    return path.join(options.out, `portico-${options.version}.tgz`);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** SHA256SUMS of every file in --out. */
async function writeSums(options: Options): Promise<void> {
  const sums = new Map<string, string>();
  for (const file of (await readdir(options.out)).filter((f) => f !== 'SHA256SUMS')) {
    sums.set(file, await sha256(path.join(options.out, file)));
  }
  await writeFile(path.join(options.out, 'SHA256SUMS'), sha256Sums(sums));
}

/** Step 4c: `helm push`; returns the manifest digest the registry answered. */
async function push(options: Options, helm: string, chart: string): Promise<string> {
  const args = ['push', chart, options.registry, ...(options.plainHttp ? ['--plain-http'] : [])];
  let text: string;
  try {
    const out = await exec(helm, args, { cwd: REPO });
    text = out.stdout + out.stderr;
  } catch (err) {
    const e = err as { stderr?: string; message: string };
    throw new ReleaseError(`helm push to ${options.registry} failed: ${e.stderr ?? e.message}`);
  }
  return /Digest: (sha256:[0-9a-f]{64})/.exec(text)?.[1] ?? 'unknown';
}

/**
 * Puts the work tree back where it started after a failed release: the commit, and --out removed
 * from the first directory the release created for it (`created`, e.g. dist/release/).
 */
async function rollBack(p: Plan, options: Options, created: string | undefined): Promise<void> {
  await sh('git', ['reset', '--quiet', '--hard', p.head]).catch(() => '');
  await rm(created ?? options.out, { recursive: true, force: true });
  log(`reset the work tree to ${p.head} and removed ${created ?? options.out}`);
}

/** The whole release; see the header. @throws ReleaseError */
export async function release(options: Options): Promise<void> {
  const p = await plan(options);
  const helm = await findHelm();
  log(`releasing ${options.version} (last: ${p.last ?? 'none'})`);
  let chartDigest: string;
  let imageDigest: string;
  let commit: string;
  let created: string | undefined;
  try {
    commit = await setVersion(options, p, helm);
    await rm(options.out, { recursive: true, force: true });
    created = await mkdir(options.out, { recursive: true });
    const image = await build(options, commit);
    imageDigest = await pushImage(options, image);
    const chart = await packageChart(options, helm, {
      repository: options.imageRepository,
      tag: options.version,
      digest: imageDigest,
    });
    await writeSums(options);
    chartDigest = await push(options, helm, chart);
    await sh('git', ['tag', '--annotate', `v${options.version}`, '-m', `Portico ${options.version}`, commit]);
  } catch (err) {
    await rollBack(p, options, created);
    throw err;
  }
  process.stdout.write(
    [
      `released Portico ${options.version} (commit ${commit}, tag v${options.version})`,
      `image: ${options.imageRepository}:${options.version}@${imageDigest}`,
      `chart: ${options.registry}/portico --version ${options.version} (${chartDigest})`,
      `files: ${options.out} (SHA256SUMS beside them)`,
      `then: git push origin HEAD v${options.version}`,
      '',
    ].join('\n'),
  );
}

try {
  await release(parseOptions(process.argv.slice(2)));
} catch (err) {
  if (err instanceof UsageError) {
    process.stderr.write(
      `release: ${err.message}\nusage: npm run release -- --version X.Y.Z --registry oci://HOST[:PORT]/PATH [--image-repository REPO] [--plain-http] [--cached-bases] [--layer-cache] [--out DIR] [--download-url URL] [--artifacts plugin,sbom] [--plugin-platforms linux-amd64,...]\n`,
    );
    process.exitCode = 2;
  } else {
    process.stderr.write(
      `release: ${isReleaseError(err) ? err.message : String((err as Error).stack ?? err)}\n`,
    );
    process.exitCode = 1;
  }
}
