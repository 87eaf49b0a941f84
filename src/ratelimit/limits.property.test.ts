/**
 * Properties of reading a rate-limit descriptor (`lookupLimits`, src/ratelimit/limits.ts): which
 * limits apply to the entries Envoy sends (`key_id`, `plan`; docs/ratelimits.md, "The check the
 * gateway sends"), over generated policies and descriptors. Read-only use of the module.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { DESCRIPTOR_KEY_ID, DESCRIPTOR_PLAN, type MissingKeyId } from '../api/ratelimitpolicy.js';
import { lookupLimits, type DescriptorEntry, type IndexedPolicy, type WindowLimits } from './limits.js';

const limits: fc.Arbitrary<WindowLimits> = fc.record({
  perMinute: fc.integer({ min: 1, max: 100_000 }),
  perDay: fc.integer({ min: 1, max: 10_000_000 }),
});
/** Plan names as the CRD allows them (lowercase). */
const planName = fc.constantFrom('free', 'pro', 'business', 'enterprise', 'team');
/** A plan as a gateway may send it: any case of a name (matched without regard to case). */
const sentPlanName = fc.oneof(
  planName,
  planName.map((n) => n.toUpperCase()),
  planName.map((n) => `${n.charAt(0).toUpperCase()}${n.slice(1)}`),
  fc.constantFrom('platinum', 'PLATINUM'),
);
const keyId = fc.oneof(
  fc.constantFrom('acme-corp-prod', 'k1', 'k2'),
  fc.string({ minLength: 1, maxLength: 20 }),
);

/** A policy with 1 to 4 plans, `defaultPlan` one of them, and 0 to 3 overrides. */
const policy: fc.Arbitrary<IndexedPolicy> = fc
  .uniqueArray(fc.tuple(planName, limits), { minLength: 1, maxLength: 4, selector: ([name]) => name })
  .chain((plans) =>
    fc.record({
      domain: fc.constant('platform-api/public-api'),
      uid: fc.constant('uid-1'),
      generation: fc.nat(),
      plans: fc.constant(new Map(plans)),
      defaultPlan: fc.constantFrom(...plans.map(([name]) => name)),
      overrides: fc
        .uniqueArray(fc.tuple(keyId, limits), { maxLength: 3, selector: ([id]) => id })
        .map((o) => new Map(o)),
      ban: fc.option(
        fc.record({
          afterRejectedRequests: fc.nat({ max: 50 }),
          durationMs: fc.integer({ min: 1, max: 3_600_000 }),
        }),
        { nil: undefined },
      ),
      missingKeyId: fc.constantFrom<MissingKeyId>('LimitByRemoteAddress', 'Refuse'),
    }),
  );

/** Entries that are neither key_id nor plan (Envoy may send others, e.g. generic_key). */
const otherEntry: fc.Arbitrary<DescriptorEntry> = fc.record(
  {
    key: fc.constantFrom('generic_key', 'remote_address', 'path', 'key', 'plan_id', 'KEY_ID', ''),
    value: fc.string({ maxLength: 10 }),
  },
  { requiredKeys: [] },
);

/** A descriptor: key_id and plan entries (each maybe absent), shuffled among other entries. */
const descriptor = fc
  .tuple(
    fc.option(keyId, { nil: undefined }),
    fc.option(sentPlanName, { nil: undefined }),
    fc.array(otherEntry, { maxLength: 4 }),
    fc.nat(),
  )
  .map(([id, plan, others, at]) => {
    const entries: DescriptorEntry[] = [...others];
    const insert = (e: DescriptorEntry): void => {
      entries.splice(at % (entries.length + 1), 0, e);
    };
    if (plan !== undefined) insert({ key: DESCRIPTOR_PLAN, value: plan });
    if (id !== undefined) insert({ key: DESCRIPTOR_KEY_ID, value: id });
    return { id, plan, entries };
  });

describe('lookupLimits properties', () => {
  it('applies an override, else the plan sent (any case) when the policy has it, else the default plan', () => {
    fc.assert(
      fc.property(policy, descriptor, (p, { id, plan, entries }) => {
        const lookup = lookupLimits(p, entries);
        const known = plan !== undefined && p.plans.has(plan.toLowerCase());
        const planLimits = known ? p.plans.get(plan.toLowerCase()) : p.plans.get(p.defaultPlan);
        if (id === undefined) {
          const address = entries.find((e) => e.key === 'remote_address')?.value ?? '';
          if (p.missingKeyId === 'Refuse' || address === '') {
            expect(lookup).toEqual({ kind: 'noKeyId' });
          } else {
            expect(lookup).toEqual({
              kind: 'limited',
              keyId: address,
              subject: 'remoteAddress',
              plan: known ? plan.toLowerCase() : p.defaultPlan,
              source: known ? 'plan' : 'defaultPlan',
              limits: planLimits,
              ban: p.ban,
            });
          }
          return;
        }
        const override = p.overrides.get(id);
        const expected = override ?? planLimits;
        expect(lookup).toEqual({
          kind: 'limited',
          keyId: id,
          subject: 'keyId',
          plan: known ? plan.toLowerCase() : p.defaultPlan,
          source: override ? 'override' : known ? 'plan' : 'defaultPlan',
          limits: expected,
          ban: p.ban,
        });
      }),
    );
  });

  it('reads the first key_id and plan entries, whatever comes after them', () => {
    fc.assert(
      fc.property(
        policy,
        descriptor,
        fc.array(otherEntry, { maxLength: 3 }),
        keyId,
        sentPlanName,
        (p, { plan, entries }, tail, laterId, laterPlan) => {
          // A later plan entry counts only when the descriptor has none before it.
          const later: DescriptorEntry[] = [...tail, { key: DESCRIPTOR_KEY_ID, value: laterId }];
          if (plan !== undefined) later.push({ key: DESCRIPTOR_PLAN, value: laterPlan });
          const first = lookupLimits(p, entries);
          const withLater = lookupLimits(p, [...entries, ...later]);
          if (first.kind === 'limited' && first.subject === 'keyId') expect(withLater).toEqual(first);
          else expect(withLater).toMatchObject({ kind: 'limited', keyId: laterId });
        },
      ),
    );
  });

  it('never leaves a descriptor with an empty or valueless key_id unlimited; a domain without policy is', () => {
    fc.assert(
      fc.property(policy, fc.array(otherEntry, { maxLength: 4 }), fc.boolean(), (p, others, valueless) => {
        const empty: DescriptorEntry = valueless
          ? { key: DESCRIPTOR_KEY_ID }
          : { key: DESCRIPTOR_KEY_ID, value: '' };
        const lookup = lookupLimits(p, [...others, empty]);
        expect(
          lookup.kind === 'noKeyId' || (lookup.kind === 'limited' && lookup.subject === 'remoteAddress'),
        ).toBe(true);
        expect(lookupLimits(undefined, [...others, { key: DESCRIPTOR_KEY_ID, value: 'k1' }]).kind).toBe(
          'unknownDomain',
        );
      }),
    );
  });
});
