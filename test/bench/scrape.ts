/**
 * Benchmark: what one read of the operator's /metrics costs with N CustomDomains in the cache (the
 * per-domain families of src/observability/domain-metrics.ts and the rest of the controller's
 * registry). N copies of a Live domain (the fields the metrics read: conditions, certificate times)
 * are built in memory, no cluster. Prints CPU milliseconds per scrape, the heap a scrape allocates
 * (heap used right after it, minus right before, with no collection in between: an upper bound of
 * its garbage), and the size of the answer. Then it serves the registry with the operator's HTTP
 * server (src/observability/http-server.ts) and reads /metrics with curl, a separate process, as
 * Prometheus would: it prints by how much the resident set size rose during one answer (the
 * kernel's peak, VmHWM, reset through /proc/self/clear_refs before each). Linux only. Not part of
 * `npm test`.
 *
 *   NODE_OPTIONS=--expose-gc npx tsx test/bench/scrape.ts [--domains 10000] [--scrapes 10]
 */
import { execFile } from 'node:child_process';
import { readFile, writeFile } from 'node:fs/promises';
import { parseArgs, promisify } from 'node:util';
import type { CustomDomain } from '../../src/api/customdomain.js';
import { createObservabilityServer } from '../../src/observability/http-server.js';
import { createControllerMetrics } from '../../src/observability/metrics.js';
import { closeServer, listenOn } from '../support/loopback-server.js';

const MiB = 1024 * 1024;

/** A field of /proc/self/status in bytes (`VmRSS`, `VmHWM`: the kernel gives kB). */
async function procStatusBytes(field: 'VmRSS' | 'VmHWM'): Promise<number> {
  const match = new RegExp(`^${field}:\\s+(\\d+) kB`, 'm').exec(await readFile('/proc/self/status', 'utf8'));
  if (!match) throw new Error(`no ${field} in /proc/self/status`);
  return Number(match[1]) * 1024;
}

/**
 * The largest rise of the resident set size, bytes, during one of `scrapes` reads of `url` by curl:
 * VmHWM after the answer minus VmRSS before it, the peak reset ("5" to clear_refs) before each.
 */
async function servedScrapeRssRise(url: string, scrapes: number, gc: () => void): Promise<number> {
  let rise = 0;
  for (let i = 0; i < scrapes; i++) {
    gc();
    await writeFile('/proc/self/clear_refs', '5');
    const before = await procStatusBytes('VmRSS');
    await promisify(execFile)('curl', ['-sf', '-o', '/dev/null', url]);
    rise = Math.max(rise, (await procStatusBytes('VmHWM')) - before);
  }
  return rise;
}

/** A Live domain as the cache holds it (the status a real one had in a benchmark run). */
function liveDomain(i: number): CustomDomain {
  const at = new Date(Date.UTC(2026, 10, 25, 20, 0, i % 60)).toISOString();
  const condition = (type: string, reason: string) => ({
    type,
    status: 'True' as const,
    reason,
    message: `${type} of d${String(i)}.r${String(i)}.example: a sentence as long as the real ones, about one hundred characters.`,
    lastTransitionTime: at,
    observedGeneration: 1,
  });
  return {
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'CustomDomain',
    metadata: { name: `d${String(i)}`, namespace: `scale-${String(i % 10)}`, generation: 1 },
    spec: { hostname: `d${String(i)}.r${String(i)}.example` },
    status: {
      phase: 'Live',
      observedGeneration: 1,
      verifiedAt: at,
      conditions: [
        condition('Accepted', 'Accepted'),
        condition('DNSVerified', 'RecordMatches'),
        condition('CertificateReady', 'Issued'),
        condition('Routed', 'RoutesReady'),
        condition('Ready', 'Live'),
      ],
      certificate: {
        secretName: `d${String(i)}-tls`,
        serialNumber: (0x51a1d0123899f54bn + BigInt(i)).toString(16).toUpperCase(),
        issuer: 'CN=Pebble Intermediate CA 15536d',
        notBefore: '2026-11-25T20:23:54.000Z',
        notAfter: '2027-02-23T20:23:53.000Z',
        renewalTime: '2027-01-25T04:51:18.387Z',
        dnsNames: [`d${String(i)}.r${String(i)}.example`],
      },
    },
  };
}

async function main(): Promise<void> {
  const { values } = parseArgs({
    options: { domains: { type: 'string', default: '10000' }, scrapes: { type: 'string', default: '10' } },
  });
  const gc = (globalThis as { gc?: () => void }).gc;
  if (!gc) throw new Error('run with NODE_OPTIONS=--expose-gc');
  const n = Number(values.domains);
  const scrapes = Number(values.scrapes);
  const domains = Array.from({ length: n }, (_, i) => liveDomain(i));
  const metrics = createControllerMetrics();
  metrics.readCustomDomainsFrom(() => domains);
  for (let i = 0; i < 3; i++) await metrics.registry.metrics();
  // The CPU and heap of the text /metrics sends (metricsChunks), not yet written to a socket.
  let cpuUs = 0;
  let maxAllocated = 0;
  let bytes = 0;
  for (let i = 0; i < scrapes; i++) {
    gc();
    const heapBefore = process.memoryUsage().heapUsed;
    const cpu = process.cpuUsage();
    let chars = 0;
    for await (const chunk of metrics.registry.metricsChunks()) chars += chunk.length;
    const used = process.cpuUsage(cpu);
    maxAllocated = Math.max(maxAllocated, process.memoryUsage().heapUsed - heapBefore);
    cpuUs += used.user + used.system;
    bytes = chars;
  }
  process.stdout.write(
    `${String(n)} domains, ${String(scrapes)} scrapes: ${(cpuUs / 1000 / scrapes).toFixed(0)} ms of CPU per scrape, ` +
      `up to ${(maxAllocated / MiB).toFixed(1)} MiB of heap allocated by one, ${(bytes / 1e6).toFixed(1)} MB of text\n`,
  );
  const server = createObservabilityServer(metrics.registry, () => true);
  const port = await listenOn(server);
  try {
    const rise = await servedScrapeRssRise(`http://127.0.0.1:${String(port)}/metrics`, scrapes, gc);
    process.stdout.write(
      `served to curl, ${String(scrapes)} scrapes: the resident set rose by up to ${(rise / MiB).toFixed(1)} MiB during one answer\n`,
    );
  } finally {
    await closeServer(server);
  }
}

await main();
