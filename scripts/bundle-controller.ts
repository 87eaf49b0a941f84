#!/usr/bin/env -S npx tsx
// Bundles the operator (dist/controller/main.js, built by tsc) into one file,
// dist/controller.bundle.js, which `portico controller` loads (src/cli.ts).
//
// Why: V8 keeps the source text of every module a process loads. @kubernetes/client-node's entry
// loads its whole generated API (ObservableAPI.js alone is 7 MiB), of which the operator calls a
// handful of classes; the bundle keeps what is reachable and drops whitespace and comments. The heap
// after loading the operator's modules: 41.7 MiB unbundled, 22.6 MiB bundled (docs/performance.md).
// Identifiers are kept, so stack traces name the functions they pass through.
//
// The bundle is kept ASCII: Node decodes a UTF-8 source with any non-ASCII character into a
// two-byte string, so one "ä" in a dependency's licence comment made the 4.7 MB bundle's source
// take 9.0 MiB instead of 4.5 (a heap snapshot of the operator at 10,000 domains); the process after
// loading the bundle: RSS 121.4 -> 111.8 MiB, external memory 13.2 -> 8.7 MiB (docs/performance.md).
// esbuild escapes non-ASCII characters in code; licence comments go to
// dist/controller.bundle.js.LEGAL.txt instead of the end of the bundle, and the build fails if a
// non-ASCII byte is left.
//
// acme-client stays outside (loaded from node_modules): src/acme/request-timeout.ts reaches its
// copy of axios through node_modules, which must be the very copy acme-client uses.
//
//   npx tsx scripts/bundle-controller.ts      (part of `npm run build`)
import { readFile } from 'node:fs/promises';
import { build } from 'esbuild';

await build({
  entryPoints: ['dist/controller/main.js'],
  outfile: 'dist/controller.bundle.js',
  bundle: true,
  platform: 'node',
  format: 'esm',
  target: 'node24',
  minifyWhitespace: true,
  minifySyntax: true,
  external: ['acme-client'],
  charset: 'ascii',
  legalComments: 'external',
  // CommonJS dependencies call require() for Node's built-in modules; an ES module has none.
  banner: {
    js: "import { createRequire as __porticoCreateRequire } from 'node:module'; const require = __porticoCreateRequire(import.meta.url);",
  },
  logLevel: 'warning',
});

const bundle = await readFile('dist/controller.bundle.js');
const nonAscii = bundle.findIndex((byte) => byte > 0x7f);
if (nonAscii >= 0) {
  const around = bundle.subarray(Math.max(0, nonAscii - 60), nonAscii + 20).toString('utf8');
  throw new Error(
    `dist/controller.bundle.js has a non-ASCII byte at offset ${String(nonAscii)}: …${around}…`,
  );
}
