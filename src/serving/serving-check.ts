/**
 * The serving check (docs/routing.md, "Serving check"): does the data plane serve a domain with the certificate
 * Portico issued, and does a request for the hostname reach the domain's route rather than the
 * default backend? The I/O half: it connects and observes; verdict.ts judges and words the verdict.
 *
 * Against the data plane's in-cluster address (the ingress controller's Service, `host:port`), with
 * the certificate's trust not checked against any CA (the CA may be private, Pebble in tests; the
 * serial is compared instead):
 * 1. a TLS connection with SNI = the hostname: the served leaf certificate. When its serial is not
 *    the one expected, a second connection with SNI = `portico-serving-check.invalid` gets the data
 *    plane's default certificate, to say whether that is what was served; no HTTP then.
 * 2. `GET <path>` with `Host: <hostname>` over TLS with SNI = the hostname (node:https), then, over
 *    the same kept-alive connection, the same request with `Host: portico-serving-check.invalid`:
 *    the default backend's answer, to compare with (verdict.ts says how).
 *
 * Each connection and each request has `timeoutMs` (default 5000 ms) to answer; a check takes at
 * most four times that. Never throws for what the data plane does (every failure is a verdict);
 * throws `ServingAddressError` for a malformed address.
 */
import { createHash, type X509Certificate } from 'node:crypto';
import { Agent, request, type RequestOptions } from 'node:https';
import type { IncomingMessage } from 'node:http';
import { connect, type TLSSocket } from 'node:tls';
import {
  isExpectedCertificate,
  judgeServing,
  servedCertificate,
  UNROUTED_HOSTNAME,
  type ObservedError,
  type ObservedResponse,
  type ServedCertificate,
  type ServingExpectation,
  type ServingObservation,
  type ServingVerdict,
} from './verdict.js';

/** Milliseconds each connection and each request may take, unless `timeoutMs` says otherwise. */
export const DEFAULT_SERVING_TIMEOUT_MS = 5_000;
/** Bytes of a body read and hashed; the rest is not read (a page larger than this is not a default backend's). */
export const DEFAULT_MAX_BODY_BYTES = 64 * 1024;
const USER_AGENT = 'portico-serving-check';

export interface ServingCheckOptions extends ServingExpectation {
  /**
   * The data plane's in-cluster address: `host:port`, `[ipv6]:port`, or a host alone (port 443),
   * e.g. `ingress-nginx-controller.ingress-nginx.svc:443`.
   */
  address: string;
  /** Milliseconds for each connection and each request; default DEFAULT_SERVING_TIMEOUT_MS. */
  timeoutMs?: number;
  /** Bytes of each body hashed; default DEFAULT_MAX_BODY_BYTES. */
  maxBodyBytes?: number;
}

/** Thrown for an address that is not `host[:port]`. */
export class ServingAddressError extends Error {
  readonly code = 'SERVING_ADDRESS_INVALID';
  constructor(message: string) {
    super(message);
    this.name = 'ServingAddressError';
  }
}

/**
 * `host:port` (IPv6 in brackets; port 1-65535, default 443) as host and port. Throws
 * `ServingAddressError` naming the value.
 */
export function parseDataPlaneAddress(address: string): { host: string; port: number } {
  const invalid = (): ServingAddressError =>
    new ServingAddressError(
      `the serving-check address must be host:port (e.g. ingress-nginx-controller.ingress-nginx.svc:443), got "${address}"`,
    );
  if (address === '' || /[/?#@\s]/.test(address)) throw invalid();
  let url: URL;
  try {
    url = new URL(`https://${address}`);
  } catch {
    throw invalid();
  }
  if (url.hostname === '') throw invalid();
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  return { host, port: url.port === '' ? 443 : Number(url.port) };
}

/**
 * Checks that the data plane at `options.address` serves `options.hostname` with the certificate
 * of serial `options.serialNumber` and routes it (see the module comment). Resolves to the verdict;
 * throws only `ServingAddressError`.
 */
export async function checkServing(options: ServingCheckOptions): Promise<ServingVerdict> {
  return judgeServing(options, await observeServing(options));
}

/** The observations `checkServing` judges. Throws only `ServingAddressError`. */
export async function observeServing(options: ServingCheckOptions): Promise<ServingObservation> {
  const target = parseDataPlaneAddress(options.address);
  const timeoutMs = options.timeoutMs ?? DEFAULT_SERVING_TIMEOUT_MS;
  const leaf = await peerCertificate(target, options.hostname, timeoutMs);
  if ('code' in leaf) return { step: 'tls', error: leaf };
  const certificate = servedCertificate(leaf, options.hostname);
  if (!isExpectedCertificate(options, certificate)) {
    const fallback = await peerCertificate(target, UNROUTED_HOSTNAME, timeoutMs);
    const defaultCertificate = 'code' in fallback ? fallback : servedCertificate(fallback, UNROUTED_HOSTNAME);
    return { step: 'certificate', certificate, defaultCertificate };
  }
  return observeHttp(options, target, certificate, timeoutMs);
}

async function observeHttp(
  options: ServingCheckOptions,
  target: { host: string; port: number },
  certificate: ServedCertificate,
  timeoutMs: number,
): Promise<ServingObservation> {
  // One kept-alive connection for both requests: the second rides on the first's TLS session.
  const agent = new Agent({ keepAlive: true, maxSockets: 1 });
  const base: RequestOptions = {
    host: target.host,
    port: target.port,
    servername: options.hostname,
    rejectUnauthorized: false,
    path: options.path ?? '/',
    method: 'GET',
    agent,
  };
  const limits = { timeoutMs, maxBodyBytes: options.maxBodyBytes ?? DEFAULT_MAX_BODY_BYTES };
  const kept = keptHeaders(options.projectHeader?.name);
  try {
    const answer = await get({ ...base, headers: requestHeaders(options.hostname) }, limits, kept);
    if ('code' in answer) return { step: 'http', certificate, error: answer };
    // The certificate of the connection that answered: the one step 1 saw, unless it changed meanwhile.
    const served = answer.peer ? servedCertificate(answer.peer, options.hostname) : certificate;
    const fallback = await get({ ...base, headers: requestHeaders(UNROUTED_HOSTNAME) }, limits, kept);
    return {
      step: 'done',
      certificate: served,
      response: answer.response,
      defaultResponse: 'code' in fallback ? fallback : fallback.response,
    };
  } finally {
    agent.destroy();
  }
}

function requestHeaders(host: string): Record<string, string> {
  return { host, 'user-agent': USER_AGENT, accept: '*/*' };
}

function keptHeaders(projectHeader: string | undefined): string[] {
  const names = ['server', 'content-type', 'location'];
  if (projectHeader !== undefined) names.push(projectHeader.toLowerCase());
  return names;
}

function observedError(err: unknown): ObservedError {
  if (!(err instanceof Error)) return { code: 'ERROR', message: String(err) };
  const code: unknown = (err as Error & { code?: unknown }).code;
  return { code: typeof code === 'string' && code !== '' ? code : 'ERROR', message: err.message };
}

function timeoutError(timeoutMs: number): ObservedError & Error {
  return Object.assign(new Error(`no answer within ${timeoutMs} ms`), { code: 'ETIMEDOUT' });
}

/** The leaf certificate the server at `target` presents for SNI `servername`, or the error. */
function peerCertificate(
  target: { host: string; port: number },
  servername: string,
  timeoutMs: number,
): Promise<X509Certificate | ObservedError> {
  return new Promise((resolve) => {
    const socket: TLSSocket = connect({
      host: target.host,
      port: target.port,
      servername,
      rejectUnauthorized: false,
      ALPNProtocols: ['http/1.1'],
    });
    const timer = setTimeout(() => socket.destroy(timeoutError(timeoutMs)), timeoutMs);
    socket.once('secureConnect', () => {
      clearTimeout(timer);
      const cert = socket.getPeerX509Certificate();
      // Closed with close_notify once the handshake is through, so the data plane logs no
      // handshake failure; destroyed if it does not close its side within the timeout.
      socket.end();
      setTimeout(() => socket.destroy(), timeoutMs).unref();
      resolve(cert ?? { code: 'ERR_NO_PEER_CERTIFICATE', message: 'the server presented no certificate' });
    });
    socket.once('error', (err) => {
      clearTimeout(timer);
      socket.destroy();
      resolve(observedError(err));
    });
  });
}

interface Answer {
  response: ObservedResponse;
  peer: X509Certificate | undefined;
}

/**
 * One request: the answer (status, kept headers, a digest of the body's first bytes) or the error.
 * A body cut short after the headers arrived (the timeout, a reset) still gives an answer from what
 * came, so a page that streams is not taken for an unreachable data plane.
 */
function get(
  options: RequestOptions,
  limits: { timeoutMs: number; maxBodyBytes: number },
  kept: readonly string[],
): Promise<Answer | ObservedError> {
  return new Promise((resolve) => {
    let settled = false;
    let finishBody: (() => void) | undefined;
    const settle = (value: Answer | ObservedError): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(value);
    };
    const req = request(options, (res) => {
      finishBody = readAnswer(res, limits.maxBodyBytes, kept, settle, () => req.destroy());
    });
    const timer = setTimeout(() => req.destroy(timeoutError(limits.timeoutMs)), limits.timeoutMs);
    req.once('error', (err) => {
      if (finishBody) finishBody();
      else settle(observedError(err));
    });
    req.end();
  });
}

/**
 * Reads `res` into an Answer: at most `maxBodyBytes` of body (then `stop()` drops the connection).
 * Returns the function that settles with what came so far (idempotent through `settle`).
 */
function readAnswer(
  res: IncomingMessage,
  maxBodyBytes: number,
  kept: readonly string[],
  settle: (value: Answer) => void,
  stop: () => void,
): () => void {
  const peer = (res.socket as TLSSocket | null)?.getPeerX509Certificate() ?? undefined;
  const chunks: Buffer[] = [];
  let length = 0;
  const done = (): void => {
    const body = Buffer.concat(chunks).subarray(0, maxBodyBytes);
    settle({ response: observedResponse(res, body, kept), peer });
  };
  res.on('data', (chunk: Buffer) => {
    chunks.push(chunk);
    length += chunk.length;
    if (length >= maxBodyBytes) {
      done();
      stop();
    }
  });
  res.once('end', done);
  res.once('close', done);
  res.once('error', done);
  return done;
}

function observedResponse(res: IncomingMessage, body: Buffer, kept: readonly string[]): ObservedResponse {
  const headers: Record<string, string> = {};
  for (const name of kept) {
    const value = res.headers[name];
    if (value !== undefined) headers[name] = Array.isArray(value) ? value.join(', ') : value;
  }
  return {
    statusCode: res.statusCode ?? 0,
    headers,
    bodyDigest: createHash('sha256').update(body).digest('hex'),
    bodyPreview: body
      .toString('utf8', 0, Math.min(body.length, 240))
      .replace(/[\p{Cc}\s]+/gu, ' ')
      .trim()
      .slice(0, 80),
  };
}
