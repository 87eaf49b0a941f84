import pino from 'pino';
import { describe, expect, it, vi } from 'vitest';
import type { Condition, CustomDomain } from '../api/customdomain.js';
import { buildStatus, type ObservedState } from '../controllers/customdomain/status.js';
import { ServingChecker, type ServingCheckSettings } from './checker.js';
import type { ServingCheckOptions } from './serving-check.js';
import { DEFAULT_SERVING_SCHEDULE, SERVING_CHECK_PENDING } from './schedule.js';
import type { ServingVerdict } from './verdict.js';

const log = pino({ level: 'silent' });
const T0 = new Date('2026-11-25T12:00:00Z');
const at = (ms: number): Date => new Date(T0.getTime() + ms);
const settings: ServingCheckSettings = {
  address: 'ingress.example.svc:443',
  timeoutMs: 1_000,
  policy: DEFAULT_SERVING_SCHEDULE,
  maxConcurrent: 1,
};

const SERVED =
  'www.shop.example: served certificate AB (valid until 2027-01-01T00:00:00.000Z) at ingress.example.svc:443';

/** A serving verdict whose answer (verdict.ts `answer`) is `answer`. */
function serving(answer = 'Serves.'): ServingVerdict {
  return {
    result: 'serving',
    reason: 'Live',
    served: SERVED,
    answer,
    message: `${SERVED}: ${answer}`,
    compared: true,
    certificate: {
      serialNumber: 'AB',
      subject: 'CN=www.shop.example',
      issuer: 'CN=CA',
      notAfter: '2027-01-01T00:00:00.000Z',
      dnsNames: ['www.shop.example'],
      fingerprint256: 'AA',
      coversHostname: true,
    },
    response: { statusCode: 200, headers: {}, bodyDigest: '00', bodyPreview: 'shop' },
  };
}

const unreachable: ServingVerdict = {
  result: 'unreachable',
  reason: 'DataPlaneUnreachable',
  step: 'tls',
  error: { code: 'ECONNREFUSED', message: 'refused' },
  message: 'No TLS connection.',
};

/** The checks asked for, each answered by the next verdict of `verdicts`. */
function recorder(...verdicts: ServingVerdict[]) {
  const calls: ServingCheckOptions[] = [];
  const check = (options: ServingCheckOptions): Promise<ServingVerdict> => {
    calls.push(options);
    const verdict = verdicts.shift();
    return verdict ? Promise.resolve(verdict) : Promise.reject(new Error('no verdict left'));
  };
  return { calls, check };
}

const ready = (status: 'True' | 'False', reason: string, message: string): Condition => ({
  type: 'Ready',
  status,
  reason,
  message,
  lastTransitionTime: T0.toISOString(),
});

/** Ready's message for a serving check whose run began at `since` (schedule.ts). */
const readyMessage = (answer: string, since: Date = T0): string =>
  `${SERVED}, checked ${since.toISOString()} (re-checked every 10 minutes): ${answer}`;

const domain = (serialNumber: string, readyCondition?: Condition, uid = 'uid-1') => ({
  key: 'shop/www',
  uid,
  hostname: 'www.shop.example',
  serialNumber,
  ready: readyCondition,
});

describe('ServingChecker', () => {
  it('checks a domain first at once, then keeps the Ready its last check wrote until the interval passes', async () => {
    const { calls, check } = recorder(serving('Serves with AB.'), serving('Serves again.'));
    const checker = new ServingChecker(settings, check);
    const first = await checker.observe(domain('AB'), T0, log);
    expect(first.readiness).toEqual({
      status: 'True',
      reason: 'Live',
      message: readyMessage('Serves with AB.'),
    });
    expect(first.nextCheckAt).toEqual(at(DEFAULT_SERVING_SCHEDULE.intervalMs));
    expect(calls).toEqual([
      { address: settings.address, hostname: 'www.shop.example', serialNumber: 'AB', timeoutMs: 1_000 },
    ]);

    const written = ready('True', 'Live', readyMessage('Serves with AB.'));
    const between = await checker.observe(domain('AB', written), at(60_000), log);
    expect(between).toEqual({ readiness: first.readiness, nextCheckAt: first.nextCheckAt });
    expect(calls).toHaveLength(1);

    // Another answer: a new run, checked at this check's time.
    const interval = at(DEFAULT_SERVING_SCHEDULE.intervalMs);
    const due = await checker.observe(domain('AB', written), interval, log);
    expect(due.readiness.message).toBe(readyMessage('Serves again.', interval));
    expect(calls).toHaveLength(2);
  });

  it('keeps the time of the first check in Ready’s message while re-checks see the same answer, so the status is not rewritten', async () => {
    const { calls, check } = recorder(serving('Same.'), serving('Same.'), serving('Same.'));
    const checker = new ServingChecker(settings, check);
    const first = await checker.observe(domain('AB'), T0, log);
    const written = ready('True', 'Live', first.readiness.message);
    for (const n of [1, 2]) {
      const again = await checker.observe(
        domain('AB', written),
        at(n * DEFAULT_SERVING_SCHEDULE.intervalMs),
        log,
      );
      expect(again.readiness).toEqual(first.readiness);
    }
    expect(calls).toHaveLength(3);
    expect(first.readiness.message).toBe(readyMessage('Same.', T0));
  });

  it('starts a new run when the domain’s Ready does not say what the run says (its status write was lost)', async () => {
    const { check } = recorder(serving('Same.'), serving('Same.'));
    const checker = new ServingChecker(settings, check);
    await checker.observe(domain('AB'), T0, log);
    const stale = ready('True', 'Live', 'Something older.');
    const interval = at(DEFAULT_SERVING_SCHEDULE.intervalMs);
    // Ready's reason is Live and status True, so the record's verdict is carried until due.
    const again = await checker.observe(domain('AB', stale), interval, log);
    expect(again.readiness.message).toBe(readyMessage('Same.', interval));
  });

  it('checks again at once when the Ready condition is not what the last check made it', async () => {
    const { calls, check } = recorder(serving(), serving('Serves.'));
    const checker = new ServingChecker(settings, check);
    await checker.observe(domain('AB'), T0, log);
    // Meanwhile Routed went False, so Ready carries that reason: the verdict is not at hand.
    const other = ready('False', 'AwaitingDataPlane', 'Routed: waiting.');
    const again = await checker.observe(domain('AB', other), at(1_000), log);
    expect(calls).toHaveLength(2);
    expect(again.readiness.status).toBe('True');
  });

  it('checks a renewed certificate at once, naming the serial the last check was made for as the previous one', async () => {
    const { calls, check } = recorder(serving(), unreachable);
    const checker = new ServingChecker(settings, check);
    await checker.observe(domain('0AB'), T0, log);
    const renewed = await checker.observe(domain('CD', ready('True', 'Live', 'Serves.')), at(1_000), log);
    expect(calls[1]).toMatchObject({ serialNumber: 'CD', previousSerialNumber: 'AB' });
    // A new certificate has no serving record: unreachable is not covered by the grace period.
    expect(renewed.readiness).toEqual({
      status: 'False',
      reason: 'DataPlaneUnreachable',
      message: `No TLS connection. Failing since ${at(1_000).toISOString()}.`,
    });
    expect(renewed.nextCheckAt).toEqual(at(1_000 + 5_000));
  });

  it("checks at once when the domain's route changed, telling the check the earlier redirect, instead of carrying Ready", async () => {
    const { calls, check } = recorder(serving('Redirects.'), serving('Serves.'));
    const checker = new ServingChecker(settings, check);
    const asRedirect = { ...domain('AB'), redirectOrigin: 'https://shop.example' };
    const first = await checker.observe(asRedirect, T0, log);
    expect(calls[0]?.redirectOrigin).toBe('https://shop.example');
    const written = ready('True', 'Live', first.readiness.message);
    // The spec now serves the project: not carried, checked now, the earlier redirect named.
    const switched = await checker.observe(domain('AB', written), at(60_000), log);
    expect(calls).toHaveLength(2);
    expect(calls[1]).toMatchObject({ previousRedirectOrigin: 'https://shop.example' });
    expect(calls[1]?.redirectOrigin).toBeUndefined();
    expect(switched.readiness.message).toBe(readyMessage('Serves.', at(60_000)));
  });

  it('names the replaced serial as the previous one on every retry of a renewed certificate, not only the first', async () => {
    const { calls, check } = recorder(serving(), unreachable, unreachable);
    const checker = new ServingChecker(settings, check);
    await checker.observe(domain('AB'), T0, log);
    await checker.observe(domain('CD', ready('True', 'Live', 'Serves.')), at(1_000), log);
    const failed = ready('False', 'DataPlaneUnreachable', 'No TLS connection.');
    await checker.observe(domain('CD', failed), at(6_000), log);
    expect(calls.map((c) => c.previousSerialNumber)).toEqual([undefined, 'AB', 'AB']);
  });

  it('starts afresh for a domain created again under the same name, and after forget', async () => {
    const { calls, check } = recorder(serving(), serving(), serving());
    const checker = new ServingChecker(settings, check);
    await checker.observe(domain('AB'), T0, log);
    const written = ready('True', 'Live', 'Serves.');
    await checker.observe(domain('AB', written, 'uid-2'), at(1_000), log);
    expect(calls).toHaveLength(2);
    checker.forget('shop/www');
    expect(checker.size).toBe(0);
    await checker.observe(domain('AB', written, 'uid-2'), at(2_000), log);
    expect(calls).toHaveLength(3);
  });

  it('runs at most maxConcurrent checks: a due domain without a verdict is pending, one with a verdict keeps it', async () => {
    let release: (verdict: ServingVerdict) => void = () => undefined;
    const answers: ServingVerdict[] = [serving('First.')];
    const check = (): Promise<ServingVerdict> => {
      const next = answers.shift();
      return next ? Promise.resolve(next) : new Promise((resolve) => (release = resolve));
    };
    const checker = new ServingChecker(settings, check);
    const other = { ...domain('EF'), key: 'shop/other', uid: 'uid-o', hostname: 'other.shop.example' };
    await checker.observe(other, T0, log);

    // The interval passed for `other`; a check of www holds the only slot.
    const held = checker.observe(domain('AB'), at(DEFAULT_SERVING_SCHEDULE.intervalMs), log);
    expect(checker.running).toBe(1);
    const pending = await checker.observe(domain('CD'), at(DEFAULT_SERVING_SCHEDULE.intervalMs), log);
    expect(pending.readiness).toMatchObject({ status: 'False', reason: SERVING_CHECK_PENDING });
    expect(pending.readiness.message).toContain('1 checks running');
    expect(pending.nextCheckAt).toEqual(at(DEFAULT_SERVING_SCHEDULE.intervalMs + 2_000));
    const kept = await checker.observe(
      { ...other, ready: ready('True', 'Live', readyMessage('First.')) },
      at(DEFAULT_SERVING_SCHEDULE.intervalMs),
      log,
    );
    expect(kept.readiness).toEqual({ status: 'True', reason: 'Live', message: readyMessage('First.') });

    release(serving('Held.'));
    expect((await held).readiness.message).toBe(
      readyMessage('Held.', at(DEFAULT_SERVING_SCHEDULE.intervalMs)),
    );
    expect(checker.running).toBe(0);
  });

  it('wakes the domains whose due check found no free slot as slots free, in the order they waited, once each', async () => {
    const releases: ((verdict: ServingVerdict) => void)[] = [];
    const check = (): Promise<ServingVerdict> => new Promise((resolve) => releases.push(resolve));
    const woken: string[] = [];
    const checker = new ServingChecker({ ...settings, wake: (key) => woken.push(key) }, check);
    const named = (key: string) => ({ ...domain('AB'), key, uid: `uid-${key}` });
    const held = checker.observe(named('shop/a'), T0, log);
    for (const key of ['shop/b', 'shop/c', 'shop/b']) {
      const pending = await checker.observe(named(key), T0, log);
      expect(pending.readiness.reason).toBe(SERVING_CHECK_PENDING);
    }
    expect(woken).toEqual([]);
    releases[0]?.(serving());
    await held;
    expect(woken).toEqual(['shop/b']);
    // b runs in the freed slot; when it ends, c (still waiting) is woken; nothing after.
    const b = checker.observe(named('shop/b'), T0, log);
    releases[1]?.(serving());
    await b;
    expect(woken).toEqual(['shop/b', 'shop/c']);
    const c = checker.observe(named('shop/c'), T0, log);
    releases[2]?.(serving());
    await c;
    expect(woken).toEqual(['shop/b', 'shop/c']);
  });

  it('while the data plane loads the certificate, probes every second on its own and wakes the domain when it is served', async () => {
    vi.useFakeTimers({ toFake: ['setTimeout'] });
    try {
      const loading: ServingVerdict = {
        result: 'wrong-certificate',
        reason: 'CertificateNotServed',
        message: 'Default certificate.',
      } as ServingVerdict;
      const { calls, check } = recorder(loading, loading, serving('Now.'));
      const woken: string[] = [];
      const policy = { ...DEFAULT_SERVING_SCHEDULE, propagationGraceMs: 30_000 };
      const checker = new ServingChecker({ ...settings, policy, wake: (key) => woken.push(key) }, check);
      const first = await checker.observe(domain('AB'), new Date(), log);
      expect(first.readiness.reason).toBe('AwaitingServing');
      // The reconcile need not come back before the grace ends: the probes stand in for it.
      expect(first.nextCheckAt.getTime() - Date.now()).toBeGreaterThan(29_000);
      expect(calls).toHaveLength(1);
      await vi.advanceTimersByTimeAsync(1_000);
      expect(calls).toHaveLength(2);
      expect(woken).toEqual([]);
      await vi.advanceTimersByTimeAsync(1_000);
      expect(calls).toHaveLength(3);
      expect(woken).toEqual(['shop/www']);
      // Served: no further probe.
      await vi.advanceTimersByTimeAsync(5_000);
      expect(calls).toHaveLength(3);
    } finally {
      vi.useRealTimers();
    }
  });

  it('frees its slot when the check throws', async () => {
    const checker = new ServingChecker(settings, () => Promise.reject(new Error('malformed address')));
    await expect(checker.observe(domain('AB'), T0, log)).rejects.toThrow('malformed address');
    expect(checker.running).toBe(0);
  });
});

describe('Ready from the serving check (status.ts, ObservedState.serving)', () => {
  const cd: CustomDomain = {
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'CustomDomain',
    metadata: { name: 'www', namespace: 'shop', generation: 1 },
    spec: { hostname: 'www.shop.example', service: { name: 'web' } },
  };
  const base: ObservedState = {
    accepted: { type: 'Accepted', status: 'True', reason: 'Accepted', message: 'ok' },
    dnsVerified: { type: 'DNSVerified', status: 'True', reason: 'RecordMatches', message: 'ok' },
    certificate: {
      kind: 'valid',
      certificate: {
        secretName: 'www-tls',
        notBefore: '2026-11-01T00:00:00.000Z',
        notAfter: '2027-01-30T00:00:00.000Z',
        renewalTime: '2026-12-31T00:00:00.000Z',
        serialNumber: 'AB',
        issuer: 'CN=CA',
        dnsNames: ['www.shop.example'],
      },
    },
    routing: { kind: 'routed', message: 'Ingress portico-www routes the hostname.', confirmed: true },
  };
  const readyOf = (observed: ObservedState) => {
    const status = buildStatus(cd, observed, {}, T0);
    return { phase: status.phase, ready: status.conditions?.find((c) => c.type === 'Ready') };
  };

  it('is not Ready, with the check’s reason and message, when nothing else blocks and the check says False', () => {
    const { phase, ready: condition } = readyOf({
      ...base,
      serving: {
        status: 'False',
        reason: 'CertificateNotServed',
        message: 'The default certificate is served.',
      },
    });
    expect(phase).toBe('Verified');
    expect(condition).toMatchObject({
      status: 'False',
      reason: 'CertificateNotServed',
      message: 'The default certificate is served.',
    });
  });

  it('is Ready with the check’s message when it says True, and another blocking condition comes first', () => {
    const live = readyOf({
      ...base,
      serving: { status: 'True', reason: 'Live', message: 'Checked: serves.' },
    });
    expect(live.phase).toBe('Live');
    expect(live.ready).toMatchObject({ status: 'True', reason: 'Live', message: 'Checked: serves.' });
    const blocked = readyOf({
      ...base,
      routing: { kind: 'not-routed', reason: 'AwaitingDataPlane', message: 'Waiting.' },
      serving: { status: 'True', reason: 'Live', message: 'Checked: serves.' },
    });
    expect(blocked.ready).toMatchObject({ status: 'False', reason: 'AwaitingDataPlane' });
  });
});
