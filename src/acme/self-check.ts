/**
 * Before asking the CA to validate, fetch the challenge URL the way the CA will: resolve the
 * hostname through the configured DNS servers (following the CNAME) and GET
 * `http://<hostname>:<port>/.well-known/acme-challenge/<token>` (RFC 8555 §8.3). A failure here
 * would fail at the CA too, and a failed authorization counts against the CA's limits.
 *
 * Redirects are followed as the CA follows them (RFC 8555 §8.3: "The server SHOULD follow
 * redirects"): up to `MAX_REDIRECTS` (Let's Encrypt and Pebble: 10; Go's http.Client default), to
 * `http:` or `https:` only, names resolved through the same DNS servers, the certificate of an
 * HTTPS hop not verified (Pebble: `InsecureSkipVerify` "if we get redirected to an HTTPS host";
 * Let's Encrypt likewise accepts any certificate there). A data plane that sends every plain HTTP
 * request to HTTPS (Traefik's entrypoint redirect, docs/routing.md "Traefik") thus passes here as
 * it passes at the CA. Let's Encrypt also refuses a redirect to a port other than 80 and 443; this
 * check does not, like Pebble, whose HTTP port is not 80 in the sandbox.
 */
import { request as httpRequest, type IncomingMessage } from 'node:http';
import { request as httpsRequest } from 'node:https';
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

/** Redirects followed at most, as the CAs do (Go's http.Client default, which Pebble and Boulder keep). */
export const MAX_REDIRECTS = 10;

/**
 * GET `url`, following redirects (see the module comment); each hop has `timeoutMs`. Resolves to the
 * last answer's status and body, and the URLs of the hops after the first.
 *
 * @throws Error for a connection failure, a timeout, a redirect to another scheme than http/https,
 *   or more than MAX_REDIRECTS redirects
 */
async function fetchFollowing(
  url: URL,
  resolver: DnsResolver,
  timeoutMs: number,
): Promise<{ status: number; body: string; redirects: string[] }> {
  const redirects: string[] = [];
  let current = url;
  for (;;) {
    const answer = await fetchOnce(current, resolver, timeoutMs);
    if (answer.location === undefined || ![301, 302, 303, 307, 308].includes(answer.status))
      return { status: answer.status, body: answer.body, redirects };
    const next = new URL(answer.location, current);
    if (next.protocol !== 'http:' && next.protocol !== 'https:')
      throw new Error(`HTTP ${answer.status} redirect to ${next.href}, not an http or https URL`);
    if (redirects.length === MAX_REDIRECTS)
      throw new Error(`more than ${MAX_REDIRECTS} redirects (the last to ${next.href})`);
    redirects.push(next.href);
    current = next;
  }
}

function fetchOnce(
  url: URL,
  resolver: DnsResolver,
  timeoutMs: number,
): Promise<{ status: number; body: string; location: string | undefined }> {
  return new Promise((resolve, reject) => {
    const onResponse = (res: IncomingMessage): void => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        if (body.length < 4096) body += chunk;
      });
      res.on('end', () => {
        resolve({ status: res.statusCode ?? 0, body, location: res.headers.location });
      });
    };
    const options = { method: 'GET', lookup: lookupThrough(resolver), timeout: timeoutMs };
    const req =
      url.protocol === 'https:'
        ? // An HTTPS hop (after a redirect): its certificate is not verified, as the CA does not.
          httpsRequest(url, { ...options, servername: url.hostname, rejectUnauthorized: false }, onResponse)
        : httpRequest(url, options, onResponse);
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
      const { status, body, redirects } = await fetchFollowing(url, args.resolver, args.timeoutMs);
      if (status === 200 && body.trim() === args.keyAuthorization) return;
      const via = redirects.length === 0 ? '' : ` after redirects to ${redirects.join(', ')}`;
      last = `HTTP ${status}${status === 200 ? ' with a different body' : ''}${via}`;
    } catch (err) {
      last = (err as Error).message;
    }
    if (attempt < args.attempts) await new Promise((r) => setTimeout(r, args.intervalMs));
  }
  throw new SelfCheckError(
    `${url.href} did not serve the challenge response (${last}): check that ${args.hostname} routes to the platform and that /.well-known/acme-challenge/ reaches Portico`,
  );
}
