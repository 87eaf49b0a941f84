/**
 * One copy of the strings every cached object repeats. JSON.parse makes a new string for every
 * value it reads, so 10,000 cached CustomDomains hold 10,000 copies of "portico.dev/v1alpha1", of
 * "CertificateReady", "True", "RecordMatches", the issuer's name, the platform's CNAME target… A
 * 3,000-domain heap snapshot held 3.3 MiB in such copies (about 1.1 KiB per domain,
 * docs/performance.md). The informers pass each object through `shareCommonStrings` as it arrives,
 * so the cache keeps one copy of each.
 *
 * Only the values of keys whose values come from a small set are shared (`SHARED_VALUE_KEYS`, and
 * the entries of `finalizers`), at most MAX_SHARED_LENGTH characters long, and the table stops
 * growing at MAX_SHARED_STRINGS entries: a value that is unique after all (a label value, a DNS
 * record's value) costs one entry, never more than the table's bound.
 */

/**
 * Keys whose string values are shared: Kubernetes' kind fields and condition fields, the namespace
 * (a platform has far fewer namespaces than domains, and every cache repeats it in every object),
 * and a few of Portico's.
 */
const SHARED_VALUE_KEYS: ReadonlySet<string> = new Set([
  'apiVersion',
  'namespace',
  'kind',
  'type',
  'status',
  'reason',
  'phase',
  'result',
  'issuer',
  'value',
  'pathType',
  'ingressClassName',
  'controllerName',
  'protocol',
  'group',
]);

/** Longer values are left as they are (ms of a `type: string` compare, not worth a table entry). */
const MAX_SHARED_LENGTH = 80;
/** The table's bound: about 4,096 × 100 bytes at most. */
const MAX_SHARED_STRINGS = 4_096;
/** How deep `shareCommonStrings` walks (a CustomDomain's deepest shared value is at 4). */
const MAX_DEPTH = 8;

const table = new Map<string, string>();

/**
 * The one copy of `value` this process keeps, or `value` itself when it is too long or the table is
 * full and does not hold it.
 */
export function sharedString(value: string): string {
  if (value.length > MAX_SHARED_LENGTH) return value;
  const kept = table.get(value);
  if (kept !== undefined) return kept;
  if (table.size < MAX_SHARED_STRINGS) table.set(value, value);
  return value;
}

/**
 * Replaces, in place, the string values of `SHARED_VALUE_KEYS` and the entries of `finalizers`
 * arrays anywhere in `obj` (to MAX_DEPTH levels) by their shared copies (`sharedString`), and every
 * other string value or array entry of at most MAX_SHARED_LENGTH characters by the first equal one
 * met in `alike` or in `obj` itself: a CustomDomain repeats its hostname six times and one timestamp
 * up to eight (each condition's lastTransitionTime, checkedAt, verifiedAt…), each a copy of its own
 * as parsed; its Ingress, Secret and HostnameClaim repeat its name, UID and hostname again.
 *
 * `alike`: cached objects related to `obj` (its owner, the objects it owns), walked first (read,
 * never changed; undefined entries skipped), so `obj` keeps their copies of the values they share
 * and the caches of related objects hold one copy between them. Changes no value of `obj`, only
 * which copy holds it; idempotent. Property order and object shapes are kept (values are assigned to
 * existing keys only).
 */
export function shareCommonStrings(obj: unknown, alike: readonly unknown[] = []): void {
  const seen = new Map<string, string>();
  for (const other of alike) collect(other, 0, seen);
  share(obj, 0, seen);
}

/** Records in `seen` the short string values of `obj` (to MAX_DEPTH levels) not yet in it; reads only. */
function collect(obj: unknown, depth: number, seen: Map<string, string>): void {
  if (depth > MAX_DEPTH || obj === null || typeof obj !== 'object') return;
  for (const value of Array.isArray(obj) ? (obj as unknown[]) : Object.values(obj)) {
    if (typeof value !== 'string') collect(value, depth + 1, seen);
    else if (value.length <= MAX_SHARED_LENGTH && !seen.has(value)) seen.set(value, value);
  }
}

/** `shareCommonStrings` below `depth`, with `seen` the strings already met in the same object. */
function share(obj: unknown, depth: number, seen: Map<string, string>): void {
  if (depth > MAX_DEPTH || obj === null || typeof obj !== 'object') return;
  if (Array.isArray(obj)) {
    for (let i = 0; i < obj.length; i++) {
      const item: unknown = obj[i];
      if (typeof item === 'string') obj[i] = sameString(item, seen);
      else share(item, depth + 1, seen);
    }
    return;
  }
  const record = obj as Record<string, unknown>;
  for (const key of Object.keys(record)) {
    const value = record[key];
    if (typeof value === 'string') {
      record[key] = SHARED_VALUE_KEYS.has(key) ? sharedString(value) : sameString(value, seen);
    } else if (key === 'finalizers' && Array.isArray(value)) {
      shareEntries(value);
    } else {
      share(value, depth + 1, seen);
    }
  }
}

/** The first copy of `value` met in this object (`seen`), when it is short enough to look up. */
function sameString(value: string, seen: Map<string, string>): string {
  if (value.length > MAX_SHARED_LENGTH) return value;
  const kept = seen.get(value);
  if (kept !== undefined) return kept;
  seen.set(value, value);
  return value;
}

/** Replaces the string entries of `list` by their shared copies. */
function shareEntries(list: unknown[]): void {
  for (let i = 0; i < list.length; i++) {
    const entry = list[i];
    if (typeof entry === 'string') list[i] = sharedString(entry);
  }
}
