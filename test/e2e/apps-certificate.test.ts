/**
 * The apps domain's wildcard certificate is kept like every certificate of Portico's
 * (docs/customdomains.md, "The auto-generated subdomain"), on real parts: Knot serves the platform's
 * apps zone `wild.portico.test` and takes TSIG-signed RFC 2136 updates, a BIND resolver forwards it
 * to Knot for a second Pebble that validates DNS-01 through it, the stack's pebble-challtestsrv
 * serves the zone's CAA records to the operator, and this file's operator runs with two ACME
 * issuers (`--acme-issuers`): `down`, a directory where nothing listens, then that Pebble, with
 * failover after one failure and the short first retry. The stack's operator is stopped meanwhile.
 *
 * - The first wildcard order goes to `down`, fails as the CA's failure and passes it over; the next
 *   goes to the Pebble, as a CustomDomain's would; each is counted in its issuer's order budget.
 * - CAA at the apps domain permits the Pebble for names (`issue`) but not for wildcards
 *   (`issuewild` another CA): RFC 8659 §4.3 gives `issuewild` precedence, so no order reaches the
 *   CA, and the Project's `status.subdomain` and a Warning Event name the record found and the
 *   `issuewild` record to add.
 * - Once `issuewild` names the CA, the backoff's next attempt issues the wildcard from the Pebble:
 *   the Secret names that issuer, and the subdomain serves.
 * - Renewal by ACME Renewal Information (RFC 9773), as a CustomDomain's: the operator asks the
 *   Pebble's renewalInfo for the wildcard and keeps its window and the renewal time chosen in it on
 *   the Secret (`portico.dev/renewal-info`, and a Normal Event); a restarted operator plans from that
 *   without asking again. Pebble's management API then moves the window into the past
 *   (`/set-renewal-info/`), a verify request on the Secret makes the operator ask again, and the
 *   wildcard is renewed minutes after it was issued, not two thirds into its 90 days, by an order
 *   that names the old certificate in `replaces` (the operator's "ACME order created" line).
 *
 * What it starts, and stops in `afterAll` (the stack is left as found): Knot and BIND, the Pebble,
 * the operator, the CAA records; the Project, the wildcard Secret, the account Secrets and the
 * TLSCertificateDelegation are deleted; the stack's operator is restarted.
 */
import { randomBytes, X509Certificate } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Project } from '../../src/api/project.js';
import { ariCertificateId } from '../../src/acme/ari.js';
import { APPS_DOMAIN_SECRET } from '../../src/controller/main.js';
import { RENEWAL_INFO_ANNOTATION } from '../../src/controllers/project/apps-renewal.js';
import type { TsigKey } from '../../src/dns/dynamic-update.js';
import { SANDBOX_PEBBLE_PROFILES } from '../../src/sandbox/pebble.js';
import { OPERATOR_NAMESPACE } from '../../src/sandbox/stack.js';
import {
  renewalRecordOf,
  wildcardRenewedFrom,
  wildcardWindowInThePast,
  wildcardWithDecision,
} from './support/apps-domain.js';
import { deleteAppsDomainObjects, deleteProjects } from './support/apps-domain-cleanup.js';
import { startChallengeZone, stopChallengeZone } from './support/challenge-zone.js';
import { createProject, dns, getPebble, kube, unique, waitFor } from './support/cluster.js';
import { startSecondPebble, stopSecondPebble, type SecondPebble } from './support/second-pebble.js';
import {
  challengePort,
  freePort,
  operatorLogLines,
  operatorMetric,
  restartStackController,
  runAll,
  SHORT_FIRST_RETRY,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
} from './support/stack-controller.js';

const APPS_DOMAIN = 'wild.portico.test';
const WILDCARD = `*.${APPS_DOMAIN}`;
const DOWN = 'down';
const PEBBLE = 'pebble-wild';
const key: TsigKey = { name: 'portico-wild.', algorithm: 'hmac-sha256', secret: randomBytes(32) };
const projectApi = { group: 'portico.dev', version: 'v1alpha1', plural: 'projects' } as const;
const suffix = Date.now().toString(36);
const accountSecrets = [`wild-down-${suffix}`, `wild-pebble-${suffix}`];
const ns = unique('wild');

let stack: ControllerCommand | undefined;
let pebble: SecondPebble | undefined;
let operator: OperatorProcess | undefined;
/** The flags this file's operator runs with (set in beforeAll), for its restart. */
let operatorFlags: Record<string, string> = {};

function op(): OperatorProcess {
  if (!operator) throw new Error('the operator did not start');
  return operator;
}

async function setCaa(policies: { tag: string; value: string }[]): Promise<void> {
  await dns.post('/clear-caa', { host: APPS_DOMAIN });
  await dns.post('/add-caa', { host: APPS_DOMAIN, policies });
}

/** The Project's status.subdomain once it is for the current generation and `accept` takes it. */
async function waitForSubdomain(
  what: string,
  accept: (s: NonNullable<NonNullable<Project['status']>['subdomain']>) => boolean,
  timeoutMs: number,
): Promise<NonNullable<NonNullable<Project['status']>['subdomain']>> {
  return waitFor(
    `${ns}/site status.subdomain ${what}`,
    async () => {
      const p = (await kube().custom.getNamespacedCustomObject({
        ...projectApi,
        namespace: ns,
        name: 'site',
      })) as Project;
      const s = p.status?.subdomain;
      return p.status?.observedGeneration === p.metadata.generation && s !== undefined && accept(s)
        ? s
        : undefined;
    },
    timeoutMs,
    500,
  );
}

async function readSecret(): Promise<V1Secret | undefined> {
  return kube()
    .core.readNamespacedSecret({ namespace: OPERATOR_NAMESPACE, name: APPS_DOMAIN_SECRET })
    .catch(() => undefined);
}

/** The wildcard orders this operator started (its log), each counted in one issuer's budget. */
async function wildcardOrders(): Promise<number> {
  return (await operatorLogLines(op(), 'ordering the apps domain wildcard certificate (dns-01)')).length;
}

beforeAll(async () => {
  const zone = await startChallengeZone(APPS_DOMAIN, key);
  // Names may be issued by the Pebble, wildcards only by another CA (RFC 8659 §4.3).
  await setCaa([
    { tag: 'issue', value: 'pebble.letsencrypt.org' },
    { tag: 'issuewild', value: 'digicert.com' },
  ]);
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  pebble = await startSecondPebble(PEBBLE, SANDBOX_PEBBLE_PROFILES, {
    dnsServer: `${zone.resolver.host}:${zone.resolver.port}`,
    httpPort: challengePort(stack),
  });
  const [downAccount = '', pebbleAccount = ''] = accountSecrets;
  operatorFlags = {
    '--acme-issuers': JSON.stringify([
      {
        name: DOWN,
        directoryUrl: `https://127.0.0.1:${await freePort()}/dir`,
        accountSecretName: downAccount,
      },
      { name: PEBBLE, directoryUrl: pebble.directoryUrl, accountSecretName: pebbleAccount },
    ]),
    '--acme-failover-after-failures': '1',
    '--acme-failover-pass-over-seconds': '3600',
    ...SHORT_FIRST_RETRY,
    '--ingress-flavor': 'contour',
    '--apps-domain': APPS_DOMAIN,
    '--dns01-server': `${zone.zoneServer.host}:${zone.zoneServer.port}`,
    '--dns01-tsig-key-name': key.name,
    '--dns01-tsig-algorithm': key.algorithm,
    '--dns01-tsig-secret': key.secret.toString('base64'),
    // The longest wait between two looks at the wildcard Secret, longer than any wait of this file:
    // the verify request on the Secret in the last case is seen by the Secret's watch, at once.
    '--resync-seconds': '600',
  };
  operator = await startOperator(stack, 'apps-certificate', operatorFlags);
  await createProject(ns, { plan: 'free' });
  await kube().custom.createNamespacedCustomObject({
    ...projectApi,
    namespace: ns,
    body: {
      apiVersion: 'portico.dev/v1alpha1',
      kind: 'Project',
      metadata: { name: 'site', namespace: ns },
      spec: { service: { name: 'web', port: 80 }, domains: { primary: `www.${ns}.example` } },
    },
  });
}, 180_000);

afterAll(async () => {
  await runAll(
    () => deleteProjects([{ namespace: ns, name: 'site' }]),
    async () => {
      if (operator) await stopOperator(operator);
    },
    () => stopSecondPebble(PEBBLE),
    () => stopChallengeZone(),
    () => dns.post('/clear-caa', { host: APPS_DOMAIN }),
    () => deleteAppsDomainObjects(accountSecrets),
    () => restartStackController(stack),
  );
}, 240_000);

describe("the apps domain's wildcard certificate, like any certificate of Portico's", () => {
  it(
    'fails over from a CA that is down, and a CAA issuewild that excludes the CA stops the order: the subdomain status and a Warning Event name the record found and the record to add',
    { timeout: 150_000 },
    async () => {
      const subdomain = await waitForSubdomain(
        'naming the issuewild record',
        (s) => (s.message ?? '').includes('issuewild "digicert.com"'),
        120_000,
      );
      expect(subdomain).toMatchObject({
        hostname: `${ns}.${APPS_DOMAIN}`,
        serving: 'False',
        reason: 'WildcardCertificatePending',
      });
      const message = subdomain.message ?? '';
      process.stdout.write(`apps-certificate: status.subdomain.message: ${message}\n`);
      expect(message).toContain('(CAAForbidsIssuance)');
      expect(message).toContain(`Found CAA ${APPS_DOMAIN} 0 issuewild "digicert.com"`);
      expect(message).toContain('issuewild takes precedence over issue for a wildcard name');
      expect(message).toContain(`add CAA ${APPS_DOMAIN} 0 issuewild "pebble.letsencrypt.org"`);
      expect(message).toMatch(/Next attempt at \d{4}-/);

      // The same sentence as a Warning Event on the wildcard Secret, in the operator's namespace.
      const events = await kube().core.listNamespacedEvent({ namespace: OPERATOR_NAMESPACE });
      const event = events.items.find(
        (e) => e.involvedObject.name === APPS_DOMAIN_SECRET && e.reason === 'CAAForbidsIssuance',
      );
      expect(event?.type).toBe('Warning');
      expect(event?.involvedObject.kind).toBe('Secret');
      expect(event?.message).toContain(`add CAA ${APPS_DOMAIN} 0 issuewild "pebble.letsencrypt.org"`);

      // Failover: the first order went to `down` (a CA failure, passed over), the next to the Pebble,
      // where CAA stopped it (not the CA's failure) before any request for an order.
      expect(
        await operatorMetric(op(), 'portico_acme_issuer_orders_total', { ca: DOWN, result: 'ca-failure' }),
      ).toBeGreaterThanOrEqual(1);
      expect(await operatorMetric(op(), 'portico_acme_issuer_passed_over', { ca: DOWN })).toBe(1);
      expect(
        await operatorMetric(op(), 'portico_acme_issuer_orders_total', { ca: PEBBLE, result: 'not-the-ca' }),
      ).toBeGreaterThanOrEqual(1);
      expect(await operatorLogLines(op(), 'ACME order created')).toEqual([]);
      expect(await readSecret()).toBeUndefined();
      // Every wildcard order was counted in the budget of the issuer it went to.
      const orders = await wildcardOrders();
      expect(orders).toBeGreaterThanOrEqual(2);
      const counted =
        (await operatorMetric(op(), 'portico_acme_order_budget_used', { ca: DOWN })) +
        (await operatorMetric(op(), 'portico_acme_order_budget_used', { ca: PEBBLE }));
      expect(counted).toBe(orders);
    },
  );

  it(
    "once issuewild names the CA, the backoff's next attempt issues the wildcard from the Pebble, and the subdomain serves",
    { timeout: 180_000 },
    async () => {
      await setCaa([
        { tag: 'issue', value: 'pebble.letsencrypt.org' },
        { tag: 'issuewild', value: 'pebble.letsencrypt.org' },
      ]);
      const serving = await waitForSubdomain('serving', (s) => s.serving === 'True', 150_000);
      expect(serving.reason).toBe('Serving');
      const secret = await readSecret();
      if (!secret) throw new Error('no wildcard Secret');
      expect(secret.metadata?.annotations?.['portico.dev/acme-issuer']).toBe(PEBBLE);
      const leaf = new X509Certificate(Buffer.from(secret.data?.['tls.crt'] ?? '', 'base64'));
      expect(leaf.subjectAltName).toBe(`DNS:${WILDCARD}`);
      const intermediate = new X509Certificate(
        await getPebble(`${pebble?.managementUrl ?? ''}/intermediates/0`),
      );
      expect(leaf.verify(intermediate.publicKey)).toBe(true);
      expect(
        await operatorMetric(op(), 'portico_acme_issuer_orders_total', { ca: PEBBLE, result: 'valid' }),
      ).toBe(1);
      const counted =
        (await operatorMetric(op(), 'portico_acme_order_budget_used', { ca: DOWN })) +
        (await operatorMetric(op(), 'portico_acme_order_budget_used', { ca: PEBBLE }));
      expect(counted).toBe(await wildcardOrders());
    },
  );

  it(
    "renews the wildcard when the CA's ARI window says so, minutes after issuance instead of two thirds into its validity: the decision on the Secret survives a restart, and the renewal order names the old certificate in replaces",
    { timeout: 240_000 },
    async () => {
      // The Pebble's answer, kept on the Secret: its window for this certificate and a time in it.
      const { leaf: old, decision: first, annotation: kept } = await wildcardWithDecision();
      process.stdout.write(`apps-certificate: ${RENEWAL_INFO_ANNOTATION}: ${kept}\n`);
      const ari = first.ari;
      if (!ari) throw new Error(`no ARI decision in ${kept}`);
      const certId = ariCertificateId(old.toString());
      const twoThirds =
        Date.parse(old.validFrom) + ((Date.parse(old.validTo) - Date.parse(old.validFrom)) * 2) / 3;
      expect(ari.certId).toBe(certId);
      expect(Date.parse(first.renewalTime)).toBeGreaterThanOrEqual(Date.parse(ari.windowStart));
      expect(Date.parse(first.renewalTime)).toBeLessThanOrEqual(Date.parse(ari.windowEnd));
      // The Pebble asks to be asked again in 6 hours (its Retry-After).
      expect(Date.parse(ari.nextCheckAt) - Date.parse(ari.checkedAt)).toBe(6 * 3_600_000);
      const events = await kube().core.listNamespacedEvent({ namespace: OPERATOR_NAMESPACE });
      const scheduled = events.items.find(
        (e) => e.involvedObject.name === APPS_DOMAIN_SECRET && e.reason === 'RenewalScheduled',
      );
      expect(scheduled?.type).toBe('Normal');
      expect(scheduled?.message).toContain(
        `renewed from ${first.renewalTime}, a time chosen in the CA's renewal window ${ari.windowStart} to ${ari.windowEnd}`,
      );

      // A restart: the new operator plans from the Secret, without asking the CA again before then.
      await stopOperator(op());
      operator = undefined;
      if (!stack) throw new Error('the stack operator command is unknown');
      operator = await startOperator(stack, 'apps-certificate-restarted', operatorFlags);
      const [looked] = await waitFor(
        "the restarted operator's first look at the wildcard",
        async () => {
          const lines = await operatorLogLines(
            op(),
            'apps domain certificate state',
            (e) => e['ready'] === true,
          );
          return lines.length > 0 ? lines : undefined;
        },
        60_000,
      );
      expect(looked?.['message']).toContain(
        `renewed from ${first.renewalTime}, a time chosen in the CA's renewal window`,
      );
      expect(renewalRecordOf(await readSecret())).toEqual(first);
      expect(await operatorMetric(op(), 'portico_acme_requests_total', { endpoint: 'renewalInfo' })).toBe(0);

      // The CA moves the window into the past; a verify request on the Secret makes the operator ask.
      if (!pebble) throw new Error('the Pebble did not start');
      await wildcardWindowInThePast(old, pebble.managementUrl);
      const renewed = await wildcardRenewedFrom(old);
      const renewedAt = Date.now();
      process.stdout.write(
        `apps-certificate: renewed ${old.serialNumber} -> ${renewed.leaf.serialNumber} at ${new Date(renewedAt).toISOString()}; two thirds of the old one: ${new Date(twoThirds).toISOString()}; its first ARI window from ${ari.windowStart}\n`,
      );
      // Long before two thirds of the old certificate's life, and before the window first suggested.
      expect(renewedAt).toBeLessThan(twoThirds);
      expect(renewedAt).toBeLessThan(Date.parse(ari.windowStart));
      expect(renewed.leaf.subjectAltName).toBe(`DNS:${WILDCARD}`);
      // The order named the old certificate (RFC 9773 §5), and the Secret says which it replaced.
      const created = await operatorLogLines(op(), 'ACME order created');
      process.stdout.write(
        `apps-certificate: ACME order created: ${JSON.stringify(created.map((e) => ({ orderUrl: e['orderUrl'], replaces: e['replaces'] })))}\n`,
      );
      expect(created.map((e) => e['replaces'])).toEqual([certId]);
      const annotations = renewed.secret.metadata?.annotations ?? {};
      expect(annotations['portico.dev/replaces']).toBe(certId);
      expect(annotations['portico.dev/acme-issuer']).toBe(PEBBLE);
      expect(
        await operatorMetric(op(), 'portico_acme_issuer_orders_total', { ca: PEBBLE, result: 'valid' }),
      ).toBe(1);
      // The renewed certificate gets a decision of its own, from the Pebble's window for it.
      const next = await wildcardWithDecision();
      expect(next.leaf.serialNumber).toBe(renewed.leaf.serialNumber);
      expect(next.decision.ari?.certId).toBe(ariCertificateId(renewed.leaf.toString()));
      expect(Date.parse(next.decision.renewalTime)).toBeGreaterThan(Date.now());
      const serving = await waitForSubdomain('serving', (s) => s.serving === 'True', 60_000);
      expect(serving.reason).toBe('Serving');
    },
  );
});
