/**
 * Properties of CAA evaluation (src/dns/caa.ts, RFC 8659) and of the resolver's CAA record parser
 * (`caaRecordOf` in src/dns/resolver.ts), over generated RRsets.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { validHostname, withCase } from '../../test/fixtures/arbitraries.js';
import { caaSearchNames, evaluateCaa, issuerDomainName, type CaaRecord } from './caa.js';
import { caaRecordOf } from './resolver.js';

const CA = 'letsencrypt.org';
const OTHER_CAS = ['pki.goog', 'sectigo.com', 'digicert.com', 'letsencrypt.org.example'];

/** An issuer domain name as a zone file may write it: any case, spaces, parameters (§4.2). */
const issueValue = (domain: fc.Arbitrary<string>): fc.Arbitrary<string> =>
  fc
    .tuple(
      domain,
      fc.array(fc.boolean(), { minLength: 1, maxLength: 6 }),
      fc.constantFrom('', ' '),
      fc.constantFrom('', '; account=1234', ';validationmethods=dns-01', ' ; policy=ev'),
    )
    .map(([d, upper, pad, params]) => `${pad}${withCase(d, upper)}${pad}${params}`);

const record = (
  critical: fc.Arbitrary<number>,
  tag: string,
  value: fc.Arbitrary<string>,
): fc.Arbitrary<CaaRecord> => fc.record({ critical, tag: fc.constant(tag), value });

/** Records that never decide issuance for a non-wildcard name. */
const harmless = fc.oneof(
  record(fc.constantFrom(0, 128), 'iodef', fc.constant('mailto:security@example.com')),
  record(fc.constantFrom(0, 128), 'issuewild', issueValue(fc.constantFrom(...OTHER_CAS, ';'))),
  record(fc.constant(0), 'tbs', fc.string({ maxLength: 10 })),
  record(fc.constantFrom(0, 128), 'contactemail', fc.constant('dns@example.com')),
);
const issueFor = (domains: readonly string[]): fc.Arbitrary<CaaRecord> =>
  record(fc.constant(0), 'issue', issueValue(fc.constantFrom(...domains)));
const criticalUnknown = record(fc.constant(128), 'tbs', fc.string({ maxLength: 10 }));

/** `records` rotated by `seed`. */
const rotate = <T>(records: readonly T[], seed: number): T[] =>
  records.map((_, i) => records[(i + seed) % records.length] as T);

describe('evaluateCaa properties', () => {
  it('allows issuance when no record has an issue property (§4.2)', () => {
    fc.assert(
      fc.property(validHostname, fc.array(harmless, { maxLength: 5 }), (owner, records) => {
        expect(evaluateCaa(owner, records, [CA]).allowed).toBe(true);
      }),
    );
  });

  it('allows issuance when one issue property names the CA, whatever its case, spacing and parameters', () => {
    fc.assert(
      fc.property(
        validHostname,
        fc.array(fc.oneof(harmless, issueFor([...OTHER_CAS, ';'])), { maxLength: 5 }),
        issueFor([CA]),
        fc.nat(),
        (owner, others, ours, seed) => {
          const v = evaluateCaa(owner, rotate([...others, ours], seed), [CA]);
          expect(v).toMatchObject({ allowed: true, reason: 'CAAPermitsIssuer' });
        },
      ),
    );
  });

  it('forbids issuance when issue properties exist and none names the CA, naming each and the record to add', () => {
    fc.assert(
      fc.property(
        validHostname,
        fc.array(harmless, { maxLength: 3 }),
        fc.array(issueFor([...OTHER_CAS, ';']), { minLength: 1, maxLength: 3 }),
        fc.nat(),
        (owner, harmlessRecords, issues, seed) => {
          const v = evaluateCaa(owner, rotate([...harmlessRecords, ...issues], seed), [CA]);
          expect(v).toMatchObject({ allowed: false, reason: 'CAAForbidsIssuance' });
          expect(v.message).toContain(`add CAA ${owner} 0 issue "${CA}"`);
          for (const r of issues) expect(v.message).toContain(`CAA ${owner} 0 issue "${r.value}"`);
        },
      ),
    );
  });

  it('forbids issuance when a critical property has a tag the CA does not know (§4.1), even beside a permit', () => {
    fc.assert(
      fc.property(
        validHostname,
        fc.array(fc.oneof(harmless, issueFor([CA])), { maxLength: 4 }),
        criticalUnknown,
        fc.nat(),
        (owner, others, critical, seed) => {
          const v = evaluateCaa(owner, rotate([...others, critical], seed), [CA]);
          expect(v.allowed).toBe(false);
          expect(v.message).toContain(`CAA ${owner} 128 tbs`);
        },
      ),
    );
  });
});

describe('CAA parsing properties', () => {
  it('reads the issuer domain name of an issue value: before the first ";", trimmed, lowercase (§4.2)', () => {
    fc.assert(
      fc.property(validHostname, issueValue(fc.constant('x')), (domain, shape) => {
        // `shape` is an issue value for the domain "x"; put the generated domain in its place.
        const value = shape.replace(/x/i, domain.toUpperCase());
        expect(issuerDomainName(value)).toBe(domain);
      }),
    );
  });

  it("turns node:dns's CAA objects into {critical, tag, value}, ignoring Node's type field", () => {
    const tag = fc.constantFrom('issue', 'issuewild', 'iodef', 'contactemail', 'tbs');
    fc.assert(
      fc.property(
        fc.constantFrom(0, 128),
        tag,
        fc.string({ maxLength: 30 }),
        fc.boolean(),
        (critical, t, value, typed) => {
          const fromNode = { critical, [t]: value, ...(typed ? { type: 'CAA' } : {}) } as Parameters<
            typeof caaRecordOf
          >[0];
          expect(caaRecordOf(fromNode)).toEqual({ critical, tag: t, value });
        },
      ),
    );
  });

  it('searches from the name up to its top-level domain, one label less each step (§3)', () => {
    fc.assert(
      fc.property(validHostname, (hostname) => {
        const names = caaSearchNames(hostname);
        expect(names[0]).toBe(hostname);
        expect(names).toHaveLength(hostname.split('.').length);
        expect(names.at(-1)).toBe(hostname.split('.').at(-1));
        for (let i = 1; i < names.length; i += 1) {
          expect(names[i - 1]?.endsWith(`.${names[i] ?? ''}`)).toBe(true);
          expect(names[i]?.split('.').length).toBe(hostname.split('.').length - i);
        }
      }),
    );
  });
});
