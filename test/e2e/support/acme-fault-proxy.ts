/**
 * A fault-injecting HTTPS proxy in front of the sandbox's real Pebble: every request is forwarded
 * to Pebble unchanged (Host header included, so the URLs Pebble builds from it point back at the
 * proxy and the JWS `url` checks pass), except those a test chooses to hold until it releases them
 * (on their way to Pebble, or with Pebble's answer on its way back) or to refuse with an RFC 8555
 * problem document of its own (`429 rateLimited` by default; `400 badNonce` with a fresh nonce of
 * Pebble's, `500 serverInternal`, ...). The proxy serves
 * Pebble's own listener certificate, which the operator already trusts (NODE_EXTRA_CA_CERTS).
 *
 * It also keeps a log of every exchange, with the DNS names each one concerns as far as it has seen
 * them (the new-order payload names them; the order and authorization objects Pebble answers with
 * link the order, authorization, challenge, finalize and certificate URLs to them).
 */
import { once } from 'node:events';
import { readFile } from 'node:fs/promises';
import type { IncomingMessage, OutgoingHttpHeaders, ServerResponse } from 'node:http';
import { Agent, createServer, request, type Server } from 'node:https';
import { buffer } from 'node:stream/consumers';
import { CERT_FILES } from '../../../src/sandbox/certificates.js';
import { sandboxPaths } from '../../../src/sandbox/paths.js';

/** What an ACME request is, from its method, path (Pebble's paths) and JWS payload. */
export type AcmeRequestKind =
  | 'directory'
  | 'nonce'
  | 'new-account'
  | 'account'
  | 'new-order'
  | 'order'
  | 'authorization'
  /** POST `{}` to a challenge URL: "the challenge is ready, validate it" (RFC 8555 §7.5.1). */
  | 'challenge-response'
  /** POST-as-GET of a challenge. */
  | 'challenge-poll'
  | 'finalize'
  | 'certificate'
  | 'renewal-info'
  | 'other';

/** One request the proxy received, and what it answered. */
export interface AcmeExchange {
  /** When the request arrived, epoch milliseconds. */
  readonly at: number;
  readonly method: string;
  readonly path: string;
  readonly kind: AcmeRequestKind;
  /** The DNS identifiers the request concerns, as far as the proxy knows them; [] when unknown. */
  readonly hostnames: readonly string[];
  /** The challenge token, for requests to a challenge URL whose authorization the proxy has seen. */
  readonly token?: string;
  /** A new order's `replaces` (RFC 9773 §5): the ARI identifier of the certificate it renews. */
  readonly replaces?: string;
  /** The HTTP status answered: Pebble's, or the proxy's own refusal. Undefined while in flight. */
  status?: number;
  /** When the answer went out, epoch milliseconds. */
  answeredAt?: number;
  /** The Location header of the answer (a new order's URL). */
  location?: string;
  /** True when the proxy refused the request itself (Pebble never saw it). */
  refused: boolean;
  /** True when the request was held by the test before it went on. */
  held: boolean;
}

/**
 * A request held by `hold`: `arrived` resolves when it comes in (with `phase: 'answer'`, once Pebble
 * has answered it); `release` lets it go on to Pebble (or lets Pebble's answer go back).
 */
export interface HeldRequest {
  readonly arrived: Promise<AcmeExchange>;
  release(): void;
}

/** An active refusal made by `refuse`: `stop` lets matching requests through again. */
export interface Refusal {
  /** How many requests it has refused so far. */
  readonly count: number;
  stop(): void;
}

export interface RefusalOptions {
  /** The Retry-After header, in seconds (RFC 9110 §10.2.3 delay-seconds); none when undefined. */
  readonly retryAfterSeconds?: number;
  /** The problem document's `detail`. */
  readonly detail: string;
  /** The HTTP status; default 429. */
  readonly status?: number;
  /** The problem document's `type` (RFC 8555 §6.7); default `urn:ietf:params:acme:error:rateLimited`. */
  readonly type?: string;
  /**
   * Put a fresh nonce from Pebble in `Replay-Nonce`, as RFC 8555 §6.5 requires of a `badNonce`
   * answer (the client retries with it). Default false.
   */
  readonly replayNonce?: boolean;
  /** Refuse at most this many requests, then let matching ones through; default: until `stop()`. */
  readonly times?: number;
}

/** When a held request stops: before it goes to Pebble (default), or once Pebble has answered it. */
export type HoldPhase = 'request' | 'answer';

export interface AcmeFaultProxy {
  /** The directory URL to give the operator: `https://127.0.0.1:<port>/dir`. */
  readonly directoryUrl: string;
  /** Every exchange so far, in arrival order. */
  readonly exchanges: readonly AcmeExchange[];
  /**
   * Holds the first request that `match` accepts (from now on) until `release()`: before Pebble sees
   * it (`phase` 'request', the default), or after Pebble has acted on it and before its answer goes
   * back (`phase` 'answer').
   */
  hold(match: (x: AcmeExchange) => boolean, phase?: HoldPhase): HeldRequest;
  /**
   * Answers every request that `match` accepts with the proxy's own problem document (429 +
   * `rateLimited` unless `options` say otherwise) until `stop()`; Pebble never sees them.
   */
  refuse(match: (x: AcmeExchange) => boolean, options: RefusalOptions): Refusal;
  /** Releases what is held, closes the listener and every connection. */
  stop(): Promise<void>;
}

interface HoldRule {
  match: (x: AcmeExchange) => boolean;
  phase: HoldPhase;
  taken: boolean;
  arrived: (x: AcmeExchange) => void;
  released: Promise<void>;
  release: () => void;
}

interface RefusalRule {
  match: (x: AcmeExchange) => boolean;
  options: RefusalOptions;
  active: boolean;
  count: number;
}

const RATE_LIMITED = 'urn:ietf:params:acme:error:rateLimited';
const HOP_BY_HOP = new Set(['connection', 'keep-alive', 'transfer-encoding', 'content-length']);

/** Pebble's endpoint paths (pebble v2.10 wfe/wfe.go), by prefix. */
const KINDS: readonly [string, AcmeRequestKind][] = [
  ['/dir', 'directory'],
  ['/nonce-plz', 'nonce'],
  ['/sign-me-up', 'new-account'],
  ['/my-account/', 'account'],
  ['/order-plz', 'new-order'],
  ['/my-order/', 'order'],
  ['/finalize-order/', 'finalize'],
  ['/authZ/', 'authorization'],
  ['/chalZ/', 'challenge-poll'],
  ['/certZ/', 'certificate'],
  ['/draft-ietf-acme-ari-03/renewalInfo/', 'renewal-info'],
];

function base64urlJson(text: string): unknown {
  return text === '' ? '' : JSON.parse(Buffer.from(text, 'base64url').toString('utf8'));
}

/** The decoded JWS payload of a POST (RFC 8555 §6.2): '' for POST-as-GET, undefined if not a JWS. */
function jwsPayload(body: Buffer): unknown {
  try {
    const jws = JSON.parse(body.toString('utf8')) as { payload?: unknown };
    return typeof jws.payload === 'string' ? base64urlJson(jws.payload) : undefined;
  } catch {
    return undefined;
  }
}

function identifiersOf(value: unknown): string[] {
  const ids = (value as { identifiers?: unknown } | null)?.identifiers;
  if (!Array.isArray(ids)) return [];
  return ids.map((id) => (id as { value?: unknown }).value).filter((v): v is string => typeof v === 'string');
}

function replacesOf(value: unknown): string | undefined {
  const replaces = (value as { replaces?: unknown } | null)?.replaces;
  return typeof replaces === 'string' ? replaces : undefined;
}

function pathOf(url: unknown): string | undefined {
  if (typeof url !== 'string') return undefined;
  try {
    return new URL(url).pathname;
  } catch {
    return undefined;
  }
}

/** What the proxy has learnt from Pebble's answers: which URL paths concern which names. */
class Links {
  readonly #hostnames = new Map<string, string[]>();
  readonly #tokens = new Map<string, string>();

  hostnames(path: string): string[] {
    return this.#hostnames.get(path) ?? [];
  }

  token(path: string): string | undefined {
    return this.#tokens.get(path);
  }

  /** Reads an order, authorization or challenge object Pebble answered with. */
  learn(requestPath: string, location: string | undefined, body: unknown): void {
    const object = (body ?? {}) as {
      authorizations?: unknown;
      finalize?: unknown;
      certificate?: unknown;
      identifier?: { value?: unknown };
      challenges?: unknown;
    };
    const orderNames = identifiersOf(object);
    if (orderNames.length > 0) {
      const paths = [
        requestPath,
        pathOf(location),
        pathOf(object.finalize),
        pathOf(object.certificate),
        ...(Array.isArray(object.authorizations) ? object.authorizations.map(pathOf) : []),
      ];
      for (const p of paths) if (p && p !== '/order-plz') this.#hostnames.set(p, orderNames);
    }
    const name = object.identifier?.value;
    if (typeof name === 'string' && Array.isArray(object.challenges)) {
      for (const c of object.challenges as { url?: unknown; token?: unknown }[]) {
        const p = pathOf(c.url);
        if (!p) continue;
        this.#hostnames.set(p, [name]);
        if (typeof c.token === 'string') this.#tokens.set(p, c.token);
      }
    }
  }
}

function classify(method: string, path: string, payload: unknown): AcmeRequestKind {
  const kind = KINDS.find(([prefix]) => path.startsWith(prefix))?.[1] ?? 'other';
  if (kind === 'challenge-poll' && method === 'POST' && payload !== '' && payload !== undefined) {
    return 'challenge-response';
  }
  return kind;
}

/**
 * Starts the proxy on a free port of 127.0.0.1, forwarding to the sandbox's Pebble.
 *
 * @param sandboxDir the e2e sandbox directory (its certs/ holds Pebble's listener certificate)
 * @param upstreamDirectoryUrl Pebble's directory URL, e.g. `https://127.0.0.1:14000/dir`
 * @param caBundle PEM file of the CA of Pebble's listener certificate
 */
export async function startAcmeFaultProxy(
  sandboxDir: string,
  upstreamDirectoryUrl: string,
  caBundle: string,
): Promise<AcmeFaultProxy> {
  const paths = sandboxPaths(sandboxDir);
  const [cert, key, ca] = await Promise.all([
    readFile(paths.cert(CERT_FILES.pebbleCert)),
    readFile(paths.cert(CERT_FILES.pebbleKey)),
    readFile(caBundle),
  ]);
  const upstream = new URL(upstreamDirectoryUrl);
  const agent = new Agent({ ca, keepAlive: true });
  const exchanges: AcmeExchange[] = [];
  const holds: HoldRule[] = [];
  const refusals: RefusalRule[] = [];
  const links = new Links();

  const forward = async (
    req: IncomingMessage,
    body: Buffer,
  ): Promise<{ status: number; headers: OutgoingHttpHeaders; body: Buffer }> => {
    const upstreamReq = request({
      host: upstream.hostname,
      port: upstream.port,
      method: req.method,
      path: req.url,
      headers: { ...req.headers, 'content-length': String(body.length) },
      agent,
    });
    upstreamReq.end(body);
    const [res] = (await once(upstreamReq, 'response')) as [IncomingMessage];
    const resBody = await buffer(res);
    const headers = Object.fromEntries(
      Object.entries(res.headers).filter(([name]) => !HOP_BY_HOP.has(name.toLowerCase())),
    );
    return { status: res.statusCode ?? 502, headers, body: resBody };
  };

  const learnFrom = (path: string, location: string | undefined, body: Buffer): void => {
    try {
      links.learn(path, location, JSON.parse(body.toString('utf8')));
    } catch {
      // Not JSON (a certificate chain, an empty body): nothing to learn.
    }
  };

  /** A fresh nonce from Pebble's newNonce resource (RFC 8555 §7.2). */
  const freshNonce = async (): Promise<string> => {
    const req = request({
      host: upstream.hostname,
      port: upstream.port,
      method: 'GET',
      path: '/nonce-plz',
      // Pebble refuses a request without one (RFC 8555 §6.1).
      headers: { 'user-agent': 'acme-fault-proxy' },
      agent,
    });
    req.end();
    const [res] = (await once(req, 'response')) as [IncomingMessage];
    res.resume();
    const nonce = res.headers['replay-nonce'];
    if (typeof nonce !== 'string') throw new Error('Pebble answered newNonce without a Replay-Nonce');
    return nonce;
  };

  const refuse = async (res: ServerResponse, options: RefusalOptions): Promise<number> => {
    const status = options.status ?? 429;
    const problem = JSON.stringify({ type: options.type ?? RATE_LIMITED, detail: options.detail, status });
    res.writeHead(status, {
      'content-type': 'application/problem+json',
      ...(options.retryAfterSeconds === undefined
        ? {}
        : { 'retry-after': String(options.retryAfterSeconds) }),
      ...(options.replayNonce === true ? { 'replay-nonce': await freshNonce() } : {}),
      'content-length': Buffer.byteLength(problem),
    });
    res.end(problem);
    return status;
  };

  const handle = async (req: IncomingMessage, res: ServerResponse): Promise<void> => {
    const body = await buffer(req);
    const method = req.method ?? 'GET';
    const path = (req.url ?? '/').split('?')[0] ?? '/';
    const payload = method === 'POST' ? jwsPayload(body) : undefined;
    const kind = classify(method, path, payload);
    const token = links.token(path);
    const replaces = kind === 'new-order' ? replacesOf(payload) : undefined;
    const exchange: AcmeExchange = {
      at: Date.now(),
      method,
      path,
      kind,
      hostnames: kind === 'new-order' ? identifiersOf(payload) : links.hostnames(path),
      ...(token ? { token } : {}),
      ...(replaces ? { replaces } : {}),
      refused: false,
      held: false,
    };
    exchanges.push(exchange);
    const refusal = refusals.find(
      (r) => r.active && r.count < (r.options.times ?? Infinity) && r.match(exchange),
    );
    if (refusal) {
      refusal.count += 1;
      exchange.refused = true;
      exchange.status = await refuse(res, refusal.options);
      exchange.answeredAt = Date.now();
      return;
    }
    const hold = holds.find((h) => !h.taken && h.match(exchange));
    if (hold) {
      hold.taken = true;
      exchange.held = true;
    }
    if (hold?.phase === 'request') {
      hold.arrived(exchange);
      await hold.released;
    }
    const answer = await forward(req, body);
    const location = typeof answer.headers.location === 'string' ? answer.headers.location : undefined;
    learnFrom(path, location, answer.body);
    if (hold?.phase === 'answer') {
      hold.arrived(exchange);
      await hold.released;
    }
    res.writeHead(answer.status, { ...answer.headers, 'content-length': answer.body.length });
    res.end(answer.body);
    if (location) exchange.location = location;
    exchange.status = answer.status;
    exchange.answeredAt = Date.now();
  };

  const server: Server = createServer({ cert, key }, (req, res) => {
    handle(req, res).catch((err: unknown) => {
      if (!res.headersSent) res.writeHead(502, { 'content-type': 'text/plain' });
      res.end(`acme-fault-proxy: ${(err as Error).message}\n`);
    });
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;

  return {
    directoryUrl: `https://127.0.0.1:${port}${upstream.pathname}`,
    exchanges,
    hold(match, phase = 'request') {
      let arrived!: (x: AcmeExchange) => void;
      let release!: () => void;
      const arrivedPromise = new Promise<AcmeExchange>((resolve) => (arrived = resolve));
      const released = new Promise<void>((resolve) => (release = resolve));
      holds.push({ match, phase, taken: false, arrived, released, release });
      return { arrived: arrivedPromise, release };
    },
    refuse(match, options) {
      const rule: RefusalRule = { match, options, active: true, count: 0 };
      refusals.push(rule);
      return {
        get count() {
          return rule.count;
        },
        stop() {
          rule.active = false;
        },
      };
    },
    async stop() {
      for (const h of holds) h.release();
      for (const r of refusals) r.active = false;
      const closed = once(server, 'close');
      server.close();
      server.closeAllConnections();
      await closed;
      agent.destroy();
    },
  };
}
