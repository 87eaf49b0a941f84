/**
 * Before asking the CA to validate, fetch the challenge URL the way the CA will: resolve the
 * hostname through the configured DNS servers (following the CNAME) and GET
 * `http://<hostname>:<port>/.well-known/acme-challenge/<token>` (RFC 8555 §8.3). A failure here
 * would fail at the CA too, and a failed authorization counts against the CA's limits.
 */
import { request } from 'node:http';
import type { LookupFunction } from 'node:net';
import type { DnsResolver } from '../dns/resolver.js';

export class SelfCheckError extends Error {
  readonly code = 'HTTP01_SELF_CHECK_FAILED';
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'SelfCheckError';
  }
}

function lookupThrough(resolver: DnsResolver): LookupFunction {
  return (hostname, options, callback) => {
    resolver.lookupAddresses(hostname).then(
      ({ a, aaaa }) => {
        const v4 = a.kind === 'records' ? a.values.map((address) => ({ address, family: 4 })) : [];
        const v6 = aaaa.kind === 'records' ? aaaa.values.map((address) => ({ address, family: 6 })) : [];
        const all = [...v4, ...v6];
        const first = all[0];
        if (!first) {
          callback(
            Object.assign(new Error(`${hostname} has no A or AAAA records`), { code: 'ENOTFOUND' }),
            '',
            4,
          );
        } else if (options.all) {
          callback(null, all);
        } else {
          callback(null, first.address, first.family);
        }
      },
      (err: unknown) => {
        callback(err as NodeJS.ErrnoException, '', 4);
      },
    );
  };
}

function fetchOnce(
  url: URL,
  resolver: DnsResolver,
  timeoutMs: number,
): Promise<{ status: number; body: string }> {
  return new Promise((resolve, reject) => {
    const req = request(
      url,
      { method: 'GET', lookup: lookupThrough(resolver), timeout: timeoutMs },
      (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => {
          if (body.length < 4096) body += chunk;
        });
        res.on('end', () => {
          resolve({ status: res.statusCode ?? 0, body });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error(`no answer within ${timeoutMs} ms`)));
    req.on('error', reject);
    req.end();
  });
}

/**
 * Checks that the challenge URL serves `keyAuthorization`, trying `attempts` times `intervalMs`
 * apart (routing may take a moment to propagate). Throws `SelfCheckError` naming the URL and what
 * it answered.
 *
 * @param port the port the CA connects to: 80 in production, Pebble's `httpPort` in the sandbox
 */
export async function selfCheckHttp01(args: {
  hostname: string;
  port: number;
  token: string;
  keyAuthorization: string;
  resolver: DnsResolver;
  attempts: number;
  intervalMs: number;
  timeoutMs: number;
}): Promise<void> {
  const url = new URL(`http://${args.hostname}:${args.port}/.well-known/acme-challenge/${args.token}`);
  let last = '';
  for (let attempt = 1; attempt <= args.attempts; attempt++) {
    try {
      const { status, body } = await fetchOnce(url, args.resolver, args.timeoutMs);
      if (status === 200 && body.trim() === args.keyAuthorization) return;
      last = `HTTP ${status}${status === 200 ? ' with a different body' : ''}`;
    } catch (err) {
      last = (err as Error).message;
    }
    if (attempt < args.attempts) await new Promise((r) => setTimeout(r, args.intervalMs));
  }
  throw new SelfCheckError(
    `${url.href} did not serve the challenge response (${last}): check that ${args.hostname} routes to the platform and that /.well-known/acme-challenge/ reaches Portico`,
  );
}
