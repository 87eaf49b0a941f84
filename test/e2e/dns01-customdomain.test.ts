/**
 * DNS-01 by CNAME delegation through the CustomDomain reconcile (docs/customdomains.md,
 * "Certificates before the move"), on real parts: Knot DNS serves the platform's challenge zone and
 * takes TSIG-signed RFC 2136 updates; a BIND 9 resolver follows the customer's
 * `_acme-challenge.<hostname>` CNAME from pebble-challtestsrv (the stack's DNS) into Knot for a
 * second Pebble, which validates through it; this file's operator runs with that Pebble and the
 * `--dns01-*` flags while the stack's operator is stopped (only one operator reconciles). Nothing
 * is mocked: the CA, both DNS servers, the resolver and the API server are the real processes.
 *
 * - A domain whose hostname still points elsewhere (an A record of another provider) and whose
 *   delegation is in place gets its certificate while DNSVerified is False; when its CNAME moves to
 *   the platform it goes Ready with that same certificate, with no second order.
 * - A delegation that points at another name: CertificateReady says ChallengeDelegationMismatch
 *   naming both names, and nothing is ordered.
 * - Under `--ownership-verification always`, a delegated domain orders nothing until its ownership
 *   TXT record is found (CertificateReady names it), then gets its certificate by DNS-01.
 * - An operator with the wrong TSIG secret: CertificateReady says ChallengeZoneRefused with the
 *   server's RCODE and TSIG error, and the next attempt waits for the backoff (no loop); one whose
 *   zone server does not listen: ChallengeZoneUnreachable naming it.
 * - With PORTICO_E2E_SLOW=1 (the backoff's first retry, TEST_FIRST_RETRY_SECONDS for this file's
 *   operator): the same wrong secret on a domain whose hostname is verified: the next attempt
 *   answers HTTP-01 and the domain goes Ready.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CustomDomain } from '../../src/api/customdomain.js';
import { acmeChallengeName, delegationTarget } from '../../src/dns/challenge-delegation.js';
import type { TsigKey } from '../../src/dns/dynamic-update.js';
import { pickFreePorts } from '../../src/sandbox/ports.js';
import { OPERATOR_NAMESPACE } from '../../src/sandbox/stack.js';
import {
  createCustomDomain,
  createProject,
  deleteCreatedDomains,
  dns,
  domainCondition,
  getCustomDomain,
  kube,
  requestVerify,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import { startChallengeZone, stopChallengeZone } from './support/challenge-zone.js';
import { startSecondPebble, stopSecondPebble, type SecondPebble } from './support/second-pebble.js';
import {
  challengePort,
  restartStackController,
  runAll,
  operatorLogLines,
  operatorMetric,
  type OperatorLogEntry,
  startOperator,
  stopOperator,
  stopStackController,
  SHORT_FIRST_RETRY,
  type ControllerCommand,
  type OperatorProcess,
} from './support/stack-controller.js';

const SLOW = process.env.PORTICO_E2E_SLOW === '1';
const CHALLENGE_ZONE = 'acme-challenges.portico.test';
const PEBBLE_NAME = 'pebble-dns01cd';
const key: TsigKey = { name: 'portico-challenge.', algorithm: 'hmac-sha256', secret: randomBytes(32) };
/** An address of another provider (TEST-NET-2): where the live site runs before the move. */
const ELSEWHERE = '198.51.100.7';

let stack: ControllerCommand | undefined;
let pebble: SecondPebble | undefined;
let zoneServer: { host: string; port: number };
let operator: OperatorProcess | undefined;
const created: { namespace: string; name: string }[] = [];
const accountSecrets: string[] = [];

/** Starts this file's operator with the second Pebble, a fresh account and the challenge zone's flags. */
async function runOperator(
  name: string,
  tsigSecret: Buffer,
  flags: Record<string, string> = {},
): Promise<OperatorProcess> {
  if (!stack || !pebble) throw new Error('the stack operator is not stopped');
  if (operator) await stopOperator(operator);
  const accountSecret = `dns01cd-${Date.now().toString(36)}`;
  accountSecrets.push(accountSecret);
  operator = await startOperator(stack, name, {
    '--acme-directory-url': pebble.directoryUrl,
    '--acme-account-secret': accountSecret,
    '--dns01-challenge-zone': CHALLENGE_ZONE,
    '--dns01-tsig-key-name': key.name,
    '--dns01-tsig-algorithm': key.algorithm,
    '--dns01-tsig-secret': tsigSecret.toString('base64'),
    '--dns01-server': `${zoneServer.host}:${zoneServer.port}`,
    ...flags,
  });
  return operator;
}

/**
 * A project with a CustomDomain `www` whose hostname has another provider's A record (not
 * the platform's CNAME) and whose `_acme-challenge` CNAME names its delegation target.
 */
async function movingDomain(prefix: string): Promise<{ ns: string; hostname: string; target: string }> {
  const ns = unique(prefix);
  const hostname = `www.${ns}.example`;
  await createProject(ns);
  await dns.addA(hostname, [ELSEWHERE]);
  const target = delegationTarget(CHALLENGE_ZONE, ns, hostname);
  await dns.setCname(acmeChallengeName(hostname), target);
  await createCustomDomain(ns, 'www', { hostname, service: { name: 'web', port: 80 } });
  created.push({ namespace: ns, name: 'www' });
  return { ns, hostname, target };
}

/** The operator's log lines about `hostname` with message `msg`. */
function logLines(op: OperatorProcess, hostname: string, msg: string): Promise<OperatorLogEntry[]> {
  return operatorLogLines(op, msg, (entry) => entry['hostname'] === hostname);
}

function deleteCreated(): Promise<void> {
  return deleteCreatedDomains(created, 'dns01-customdomain');
}

beforeAll(async () => {
  const zone = await startChallengeZone(CHALLENGE_ZONE, key);
  zoneServer = zone.zoneServer;
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  pebble = await startSecondPebble(
    PEBBLE_NAME,
    {},
    { dnsServer: `${zone.resolver.host}:${zone.resolver.port}`, httpPort: challengePort(stack) },
  );
}, 120_000);

afterAll(async () => {
  await runAll(
    async () => {
      if (operator) await deleteCreated();
    },
    async () => {
      if (operator) await stopOperator(operator);
    },
    () => stopSecondPebble(PEBBLE_NAME),
    () => stopChallengeZone(),
    async () => {
      for (const name of accountSecrets) {
        await kube()
          .core.deleteNamespacedSecret({ namespace: OPERATOR_NAMESPACE, name })
          .catch(() => undefined);
      }
    },
    () => restartStackController(stack),
  );
}, 180_000);

describe('a CustomDomain with its DNS-01 challenge delegated to the platform', () => {
  it(
    'gets its certificate by DNS-01 before the move, then goes Ready with that same certificate when its CNAME moves',
    { timeout: 180_000 },
    async () => {
      const op = await runOperator('dns01-customdomain', key.secret);
      const { ns, hostname, target } = await movingDomain('dns01mv');

      const before = await waitFor(
        `${ns}/www to hold a certificate`,
        async () => {
          const cd = await getCustomDomain(ns, 'www');
          return cd.status?.certificate ? cd : undefined;
        },
        90_000,
      );
      expect(domainCondition(before, 'DNSVerified').status).toBe('False');
      expect(domainCondition(before, 'CertificateReady')).toMatchObject({ status: 'True', reason: 'Issued' });
      expect(domainCondition(before, 'Ready').status).toBe('False');
      expect(before.status?.certificate?.dnsNames).toEqual([hostname]);
      expect(before.status?.observed?.challengeDelegation).toEqual({ result: 'Delegated', target });
      expect(before.status?.dnsRecords).toContainEqual(
        expect.objectContaining({
          type: 'CNAME',
          name: acmeChallengeName(hostname),
          value: target,
          optional: true,
        }),
      );
      // The order answered DNS-01: the hostname's A record is another provider's, so HTTP-01 could not.
      expect(await logLines(op, hostname, 'dns-01 challenge valid')).toHaveLength(1);
      const serial = before.status?.certificate?.serialNumber;

      // The move: the hostname's record becomes the platform's CNAME.
      await dns.post('/clear-a', { host: hostname });
      await dns.setCname(hostname, sandbox.platformCnameTarget);
      const ready = await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 90_000);

      expect(domainCondition(ready, 'DNSVerified').status).toBe('True');
      expect(ready.status?.certificate?.serialNumber).toBe(serial);
      expect(await logLines(op, hostname, 'certificate order started')).toHaveLength(1);
      expect(await operatorMetric(op, 'portico_acme_orders_total', { result: 'valid' })).toBe(1);
      await deleteCreated();
    },
  );

  it(
    'a delegation pointing at another name: ChallengeDelegationMismatch naming both, and no order',
    { timeout: 90_000 },
    async () => {
      const op = await runOperator('dns01-customdomain-elsewhere', key.secret);
      const ns = unique('dns01ew');
      const hostname = `www.${ns}.example`;
      await createProject(ns);
      await dns.addA(hostname, [ELSEWHERE]);
      const target = delegationTarget(CHALLENGE_ZONE, ns, hostname);
      // Another namespace's label: DNS-01 would look there, not at this domain's name.
      const other = delegationTarget(CHALLENGE_ZONE, 'someone-else', hostname);
      await dns.setCname(acmeChallengeName(hostname), other);
      await createCustomDomain(ns, 'www', { hostname, service: { name: 'web', port: 80 } });
      created.push({ namespace: ns, name: 'www' });

      const cd = await waitForCondition(
        ns,
        'www',
        'CertificateReady',
        'False',
        'ChallengeDelegationMismatch',
        60_000,
      );
      expect(domainCondition(cd, 'CertificateReady').message).toBe(
        `${acmeChallengeName(hostname)} is a CNAME to ${other}, not to ${target}: the certificate is not issued before DNS verification. Point it at ${target} to have it issued now, or wait for DNS verification (HTTP-01).`,
      );
      expect(cd.status?.observed?.challengeDelegation).toEqual({
        result: 'PointsElsewhere',
        target,
        found: other,
      });
      expect(await logLines(op, hostname, 'certificate order started')).toEqual([]);
      await deleteCreated();
    },
  );

  it(
    'a delegation does not stand in for the ownership record the platform asks for: no order until the TXT record is found, then DNS-01 before the move',
    { timeout: 150_000 },
    async () => {
      const op = await runOperator('dns01-customdomain-ownership', key.secret, {
        '--ownership-verification': 'always',
      });
      const { ns, hostname } = await movingDomain('dns01ow');
      const ownershipName = `_portico-challenge.${hostname}`;

      const waiting = await waitFor(
        `${ns}/www to wait for its ownership record`,
        async () => {
          const cd = await getCustomDomain(ns, 'www');
          return cd.status?.observed?.challengeDelegation?.result === 'Delegated' &&
            domainCondition(cd, 'CertificateReady').message?.includes(ownershipName)
            ? cd
            : undefined;
        },
        60_000,
      );
      expect(domainCondition(waiting, 'CertificateReady')).toMatchObject({
        status: 'False',
        reason: 'AwaitingDNSVerification',
        message: `The ACME challenge is delegated, but the platform asks this domain to show ownership first: the certificate is ordered by DNS-01 once the TXT record ${ownershipName} is found (status.dnsRecords).`,
      });
      expect(waiting.status?.ownership).toMatchObject({ required: true, reason: 'PolicyAlways' });
      expect(waiting.status?.certificate).toBeUndefined();
      expect(await logLines(op, hostname, 'certificate order started')).toEqual([]);

      // The customer adds the TXT record; the hostname's own record still points elsewhere.
      const txt = waiting.status?.dnsRecords?.find((r) => r.type === 'TXT' && r.name === ownershipName);
      expect(txt?.value).toMatch(/^portico-verification=/);
      await dns.post('/set-txt', { host: `${ownershipName}.`, value: txt?.value ?? '' });
      await requestVerify(ns, 'www');
      const issued = await waitFor(
        `${ns}/www to hold a certificate`,
        async () => {
          const cd = await getCustomDomain(ns, 'www');
          return cd.status?.certificate ? cd : undefined;
        },
        90_000,
      );
      expect(issued.status?.ownership?.verifiedAt).toBeDefined();
      expect(domainCondition(issued, 'DNSVerified').status).toBe('False');
      expect(await logLines(op, hostname, 'dns-01 challenge valid')).toHaveLength(1);
      await dns.post('/clear-txt', { host: `${ownershipName}.` });
      await deleteCreated();
    },
  );

  it(
    'a challenge zone server that cannot be reached: ChallengeZoneUnreachable naming the server, and no retry before the backoff',
    { timeout: 120_000 },
    async () => {
      // A port nothing listens on: picked free, then left unbound.
      const { closed } = await pickFreePorts({ closed: 'tcp' });
      const server = `127.0.0.1:${closed}`;
      const op = await runOperator('dns01-customdomain-unreachable', key.secret, {
        '--dns01-server': server,
      });
      const { ns, hostname } = await movingDomain('dns01ur');

      const cd = await waitForCondition(
        ns,
        'www',
        'CertificateReady',
        'False',
        'ChallengeZoneUnreachable',
        60_000,
      );
      const message = domainCondition(cd, 'CertificateReady').message ?? '';
      expect(message).toContain(`could not write the dns-01 record of ${hostname}`);
      expect(message).toContain(server);
      expect(cd.status?.certificate).toBeUndefined();
      const next = Date.parse(cd.status?.issuance?.nextAttemptTime ?? '');
      expect(next - Date.now()).toBeGreaterThan(30_000);
      // Not the CA's failure: counted as a failed order once, no failover, no loop.
      await new Promise((resolve) => setTimeout(resolve, 5_000));
      expect(await operatorMetric(op, 'portico_acme_orders_total', { result: 'failed' })).toBe(1);
      await deleteCreated();
    },
  );

  it(
    'a wrong TSIG secret: ChallengeZoneRefused with the server RCODE and TSIG error, and no retry before the backoff',
    { timeout: 120_000 },
    async () => {
      const op = await runOperator('dns01-customdomain-badkey', randomBytes(32));
      const { ns, hostname } = await movingDomain('dns01bk');

      const cd: CustomDomain = await waitForCondition(
        ns,
        'www',
        'CertificateReady',
        'False',
        'ChallengeZoneRefused',
        60_000,
      );
      const message = domainCondition(cd, 'CertificateReady').message ?? '';
      expect(message).toContain(`could not write the dns-01 record of ${hostname}`);
      expect(message).toContain(`DNS UPDATE of zone ${CHALLENGE_ZONE} refused: NOTAUTH, TSIG BADSIG`);
      expect(cd.status?.certificate).toBeUndefined();
      const next = Date.parse(cd.status?.issuance?.nextAttemptTime ?? '');
      expect(next - Date.now()).toBeGreaterThan(30_000);
      // No loop: one failed order, still one 10 s later.
      const failed = await operatorMetric(op, 'portico_acme_orders_total', { result: 'failed' });
      await new Promise((resolve) => setTimeout(resolve, 10_000));
      expect(failed).toBe(1);
      expect(await operatorMetric(op, 'portico_acme_orders_total', { result: 'failed' })).toBe(1);
      await deleteCreated();
    },
  );

  it.runIf(SLOW)(
    'a wrong TSIG secret on a verified domain: the next attempt answers HTTP-01 and the domain goes Ready (slow)',
    { timeout: 240_000 },
    async () => {
      const op = await runOperator('dns01-customdomain-fallback', randomBytes(32), SHORT_FIRST_RETRY);
      const ns = unique('dns01fb');
      const hostname = `www.${ns}.example`;
      await createProject(ns);
      await dns.setCname(hostname, sandbox.platformCnameTarget);
      await dns.setCname(acmeChallengeName(hostname), delegationTarget(CHALLENGE_ZONE, ns, hostname));
      await createCustomDomain(ns, 'www', { hostname, service: { name: 'web', port: 80 } });
      created.push({ namespace: ns, name: 'www' });

      await waitForCondition(ns, 'www', 'CertificateReady', 'False', 'ChallengeZoneRefused', 60_000);
      // The backoff's first retry, then HTTP-01 on the verified hostname.
      const ready = await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 150_000);
      expect(ready.status?.certificate?.dnsNames).toEqual([hostname]);
      const challenges = (await logLines(op, hostname, 'certificate order started')).map(
        (entry) => entry.challenge,
      );
      expect(challenges).toEqual(['dns-01', 'http-01']);
      await deleteCreated();
    },
  );
});
