#!/usr/bin/env -S npx tsx
// Bundles each long-running program of Portico (built by tsc into dist/) into one file, which
// src/cli.ts (and, for the check thread, src/ratelimit/server/check-thread.ts) loads when it exists:
//
//   dist/controller/main.js               -> dist/controller.bundle.js              (portico controller)
//   dist/ratelimit/server/main.js         -> dist/ratelimit-server.bundle.js        (portico ratelimit-server)
//   dist/ratelimit/server/check-worker.js -> dist/ratelimit-check-worker.bundle.js  (its check thread)
//
// Why: V8 keeps the source text of every module a process loads, in every thread that loads it.
// @kubernetes/client-node's entry loads its whole generated API (ObservableAPI.js alone is 7 MiB),
// of which Portico calls a handful of classes; a bundle keeps what is reachable and drops whitespace
// and comments. The operator's heap after loading its modules: 41.7 MiB unbundled, 22.6 MiB bundled;
// the rate-limit server's main thread: see docs/performance.md. Identifiers are kept, so stack
// traces name the functions they pass through.
//
// Each bundle is kept ASCII: Node decodes a UTF-8 source with any non-ASCII character into a
// two-byte string, so one "ä" in a dependency's licence comment made the 4.7 MB controller bundle's
// source take 9.0 MiB instead of 4.5 (a heap snapshot of the operator at 10,000 domains); the process
// after loading the bundle: RSS 121.4 -> 111.8 MiB, external memory 13.2 -> 8.7 MiB
// (docs/performance.md). esbuild escapes non-ASCII characters in code; licence comments go to
// <bundle>.LEGAL.txt instead of the end of the bundle, and the build fails if a non-ASCII byte is
// left.
//
// acme-client stays outside the controller's bundle (loaded from node_modules):
// src/acme/request-timeout.ts reaches its copy of axios through node_modules, which must be the very
// copy acme-client uses, so node_modules stays beside dist/. The .proto files of the rate-limit
// protocol are read at run time from the repository's proto/ (src/ratelimit/protocol.ts), which the
// image ships beside dist/.
//
// It also writes dist/build-info.json, the version and commit that `portico --version` and the
// operator's `portico_build_info` metric report (src/build-info.ts): the version from package.json,
// the commit from $PORTICO_COMMIT (the Dockerfile's build argument, where there is no .git), else
// `git rev-parse HEAD` with `-dirty` when tracked files have uncommitted changes, else `unknown`.
//
//   npx tsx scripts/bundle.ts      (part of `npm run build`)
import { execFileSync } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { build } from 'esbuild';
import type { BuildInfo } from '../src/build-info.js';

interface Bundle {
  entryPoint: string;
  outfile: string;
  external?: string[];
}

const BUNDLES: readonly Bundle[] = [
  { entryPoint: 'dist/controller/main.js', outfile: 'dist/controller.bundle.js', external: ['acme-client'] },
  // grpc-health-check reads its health.proto from its own directory (`__dirname`), which a bundle has
  // not; the server's main thread serves the checks itself on Bun (check-thread.ts), so both need it.
  {
    entryPoint: 'dist/ratelimit/server/main.js',
    outfile: 'dist/ratelimit-server.bundle.js',
    external: ['grpc-health-check'],
  },
  {
    entryPoint: 'dist/ratelimit/server/check-worker.js',
    outfile: 'dist/ratelimit-check-worker.bundle.js',
    external: ['grpc-health-check'],
  },
];

async function bundle({ entryPoint, outfile, external = [] }: Bundle): Promise<void> {
  await build({
    entryPoints: [entryPoint],
    outfile,
    bundle: true,
    platform: 'node',
    format: 'esm',
    target: 'node24',
    minifyWhitespace: true,
    minifySyntax: true,
    external,
    charset: 'ascii',
    legalComments: 'external',
    // CommonJS dependencies call require() for Node's built-in modules; an ES module has none.
    banner: {
      js: "import { createRequire as __porticoCreateRequire } from 'node:module'; const require = __porticoCreateRequire(import.meta.url);",
    },
    logLevel: 'warning',
  });
  const bytes = await readFile(outfile);
  const nonAscii = bytes.findIndex((byte) => byte > 0x7f);
  if (nonAscii >= 0) {
    const around = bytes.subarray(Math.max(0, nonAscii - 60), nonAscii + 20).toString('utf8');
    throw new Error(`${outfile} has a non-ASCII byte at offset ${String(nonAscii)}: …${around}…`);
  }
}

/** The commit this build is made from (see the header); never throws. */
function currentCommit(): string {
  const given = process.env.PORTICO_COMMIT;
  if (given) return given;
  try {
    const git = (...args: string[]): string =>
      execFileSync('git', args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'ignore'] }).trim();
    const sha = git('rev-parse', 'HEAD');
    return git('status', '--porcelain', '--untracked-files=no') === '' ? sha : `${sha}-dirty`;
  } catch {
    return 'unknown';
  }
}

async function writeBuildInfo(): Promise<void> {
  const pkg = JSON.parse(await readFile('package.json', 'utf8')) as { version: string };
  const info: BuildInfo = { version: pkg.version, commit: currentCommit() };
  await writeFile('dist/build-info.json', `${JSON.stringify(info)}\n`);
}

await Promise.all([...BUNDLES.map(bundle), writeBuildInfo()]);
