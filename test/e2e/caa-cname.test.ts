/**
 * CAA reached through the CNAME target (RFC 8659 §3; docs/troubleshooting.md,
 * `CAAForbidsIssuance`): a customer's subdomain is a CNAME to the platform's target, so a CAA query
 * for it is answered with the target's CAA RRset. When that RRset excludes the CA, the order is
 * blocked and the message names the record where it really is, at the target (a name with a CNAME
 * holds no other records, RFC 1034 §3.6.2).
 *
 * Runs its own operator with a platform target of its own, so the CAA records set here touch no
 * other test's domains (the stack's operator is stopped meanwhile; this one answers HTTP-01 on the
 * same port, where Pebble connects).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  createCustomDomain,
  createProject,
  dns,
  getCustomDomain,
  unique,
  waitFor,
  waitForCondition,
  requestVerify,
} from './support/cluster.js';
import {
  restartStackController,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
  runAll,
} from './support/stack-controller.js';
import { scrape, type Sample } from './support/metrics.js';

const run = unique('caacname');
const target = `${run}.sites.portico.test`;
let stack: ControllerCommand | undefined;
let operator: OperatorProcess | undefined;

beforeAll(async () => {
  await dns.addA(target, ['127.0.0.1']);
  await dns.post('/add-caa', { host: target, policies: [{ tag: 'issue', value: 'digicert.com' }] });
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  operator = await startOperator(stack, 'caa-cname', { '--platform-cname-target': target });
});

afterAll(async () => {
  await runAll(
    () => dns.post('/clear-caa', { host: target }),
    async () => {
      if (operator) await stopOperator(operator);
    },
    () => restartStackController(stack),
  );
});

describe('CAA at the CNAME target', () => {
  const ns = unique('caa-cname');
  const hostname = `www.${ns}.example`;

  it('blocks the order and names the record at the target, not at the customer name', async () => {
    await createProject(ns);
    await dns.setCname(hostname, target);
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
    const cd = await waitForCondition(ns, 'www', 'CertificateReady', 'False', 'CAAForbidsIssuance', 60_000);
    expect(cd.status?.conditions?.find((c) => c.type === 'DNSVerified')?.status).toBe('True');
    const message = cd.status?.conditions?.find((c) => c.type === 'CertificateReady')?.message ?? '';
    expect(message).toContain(`CAA ${target} 0 issue "digicert.com"`);
    expect(message).toContain(`add CAA ${target} 0 issue "pebble.letsencrypt.org"`);
    expect(message).not.toContain(`CAA ${hostname}`);
    expect(cd.status?.certificate?.notAfter).toBeUndefined();

    // The operator's /metrics after the blocked issuance (this test's own operator, started fresh):
    // the domain not Ready, counted under its Ready reason, its DNS check passed, and no order sent.
    // The per-domain series are read from the operator's CustomDomain cache, which has the status
    // this test read from the API server once its watch delivers it: read until it does (10 s).
    const ready = cd.status?.conditions?.find((c) => c.type === 'Ready');
    expect(ready?.status).toBe('False');
    const domain = { namespace: ns, name: 'www', hostname };
    const valueIn = (samples: Sample[], name: string, labels: Record<string, string>): number | undefined =>
      samples.find((x) => x.name === name && Object.entries(labels).every(([k, v]) => x.labels[k] === v))
        ?.value;
    const samples = await waitFor(
      'the Ready status False in the per-domain metrics',
      async () => {
        const read = await scrape(`http://127.0.0.1:${operator?.metricsPort ?? 0}/metrics`);
        return valueIn(read, 'portico_customdomain_ready_status', { ...domain, condition: 'False' }) === 1
          ? read
          : undefined;
      },
      10_000,
    );
    const value = (name: string, labels: Record<string, string>): number | undefined =>
      valueIn(samples, name, labels);
    expect(value('portico_customdomain_ready_status', { ...domain, condition: 'False' })).toBe(1);
    expect(value('portico_customdomain_ready_status', { ...domain, condition: 'True' })).toBe(0);
    expect(value('portico_customdomains', { reason: ready?.reason ?? '' })).toBeGreaterThanOrEqual(1);
    expect(value('portico_dns_checks_total', { reason: 'RecordMatches' })).toBeGreaterThanOrEqual(1);
    expect(value('portico_acme_requests_total', { endpoint: 'newOrder', status: '201' }) ?? 0).toBe(0);
  });

  it('issues once the target admits the CA', async () => {
    await dns.post('/clear-caa', { host: target });
    await dns.post('/add-caa', {
      host: target,
      policies: [{ tag: 'issue', value: 'pebble.letsencrypt.org' }],
    });
    await requestVerify(ns, 'www');
    const live = await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 60_000);
    expect(live.status?.certificate?.notAfter).toBeDefined();
    expect((await getCustomDomain(ns, 'www')).status?.phase).toBe('Live');
  });
});
