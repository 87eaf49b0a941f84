/**
 * Properties of the DNS verdicts (src/dns/verdict.ts) over generated answers: a subdomain is
 * verified exactly when every CNAME equals the target (case and a root dot aside, RFC 4343); an apex
 * exactly when every address is one of the target's; a resolver failure is never a definite "no";
 * the verdict lists every record DNS returned and does not depend on their order; every verdict that is
 * not verified says that DNS changes can take up to 48 hours.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  answerOf,
  emptyAnswer,
  isResolverFailure,
  validHostname,
  withCase,
} from '../../test/fixtures/arbitraries.js';
import { recordValues, type HostnameAnswers, type RRsetAnswer } from './answers.js';
import { PROPAGATION_NOTE, verifyApex, verifySubdomain, type Verdict } from './verdict.js';

const TRANSIENT_REASONS = ['DNSServerFailure', 'DNSTimeout', 'DNSError', 'TargetUnresolvable'];

/** A CNAME value: the target itself written another way (any case, a root dot), or another name. */
const cnameValue = (target: string): fc.Arbitrary<string> =>
  fc.oneof(
    fc
      .tuple(fc.array(fc.boolean(), { minLength: 1, maxLength: 8 }), fc.boolean())
      .map(([upper, dot]) => withCase(target, upper) + (dot ? '.' : '')),
    validHostname,
  );

const hostnameAnswers = (
  cname: fc.Arbitrary<RRsetAnswer>,
  a: fc.Arbitrary<string>,
  aaaa: fc.Arbitrary<string>,
): fc.Arbitrary<HostnameAnswers> => fc.record({ cname, a: answerOf(a), aaaa: answerOf(aaaa) });

const sameName = (x: string, y: string): boolean =>
  x.toLowerCase().replace(/\.$/, '') === y.toLowerCase().replace(/\.$/, '');

/** The answers with each RRset's values in another order. */
function shuffled(answers: HostnameAnswers, seed: number): HostnameAnswers {
  const reorder = (answer: RRsetAnswer): RRsetAnswer =>
    answer.kind === 'records'
      ? { kind: 'records', values: answer.values.map((_, i, v) => v[(i + seed) % v.length] ?? '') }
      : answer;
  return { cname: reorder(answers.cname), a: reorder(answers.a), aaaa: reorder(answers.aaaa) };
}

function expectWellFormed(v: Verdict, hostname: string, answers: HostnameAnswers): void {
  expect(v.message.length).toBeGreaterThan(0);
  expect(v.transient).toBe(TRANSIENT_REASONS.includes(v.reason));
  if (v.verified) expect(v.reason).toBe('RecordMatches');
  // Every message of a domain not (yet) verified tells the customer to allow for propagation
  // (docs/customdomains.md, "DNS instructions").
  else expect(v.message).toContain(PROPAGATION_NOTE);
  // Every record DNS returned is listed, under the hostname, and nothing else.
  const returned = [answers.cname, answers.a, answers.aaaa].flatMap(recordValues);
  expect(v.records.map((r) => r.value).sort()).toEqual([...returned].sort());
  expect(v.records.every((r) => r.name === hostname)).toBe(true);
}

describe('verifySubdomain properties', () => {
  const input = fc
    .tuple(validHostname, validHostname)
    .chain(([hostname, target]) =>
      fc.tuple(
        fc.constant(hostname),
        fc.constant(target),
        hostnameAnswers(answerOf(cnameValue(target)), fc.ipV4(), fc.ipV6()),
      ),
    );

  it('verifies exactly when every CNAME equals the target, case and a root dot aside', () => {
    fc.assert(
      fc.property(input, fc.nat(), ([hostname, target, answers], seed) => {
        const v = verifySubdomain(hostname, target, answers);
        const cnames = recordValues(answers.cname);
        expect(v.verified).toBe(cnames.length > 0 && cnames.every((c) => sameName(c, target)));
        expectWellFormed(v, hostname, answers);
        // Not verified for a reason of the customer's records: the message names the wanted record.
        if (!v.verified && !v.transient) expect(v.message).toContain(`CNAME ${hostname} -> ${target}`);
        const again = verifySubdomain(hostname, target, shuffled(answers, seed));
        expect([again.verified, again.reason]).toEqual([v.verified, v.reason]);
      }),
    );
  });

  it('never gives a definite answer when the CNAME query failed', () => {
    const failed = emptyAnswer.filter(isResolverFailure);
    fc.assert(
      fc.property(
        validHostname,
        validHostname,
        hostnameAnswers(failed, fc.ipV4(), fc.ipV6()),
        (hostname, target, answers) => {
          const v = verifySubdomain(hostname, target, answers);
          expect(v.verified).toBe(false);
          expect(v.transient).toBe(true);
        },
      ),
    );
  });
});

describe('verifyApex properties', () => {
  /** Addresses from a small pool, so the apex's and the target's often overlap. */
  const v4 = fc.constantFrom('192.0.2.1', '192.0.2.2', '198.51.100.7', '203.0.113.9');
  const v6 = fc.constantFrom('2001:db8::1', '2001:db8::2', '2001:db8:1::7');
  const input = fc.tuple(
    validHostname,
    validHostname,
    hostnameAnswers(answerOf(validHostname), v4, v6),
    fc.record({ a: answerOf(v4), aaaa: answerOf(v6) }),
  );

  it("verifies exactly when the apex has addresses and all are the target's, and only then", () => {
    fc.assert(
      fc.property(input, fc.nat(), ([hostname, target, answers, targetAddresses], seed) => {
        const v = verifyApex(hostname, target, answers, targetAddresses);
        const failed = isResolverFailure(answers.a) || isResolverFailure(answers.aaaa);
        const allowed = new Set([...recordValues(targetAddresses.a), ...recordValues(targetAddresses.aaaa)]);
        const addresses = [...recordValues(answers.a), ...recordValues(answers.aaaa)];
        expect(v.verified).toBe(
          !failed && allowed.size > 0 && addresses.length > 0 && addresses.every((x) => allowed.has(x)),
        );
        if (failed) expect(v.transient).toBe(true);
        expectWellFormed(v, hostname, answers);
        const again = verifyApex(hostname, target, shuffled(answers, seed), targetAddresses);
        expect([again.verified, again.reason]).toEqual([v.verified, v.reason]);
      }),
    );
  });

  it('names every address that is not the target’s', () => {
    fc.assert(
      fc.property(input, ([hostname, target, answers, targetAddresses]) => {
        const v = verifyApex(hostname, target, answers, targetAddresses);
        if (v.reason !== 'AddressMismatch' && v.reason !== 'ConflictingRecord') return;
        const allowed = new Set([...recordValues(targetAddresses.a), ...recordValues(targetAddresses.aaaa)]);
        for (const r of v.records.filter((x) => x.type !== 'CNAME' && !allowed.has(x.value))) {
          expect(v.message).toContain(`${r.type} ${hostname} -> ${r.value}`);
        }
      }),
    );
  });
});
