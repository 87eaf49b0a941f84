/**
 * The serving phase of a CustomDomain reconcile: whether the data plane serves the domain's
 * certificate and the project over HTTPS (src/serving/checker.ts, docs/routing.md "Serving
 * check"), asked only once nothing else keeps the domain from Ready. The check is told what the
 * domain's spec has its route answer (a redirect to its target's origin, or the project), so that a
 * change of spec is checked at once and counts only once the data plane answers with the new route
 * (docs/customdomains.md, "A switch of primary without a gap").
 */
import type { Logger } from 'pino';
import type { CustomDomain } from '../../../api/customdomain.js';
import { normalizeDnsName } from '../../../dns/answers.js';
import { findCondition } from '../../../kube/conditions.js';
import { redirectIntent, targetOrigin } from '../../../routing/redirect.js';
import type { CertificateState, RoutingState } from '../status.js';
import type { ServingChecker } from '../../../serving/checker.js';
import type { ServingReadiness } from '../../../serving/schedule.js';

/**
 * Ready as the serving check has it (src/serving/checker.ts: checked when due, else as the last
 * check left it, for ObservedState.serving), and the milliseconds until it is next due. Nothing
 * when the check is off, or while something else keeps the domain from Ready: DNS not verified,
 * no valid certificate, or not routed.
 */
export async function serving(
  checker: ServingChecker | undefined,
  domain: CustomDomain,
  key: string,
  at: { verified: boolean; certificate: CertificateState; routing: RoutingState },
  now: Date,
  log: Logger,
): Promise<{ observed: { serving?: ServingReadiness }; requeueAfterMs?: number }> {
  const { certificate } = at;
  if (!checker || !at.verified || certificate.kind !== 'valid' || at.routing.kind !== 'routed')
    return { observed: {} };
  // What the spec has the route answer: a redirect to its target's origin, or the project.
  const intent = redirectIntent(domain);
  const seen = await checker.observe(
    {
      key,
      uid: domain.metadata.uid ?? '',
      hostname: normalizeDnsName(domain.spec.hostname),
      serialNumber: certificate.certificate.serialNumber,
      ...(intent === undefined ? {} : { redirectOrigin: targetOrigin(intent) }),
      ready: findCondition(domain.status?.conditions, 'Ready'),
    },
    now,
    log,
  );
  return {
    observed: { serving: seen.readiness },
    requeueAfterMs: seen.nextCheckAt.getTime() - now.getTime(),
  };
}
