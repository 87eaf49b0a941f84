/**
 * Which of the configured ACME issuers (CAs, in order) a domain's next order goes to, from how each
 * CA answered the orders sent to it. Pure: no I/O, no clock (times are milliseconds since the epoch,
 * passed in).
 *
 * The rule (docs/install.md, "Several ACME issuers"):
 * - An order the CA failed (an HTTP 5xx answer, no answer within the request timeout, the CA not
 *   reachable, its directory unreadable, the account registration refused) counts one failure in a
 *   row against that CA; an issued certificate resets the count. A failure that says nothing about
 *   the CA (a failed HTTP-01 validation, a CAA refusal, a cancelled order) leaves it as it is.
 * - Once a CA has failed `failuresBeforeFailover` orders in a row, it is passed over for `passOverMs`:
 *   the next orders go to the next CA in order. After that it is tried again; one more failure (the
 *   count is still at the threshold) passes it over again at once.
 * - A rate limit (`rateLimited`, RFC 8555 §6.7) whose Retry-After is at least `longRetryAfterMs`
 *   away passes the CA over at once until that time; a shorter one only holds the hostname at that
 *   CA (rate-limit.ts) and does not count.
 * - A renewal asks first for the CA that issued the certificate it replaces (`preferred`), then the
 *   others in order.
 * - When every CA is passed over, the one whose pass-over ends first is asked (ties: in order), so
 *   an order is always placed somewhere and fails with that CA's reason rather than waiting
 *   silently.
 */
import { AcmeDirectoryError } from './directory.js';
import { AcmeRateLimitedError } from './rate-limit.js';
import { AcmeRequestTimeoutError } from './request-timeout.js';
import { AcmeServerError } from './server-error.js';

/** When a CA is passed over. Durations in milliseconds. */
export interface FailoverPolicy {
  /** Orders the CA fails in a row before it is passed over; positive integer. */
  readonly failuresBeforeFailover: number;
  /** A `rateLimited` answer whose Retry-After is at least this far away passes the CA over at once. */
  readonly longRetryAfterMs: number;
  /** How long a CA that reached `failuresBeforeFailover` is passed over before it is tried again. */
  readonly passOverMs: number;
}

/** What Portico knows of one CA's recent answers. */
export interface IssuerHealth {
  /** Orders it failed in a row (CA failures only). */
  readonly consecutiveFailures: number;
  /** Milliseconds since the epoch until which new orders go elsewhere; absent: not passed over. */
  readonly passedOverUntilMs?: number;
}

export const HEALTHY: IssuerHealth = { consecutiveFailures: 0 };

/** How an order ended, as far as the CA's health goes. */
export type OrderResult =
  | { readonly kind: 'issued' }
  /** The CA failed the order (5xx, no answer, unreachable, directory, account refused). */
  | { readonly kind: 'ca-failure' }
  /** The CA answered `rateLimited`; `retryAfterMs` is when it accepts requests again, if it said. */
  | { readonly kind: 'rate-limited'; readonly retryAfterMs?: number }
  /** An outcome that says nothing about the CA: a failed validation, CAA, a cancellation. */
  | { readonly kind: 'not-the-ca' };

/** Node's and axios's codes for a CA that could not be reached or dropped the connection. */
const UNREACHABLE_CODES = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ENOTFOUND',
  'EAI_AGAIN',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ETIMEDOUT',
  'ECONNABORTED',
  'EPIPE',
  'ERR_SOCKET_CONNECTION_TIMEOUT',
  'UND_ERR_CONNECT_TIMEOUT',
  'UND_ERR_SOCKET',
]);

/**
 * Whether `err`, or an error in its `cause` chain (or among an AggregateError's errors), carries a
 * Node or axios code of a CA that could not be reached or dropped the connection (ECONNREFUSED,
 * ECONNRESET, ENOTFOUND, EHOSTUNREACH, ...).
 */
export function unreachable(err: unknown): boolean {
  for (let e: unknown = err, depth = 0; e !== undefined && e !== null && depth < 8; depth += 1) {
    const code = (e as { code?: unknown }).code;
    if (typeof code === 'string' && UNREACHABLE_CODES.has(code)) return true;
    // AggregateError of a dual-stack connect (Node's happy eyeballs).
    const errors = (e as { errors?: unknown }).errors;
    if (Array.isArray(errors) && errors.some((x) => unreachable(x))) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}

/**
 * What a failed order says about its CA. `AcmeServerError`, `AcmeRequestTimeoutError`,
 * `AcmeDirectoryError`, an error whose `caFailure` is true (the account registration the CA
 * refused, account.ts) and an error with a connection code (ECONNREFUSED, ...) anywhere in its
 * `cause` chain are CA failures; `AcmeRateLimitedError` is a rate limit; anything else is not the
 * CA's, and so is an error whose `caFailure` is false whatever its cause (the DNS-01 challenge zone
 * that could not be reached, issuer.ts `Dns01PublishError`: another CA would meet the same zone).
 *
 * @param nowMs for a Retry-After the CA gave as a date
 */
export function orderResultOf(err: unknown): OrderResult {
  if ((err as { caFailure?: unknown } | null)?.caFailure === false) return { kind: 'not-the-ca' };
  if (err instanceof AcmeRateLimitedError) {
    const at = err.retryAfter?.getTime();
    return at === undefined ? { kind: 'rate-limited' } : { kind: 'rate-limited', retryAfterMs: at };
  }
  if (
    err instanceof AcmeServerError ||
    err instanceof AcmeRequestTimeoutError ||
    err instanceof AcmeDirectoryError ||
    (err as { caFailure?: unknown } | null)?.caFailure === true ||
    unreachable(err)
  ) {
    return { kind: 'ca-failure' };
  }
  return { kind: 'not-the-ca' };
}

/**
 * The CA's health after an order ended with `result` at `nowMs`.
 *
 * @throws RangeError when `policy.failuresBeforeFailover` is not a positive integer
 */
export function recordOrderResult(
  health: IssuerHealth,
  result: OrderResult,
  nowMs: number,
  policy: FailoverPolicy,
): IssuerHealth {
  if (!Number.isInteger(policy.failuresBeforeFailover) || policy.failuresBeforeFailover < 1)
    throw new RangeError(
      `failuresBeforeFailover must be a positive integer, got ${policy.failuresBeforeFailover}`,
    );
  switch (result.kind) {
    case 'issued':
      return HEALTHY;
    case 'not-the-ca':
      return health;
    case 'rate-limited': {
      const at = result.retryAfterMs;
      if (at === undefined || at - nowMs < policy.longRetryAfterMs) return health;
      return {
        consecutiveFailures: health.consecutiveFailures + 1,
        passedOverUntilMs: Math.max(at, health.passedOverUntilMs ?? 0),
      };
    }
    case 'ca-failure': {
      const consecutiveFailures = health.consecutiveFailures + 1;
      if (consecutiveFailures < policy.failuresBeforeFailover) return { ...health, consecutiveFailures };
      return {
        consecutiveFailures,
        passedOverUntilMs: Math.max(nowMs + policy.passOverMs, health.passedOverUntilMs ?? 0),
      };
    }
  }
}

/** Whether the CA is passed over at `nowMs`. */
export function passedOver(health: IssuerHealth | undefined, nowMs: number): boolean {
  return health?.passedOverUntilMs !== undefined && health.passedOverUntilMs > nowMs;
}

/**
 * The issuer the next order goes to: `preferred` (the CA that issued the certificate being renewed)
 * when it is configured and not passed over, else the first in `order` not passed over, else the
 * one whose pass-over ends first (ties: `preferred`, then in order).
 *
 * @param order the configured issuer names, in order; not empty
 * @param health by issuer name; a name without an entry is healthy
 * @throws RangeError when `order` is empty
 */
export function selectIssuer(
  order: readonly string[],
  health: ReadonlyMap<string, IssuerHealth>,
  nowMs: number,
  preferred?: string,
): string {
  if (order.length === 0) throw new RangeError('no ACME issuer is configured');
  const candidates =
    preferred !== undefined && order.includes(preferred)
      ? [preferred, ...order.filter((name) => name !== preferred)]
      : order;
  const open = candidates.find((name) => !passedOver(health.get(name), nowMs));
  if (open !== undefined) return open;
  let best = candidates[0] as string;
  for (const name of candidates) {
    if ((health.get(name)?.passedOverUntilMs ?? 0) < (health.get(best)?.passedOverUntilMs ?? 0)) best = name;
  }
  return best;
}
