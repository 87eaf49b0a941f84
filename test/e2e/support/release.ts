/**
 * A throwaway place to run `npm run release` (docs/install.md, "Releasing Portico"), for
 * test/e2e/release.test.ts (in `npm test`) and test/release/release-platforms.test.ts (`npm run
 * release:check`): CNCF Distribution's registry on loopback (support/registry.ts) and a copy of this
 * work tree, a git repository of its own, so the release's commit and tag stay there.
 *
 * The copy's CRDs are renamed into a group of their own (copy<plural>.<id>.portico.dev), as in
 * helm.test.ts: the stack's API server already serves Portico's CRDs, and Helm skips a chart's
 * crds/ whose CRDs exist, so only renamed ones show that the released chart creates its CRDs.
 *
 * The copy's first commit is dated at the work tree's last change of scripts/build-image.sh, which
 * the Debian base images are made at, so the releases (`--cached-bases`) find those bases in podman's
 * cache instead of making them again.
 */
import { createHash } from 'node:crypto';
import { mkdir, mkdtemp, readFile, readdir, realpath, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import semver from 'semver';
import { expect } from 'vitest';
import { parse, stringify } from 'yaml';
import {
  pluginArchiveFiles,
  pluginArchiveName,
  pluginExecutableName,
  type PluginPlatform,
} from '../../../src/release/artifacts.js';
import { checkPluginExecutable } from '../../../src/release/executable.js';
import { REPO, helm, kubectl, run, runOk, toolsBin, type Manifest, type RunResult } from './helm.js';
import { imageBuildEnded } from './image-build.js';
import { startRegistry, type LocalRegistry } from './registry.js';

/** The CRDs' plurals, renamed in the copy to `copy<plural>.<group>`. */
export const CRD_PLURALS = ['customdomains', 'hostnameclaims', 'ratelimitpolicies'] as const;

const GIT_IDENTITY = {
  GIT_AUTHOR_NAME: 'Release Test',
  GIT_AUTHOR_EMAIL: 'release-test@example.net',
  GIT_COMMITTER_NAME: 'Release Test',
  GIT_COMMITTER_EMAIL: 'release-test@example.net',
};

/** podman's state as scripts/build-image.sh keeps it (PORTICO_PODMAN_DIR). */
function podmanState(): string {
  return (
    process.env.PORTICO_PODMAN_DIR ??
    path.join(process.env.XDG_CACHE_HOME ?? path.join(homedir(), '.cache'), 'portico/podman')
  );
}

/** What `release` printed for the image: `image: <repository>:<tag>@<digest>`. */
export function releasedImage(stdout: string): { repository: string; tag: string; digest: string } {
  const m = /^image: (\S+):([^:@\s]+)@(sha256:[0-9a-f]{64})$/m.exec(stdout);
  expect(m, stdout).not.toBeNull();
  return { repository: m?.[1] ?? '', tag: m?.[2] ?? '', digest: m?.[3] ?? '' };
}

/** The image ID scripts/build-image.sh printed, as the release logged it (`built <ref> (<id>)`). */
export function builtImageId(stderr: string): string {
  const m = /\[release\] built \S+ \((sha256:[0-9a-f]{64})\)/.exec(stderr);
  expect(m, stderr.slice(-2000)).not.toBeNull();
  return m?.[1] ?? '';
}

/** Lowercase hex SHA-256 of `bytes`. */
export function sha256(bytes: Buffer): string {
  return createHash('sha256').update(bytes).digest('hex');
}

/** `SHA256SUMS` of a release's files: file name to hex SHA-256. */
export async function readSums(out: string): Promise<Map<string, string>> {
  return new Map(
    (await readFile(path.join(out, 'SHA256SUMS'), 'utf8'))
      .trim()
      .split('\n')
      .map((line) => {
        const [hex = '', name = ''] = line.split('  ');
        return [name, hex] as const;
      }),
  );
}

/**
 * Checks one platform's plugin archive in `out`: it holds the executable, LICENSE and NODE-LICENSE,
 * and the executable passes src/release/executable.ts's checks for its platform (header, SEA fuse,
 * and for darwin an ad-hoc signature that matches its bytes). Extracts into a directory under `work`
 * and returns the executable's path there.
 */
export async function checkPluginArchive(
  out: string,
  version: string,
  platform: PluginPlatform,
  work: string,
): Promise<string> {
  const archive = path.join(out, pluginArchiveName(version, platform));
  const dir = await mkdtemp(path.join(work, 'archive-'));
  const listed = platform.os === 'windows' ? ['unzip', '-Z1', archive] : ['tar', '-tzf', archive];
  expect((await runOk(listed[0] ?? '', listed.slice(1))).trim().split('\n').sort()).toEqual(
    pluginArchiveFiles(platform.os).sort(),
  );
  await runOk(
    platform.os === 'windows' ? 'unzip' : 'tar',
    platform.os === 'windows' ? ['-q', archive, '-d', dir] : ['-xzf', archive, '-C', dir],
  );
  const executable = path.join(dir, pluginExecutableName(platform.os));
  const exe = await readFile(executable);
  expect(
    () => {
      checkPluginExecutable(exe, platform);
    },
    pluginArchiveName(version, platform),
  ).not.toThrow();
  return executable;
}

/** A registry and a copy of the work tree to release from; see the header. */
export class ReleaseWorkspace {
  /** The temporary directory holding the registry's storage and the copy. */
  work = '';
  /** The copy of the work tree, a git repository of its own. */
  copy = '';
  /** The tools' directory (helm, kubectl, registry). */
  bin = '';
  registry: LocalRegistry | undefined;
  /** `oci://<registry host>/charts`, the release's --registry. */
  registryUrl = '';
  /** The copy's package version raised by one minor, then by two. */
  v1 = '';
  v2 = '';
  /** How long each `release` took, ms, by its arguments (printed at the end). */
  readonly timings: Record<string, number> = {};

  /** @param crdGroup the group the copy's CRDs are renamed into, e.g. `<unique id>.portico.dev`. */
  constructor(readonly crdGroup: string) {}

  /**
   * Starts the registry, makes the copy (the work tree's tracked and new files, not ignored ones,
   * committed; node_modules hard-linked, as cyclonedx-npm reads it and a symlink makes `npm ls` see
   * every package as extraneous), and waits for the image build scripts/test.sh runs beside the
   * tests, so that builds never share podman's storage at once and the releases find its layers.
   */
  async setUp(): Promise<void> {
    this.bin = await toolsBin();
    this.work = await mkdtemp(path.join(tmpdir(), 'portico-release-'));
    this.registry = await startRegistry(path.join(this.work, 'registry'));
    this.registryUrl = `oci://${this.registry.host}/charts`;
    this.copy = path.join(this.work, 'repo');
    await mkdir(this.copy);
    await runOk('bash', [
      '-c',
      `git -C "${REPO}" ls-files -z --cached --others --exclude-standard | tar --null -C "${REPO}" -T - -cf - | tar -C "${this.copy}" -xf -`,
    ]);
    // (The directory itself: in a git worktree node_modules may be a symlink to the main checkout's.)
    const modules = await realpath(`${REPO}node_modules`);
    const linked = await run('cp', ['-al', modules, path.join(this.copy, 'node_modules')]);
    if (linked.code !== 0) await runOk('cp', ['-a', modules, path.join(this.copy, 'node_modules')]);
    for (const dir of [path.join(this.copy, 'crds'), path.join(this.copy, 'charts/portico/crds')])
      await this.renameCrdsIn(dir);
    const basesAt = (
      await runOk('git', ['log', '-1', '--format=%ct', '--', 'scripts/build-image.sh'])
    ).trim();
    await this.git(['init', '--quiet']);
    await this.git(['add', '--all']);
    await this.git(['commit', '--quiet', '-m', 'the work tree under test'], {
      GIT_AUTHOR_DATE: `@${basesAt}`,
      GIT_COMMITTER_DATE: `@${basesAt}`,
    });
    const { version } = JSON.parse(await readFile(path.join(this.copy, 'package.json'), 'utf8')) as {
      version: string;
    };
    this.v1 = semver.inc(version, 'minor') ?? '';
    this.v2 = semver.inc(this.v1, 'minor') ?? '';
    await imageBuildEnded();
  }

  /**
   * Removes the Helm release `helmRelease` (if any), the renamed CRDs, the releases' images from
   * podman's storage (tagged `<registry host>/portico:<version>`; their layers stay, shared with
   * later builds), the registry and the temporary directory; prints the timings.
   */
  async tearDown(helmRelease: string | undefined, name: string): Promise<void> {
    if (helmRelease !== undefined) {
      await helm(['uninstall', helmRelease, '-n', helmRelease, '--wait=false']).catch(() => undefined);
      await kubectl(['delete', 'namespace', helmRelease, '--wait=false', '--ignore-not-found']);
    }
    for (const plural of CRD_PLURALS) {
      await kubectl([
        'delete',
        'crd',
        `copy${plural}.${this.crdGroup}`,
        '--ignore-not-found',
        '--wait=false',
      ]);
    }
    if (this.registry) {
      const host = this.registry.host;
      await this.podman(['rmi', '--ignore', ...[this.v1, this.v2].map((v) => `${host}/portico:${v}`)]);
    }
    await this.registry?.stop();
    if (this.work) await rm(this.work, { recursive: true, force: true });
    process.stderr.write(`${name} timings (ms): ${JSON.stringify(this.timings)}\n`);
  }

  /** `git` in the copy. */
  git(args: readonly string[], env: NodeJS.ProcessEnv = {}): Promise<string> {
    return runOk('git', args, { cwd: this.copy, env: { ...process.env, ...GIT_IDENTITY, ...env } });
  }

  /** `npm run release -- <args>` in the copy, with the tools' helm (30 minutes at most). */
  async release(args: readonly string[]): Promise<RunResult> {
    const started = Date.now();
    const result = await run('npm', ['run', '--silent', 'release', '--', ...args], {
      cwd: this.copy,
      env: {
        ...process.env,
        ...GIT_IDENTITY,
        HELM: `${this.bin}/helm`,
        PATH: [path.dirname(process.execPath), process.env.PATH ?? ''].join(':'),
      },
      timeoutMs: 1_800_000,
    });
    this.timings[`release ${args.join(' ')}`] = Date.now() - started;
    return result;
  }

  /** Everything a refused release must leave as it was: HEAD, status, tags, package.json, dist/. */
  async repoState(): Promise<string> {
    const [head, status, tags, pkg] = await Promise.all([
      this.git(['rev-parse', 'HEAD']),
      this.git(['status', '--porcelain']),
      this.git(['tag', '--list']),
      readFile(path.join(this.copy, 'package.json'), 'utf8'),
    ]);
    const out = await readdir(path.join(this.copy, 'dist')).catch(() => []);
    return JSON.stringify({ head, status, tags, pkg, out });
  }

  /** The registry's repositories (`GET /v2/_catalog`, Distribution's catalog API). */
  async catalog(): Promise<string[]> {
    const res = await fetch(`${this.registry?.url ?? ''}/v2/_catalog`);
    expect(res.status).toBe(200);
    return ((await res.json()) as { repositories: string[] }).repositories;
  }

  /** The digest the registry answers for `<name>:<tag>` (HEAD of its manifest, OCI or Docker). */
  async manifestDigest(name: string, tag: string): Promise<string | null> {
    const res = await fetch(`${this.registry?.url ?? ''}/v2/${name}/manifests/${tag}`, {
      method: 'HEAD',
      headers: {
        accept:
          'application/vnd.oci.image.manifest.v1+json, application/vnd.docker.distribution.manifest.v2+json',
      },
    });
    return res.status === 200 ? res.headers.get('docker-content-digest') : null;
  }

  /** The files of release `version`: `dist/release/v<version>` in the copy. */
  out(version: string): string {
    return path.join(this.copy, `dist/release/v${version}`);
  }

  /** podman on scripts/build-image.sh's storage and configuration. */
  podman(args: readonly string[]): Promise<RunResult> {
    const state = podmanState();
    return run(
      'podman',
      ['--root', path.join(state, 'storage'), '--runroot', path.join(state, 'run'), ...args],
      {
        env: {
          ...process.env,
          CONTAINERS_CONF: path.join(state, 'containers.conf'),
          CONTAINERS_STORAGE_CONF: path.join(state, 'storage.conf'),
        },
        timeoutMs: 300_000,
      },
    );
  }

  /** podman with its storage in `dir` (empty at first) and scripts/build-image.sh's configuration. */
  podmanIn(dir: string, args: readonly string[]): Promise<string> {
    return runOk(
      'podman',
      ['--root', path.join(dir, 'storage'), '--runroot', path.join(dir, 'run'), ...args],
      {
        env: {
          ...process.env,
          CONTAINERS_CONF: path.join(podmanState(), 'containers.conf'),
          CONTAINERS_STORAGE_CONF: path.join(dir, 'storage.conf'),
        },
        timeoutMs: 300_000,
      },
    );
  }

  private async renameCrdsIn(dir: string): Promise<void> {
    for (const file of (await readdir(dir)).filter((f) => f.endsWith('.yaml'))) {
      const crd = parse(await readFile(path.join(dir, file), 'utf8')) as Manifest & {
        spec: {
          group: string;
          names: { kind: string; listKind?: string; plural: string; singular?: string };
        };
      };
      const { names } = crd.spec;
      crd.spec.group = this.crdGroup;
      crd.spec.names = {
        kind: `Copy${names.kind}`,
        listKind: `Copy${names.listKind ?? `${names.kind}List`}`,
        plural: `copy${names.plural}`,
        singular: `copy${names.singular ?? names.kind.toLowerCase()}`,
      };
      crd.metadata.name = `${crd.spec.names.plural}.${this.crdGroup}`;
      await writeFile(path.join(dir, file), stringify(crd));
    }
  }
}
