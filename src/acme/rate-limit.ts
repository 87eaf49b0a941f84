/**
 * The CA's rate limits (RFC 8555 §6.6: HTTP 429 with a `rateLimited` problem and a Retry-After
 * header: wait for the Retry-After time, then retry, backing off; docs/customdomains.md,
 * `CARateLimited` and "Schedules").
 *
 * acme-client 5 retries a 429 itself, up to 5 times, sleeping Retry-After seconds (or 5, 10, 15 …
 * without one) inside the request, and then fails with the problem's `detail` alone. The order sits
 * in "Issuing" all that time, the wait shows nowhere in status, a re-verify cannot start a fresh
 * attempt, and the replayed request carries a nonce the CA has already spent. `failFastOnRateLimit`
 * makes a rate-limit answer end the order at once with `AcmeRateLimitedError`, which names the
 * answer and carries the Retry-After time; `RateLimitGate` then keeps the issuer from sending the CA
 * another request for that name before that time.
 */
import { AcmeStepError, type AcmeStepContext } from './step-error.js';

/** RFC 8555 §6.7. */
export const RATE_LIMITED_PROBLEM = 'urn:ietf:params:acme:error:rateLimited';

/** The longest Retry-After honoured, milliseconds (24 h): a longer or absurd value is clamped. */
export const MAX_RETRY_AFTER_MS = 24 * 60 * 60_000;

/**
 * The time a Retry-After header value points at (RFC 9110 §10.2.3): delay-seconds or an HTTP-date,
 * clamped to `MAX_RETRY_AFTER_MS` after `now`. Undefined when absent, malformed or not in the future.
 */
export function parseRetryAfter(value: string | undefined, now: Date): Date | undefined {
  const text = value?.trim() ?? '';
  if (text === '') return undefined;
  let at: number;
  if (/^\d+$/.test(text)) at = now.getTime() + Number(text) * 1000;
  else if (/[a-z]/i.test(text)) at = Date.parse(text);
  else return undefined;
  if (!Number.isFinite(at) || at <= now.getTime()) return undefined;
  return new Date(Math.min(at, now.getTime() + MAX_RETRY_AFTER_MS));
}

/** What the CA answered when it rate-limited a request. */
export interface RateLimitAnswer {
  /** HTTP status: 429, or another status whose problem type is `rateLimited`. */
  readonly status: number;
  /** The problem document's `type`, if it had one. */
  readonly problemType: string | undefined;
  /** The problem document's `detail`, if it had one. */
  readonly detail: string | undefined;
  /** The Retry-After time, if the header was there and in the future. */
  readonly retryAfter: Date | undefined;
  /** When the answer was received. */
  readonly receivedAt: Date;
}

/** Where in the issuance the CA said no, for the message: set by the issuer. */
export interface RateLimitContext extends AcmeStepContext {
  /** True when this attempt sent nothing: an earlier answer's Retry-After has not passed yet. */
  readonly withheld?: boolean;
}

/**
 * The CA rate-limited a request of the order (or an earlier answer's Retry-After still holds).
 * `reason` becomes the CertificateReady reason; `retryAfter` is the earliest time to ask again.
 */
export class AcmeRateLimitedError extends AcmeStepError<RateLimitAnswer, RateLimitContext> {
  override readonly code = 'ACME_RATE_LIMITED';
  override readonly reason = 'CARateLimited';
  readonly answer: RateLimitAnswer;

  constructor(answer: RateLimitAnswer, context?: RateLimitContext, options?: ErrorOptions) {
    super(rateLimitMessage(answer, context), context, options);
    this.name = 'AcmeRateLimitedError';
    this.answer = answer;
  }

  /** The earliest time the CA accepts another request, or undefined when it named none. */
  get retryAfter(): Date | undefined {
    return this.answer.retryAfter;
  }

  protected get facts(): RateLimitAnswer {
    return this.answer;
  }
}

/** The message of an `AcmeRateLimitedError`; without a trailing period (status appends to it). */
export function rateLimitMessage(answer: RateLimitAnswer, context?: RateLimitContext): string {
  const what = context ? `the ${context.step} for ${context.hostname}` : 'a request';
  const problem = [answer.problemType, answer.detail].filter(Boolean).join(': ');
  const answered = `HTTP ${answer.status}${answer.status === 429 ? ' Too Many Requests' : ''}${problem ? `, ${problem}` : ''}`;
  const wait = answer.retryAfter
    ? `it asked for no new request before ${answer.retryAfter.toISOString()} (Retry-After)`
    : 'it named no Retry-After time, so the published retry schedule applies';
  if (context?.withheld) {
    return `the ACME CA rate-limited ${what} at ${answer.receivedAt.toISOString()} (${answered}); ${wait}, so nothing was sent to it this time`;
  }
  return `the ACME CA rate-limited ${what} (${answered}); ${wait}`;
}

/**
 * The rate-limit error for a CA answer, or undefined when the answer is not a rate limit: status
 * 429, or an RFC 8555 problem of type `rateLimited` whatever the status.
 *
 * @param data the parsed body (a problem document, or anything)
 * @param retryAfterHeader the raw Retry-After header value
 */
export function rateLimitOf(
  status: number | undefined,
  data: unknown,
  retryAfterHeader: string | undefined,
  now: Date,
): AcmeRateLimitedError | undefined {
  const { problemType, detail } = problemOf(data);
  if (status === undefined || (status !== 429 && problemType !== RATE_LIMITED_PROBLEM)) return undefined;
  return new AcmeRateLimitedError({
    status,
    problemType,
    detail,
    retryAfter: parseRetryAfter(retryAfterHeader, now),
    receivedAt: now,
  });
}

/**
 * The `type` and `detail` (on one line) of an RFC 7807 problem document the CA answered (RFC 8555
 * §6.7), each undefined when absent or not a string.
 *
 * @param data the parsed body (a problem document, or anything)
 */
export function problemOf(data: unknown): { problemType: string | undefined; detail: string | undefined } {
  const problem = (data !== null && typeof data === 'object' ? data : {}) as {
    type?: unknown;
    detail?: unknown;
  };
  return {
    problemType: typeof problem.type === 'string' ? problem.type : undefined,
    detail: typeof problem.detail === 'string' ? problem.detail.replace(/\s+/g, ' ').trim() : undefined,
  };
}

/** The part of an axios instance this module touches (acme-client's `acme.axios`). */
export interface ResponseTransformHost {
  defaults: { transformResponse?: unknown };
}

/** The part of the request config a response transform reads. */
export interface RequestOfAnswer {
  readonly method?: string;
}

/**
 * Adds `transform` after the response transforms `instance` already has (axios's JSON parse among
 * them, so `data` is parsed): it sees every answer, and what it returns or throws is the answer.
 * axios calls it with the request's config as `this` (its `method` in lower case).
 */
export function appendResponseTransform(
  instance: ResponseTransformHost,
  transform: (this: RequestOfAnswer | undefined, data: unknown, headers: unknown, status?: number) => unknown,
): void {
  const existing = instance.defaults.transformResponse;
  const before = Array.isArray(existing) ? (existing as unknown[]) : existing ? [existing] : [];
  instance.defaults.transformResponse = [...before, transform];
}

const INSTALLED = Symbol.for('portico.acme.failFastOnRateLimit');

function headerValue(headers: unknown, name: string): string | undefined {
  const h = headers as { get?: (n: string) => unknown; [key: string]: unknown } | undefined;
  const value = typeof h?.get === 'function' ? h.get(name) : h?.[name];
  if (typeof value === 'number') return String(value);
  return typeof value === 'string' ? value : undefined;
}

/**
 * Makes every rate-limit answer to acme-client's HTTP client throw `AcmeRateLimitedError` at once,
 * instead of acme-client sleeping and replaying the request (its axios response interceptor retries
 * 429s; an error thrown while the response is decoded carries no request config, which that
 * interceptor passes through untouched). Answers other than rate limits (5xx included) keep
 * acme-client's own handling. Idempotent; affects the whole process, since acme-client has one
 * HTTP client.
 *
 * @param instance acme-client's axios instance, `acme.axios`
 */
export function failFastOnRateLimit(instance: ResponseTransformHost): void {
  const host = instance as ResponseTransformHost & { [INSTALLED]?: true };
  if (host[INSTALLED]) return;
  appendResponseTransform(instance, (data, headers, status) => {
    const limited = rateLimitOf(status, data, headerValue(headers, 'retry-after'), new Date());
    if (limited) throw limited;
    return data;
  });
  host[INSTALLED] = true;
}

/**
 * Per DNS name, the CA's last rate-limit answer whose Retry-After has not passed: the issuer asks
 * the CA nothing for that name before then, whenever the reconcile retries.
 */
export class RateLimitGate {
  readonly #byHostname = new Map<string, AcmeRateLimitedError>();

  /** Remembers `error` for `hostname` when it names a Retry-After time. */
  record(hostname: string, error: AcmeRateLimitedError): void {
    if (error.retryAfter) this.#byHostname.set(hostname, error);
  }

  /**
   * Throws an `AcmeRateLimitedError` (context `withheld`) while `hostname`'s last Retry-After is
   * after `now`; forgets it once passed.
   */
  check(hostname: string, now: Date): void {
    const last = this.#byHostname.get(hostname);
    if (!last) return;
    if (!last.retryAfter || last.retryAfter <= now) {
      this.#byHostname.delete(hostname);
      return;
    }
    throw new AcmeRateLimitedError(
      last.answer,
      { step: last.context?.step ?? 'order', hostname, withheld: true },
      { cause: last },
    );
  }
}
