/**
 * Nonces for acme-client's signed requests without a round trip of their own.
 *
 * acme-client 5 asks the CA's newNonce resource for a fresh nonce before every signed request
 * (`HEAD newNonce`, then the POST), and ignores the `Replay-Nonce` the CA puts on every successful
 * POST answer (RFC 8555 §6.5: "The server MUST include a Replay-Nonce header field in every
 * successful response to a POST request"; §7.2: a client may use it for its next request). That is
 * one request to the CA in two spent on nonces, and worse: Node's HTTP client does not keep the
 * connection of a HEAD answer that carries no Content-Length (Pebble's newNonce answer; measured:
 * 20 HEAD requests through acme-client's axios opened 20 TLS connections, 20 GETs opened 1), so
 * each nonce cost a TCP and TLS handshake. In a 1,000-domain ramp that was the operator's largest
 * single CPU cost (docs/performance.md).
 *
 * `reuseReplayNonces` wraps the adapter that sends acme-client's requests:
 * - the `Replay-Nonce` of every successful (2xx) answer to a request other than newNonce is kept
 *   in a `ReplayNoncePool`, per CA origin;
 * - acme-client's `HEAD newNonce` is answered from the pool when it holds a nonce no older than its
 *   maximum age, without a request to the CA (a `200` with that `Replay-Nonce`, as the CA answers);
 * - otherwise it is sent as `GET newNonce`, which RFC 8555 §7.2 allows as well (the CA answers
 *   `204 No Content`), so the connection is kept.
 * A pooled nonce the CA no longer accepts costs one `badNonce` answer, which carries a fresh nonce
 * that acme-client retries with (RFC 8555 §6.5; acme-client retries up to 5 times); nonces from error answers are never
 * pooled, since acme-client itself uses the one of a `badNonce` answer.
 */
import type { AdapterRequestConfig, RequestAdapter } from './request-timeout.js';

/** A kept nonce and when it arrived (milliseconds, the pool's clock). */
interface KeptNonce {
  readonly nonce: string;
  readonly receivedAtMs: number;
}

export interface ReplayNoncePoolOptions {
  /** Nonces kept per CA origin; the oldest is dropped past this. Positive integer. */
  readonly capacity: number;
  /** A nonce older than this (milliseconds) is not handed out. */
  readonly maxAgeMs: number;
  /** Clock in milliseconds; default `performance.now`. */
  readonly now?: () => number;
}

/** Default options: 64 nonces per CA, each handed out within 30 s of its arrival. */
export const REPLAY_NONCE_POOL_DEFAULTS: ReplayNoncePoolOptions = { capacity: 64, maxAgeMs: 30_000 };

/**
 * Unused nonces received from ACME CAs, newest first, per origin (`https://ca.example:14000`).
 * Each nonce is handed out at most once (RFC 8555 §6.5: a nonce is good for one request).
 */
export class ReplayNoncePool {
  readonly #capacity: number;
  readonly #maxAgeMs: number;
  readonly #now: () => number;
  readonly #byOrigin = new Map<string, KeptNonce[]>();

  /** @throws RangeError when `capacity` is not a positive integer or `maxAgeMs` is negative */
  constructor(options: ReplayNoncePoolOptions = REPLAY_NONCE_POOL_DEFAULTS) {
    if (!Number.isInteger(options.capacity) || options.capacity <= 0)
      throw new RangeError(`the nonce pool's capacity must be a positive integer, got ${options.capacity}`);
    if (!(options.maxAgeMs >= 0))
      throw new RangeError(`the nonce pool's maximum age must be ≥ 0 ms, got ${options.maxAgeMs}`);
    this.#capacity = options.capacity;
    this.#maxAgeMs = options.maxAgeMs;
    this.#now = options.now ?? (() => performance.now());
  }

  /** Keeps `nonce`, received from `origin` just now. */
  add(origin: string, nonce: string): void {
    let kept = this.#byOrigin.get(origin);
    if (kept === undefined) {
      kept = [];
      this.#byOrigin.set(origin, kept);
    }
    kept.push({ nonce, receivedAtMs: this.#now() });
    if (kept.length > this.#capacity) kept.shift();
  }

  /** The newest nonce of `origin` within the maximum age, removed from the pool; else undefined. */
  take(origin: string): string | undefined {
    const kept = this.#byOrigin.get(origin);
    if (kept === undefined) return undefined;
    const newest = kept.pop();
    if (newest === undefined || this.#now() - newest.receivedAtMs > this.#maxAgeMs) {
      // The newest is too old, so all are: start again.
      this.#byOrigin.delete(origin);
      return undefined;
    }
    if (kept.length === 0) this.#byOrigin.delete(origin);
    return newest.nonce;
  }

  /** How many nonces are kept for `origin` (including expired ones not yet dropped). */
  size(origin: string): number {
    return this.#byOrigin.get(origin)?.length ?? 0;
  }
}

/** The parts of an axios response this module reads or makes. */
interface NonceResponse {
  readonly status?: number;
  readonly headers?: unknown;
}

/**
 * How the adapter answers a newNonce request from the pool: it must settle as axios's own adapter
 * settles a `200` (resolve, or reject with an AxiosError when the request's `validateStatus` refuses
 * it, as acme-client's does for every answer).
 */
export type SettleResponse = (config: AdapterRequestConfig, response: { status: number }) => unknown;

function replayNonceOf(response: NonceResponse | undefined): string | undefined {
  const headers = response?.headers as Record<string, unknown> | undefined;
  const nonce = headers?.['replay-nonce'];
  return typeof nonce === 'string' && nonce.length > 0 ? nonce : undefined;
}

function isSuccess(response: NonceResponse | undefined): boolean {
  const status = response?.status;
  return status !== undefined && status >= 200 && status < 300;
}

function originOf(url: string | undefined): string | undefined {
  if (url === undefined) return undefined;
  try {
    return new URL(url).origin;
  } catch {
    return undefined;
  }
}

/**
 * An adapter that serves acme-client's newNonce requests (the only HEAD requests it sends) from
 * `pool` and fills the pool from the CA's successful answers, sending everything else with `send`.
 *
 * @param send the adapter that sends a request to the CA (axios's http adapter)
 * @param settle settles a made-up `200` answer the way `send` settles a real one
 * @param pool where nonces are kept (one per process serves every CA, keyed by origin)
 */
export function reuseReplayNonces(
  send: RequestAdapter,
  settle: SettleResponse,
  pool: ReplayNoncePool,
): RequestAdapter {
  return async (config: AdapterRequestConfig): Promise<unknown> => {
    const origin = originOf(config.url);
    const isNonceRequest = (config.method ?? 'get').toLowerCase() === 'head';
    if (isNonceRequest && origin !== undefined) {
      const nonce = pool.take(origin);
      if (nonce !== undefined) {
        const answer = {
          data: '',
          status: 200,
          statusText: 'OK',
          headers: { 'replay-nonce': nonce },
          config,
          request: undefined,
        };
        return settle(config, answer);
      }
      // RFC 8555 §7.2: GET newNonce answers 204 with a nonce; unlike HEAD, its connection is kept.
      config.method = 'get';
    }
    const keep = (response: NonceResponse | undefined): void => {
      if (isNonceRequest || origin === undefined || !isSuccess(response)) return;
      const nonce = replayNonceOf(response);
      if (nonce !== undefined) pool.add(origin, nonce);
    };
    try {
      const response = (await send(config)) as NonceResponse;
      keep(response);
      return response;
    } catch (err) {
      // acme-client's validateStatus refuses every answer, so its successes arrive here too.
      keep((err as { response?: NonceResponse }).response);
      throw err;
    } finally {
      if (isNonceRequest) config.method = 'head';
    }
  };
}
