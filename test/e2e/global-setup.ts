/**
 * One real stack per test run (README.md, "Tests"): kube-apiserver + etcd, Pebble,
 * pebble-challtestsrv, Redis, Contour (the data plane's controller) and the operator from dist/, in
 * `.sandbox-e2e/` with free ports, so a developer's own `.sandbox/` is untouched. Torn down after
 * the run unless PORTICO_E2E_KEEP=1.
 */
import { resolve } from 'node:path';
import type { TestProject } from 'vitest/node';
import { sandboxDown, sandboxUp, type SandboxEnv } from '../../src/sandbox/stack.js';

declare module 'vitest' {
  export interface ProvidedContext {
    sandbox: SandboxEnv;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const dir = resolve(process.env.PORTICO_E2E_SANDBOX_DIR ?? '.sandbox-e2e');
  await sandboxDown(dir).catch(() => []);
  const env = await startSharedStack(dir);
  project.provide('sandbox', env);
  return async () => {
    if (process.env.PORTICO_E2E_KEEP !== '1') await sandboxDown(dir);
  };
}

/**
 * The shared stack. chartDefaults false: it keeps a Contour serving every classless route, no
 * admission policies and the operator as the admin, which the files testing foreign-route detection
 * rely on. The files about the chart's defaults (tenant-isolation-routes, contour-routing-class)
 * start a Contour of Portico's class and apply the chart's policies themselves. A port taken between
 * the sandbox picking it and its process binding it is retried by sandboxUp itself.
 */
function startSharedStack(dir: string): Promise<SandboxEnv> {
  return sandboxUp({
    dir,
    applyExamples: false,
    dataPlane: 'contour',
    testTools: true,
    chartDefaults: false,
  });
}
