/**
 * The removal of a CustomDomain (docs/customdomains.md, "Removal"): traffic stops first (every
 * routing object is deleted and confirmed gone), then any order in flight is dropped, then the
 * certificate Secret and the copy of its last good certificate (last-good-certificates.ts), then
 * the hostname claim is released (only now may another project claim the hostname), a `Removed`
 * Event is recorded, and the finalizer comes off. The I/O goes through
 * `FinalizeAdapter`; this module holds the order of the steps.
 */
import type { Logger } from 'pino';
import { FINALIZER, ownedNames, type CustomDomain } from '../../../api/customdomain.js';
import { eventTypeOf } from '../../../api/reasons.js';
import type { EventRecorder } from '../../../kube/events.js';
import { ownedRoutingObjects } from '../../../routing/plan.js';
import type { HostnameClaims } from '../hostname-claims.js';
import type { LastGoodCertificates } from '../last-good-certificates.js';
import type { ReconcileResult } from './deps.js';
import type { OwnedObjects } from './objects.js';

/** How long to wait for routing objects to disappear before looking again, milliseconds. */
export const ROUTING_GONE_RECHECK_MS = 1_000;

/** What the removal reads and writes. */
export interface FinalizeAdapter {
  readonly objects: Pick<
    OwnedObjects,
    'removeRouting' | 'exists' | 'readLive' | 'deleteIfCached' | 'removeFinalizer'
  >;
  readonly claims: Pick<HostnameClaims, 'release'>;
  readonly events: Pick<EventRecorder, 'record'>;
  /** The domain's last good certificate, in the operator's namespace (last-good-certificates.ts). */
  readonly lastGood: Pick<LastGoodCertificates, 'remove'>;
  /** Drops the domain's order in flight, its place in the order budget's line and its serving-check record. */
  cancelOrder(key: string): void;
  /** Removes the domain's series from the per-domain gauges (dangling, foreign routes). */
  forgetMetrics(domain: CustomDomain): void;
}

/**
 * Runs the removal of `domain` (its deletionTimestamp set). Resolves `{ requeueAfterMs }` while
 * routing objects remain, `{}` when done or when there is nothing to do (not Portico's finalizer,
 * or an earlier reconcile already removed it). Rejects with the API error of a failed step (the work
 * queue retries).
 */
export async function finalize(
  domain: CustomDomain,
  key: string,
  log: Logger,
  a: FinalizeAdapter,
): Promise<ReconcileResult> {
  if (!(domain.metadata.finalizers ?? []).includes(FINALIZER)) return {};
  const { namespace } = domain.metadata;
  const names = ownedNames(domain);
  await a.objects.removeRouting(domain);
  const left = await Promise.all(ownedRoutingObjects(domain).map((h) => a.objects.exists(h, domain)));
  if (left.some(Boolean)) {
    log.info('waiting for the routing objects to disappear before removing anything else');
    return { requeueAfterMs: ROUTING_GONE_RECHECK_MS };
  }
  // The cache may still hold a version an earlier reconcile already finalized (a key queued twice
  // during the removal): the API server says whether there is anything left to do, so that the
  // claim, the Event and the finalizer are handled once and a gone domain is no error.
  const live = await a.objects.readLive(namespace, domain.metadata.name);
  if (live === undefined || !(live.metadata.finalizers ?? []).includes(FINALIZER)) {
    log.debug('already removed by an earlier reconcile');
    return {};
  }
  a.cancelOrder(key);
  await a.objects.deleteIfCached(
    { apiVersion: 'v1', kind: 'Secret', metadata: { name: names.secret, namespace } },
    domain,
  );
  await a.lastGood.remove(domain);
  a.forgetMetrics(domain);
  // Routing is confirmed gone: only now may another project claim the hostname.
  await a.claims.release(domain);
  await a.events.record(
    domain,
    eventTypeOf('Removed'),
    'Removed',
    `Routing for ${domain.spec.hostname} removed; traffic is no longer served. Certificate Secret ${names.secret} deleted.`,
  );
  await a.objects.removeFinalizer(domain, live);
  log.info('removed');
  return {};
}
