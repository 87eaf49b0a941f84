import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import type { Condition, CustomDomain, CustomDomainStatus } from '../api/customdomain.js';
import { ReadyTransitions, registerDomainMetrics } from './domain-metrics.js';
import { TextFamiliesRegistry } from './text-families.js';

/** The value of each series of `name` in `registry`'s exposition, keyed by its label text. */
async function series(registry: Registry, name: string): Promise<Map<string, number>> {
  const found = new Map<string, number>();
  for (const line of (await registry.metrics()).split('\n')) {
    const match = new RegExp(`^${name}(\\{[^}]*\\})? (\\S+)$`).exec(line);
    if (match) found.set(match[1] ?? '', Number(match[2]));
  }
  return found;
}

function cond(type: string, status: Condition['status'], at: string, reason = 'R'): Condition {
  return { type, status, reason, message: '', lastTransitionTime: at };
}

function domain(name: string, status?: CustomDomainStatus, namespace = 'shop'): CustomDomain {
  return {
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'CustomDomain',
    metadata: { name, namespace, creationTimestamp: new Date('2026-01-01T00:00:00Z') },
    spec: { hostname: `${name}.shop.example` },
    ...(status ? { status } : {}),
  };
}

const certificate = {
  secretName: 's',
  notBefore: '2026-01-01T00:00:00Z',
  notAfter: '2026-04-01T00:00:00Z',
  renewalTime: '2026-03-02T00:00:00Z',
  serialNumber: '01',
  issuer: 'Pebble',
  dnsNames: ['www.shop.example'],
};

describe('per-domain metrics read at scrape time', () => {
  it('reports each domain from the source as it is at the scrape, and nothing of a domain that left', async () => {
    const registry = new TextFamiliesRegistry();
    const domains = [
      domain('www', {
        phase: 'Live',
        conditions: [
          cond('DNSVerified', 'True', '2026-01-01T00:01:00Z', 'RecordMatches'),
          cond('Ready', 'True', '2026-01-01T00:02:00Z', 'Live'),
        ],
        certificate,
      }),
      domain('api', {
        phase: 'AwaitingDNS',
        conditions: [
          cond('DNSVerified', 'False', '2026-01-01T00:00:00Z', 'RecordNotFound'),
          cond('Ready', 'False', '2026-01-01T00:00:00Z', 'RecordNotFound'),
        ],
      }),
      domain('new'),
    ];
    registerDomainMetrics(registry, () => domains);

    const ready = await series(registry, 'portico_customdomain_ready_status');
    const labels = (name: string, c: string): string =>
      `{namespace="shop",name="${name}",hostname="${name}.shop.example",condition="${c}"}`;
    expect(ready).toEqual(
      new Map([
        [labels('www', 'True'), 1],
        [labels('www', 'False'), 0],
        [labels('www', 'Unknown'), 0],
        [labels('api', 'True'), 0],
        [labels('api', 'False'), 1],
        [labels('api', 'Unknown'), 0],
        [labels('new', 'True'), 0],
        [labels('new', 'False'), 0],
        [labels('new', 'Unknown'), 1],
      ]),
    );
    const www = '{namespace="shop",name="www",hostname="www.shop.example"}';
    expect(await series(registry, 'portico_customdomain_verified_timestamp_seconds')).toEqual(
      new Map([[www, Date.parse('2026-01-01T00:01:00Z') / 1000]]),
    );
    expect(await series(registry, 'portico_certificate_expiration_timestamp_seconds')).toEqual(
      new Map([[www, Date.parse(certificate.notAfter) / 1000]]),
    );
    expect(await series(registry, 'portico_certificate_renewal_timestamp_seconds')).toEqual(
      new Map([[www, Date.parse(certificate.renewalTime) / 1000]]),
    );
    expect(await series(registry, 'portico_customdomains')).toEqual(
      new Map([
        ['{phase="Live",reason="Live"}', 1],
        ['{phase="AwaitingDNS",reason="RecordNotFound"}', 1],
        ['{phase="",reason=""}', 1],
      ]),
    );

    domains.splice(0, 1);
    expect([...(await series(registry, 'portico_customdomain_ready_status')).keys()]).not.toContain(
      labels('www', 'True'),
    );
    expect((await series(registry, 'portico_certificate_expiration_timestamp_seconds')).size).toBe(0);
    // The metrics are declared with no domains at all (the alert and dashboard checks read # TYPE).
    domains.splice(0);
    const page = await registry.metrics();
    for (const name of [
      'portico_customdomain_ready_status',
      'portico_customdomain_verified_timestamp_seconds',
      'portico_certificate_expiration_timestamp_seconds',
      'portico_certificate_renewal_timestamp_seconds',
      'portico_customdomains',
    ])
      expect(page).toContain(`# TYPE ${name} gauge`);
  });
});

describe('ReadyTransitions', () => {
  const notReady = (verifiedAt?: string): CustomDomain =>
    domain('www', {
      conditions: [
        ...(verifiedAt
          ? [cond('DNSVerified', 'True', verifiedAt)]
          : [cond('DNSVerified', 'False', '2026-01-01T00:00:05Z')]),
        cond('Ready', 'False', '2026-01-01T00:00:05Z'),
      ],
    });
  const ready = (verifiedAt: string, liveAt: string): CustomDomain =>
    domain('www', {
      conditions: [cond('DNSVerified', 'True', verifiedAt), cond('Ready', 'True', liveAt, 'Live')],
    });

  async function histogram(registry: Registry): Promise<{ count: number; sum: number }> {
    const count =
      (await series(registry, 'portico_customdomain_verified_to_live_seconds_count')).get('') ?? 0;
    const sum = (await series(registry, 'portico_customdomain_verified_to_live_seconds_sum')).get('') ?? 0;
    return { count, sum };
  }

  it('observes once when Ready turns True, from DNSVerified to Ready, and not on later updates', async () => {
    const registry = new Registry();
    const transitions = new ReadyTransitions(registry);
    transitions.onChange(domain('www'), 'add');
    transitions.onChange(notReady(), 'update');
    transitions.onChange(notReady('2026-01-01T00:01:00Z'), 'update');
    expect(await histogram(registry)).toEqual({ count: 0, sum: 0 });
    transitions.onChange(ready('2026-01-01T00:01:00Z', '2026-01-01T00:01:42Z'), 'update');
    expect(await histogram(registry)).toEqual({ count: 1, sum: 42 });
    // The reconcile's later status writes and the resync see Ready True again: nothing more.
    transitions.onChange(ready('2026-01-01T00:01:00Z', '2026-01-01T00:01:42Z'), 'update');
    transitions.onChange(ready('2026-01-01T00:01:00Z', '2026-01-01T00:01:42Z'), 'update');
    expect(await histogram(registry)).toEqual({ count: 1, sum: 42 });
    expect(transitions.notReadyCount).toBe(0);
  });

  it('does not observe a domain Ready when first listed (a restart or a new leader)', async () => {
    const registry = new Registry();
    const transitions = new ReadyTransitions(registry);
    transitions.onChange(ready('2026-01-01T00:01:00Z', '2026-01-01T00:01:42Z'), 'add');
    transitions.onChange(ready('2026-01-01T00:01:00Z', '2026-01-01T00:01:42Z'), 'update');
    expect(await histogram(registry)).toEqual({ count: 0, sum: 0 });
  });

  it('observes a domain listed not Ready that turns Ready after a restart', async () => {
    const registry = new Registry();
    const transitions = new ReadyTransitions(registry);
    transitions.onChange(notReady('2026-01-01T00:01:00Z'), 'add');
    transitions.onChange(ready('2026-01-01T00:01:00Z', '2026-01-01T00:03:00Z'), 'update');
    expect(await histogram(registry)).toEqual({ count: 1, sum: 120 });
  });

  it('does not observe a return to Ready while DNS stayed verified (no verification took place)', async () => {
    const registry = new Registry();
    const transitions = new ReadyTransitions(registry);
    transitions.onChange(ready('2026-01-01T00:01:00Z', '2026-01-01T00:01:42Z'), 'add');
    // Routing broke a day later; DNSVerified kept its transition time.
    transitions.onChange(
      domain('www', {
        conditions: [
          cond('DNSVerified', 'True', '2026-01-01T00:01:00Z'),
          cond('Ready', 'False', '2026-01-02T00:00:00Z', 'NameInUse'),
        ],
      }),
      'update',
    );
    transitions.onChange(ready('2026-01-01T00:01:00Z', '2026-01-02T00:10:00Z'), 'update');
    expect(await histogram(registry)).toEqual({ count: 0, sum: 0 });
    // DNS lost and verified again: that one counts.
    transitions.onChange(
      domain('www', {
        conditions: [
          cond('DNSVerified', 'False', '2026-01-03T00:00:00Z'),
          cond('Ready', 'False', '2026-01-03T00:00:00Z', 'CNAMEMismatch'),
        ],
      }),
      'update',
    );
    transitions.onChange(ready('2026-01-03T00:05:00Z', '2026-01-03T00:05:30Z'), 'update');
    expect(await histogram(registry)).toEqual({ count: 1, sum: 30 });
  });

  it('forgets a deleted domain', () => {
    const transitions = new ReadyTransitions(new Registry());
    transitions.onChange(notReady(), 'add');
    expect(transitions.notReadyCount).toBe(1);
    transitions.onChange(notReady(), 'delete');
    expect(transitions.notReadyCount).toBe(0);
  });
});
