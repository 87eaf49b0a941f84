/**
 * Properties of compiling a RateLimitPolicy into the rate-limit service's config
 * (`compilePolicy`, compile.ts; `parseDurationSeconds`, duration.ts), over generated policies: a
 * valid policy compiles to an entry that says exactly what the policy says and that the server reads
 * back unchanged; each kind of mistake is refused with a message naming it.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { policyDomain, type RateLimitPolicy, type RateLimitPolicySpec } from '../../api/ratelimitpolicy.js';
import { parseCompiledConfig, renderCompiledConfig } from '../../ratelimit/config-schema.js';
import { compilePolicy } from './compile.js';
import { parseDurationSeconds } from './duration.js';

const planName = fc.stringMatching(/^[a-z0-9]([a-z0-9._-]{0,14}[a-z0-9])?$/);
const limit = fc.integer({ min: 1, max: 1_000_000 });
const plan = fc
  .tuple(planName, limit, fc.integer({ min: 0, max: 1_000_000 }))
  .map(([name, perMinute, extra]) => ({
    name,
    requestsPerMinute: perMinute,
    requestsPerDay: perMinute + extra,
  }));

/** A valid spec: 1 to 5 plans with unique names, the default one of them, unique overrides, maybe a ban. */
const validSpec: fc.Arbitrary<RateLimitPolicySpec> = fc
  .uniqueArray(plan, { minLength: 1, maxLength: 5, selector: (p) => p.name })
  .chain((plans) =>
    fc.record(
      {
        plans: fc.constant(plans),
        defaultPlan: fc.constantFrom(...plans.map((p) => p.name)),
        overrides: fc.uniqueArray(
          fc.tuple(fc.string({ minLength: 1, maxLength: 40, unit: 'grapheme' }), plan).map(([keyId, p]) => ({
            keyId,
            requestsPerMinute: p.requestsPerMinute,
            requestsPerDay: p.requestsPerDay,
          })),
          { maxLength: 5, selector: (o) => o.keyId },
        ),
        ban: fc.record({
          afterRejectedRequests: fc.integer({ min: 1, max: 1_000_000 }),
          duration: fc
            .tuple(
              fc.integer({ min: 0, max: 167 }),
              fc.integer({ min: 0, max: 59 }),
              fc.integer({ min: 1, max: 59 }),
            )
            .map(([h, m, s]) => `${h}h${m}m${s}s`),
        }),
      },
      { requiredKeys: ['plans', 'defaultPlan'] },
    ),
  );

function policyOf(spec: RateLimitPolicySpec, generation = 3): RateLimitPolicy {
  return {
    apiVersion: 'portico.dev/v1alpha1',
    kind: 'RateLimitPolicy',
    metadata: { name: 'public-api', namespace: 'platform-api', uid: 'uid-1', generation },
    spec,
  };
}

describe('compilePolicy properties', () => {
  it('compiles a valid policy to an entry that says what the policy says', () => {
    fc.assert(
      fc.property(validSpec, fc.integer({ min: 1, max: 1000 }), (spec, generation) => {
        const result = compilePolicy(policyOf(spec, generation));
        expect(result.ok).toBe(true);
        if (!result.ok) return;
        const { entry } = result;
        expect(entry.domain).toBe(policyDomain(policyOf(spec)));
        expect(entry.generation).toBe(generation);
        expect(entry.plans).toEqual(spec.plans);
        expect(entry.defaultPlan).toBe(spec.defaultPlan);
        expect(entry.overrides).toEqual(spec.overrides ?? []);
        if (spec.ban) {
          expect(entry.ban).toEqual({
            afterRejectedRequests: spec.ban.afterRejectedRequests,
            durationSeconds: parseDurationSeconds(spec.ban.duration),
          });
        } else {
          expect(entry.ban).toBeUndefined();
        }
      }),
    );
  });

  it('renders entries the server reads back unchanged, with nothing refused', () => {
    fc.assert(
      fc.property(fc.array(validSpec, { minLength: 1, maxLength: 3 }), (specs) => {
        const entries = specs.flatMap((spec, i) => {
          const policy = policyOf(spec);
          policy.metadata.name = `p${i}`;
          const result = compilePolicy(policy);
          return result.ok ? [result.entry] : [];
        });
        expect(entries).toHaveLength(specs.length);
        const parsed = parseCompiledConfig(renderCompiledConfig(entries));
        expect(parsed.rejected).toEqual([]);
        expect(parsed.policies).toEqual(entries);
      }),
    );
  });

  it('refuses a plan name outside the grammar, naming it', () => {
    const badName = fc
      .string({ minLength: 1, maxLength: 12 })
      .filter((s) => !/^[a-z0-9]([a-z0-9._-]*[a-z0-9])?$/.test(s));
    fc.assert(
      fc.property(validSpec, badName, (spec, name) => {
        const plans = [...spec.plans, { name, requestsPerMinute: 1, requestsPerDay: 1 }];
        const result = compilePolicy(policyOf({ ...spec, plans }));
        expect(result.ok).toBe(false);
        if (!result.ok) expect(result.message).toContain(`name "${name}"`);
      }),
    );
  });

  it('refuses a plan or override whose day limit is below its minute limit', () => {
    fc.assert(
      fc.property(
        validSpec,
        limit,
        fc.integer({ min: 1, max: 1000 }),
        fc.boolean(),
        (spec, day, less, onPlan) => {
          const bad = { requestsPerMinute: day + less, requestsPerDay: day };
          const changed: RateLimitPolicySpec = onPlan
            ? { ...spec, plans: spec.plans.map((p, i) => (i === 0 ? { ...p, ...bad } : p)) }
            : { ...spec, overrides: [...(spec.overrides ?? []), { keyId: '\u0000new-key', ...bad }] };
          const result = compilePolicy(policyOf(changed));
          expect(result.ok).toBe(false);
          if (!result.ok)
            expect(result.message).toContain('requestsPerDay must be at least requestsPerMinute');
        },
      ),
    );
  });

  it('refuses a default plan that is not one of the plans', () => {
    fc.assert(
      fc.property(validSpec, planName, (spec, other) => {
        fc.pre(!spec.plans.some((p) => p.name === other));
        const result = compilePolicy(policyOf({ ...spec, defaultPlan: other }));
        expect(result.ok).toBe(false);
        if (!result.ok) expect(result.message).toContain('defaultPlan must name one of plans');
      }),
    );
  });

  it('refuses a ban longer than 7 days or shorter than 1 s, and a duration outside the grammar', () => {
    fc.assert(
      fc.property(validSpec, fc.integer({ min: 7 * 24 + 1, max: 100_000 }), (spec, hours) => {
        const ban = { afterRejectedRequests: 1, duration: `${hours}h` };
        const result = compilePolicy(policyOf({ ...spec, ban }));
        expect(result.ok).toBe(false);
        if (!result.ok) expect(result.message).toContain('ban.duration: must be from 1s to 168h');
      }),
    );
    fc.assert(
      fc.property(
        validSpec,
        fc.constantFrom('0s', '0h0m0s', '15', '1d', '1h 30m', 'm', ''),
        (spec, duration) => {
          const result = compilePolicy(policyOf({ ...spec, ban: { afterRejectedRequests: 1, duration } }));
          expect(result.ok).toBe(false);
          if (!result.ok) expect(result.message).toContain('ban.duration');
        },
      ),
    );
  });
});

describe('parseDurationSeconds properties', () => {
  it('sums hours, minutes and seconds written in any order and grouping', () => {
    const part = fc.tuple(fc.integer({ min: 0, max: 10_000 }), fc.constantFrom('h', 'm', 's'));
    fc.assert(
      fc.property(fc.array(part, { minLength: 1, maxLength: 6 }), (parts) => {
        const text = parts.map(([n, unit]) => `${n}${unit}`).join('');
        const expected = parts.reduce((sum, [n, unit]) => sum + n * { h: 3600, m: 60, s: 1 }[unit], 0);
        expect(parseDurationSeconds(text)).toBe(expected);
      }),
    );
  });

  it('refuses text outside the grammar', () => {
    fc.assert(
      fc.property(
        fc.string({ maxLength: 10 }).filter((s) => !/^([0-9]+(h|m|s))+$/.test(s)),
        (text) => {
          expect(parseDurationSeconds(text)).toBeUndefined();
        },
      ),
    );
  });
});
