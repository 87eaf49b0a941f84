import { describe, expect, it } from 'vitest';
import {
  AWAITING_SERVING,
  DEFAULT_PROPAGATION_GRACE_MS,
  DEFAULT_SERVING_SCHEDULE,
  isNewCertificate,
  isNewRoute,
  nextServingCheckAt,
  previousRedirectOriginOf,
  recordServingCheck,
  servingReadiness,
  type ServingCheckRecord,
} from './schedule.js';
import type { ServingVerdict } from './verdict.js';

const T0 = new Date('2026-11-25T12:00:00Z');
const at = (ms: number): Date => new Date(T0.getTime() + ms);
const SERIAL = '0A1B2C';
const RENEWED = 'FF0011';

const unreachable: ServingVerdict = {
  result: 'unreachable',
  reason: 'DataPlaneUnreachable',
  step: 'tls',
  error: { code: 'ECONNREFUSED', message: 'connect ECONNREFUSED' },
  message: 'The serving check got no TLS connection: ECONNREFUSED (nothing listens there).',
};
const wrong = {
  result: 'wrong-certificate',
  reason: 'CertificateNotServed',
  message: 'Another one.',
} as const;
const serving = { result: 'serving', reason: 'Live', message: 'Serves.' } as const;
const notReached = {
  result: 'not-reaching-project',
  reason: 'ProjectNotReached',
  message: 'Default.',
} as const;

describe('nextServingCheckAt', () => {
  it('checks at once the first time and after each renewal (the serial changed)', () => {
    expect(nextServingCheckAt(undefined, SERIAL, T0)).toEqual(T0);
    const record = recordServingCheck(undefined, SERIAL, serving, T0);
    expect(isNewCertificate(record, RENEWED)).toBe(true);
    expect(nextServingCheckAt(record, RENEWED, at(1_000))).toEqual(at(1_000));
  });

  it('compares serials in any hex form (colons, case, leading zeros)', () => {
    const record = recordServingCheck(undefined, '0a:1b:2c', serving, T0);
    expect(isNewCertificate(record, 'A1B2C')).toBe(false);
    expect(nextServingCheckAt(record, SERIAL, T0)).toEqual(at(DEFAULT_SERVING_SCHEDULE.intervalMs));
  });

  it('re-checks a serving domain every interval', () => {
    const record = recordServingCheck(undefined, SERIAL, serving, T0);
    const policy = { ...DEFAULT_SERVING_SCHEDULE, intervalMs: 60_000 };
    expect(nextServingCheckAt(record, SERIAL, at(10_000), policy)).toEqual(at(60_000));
  });

  it('retries a failing one after 5, 10, 20 … s, at most the interval apart (no propagation grace)', () => {
    let record: ServingCheckRecord | undefined;
    const delays: number[] = [];
    const policy = { ...DEFAULT_SERVING_SCHEDULE, propagationGraceMs: 0 };
    for (let i = 0; i < 10; i++) {
      record = recordServingCheck(record, SERIAL, wrong, T0);
      delays.push(nextServingCheckAt(record, SERIAL, T0, policy).getTime() - T0.getTime());
    }
    expect(delays).toEqual([
      5_000, 10_000, 20_000, 40_000, 80_000, 160_000, 320_000, 600_000, 600_000, 600_000,
    ]);
  });

  it('retries every second while a certificate never seen served is awaited within the propagation grace, then backs off', () => {
    const policy = { ...DEFAULT_SERVING_SCHEDULE, propagationGraceMs: 30_000 };
    let record: ServingCheckRecord | undefined;
    const delays: number[] = [];
    let t = 0;
    while (t <= 40_000) {
      record = recordServingCheck(record, SERIAL, wrong, at(t));
      const next = nextServingCheckAt(record, SERIAL, at(t), policy).getTime() - at(t).getTime();
      delays.push(next);
      t += next;
    }
    // Checks at 0 … 29 s, within the grace of the first: a second apart. The one at 30 s is past it:
    // the run has lasted 30 s, so 30 s (then 60, 120 … as the backoff doubles), not the interval.
    expect(delays).toEqual([...Array<number>(30).fill(1_000), 30_000]);
    // The default backend while loading counts too; unreachable, and a certificate seen served before, do not.
    const notReaching = { result: 'not-reaching-project', reason: 'ProjectNotReached', message: '' } as const;
    expect(
      nextServingCheckAt(recordServingCheck(undefined, SERIAL, notReaching, T0), SERIAL, T0, policy),
    ).toEqual(at(1_000));
    expect(
      nextServingCheckAt(recordServingCheck(undefined, SERIAL, unreachable, T0), SERIAL, T0, policy),
    ).toEqual(at(5_000));
    const served = recordServingCheck(undefined, SERIAL, serving, T0);
    expect(
      nextServingCheckAt(recordServingCheck(served, SERIAL, wrong, at(1)), SERIAL, at(1), policy),
    ).toEqual(at(5_001));
  });

  it('never returns a time that has passed', () => {
    const record = recordServingCheck(undefined, SERIAL, serving, T0);
    const late = at(DEFAULT_SERVING_SCHEDULE.intervalMs * 3);
    expect(nextServingCheckAt(record, SERIAL, late)).toEqual(late);
  });
});

describe('recordServingCheck', () => {
  it('counts failures in a row for one serial, and starts over for a renewed one', () => {
    const first = recordServingCheck(undefined, SERIAL, wrong, T0);
    const second = recordServingCheck(first, SERIAL, unreachable, at(5_000));
    expect(second).toEqual({
      serialNumber: 'A1B2C',
      lastCheckTime: at(5_000).toISOString(),
      lastResult: 'unreachable',
      consecutiveFailures: 2,
      failingSince: T0.toISOString(),
      failingFrom: 'wrong-certificate',
    });
    const renewed = recordServingCheck(second, RENEWED, wrong, at(6_000));
    expect(renewed.consecutiveFailures).toBe(1);
    expect(renewed.failingSince).toBe(at(6_000).toISOString());
    expect(recordServingCheck(renewed, RENEWED, serving, at(7_000))).toEqual({
      serialNumber: RENEWED,
      // The certificate it replaced is kept for the renewed one's checks.
      previousSerialNumber: 'A1B2C',
      lastCheckTime: at(7_000).toISOString(),
      lastResult: 'serving',
      consecutiveFailures: 0,
      lastServingTime: at(7_000).toISOString(),
      servingSince: at(7_000).toISOString(),
    });
  });

  it('keeps the start of a serving run through serving re-checks of one serial, and starts a new one after a failure', () => {
    const first = recordServingCheck(undefined, SERIAL, serving, T0);
    const again = recordServingCheck(first, SERIAL, serving, at(600_000));
    expect(again.servingSince).toBe(T0.toISOString());
    expect(again.lastServingTime).toBe(at(600_000).toISOString());
    const failed = recordServingCheck(again, SERIAL, unreachable, at(1_200_000));
    expect(failed.servingSince).toBeUndefined();
    expect(recordServingCheck(failed, SERIAL, serving, at(1_205_000)).servingSince).toBe(
      at(1_205_000).toISOString(),
    );
    expect(recordServingCheck(again, RENEWED, serving, at(1_300_000)).servingSince).toBe(
      at(1_300_000).toISOString(),
    );
  });
});

describe('a change of route (the domain redirects otherwise, or serves instead)', () => {
  it('makes the next check due at once, for the same certificate', () => {
    const asRedirect = recordServingCheck(undefined, SERIAL, serving, T0, 'https://old.example');
    expect(
      nextServingCheckAt(asRedirect, SERIAL, at(1_000), DEFAULT_SERVING_SCHEDULE, 'https://old.example'),
    ).toEqual(at(DEFAULT_SERVING_SCHEDULE.intervalMs));
    expect(isNewRoute(asRedirect, undefined)).toBe(true);
    expect(isNewRoute(asRedirect, 'https://new.example')).toBe(true);
    expect(isNewRoute(asRedirect, 'https://old.example')).toBe(false);
    expect(nextServingCheckAt(asRedirect, SERIAL, at(1_000), DEFAULT_SERVING_SCHEDULE)).toEqual(at(1_000));
  });

  it('starts the record afresh (no earlier serving counts, the propagation grace applies) and keeps the earlier redirect until the new route is seen', () => {
    const asRedirect = recordServingCheck(undefined, SERIAL, serving, T0, 'https://old.example');
    expect(previousRedirectOriginOf(asRedirect, undefined)).toBe('https://old.example');
    const stillRedirecting = recordServingCheck(asRedirect, SERIAL, notReached, at(1_000));
    expect(stillRedirecting).toEqual({
      serialNumber: 'A1B2C',
      previousRedirectOrigin: 'https://old.example',
      lastCheckTime: at(1_000).toISOString(),
      lastResult: 'not-reaching-project',
      consecutiveFailures: 1,
      failingSince: at(1_000).toISOString(),
      failingFrom: 'not-reaching-project',
    });
    // Within the grace: AwaitingServing, and retried every second.
    expect(servingReadiness(notReached, stillRedirecting, at(1_000)).reason).toBe(AWAITING_SERVING);
    expect(nextServingCheckAt(stillRedirecting, SERIAL, at(1_000))).toEqual(at(2_000));
    expect(previousRedirectOriginOf(stillRedirecting, undefined)).toBe('https://old.example');
    const served = recordServingCheck(stillRedirecting, SERIAL, serving, at(2_000));
    expect(served).toEqual({
      serialNumber: 'A1B2C',
      lastCheckTime: at(2_000).toISOString(),
      lastResult: 'serving',
      consecutiveFailures: 0,
      lastServingTime: at(2_000).toISOString(),
      servingSince: at(2_000).toISOString(),
    });
    // A serving domain turned into a redirect: the route is recorded, no earlier redirect to name.
    const turned = recordServingCheck(served, SERIAL, notReached, at(3_000), 'https://new.example');
    expect(turned.redirectOrigin).toBe('https://new.example');
    expect(turned.previousRedirectOrigin).toBeUndefined();
    expect(turned.lastServingTime).toBeUndefined();
  });
});

describe('servingReadiness', () => {
  it('is True (Live) on serving, False with the verdict’s reason on a definite answer', () => {
    const ok = recordServingCheck(undefined, SERIAL, serving, T0);
    expect(servingReadiness(serving, ok, T0)).toEqual({
      status: 'True',
      reason: 'Live',
      message: 'Serves.',
    });
    const bad = recordServingCheck(ok, SERIAL, wrong, at(1_000));
    expect(servingReadiness(wrong, bad, at(1_000))).toEqual({
      status: 'False',
      reason: 'CertificateNotServed',
      message: `Another one. Failing since ${at(1_000).toISOString()}.`,
    });
  });

  it('names in Ready what the check saw, where, and when the serving run began, with the re-check interval', () => {
    const seen = {
      ...serving,
      served:
        'www.shop.example: served certificate A1B2C (valid until 2027-01-01T00:00:00.000Z) at 127.0.0.1:8443',
      answer: 'GET https://www.shop.example/ answered HTTP 301, Location https://shop.example/.',
    };
    const first = recordServingCheck(undefined, SERIAL, seen, T0);
    const later = recordServingCheck(first, SERIAL, seen, at(600_000));
    const expected =
      'www.shop.example: served certificate A1B2C (valid until 2027-01-01T00:00:00.000Z) at 127.0.0.1:8443, ' +
      `checked ${T0.toISOString()} (re-checked every 10 minutes): ` +
      'GET https://www.shop.example/ answered HTTP 301, Location https://shop.example/.';
    expect(servingReadiness(seen, first, T0).message).toBe(expected);
    expect(servingReadiness(seen, later, at(600_000)).message).toBe(expected);
    const everyFive = { intervalMs: 5_000, unreachableGraceMs: 60_000 };
    expect(servingReadiness(seen, first, T0, everyFive).message).toContain('(re-checked every 5 seconds)');
    const everyMinute = { intervalMs: 60_000, unreachableGraceMs: 60_000 };
    expect(servingReadiness(seen, first, T0, everyMinute).message).toContain('(re-checked every 1 minute)');
  });

  it('keeps a domain that served this serial Ready through the grace period while unreachable', () => {
    const ok = recordServingCheck(undefined, SERIAL, serving, T0);
    const down = recordServingCheck(ok, SERIAL, unreachable, at(60_000));
    const during = servingReadiness(unreachable, down, at(60_000));
    expect(during.status).toBe('True');
    expect(during.reason).toBe('Live');
    expect(during.message).toContain('ECONNREFUSED');
    expect(during.message).toContain(at(60_000 + DEFAULT_SERVING_SCHEDULE.unreachableGraceMs).toISOString());

    const still = recordServingCheck(
      down,
      SERIAL,
      unreachable,
      at(60_000 + DEFAULT_SERVING_SCHEDULE.unreachableGraceMs),
    );
    const after = servingReadiness(
      unreachable,
      still,
      at(60_000 + DEFAULT_SERVING_SCHEDULE.unreachableGraceMs),
    );
    expect(after).toMatchObject({ status: 'False', reason: 'DataPlaneUnreachable' });
  });

  it('keeps it Ready while the data plane comes back from a run that began unreachable (its default certificate while it reloads), not past the grace', () => {
    const ok = recordServingCheck(undefined, SERIAL, serving, T0);
    const down = recordServingCheck(ok, SERIAL, unreachable, at(60_000));
    // Restarted: its default certificate until it has read the Secret again.
    const back = recordServingCheck(down, SERIAL, wrong, at(65_000));
    expect(back.failingFrom).toBe('unreachable');
    const during = servingReadiness(wrong, back, at(65_000));
    expect(during).toMatchObject({ status: 'True', reason: 'Live' });
    expect(during.message).toContain(`the latest check failed: Another one.`);
    const end = 60_000 + DEFAULT_SERVING_SCHEDULE.unreachableGraceMs;
    const stuck = recordServingCheck(back, SERIAL, wrong, at(end));
    expect(servingReadiness(wrong, stuck, at(end))).toMatchObject({
      status: 'False',
      reason: 'CertificateNotServed',
    });
    // A run that began with another certificate gets no such grace.
    const swapped = recordServingCheck(ok, SERIAL, wrong, at(60_000));
    const thenDown = recordServingCheck(swapped, SERIAL, unreachable, at(65_000));
    expect(thenDown.failingFrom).toBe('wrong-certificate');
    expect(
      servingReadiness(wrong, recordServingCheck(thenDown, SERIAL, wrong, at(70_000)), at(70_000)).status,
    ).toBe('False');
  });

  it('gives no grace to a domain never found serving, or to a renewed certificate not yet confirmed', () => {
    const never = recordServingCheck(undefined, SERIAL, unreachable, T0);
    expect(servingReadiness(unreachable, never, T0).status).toBe('False');
    const ok = recordServingCheck(undefined, SERIAL, serving, T0);
    const renewed = recordServingCheck(ok, RENEWED, unreachable, at(1_000));
    expect(servingReadiness(unreachable, renewed, at(1_000)).status).toBe('False');
  });

  it('says since when a domain never found serving has failed, the same words on each retry', () => {
    const first = recordServingCheck(undefined, SERIAL, unreachable, T0);
    const third = recordServingCheck(
      recordServingCheck(first, SERIAL, unreachable, at(5_000)),
      SERIAL,
      unreachable,
      at(15_000),
    );
    const message = `${unreachable.message} Failing since ${T0.toISOString()}.`;
    expect(servingReadiness(unreachable, first, T0)).toEqual({
      status: 'False',
      reason: 'DataPlaneUnreachable',
      message,
    });
    expect(servingReadiness(unreachable, third, at(15_000)).message).toBe(message);
  });
});

describe('servingReadiness during the propagation grace', () => {
  it('reports the default certificate or backend of a first check as AwaitingServing (Normal) until the grace ends, then as the Warning', () => {
    const first = recordServingCheck(undefined, SERIAL, wrong, T0);
    const during = servingReadiness(wrong, first, T0);
    expect(during.status).toBe('False');
    expect(during.reason).toBe(AWAITING_SERVING);
    expect(during.message).toBe(
      'Waiting for the data plane to load the route and certificate it took: Another one. ' +
        `Normal for up to 30 s after the first check of this certificate (${T0.toISOString()}); ` +
        `reported as CertificateNotServed from ${at(DEFAULT_PROPAGATION_GRACE_MS).toISOString()} if it persists.`,
    );
    // 5 s later (the first retry), the route's answer is the default backend's: still within the grace.
    const retry = recordServingCheck(first, SERIAL, notReached, at(5_000));
    expect(servingReadiness(notReached, retry, at(5_000)).reason).toBe(AWAITING_SERVING);
    // The grace is measured from the first check of the certificate, not from the latest failure.
    const late = recordServingCheck(retry, SERIAL, wrong, at(DEFAULT_PROPAGATION_GRACE_MS));
    expect(servingReadiness(wrong, late, at(DEFAULT_PROPAGATION_GRACE_MS))).toEqual({
      status: 'False',
      reason: 'CertificateNotServed',
      message: `Another one. Failing since ${T0.toISOString()}.`,
    });
    // Serving within the grace is Live, as before.
    const served = recordServingCheck(retry, SERIAL, serving, at(10_000));
    expect(servingReadiness(serving, served, at(10_000)).reason).toBe('Live');
  });

  it('applies to a renewed certificate (the data plane loading the new Secret), not to one that served and then stopped', () => {
    const ok = recordServingCheck(undefined, SERIAL, serving, T0);
    const renewed = recordServingCheck(ok, RENEWED, wrong, at(1_000));
    expect(servingReadiness(wrong, renewed, at(1_000)).reason).toBe(AWAITING_SERVING);
    const dropped = recordServingCheck(ok, SERIAL, wrong, at(1_000));
    expect(servingReadiness(wrong, dropped, at(1_000)).reason).toBe('CertificateNotServed');
  });

  it('does not cover an unreachable data plane, and is off at 0 (--serving-check-propagation-seconds 0)', () => {
    const down = recordServingCheck(undefined, SERIAL, unreachable, T0);
    expect(servingReadiness(unreachable, down, T0).reason).toBe('DataPlaneUnreachable');
    const first = recordServingCheck(undefined, SERIAL, wrong, T0);
    const none = { ...DEFAULT_SERVING_SCHEDULE, propagationGraceMs: 0 };
    expect(servingReadiness(wrong, first, T0, none).reason).toBe('CertificateNotServed');
  });
});
