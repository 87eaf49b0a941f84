/**
 * One real stack per test run (README.md, "Tests"): kube-apiserver + etcd, Pebble,
 * pebble-challtestsrv, Redis, Contour (the data plane's controller) and the operator from dist/, in
 * `.sandbox-e2e/` with free ports, so a developer's own `.sandbox/` is untouched. Torn down after
 * the run unless PORTICO_E2E_KEEP=1.
 */
import { readFile } from 'node:fs/promises';
import { resolve } from 'node:path';
import type { TestProject } from 'vitest/node';
import { ComponentStartError } from '../../src/sandbox/errors.js';
import { sandboxDown, sandboxUp, type SandboxEnv } from '../../src/sandbox/stack.js';

declare module 'vitest' {
  export interface ProvidedContext {
    sandbox: SandboxEnv;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = resolve(process.env.PORTICO_E2E_SANDBOX_DIR ?? '.sandbox-e2e');
  await sandboxDown(dir).catch(() => []);
  const env = await startWithFreshPorts(dir);
  project.provide('sandbox', env);
  return async () => {
    if (process.env.PORTICO_E2E_KEEP !== '1') await sandboxDown(dir);
  };
}

/** How many times the stack is started when a port it picked was taken before its process bound it. */
const START_ATTEMPTS = 3;

/**
 * The stack started, again with newly picked ports (up to START_ATTEMPTS times) when a component
 * exited because its port was taken: the sandbox picks free ports and releases them for the
 * processes to bind, and with several stacks starting at once (the e2e shards, scripts/test.sh) or
 * any process's outgoing connections, another socket can take one meanwhile (seen once: the
 * rate-limit service's gRPC port, EADDRINUSE). Any other failure is thrown at once.
 */
async function startWithFreshPorts(dir: string): Promise<SandboxEnv> {
  for (let attempt = 1; ; attempt++) {
    try {
      // chartDefaults false: the shared stack keeps a Contour serving every classless route, no
      // admission policies and the operator as the admin, which the files testing foreign-route
      // detection rely on. The files about the chart's defaults (tenant-isolation-routes,
      // contour-routing-class) start a Contour of Portico's class and apply the chart's policies themselves.
      return await sandboxUp({
        dir,
        applyExamples: false,
        dataPlane: 'contour',
        testTools: true,
        chartDefaults: false,
      });
    } catch (err) {
      if (attempt >= START_ATTEMPTS || !(await portWasTaken(err))) throw err;
      process.stderr.write(`e2e stack: ${(err as Error).message}; a picked port was taken, starting again\n`);
      await sandboxDown(dir).catch(() => []);
    }
  }
}

/** Whether `err` is a component that exited because its listening address was in use (its log says so). */
async function portWasTaken(err: unknown): Promise<boolean> {
  if (!(err instanceof ComponentStartError) || err.logPath === undefined) return false;
  const log = await readFile(err.logPath, 'utf8').catch(() => '');
  return /address already in use|EADDRINUSE/.test(log);
}
