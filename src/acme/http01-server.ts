/**
 * The operator's own HTTP-01 challenge server (RFC 8555 §8.3): answers
 * `GET /.well-known/acme-challenge/<token>` with the key authorization as `application/octet-stream`,
 * 404 for any other path or unknown token. No solver pod per challenge.
 */
import { createServer, type Server } from 'node:http';
import type { ChallengeStore } from './challenge-store.js';

const PREFIX = '/.well-known/acme-challenge/';
/** RFC 8555 §8.3: a token is base64url, at least 128 bits of entropy. */
const TOKEN_PATTERN = /^[A-Za-z0-9_-]{22,}$/;

export function createHttp01Server(store: Pick<ChallengeStore, 'get'>): Server {
  return createServer((req, res) => {
    const path = (req.url ?? '').split('?')[0] ?? '';
    const token = path.startsWith(PREFIX) ? path.slice(PREFIX.length) : '';
    const keyAuthorization = TOKEN_PATTERN.test(token) ? store.get(token) : undefined;
    if ((req.method !== 'GET' && req.method !== 'HEAD') || keyAuthorization === undefined) {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n');
      return;
    }
    res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(keyAuthorization);
  });
}
