/**
 * The CertificateOverdue clock of a verified domain without a certificate, and what a verify request
 * does to an order stuck in flight past it (docs/customdomains.md, "Verify and re-verify"; docs/troubleshooting.md,
 * CertificateOverdue). Pure: every input is a value, the clock included.
 */

/** When the CertificateOverdue clock started, and whether a verify request (re)started it. */
export interface OverdueClock {
  readonly since: Date;
  /** True when `since` is the verify request acted on, false when it is `verifiedAt`. */
  readonly byVerifyRequest: boolean;
}

/**
 * When the CertificateOverdue clock of a verified domain without a certificate started
 * (docs/customdomains.md, "Verify and re-verify"; docs/troubleshooting.md, CertificateOverdue):
 * the later of `verifiedAt` and the verify request last acted on (`status.lastVerifyRequest`),
 * since a re-verify starts a fresh attempt and the clock with it. Undefined when `verifiedAt` does
 * not parse. A request time that does not parse, or lies after `now` (a client clock ahead of the operator's), is not counted.
 *
 * @param verifiedAt status.verifiedAt, RFC 3339
 * @param lastVerifyRequest status.lastVerifyRequest (the annotation's value), RFC 3339
 */
export function overdueClockStart(
  verifiedAt: string | undefined,
  lastVerifyRequest: string | undefined,
  now: Date,
): OverdueClock | undefined {
  const verified = verifiedAt === undefined ? NaN : Date.parse(verifiedAt);
  if (Number.isNaN(verified)) return undefined;
  const requested = lastVerifyRequest === undefined ? NaN : Date.parse(lastVerifyRequest);
  if (Number.isNaN(requested) || requested <= verified || requested > now.getTime())
    return { since: new Date(verified), byVerifyRequest: false };
  return { since: new Date(requested), byVerifyRequest: true };
}

/**
 * Whether a verify request acted on now abandons the certificate order in flight for a fresh one
 * (docs/customdomains.md, "Verify and re-verify": a re-verify of a verified domain with no
 * certificate after 30 minutes triggers a fresh certificate attempt, also when an order is stuck in
 * flight). True when the
 * domain has no certificate, is past the overdue threshold by the clock as it stood before this
 * request (`overdueClockStart` of the status before it), and the order in flight was placed before
 * it became overdue: an order placed after that is itself the fresh attempt. Pure.
 *
 * @param at.orderStartedAt when the order in flight started; undefined when none is in flight
 * @param at.overdueMs the threshold (`--certificate-overdue-seconds`), milliseconds
 */
export function abandonsOrderInFlight(at: {
  verifyRequested: boolean;
  hasCertificate: boolean;
  orderStartedAt: Date | undefined;
  verifiedAt: string | undefined;
  lastVerifyRequest: string | undefined;
  overdueMs: number;
  now: Date;
}): boolean {
  if (!at.verifyRequested || at.hasCertificate || at.orderStartedAt === undefined) return false;
  const clock = overdueClockStart(at.verifiedAt, at.lastVerifyRequest, at.now);
  if (!clock) return false;
  const overdueAt = clock.since.getTime() + at.overdueMs;
  return at.now.getTime() >= overdueAt && at.orderStartedAt.getTime() <= overdueAt;
}

/**
 * Milliseconds from `now` until a domain without a certificate becomes overdue by `clock` (the
 * reconcile looks again then, so CertificateReady says CertificateOverdue on time); undefined when
 * there is no clock (not verified), the domain has a valid certificate, or it is overdue already.
 * The same `clock` goes into the status (status.ts `ObservedState.overdueClock`), so the status and
 * the wake-up count from one start.
 *
 * @param overdueMs the threshold (`--certificate-overdue-seconds`), milliseconds
 */
export function msUntilOverdue(
  clock: OverdueClock | undefined,
  hasCertificate: boolean,
  overdueMs: number,
  now: Date,
): number | undefined {
  if (clock === undefined || hasCertificate) return undefined;
  const ms = clock.since.getTime() + overdueMs - now.getTime();
  return ms > 0 ? ms : undefined;
}
