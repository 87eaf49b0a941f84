#!/usr/bin/env node
/**
 * The `portico` command: one binary, one subcommand per component (DESIGN.md, "Components").
 *
 *   portico controller [flags]            the operator
 *   portico ratelimit-server [flags]      the rate-limit service the gateway calls
 *   portico sandbox up|down|status        the local stack of real parts
 *
 * Each subcommand module is loaded on demand, so the controller never loads the sandbox code.
 * Exit codes: 0 success, 1 failure, 2 usage error.
 */
const usage = `usage: portico <command> [flags]

commands:
  controller        run the operator (portico controller --help)
  ratelimit-server  run the rate-limit service (portico ratelimit-server --help)
  sandbox up        start the local stack: API server, etcd, Pebble, DNS server, operator
  sandbox status    exit 0 when the local stack is up
  sandbox down      stop everything the sandbox started
`;

async function main(argv: string[]): Promise<number> {
  const [command, ...rest] = argv;
  switch (command) {
    case 'controller': {
      const { runController } = await import('./controller/main.js');
      return runController(rest);
    }
    case 'ratelimit-server': {
      const { runRateLimitServer } = await import('./ratelimit/server/main.js');
      return runRateLimitServer(rest);
    }
    case 'sandbox': {
      const { runSandbox } = await import('./sandbox/cli.js');
      return runSandbox(rest);
    }
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
    process.exitCode = code;
  },
  (err: unknown) => {
    process.stderr.write(`portico: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = 1;
  },
);
