import { once } from 'node:events';
import { createServer, type Server } from 'node:http';
import * as acme from 'acme-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { ReplayNoncePool, reuseReplayNonces } from './replay-nonces.js';
import { acmeClientAxios } from './request-timeout.js';

const CA = 'https://ca.example:14000';

describe('ReplayNoncePool', () => {
  it('hands out the newest nonce of an origin, each one once', () => {
    const pool = new ReplayNoncePool({ capacity: 4, maxAgeMs: 1_000, now: () => 0 });
    pool.add(CA, 'n1');
    pool.add(CA, 'n2');
    pool.add('https://other.example', 'o1');
    expect(pool.take(CA)).toBe('n2');
    expect(pool.take(CA)).toBe('n1');
    expect(pool.take(CA)).toBeUndefined();
    expect(pool.take('https://other.example')).toBe('o1');
  });
  it('keeps at most `capacity` nonces per origin, dropping the oldest', () => {
    const pool = new ReplayNoncePool({ capacity: 2, maxAgeMs: 1_000, now: () => 0 });
    for (const nonce of ['n1', 'n2', 'n3']) pool.add(CA, nonce);
    expect(pool.size(CA)).toBe(2);
    expect([pool.take(CA), pool.take(CA), pool.take(CA)]).toEqual(['n3', 'n2', undefined]);
  });
  it('hands out no nonce older than its maximum age, and forgets the older ones', () => {
    let nowMs = 0;
    const pool = new ReplayNoncePool({ capacity: 4, maxAgeMs: 1_000, now: () => nowMs });
    pool.add(CA, 'old');
    nowMs = 500;
    pool.add(CA, 'newer');
    nowMs = 1_400;
    expect(pool.take(CA)).toBe('newer');
    expect(pool.take(CA)).toBeUndefined();
    expect(pool.size(CA)).toBe(0);
  });
  it('refuses a capacity that is not a positive integer', () => {
    expect(() => new ReplayNoncePool({ capacity: 0, maxAgeMs: 1 })).toThrow(/positive integer, got 0/);
    expect(() => new ReplayNoncePool({ capacity: 1, maxAgeMs: -1 })).toThrow(/≥ 0 ms, got -1/);
  });
});

/**
 * A stand-in ACME CA over plain HTTP (what is tested is acme-client's axios and the adapter, not
 * TLS): newNonce answers HEAD 200 and GET 204 with a fresh nonce, /ok answers POST 201 with one,
 * /bad-nonce answers POST 400 badNonce with one (RFC 8555 §6.5).
 */
describe('reuseReplayNonces on acme-client’s HTTP client (real axios http adapter)', () => {
  let server: Server;
  let base: string;
  let seen: string[];
  let issued: number;

  beforeEach(async () => {
    seen = [];
    issued = 0;
    server = createServer((req, res) => {
      seen.push(`${req.method} ${req.url}`);
      res.setHeader('Replay-Nonce', `nonce-${++issued}`);
      if (req.url === '/new-nonce') {
        res.statusCode = req.method === 'HEAD' ? 200 : 204;
        res.end();
        return;
      }
      req.resume();
      if (req.url === '/bad-nonce') {
        res.statusCode = 400;
        res.setHeader('Content-Type', 'application/problem+json');
        res.end(JSON.stringify({ type: 'urn:ietf:params:acme:error:badNonce', detail: 'stale' }));
        return;
      }
      res.statusCode = 201;
      res.end('{}');
    });
    server.listen(0, '127.0.0.1');
    await once(server, 'listening');
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('no port');
    base = `http://127.0.0.1:${address.port}`;
  });
  afterEach(() => {
    server.close();
  });

  function client(
    pool: ReplayNoncePool,
  ): (method: string, path: string) => Promise<{ status: number; nonce: unknown }> {
    const { httpAdapter, settle } = acmeClientAxios();
    const adapter = reuseReplayNonces(httpAdapter, settle, pool);
    return async (method, path) => {
      const response = await acme.axios.request({
        url: `${base}${path}`,
        method,
        // The adapter settles as axios's own does; its declared type is looser than AxiosAdapter.
        adapter: adapter as never,
        data: method === 'post' ? '{}' : undefined,
      });
      return { status: response.status, nonce: response.headers['replay-nonce'] };
    };
  }

  it('asks the CA with GET while the pool is empty, then answers with the nonce of the last POST', async () => {
    const pool = new ReplayNoncePool();
    const request = client(pool);
    expect(await request('head', '/new-nonce')).toEqual({ status: 204, nonce: 'nonce-1' });
    expect(await request('post', '/ok')).toEqual({ status: 201, nonce: 'nonce-2' });
    // Answered from the pool: the CA sees nothing.
    expect(await request('head', '/new-nonce')).toEqual({ status: 200, nonce: 'nonce-2' });
    expect(await request('head', '/new-nonce')).toEqual({ status: 204, nonce: 'nonce-3' });
    expect(seen).toEqual(['GET /new-nonce', 'POST /ok', 'GET /new-nonce']);
  });
  it('never pools the nonce of an error answer (acme-client retries a badNonce with it itself)', async () => {
    const pool = new ReplayNoncePool();
    const request = client(pool);
    await expect(request('post', '/bad-nonce')).rejects.toMatchObject({ response: { status: 400 } });
    expect(pool.size(new URL(base).origin)).toBe(0);
    expect(await request('head', '/new-nonce')).toEqual({ status: 204, nonce: 'nonce-2' });
    expect(seen).toEqual(['POST /bad-nonce', 'GET /new-nonce']);
  });
  it('never pools the nonce of a newNonce answer, which acme-client uses', async () => {
    const pool = new ReplayNoncePool();
    const request = client(pool);
    await request('head', '/new-nonce');
    await request('head', '/new-nonce');
    expect(seen).toEqual(['GET /new-nonce', 'GET /new-nonce']);
  });
});
