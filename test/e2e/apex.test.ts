/**
 * An apex domain on the real stack: its ALIAS/ANAME shows in DNS as A records, which must equal the
 * platform target's addresses (the sandbox target resolves to 127.0.0.1).
 */
import { describe, expect, it } from 'vitest';
import { createCustomDomain, createProject, dns, unique, waitForCondition } from './support/cluster.js';

describe('apex domains', () => {
  it('asks for ALIAS/ANAME and goes Live when the apex resolves to the target', async () => {
    const ns = unique('apex');
    const apex = `${ns}.example`;
    await createProject(ns);
    await dns.post('/add-a', { host: apex, addresses: ['127.0.0.1'] });
    await createCustomDomain(ns, 'apex', { hostname: apex, service: { name: 'web' } });
    const cd = await waitForCondition(ns, 'apex', 'Ready', 'True');
    expect(cd.status?.dnsRecords?.[0]).toMatchObject({ type: 'ALIAS', name: apex, ttl: 3600 });
    expect(cd.status?.dnsRecords?.[0]?.note).toContain('not every DNS provider');
    expect(cd.status?.certificate?.dnsNames).toEqual([apex]);
  });

  it('names a leftover parking A record beside the right one', async () => {
    const ns = unique('apex-parked');
    const apex = `${ns}.example`;
    await createProject(ns);
    await dns.post('/add-a', { host: apex, addresses: ['127.0.0.1', '192.0.2.80'] });
    await createCustomDomain(ns, 'apex', { hostname: apex, service: { name: 'web' } });
    const cd = await waitForCondition(ns, 'apex', 'DNSVerified', 'False', 'ConflictingRecord');
    const message = cd.status?.conditions?.find((c) => c.type === 'DNSVerified')?.message ?? '';
    expect(message).toContain(`A ${apex} -> 192.0.2.80`);
    expect(message).toContain(`ALIAS (or ANAME) ${apex} -> `);
  });
});
