/**
 * Errors of the rate-limit service, one class per case, each with a stable `code` (the fastify
 * `lib/errors.js` habit). Every message says what happened and what to do.
 *
 * | code                          | when                                                           |
 * |-------------------------------|----------------------------------------------------------------|
 * | RATELIMIT_CONFIG_REJECTED     | config.json cannot be loaded at all (not JSON, unknown version) |
 * | RATELIMIT_STORE_UNAVAILABLE   | Redis did not answer (down, timeout, cluster not ready)        |
 * | RATELIMIT_SERVER_CONFIG       | a flag or variable of `portico ratelimit-server` is wrong      |
 * | RATELIMIT_INVALID_REQUEST     | a check is over a bound of `request-limits.ts` (INVALID_ARGUMENT) |
 */
/** The bounds a request may break (the `bound` label of `portico_ratelimit_invalid_requests_total`). */
export const REQUEST_BOUNDS = ['descriptors', 'entries', 'entry_length', 'domain_length'] as const;
/** Which bound a request broke. */
export type RequestBound = (typeof REQUEST_BOUNDS)[number];

/** Base class, so callers can tell the service's failures from programming errors. */
export class RateLimitError extends Error {
  override readonly name: string = 'RateLimitError';
  readonly code: string = 'RATELIMIT_ERROR';
}

/** The whole config document was refused; the server keeps serving the last config it loaded. */
export class ConfigRejectedError extends RateLimitError {
  override readonly name = 'ConfigRejectedError';
  override readonly code = 'RATELIMIT_CONFIG_REJECTED';

  /**
   * @param reason UpperCamelCase reason shown on each policy's Enforced condition
   * @param message what is wrong, for a person
   */
  constructor(
    readonly reason: string,
    message: string,
  ) {
    super(message);
  }
}

/** Redis could not be reached or did not answer in time; the failure mode decides the answer. */
export class StoreUnavailableError extends RateLimitError {
  override readonly name = 'StoreUnavailableError';
  override readonly code = 'RATELIMIT_STORE_UNAVAILABLE';

  constructor(message: string, options?: { cause?: unknown }) {
    super(`Redis unavailable: ${message}`, options);
  }
}

/** A setting of `portico ratelimit-server` is missing or malformed; the message names the flag. */
export class ServerConfigError extends RateLimitError {
  override readonly name = 'ServerConfigError';
  override readonly code = 'RATELIMIT_SERVER_CONFIG';
}

/**
 * A `ShouldRateLimit` request is over one of the bounds of `request-limits.ts`; the gRPC layer answers
 * `INVALID_ARGUMENT` with the message, which names the bound, where the request broke it, and the
 * allowed maximum.
 */
export class InvalidRequestError extends RateLimitError {
  override readonly name = 'InvalidRequestError';
  override readonly code = 'RATELIMIT_INVALID_REQUEST';

  /**
   * @param bound which bound was broken
   * @param message what is wrong and what to send instead, for a person
   */
  constructor(
    readonly bound: RequestBound,
    message: string,
  ) {
    super(message);
  }
}

/** True for an InvalidRequestError, across realms. */
export function isInvalidRequestError(err: unknown): err is InvalidRequestError {
  return isRateLimitError(err) && err.code === 'RATELIMIT_INVALID_REQUEST';
}

/** True for any error of this module, across realms (checks the name and code, not the prototype). */
export function isRateLimitError(err: unknown): err is RateLimitError {
  return (
    typeof err === 'object' &&
    err !== null &&
    'code' in err &&
    typeof err.code === 'string' &&
    err.code.startsWith('RATELIMIT_')
  );
}
