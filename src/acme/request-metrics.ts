/**
 * What each request to the ACME CA was for, how it ended and how long it took, for the
 * `portico_acme_requests_total` and `portico_acme_request_duration_seconds` metrics.
 *
 * An ACME client learns every URL it uses from the CA (RFC 8555 §7.1): the resource URLs from the
 * directory (§7.1.1), the account URL from newAccount's `Location` (§7.3), an order's URL from
 * newOrder's `Location` (§7.4), its `authorizations` and `finalize` URLs and, once issued, its
 * `certificate` URL from the order object (§7.1.3), and the challenge URLs from each authorization
 * (§7.1.4). `AcmeEndpoints` watches the same answers and so names any URL by the resource it
 * belongs to, whatever the CA's URL layout: the label is one of a small fixed set
 * (`ACME_ENDPOINTS`), never the URL, which holds an order's or an authorization's id.
 *
 * `observeAcmeRequests` wraps the adapter that sends acme-client's requests (beneath the nonce pool
 * of replay-nonces.ts, so a newNonce answered from the pool, which reaches no CA, is not counted).
 */
import type { AdapterRequestConfig, RequestAdapter } from './request-timeout.js';

/** The directory fields that name a resource URL (RFC 8555 §7.1.1; RFC 9773 §3). */
const DIRECTORY_RESOURCES = [
  'newNonce',
  'newAccount',
  'newOrder',
  'newAuthz',
  'revokeCert',
  'keyChange',
  'renewalInfo',
] as const;

/**
 * The resources a request can be for: the directory's own names (RFC 8555 §7.1.1, RFC 9773 §3 for
 * renewalInfo) and the resources the CA creates (account, order, authz, challenge, finalize,
 * certificate); `other` for a URL not (or no longer) known.
 */
export const ACME_ENDPOINTS = [
  'directory',
  ...DIRECTORY_RESOURCES,
  'account',
  'order',
  'authz',
  'challenge',
  'finalize',
  'certificate',
  'other',
] as const;

export type AcmeEndpoint = (typeof ACME_ENDPOINTS)[number];

/**
 * The default number of URLs of CA-created resources remembered: an order names about five (order,
 * authorization, challenge, finalize, certificate) and is done with them when it settles, so 2,000
 * cover 400 orders in flight, eight times the default cap (--acme-max-orders-in-flight). About
 * 180 bytes each: 10,000 held 1.75 MiB in a 10,000-domain heap snapshot (docs/performance.md).
 */
export const DEFAULT_LEARNED_URLS = 2_000;

/** An answer of the CA, as far as learning URLs from it goes. */
export interface AcmeAnswer {
  readonly status: number;
  /** The `Location` header, if any. */
  readonly location?: string | undefined;
  /** The parsed JSON body, if it was JSON. */
  readonly body?: unknown;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

function stringsOf(value: unknown): string[] {
  return Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : [];
}

/** True for a directory object: it names at least the newNonce and newOrder URLs. */
export function isDirectory(body: unknown): body is Record<string, unknown> {
  return isRecord(body) && typeof body.newNonce === 'string' && typeof body.newOrder === 'string';
}

/**
 * URLs of one or more ACME CAs mapped to the resource each belongs to. Pure: no I/O, no clock.
 * Directory resources are kept for ever (a handful per CA); the URLs of resources the CA creates
 * (orders, authorizations, challenges, ...) at most `capacity`, the least recently used forgotten
 * first (a forgotten URL is `other` until an answer names it again).
 */
export class AcmeEndpoints {
  readonly #capacity: number;
  readonly #fixed = new Map<string, AcmeEndpoint>();
  readonly #learned = new Map<string, AcmeEndpoint>();
  /** renewalInfo base URLs: a renewalInfo request is `<base>/<certID>` (RFC 9773 §4.1). */
  readonly #renewalInfo = new Set<string>();

  /** @throws RangeError when `capacity` is not a positive integer */
  constructor(capacity: number = DEFAULT_LEARNED_URLS) {
    if (!Number.isInteger(capacity) || capacity <= 0)
      throw new RangeError(`the number of ACME URLs kept must be a positive integer, got ${capacity}`);
    this.#capacity = capacity;
  }

  /** How many URLs of CA-created resources are remembered now. */
  get learnedSize(): number {
    return this.#learned.size;
  }

  /** Records a directory read from `url` (its resource URLs). */
  learnDirectory(url: string, directory: Record<string, unknown>): void {
    this.#fixed.set(url, 'directory');
    for (const name of DIRECTORY_RESOURCES) {
      const resource = directory[name];
      if (typeof resource !== 'string') continue;
      this.#fixed.set(resource, name);
      if (name === 'renewalInfo') this.#renewalInfo.add(resource.replace(/\/$/, ''));
    }
  }

  /** The resource `url` belongs to, or `other`. A known URL of a CA-created resource counts as used. */
  endpointOf(url: string): AcmeEndpoint {
    const fixed = this.#fixed.get(url);
    if (fixed !== undefined) return fixed;
    const learned = this.#learned.get(url);
    if (learned !== undefined) {
      this.#learned.delete(url);
      this.#learned.set(url, learned);
      return learned;
    }
    const slash = url.lastIndexOf('/');
    if (slash > 0 && this.#renewalInfo.has(url.slice(0, slash))) return 'renewalInfo';
    return 'other';
  }

  /**
   * Learns the URLs an answer names, and returns the endpoint of the request it answered: `endpoint`
   * (what `endpointOf` said before the answer), or `directory` for an unknown URL that answered
   * with a directory. Only successful (2xx) answers teach anything.
   */
  learn(url: string, endpoint: AcmeEndpoint, answer: AcmeAnswer): AcmeEndpoint {
    if (answer.status < 200 || answer.status >= 300) return endpoint;
    const body = answer.body;
    if ((endpoint === 'other' || endpoint === 'directory') && isDirectory(body)) {
      this.learnDirectory(url, body);
      return 'directory';
    }
    if (answer.location !== undefined) {
      if (endpoint === 'newAccount') this.#remember(answer.location, 'account');
      if (endpoint === 'newOrder') this.#remember(answer.location, 'order');
    }
    if (isRecord(body)) this.#learnObject(body);
    return endpoint;
  }

  /** Learns the URLs an order object (newOrder, order, finalize answers) or an authorization names. */
  #learnObject(body: Record<string, unknown>): void {
    for (const authz of stringsOf(body.authorizations)) this.#remember(authz, 'authz');
    if (typeof body.finalize === 'string') this.#remember(body.finalize, 'finalize');
    if (typeof body.certificate === 'string') this.#remember(body.certificate, 'certificate');
    if (!Array.isArray(body.challenges)) return;
    for (const challenge of body.challenges as unknown[])
      if (isRecord(challenge) && typeof challenge.url === 'string')
        this.#remember(challenge.url, 'challenge');
  }

  #remember(url: string, endpoint: AcmeEndpoint): void {
    if (this.#fixed.has(url)) return;
    this.#learned.delete(url);
    this.#learned.set(url, endpoint);
    if (this.#learned.size > this.#capacity) {
      const oldest = this.#learned.keys().next();
      if (!oldest.done) this.#learned.delete(oldest.value);
    }
  }
}

/**
 * The `status` label of a request that got no HTTP answer: `timeout` when its deadline fired
 * (request-timeout.ts), `cancelled` when it was aborted otherwise (its order was cancelled, the
 * caller's signal), `error` when the connection failed (refused, reset, TLS, DNS).
 */
export type NoAnswerStatus = 'timeout' | 'cancelled' | 'error';

/**
 * How a request that failed without an HTTP answer ended, from the abort signal it was sent with.
 * Pure. A deadline is an `AbortSignal.timeout`, whose reason is a `TimeoutError` DOMException.
 */
export function noAnswerStatus(signal: unknown): NoAnswerStatus {
  if (!(signal instanceof AbortSignal) || !signal.aborted) return 'error';
  const reason: unknown = signal.reason;
  return reason instanceof DOMException && reason.name === 'TimeoutError' ? 'timeout' : 'cancelled';
}

/** Records one request: its endpoint, its HTTP status code (or a `NoAnswerStatus`) and its duration in seconds. */
export type AcmeRequestRecorder = (endpoint: AcmeEndpoint, status: string, seconds: number) => void;

/** The parts of an axios response read here. */
interface ResponseLike {
  readonly status?: number;
  readonly headers?: unknown;
  readonly data?: unknown;
}

/** Bodies larger than this are not parsed to learn URLs (ACME objects are a few kB at most). */
const MAX_PARSED_BODY = 256 * 1024;

function headerOf(headers: unknown, name: string): string | undefined {
  const h = headers as { get?: (n: string) => unknown; [key: string]: unknown } | undefined;
  const value = typeof h?.get === 'function' ? h.get(name) : h?.[name];
  return typeof value === 'string' ? value : undefined;
}

/** The endpoints whose answers name other URLs (or may be a directory): only theirs are parsed. */
const TEACHING: ReadonlySet<AcmeEndpoint> = new Set([
  'other',
  'directory',
  'newAccount',
  'newOrder',
  'order',
  'finalize',
  'authz',
]);

function answerOf(response: ResponseLike, endpoint: AcmeEndpoint): AcmeAnswer {
  const status = response.status ?? 0;
  const location = headerOf(response.headers, 'location');
  if (!TEACHING.has(endpoint)) return { status, location };
  const data = response.data;
  if (typeof data === 'string' && data.length <= MAX_PARSED_BODY && data.startsWith('{')) {
    try {
      return { status, location, body: JSON.parse(data) as unknown };
    } catch {
      return { status, location };
    }
  }
  return { status, location, body: data };
}

/**
 * An adapter that sends each request with `send` and records it with `record`: the endpoint (from
 * `endpoints`, which learns from every answer), the HTTP status code, or a `NoAnswerStatus` when
 * there was none, and the time from sending to the whole answer, in seconds. The answer, or the
 * error, is passed on untouched.
 *
 * @param send the adapter that sends a request to the CA (axios's http adapter)
 * @param endpoints the URL map; one per process serves every CA
 * @param record where each request is recorded (the operator's metrics)
 * @param now a clock in milliseconds; default `performance.now`
 */
export function observeAcmeRequests(
  send: RequestAdapter,
  endpoints: AcmeEndpoints,
  record: AcmeRequestRecorder,
  now: () => number = () => performance.now(),
): RequestAdapter {
  return async (config: AdapterRequestConfig): Promise<unknown> => {
    const url = config.url ?? '';
    const before = endpoints.endpointOf(url);
    const startedMs = now();
    const finish = (response: ResponseLike | undefined): void => {
      const seconds = (now() - startedMs) / 1000;
      if (response?.status === undefined) {
        record(before, noAnswerStatus(config.signal), seconds);
        return;
      }
      const endpoint = endpoints.learn(url, before, answerOf(response, before));
      record(endpoint, String(response.status), seconds);
    };
    try {
      const response = (await send(config)) as ResponseLike;
      finish(response);
      return response;
    } catch (err) {
      // acme-client's validateStatus refuses every answer, so its successes arrive here too.
      finish((err as { response?: ResponseLike }).response);
      throw err;
    }
  };
}

/**
 * Sends a request to the CA with `fetch` (the directory, renewalInfo: Portico's own requests, not
 * acme-client's) and records it with `record`, as `observeAcmeRequests` does, timed to the
 * answer's headers. Returns fetch's answer; rethrows its error.
 *
 * @param endpoint what the request is for
 * @param url the URL fetched
 * @param init fetch's options; its `signal` tells a timeout from a cancellation
 */
export async function observedFetch(
  endpoint: AcmeEndpoint,
  url: string,
  init: RequestInit,
  record: AcmeRequestRecorder,
  now: () => number = () => performance.now(),
): Promise<Response> {
  const startedMs = now();
  try {
    const response = await fetch(url, init);
    record(endpoint, String(response.status), (now() - startedMs) / 1000);
    return response;
  } catch (err) {
    record(endpoint, noAnswerStatus(init.signal), (now() - startedMs) / 1000);
    throw err;
  }
}
