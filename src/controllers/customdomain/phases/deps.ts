/**
 * What the CustomDomain reconcile and its phases are given: the caches (`view`), the API clients,
 * the DNS resolver, the ACME issuer, tracker and order budget, the serving check, metrics, Events,
 * the log and the clock. One object, built by src/controller/main.ts.
 */
import type { CoreV1Api, CustomObjectsApi, KubernetesObjectApi } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import type { IssuanceTracker } from '../../../acme/issuance-tracker.js';
import type { AcmeIssuerSet } from '../../../acme/issuer-set.js';
import type { DnsResolver } from '../../../dns/resolver.js';
import type { OwnershipPolicy } from '../../../dns/ownership.js';
import type { EventRecorder } from '../../../kube/events.js';
import type { ControllerMetrics } from '../../../observability/metrics.js';
import type { RoutingOptions } from '../../../routing/options.js';
import type { OwnershipStore } from '../ownership-store.js';
import type { HostnameClaims } from '../hostname-claims.js';
import type { ClusterView } from '../cluster-view.js';
import type { RenewalPlanner } from '../renewal.js';
import type { LastGoodCertificates } from '../last-good-certificates.js';
import type { ServingChecker } from '../../../serving/checker.js';

export interface ReconcileResult {
  /** Milliseconds after which the key should be reconciled again, if at all. */
  requeueAfterMs?: number;
}

export interface CustomDomainReconcilerDeps {
  platformCnameTarget: string;
  /** Milliseconds verified without a certificate before CertificateReady says it is overdue (docs/troubleshooting.md, CertificateOverdue: 30 min). */
  certificateOverdueMs: number;
  /**
   * Milliseconds before the first retry of a failed order, doubling after each further failure up
   * to an hour (schedule.ts; `--issuance-first-retry-seconds`). Undefined: 1 minute.
   */
  issuanceFirstRetryMs?: number;
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
  /**
   * The platform's DNS-01 challenge zone (`--dns01-challenge-zone`; docs/customdomains.md,
   * "Certificates before the move"): with it, each check also looks up the CNAME at
   * `_acme-challenge.<hostname>`, and a domain delegated into the zone is issued its certificate by
   * DNS-01. Undefined: off.
   */
  dns01ChallengeZone?: string | undefined;
  /** Addresses an apex's A/AAAA records must equal; [] means the target's own addresses. */
  apexAddresses: readonly string[];
  /** The platform's own domains, which no CustomDomain may claim. */
  reservedDomains: readonly string[];
  /** Names under `test` and `example` may be claimed (domain/claimable.ts). */
  allowSpecialUseHostnames: boolean;
  view: ClusterView;
  /** The cluster-wide hostname claims (docs/customdomains.md, "Who holds a hostname"). */
  claims: HostnameClaims;
  routing: RoutingOptions;
  customObjects: CustomObjectsApi;
  core: CoreV1Api;
  objects: KubernetesObjectApi;
  resolver: DnsResolver;
  /** The configured ACME issuers, in order, with failover (src/acme/issuer-set.ts). */
  issuer: Pick<AcmeIssuerSet, 'issue'>;
  tracker: IssuanceTracker;
  /** The ACME accounts' order budgets: every order, first or renewal, waits for its turn here. */
  budget: Pick<AcmeIssuerSet, 'request' | 'withdraw'>;
  renewal: RenewalPlanner;
  /** The last good certificate of each domain, in the operator's namespace (last-good-certificates.ts). */
  lastGood: Pick<LastGoodCertificates, 'keep' | 'read' | 'remove' | 'at'>;
  /** The serving check (src/serving/checker.ts, --serving-check-address); undefined: off. */
  serving?: ServingChecker;
  events: EventRecorder;
  metrics: ControllerMetrics;
  log: Logger;
  now: () => Date;
}
