/**
 * The operator's HTTP endpoints: `/metrics` (Prometheus text format), `/healthz` (the process is
 * alive) and `/readyz` (the watches have synced and the operator can serve).
 *
 * `/metrics?name[]=portico_reconcile_total&name[]=...` answers only the named metric families
 * registered in this process (the convention of Prometheus's own exporters' `name[]` filter; a name
 * not registered is left out, so the answer may be empty): a poll that needs one counter does not
 * make the operator render every domain's series (at 10,000 domains about 8 MB and 0.15–0.2 s of
 * CPU per full answer, docs/monitoring.md).
 */
import { createServer, type Server, type ServerResponse } from 'node:http';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { Registry } from 'prom-client';
import { TextFamiliesRegistry } from './text-families.js';

/** The text of the named families of `registry` (unknown names left out), in the order named. */
async function selectedMetrics(registry: Registry, names: readonly string[]): Promise<string> {
  const known = [...new Set(names)].filter(
    (name) =>
      registry.getSingleMetric(name) !== undefined ||
      (registry instanceof TextFamiliesRegistry && registry.hasTextFamily(name)),
  );
  const parts = await Promise.all(known.map((name) => registry.getSingleMetricAsString(name)));
  return parts.map((part) => `${part}\n`).join('');
}

/**
 * Answers every family of `registry` with 200. A TextFamiliesRegistry's text goes out chunk by
 * chunk as the socket takes it (`metricsChunks()`, stream.pipeline's backpressure), so an answer of
 * megabytes is never held whole. A failure before the first chunk (a failing collect callback)
 * answers 500 with the error; one after it closes the connection, so the client sees a cut answer
 * (Prometheus counts the scrape as failed) rather than a wrong one. Never rejects.
 */
async function sendAllMetrics(registry: Registry, res: ServerResponse): Promise<void> {
  const chunks =
    registry instanceof TextFamiliesRegistry
      ? registry.metricsChunks()
      : (async function* whole() {
          yield await registry.metrics();
        })();
  let first: IteratorResult<string>;
  try {
    first = await chunks.next();
  } catch (err) {
    res.writeHead(500).end(String(err));
    return;
  }
  res.writeHead(200, { 'content-type': registry.contentType });
  const text = async function* text() {
    if (!first.done) yield first.value;
    yield* chunks;
  };
  // At most one chunk waits in the stream besides what the socket holds.
  await pipeline(Readable.from(text(), { highWaterMark: 1 }), res).catch(() => undefined);
}

export function createObservabilityServer(registry: Registry, isReady: () => boolean): Server {
  return createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://localhost');
    const path = url.pathname;
    if (path === '/metrics') {
      const names = url.searchParams.getAll('name[]');
      if (names.length === 0) {
        void sendAllMetrics(registry, res);
        return;
      }
      selectedMetrics(registry, names).then(
        (body) => res.writeHead(200, { 'content-type': registry.contentType }).end(body),
        (err: unknown) => res.writeHead(500).end(String(err)),
      );
      return;
    }
    if (path === '/healthz') {
      res.writeHead(200, { 'content-type': 'text/plain' }).end('ok\n');
      return;
    }
    if (path === '/readyz') {
      const ready = isReady();
      res.writeHead(ready ? 200 : 503, { 'content-type': 'text/plain' }).end(ready ? 'ok\n' : 'not ready\n');
      return;
    }
    res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
  });
}
