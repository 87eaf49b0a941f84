/**
 * A holder that never deploys (docs/customdomains.md, "A holder that never deploys"), on the real
 * stack (kube-apiserver, Pebble, pebble-challtestsrv) with its own operator run with
 * `--undeployed-claim-grace-seconds 6`: a CustomDomain whose project never deploys keeps its
 * hostname's claim for the grace, then a deployed project's CustomDomain takes it over; a claimant
 * that is not deployed never does, until it deploys.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CustomDomain } from '../../src/api/customdomain.js';
import { TAKEN_OVER_FROM_ANNOTATION, type HostnameClaim } from '../../src/api/hostnameclaim.js';
import {
  createCustomDomain,
  createProject,
  deleteCreatedDomains,
  dns,
  domainCondition,
  getCustomDomain,
  getHostnameClaim,
  kube,
  markDeployed,
  requestVerify,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import {
  restartStackController,
  runAll,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
} from './support/stack-controller.js';

const GRACE_SECONDS = 6;

let stack: ControllerCommand | undefined;
let operator: OperatorProcess | undefined;
const created: { namespace: string; name: string }[] = [];

beforeAll(async () => {
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  operator = await startOperator(stack, 'claim-grace', {
    '--undeployed-claim-grace-seconds': String(GRACE_SECONDS),
    '--ownership-verification': 'recently-claimed',
  });
});

afterAll(async () => {
  await runAll(
    () => deleteCreatedDomains(created, 'claim-grace'),
    async () => {
      if (operator) await stopOperator(operator);
    },
    () => restartStackController(stack),
  );
});

async function create(namespace: string, hostname: string): Promise<void> {
  await createCustomDomain(namespace, 'www', { hostname, service: { name: 'web' } });
  created.push({ namespace, name: 'www' });
}

async function uidOf(namespace: string): Promise<string> {
  return (await getCustomDomain(namespace, 'www')).metadata.uid ?? '';
}

async function claimNaming(hostname: string, uid: string): Promise<HostnameClaim> {
  return waitFor(`the claim of ${hostname} to name ${uid}`, async () => {
    const claim = await getHostnameClaim(hostname);
    return claim?.spec.customDomainRef.uid === uid ? claim : undefined;
  });
}

async function events(namespace: string): Promise<{ kind: string; message: string }[]> {
  const list = await kube().core.listNamespacedEvent({ namespace });
  return list.items
    .filter((e) => e.involvedObject.name === 'www')
    .map((e) => ({ kind: `${e.type ?? ''}/${e.reason ?? ''}`, message: e.message ?? '' }));
}

const accepted = (cd: CustomDomain) => domainCondition(cd, 'Accepted');

describe('a holder whose project never deploys', () => {
  it('keeps the claim for the grace, then a deployed project takes it over and must show the TXT record', async () => {
    const idle = unique('grace-idle');
    const deployed = unique('grace-deployed');
    // Not under a project's name: the messages must not name the other project.
    const hostname = `${unique('www')}.grace.example`;
    await createProject(idle, { deployed: false });
    await createProject(deployed);
    await dns.setCname(hostname, sandbox.platformCnameTarget);

    await create(idle, hostname);
    await waitForCondition(idle, 'www', 'Accepted', 'False', 'NotDeployed');
    const idleDomain = await getCustomDomain(idle, 'www');
    const idleUid = idleDomain.metadata.uid ?? '';
    await claimNaming(hostname, idleUid);
    const idleCreated = Date.parse(idleDomain.metadata.creationTimestamp?.toString() ?? '');

    // Within the grace the deployed claimant waits, told when the holder's hold ends.
    await create(deployed, hostname);
    const waiting = await waitForCondition(deployed, 'www', 'Accepted', 'False', 'HostnameAlreadyClaimed');
    const lapsesAt = new Date(idleCreated + GRACE_SECONDS * 1000).toISOString();
    expect(accepted(waiting).message).toContain(
      `if it still is not at ${lapsesAt}, this domain takes the hostname over`,
    );
    expect(accepted(waiting).message).not.toContain(idle);

    // At the end of the grace it takes the claim over (looked at again then, not 10 minutes later).
    const deployedUid = await uidOf(deployed);
    const second = await claimNaming(hostname, deployedUid);
    expect(second.metadata.annotations?.[TAKEN_OVER_FROM_ANNOTATION]).toBe(idleUid);
    expect(Date.parse(second.metadata.creationTimestamp?.toString() ?? '')).toBeGreaterThanOrEqual(
      idleCreated + GRACE_SECONDS * 1000 - 1000, // creationTimestamp has whole seconds
    );

    const loser = await waitForCondition(idle, 'www', 'Accepted', 'False', 'HostnameClaimYielded');
    const loserMessage = accepted(loser).message ?? '';
    expect(loserMessage).toContain('had no successful deploy within the grace');
    expect(loserMessage).not.toContain(deployed);
    await waitFor('the Events of both sides', async () => {
      const won = (await events(deployed)).find((e) => e.kind === 'Normal/HostnameClaimTakenOver');
      const lost = (await events(idle)).find((e) => e.kind === 'Warning/HostnameClaimYielded');
      return won && lost ? { won, lost } : undefined;
    }).then(({ won }) => {
      expect(won.message).toContain(
        `${hostname} was held by a CustomDomain whose project was not deployed within ${GRACE_SECONDS} s of its creation`,
      );
      expect(won.message).not.toContain(idle);
    });

    // The takeover counts as a release by the idle project: the new holder shows the TXT record
    // before anything is ordered or routed.
    const asked = await waitForCondition(deployed, 'www', 'DNSVerified', 'False', 'OwnershipNotVerified');
    expect(accepted(asked).status).toBe('True');
    expect(asked.status?.ownership).toMatchObject({ required: true, reason: 'RecentlyClaimed' });
    const txt = asked.status?.dnsRecords?.find((r) => r.type === 'TXT');
    if (!txt) throw new Error('no TXT record in status.dnsRecords');
    await dns.post('/set-txt', { host: `${txt.name}.`, value: txt.value });
    await requestVerify(deployed, 'www');
    await waitForCondition(deployed, 'www', 'Ready', 'True', undefined, 120_000);
    await dns.post('/clear-txt', { host: `${txt.name}.` });

    // Deploying now does not take the hostname back (its endpoints wake it; the holder is accepted).
    await markDeployed(idle);
    await new Promise((r) => setTimeout(r, 3_000));
    expect((await getHostnameClaim(hostname))?.spec.customDomainRef.uid).toBe(deployedUid);
    expect(accepted(await getCustomDomain(idle, 'www')).reason).toBe('HostnameClaimYielded');
  }, 180_000);

  it('is never taken over by a claimant that is not deployed, until that one deploys', async () => {
    const idle = unique('grace-idle');
    const other = unique('grace-other');
    const hostname = `${unique('www')}.grace.example`;
    await createProject(idle, { deployed: false });
    await createProject(other, { deployed: false });
    await dns.setCname(hostname, sandbox.platformCnameTarget);

    await create(idle, hostname);
    await waitForCondition(idle, 'www', 'Accepted', 'False', 'NotDeployed');
    const idleUid = await uidOf(idle);
    const first = await claimNaming(hostname, idleUid);
    // Created once the holder's grace is over: its first reconcile (the status it writes) already
    // meets a lapsed hold, and leaves the claim alone.
    await new Promise((r) => setTimeout(r, (GRACE_SECONDS + 1) * 1000));
    await create(other, hostname);
    const waiting = await waitForCondition(other, 'www', 'Accepted', 'False', 'HostnameAlreadyClaimed');
    expect(accepted(waiting).message).not.toContain('takes the hostname over');
    expect((await getHostnameClaim(hostname))?.metadata.uid).toBe(first.metadata.uid);

    // Its first ready endpoint wakes it, and it takes the lapsed hold over.
    await markDeployed(other);
    const second = await claimNaming(hostname, await uidOf(other));
    expect(second.metadata.annotations?.[TAKEN_OVER_FROM_ANNOTATION]).toBe(idleUid);
    await waitForCondition(idle, 'www', 'Accepted', 'False', 'HostnameClaimYielded');
  }, 120_000);
});
