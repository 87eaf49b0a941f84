import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';
import { describe, expect, it } from 'vitest';
import { hasFastProperties } from '../../test/support/v8-representation.js';
import { shareCommonStrings, sharedString } from './shared-strings.js';

setFlagsFromString('--expose-gc');
const gc = runInNewContext('gc') as () => void;

/** A CustomDomain as the API server sends it, for the `i`-th domain. */
function domainJson(i: number): string {
  return JSON.stringify({
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'CustomDomain',
    metadata: { name: `d${i}`, namespace: 'shop', finalizers: ['portico.dev/finalizer'], uid: `uid-${i}` },
    spec: { hostname: `d${i}.shop.example`, service: { name: 'web' } },
    status: {
      phase: 'Live',
      dnsRecords: [{ type: 'CNAME', name: `d${i}.shop.example`, value: 'sites.portico.example', ttl: 3600 }],
      certificate: { issuer: 'CN=Example Intermediate CA R11', serialNumber: `${i}` },
      conditions: ['Accepted', 'DNSVerified', 'CertificateReady', 'RoutesReady', 'Ready'].map((type) => ({
        type,
        status: 'True',
        reason: `${type}Reason`,
        message: `About d${i}.shop.example.`,
      })),
    },
  });
}

/**
 * Heap (bytes, after a GC) that the `n` objects `make(i)` returns hold while kept.
 */
function heapHeldBy(n: number, make: (i: number) => unknown): number {
  gc();
  const before = process.memoryUsage().heapUsed;
  const kept: unknown[] = [];
  for (let i = 0; i < n; i++) kept.push(make(i));
  gc();
  const used = process.memoryUsage().heapUsed - before;
  expect(kept).toHaveLength(n);
  return used;
}

/**
 * Heap (bytes per object, after a GC) that `shared(i)` saves against `plain(i)` over `n` objects:
 * the median of three rounds, each measuring the plain objects and then the shared ones, after a
 * warm-up round of 200 so that compiling either path is not counted against it (a CI run measured
 * less than nothing without the warm-up, another 182 of an expected 300 bytes in a single round
 * while other test files ran beside it, and a third -17 of an expected 128 for the related objects
 * measured in one round after a warm-up).
 */
function bytesSavedBy(n: number, plain: (i: number) => unknown, shared: (i: number) => unknown): number {
  heapHeldBy(200, plain);
  heapHeldBy(200, shared);
  const rounds = [0, 1, 2].map(() => (heapHeldBy(n, plain) - heapHeldBy(n, shared)) / n);
  return rounds.sort((a, b) => a - b)[1] ?? Number.NaN;
}

/** {@link bytesSavedBy} for objects parsed from `json(i)`, passed through `shareCommonStrings`. */
function bytesSavedPerObject(n: number, json: (i: number) => string): number {
  return bytesSavedBy(
    n,
    (i) => JSON.parse(json(i)) as unknown,
    (i) => {
      const obj = JSON.parse(json(i)) as unknown;
      shareCommonStrings(obj);
      return obj;
    },
  );
}

describe('shareCommonStrings', () => {
  it('changes no value and keeps fast properties', () => {
    const obj = JSON.parse(domainJson(1)) as Record<string, unknown>;
    shareCommonStrings(obj);
    expect(obj).toEqual(JSON.parse(domainJson(1)));
    expect(hasFastProperties(obj)).toBe(true);
    expect(hasFastProperties((obj.status as { conditions: object[] }).conditions[0])).toBe(true);
  });

  it('leaves long values alone', () => {
    const long = 'x'.repeat(81);
    expect(sharedString(long)).toBe(long);
  });

  // What it is for: 5,000 cached objects hold one copy of each shared value instead of 5,000.
  // Heap measurements with forced GCs: seconds on a loaded 2-core machine (it timed out at the
  // default 5 s there), so it has its own limit.
  it(
    'keeps the heap of 5,000 parsed domains smaller by what their repeated values took',
    { timeout: 60_000 },
    () => {
      const n = 5_000;
      // 20 values of 4 to 29 characters each (about 20-48 bytes a string) are shared per domain.
      expect(bytesSavedPerObject(n, domainJson)).toBeGreaterThan(300);
    },
  );

  // A namespace is repeated by every object of every cache; a platform has far fewer of them.
  it('keeps one copy of each namespace across objects', () => {
    const json = (i: number): string =>
      JSON.stringify({
        metadata: {
          name: `d${i}`,
          namespace: `tenant-${i % 10}-of-the-platform-with-a-namespace-of-60-chars`,
        },
      });
    // A namespace of 60 characters is a string of about 80 bytes.
    expect(bytesSavedPerObject(20_000, json)).toBeGreaterThan(48);
  });

  // A value repeated within one object but unique to it (a domain's hostname, the time of its last
  // transition) is kept once per object, not once per place it appears.
  it('keeps one copy of a value repeated within one object, however unique it is to that object', () => {
    const n = 5_000;
    const json = (i: number): string => {
      const at = new Date(Date.UTC(2026, 10, 25, 0, 0, 0, i)).toISOString();
      const hostname = `d${i}.shop-${i}.example`;
      return JSON.stringify({
        spec: { hostname },
        status: {
          verifiedAt: at,
          observed: { checkedAt: at, records: [{ name: hostname }, { name: hostname }] },
          conditions: [1, 2, 3, 4, 5].map(() => ({ lastTransitionTime: at })),
        },
      });
    };
    // 6 of 7 timestamps (24 characters, about 40 bytes each) and 2 of 3 hostnames go.
    expect(bytesSavedPerObject(n, json)).toBeGreaterThan(200);
    const obj = JSON.parse(json(7)) as unknown;
    shareCommonStrings(obj);
    expect(obj).toEqual(JSON.parse(json(7)));
  });

  // An Ingress repeats its CustomDomain's name, UID and hostname: cached beside the domain, it can
  // keep the domain's copies instead of its own.
  it('keeps the copies of related objects (alike) for the values it shares with them, and changes none of them', () => {
    const n = 5_000;
    const domains = Array.from(
      { length: n },
      (_, i) =>
        JSON.parse(
          JSON.stringify({
            metadata: { name: `domain-${i}`, uid: `0f6c1e2a-4b7d-4c1e-9a8b-${String(i).padStart(12, '0')}` },
            spec: { hostname: `d${i}.shop-${i}.example` },
          }),
        ) as unknown,
    );
    const ingressJson = (i: number): string =>
      JSON.stringify({
        metadata: {
          labels: { 'portico.dev/customdomain': `domain-${i}` },
          ownerReferences: [
            { name: `domain-${i}`, uid: `0f6c1e2a-4b7d-4c1e-9a8b-${String(i).padStart(12, '0')}` },
          ],
        },
        spec: { rules: [{ host: `d${i}.shop-${i}.example` }] },
      });
    const parsedIngress = (i: number, alike: unknown[]): unknown => {
      const obj = JSON.parse(ingressJson(i)) as unknown;
      shareCommonStrings(obj, alike);
      return obj;
    };
    // The name (about 32 bytes), the UID (about 56) and the hostname (about 40) are the domain's.
    const saved = bytesSavedBy(
      n,
      (i) => parsedIngress(i, []),
      (i) => parsedIngress(i, [domains[i], undefined]),
    );
    expect(saved).toBeGreaterThan(100);

    const domain = JSON.parse(JSON.stringify(domains[3])) as unknown;
    const ingress = JSON.parse(ingressJson(3)) as unknown;
    shareCommonStrings(ingress, [domain]);
    expect(ingress).toEqual(JSON.parse(ingressJson(3)));
    expect(domain).toEqual(domains[3]);
  });
});
