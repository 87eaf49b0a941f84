/**
 * The CustomDomain reconcile: level-triggered, keyed by `namespace/name`, safe to run twice. An
 * orchestrator over the phases in ./phases/ (docs/architecture.md, "A CustomDomain reconcile"):
 * finalize (removal), acceptance and the hostname claim, DNS, routing, the certificate decision and
 * issuance, the serving check; each reads what the caches hold and the clock and returns a value,
 * doing its I/O through a small adapter (phases/objects.ts). The orchestrator writes status once,
 * and only if it changed, and returns when to look again.
 */
import type { Logger } from 'pino';
import { FINALIZER, splitKey, type CustomDomain } from '../../api/customdomain.js';
import { normalizeDnsName } from '../../dns/answers.js';
import { requiredDnsRecords } from '../../dns/records.js';
import { lazyChild } from '../../observability/logger.js';
import { ownerKey } from '../../routing/foreign-routes.js';
import { DANGLING_REASON } from './dns-outcome.js';
import { acceptance } from './acceptance.js';
import { dnsCheckDue } from './schedule.js';
import { msUntilOverdue, overdueClockStart } from './overdue.js';
import { buildStatus } from './status.js';
import { withStatusProof } from './status-proof.js';
import type { CustomDomainReconcilerDeps, ReconcileResult } from './phases/deps.js';
import {
  accepted as acceptedCondition,
  NOT_ACCEPTED_DNS,
  NOT_ACCEPTED_ROUTING,
  releasesClaim,
} from './phases/acceptance.js';
import { CertificatePhase } from './phases/certificate.js';
import { DnsPhase } from './phases/dns.js';
import { finalize, type FinalizeAdapter } from './phases/finalize.js';
import { Issuance } from './phases/issuance.js';
import { OwnedObjects } from './phases/objects.js';
import { notRouted, RoutingPhase, type RoutingOutcome } from './phases/routing.js';
import { serving as servingPhase } from './phases/serving.js';
import { StatusWriter } from './phases/status-write.js';

export type { CustomDomainReconcilerDeps, ReconcileResult } from './phases/deps.js';

/**
 * How long the status write of a reconcile that placed an order is held back: 5 s. An order usually
 * settles sooner (Pebble: p50 1.5 s during a 1,000-domain ramp), and its settling queues the domain
 * at once, so one status write (and one Event) says both that DNS was verified and that the
 * certificate is stored; an order still running at this time has its progress written then.
 */
export const ORDER_PROGRESS_STATUS_DELAY_MS = 5_000;

/** How often a CustomDomain refused with HostnameAlreadyClaimed looks at the claim again: 10 min. */
const CLAIM_RECHECK_MS = 10 * 60_000;

export class CustomDomainReconciler {
  readonly #d: CustomDomainReconcilerDeps;
  readonly #objects: OwnedObjects;
  readonly #dns: DnsPhase;
  readonly #routing: RoutingPhase;
  readonly #issuance: Issuance;
  readonly #certificates: CertificatePhase;
  readonly #status: StatusWriter;
  readonly #finalizeAdapter: FinalizeAdapter;

  constructor(deps: CustomDomainReconcilerDeps) {
    this.#d = deps;
    this.#objects = new OwnedObjects(deps);
    this.#dns = new DnsPhase(deps);
    this.#routing = new RoutingPhase(deps, this.#objects);
    this.#issuance = new Issuance(deps, this.#objects);
    this.#certificates = new CertificatePhase(deps, this.#objects, this.#issuance);
    this.#status = new StatusWriter(deps);
    this.#finalizeAdapter = {
      objects: this.#objects,
      claims: deps.claims,
      events: deps.events,
      lastGood: deps.lastGood,
      cancelOrder: (key) => {
        this.#cancelOrder(key);
      },
      forgetMetrics: (domain) => {
        this.#reportDangling(domain, false);
        this.#reportForeignRoutes(domain, 0);
      },
    };
  }

  async reconcile(key: string): Promise<ReconcileResult> {
    const { namespace, name } = splitKey(key);
    let domain = this.#d.view.customDomain(namespace, name);
    if (!domain) {
      this.#cancelOrder(key);
      return {};
    }
    const log = lazyChild(this.#d.log, { namespace, name, hostname: domain.spec.hostname });
    if (domain.metadata.deletionTimestamp) return finalize(domain, key, log, this.#finalizeAdapter);
    if (!(domain.metadata.finalizers ?? []).includes(FINALIZER))
      domain = await this.#objects.addFinalizer(domain);

    const now = this.#d.now();
    // The key of the operator's proofs is loaded before the claim rules ask for them (status-proof.ts).
    await this.#d.ownership.store.key();
    const { claimLapsesAt, ...accepted } = await acceptedCondition(this.#d, domain);
    if (accepted.status !== 'True') return this.#notAccepted(domain, key, accepted, claimLapsesAt, now, log);
    // From here on, no decision rests on a DNS outcome the operator did not prove
    // (docs/customdomains.md, "What status Portico trusts"); the status write compares with what
    // is stored.
    const stored = domain;
    domain = await this.#dns.trusted(domain);
    // Why a DNS check is due, computed once: the DNS phase checks by it, the certificate phase acts
    // on a verify request by it.
    const due = dnsCheckDue(domain, now);
    const verifyRequested = due === 'requested';
    const dns = await this.#dns.verify(domain, key, due, now, log);
    this.#reportDangling(domain, dns.condition.reason === DANGLING_REASON);
    const verified = dns.condition.status === 'True';
    // The CertificateOverdue clock, computed once: the status counts from it and the reconcile wakes
    // by it. It restarts with a verify request acted on (overdue.ts overdueClockStart).
    const overdueClock = verified
      ? overdueClockStart(dns.carried.verifiedAt, dns.carried.lastVerifyRequest, now)
      : undefined;
    // A Secret that cannot serve gets the last good certificate back before routing decides on it
    // (docs/customdomains.md, "The last good certificate").
    const routing: RoutingOutcome =
      verified || dns.carried.verifiedAt
        ? await this.#routing.apply(domain, await this.#certificates.usableBeforeRouting(domain, log))
        : notRouted();
    const {
      state: certificate,
      requeueAfterMs: certificateRequeue,
      orderStarted,
      issuance,
    } = await this.#certificates.run(domain, key, verified, verifyRequested, now, log, dns.delegation);
    // A verify request is answered by the status write that records it (lastVerifyRequest): held
    // back, an order failing within the delay would meet the same request again, have its backoff
    // cleared and be placed again, over and over.
    if (orderStarted && !verifyRequested) {
      // The next reconcile (when the order settles, or after the delay) writes the status.
      return { requeueAfterMs: ORDER_PROGRESS_STATUS_DELAY_MS };
    }

    const serving = await servingPhase(
      this.#d.serving,
      domain,
      key,
      { verified, certificate, routing },
      now,
      log,
    );
    const status = buildStatus(
      domain,
      {
        accepted,
        dnsVerified: dns.condition,
        certificate,
        routing,
        ...serving.observed,
        foreignRoutes: this.#foreignRoutes(domain),
        overdueClock,
      },
      { ...dns.carried, ...(issuance ? { issuance } : {}) },
      now,
      this.#d.certificateOverdueMs,
    );
    // The operator's proof over what later reconciles and the claim rules decide by (status-proof.ts).
    const ownershipKey = await this.#d.ownership.store.key();
    const hostname = normalizeDnsName(domain.spec.hostname);
    const proven = withStatusProof(ownershipKey, domain.metadata.uid ?? '', hostname, status);
    await this.#status.write(stored, proven, log);
    // Without a certificate, look again when it becomes overdue, so the condition says so on time.
    const overdueAt = msUntilOverdue(
      overdueClock,
      certificate.kind === 'valid',
      this.#d.certificateOverdueMs,
      now,
    );
    const waits = [
      dns.nextCheckMs,
      certificateRequeue,
      overdueAt,
      serving.requeueAfterMs,
      routing.requeueAfterMs,
    ].filter((ms): ms is number => ms !== undefined && ms > 0);
    return waits.length > 0 ? { requeueAfterMs: Math.max(1_000, Math.min(...waits)) } : {};
  }

  /** Not accepted (plan, deploy, reserved or claimed elsewhere): nothing is routed or ordered. */
  async #notAccepted(
    domain: CustomDomain,
    key: string,
    accepted: ReturnType<typeof acceptance>,
    claimLapsesAt: Date | undefined,
    now: Date,
    log: Logger,
  ): Promise<ReconcileResult> {
    await this.#objects.removeRouting(domain);
    this.#cancelOrder(key);
    this.#reportDangling(domain, false);
    // A holder whose plan no longer allows custom domains lets the hostname go, now that its
    // routing is gone (a NotDeployed holder keeps it; HostnameAlreadyClaimed holds nothing).
    if (releasesClaim(accepted.reason)) await this.#d.claims.release(domain, { trustCache: true });
    const status = buildStatus(
      domain,
      {
        accepted,
        dnsVerified: NOT_ACCEPTED_DNS,
        certificate: { kind: 'not-requested' },
        routing: NOT_ACCEPTED_ROUTING,
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
    await this.#status.write(domain, status, log);
    // A released claim wakes its claimants through the holder's own events; the recheck only
    // covers a claim that went another way (e.g. deleted by hand), or a holder never deployed whose
    // hold lapses sooner (this domain then takes the claim over).
    if (accepted.reason !== 'HostnameAlreadyClaimed' && accepted.reason !== 'HostnameClaimYielded') return {};
    const lapseMs = claimLapsesAt ? claimLapsesAt.getTime() - now.getTime() : undefined;
    return {
      requeueAfterMs:
        lapseMs === undefined ? CLAIM_RECHECK_MS : Math.min(CLAIM_RECHECK_MS, Math.max(1_000, lapseMs + 500)),
    };
  }

  /**
   * The routes Portico does not own that name the domain's hostname (`Kind namespace/name`, from the
   * route watches' index), and sets `portico_customdomain_foreign_routes` to their number. A route
   * is Portico's own only when its controller ownerReference names, in its own namespace, the
   * CustomDomain that holds the hostname's claim or this one (routing/foreign-routes.ts).
   */
  #foreignRoutes(domain: CustomDomain): string[] {
    const holder = this.#d.view.hostnameClaim(normalizeDnsName(domain.spec.hostname))?.spec.customDomainRef;
    const routes = this.#d.view.foreignRoutes(domain.spec.hostname, routeOwners(domain, holder));
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

  /**
   * Drops the domain's order in flight, its place in the budget's line and its serving-check record
   * (removed, or not accepted).
   */
  #cancelOrder(key: string): void {
    this.#d.tracker.cancel(key);
    this.#issuance.forgetStoredSerial(key);
    this.#d.budget.withdraw(key);
    this.#d.serving?.forget(key);
  }
}

/**
 * The owners whose routes are not foreign to `domain` (routing/foreign-routes.ts `ownerKey`): the
 * domain itself and the CustomDomain its hostname's claim names (`holder`), each in its own
 * namespace. Pure.
 */
export function routeOwners(
  domain: CustomDomain,
  holder: { namespace: string; uid: string } | undefined,
): Set<string> {
  const owners = new Set<string>();
  if (domain.metadata.uid) owners.add(ownerKey(domain.metadata.namespace, domain.metadata.uid));
  if (holder?.uid) owners.add(ownerKey(holder.namespace, holder.uid));
  return owners;
}
