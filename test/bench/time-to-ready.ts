/**
 * Benchmark: time from `kubectl apply` of a CustomDomain (its CNAME already right) to its Ready
 * condition, on the sandbox stack. Prints each run and the median, min and max in milliseconds.
 *
 *   npm run bench:ready                 # 10 runs against .sandbox (started if it is not up)
 *   npm run bench:ready -- --runs 20
 *
 * Ready is observed by polling the API server every 20 ms, so figures carry up to 20 ms of slack.
 */
import { execFile } from 'node:child_process';
import { resolve } from 'node:path';
import { parseArgs, promisify } from 'node:util';
import { CoreV1Api, CustomObjectsApi, KubeConfig } from '@kubernetes/client-node';
import type { CustomDomain } from '../../src/api/customdomain.js';
import { DnsManagementClient } from '../../src/sandbox/dns-server.js';
import { readSandboxEnv, sandboxStatus, sandboxUp } from '../../src/sandbox/stack.js';

const run = promisify(execFile);

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { runs: { type: 'string', default: '10' }, dir: { type: 'string', default: '.sandbox' } },
  });
  const runs = Number(values.runs);
  const dir = resolve(values.dir);
  const status = await sandboxStatus(dir).catch(() => undefined);
  const env = status?.up ? await readSandboxEnv(dir) : await sandboxUp({ dir, applyExamples: false });
  const kc = new KubeConfig();
  kc.loadFromFile(env.kubeconfig);
  const core = kc.makeApiClient(CoreV1Api);
  const custom = kc.makeApiClient(CustomObjectsApi);
  const dns = new DnsManagementClient(env.dnsMgmtUrl);
  const kubectl = resolve(
    process.env.PORTICO_TOOLS_DIR ?? `${process.env.HOME ?? ''}/.cache/portico/tools`,
    'bin/kubectl',
  );
  const ns = `bench-${Date.now().toString(36)}`;
  await core.createNamespace({ body: { metadata: { name: ns } } });
  await core.createNamespacedService({
    namespace: ns,
    body: { metadata: { name: 'web' }, spec: { ports: [{ port: 80 }] } },
  });

  const times: number[] = [];
  for (let i = 0; i < runs; i++) {
    const name = `d${i}`;
    const hostname = `${name}.${ns}.example`;
    await dns.setCname(hostname, env.platformCnameTarget);
    const manifest = JSON.stringify({
      apiVersion: 'portico.dev/v1alpha1',
      kind: 'CustomDomain',
      metadata: { name, namespace: ns },
      spec: { hostname, service: { name: 'web', port: 80 } },
    });
    const started = performance.now();
    const apply = run(kubectl, ['--kubeconfig', env.kubeconfig, 'apply', '-f', '-']);
    apply.child.stdin?.end(manifest);
    await apply;
    for (;;) {
      const cd = (await custom.getNamespacedCustomObject({
        group: 'portico.dev',
        version: 'v1alpha1',
        namespace: ns,
        plural: 'customdomains',
        name,
      })) as CustomDomain;
      if (cd.status?.conditions?.some((c) => c.type === 'Ready' && c.status === 'True')) break;
      await new Promise((r) => setTimeout(r, 20));
    }
    const ms = performance.now() - started;
    times.push(ms);
    process.stdout.write(`run ${String(i + 1).padStart(2)}: ${ms.toFixed(0)} ms\n`);
  }
  const sorted = [...times].sort((a, b) => a - b);
  const median =
    sorted.length % 2
      ? (sorted[(sorted.length - 1) / 2] ?? 0)
      : ((sorted[sorted.length / 2 - 1] ?? 0) + (sorted[sorted.length / 2] ?? 0)) / 2;
  process.stdout.write(
    `kubectl apply -> Ready over ${runs} runs: median ${median.toFixed(0)} ms, min ${(sorted[0] ?? 0).toFixed(0)} ms, max ${(sorted.at(-1) ?? 0).toFixed(0)} ms\n`,
  );
  await core.deleteNamespace({ name: ns }).catch(() => undefined);
}

await main();
