/**
 * The Redis key layout. Every key of one (domain, API key) pair carries the same hash tag
 * `{<domain>|<keyId>}`, so in Redis Cluster they hash to one slot (Redis Cluster specification,
 * "Hash tags") and one Lua script may touch them all:
 *
 *   prl:{<domain>|<keyId>}:m:<minute index>   admitted requests in that clock minute (TTL: window + grace)
 *   prl:{<domain>|<keyId>}:d:<day index>      admitted requests in that UTC day       (TTL: window + grace)
 *   prl:{<domain>|<keyId>}:rej                requests refused while limited (TTL: until the limit resets)
 *   prl:{<domain>|<keyId>}:ban                present while the key is banned (TTL: the ban's duration)
 *
 * Domain and key id are percent-encoded (encodeURIComponent), so neither can contain `{`, `}`, `|` or
 * `:` and end the tag or a field early. A check without a key id limited by the client's address
 * (`missingKeyId: LimitByRemoteAddress`, `limits.ts`) uses the tag `{<domain>|@<address>}`: `@` is
 * never left as it is by encodeURIComponent, so no key id's counters can be an address's. Counters do not depend on the plan or the config version: a
 * key that changes plan, or a config reload, keeps its counts. Pure.
 */
import type { CounterSubject } from './limits.js';
import type { TimeWindow } from './windows.js';

export const KEY_PREFIX = 'prl';

export interface CounterKeys {
  readonly minute: string;
  readonly day: string;
  readonly rejected: string;
  readonly ban: string;
}

/** The hash tag of one (domain, key id) pair, braces included; of a client address with `remoteAddress`. */
export function hashTag(domain: string, keyId: string, subject: CounterSubject = 'keyId'): string {
  const marker = subject === 'remoteAddress' ? '@' : '';
  return `{${encodeURIComponent(domain)}|${marker}${encodeURIComponent(keyId)}}`;
}

/** The four keys of a check in the given windows. */
export function counterKeys(
  domain: string,
  keyId: string,
  windows: { minute: TimeWindow; day: TimeWindow },
  subject: CounterSubject = 'keyId',
): CounterKeys {
  const base = `${KEY_PREFIX}:${hashTag(domain, keyId, subject)}`;
  return {
    minute: `${base}:m:${windows.minute.index}`,
    day: `${base}:d:${windows.day.index}`,
    rejected: `${base}:rej`,
    ban: `${base}:ban`,
  };
}
