#!/usr/bin/env node
/**
 * The `portico` command: one binary, one subcommand per component (docs/architecture.md).
 *
 *   portico controller [flags]            the operator
 *   portico ratelimit-server [flags]      the rate-limit service the gateway calls
 *   portico sandbox up|down|status        the local stack of real parts
 *
 * Each subcommand module is loaded on demand, so the controller never loads the sandbox code.
 * Exit codes: 0 success, 1 failure, 2 usage error.
 *
 * Shutdown is bounded: once a command has returned, the process exits when nothing is left to do,
 * or `EXIT_GRACE_MS` later at the latest, naming what still held it open and exiting with code 1
 * (a clean stop leaves nothing behind; what does is a defect to fix, not a reason to hang).
 */
import { existsSync } from 'node:fs';
import { buildInfo, formatVersion } from './build-info.js';

const usage = `usage: portico <command> [flags]

commands:
  controller        run the operator (portico controller --help)
  ratelimit-server  run the rate-limit service (portico ratelimit-server --help)
  sandbox up        start the local stack: API server, etcd, Pebble, DNS server, operator
  sandbox status    exit 0 when the local stack is up
  sandbox down      stop everything the sandbox started
  --version         the version and the commit it was built from
`;

/** Milliseconds a command may leave work behind after it returned before the process exits anyway. */
const EXIT_GRACE_MS = 5_000;

function exitWhenDrained(code: number): void {
  process.exitCode = code;
  setTimeout(() => {
    // Counts by kind, e.g. "TCPSocketWrap ×2, Timeout ×3".
    const counts = new Map<string, number>();
    for (const kind of process.getActiveResourcesInfo()) counts.set(kind, (counts.get(kind) ?? 0) + 1);
    const open = [...counts].map(([kind, n]) => `${kind} ×${n}`).join(', ');
    process.stderr.write(
      `portico: still running ${EXIT_GRACE_MS / 1000} s after stopping (open: ${open}); exiting\n`,
    );
    process.exit(1);
  }, EXIT_GRACE_MS).unref();
}

/**
 * The modules of a long-running command: its one-file bundle from `npm run build`
 * (scripts/bundle.ts: the operator's heap about 19 MiB smaller, docs/performance.md) when it is
 * beside this file, else, when run from the sources, the modules themselves.
 */
async function loadBundled<T>(bundleName: string, unbundled: () => Promise<T>): Promise<T> {
  const bundle = new URL(`./${bundleName}`, import.meta.url);
  if (existsSync(bundle)) return (await import(bundle.href)) as T;
  return unbundled();
}

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'controller': {
      const { runController } = await loadBundled(
        'controller.bundle.js',
        () => import('./controller/main.js'),
      );
      return runController(rest);
    }
    case 'ratelimit-server': {
      const { runRateLimitServer } = await loadBundled(
        'ratelimit-server.bundle.js',
        () => import('./ratelimit/server/main.js'),
      );
      return runRateLimitServer(rest);
    }
    case 'sandbox': {
      const { runSandbox } = await import('./sandbox/cli.js');
      return runSandbox(rest);
    }
    case '--version':
    case 'version':
      process.stdout.write(formatVersion('portico', buildInfo(), process.version));
      return 0;
    case undefined:
    case '-h':
    case '--help':
    case 'help':
      process.stdout.write(usage);
      return command === undefined ? 2 : 0;
    default:
      process.stderr.write(`portico: unknown command "${command}"\n\n${usage}`);
      return 2;
  }
}

main(process.argv.slice(2)).then(
  (code) => {
    exitWhenDrained(code);
  },
  (err: unknown) => {
    process.stderr.write(`portico: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    exitWhenDrained(1);
  },
);
