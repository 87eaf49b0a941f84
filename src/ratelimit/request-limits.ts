/**
 * What one `ShouldRateLimit` call may carry (docs/ratelimits.md, "Request limits"). A check costs
 * in proportion to its descriptors (one Redis script each) and its entries (scanned for `key_id`
 * and `plan`); without bounds one call of 40,000 descriptors (900 KB) held the service for seconds,
 * swamped Redis for every other client and grew the process by more than 1 GB.
 *
 * Two layers:
 * - the gRPC message itself: at most `MAX_REQUEST_MESSAGE_BYTES`, enforced by @grpc/grpc-js
 *   (`grpc.max_receive_message_length`) from the 5-byte length prefix of the message, before it is
 *   buffered or decoded; beyond it the call fails with `RESOURCE_EXHAUSTED` (the gRPC status for
 *   "message larger than max", grpc/grpc doc/statuscodes.md);
 * - the decoded request's shape, `DEFAULT_REQUEST_LIMITS`: beyond any of them `checkRequestLimits`
 *   throws `InvalidRequestError`, which the gRPC layer answers with `INVALID_ARGUMENT` and the message.
 *
 * The message bound is the tighter one for long values (16 descriptors of 16 entries with 1024
 * characters each do not fit into 16 KiB); the counts bound what fits into 16 KiB when the values
 * are short or empty (an empty descriptor is 2 bytes on the wire). Measured on the project's
 * machine: decoding 16 KiB of empty descriptors takes about 2 ms, 64 KiB about 15 ms; a typical
 * check (one descriptor with `key_id` and `plan`) is about 70 bytes. The envoyproxy/ratelimit
 * service and gRPC servers in general cap the message size the same way (gRPC's
 * `grpc.max_receive_message_length`, 4 MiB by default). Pure: no I/O.
 */
import { InvalidRequestError, type RequestBound } from './errors.js';
import type { DescriptorEntry } from './limits.js';
import type { RateLimitRequest } from './protocol.js';

// The bounds live beside InvalidRequestError, which names the one broken; exported here too.
export { REQUEST_BOUNDS, type RequestBound } from './errors.js';

/** Bytes of one serialized `RateLimitRequest` the gRPC server accepts (16 KiB). */
export const MAX_REQUEST_MESSAGE_BYTES = 16 * 1024;

/** Bounds on the shape of one decoded `RateLimitRequest`. */
export interface RequestLimits {
  /** Descriptors in one request. */
  readonly maxDescriptors: number;
  /** Entries in one descriptor. */
  readonly maxEntriesPerDescriptor: number;
  /** Characters (UTF-16 code units, as JavaScript counts them) of an entry's key, and of its value. */
  readonly maxEntryLength: number;
  /** Characters of `domain` (a policy's `<namespace>/<name>` is at most 63 + 1 + 253 = 317). */
  readonly maxDomainLength: number;
}

/**
 * The bounds the service enforces. Envoy sends one descriptor per matching `rate_limits` entry of a
 * route, each with one entry per action; Portico's own wiring sends one descriptor of two entries
 * (`key_id`, `plan`). An API key id is an id, not the key: 1024 characters is far above any real one.
 */
export const DEFAULT_REQUEST_LIMITS: RequestLimits = {
  maxDescriptors: 16,
  maxEntriesPerDescriptor: 16,
  maxEntryLength: 1024,
  maxDomainLength: 512,
};

function tooLong(what: string, length: number, max: number, bound: RequestBound): InvalidRequestError {
  return new InvalidRequestError(
    bound,
    `${what} is ${length} characters long; at most ${max} are allowed. Shorten it, or leave it out of ` +
      'the rate_limits actions.',
  );
}

function checkDescriptor(d: number, entries: readonly DescriptorEntry[], limits: RequestLimits): void {
  if (entries.length > limits.maxEntriesPerDescriptor) {
    throw new InvalidRequestError(
      'entries',
      `descriptors[${d}] has ${entries.length} entries; at most ${limits.maxEntriesPerDescriptor} are ` +
        'allowed. Send fewer actions in one rate_limits entry.',
    );
  }
  for (let e = 0; e < entries.length; e++) {
    const key = entries[e]?.key ?? '';
    const value = entries[e]?.value ?? '';
    if (key.length > limits.maxEntryLength) {
      throw tooLong(`descriptors[${d}].entries[${e}].key`, key.length, limits.maxEntryLength, 'entry_length');
    }
    if (value.length > limits.maxEntryLength) {
      throw tooLong(
        `descriptors[${d}].entries[${e}].value`,
        value.length,
        limits.maxEntryLength,
        'entry_length',
      );
    }
  }
}

/**
 * Checks `request` against `limits`; returns nothing when it is within them.
 *
 * @throws InvalidRequestError naming the first bound broken (its `bound`) and where, e.g.
 *   `descriptors[3] has 20 entries; at most 16 are allowed`
 */
export function checkRequestLimits(
  request: RateLimitRequest,
  limits: RequestLimits = DEFAULT_REQUEST_LIMITS,
): void {
  const domain = request.domain ?? '';
  if (domain.length > limits.maxDomainLength) {
    throw tooLong('domain', domain.length, limits.maxDomainLength, 'domain_length');
  }
  const descriptors = request.descriptors ?? [];
  if (descriptors.length > limits.maxDescriptors) {
    throw new InvalidRequestError(
      'descriptors',
      `the request has ${descriptors.length} descriptors; at most ${limits.maxDescriptors} are allowed. ` +
        'Send fewer rate_limits actions per request.',
    );
  }
  for (let d = 0; d < descriptors.length; d++) {
    checkDescriptor(d, descriptors[d]?.entries ?? [], limits);
  }
}
