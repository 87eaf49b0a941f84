/**
 * The CustomDomain reconcile: level-triggered, keyed by `namespace/name`, safe to run twice. Reads
 * the object and what it owns, decides with the pure steps (DNS verdict, desired routing, status),
 * applies the difference, writes status once and only if it changed, and returns when to look again.
 */
import {
  PatchStrategy,
  type CoreV1Api,
  type CustomObjectsApi,
  type KubernetesObject,
  type KubernetesObjectApi,
  type V1Secret,
} from '@kubernetes/client-node';
import type { X509Certificate } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { ORDER_ABANDONED, SHUTTING_DOWN, type IssuanceTracker } from '../../acme/issuance-tracker.js';
import { AriError, ariCertificateId } from '../../acme/ari.js';
import { IssuanceCancelledError, type AcmeIssuer, type IssuedCertificate } from '../../acme/issuer.js';
import type { OrderKind } from '../../acme/order-budget.js';
import type { OrderQueue } from '../../acme/order-queue.js';
import {
  CUSTOM_DOMAIN_LABEL,
  CUSTOM_DOMAIN_PLURAL,
  FIELD_MANAGER,
  FINALIZER,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  REPLACES_ANNOTATION,
  GROUP,
  VERIFY_REQUESTED_AT_ANNOTATION,
  VERSION,
  ownedNames,
  splitKey,
  type CustomDomain,
  type CertificateStatus,
  type CustomDomainStatus,
  type IssuanceStatus,
  type OwnershipStatus,
} from '../../api/customdomain.js';
import { eventTypeOf, WARNING_REASONS } from '../../api/reasons.js';
import {
  certificateFacts,
  defaultRenewalTime,
  leafCertificate,
  type CertificateFacts,
} from '../../certificates/inspect.js';
import { parsedSecret } from '../../certificates/parsed-secret.js';
import { isIPv4, isIPv6 } from 'node:net';
import { normalizeDnsName, type RRsetAnswer } from '../../dns/answers.js';
import { claimableProblem } from '../../domain/claimable.js';
import { invalidALabels, validateHostname } from '../../domain/hostname.js';
import { isApex, registeredDomain, requiredDnsRecords } from '../../dns/records.js';
import type { DnsResolver } from '../../dns/resolver.js';
import { verifyApex, verifySubdomain, type Verdict } from '../../dns/verdict.js';
import {
  isOwnershipProof,
  ownershipProof,
  ownershipRecord,
  ownershipRecordName,
  ownershipToken,
  verifyOwnership,
  withOwnership,
  type OwnershipPolicy,
} from '../../dns/ownership.js';
import { conditionChanges, findCondition } from '../../kube/conditions.js';
import type { EventRecorder } from '../../kube/events.js';
import { apiStatusCode, isNotFound } from '../../kube/errors.js';
import { serverSideApply } from '../../kube/server-side-apply.js';
import { backoffDelayMs, type BackoffPolicy } from '../../kube/backoff.js';
import { lazyChild } from '../../observability/logger.js';
import type { ControllerMetrics } from '../../observability/metrics.js';
import { ownedMetadata } from '../../routing/ingress.js';
import { contains, isUpToDate, withAppliedDigest } from '../../kube/applied-state.js';
import type { RoutingOptions } from '../../routing/options.js';
import { CONTOUR_API_VERSION, HTTPPROXY_KIND } from '../../routing/contour.js';
import {
  combine,
  httpProxyAcknowledgement,
  httpRouteAcknowledgement,
  ingressAcknowledgement,
  listenerSetAcknowledgement,
  type Acknowledgement,
} from '../../routing/acknowledgement.js';
import {
  GATEWAY_API_VERSION,
  HTTPROUTE_KIND,
  LISTENERSET_KIND,
  type HTTPRoute,
} from '../../routing/gateway.js';
import {
  desiredRouting,
  ownedRoutingObjects,
  staleRoutingObjects,
  type ObjectHeader,
  type RoutingLookups,
} from '../../routing/plan.js';
import {
  carriedDnsOutcome,
  DANGLING_REASON,
  freshDnsOutcome,
  type DnsOutcome,
  type DnsStatusBase,
} from './dns-outcome.js';
import { decideOwnership, standingOwnership } from './ownership-decision.js';
import { foreignKind, notOurs, otherOwner } from './object-holder.js';
import type { OwnershipStore } from './ownership-store.js';
import { acceptance, ELIGIBLE_PLANS, planOf, reservedDomainOf } from './acceptance.js';
import type { HostnameClaims } from './hostname-claims.js';
import type { ClusterView } from './cluster-view.js';
import type { RenewalPlanner } from './renewal.js';
import { dnsCheckDue } from './schedule.js';
import { issuanceStatus, lastIssuanceFailure, pendingRetry, type IssuanceFailure } from './issuance-state.js';
import { abandonsOrderInFlight, overdueClockStart } from './overdue.js';
import {
  buildStatus,
  CONFLICTED_CONDITION,
  FOREIGN_ROUTE_REASON,
  type CertificateState,
  type QueuedOrder,
  type RoutingState,
} from './status.js';
import { namedRoutes as namedIn, newRoutes } from '../../routing/foreign-routes.js';
import { transitionEvents } from '../../kube/events.js';
import type { ServingChecker } from '../../serving/checker.js';
import type { ServingReadiness } from '../../serving/schedule.js';

export interface ReconcileResult {
  /** Milliseconds after which the key should be reconciled again, if at all. */
  requeueAfterMs?: number;
}

export interface CustomDomainReconcilerDeps {
  platformCnameTarget: string;
  /** Milliseconds verified without a certificate before CertificateReady says it is overdue (spec §7.3: 30 min). */
  certificateOverdueMs: number;
  /**
   * Milliseconds a verified domain stays verified while DNS answers that its record no longer
   * matches (dns-outcome.ts); resolver failures never unverify it.
   */
  dnsMismatchGraceMs: number;
  /**
   * Milliseconds a domain that was verified may have DNS pointing elsewhere before it is reported
   * as a dangling record (DNSVerified reason DanglingRecord, dns-outcome.ts).
   */
  danglingAfterMs: number;
  /** Ownership verification by TXT record (src/dns/ownership.ts). */
  ownership: {
    policy: OwnershipPolicy;
    /** `recently-claimed`: a release by another project this recent (milliseconds) requires it. */
    recentMs: number;
    store: Pick<OwnershipStore, 'key' | 'lastRelease'>;
  };
  /** Addresses an apex's A/AAAA records must equal; [] means the target's own addresses. */
  apexAddresses: readonly string[];
  /** The platform's own domains, which no CustomDomain may claim. */
  reservedDomains: readonly string[];
  /** Names under `test` and `example` may be claimed (domain/claimable.ts). */
  allowSpecialUseHostnames: boolean;
  view: ClusterView;
  /** The cluster-wide hostname claims (takeover safety, spec §3). */
  claims: HostnameClaims;
  routing: RoutingOptions;
  customObjects: CustomObjectsApi;
  core: CoreV1Api;
  objects: KubernetesObjectApi;
  resolver: DnsResolver;
  issuer: AcmeIssuer;
  tracker: IssuanceTracker;
  /** The ACME account's order budget: every order, first or renewal, waits for its turn here. */
  budget: Pick<OrderQueue, 'request' | 'withdraw'>;
  renewal: RenewalPlanner;
  /** The serving check (src/serving/checker.ts, --serving-check-address); undefined: off. */
  serving?: ServingChecker;
  events: EventRecorder;
  metrics: ControllerMetrics;
  log: Logger;
  now: () => Date;
}

/**
 * How long the status write of a reconcile that placed an order is held back: 5 s. An order usually
 * settles sooner (Pebble: p50 1.5 s during a 1,000-domain ramp), and its settling queues the domain
 * at once, so one status write (and one Event) says both that DNS was verified and that the
 * certificate is stored; an order still running at this time has its progress written then.
 */
export const ORDER_PROGRESS_STATUS_DELAY_MS = 5_000;

/** How often a CustomDomain refused with HostnameAlreadyClaimed looks at the claim again: 10 min. */
const CLAIM_RECHECK_MS = 10 * 60_000;

const TLS_CERT = 'tls.crt';
const TLS_KEY = 'tls.key';

/**
 * The certificate in a domain's Secret: `usable` (its facts for status, and a resolver of its ARI
 * identifier, `RenewalPlanner.plan`), or `unusable` with what is wrong, a sentence that starts with
 * "Secret <name>".
 */
type StoredCertificate =
  | {
      usable: { status: CertificateStatus; ariCertId: () => Promise<string | undefined> };
      unusable?: undefined;
    }
  | { usable?: undefined; unusable: string };

/** What the certificate part of a reconcile found or did. */
interface CertificateOutcome {
  readonly state: CertificateState;
  /** When to look again, milliseconds from now. */
  readonly requeueAfterMs?: number;
  /** This reconcile placed an order (first issuance or renewal). */
  readonly orderStarted?: boolean;
  /** What status.issuance should say (issuance-state.ts); undefined removes it. */
  readonly issuance?: IssuanceStatus;
}

/** At most this many identifiers of certificates just stored wait for their first renewalInfo request. */
const MAX_STORED_CERT_IDS = 4_096;

/** `decision` with the operator's proof over it (src/dns/ownership.ts `ownershipProof`). */
function withOwnershipProof(key: Buffer, uid: string, decision: OwnershipStatus): OwnershipStatus {
  const { hostname, required, reason, message, verifiedAt } = decision;
  const fields = { hostname, required, reason, message, ...(verifiedAt ? { verifiedAt } : {}) };
  return { ...fields, proof: ownershipProof(key, uid, fields) };
}

export class CustomDomainReconciler {
  readonly #d: CustomDomainReconcilerDeps;
  /**
   * The ARI identifiers of the certificates this process stored, by issuer and serial
   * (`certIdKey`), until the first renewalInfo request of each takes it: the cached Secret keeps no
   * PEM, and this spares that request a live read of the Secret. Bounded (oldest dropped).
   */
  readonly #storedCertIds = new Map<string, string>();
  /**
   * The serial number (hex, as status.certificate.serialNumber) of the certificate this process
   * last stored for a domain, by key, until the informer cache shows it. The tracker re-queues the
   * domain the moment the order settles, before the watch event of the Secret write arrives: the
   * cache then still holds the certificate being renewed, past its renewal time, and a second
   * renewal would be ordered at once (seen in e2e: the CA refused it as `alreadyReplaced`; a CA
   * without ARI would have issued a duplicate). Bounded by the orders that finished but whose
   * Secret the cache has not yet seen.
   */
  readonly #storedSerials = new Map<string, string>();

  constructor(deps: CustomDomainReconcilerDeps) {
    this.#d = deps;
  }

  async reconcile(key: string): Promise<ReconcileResult> {
    const { namespace, name } = splitKey(key);
    let domain = this.#d.view.customDomain(namespace, name);
    if (!domain) {
      this.#cancelOrder(key);
      return {};
    }
    const log = lazyChild(this.#d.log, { namespace, name, hostname: domain.spec.hostname });
    if (domain.metadata.deletionTimestamp) return this.#finalize(domain, key, log);
    if (!(domain.metadata.finalizers ?? []).includes(FINALIZER)) domain = await this.#addFinalizer(domain);

    const now = this.#d.now();
    const accepted = await this.#accepted(domain);
    if (accepted.status !== 'True') return this.#notAccepted(domain, key, accepted, now, log);
    const verifyRequested = dnsCheckDue(domain, now) === 'requested';
    const dns = await this.#verifyDns(domain, key, now, log);
    this.#reportDangling(domain, dns.condition.reason === DANGLING_REASON);
    const verified = dns.condition.status === 'True';
    const routing = verified || dns.carried.verifiedAt ? await this.#applyRouting(domain) : notRouted();
    const {
      state: certificate,
      requeueAfterMs: certificateRequeue,
      orderStarted,
      issuance,
    } = await this.#certificate(domain, key, verified, verifyRequested, now, log);
    // A verify request is answered by the status write that records it (lastVerifyRequest): held
    // back, an order failing within the delay would meet the same request again, have its backoff
    // cleared and be placed again, over and over.
    if (orderStarted && !verifyRequested) {
      // The next reconcile (when the order settles, or after the delay) writes the status.
      return { requeueAfterMs: ORDER_PROGRESS_STATUS_DELAY_MS };
    }

    const serving = await this.#serving(domain, key, { verified, certificate, routing }, now, log);
    const status = buildStatus(
      domain,
      {
        accepted,
        dnsVerified: dns.condition,
        certificate,
        routing,
        ...serving.observed,
        foreignRoutes: this.#foreignRoutes(domain),
      },
      { ...dns.carried, ...(issuance ? { issuance } : {}) },
      now,
      this.#d.certificateOverdueMs,
    );
    await this.#writeStatus(domain, status, log);
    // Without a certificate, look again when it becomes overdue, so the condition says so on time.
    // The clock restarts with a verify request acted on (overdue.ts overdueClockStart).
    const overdueClock = overdueClockStart(dns.carried.verifiedAt, dns.carried.lastVerifyRequest, now);
    const overdueAt =
      verified && certificate.kind !== 'valid' && overdueClock
        ? overdueClock.since.getTime() + this.#d.certificateOverdueMs - now.getTime()
        : undefined;
    const waits = [dns.nextCheckMs, certificateRequeue, overdueAt, serving.requeueAfterMs].filter(
      (ms): ms is number => ms !== undefined && ms > 0,
    );
    return waits.length > 0 ? { requeueAfterMs: Math.max(1_000, Math.min(...waits)) } : {};
  }

  /**
   * Ready as the serving check has it (src/serving/checker.ts: checked when due, else as the last
   * check left it, for ObservedState.serving), and the milliseconds until it is next due. Nothing
   * when the check is off, or while something else keeps the domain from Ready: DNS not verified,
   * no valid certificate, or not routed.
   */
  async #serving(
    domain: CustomDomain,
    key: string,
    at: { verified: boolean; certificate: CertificateState; routing: RoutingState },
    now: Date,
    log: Logger,
  ): Promise<{ observed: { serving?: ServingReadiness }; requeueAfterMs?: number }> {
    const checker = this.#d.serving;
    const { certificate } = at;
    if (!checker || !at.verified || certificate.kind !== 'valid' || at.routing.kind !== 'routed')
      return { observed: {} };
    const seen = await checker.observe(
      {
        key,
        uid: domain.metadata.uid ?? '',
        hostname: normalizeDnsName(domain.spec.hostname),
        serialNumber: certificate.certificate.serialNumber,
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

  /** Not accepted (plan, deploy, reserved or claimed elsewhere): nothing is routed or ordered. */
  async #notAccepted(
    domain: CustomDomain,
    key: string,
    accepted: ReturnType<typeof acceptance>,
    now: Date,
    log: Logger,
  ): Promise<ReconcileResult> {
    await this.#removeRouting(domain);
    this.#cancelOrder(key);
    this.#reportDangling(domain, false);
    // A holder whose plan no longer allows custom domains lets the hostname go, now that its
    // routing is gone (a NotDeployed holder keeps it; HostnameAlreadyClaimed holds nothing).
    if (
      accepted.reason === 'PlanNotEligible' ||
      accepted.reason === 'ReservedHostname' ||
      accepted.reason === 'InvalidHostname'
    ) {
      await this.#d.claims.release(domain, { trustCache: true });
    }
    const status = buildStatus(
      domain,
      {
        accepted,
        dnsVerified: {
          type: 'DNSVerified',
          status: 'Unknown',
          reason: 'NotAccepted',
          message: 'DNS is checked once the domain is accepted.',
        },
        certificate: { kind: 'not-requested' },
        routing: {
          kind: 'not-routed',
          reason: 'NotAccepted',
          message: 'The domain is routed once it is accepted and verified.',
        },
        foreignRoutes: this.#foreignRoutes(domain),
      },
      {
        dnsRecords: requiredDnsRecords(
          normalizeDnsName(domain.spec.hostname),
          this.#d.platformCnameTarget,
          this.#d.apexAddresses,
        ),
        ...(domain.status?.ownership ? { ownership: domain.status.ownership } : {}),
        // The order was dropped with its outcome in memory: once accepted again, the backoff
        // resumes from the recorded failure (issuance-state.ts).
        ...(domain.status?.issuance ? { issuance: domain.status.issuance } : {}),
      },
      now,
    );
    await this.#writeStatus(domain, status, log);
    // A released claim wakes its claimants through the holder's own events; the recheck only
    // covers a claim that went another way (e.g. deleted by hand).
    return accepted.reason === 'HostnameAlreadyClaimed' ? { requeueAfterMs: CLAIM_RECHECK_MS } : {};
  }

  /**
   * The Accepted condition. The plan and reserved-name gates come from the caches; the hostname
   * claim is taken (atomically, in the API server) only when they pass.
   */
  async #accepted(domain: CustomDomain): Promise<ReturnType<typeof acceptance>> {
    const { view } = this.#d;
    const hostname = normalizeDnsName(domain.spec.hostname);
    const plan = planOf(view.namespaceLabels(domain.metadata.namespace));
    const reservedDomain = reservedDomainOf(hostname, this.#d.reservedDomains);
    const badLabels = invalidALabels(hostname);
    // The CRD's rules again, for an object stored before one of them existed (validateHostname).
    const hostnameProblem = validateHostname(domain.spec.hostname);
    const notClaimable =
      hostnameProblem === undefined && badLabels.length === 0
        ? claimableProblem(hostname, { allowSpecialUse: this.#d.allowSpecialUseHostnames })
        : undefined;
    const claimable =
      hostnameProblem === undefined &&
      badLabels.length === 0 &&
      notClaimable === undefined &&
      ELIGIBLE_PLANS.has(plan) &&
      reservedDomain === undefined;
    const service = domain.spec.service?.name;
    return acceptance({
      domain,
      plan,
      readyEndpoints: service ? view.readyEndpoints(domain.metadata.namespace, service) : undefined,
      previouslyAccepted: findCondition(domain.status?.conditions, 'Accepted')?.status === 'True',
      reservedDomain,
      invalidALabels: badLabels,
      hostnameProblem,
      claimableProblem: notClaimable,
      claim: claimable ? await this.#d.claims.acquire(domain) : undefined,
    });
  }

  /** Deletes every routing object Portico may have made for the domain, in any mode or flavor. */
  async #removeRouting(domain: CustomDomain): Promise<void> {
    for (const header of ownedRoutingObjects(domain)) await this.#deleteIfCached(header, domain);
  }

  /**
   * Deletes `header` unless its cache knows it is absent, or that another CustomDomain owns it (then
   * no request is sent); the delete is conditional on the uid of the object judged, so an object
   * created again meanwhile is not deleted unseen.
   */
  async #deleteIfCached(header: ObjectHeader, domain: CustomDomain): Promise<void> {
    const seen = this.#d.view.owned(header);
    if (!seen.cached) {
      await this.#deleteIfPresent(header, domain);
      return;
    }
    if (seen.object === undefined || notOurs(header, seen.object, domain)) return;
    await this.#deleteObject(header, seen.object.metadata?.uid);
  }

  /** Reads the CustomDomain from the API server, not the cache. */
  async #readLive(namespace: string, name: string): Promise<CustomDomain | undefined> {
    try {
      return (await this.#d.customObjects.getNamespacedCustomObject({
        group: GROUP,
        version: VERSION,
        namespace,
        plural: CUSTOM_DOMAIN_PLURAL,
        name,
      })) as CustomDomain;
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  async #addFinalizer(domain: CustomDomain): Promise<CustomDomain> {
    return this.#d.objects.patch(
      {
        apiVersion: domain.apiVersion,
        kind: domain.kind,
        metadata: {
          name: domain.metadata.name,
          namespace: domain.metadata.namespace,
          resourceVersion: domain.metadata.resourceVersion ?? '',
          finalizers: [...(domain.metadata.finalizers ?? []), FINALIZER],
        },
      },
      undefined,
      undefined,
      FIELD_MANAGER,
      undefined,
      PatchStrategy.MergePatch,
    ) as Promise<CustomDomain>;
  }

  /**
   * Removal (spec §3): traffic stops first (the Ingress is deleted and confirmed gone), then any
   * order in flight is dropped, then the Secret, then the finalizer.
   */
  async #finalize(domain: CustomDomain, key: string, log: Logger): Promise<ReconcileResult> {
    if (!(domain.metadata.finalizers ?? []).includes(FINALIZER)) return {};
    const { namespace } = domain.metadata;
    const names = ownedNames(domain);
    await this.#removeRouting(domain);
    const left = await Promise.all(ownedRoutingObjects(domain).map((h) => this.#exists(h, domain)));
    if (left.some(Boolean)) {
      log.info('waiting for the routing objects to disappear before removing anything else');
      return { requeueAfterMs: 1_000 };
    }
    // The cache may still hold a version an earlier reconcile already finalized (a key queued twice
    // during the removal): the API server says whether there is anything left to do, so that the
    // claim, the Event and the finalizer are handled once and a gone domain is no error.
    const live = await this.#readLive(namespace, domain.metadata.name);
    if (live === undefined || !(live.metadata.finalizers ?? []).includes(FINALIZER)) {
      log.debug('already removed by an earlier reconcile');
      return {};
    }
    this.#cancelOrder(key);
    await this.#deleteIfCached(
      { apiVersion: 'v1', kind: 'Secret', metadata: { name: names.secret, namespace } },
      domain,
    );
    this.#reportDangling(domain, false);
    this.#reportForeignRoutes(domain, 0);
    // Routing is confirmed gone: only now may another project claim the hostname.
    await this.#d.claims.release(domain);
    await this.#d.events.record(
      domain,
      eventTypeOf('Removed'),
      'Removed',
      `Routing for ${domain.spec.hostname} removed; traffic is no longer served. Certificate Secret ${names.secret} deleted.`,
    );
    try {
      await this.#d.objects.patch(
        {
          apiVersion: domain.apiVersion,
          kind: domain.kind,
          metadata: {
            name: domain.metadata.name,
            namespace,
            resourceVersion: live.metadata.resourceVersion ?? '',
            finalizers: (live.metadata.finalizers ?? []).filter((f) => f !== FINALIZER),
          },
        },
        undefined,
        undefined,
        FIELD_MANAGER,
        undefined,
        PatchStrategy.MergePatch,
      );
    } catch (err) {
      // Gone since it was read: its last finalizer was removed by someone else.
      if (!isNotFound(err)) throw err;
    }
    log.info('removed');
    return {};
  }

  /** Reads `header` from the API server and deletes it unless another CustomDomain owns it. */
  async #deleteIfPresent(header: ObjectHeader, domain: CustomDomain): Promise<void> {
    const live = await this.#readObject(header);
    if (live === undefined || notOurs(header, live, domain)) return;
    await this.#deleteObject(header, live.metadata?.uid);
  }

  /**
   * Deletes `header`, only if its uid is still `uid` (a delete precondition: a 409 when it changed,
   * which the work queue retries). Absent already is fine.
   */
  async #deleteObject(header: ObjectHeader, uid: string | undefined): Promise<void> {
    try {
      const body = uid ? { preconditions: { uid } } : undefined;
      await this.#d.objects.delete(header, undefined, undefined, undefined, undefined, undefined, body);
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
  }

  /** `header` as the API server has it now, or undefined. */
  async #readObject(header: ObjectHeader): Promise<KubernetesObject | undefined> {
    try {
      return await this.#d.objects.read(header);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /**
   * Whether `header` exists as this domain's object (one another CustomDomain owns does not count).
   * Live read, unless the API server does not serve its kind at all.
   */
  async #exists(header: ObjectHeader, domain: CustomDomain): Promise<boolean> {
    if (!this.#d.view.serves(header.apiVersion, header.kind)) return false;
    const live = await this.#readObject(header);
    return live !== undefined && !notOurs(header, live, domain);
  }

  async #verifyDns(domain: CustomDomain, key: string, now: Date, log: Logger): Promise<DnsOutcome> {
    const hostname = normalizeDnsName(domain.spec.hostname);
    const requested = domain.metadata.annotations?.[VERIFY_REQUESTED_AT_ANNOTATION];
    const ownershipKey = await this.#d.ownership.store.key();
    const uid = domain.metadata.uid ?? '';
    const ownership = await this.#ownershipDecision(domain, hostname, now, ownershipKey);
    const pending = ownership.required && ownership.verifiedAt === undefined;
    const token = pending ? ownershipToken(ownershipKey, uid, hostname) : undefined;
    const records = requiredDnsRecords(hostname, this.#d.platformCnameTarget, this.#d.apexAddresses);
    const base: DnsStatusBase = {
      dnsRecords: token === undefined ? records : [...records, ownershipRecord(hostname, token)],
      lastVerifyRequest: requested ?? domain.status?.lastVerifyRequest,
      ownership,
    };
    const due = dnsCheckDue(domain, now);
    const carried = due ? undefined : carriedDnsOutcome(domain.status, base, now);
    if (carried) return carried;
    // Re-verify (spec §3): a verified domain whose order failed gets a fresh attempt.
    if (due === 'requested') this.#d.tracker.clearFailure(key);
    let verdict = await this.#lookupVerdict(hostname, this.#d.platformCnameTarget);
    if (token !== undefined) {
      const txt = await this.#d.resolver.lookupTxt(ownershipRecordName(hostname));
      const shown = verifyOwnership(hostname, token, txt);
      verdict = withOwnership(verdict, shown);
      if (shown.shown) {
        log.info('ownership TXT record found');
        base.ownership = withOwnershipProof(ownershipKey, uid, {
          ...ownership,
          verifiedAt: now.toISOString(),
        });
        base.dnsRecords = records;
      }
    }
    this.#d.metrics.dnsChecksTotal.inc({ reason: verdict.reason });
    log.debug({ due, verdict: verdict.reason }, 'DNS checked');
    return freshDnsOutcome(
      verdict,
      domain.status,
      base,
      now,
      this.#d.dnsMismatchGraceMs,
      this.#d.danglingAfterMs,
    );
  }

  /**
   * Whether `domain` must show the ownership TXT record: the decision in its status when made for
   * this hostname; else made now (docs/customdomains.md, "Ownership verification"). A domain
   * verified before ownership verification existed (no decision in its status) is not asked.
   *
   * @throws ApiException when the release record cannot be read (the work queue retries)
   */
  async #ownershipDecision(
    domain: CustomDomain,
    hostname: string,
    now: Date,
    key: Buffer,
  ): Promise<OwnershipStatus> {
    const uid = domain.metadata.uid ?? '';
    const standing = standingOwnership(domain.status, hostname, (o) =>
      isOwnershipProof(key, uid, o, o.proof),
    );
    if (standing) return standing;
    const { policy, recentMs, store } = this.#d.ownership;
    const release = policy === 'recently-claimed' ? await store.lastRelease(hostname) : undefined;
    const decided = decideOwnership(hostname, domain.metadata.namespace, policy, release, recentMs, now);
    return withOwnershipProof(key, uid, decided);
  }

  /**
   * The routes Portico does not own that name the domain's hostname (`Kind namespace/name`, from the
   * foreign-route watches' index), and sets `portico_customdomain_foreign_routes` to their number.
   */
  #foreignRoutes(domain: CustomDomain): string[] {
    const routes = this.#d.view.foreignRoutes(domain.spec.hostname);
    this.#reportForeignRoutes(domain, routes.length);
    return routes;
  }

  /** Sets `portico_customdomain_foreign_routes` for `domain` to `count`, or removes it for 0. */
  #reportForeignRoutes(domain: CustomDomain, count: number): void {
    const labels = {
      namespace: domain.metadata.namespace,
      name: domain.metadata.name,
      hostname: domain.spec.hostname,
    };
    if (count > 0) this.#d.metrics.foreignRoutes.set(labels, count);
    else this.#d.metrics.foreignRoutes.remove(labels);
  }

  /** Sets or clears `portico_customdomain_dangling` for `domain`. */
  #reportDangling(domain: CustomDomain, dangling: boolean): void {
    const labels = {
      namespace: domain.metadata.namespace,
      name: domain.metadata.name,
      hostname: domain.spec.hostname,
    };
    if (dangling) this.#d.metrics.danglingDomains.set(labels, 1);
    else this.#d.metrics.danglingDomains.remove(labels);
  }

  async #lookupVerdict(hostname: string, target: string): Promise<Verdict> {
    const apex = isApex(hostname);
    const answers = await this.#d.resolver.lookupHostname(hostname, { otherRecords: !apex });
    if (!apex) return verifySubdomain(hostname, target, answers);
    const configured = this.#d.apexAddresses;
    const targetAddresses =
      configured.length > 0
        ? {
            a: recordsOrNodata(configured.filter((ip) => isIPv4(ip))),
            aaaa: recordsOrNodata(configured.filter((ip) => isIPv6(ip))),
          }
        : await this.#d.resolver.lookupAddresses(target);
    return verifyApex(hostname, target, answers, targetAddresses);
  }

  /**
   * Applies the routing plan (in its order), then deletes what an earlier plan made and this one
   * does not; then reads from the caches whether the data plane took what was applied
   * (`#acknowledgement`), unless that check is off.
   */
  async #applyRouting(domain: CustomDomain): Promise<RoutingState> {
    const lookups = this.#routingLookups(domain);
    const plan = desiredRouting(domain, this.#d.routing, lookups);
    const taken: string[] = [];
    const foreign: string[] = [];
    const written = new Set<KubernetesObject>();
    for (const obj of plan.apply) {
      const applied = await this.#applyIfChanged(obj, domain);
      const what = `${obj.kind ?? ''} ${obj.metadata?.name ?? ''}`;
      if (applied.owner !== undefined) taken.push(`${what} (CustomDomain ${applied.owner})`);
      if (applied.foreign) foreign.push(what);
      if (applied.wrote) written.add(obj);
    }
    for (const header of staleRoutingObjects(plan)) await this.#deleteIfCached(header, domain);
    const inUse = nameInUse(taken, foreign);
    if (inUse) return inUse;
    if (!plan.routed) return { kind: 'not-routed', reason: plan.reason, message: plan.message };
    if (plan.unservable) return { kind: 'not-routed', ...plan.unservable };
    if (this.#d.routing.dataPlaneAcknowledgement === false)
      return { kind: 'routed', message: plan.message, confirmed: false };
    const ack = this.#acknowledgement(plan.apply, written, domain);
    if (ack.kind === 'confirmed')
      return { kind: 'routed', message: `${plan.message} ${ack.message}`, confirmed: true };
    return {
      kind: 'not-routed',
      reason: ack.kind === 'refused' ? ack.reason : 'AwaitingDataPlane',
      message: ack.message,
    };
  }

  /**
   * Whether the data plane took the applied Ingresses, HTTPRoute and ListenerSet, or HTTPProxy, from
   * their cached status (routing/acknowledgement.ts); a change of that status re-queues the domain
   * through the owned objects' watch. An HTTPRoute, ListenerSet or HTTPProxy written in this pass is
   * awaited: its cached copy is of the previous generation, and so is the status on it.
   */
  #acknowledgement(
    applied: readonly KubernetesObject[],
    written: ReadonlySet<KubernetesObject>,
    domain: CustomDomain,
  ): Acknowledgement {
    const { namespace } = domain.metadata;
    const parts: Acknowledgement[] = [];
    for (const obj of applied) {
      const name = obj.metadata?.name ?? '';
      const header = {
        apiVersion: obj.apiVersion ?? '',
        kind: obj.kind ?? '',
        metadata: { name, namespace },
      };
      const seen = this.#d.view.owned(header);
      const cached = seen.cached ? seen.object : undefined;
      if (obj.kind === 'Ingress') {
        parts.push(
          ingressAcknowledgement(
            cached,
            name,
            this.#d.routing.ingressClassName,
            this.#d.routing.dataPlaneName,
          ),
        );
        continue;
      }
      if (obj.kind !== HTTPROUTE_KIND && obj.kind !== LISTENERSET_KIND && obj.kind !== HTTPPROXY_KIND)
        continue;
      if (written.has(obj)) {
        parts.push({
          kind: 'awaiting',
          message: `${obj.kind} ${name} was written just now; waiting for ${this.#reporter(obj.kind)} to report on it.`,
        });
      } else if (obj.kind === HTTPPROXY_KIND) {
        parts.push(httpProxyAcknowledgement(cached, name));
      } else if (obj.kind === HTTPROUTE_KIND) {
        const parents = (obj as HTTPRoute).spec.parentRefs;
        parts.push(httpRouteAcknowledgement(cached, name, namespace, parents, this.#d.routing.dataPlaneName));
      } else {
        parts.push(listenerSetAcknowledgement(cached, name, this.#d.routing.dataPlaneName));
      }
    }
    return combine(parts);
  }

  /** Who reports on an object of `kind`: Contour for an HTTPProxy, else the data plane's name or "the gateway". */
  #reporter(kind: string | undefined): string {
    if (kind === HTTPPROXY_KIND) return 'Contour';
    return this.#d.routing.dataPlaneName ?? 'the gateway';
  }

  /**
   * What the routing plan reads of the caches: the ports of the Service a serving domain names
   * (routing/plan.ts checks the port); for a redirect, the CustomDomains of its namespace and the
   * HostnameClaims, from which routing/redirect.ts judges its target.
   */
  #routingLookups(domain: CustomDomain): RoutingLookups {
    const view = this.#d.view;
    const lookups: RoutingLookups = {
      listenerSetsServed: view.serves(GATEWAY_API_VERSION, LISTENERSET_KIND),
      httpProxiesServed: view.serves(CONTOUR_API_VERSION, HTTPPROXY_KIND),
    };
    if (this.#d.routing.ingressFlavor === 'contour') lookups.tlsSecretReady = this.#tlsSecretReady(domain);
    if (domain.spec.redirect) {
      lookups.redirectTarget = {
        domainsInNamespace: view.customDomainsInNamespace(domain.metadata.namespace),
        holderOf: (hostname) => {
          const ref = view.hostnameClaim(hostname)?.spec.customDomainRef;
          return ref && { namespace: ref.namespace, name: ref.name };
        },
      };
    }
    const service = domain.spec.service;
    const ports = service && view.servicePorts(domain.metadata.namespace, service.name);
    if (ports !== undefined) lookups.servicePorts = ports;
    return lookups;
  }

  /**
   * Whether the domain's TLS Secret, as its cache holds it, has a `tls.crt` that parses and the
   * `tls.key` of that certificate (`parsedSecret`): Contour takes an HTTPProxy that names the
   * Secret only when both parse (routing/contour.ts). Workers start once the caches have synced;
   * an unsynced cache would answer false (no TLS block until the next reconcile).
   */
  #tlsSecretReady(domain: CustomDomain): boolean {
    const seen = this.#d.view.owned({
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { namespace: domain.metadata.namespace, name: ownedNames(domain).secret },
    });
    const secret = seen.cached ? (seen.object as V1Secret | undefined) : undefined;
    return secret !== undefined && parsedSecret(secret)?.keyMatches === true;
  }

  /**
   * Applies `obj` unless its cached copy already holds what it would write (applied-state.ts), or
   * belongs to another CustomDomain (its owner label): then nothing is written and the owner's name
   * is returned. `wrote`: the object was applied now.
   */
  async #applyIfChanged(
    obj: KubernetesObject,
    domain: CustomDomain,
  ): Promise<{ owner?: string; foreign?: boolean; wrote: boolean }> {
    const desired = withAppliedDigest(obj);
    const header = {
      apiVersion: obj.apiVersion ?? '',
      kind: obj.kind ?? '',
      metadata: { name: obj.metadata?.name ?? '', namespace: obj.metadata?.namespace ?? '' },
    };
    const seen = this.#d.view.owned(header);
    // Live read where the cache cannot tell: it is not synced, or (HTTPProxy) it holds only objects
    // labelled as Portico's, and one written by someone else may sit at the name (`foreignKind`).
    const unseen = !seen.cached || (seen.object === undefined && foreignKind(header));
    const current = unseen ? await this.#readObject(header) : seen.object;
    const owner = otherOwner(current, domain);
    if (owner !== undefined) return { owner, wrote: false };
    if (current !== undefined && notOurs(header, current, domain)) return { foreign: true, wrote: false };
    if (seen.cached && isUpToDate(seen.object, desired)) return { wrote: false };
    await this.#apply(desired);
    return { wrote: true };
  }

  async #apply(obj: KubernetesObject): Promise<void> {
    await serverSideApply(this.#d.objects, obj, { fieldManager: FIELD_MANAGER, force: true });
  }

  /**
   * The certificate in the domain's Secret when it can serve the hostname now (`usable`); else
   * `unusable` with what is wrong, in words (issue 10, item 5: the key is not the certificate's, the
   * certificate names other hostnames, is not yet or no longer valid, or does not parse); undefined
   * when there is no Secret. Reads the Secret cache; `live` reads the API server instead (see
   * `#certificate`).
   *
   * Validity is judged at the time the Secret is read, not at the reconcile's start: a reconcile
   * that waited on the API server (30 s and more while etcd restarts) can find a certificate stored
   * meanwhile, issued after its start; judged at the start it was "not yet valid", and a second
   * order was placed for a domain that had just got its certificate (a CI run of
   * test/e2e/control-plane-restart.test.ts).
   */
  async #servingCertificate(domain: CustomDomain, live: boolean): Promise<StoredCertificate | undefined> {
    const secretName = ownedNames(domain).secret;
    const header = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { namespace: domain.metadata.namespace, name: secretName },
    };
    const seen = live ? ({ cached: false } as const) : this.#d.view.owned(header);
    const secret = seen.cached
      ? (seen.object as V1Secret | undefined)
      : await this.#readSecretLive(header.metadata);
    if (!secret) return undefined;
    const problem = (what: string) => ({ unusable: `Secret ${secretName} ${what}` });
    const parsed = parsedSecret(secret);
    if (!parsed) return problem('has no tls.crt and tls.key that parse as a certificate and its key');
    if (!parsed.keyMatches) return problem("holds a tls.key that is not the certificate's private key");
    const hostname = normalizeDnsName(domain.spec.hostname);
    const { facts } = parsed;
    if (!parsed.hostnames.has(hostname))
      return problem(`holds a certificate for ${facts.dnsNames.join(', ')}, not ${hostname}`);
    const now = this.#d.now();
    if (now < new Date(facts.notBefore))
      return problem(`holds a certificate not valid before ${facts.notBefore}`);
    if (now >= new Date(facts.notAfter))
      return problem(`holds a certificate that expired at ${facts.notAfter}`);
    const replaces = secret.metadata?.annotations?.[REPLACES_ANNOTATION];
    const status: CertificateStatus = {
      ...facts,
      secretName,
      renewalTime: defaultRenewalTime(facts).toISOString(),
      ...(replaces ? { replaces } : {}),
    };
    const ariCertId = (): Promise<string | undefined> =>
      this.#ariCertId(domain, facts, secret, header.metadata);
    return { usable: { status, ariCertId } };
  }

  /**
   * The ARI identifier (RFC 9773 §4.1) of the certificate with `facts`: the one the domain's status
   * names when it shows the same serial from the same issuer (computed when it was first asked),
   * else the one kept when this process stored the certificate (`#rememberCertId`), else computed
   * from the Secret's leaf. A cached Secret keeps no PEM (parsed-secret.ts), so that last case reads
   * the Secret live: a certificate stored by another process (a restart between the issuance and
   * the first request, an imported one), once. Resolves undefined when the leaf has no Authority
   * Key Identifier; rejects with AriError when the Secret now holds another certificate, or with
   * the API error.
   */
  async #ariCertId(
    domain: CustomDomain,
    facts: CertificateFacts,
    secret: V1Secret,
    at: { namespace: string; name: string },
  ): Promise<string | undefined> {
    const known = shownCertId(domain, facts) ?? this.#takeStoredCertId(facts);
    if (known !== undefined) return known;
    const held = secret.data?.[TLS_CERT] ? secret : await this.#readSecretLive(at);
    const pem = Buffer.from(held?.data?.[TLS_CERT] ?? '', 'base64').toString('utf8');
    const leaf = leafCertificate(pem);
    if (leaf.serialNumber !== facts.serialNumber)
      throw new AriError(`Secret ${at.name} holds another certificate now (serial ${leaf.serialNumber})`);
    return leafAriCertId(leaf);
  }

  async #readSecretLive(at: { namespace: string; name: string }): Promise<V1Secret | undefined> {
    try {
      return await this.#d.core.readNamespacedSecret(at);
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw err;
    }
  }

  /**
   * The Secret's certificate as `#servingCertificate` judges it, from the cache; read live when an
   * order could be placed next (`orderNext`: a first issuance, or a renewal if the certificate is
   * due) and the cache does not yet show the certificate this process stored a moment ago: an order
   * costs the CA budget, and the order that stored it re-queues the domain at once, often before the
   * Secret's watch event arrives (`#storedSerials`).
   */
  async #storedCertificate(
    domain: CustomDomain,
    key: string,
    orderNext: boolean,
  ): Promise<StoredCertificate | undefined> {
    const cached = await this.#servingCertificate(domain, false);
    const stored = this.#storedSerials.get(key);
    if (stored === undefined) {
      // A certificate stored but not parsed here: read live only before a first order.
      if (cached?.usable || !orderNext || this.#d.tracker.lastOutcome(key)?.state !== 'succeeded')
        return cached;
      return this.#servingCertificate(domain, true);
    }
    if (cached?.usable?.status.serialNumber === stored) {
      this.#storedSerials.delete(key);
      return cached;
    }
    if (!orderNext) return cached;
    // Live read: this process stored a certificate the cache has not seen yet, and an order would
    // otherwise be decided on the one it replaced (or on none).
    const live = await this.#servingCertificate(domain, true);
    if (live?.usable?.status.serialNumber !== stored) this.#storedSerials.delete(key);
    return live;
  }

  /**
   * The certificate part of a reconcile, with what status.issuance should say. The failure the next
   * attempt waits for comes from the tracker's memory while this process has an outcome for the
   * domain, else from the domain's status.issuance (a restarted operator or a new leader resumes the
   * backoff); a verify request (spec §3, re-verify) starts afresh (issuance-state.ts).
   *
   * @param verifyRequested a verify request is pending: ask the CA for renewal information again,
   *   and attempt a failed order now
   */
  async #certificate(
    domain: CustomDomain,
    key: string,
    verified: boolean,
    verifyRequested: boolean,
    now: Date,
    log: Logger,
  ): Promise<CertificateOutcome> {
    const failure = lastIssuanceFailure(
      this.#d.tracker.lastOutcome(key),
      domain.status?.issuance,
      verifyRequested,
    );
    const outcome = await this.#certificateState(
      domain,
      key,
      { verified, verifyRequested, failure },
      now,
      log,
    );
    const issuance = issuanceStatus(failure, outcome.state);
    return issuance ? { ...outcome, issuance } : outcome;
  }

  async #certificateState(
    domain: CustomDomain,
    key: string,
    at: { verified: boolean; verifyRequested: boolean; failure: IssuanceFailure | undefined },
    now: Date,
    log: Logger,
  ): Promise<CertificateOutcome> {
    const { verified, verifyRequested, failure } = at;
    const inFlight = this.#d.tracker.inFlight(key);
    // After a failed attempt, first issuance and renewal alike wait for the published backoff, and
    // never ask before the CA's own Retry-After (RFC 8555 §6.6).
    const failed = pendingRetry(failure, now);
    const priorFailures = failure?.failedAttempts ?? 0;
    const orderNext = verified && !inFlight && !failed;
    const seen = await this.#storedCertificate(domain, key, orderNext);
    const found = seen?.usable;
    // What Portico owns is checked on every pass: a Secret that cannot serve (edited by hand, or a
    // certificate past its validity) is replaced at once, and the status says why (not held back).
    const unusable = seen?.unusable;
    if (found) {
      return this.#servingState(
        domain,
        key,
        found,
        { verified, verifyRequested, inFlight, failed, priorFailures },
        now,
        log,
      );
    }
    if (!verified) return this.#notRequested(key, inFlight !== undefined);
    const replacing = unusable !== undefined ? { replacing: unusable } : {};
    // Re-verify past the overdue threshold with an order stuck in flight (spec §3, issue #11): that
    // order is dropped and a fresh one asked for at once.
    if (this.#abandonedStuckOrder(domain, key, { verifyRequested, inFlight }, now, log))
      return this.#certificateState(domain, key, at, now, log);
    if (inFlight) return { state: { kind: 'issuing', since: inFlight.startedAt, ...replacing } };
    if (failed) {
      return {
        state: { kind: 'failed', ...failed },
        requeueAfterMs: failed.retryAt.getTime() - now.getTime(),
      };
    }
    const queued = this.#admit(domain, key, 'first-issuance', now);
    if (queued) return { state: queued, requeueAfterMs: queuedRecheckMs(queued, now) };
    if (unusable !== undefined)
      log.warn({ problem: unusable }, 'certificate Secret unusable; issuing a new certificate');
    this.#startIssuance(domain, key, log, { priorFailures });
    return { state: { kind: 'issuing', since: now, ...replacing }, orderStarted: unusable === undefined };
  }

  /**
   * No certificate is asked for (DNS not verified). A domain that lost its verification while
   * waiting in line gives its place to the next: kept, it stood at the front unasked, and the room
   * it was given went unused until the line's staleness sweep (an hour).
   */
  #notRequested(key: string, orderInFlight: boolean): CertificateOutcome {
    if (!orderInFlight) this.#d.budget.withdraw(key);
    return { state: { kind: 'not-requested' } };
  }

  /**
   * Asks the ACME account's order budget for a turn (src/acme/order-budget.ts). Undefined: admitted,
   * start the order now (it counts from this moment). Otherwise the queued state, whose message names
   * the limit, the place in line and the expected time; the domain is re-queued for that time, or
   * sooner by the tracker when an order settles and frees room.
   */
  #admit(domain: CustomDomain, key: string, kind: OrderKind, now: Date): QueuedOrder | undefined {
    const hostname = normalizeDnsName(domain.spec.hostname);
    const decision = this.#d.budget.request(
      {
        key,
        tenant: domain.metadata.namespace,
        hostname,
        registeredDomain: registeredDomain(hostname),
        kind,
        // The moment of asking, not the reconcile's start: a reconcile that began earlier but asks
        // later (its DNS check took longer) must not go ahead of a domain already told its place.
        queuedAt: this.#d.now(),
      },
      now,
    );
    if (decision.admitted) return undefined;
    return {
      kind: 'queued',
      limit: decision.reason,
      message: decision.message,
      position: decision.position,
      expectedAt: decision.expectedAt,
    };
  }

  /**
   * For a domain without a certificate: abandons the order in flight when a verify request is acted
   * on past the overdue threshold (overdue.ts `abandonsOrderInFlight`). The run is aborted
   * (the issuer withdraws its challenge; its end records no outcome, so no failure and no failed
   * validation) and its in-flight slot in the order budget is freed (the order stays counted in the
   * account window). True when an order was abandoned.
   */
  #abandonedStuckOrder(
    domain: CustomDomain,
    key: string,
    at: { verifyRequested: boolean; inFlight: { startedAt: Date } | undefined },
    now: Date,
    log: Logger,
  ): boolean {
    const startedAt = at.inFlight?.startedAt;
    const abandon = abandonsOrderInFlight({
      verifyRequested: at.verifyRequested,
      hasCertificate: false,
      orderStartedAt: startedAt,
      verifiedAt: domain.status?.verifiedAt,
      lastVerifyRequest: domain.status?.lastVerifyRequest,
      overdueMs: this.#d.certificateOverdueMs,
      now,
    });
    if (!abandon || startedAt === undefined || !this.#d.tracker.abandon(key)) return false;
    this.#d.budget.withdraw(key);
    log.info(
      { orderStartedAt: startedAt.toISOString() },
      'certificate order abandoned: re-verify with no certificate past the overdue threshold; placing a fresh one',
    );
    return true;
  }

  /**
   * Drops the domain's order in flight, its place in the budget's line and its serving-check record
   * (removed, or not accepted).
   */
  #cancelOrder(key: string): void {
    this.#d.tracker.cancel(key);
    this.#storedSerials.delete(key);
    this.#d.budget.withdraw(key);
    this.#d.serving?.forget(key);
  }

  /** The CertificateReady state while a certificate serves: renew it when due (ARI or 2/3 of its lifetime). */
  async #servingState(
    domain: CustomDomain,
    key: string,
    found: { status: CertificateStatus; ariCertId: () => Promise<string | undefined> },
    at: {
      verified: boolean;
      verifyRequested: boolean;
      inFlight: { startedAt: Date } | undefined;
      failed: { reason: string; message: string; retryAt: Date } | undefined;
      /** Failed attempts in a row before the next one (issuance-state.ts). */
      priorFailures: number;
    },
    now: Date,
    log: Logger,
  ): Promise<CertificateOutcome> {
    const { verified, verifyRequested, inFlight, failed, priorFailures } = at;
    const serving = await this.#d.renewal.plan(
      found.status,
      found.ariCertId,
      domain.status?.certificate,
      now,
      verifyRequested,
      log,
    );
    const renewalMs = Date.parse(serving.renewalTime) - now.getTime();
    const due = renewalMs <= 0 && verified;
    if (due && inFlight) {
      // The tracker re-queues the domain when the order settles; no timed re-check is needed.
      const renewal = { kind: 'in-progress', since: inFlight.startedAt } as const;
      return { state: { kind: 'valid', certificate: serving, renewal } };
    }
    if (due && failed) {
      const renewal = { kind: 'failed', ...failed } as const;
      return {
        state: { kind: 'valid', certificate: serving, renewal },
        requeueAfterMs: Math.max(1_000, failed.retryAt.getTime() - now.getTime()),
      };
    }
    const queued = due ? this.#admit(domain, key, 'renewal', now) : undefined;
    if (queued) {
      return {
        state: { kind: 'valid', certificate: serving, renewal: queued },
        requeueAfterMs: queuedRecheckMs(queued, now),
      };
    }
    if (due) {
      this.#startIssuance(domain, key, log, {
        priorFailures,
        ...(serving.ari?.certId ? { replaces: serving.ari.certId } : {}),
      });
      return {
        state: { kind: 'valid', certificate: serving, renewal: { kind: 'in-progress', since: now } },
        orderStarted: true,
      };
    }
    // Past its renewal time but not verified: the DNS schedule re-queues the domain; a timed re-check
    // here would fire every second, the time having passed. The status says why it waits.
    return renewalMs > 0
      ? { state: { kind: 'valid', certificate: serving }, requeueAfterMs: renewalMs }
      : { state: { kind: 'valid', certificate: serving, renewal: { kind: 'awaiting-verification' } } };
  }

  /**
   * @param order.replaces the ARI identifier of the certificate being renewed (RFC 9773 §5)
   * @param order.priorFailures failed attempts in a row before this one, for a tracker that has no
   *   outcome of its own for the domain (a fresh process resuming from status.issuance)
   */
  #startIssuance(
    domain: CustomDomain,
    key: string,
    log: Logger,
    order: { replaces?: string; priorFailures: number },
  ): void {
    const { hostname } = domain.spec;
    const { replaces } = order;
    const started = this.#d.tracker.start(
      key,
      hostname,
      async (signal) => {
        try {
          const issued = await this.#d.issuer.issue(hostname, log, {
            ...(replaces ? { replaces } : {}),
            signal,
          });
          if (signal.aborted) return;
          // The certificate exists only in memory now: an API server that is briefly unreachable
          // must not cost it (and a new order), so the write is retried until it lands.
          await untilApiAnswers(
            () => this.#storeCertificate(domain, key, issued, replaces),
            hostname,
            signal,
            log,
          );
          this.#d.metrics.acmeOrdersTotal.inc({ result: 'valid' });
          log.info({ orderUrl: issued.orderUrl }, 'certificate stored');
        } catch (err) {
          if (err instanceof IssuanceCancelledError) {
            this.#d.metrics.acmeOrdersTotal.inc({ result: 'cancelled' });
            log.info(
              signal.reason === SHUTTING_DOWN
                ? 'certificate order abandoned: the operator is shutting down (the next leader places a new one)'
                : signal.reason === ORDER_ABANDONED
                  ? 'abandoned certificate order ended'
                  : 'certificate order dropped: the domain was removed or is no longer accepted',
            );
          } else {
            this.#d.metrics.acmeOrdersTotal.inc({ result: 'failed' });
            log.warn({ err }, 'certificate order failed');
          }
          throw err;
        }
      },
      order.priorFailures,
    );
    if (started) log.info({ priorFailures: order.priorFailures }, 'certificate order started');
  }

  /**
   * Writes the issued certificate into the domain's Secret, unless the domain was deleted or
   * re-created meanwhile. Live read: the order took seconds to minutes, and the cache may not have
   * seen that yet.
   */
  async #storeCertificate(
    domain: CustomDomain,
    key: string,
    issued: IssuedCertificate,
    replaces?: string,
  ): Promise<void> {
    const current = await this.#readLive(domain.metadata.namespace, domain.metadata.name);
    if (!current || current.metadata.uid !== domain.metadata.uid || current.metadata.deletionTimestamp)
      return;
    const secret: V1Secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: {
        ...ownedMetadata(current, ownedNames(current).secret),
        annotations: { [REPLACES_ANNOTATION]: replaces ?? '' },
      },
      type: 'kubernetes.io/tls',
      data: {
        [TLS_CERT]: Buffer.from(issued.certificatePem).toString('base64'),
        [TLS_KEY]: Buffer.from(issued.privateKeyPem).toString('base64'),
      },
    };
    await this.#apply(secret);
    this.#rememberCertId(key, issued.certificatePem);
  }

  /** The identifier `#rememberCertId` kept for the certificate with `facts`, once. */
  #takeStoredCertId(facts: CertificateFacts): string | undefined {
    const key = certIdKey(facts);
    const stored = this.#storedCertIds.get(key);
    this.#storedCertIds.delete(key);
    return stored;
  }

  /**
   * Keeps the serial number of a certificate just stored for `key` until the cache shows it, and its
   * ARI identifier for its first renewalInfo request.
   */
  #rememberCertId(key: string, chainPem: string): void {
    try {
      const leaf = leafCertificate(chainPem);
      const facts = certificateFacts(leaf);
      this.#storedSerials.set(key, facts.serialNumber);
      const certId = leafAriCertId(leaf);
      if (certId === undefined) return;
      if (this.#storedCertIds.size >= MAX_STORED_CERT_IDS) {
        const oldest = this.#storedCertIds.keys().next().value;
        if (oldest !== undefined) this.#storedCertIds.delete(oldest);
      }
      this.#storedCertIds.set(certIdKey(facts), certId);
    } catch {
      // No parse: the first request reads the Secret and says so.
    }
  }

  /**
   * The Events of one status write: the condition transitions (`transitionEvents`, Ready as the
   * summary), but for `ForeignRoute`, which instead gets one Warning Event per foreign route the
   * previous Conflicted message did not name (a second route names the hostname: one more Event; the
   * same routes at the next reconcile: none).
   */
  async #recordEvents(
    domain: CustomDomain,
    after: NonNullable<CustomDomainStatus['conditions']>,
  ): Promise<void> {
    const before = domain.status?.conditions;
    const events = transitionEvents(before, after, WARNING_REASONS, { summaryType: 'Ready' });
    for (const event of events)
      if (event.reason !== FOREIGN_ROUTE_REASON)
        await this.#d.events.record(domain, event.type, event.reason, event.message);
    const now = findCondition(after, CONFLICTED_CONDITION);
    if (now?.status !== 'True') return;
    const previous = findCondition(before, CONFLICTED_CONDITION);
    const seen = previous?.status === 'True' ? previous.message : undefined;
    for (const route of newRoutes(seen, [...namedIn(now.message)]))
      await this.#d.events.record(
        domain,
        'Warning',
        FOREIGN_ROUTE_REASON,
        `${route} names ${domain.spec.hostname}, which this CustomDomain holds; the ingress controller may send part or all of its traffic there. Delete it or remove the hostname from it.`,
      );
  }

  async #writeStatus(domain: CustomDomain, status: CustomDomainStatus, log: Logger): Promise<void> {
    // Equal but for fields left undefined (absent from what the API server returns): nothing to
    // write. Compared in place (the status holds only JSON values): the JSON copy below, which
    // drops those fields, and isDeepStrictEqual's property descriptors were the largest part of
    // what a resync allocated at 10,000 domains (docs/performance.md, eleventh round).
    const current = domain.status ?? {};
    if (contains(current, status) && contains(status, current)) return;
    const next = JSON.parse(JSON.stringify(status)) as CustomDomainStatus;
    await this.#d.customObjects.replaceNamespacedCustomObjectStatus({
      group: GROUP,
      version: VERSION,
      namespace: domain.metadata.namespace,
      plural: CUSTOM_DOMAIN_PLURAL,
      name: domain.metadata.name,
      body: { ...domain, status: next },
      fieldManager: FIELD_MANAGER,
    });
    await this.#recordEvents(domain, next.conditions ?? []);
    log.info({ phase: next.phase, changed: statusChanges(current, next) }, 'status updated');
  }
}

/**
 * What a status write changed, for its log line (the scale benchmark counts writes by it): the
 * conditions' changes (`conditionChanges`), then the name of each other top-level status field
 * whose value differs. Pure.
 */
function statusChanges(before: CustomDomainStatus, after: CustomDomainStatus): string[] {
  const changes = conditionChanges(before.conditions, after.conditions ?? []);
  const fields = new Set([...Object.keys(before), ...Object.keys(after)]);
  for (const field of fields) {
    if (field === 'conditions') continue;
    const a = (before as Record<string, unknown>)[field];
    const b = (after as Record<string, unknown>)[field];
    if (!(contains(a, b) && contains(b, a))) changes.push(field);
  }
  return changes;
}

/**
 * Routed=False `NameInUse` when objects at Portico's names are not this domain's: `taken`, each
 * `Kind name (CustomDomain other)`, by another domain's label; `foreign`, each `Kind name`, not
 * Portico's at all (object-holder.ts `foreignKind`). Undefined when both are empty.
 */
function nameInUse(taken: readonly string[], foreign: readonly string[]): RoutingState | undefined {
  const sentences: string[] = [];
  if (taken.length > 0)
    sentences.push(
      `${taken.join(', ')} belongs to another CustomDomain by its ${CUSTOM_DOMAIN_LABEL} label; Portico never overwrites another domain's object. Remove that object or correct its label.`,
    );
  if (foreign.length > 0)
    sentences.push(
      `${foreign.join(', ')} exists and is not Portico's (no ${MANAGED_BY_LABEL}=${MANAGED_BY_VALUE} label); Portico never overwrites an HTTPProxy it did not write. Remove or rename that object.`,
    );
  return sentences.length > 0
    ? { kind: 'not-routed', reason: 'NameInUse', message: sentences.join(' ') }
    : undefined;
}

/** Retry delays of a certificate write while the API server does not answer: 1 s doubling to 30 s. */
const STORE_RETRY: BackoffPolicy = { baseMs: 1_000, maxMs: 30_000 };

/**
 * Runs `write` until it succeeds, retrying (with STORE_RETRY backoff) while the API server cannot
 * be reached or answers 429 or 5xx; any other error is thrown at once. Throws
 * IssuanceCancelledError when `signal` fires first (the domain was removed, or the operator stops).
 */
async function untilApiAnswers(
  write: () => Promise<void>,
  hostname: string,
  signal: AbortSignal,
  log: Logger,
): Promise<void> {
  for (let failures = 1; ; failures++) {
    try {
      await write();
      return;
    } catch (err) {
      const code = apiStatusCode(err);
      if (code !== undefined && code !== 429 && code < 500) throw err;
      const retryInMs = backoffDelayMs(STORE_RETRY, failures);
      log.warn({ err, retryInMs }, 'could not store the certificate; retrying');
      await sleep(retryInMs, undefined, { signal }).catch(() => undefined);
      if (signal.aborted) throw new IssuanceCancelledError(hostname);
    }
  }
}

/**
 * When to look at a waiting domain again, milliseconds from now: at its expected time, or in a
 * second when that has passed (the order budget repeats an answer up to 5 s past its time while the
 * turn is due; order-budget.ts IMMINENT_TURN_MS), so it is told afresh or admitted without waiting
 * for the next resync.
 */
function queuedRecheckMs(queued: { expectedAt: Date }, now: Date): number {
  return Math.max(1_000, queued.expectedAt.getTime() - now.getTime());
}

function recordsOrNodata(values: string[]): RRsetAnswer {
  return values.length > 0 ? { kind: 'records', values } : { kind: 'nodata' };
}

function notRouted(): RoutingState {
  return {
    kind: 'not-routed',
    reason: 'AwaitingDNSVerification',
    message: 'The domain is routed once DNS verification succeeds.',
  };
}

/**
 * The ARI identifier the domain's status shows for the certificate with `facts` (same serial and
 * issuer), computed when the CA was first asked about it.
 */
function shownCertId(domain: CustomDomain, facts: CertificateFacts): string | undefined {
  const shown = domain.status?.certificate;
  return shown?.ari?.certId && shown.serialNumber === facts.serialNumber && shown.issuer === facts.issuer
    ? shown.ari.certId
    : undefined;
}

/** The key of `#storedCertIds`: a certificate's issuer and serial. */
function certIdKey(facts: Pick<CertificateFacts, 'issuer' | 'serialNumber'>): string {
  return `${facts.issuer}\u0000${facts.serialNumber}`;
}

/**
 * The ARI identifier (RFC 9773 §4.1) of `leaf`; undefined when it has no Authority Key Identifier
 * (the CA cannot be asked about it). Throws what `ariCertificateId` throws but AriError.
 */
function leafAriCertId(leaf: X509Certificate): string | undefined {
  try {
    return ariCertificateId(leaf.toString());
  } catch (err) {
    if (err instanceof AriError) return undefined;
    throw err;
  }
}
