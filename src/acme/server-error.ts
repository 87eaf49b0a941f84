/**
 * A CA's server error (HTTP 5xx, RFC 8555 §6.7 `serverInternal` and the like) to a signed request
 * ends the order attempt at once, naming the CA's answer.
 *
 * acme-client 5 replays a request that got a 5xx answer, up to 5 times, after Retry-After seconds
 * (or 5, 10, 15 … without one). A signed request (a JWS POST) cannot be replayed: its nonce was
 * spent when the CA read it (RFC 8555 §6.5), so the replay is answered `badNonce`, acme-client then
 * signs the request again with that answer's fresh nonce, and a CA that keeps failing is retried
 * that way until acme-client's badNonce retries run out. Seen against Pebble: a new order refused
 * with `500 serverInternal` took 30 s and 12 requests to fail, and failed with "JWS has an invalid
 * anti-replay nonce", the CA's own answer lost. `failFastOnServerError` makes the 5xx answer to a
 * POST end the request with `AcmeServerError` instead; the attempt fails with the CA's problem, and
 * the next attempt follows the published back-off (docs/customdomains.md). Requests without a body
 * to sign (GET) keep acme-client's own retries.
 */
import { AcmeStepError, type AcmeStepContext } from './step-error.js';
import { appendResponseTransform, problemOf, type ResponseTransformHost } from './rate-limit.js';

/** What the CA answered. */
export interface ServerErrorAnswer {
  /** HTTP status, 500–599. */
  readonly status: number;
  /** The problem document's `type`, if it had one (e.g. `urn:ietf:params:acme:error:serverInternal`). */
  readonly problemType: string | undefined;
  /** The problem document's `detail`, if it had one, on one line. */
  readonly detail: string | undefined;
}

/** Where in the issuance it happened, for the message: set by the issuer. */
export type ServerErrorContext = AcmeStepContext;

/**
 * The CA answered a signed request with a server error (HTTP 5xx). A normal failed attempt:
 * `reason` becomes the CertificateReady reason and the next attempt follows the published back-off.
 */
export class AcmeServerError extends AcmeStepError<ServerErrorAnswer> {
  override readonly code = 'ACME_SERVER_ERROR';
  override readonly reason = 'IssuanceFailed';
  readonly answer: ServerErrorAnswer;

  constructor(answer: ServerErrorAnswer, context?: ServerErrorContext, options?: ErrorOptions) {
    super(serverErrorMessage(answer, context), context, options);
    this.name = 'AcmeServerError';
    this.answer = answer;
  }

  protected get facts(): ServerErrorAnswer {
    return this.answer;
  }
}

/** The message of an `AcmeServerError`; without a trailing period (status appends to it). */
export function serverErrorMessage(answer: ServerErrorAnswer, context?: ServerErrorContext): string {
  const what = context ? `the ${context.step} for ${context.hostname}` : 'a request';
  const problem = [answer.problemType, answer.detail].filter(Boolean).join(': ');
  return `the ACME CA failed ${what} (HTTP ${answer.status}${problem ? `, ${problem}` : ''})`;
}

/**
 * The server-error error for a CA answer to a request sent with `method`, or undefined when the
 * answer is not a 5xx or the request was not a POST.
 *
 * @param method the request's method, any case (axios writes it in lower case)
 * @param data the parsed body (a problem document, or anything)
 */
export function serverErrorOf(
  method: string | undefined,
  status: number | undefined,
  data: unknown,
): AcmeServerError | undefined {
  if (status === undefined || status < 500 || status > 599 || method?.toLowerCase() !== 'post')
    return undefined;
  return new AcmeServerError({ status, ...problemOf(data) });
}

const INSTALLED = Symbol.for('portico.acme.failFastOnServerError');

/**
 * Makes every 5xx answer to a POST of acme-client's HTTP client throw `AcmeServerError` at once,
 * instead of acme-client replaying the spent signed request (an error thrown while the response is
 * decoded carries no request config, which acme-client's retry interceptor passes through
 * untouched). Idempotent; affects the whole process, since acme-client has one HTTP client.
 *
 * @param instance acme-client's axios instance, `acme.axios`
 */
export function failFastOnServerError(instance: ResponseTransformHost): void {
  const host = instance as ResponseTransformHost & { [INSTALLED]?: true };
  if (host[INSTALLED]) return;
  appendResponseTransform(instance, function (data, _headers, status) {
    const failed = serverErrorOf(this?.method, status, data);
    if (failed) throw failed;
    return data;
  });
  host[INSTALLED] = true;
}
