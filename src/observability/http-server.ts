/**
 * The operator's HTTP endpoints: `/metrics` (Prometheus text format), `/healthz` (the process is
 * alive) and `/readyz` (the watches have synced and the operator can serve).
 */
import { createServer, type Server } from 'node:http';
import type { Registry } from 'prom-client';

export function createObservabilityServer(registry: Registry, isReady: () => boolean): Server {
  return createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0];
    if (path === '/metrics') {
      registry.metrics().then(
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
