import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import type { VerdictReason } from '../dns/verdict.js';
import type { NotRoutedReason, UnservableReason } from '../routing/plan.js';
import type { RedirectNotRoutedReason } from '../routing/redirect.js';
import type { OrderQueueReason } from '../acme/order-decision.js';
import type { ServingReadiness } from '../serving/schedule.js';
import {
  CUSTOM_DOMAIN_REASONS,
  eventTypeOf,
  RATE_LIMIT_ATTACHED_REASONS,
  WARNING_REASONS,
  type CustomDomainReason,
} from './reasons.js';

// Compile-time: every reason type the code writes is in the catalogue (a new one fails typecheck).
type Includes<T extends CustomDomainReason> = T;
export type Checked =
  | Includes<VerdictReason>
  | Includes<NotRoutedReason>
  | Includes<RedirectNotRoutedReason>
  | Includes<UnservableReason>
  | Includes<ServingReadiness['reason']>;

const docs = readFileSync(new URL('../../docs/customdomains.md', import.meta.url), 'utf8');
/** Reasons named in the first two columns of docs/customdomains.md's condition table. */
const documented = new Set(
  docs
    .split('\n')
    .filter((line) =>
      /^\| (Accepted|DNSVerified|CertificateReady|Routed|Conflicted|Ready|Event) \|/.test(line),
    )
    .flatMap((line) => [...(line.split('|')[2] ?? '').matchAll(/`([A-Z][A-Za-z]+)`/g)].map((m) => m[1])),
);

describe('the reason catalogue (docs/customdomains.md, "Conditions and reasons")', () => {
  it('documents every reason in docs/customdomains.md, and documents no reason it lacks', () => {
    const catalogued = Object.keys(CUSTOM_DOMAIN_REASONS);
    expect(catalogued.filter((r) => !documented.has(r))).toEqual([]);
    expect([...documented].filter((r) => r !== undefined && !catalogued.includes(r))).toEqual([]);
  });

  it('records a reason that asks a person to act as a Warning', () => {
    expect(eventTypeOf('ServicePortNotFound')).toBe('Warning');
    expect(eventTypeOf('Reissuing')).toBe('Warning');
    expect(eventTypeOf('Issued')).toBe('Normal');
    expect(eventTypeOf('NotInTheCatalogue')).toBe('Normal');
    expect(WARNING_REASONS.has('Live')).toBe(false);
  });

  it('gives each reason a one-line meaning', () => {
    for (const [reason, entry] of Object.entries(CUSTOM_DOMAIN_REASONS)) {
      expect(entry.doc.length, reason).toBeGreaterThan(10);
      expect(entry.doc, reason).not.toContain('\n');
    }
  });

  it('is not where the ACME budget’s limits are named (those are message text, not reasons)', () => {
    const limit: OrderQueueReason = 'AccountOrderBudget';
    expect(limit in CUSTOM_DOMAIN_REASONS).toBe(false);
  });
});

describe('the RateLimitPolicy Attached reasons (docs/ratelimits.md, "Conditions")', () => {
  const rateLimitDocs = readFileSync(new URL('../../docs/ratelimits.md', import.meta.url), 'utf8');
  const attachedRows = new Set(
    rateLimitDocs
      .split('\n')
      .filter((line) => line.startsWith('| Attached |'))
      .map((line) => /`?([A-Z][A-Za-z]+)`?/.exec(line.split('|')[3] ?? '')?.[1]),
  );

  it('documents every reason in the condition table of docs/ratelimits.md, and no other', () => {
    const catalogued = Object.keys(RATE_LIMIT_ATTACHED_REASONS);
    expect(catalogued.filter((r) => !attachedRows.has(r))).toEqual([]);
    expect([...attachedRows].filter((r) => r === undefined || !catalogued.includes(r))).toEqual([]);
  });

  it('gives each reason a one-line meaning', () => {
    for (const [reason, entry] of Object.entries(RATE_LIMIT_ATTACHED_REASONS)) {
      expect(entry.doc.length, reason).toBeGreaterThan(10);
      expect(entry.doc, reason).not.toContain('\n');
    }
  });
});
