#!/usr/bin/env -S npx tsx
// `npm run release -- --version X.Y.Z --registry oci://HOST[:PORT]/PATH [flags]`: one command from a
// clean work tree to a published chart and the files of a release (docs/install.md, "Releasing
// Portico").
//
//   1. Checks, changing nothing: the work tree is clean; X.Y.Z is SemVer and above the last release
//      (package.json's version and every vX.Y.Z tag); CHANGELOG.md has notes under [Unreleased].
//   2. Sets the version in one place each: package.json and package-lock.json (`npm version`), the
//      chart's `version` and `appVersion` (and with it the default image tag), CHANGELOG.md's
//      section; re-renders deploy/ (scripts/render-deploy.sh); commits "Release X.Y.Z".
//   3. Writes into --out: the packaged chart (`helm package`), `kubectl-portico` for linux, darwin
//      and windows on amd64 and arm64 as single executables in tar.gz (zip for windows) archives
//      (scripts/build-plugin-sea.ts) and their krew manifest, a CycloneDX SBOM of the production
//      dependencies (`cyclonedx-npm --omit dev`), and SHA256SUMS of all of them.
//   4. Pushes the chart with `helm push` to --registry, then tags the commit vX.Y.Z.
//   A failure in 2-4 resets the work tree to the commit it started from and removes --out: nothing
//   is left behind but what the registry already took.
//
// flags:
//   --version X.Y.Z        required: the version to release
//   --registry oci://...   required: where `helm push` sends the chart (its path, e.g.
//                          oci://ghcr.io/portico-dev/charts; the chart lands at <registry>/portico)
//   --plain-http           talk HTTP to the registry (a registry on loopback without TLS)
//   --out DIR              where the files go (default: dist/release/vX.Y.Z)
//   --download-url URL     where the plugin archives will be downloadable, for the krew manifest
//                          (default: https://github.com/portico-dev/portico/releases/download/vX.Y.Z)
//   --artifacts LIST       what to build besides the chart: any of plugin,sbom (default: plugin,sbom;
//                          `--artifacts ""` builds the chart alone)
//   HELM                   the helm binary (default: the one scripts/install-tools.sh --test builds)
//
// Exit codes: 0 released, 1 refused or failed (the message says why and what to do), 2 usage.
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, readFile, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { krewManifest, sha256Sums } from '../src/release/artifacts.js';
import { releaseChangelog } from '../src/release/changelog.js';
import { setChartVersion } from '../src/release/chart.js';
import { ReleaseError, isReleaseError } from '../src/release/errors.js';
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
  plainHttp: boolean;
  out: string;
  downloadUrl: string;
  artifacts: Set<Artifact>;
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
        'plain-http': { type: 'boolean', default: false },
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
  const artifacts = new Set<Artifact>();
  for (const a of values.artifacts.split(',').filter((s) => s !== '')) {
    if (!(ARTIFACTS as readonly string[]).includes(a)) {
      throw new UsageError(`--artifacts: unknown "${a}" (known: ${ARTIFACTS.join(', ')})`);
    }
    artifacts.add(a as Artifact);
  }
  return {
    version,
    registry: registry.replace(/\/+$/, ''),
    plainHttp: values['plain-http'],
    out: path.resolve(values.out ?? path.join(REPO, `dist/release/v${version}`)),
    downloadUrl: (
      values['download-url'] ?? `https://github.com/portico-dev/portico/releases/download/v${version}`
    ).replace(/\/+$/, ''),
    artifacts,
  };
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
  const head = (await sh('git', ['rev-parse', 'HEAD'])).trim();
  return { last, chartYaml, changelog, head };
}

/** Step 2: the version set everywhere and committed; returns the release commit. */
async function setVersion(options: Options, p: Plan, helm: string): Promise<string> {
  await sh('npm', ['version', options.version, '--no-git-tag-version', '--ignore-scripts']);
  await writeFile(path.join(CHART_DIR, 'Chart.yaml'), p.chartYaml);
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
  const archives = await buildPluginArchives({ version: options.version, commit }, options.out, log);
  await writeFile(
    path.join(options.out, 'kubectl-portico.krew.yaml'),
    krewManifest(options.version, options.downloadUrl, archives),
  );
}

/** Step 3: the files of the release in --out. */
async function buildArtifacts(options: Options, helm: string, commit: string): Promise<string> {
  await rm(options.out, { recursive: true, force: true });
  await mkdir(options.out, { recursive: true });
  await sh(helm, ['package', CHART_DIR, '--destination', options.out]);
  const chart = path.join(options.out, `portico-${options.version}.tgz`);
  // The plugin and the SBOM at once; both settle before a failure is thrown, so that the
  // roll-back never races a build still writing into --out.
  const settled = (p: Promise<unknown>): Promise<Error | undefined> =>
    p.then(
      () => undefined,
      (err: unknown) => (err instanceof Error ? err : new Error(String(err))),
    );
  const sbom = path.join(options.out, `portico-${options.version}.cdx.json`);
  const failures = await Promise.all([
    settled(options.artifacts.has('plugin') ? buildPlugin(options, commit) : Promise.resolve()),
    settled(
      options.artifacts.has('sbom')
        ? sh('npx', [
            '--no-install',
            'cyclonedx-npm',
            '--omit',
            'dev',
            '--output-format',
            'JSON',
            '--output-file',
            sbom,
          ])
        : Promise.resolve(),
    ),
  ]);
  const failure = failures.find((f) => f !== undefined);
  if (failure !== undefined) throw failure;
  const sums = new Map<string, string>();
  for (const file of (await readdir(options.out)).filter((f) => f !== 'SHA256SUMS')) {
    sums.set(file, await sha256(path.join(options.out, file)));
  }
  await writeFile(path.join(options.out, 'SHA256SUMS'), sha256Sums(sums));
  return chart;
}

/** Step 4: `helm push`; returns the manifest digest the registry answered. */
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

/** Puts the work tree back where it started after a failed release. */
async function rollBack(p: Plan, options: Options): Promise<void> {
  await sh('git', ['reset', '--quiet', '--hard', p.head]).catch(() => '');
  await rm(options.out, { recursive: true, force: true });
  log(`reset the work tree to ${p.head} and removed ${options.out}`);
}

/** The whole release; see the header. @throws ReleaseError */
export async function release(options: Options): Promise<void> {
  const p = await plan(options);
  const helm = await findHelm();
  log(`releasing ${options.version} (last: ${p.last ?? 'none'})`);
  let digest: string;
  let commit: string;
  try {
    commit = await setVersion(options, p, helm);
    const chart = await buildArtifacts(options, helm, commit);
    digest = await push(options, helm, chart);
    await sh('git', ['tag', '--annotate', `v${options.version}`, '-m', `Portico ${options.version}`, commit]);
  } catch (err) {
    await rollBack(p, options);
    throw err;
  }
  const ref = `${options.registry.replace(/^oci:\/\//, '')}/portico:${options.version}`;
  process.stdout.write(
    [
      `released Portico ${options.version} (commit ${commit}, tag v${options.version})`,
      `chart: oci://${ref.replace(/:[^:/]+$/, '')} --version ${options.version} (${digest})`,
      `files: ${options.out} (SHA256SUMS beside them)`,
      `image: scripts/build-image.sh --fresh --tag ghcr.io/portico-dev/portico:${options.version} && podman push ghcr.io/portico-dev/portico:${options.version}`,
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
      `release: ${err.message}\nusage: npm run release -- --version X.Y.Z --registry oci://HOST[:PORT]/PATH [--plain-http] [--out DIR] [--download-url URL] [--artifacts plugin,sbom]\n`,
    );
    process.exitCode = 2;
  } else {
    process.stderr.write(
      `release: ${isReleaseError(err) ? err.message : String((err as Error).stack ?? err)}\n`,
    );
    process.exitCode = 1;
  }
}
