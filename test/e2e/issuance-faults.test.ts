/**
 * Faults during issuance, on the real stack: the test runs its own operator whose ACME directory is
 * a fault-injecting proxy in front of the sandbox's real Pebble (support/acme-fault-proxy.ts).
 *
 * 1. Removal while an order is in flight (docs/customdomains.md, "Removal": removal from any state
 *    stops traffic at once and leaves nothing behind): the CustomDomain is deleted while its
 *    challenge response is held on its way to the CA.
 * 2. HTTP 429 from the CA (docs/customdomains.md, `CARateLimited`; RFC 8555 §6.7 `rateLimited`):
 *    the CA refuses one domain's new orders; the other domains go on, the refused one says why and
 *    when it tries again, never asks again sooner, and gets its certificate once the CA accepts.
 * 3. A request the CA never answers (`--acme-request-timeout-seconds`): one domain's finalize is
 *    held; the attempt fails at the deadline naming the step, says when it tries again, and the
 *    next attempt gets the certificate.
 * 4. SIGTERM while an order is in flight: the operator abandons it (withdraws the challenge, asks
 *    the CA nothing more) and exits cleanly at once; the next operator places a new order.
 */
import { Agent } from 'node:https';
import { readFile } from 'node:fs/promises';
import * as acme from 'acme-client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ACCOUNT_KEY_FIELD } from '../../src/acme/account.js';
import { CHALLENGE_CONFIGMAP } from '../../src/acme/challenge-store.js';
import { OPERATOR_NAMESPACE } from '../../src/sandbox/stack.js';
import {
  createCustomDomain,
  createProject,
  dns,
  getCustomDomain,
  kube,
  sandbox,
  unique,
  waitFor,
  waitForCondition,
  deleteCustomDomain,
} from './support/cluster.js';
import {
  startAcmeFaultProxy,
  type AcmeExchange,
  type AcmeFaultProxy,
  type AcmeRequestKind,
} from './support/acme-fault-proxy.js';
import {
  restartStackController,
  startOperator,
  stopOperator,
  stopStackController,
  SHORT_FIRST_RETRY,
  TEST_FIRST_RETRY_SECONDS,
  type ControllerCommand,
  type OperatorProcess,
  runAll,
} from './support/stack-controller.js';
import { sleep, within } from './support/proxied-operator.js';
import { scrape } from './support/metrics.js';

const target = sandbox.platformCnameTarget;
/**
 * The first retry of a failed order, as the test's operators are told (`--issuance-first-retry-seconds`;
 * the published schedule's 1 minute in production, docs/customdomains.md).
 */
const FIRST_RETRY_MS = TEST_FIRST_RETRY_SECONDS * 1000;
/** Timers may fire a little early against another process's clock; never more than this, ms. */
const CLOCK_SLACK_MS = 1_000;

let stack: ControllerCommand | undefined;
let operator: OperatorProcess | undefined;
let proxy: AcmeFaultProxy | undefined;

beforeAll(async () => {
  proxy = await startAcmeFaultProxy(sandbox.sandboxDir, sandbox.acmeDirectoryUrl, sandbox.acmeCaBundle);
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  operator = await startOperator(stack, 'issuance-faults', {
    '--acme-directory-url': proxy.directoryUrl,
    ...SHORT_FIRST_RETRY,
  });
});

afterAll(async () => {
  await runAll(
    // The proxy first: a request it still holds would keep the operator from exiting.
    async () => proxy?.stop(),
    async () => {
      if (operator) await stopOperator(operator);
    },
    () => restartStackController(stack),
  );
});

function theProxy(): AcmeFaultProxy {
  if (!proxy) throw new Error('the fault proxy did not start');
  return proxy;
}

/** The running operator's `portico_acme_requests_total` for `endpoint` and `status` (0 when absent). */
async function acmeRequests(endpoint: string, status: string): Promise<number> {
  const samples = await scrape(`http://127.0.0.1:${operator?.metricsPort ?? 0}/metrics`);
  const found = samples.find(
    (x) =>
      x.name === 'portico_acme_requests_total' &&
      x.labels['endpoint'] === endpoint &&
      x.labels['status'] === status,
  );
  return found?.value ?? 0;
}

/** The exchanges of `kind` about `hostname`, in arrival order. */
function exchangesFor(hostname: string, kind: AcmeRequestKind): AcmeExchange[] {
  return theProxy().exchanges.filter((x) => x.kind === kind && x.hostnames.includes(hostname));
}

/** The key authorizations in the shared ConfigMap, by token ({} when it does not exist). */
async function publishedKeyAuthorizations(): Promise<Record<string, string>> {
  try {
    const cm = await kube().core.readNamespacedConfigMap({
      namespace: OPERATOR_NAMESPACE,
      name: CHALLENGE_CONFIGMAP,
    });
    return cm.data ?? {};
  } catch (err) {
    if ((err as { code?: number }).code === 404) return {};
    throw err;
  }
}

async function customDomainExists(namespace: string, name: string): Promise<boolean> {
  try {
    await getCustomDomain(namespace, name);
    return true;
  } catch (err) {
    if ((err as { code?: number }).code === 404) return false;
    throw err;
  }
}

/** What the domain left in its namespace: its Ingress and its TLS Secret, where they exist. */
async function leftovers(namespace: string, name: string): Promise<string[]> {
  const { core, networking } = kube();
  const found: string[] = [];
  const ingresses = await networking.listNamespacedIngress({ namespace });
  for (const i of ingresses.items) found.push(`Ingress ${i.metadata?.name ?? ''}`);
  const secrets = await core.listNamespacedSecret({ namespace });
  for (const s of secrets.items) {
    if (s.type === 'kubernetes.io/tls' && s.metadata?.name?.startsWith(name))
      found.push(`Secret ${s.metadata.name}`);
  }
  return found;
}

/**
 * An ACME client on the operator's own account (its key is in the account Secret), through the
 * proxy: to ask the CA what became of an order, as the account that placed it.
 */
async function accountClient(): Promise<acme.Client> {
  const secret = await kube().core.readNamespacedSecret({
    namespace: OPERATOR_NAMESPACE,
    name: 'portico-acme-account',
  });
  const accountKey = Buffer.from(secret.data?.[ACCOUNT_KEY_FIELD] ?? '', 'base64').toString('utf8');
  // This process does not run with NODE_EXTRA_CA_CERTS: trust Pebble's listener CA here.
  acme.axios.defaults.httpsAgent = new Agent({ ca: await readFile(sandbox.acmeCaBundle) });
  const client = new acme.Client({ directoryUrl: theProxy().directoryUrl, accountKey });
  await client.createAccount({ onlyReturnExisting: true });
  return client;
}

/**
 * Creates a project and a CustomDomain `www` whose challenge response ("validate now", RFC 8555
 * §7.5.1) the proxy holds on its way to the CA; resolves once it is held.
 */
async function domainWithHeldChallenge(
  prefix: string,
): Promise<{ ns: string; hostname: string; challenge: AcmeExchange; release: () => void }> {
  const ns = unique(prefix);
  const hostname = `www.${ns}.example`;
  await createProject(ns);
  await dns.setCname(hostname, target);
  const held = theProxy().hold((x) => x.kind === 'challenge-response' && x.hostnames.includes(hostname));
  await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
  const challenge = await within('the challenge response to reach the proxy', held.arrived, 120_000);
  return {
    ns,
    hostname,
    challenge,
    release: () => {
      held.release();
    },
  };
}

describe('removal while an ACME order is in flight', () => {
  it('removes the domain at once, withdraws the challenge, and the order never completes', async () => {
    const { ns, hostname, challenge, release } = await domainWithHeldChallenge('inflight');

    // The order exists at the CA and waits on its challenge; nothing is finalized or written.
    const [order, ...moreOrders] = exchangesFor(hostname, 'new-order');
    expect(order?.status).toBe(201);
    expect(moreOrders).toEqual([]);
    expect(exchangesFor(hostname, 'finalize')).toEqual([]);
    const token = challenge.token ?? '';
    expect(token).not.toBe('');
    expect((await publishedKeyAuthorizations())[token]).toMatch(new RegExp(`^${token}\\.`));
    await waitForCondition(ns, 'www', 'CertificateReady', 'False', 'Issuing', 30_000);
    expect(await leftovers(ns, 'www')).toEqual(['Ingress portico-www']);

    await deleteCustomDomain(ns, 'www');
    // Gone promptly: the finalizer does not wait for the CA.
    await waitFor(
      'the CustomDomain to be gone',
      async () => ((await customDomainExists(ns, 'www')) ? undefined : true),
      30_000,
    );
    expect(await leftovers(ns, 'www')).toEqual([]);
    // The key authorization is withdrawn while the challenge response is still held.
    await waitFor(
      'the key authorization to be withdrawn',
      async () => ((await publishedKeyAuthorizations())[token] === undefined ? true : undefined),
      30_000,
    );
    expect(challenge.status).toBeUndefined();

    // Let the challenge response reach the CA: it validates against a withdrawn key authorization,
    // so the order can never be completed.
    const releasedAt = Date.now();
    release();
    await waitFor('the CA to answer the released challenge response', () => challenge.status, 30_000);
    const client = await accountClient();
    const orderUrl = order?.location ?? '';
    const atCa = await waitFor(
      'the order to end at the CA',
      async () => {
        const o = await client.getOrder({ url: orderUrl } as acme.Order);
        return ['pending', 'ready', 'processing'].includes(o.status) ? undefined : o;
      },
      60_000,
      1_000,
    );
    expect(atCa.status).toBe('invalid');

    // Well past the time an order takes here (seconds), nothing appears and nothing more is asked.
    const until = Date.now() + 20_000;
    while (Date.now() < until) {
      expect(await leftovers(ns, 'www')).toEqual([]);
      expect((await publishedKeyAuthorizations())[token]).toBeUndefined();
      await sleep(1_000);
    }
    // The operator asked the CA nothing more about it: no polling, no finalize, no new order.
    expect(exchangesFor(hostname, 'challenge-poll').filter((x) => x.at >= releasedAt)).toEqual([]);
    expect(exchangesFor(hostname, 'finalize')).toEqual([]);
    expect(exchangesFor(hostname, 'certificate')).toEqual([]);
    expect(exchangesFor(hostname, 'new-order')).toHaveLength(1);
    expect(await customDomainExists(ns, 'www')).toBe(false);

    // The operator keeps working: a domain created afterwards gets its certificate.
    const next = `next.${ns}.example`;
    await dns.setCname(next, target);
    await createCustomDomain(ns, 'next', { hostname: next, service: { name: 'web' } });
    await waitForCondition(ns, 'next', 'Ready', 'True', undefined, 120_000);
    expect(exchangesFor(next, 'finalize').map((x) => x.status)).toEqual([200]);
  }, 400_000);
});

describe('HTTP 429 from the CA', () => {
  it('keeps the queue moving, says why and when, never asks sooner, and issues once accepted', async () => {
    const retryAfterSeconds = 30;
    const detail = 'too many new orders recently (acme-fault-proxy)';
    const ns = unique('ratelimited');
    const [a, b, c] = ['a', 'b', 'c'].map((label) => `${label}.${ns}.example`) as [string, string, string];
    await createProject(ns);
    await dns.setCname(a, target);
    await dns.setCname(b, `elsewhere.${ns}.example`);
    await dns.setCname(c, target);
    const refusal = theProxy().refuse((x) => x.kind === 'new-order' && x.hostnames.includes(a), {
      retryAfterSeconds,
      detail,
    });
    await createCustomDomain(ns, 'a', { hostname: a, service: { name: 'web' } });
    await waitFor('the CA to refuse the order for A', () => (refusal.count > 0 ? true : undefined), 120_000);
    const firstRefusal = exchangesFor(a, 'new-order')[0];
    if (!firstRefusal?.answeredAt) throw new Error('no refusal logged');

    // While A is refused, the others are reconciled: B's DNS check and C's whole issuance.
    await createCustomDomain(ns, 'b', { hostname: b, service: { name: 'web' } });
    await createCustomDomain(ns, 'c', { hostname: c, service: { name: 'web' } });
    await waitForCondition(ns, 'b', 'DNSVerified', 'False', 'CNAMEMismatch', 60_000);
    await waitForCondition(ns, 'c', 'Ready', 'True', undefined, 120_000);

    // A's status names the CA's refusal, the CA's Retry-After, and the next attempt.
    const refused = await waitForCondition(ns, 'a', 'CertificateReady', 'False', 'CARateLimited', 60_000);
    const readAt = Date.now();
    const message = refused.status?.conditions?.find((x) => x.type === 'CertificateReady')?.message ?? '';
    expect(refused.status?.phase).toBe('Failed');
    expect(message).toContain('HTTP 429');
    expect(message).toContain('urn:ietf:params:acme:error:rateLimited');
    expect(message).toContain(detail);
    const notBefore = Date.parse(/no new request before (\S+?Z)/.exec(message)?.[1] ?? '');
    const nextAttempt = Date.parse(/Next attempt at (\S+?Z)/.exec(message)?.[1] ?? '');
    expect(notBefore).toBeGreaterThanOrEqual(
      firstRefusal.answeredAt + retryAfterSeconds * 1000 - CLOCK_SLACK_MS,
    );
    expect(nextAttempt).toBeGreaterThanOrEqual(notBefore);
    expect(refusal.count).toBeGreaterThan(0);
    expect(exchangesFor(a, 'new-order').every((x) => x.refused)).toBe(true);
    // The operator's /metrics count the CA's refusals under the newOrder endpoint and status 429
    // (only A's orders were refused; later retries may have added to both since).
    const refusedBefore = refusal.count;
    const counted429 = await acmeRequests('newOrder', '429');
    expect(counted429).toBeGreaterThanOrEqual(refusedBefore);
    expect(counted429).toBeLessThanOrEqual(refusal.count);

    // The CA accepts again: A gets its certificate on the schedule.
    refusal.stop();
    await waitForCondition(ns, 'a', 'Ready', 'True', undefined, 300_000);
    const orders = exchangesFor(a, 'new-order');
    // One new-order per attempt: every refused one, then exactly one that the CA accepted.
    expect(orders.map((x) => x.status)).toEqual([...Array<number>(refusal.count).fill(429), 201]);
    // Never sooner than the published schedule (which here also covers Retry-After) …
    for (let i = 1; i < orders.length; i++) {
      const gap = (orders[i]?.at ?? 0) - (orders[i - 1]?.answeredAt ?? 0);
      expect(gap).toBeGreaterThanOrEqual(Math.max(FIRST_RETRY_MS, retryAfterSeconds * 1000) - CLOCK_SLACK_MS);
    }
    // … and never before the time the status announced.
    const firstAfterRead = orders.find((x) => x.at > readAt);
    expect(firstAfterRead?.at ?? 0).toBeGreaterThanOrEqual(nextAttempt - CLOCK_SLACK_MS);
    // B was never verified, so it never ordered.
    expect(exchangesFor(b, 'new-order')).toEqual([]);
  }, 600_000);
});

describe('an ACME request the CA never answers', () => {
  const timeoutSeconds = 3;

  beforeAll(async () => {
    // An operator that gives the CA 3 s per request, in place of the one above (default 30 s).
    if (!stack) throw new Error('the stack operator was not found');
    if (operator) await stopOperator(operator);
    operator = await startOperator(stack, 'issuance-faults-timeout', {
      '--acme-directory-url': theProxy().directoryUrl,
      ...SHORT_FIRST_RETRY,
      '--acme-request-timeout-seconds': String(timeoutSeconds),
    });
  });

  it('fails the attempt at the deadline naming the step, says when it tries again, and issues on the next', async () => {
    const ns = unique('unanswered');
    const hostname = `www.${ns}.example`;
    await createProject(ns);
    await dns.setCname(hostname, target);
    // The finalize request reaches the proxy and gets no answer, for as long as the test holds it.
    const held = theProxy().hold((x) => x.kind === 'finalize' && x.hostnames.includes(hostname));
    await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
    const finalize = await within('the finalize request to reach the proxy', held.arrived, 120_000);

    // Within seconds the attempt has failed, naming the step, the request and the deadline.
    const failed = await waitForCondition(ns, 'www', 'CertificateReady', 'False', 'IssuanceFailed', 30_000);
    const seenAt = Date.now();
    const message = failed.status?.conditions?.find((x) => x.type === 'CertificateReady')?.message ?? '';
    expect(message).toContain(
      `the ACME CA did not answer the finalize for ${hostname} within ${timeoutSeconds} s (POST ${new URL(theProxy().directoryUrl).origin}${finalize.path})`,
    );
    expect(failed.status?.phase).toBe('Failed');
    expect(seenAt - finalize.at).toBeLessThan(30_000);
    // The attempt ended at the deadline: the next one is the published first retry after that.
    const nextAttempt = Date.parse(/Next attempt at (\S+?Z)/.exec(message)?.[1] ?? '');
    const endedAt = nextAttempt - FIRST_RETRY_MS;
    expect(endedAt - finalize.at).toBeGreaterThanOrEqual(timeoutSeconds * 1000 - CLOCK_SLACK_MS);
    expect(endedAt - finalize.at).toBeLessThan(timeoutSeconds * 1000 + 10_000);
    // The operator gave up on the request while the CA still had not answered it, and did not
    // send it again.
    expect(finalize.status).toBeUndefined();
    expect(exchangesFor(hostname, 'finalize')).toHaveLength(1);
    expect(exchangesFor(hostname, 'new-order')).toHaveLength(1);
    // The operator's /metrics count it as a finalize that timed out.
    expect(await acmeRequests('finalize', 'timeout')).toBe(1);

    // The proxy stops holding; the next attempt, on the schedule, gets the certificate.
    held.release();
    await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 240_000);
    const orders = exchangesFor(hostname, 'new-order');
    expect(orders.map((x) => x.status)).toEqual([201, 201]);
    expect(orders[1]?.at ?? 0).toBeGreaterThanOrEqual(nextAttempt - CLOCK_SLACK_MS);
    const finalizes = exchangesFor(hostname, 'finalize');
    expect(finalizes.map((x) => x.held)).toEqual([true, false]);
    expect(finalizes[1]?.status).toBe(200);
    expect(exchangesFor(hostname, 'certificate').some((x) => x.status === 200)).toBe(true);
  }, 400_000);
});

describe('SIGTERM while an ACME order is in flight', () => {
  it('abandons the order at once: a clean exit within seconds, the challenge withdrawn, and the next operator issues', async () => {
    // An operator with the default 30 s request deadline, in place of the one above.
    if (!stack) throw new Error('the stack operator was not found');
    if (operator) await stopOperator(operator);
    operator = await startOperator(stack, 'issuance-faults-sigterm', {
      '--acme-directory-url': theProxy().directoryUrl,
      ...SHORT_FIRST_RETRY,
    });
    const { ns, hostname, challenge, release } = await domainWithHeldChallenge('sigterm');
    const token = challenge.token ?? '';
    expect((await publishedKeyAuthorizations())[token]).toMatch(new RegExp(`^${token}\\.`));

    // stopOperator throws unless the exit code is 0 (a process still holding the request open is
    // exited with code 1 after 5 s by `portico` itself).
    const stoppedAt = Date.now();
    const stopped = operator;
    await stopOperator(stopped);
    expect(Date.now() - stoppedAt).toBeLessThan(10_000);
    expect(challenge.status).toBeUndefined();
    expect((await publishedKeyAuthorizations())[token]).toBeUndefined();
    expect(await readFile(stopped.log, 'utf8')).toContain(
      'certificate order abandoned: the operator is shutting down',
    );

    // The CA sees the abandoned order's challenge fail; the next operator places a new order.
    release();
    operator = await startOperator(stack, 'issuance-faults-sigterm-next', {
      '--acme-directory-url': theProxy().directoryUrl,
      ...SHORT_FIRST_RETRY,
    });
    await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 120_000);
    expect(exchangesFor(hostname, 'new-order').map((x) => x.status)).toEqual([201, 201]);
    expect(exchangesFor(hostname, 'finalize').map((x) => x.status)).toEqual([200]);
  }, 300_000);
});
