/**
 * The rate-limit benchmark's floor (`npm run bench:ratelimit -- --floor`): a gRPC server with
 * Portico's service definition and server options (src/ratelimit/grpc.ts, @grpc/grpc-js) that
 * answers every ShouldRateLimit call `OK` with the three X-RateLimit headers at once, on its main
 * thread: no Redis, no decision, no metrics, no check thread. Its latency is what any rate-limit
 * server on this Node and gRPC library costs at least (docs/benchmarks.md, "2026-11-27 (later)").
 * Not Portico's server.
 *
 *   node --import tsx test/bench/grpc-floor-server.ts ratelimit-server \
 *     --grpc-listen-address 127.0.0.1:8081 --metrics-listen-address 127.0.0.1:9091 [other flags]
 *
 * Takes the flags the bench gives `portico ratelimit-server`; uses the two addresses (`host:port`)
 * and ignores the others. `GET /readyz` on the metrics address answers 200 once the gRPC port is
 * bound. Exits 0 on SIGTERM.
 */
import { createServer } from 'node:http';
import { parseArgs } from 'node:util';
import pino from 'pino';
import { bindServer, createRateLimitGrpcServer } from '../../src/ratelimit/grpc.js';
import type { RateLimitResponse } from '../../src/ratelimit/protocol.js';

const { values } = parseArgs({
  strict: false,
  allowPositionals: true,
  options: {
    'grpc-listen-address': { type: 'string' },
    'metrics-listen-address': { type: 'string' },
  },
});
const grpcAddress = values['grpc-listen-address'];
const metricsAddress = values['metrics-listen-address'];
if (typeof grpcAddress !== 'string' || typeof metricsAddress !== 'string') {
  throw new Error('--grpc-listen-address and --metrics-listen-address (host:port) are required');
}

/** A fresh answer per call, as a server that computed it would build one. */
function admitted(): RateLimitResponse {
  return {
    overall_code: 'OK',
    statuses: [{ code: 'OK' }],
    response_headers_to_add: [
      { key: 'X-RateLimit-Limit', value: '1000' },
      { key: 'X-RateLimit-Remaining', value: '999' },
      { key: 'X-RateLimit-Reset', value: '42' },
    ],
  };
}

const { server } = createRateLimitGrpcServer(() => Promise.resolve(admitted()), pino({ level: 'silent' }));
await bindServer(server, grpcAddress);
const colon = metricsAddress.lastIndexOf(':');
createServer((_request, response) => {
  response.end('ok');
}).listen(Number(metricsAddress.slice(colon + 1)), metricsAddress.slice(0, colon));
process.on('SIGTERM', () => process.exit(0));
