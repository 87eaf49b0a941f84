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
// acme-client stays outside (loaded from node_modules): src/acme/request-timeout.ts reaches its
// copy of axios through node_modules, which must be the very copy acme-client uses.
//
//   npx tsx scripts/bundle-controller.ts      (part of `npm run build`)
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
  // CommonJS dependencies call require() for Node's built-in modules; an ES module has none.
  banner: {
    js: "import { createRequire as __porticoCreateRequire } from 'node:module'; const require = __porticoCreateRequire(import.meta.url);",
  },
  logLevel: 'warning',
});
