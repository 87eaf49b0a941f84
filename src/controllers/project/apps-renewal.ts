/**
 * The renewal decision of the apps domain's wildcard certificate, kept on its Secret
 * (docs/customdomains.md, "The auto-generated subdomain"). A CustomDomain keeps the CA's ACME
 * Renewal Information answer (RFC 9773) in `status.certificate`; the wildcard has no status of its
 * own, so the same answer, the renewal time chosen in its window and the last verify request acted
 * on are one JSON annotation, `portico.dev/renewal-info`, on the Secret in the operator's namespace:
 * where a platform team reads it (`kubectl get secret -o jsonpath`), and what a restarted operator,
 * or a new leader, plans from instead of asking the CA again before its Retry-After.
 *
 * Pure: no I/O, no clock.
 */
import { z } from 'zod';
import type { CertificateStatus } from '../../api/customdomain.js';

/** The Secret's annotation that holds the `RenewalRecord`, as JSON. */
export const RENEWAL_INFO_ANNOTATION = 'portico.dev/renewal-info';

const time = z.iso.datetime({ offset: true });

const recordSchema = z.object({
  /** The certificate the decision is for: uppercase hex, as `CertificateFacts.serialNumber`. */
  serialNumber: z.string().min(1),
  /** RFC 3339: when the certificate is renewed. */
  renewalTime: time,
  /** The CA's renewal information, as a CustomDomain's `status.certificate.ari`. */
  ari: z
    .object({
      certId: z.string().min(1),
      windowStart: time,
      windowEnd: time,
      explanationURL: z.string().optional(),
      checkedAt: time,
      nextCheckAt: time,
    })
    .optional(),
  /** The value of the Secret's `portico.dev/verify-requested-at` last acted on. */
  lastVerifyRequest: z.string().optional(),
});

/** What `portico.dev/renewal-info` holds. */
export type RenewalRecord = z.infer<typeof recordSchema>;

/**
 * The record in an annotation's value; undefined when there is none, or it is not JSON of the
 * record's shape (it is then made again, as if absent: the CA is asked, nothing fails).
 */
export function parseRenewalRecord(value: string | undefined): RenewalRecord | undefined {
  if (value === undefined) return undefined;
  let json: unknown;
  try {
    json = JSON.parse(value);
  } catch {
    return undefined;
  }
  const parsed = recordSchema.safeParse(json);
  return parsed.success ? parsed.data : undefined;
}

/**
 * The annotation's value for the decision `planned` (`RenewalPlanner.plan`'s answer) and the
 * verify request acted on. Fields in a fixed order, so an unchanged decision gives the same string.
 */
export function renewalRecordValue(
  planned: CertificateStatus,
  lastVerifyRequest: string | undefined,
): string {
  const record: RenewalRecord = {
    serialNumber: planned.serialNumber,
    renewalTime: planned.renewalTime,
    ...(planned.ari
      ? {
          ari: {
            certId: planned.ari.certId,
            windowStart: planned.ari.windowStart,
            windowEnd: planned.ari.windowEnd,
            ...(planned.ari.explanationURL ? { explanationURL: planned.ari.explanationURL } : {}),
            checkedAt: planned.ari.checkedAt,
            nextCheckAt: planned.ari.nextCheckAt,
          },
        }
      : {}),
    ...(lastVerifyRequest !== undefined ? { lastVerifyRequest } : {}),
  };
  return JSON.stringify(record);
}

/**
 * The status `RenewalPlanner.plan` takes as the previous one: the held certificate's (`serving`)
 * with the record's ARI decision, when the record is for that certificate (same serial) and has
 * one; undefined otherwise (the planner then asks the CA).
 */
export function previousRenewal(
  serving: CertificateStatus,
  record: RenewalRecord | undefined,
): CertificateStatus | undefined {
  if (record?.ari === undefined || record.serialNumber !== serving.serialNumber) return undefined;
  const { explanationURL, ...ari } = record.ari;
  return {
    ...serving,
    renewalTime: record.renewalTime,
    ari: { ...ari, ...(explanationURL !== undefined ? { explanationURL } : {}) },
  };
}

/**
 * Whether the Secret's `portico.dev/verify-requested-at` (`request`) asks for the CA's renewal
 * information again now: a value other than the last one acted on, as a CustomDomain's verify
 * request forces the request (docs/customdomains.md, "Schedules").
 */
export function renewalCheckRequested(
  request: string | undefined,
  record: RenewalRecord | undefined,
): boolean {
  return request !== undefined && request !== '' && request !== record?.lastVerifyRequest;
}

/**
 * When to look at the Secret again (Unix ms): at the renewal time, when the CA wants to be asked
 * again (ARI `nextCheckAt`, when still ahead: one already past was just asked, or failed and waits
 * for the planner's retry), and at the latest `recheckMs` after `now` (a verify request, a Secret
 * changed or removed).
 */
export function nextLookAt(planned: CertificateStatus, now: Date, recheckMs: number): number {
  const at = [Date.parse(planned.renewalTime), now.getTime() + recheckMs];
  const nextCheck = planned.ari ? Date.parse(planned.ari.nextCheckAt) : NaN;
  if (nextCheck > now.getTime()) at.push(nextCheck);
  return Math.max(now.getTime(), Math.min(...at));
}

/** The renewal decision in words: the time and, with ARI, the CA's window it was chosen in. */
export function renewalSentence(planned: CertificateStatus): string {
  return planned.ari
    ? `renewed from ${planned.renewalTime}, a time chosen in the CA's renewal window ${planned.ari.windowStart} to ${planned.ari.windowEnd} (ACME Renewal Information, RFC 9773)`
    : `renewed from ${planned.renewalTime}, two thirds into its validity (no renewal information from the CA)`;
}
