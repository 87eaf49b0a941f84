import type { KubernetesObject } from '@kubernetes/client-node';
import { describe, expect, it } from 'vitest';
import { ReferenceSettle } from './reference-settle.js';

const rule = { kind: 'Middleware', ms: 2_500 };
const domain = { namespace: 'shop', name: 'old' };
const obj = (kind: string, name: string): KubernetesObject => ({ kind, metadata: { name } });
const service = obj('Service', 'portico-redirect');
const middleware = obj('Middleware', 'portico-old-redirect');
const ingress = obj('Ingress', 'portico-old');

/** One pass over [Service, Middleware, Ingress] at `now`, `wrote` saying which changed; what was applied. */
function pass(settle: ReferenceSettle, now: number, wrote: (o: KubernetesObject) => boolean) {
  const p = settle.pass(rule, domain, now);
  const applied: string[] = [];
  for (const o of [service, middleware, ingress]) {
    if (p.holds(o)) continue;
    applied.push(o.kind ?? '');
    p.applied(o, wrote(o));
  }
  return { p, applied };
}

describe('ReferenceSettle', () => {
  it('holds the Ingress back until the Middleware it names was written the settle time ago, then writes it', () => {
    const settle = new ReferenceSettle();
    const first = pass(settle, 1_000, () => true);
    expect(first.applied).toEqual(['Service', 'Middleware']);
    expect(first.p.held()).toEqual({
      objects: ['Ingress portico-old'],
      by: 'Middleware portico-old-redirect',
      writtenAt: 1_000,
      until: 3_500,
    });
    expect(first.p.requeueAfterMs()).toBe(2_500);
    expect(first.p.heldState('Traefik')).toEqual({
      kind: 'not-routed',
      reason: 'AwaitingDataPlane',
      message:
        'Ingress portico-old is written 2.5 s after Middleware portico-old-redirect was (at 1970-01-01T00:00:01.000Z): Traefik reads the two apart, reports on neither, and builds no route that names an object it has not loaded.',
    });
    // A pass before the time (a watch event): the Middleware is unchanged, the Ingress still waits.
    const early = pass(settle, 2_000, () => false);
    expect(early.applied).toEqual(['Service', 'Middleware']);
    expect(early.p.requeueAfterMs()).toBe(1_500);
    const due = pass(settle, 3_500, (o) => o === ingress);
    expect(due.applied).toEqual(['Service', 'Middleware', 'Ingress']);
    expect(due.p.held()).toBeUndefined();
    expect(due.p.heldState('Traefik')).toBeUndefined();
  });

  it('holds nothing when the Middleware was not written (unchanged, or after a restart) or without a rule', () => {
    const settle = new ReferenceSettle();
    expect(pass(settle, 1_000, (o) => o !== middleware).applied).toEqual([
      'Service',
      'Middleware',
      'Ingress',
    ]);
    // The Middleware changed (another target) but the Ingress is as the data plane has it: not held.
    const retarget = settle.pass(rule, { namespace: 'shop', name: 'moved' }, 1_000);
    retarget.applied(middleware, true);
    expect(retarget.holds(ingress, () => true)).toBe(false);
    expect(retarget.held()).toBeUndefined();
    const none = settle.pass(undefined, domain, 1_000);
    none.applied(middleware, true);
    expect(none.holds(ingress)).toBe(false);
    expect(none.mayDelete({ kind: 'Middleware' })).toBe(true);
    expect(none.requeueAfterMs()).toBeUndefined();
  });

  it('deletes a Middleware no longer wanted only the settle time after the domain last wrote (the Ingress that stopped naming it)', () => {
    const settle = new ReferenceSettle();
    const p = settle.pass(rule, domain, 10_000);
    p.applied(ingress, true);
    expect(p.mayDelete({ kind: 'Middleware' })).toBe(false);
    expect(p.mayDelete({ kind: 'Ingress' })).toBe(true);
    expect(p.requeueAfterMs()).toBe(2_500);
    expect(p.heldState('Traefik')).toBeUndefined();
    expect(settle.pass(rule, domain, 11_000).mayDelete({ kind: 'Middleware' })).toBe(false);
    expect(settle.pass(rule, domain, 12_500).mayDelete({ kind: 'Middleware' })).toBe(true);
    // Another domain's writes do not hold this one's deletions.
    const other = settle.pass(rule, { namespace: 'shop', name: 'new' }, 10_000);
    expect(other.mayDelete({ kind: 'Middleware' })).toBe(true);
  });
});
