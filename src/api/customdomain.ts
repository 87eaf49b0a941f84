/**
 * The CustomDomain API, group `portico.dev`, version `v1alpha1` (docs/customdomains.md).
 * These types mirror `crds/portico.dev_customdomains.yaml`; the CRD schema is the authority.
 */
import type { V1ObjectMeta } from '@kubernetes/client-node';

export const GROUP = 'portico.dev';
export const VERSION = 'v1alpha1';
export const API_VERSION = `${GROUP}/${VERSION}`;
export const CUSTOM_DOMAIN_KIND = 'CustomDomain';
export const CUSTOM_DOMAIN_PLURAL = 'customdomains';

/** The finalizer that removes routing before the object disappears (docs/customdomains.md, "Removal"). */
export const FINALIZER = 'portico.dev/finalizer';
/** Changing this annotation's value asks for a DNS check now (docs/customdomains.md, "Verify and re-verify"). */
export const VERIFY_REQUESTED_AT_ANNOTATION = 'portico.dev/verify-requested-at';
/** The namespace label that carries the tenant's plan (docs/tenant-rbac.md). */
export const PLAN_LABEL = 'portico.dev/plan';
/** Labels on every object the operator creates, so its informers watch only those. */
export const MANAGED_BY_LABEL = 'app.kubernetes.io/managed-by';
export const MANAGED_BY_VALUE = 'portico';
export const CUSTOM_DOMAIN_LABEL = 'portico.dev/customdomain';
/** The field manager for server-side apply and status writes. */
export const FIELD_MANAGER = 'portico-controller';

export type Phase = 'Pending' | 'AwaitingDNS' | 'Verified' | 'Issuing' | 'Live' | 'Failed';

export type ConditionType = 'Accepted' | 'DNSVerified' | 'CertificateReady' | 'Routed' | 'Ready';

/** A metav1.Condition. Times are RFC 3339 strings. */
export interface Condition {
  type: ConditionType | (string & {});
  status: 'True' | 'False' | 'Unknown';
  reason: string;
  message: string;
  observedGeneration?: number;
  lastTransitionTime: string;
}

export interface CustomDomainSpec {
  /** One FQDN, lowercase A-labels, no trailing dot (the CRD's CEL rules enforce this). */
  hostname: string;
  service?: { name: string; port?: number | string };
  redirect?: { to: string; statusCode?: 301 | 302 | 307 | 308 };
}

/**
 * A record that does the job of an apex's ALIAS/ANAME at a DNS provider without them: an A or AAAA
 * record whose value is one of the platform's fixed addresses (`--apex-addresses`).
 */
export interface AlternativeDnsRecord {
  type: 'A' | 'AAAA';
  /** The full owner name, lowercase, no trailing dot. */
  name: string;
  /** The owner name relative to the zone, as DNS providers ask for it: `@` for the apex. */
  relativeName: string;
  /** An IPv4 (A) or IPv6 (AAAA) address. */
  value: string;
  /** Seconds. */
  ttl: number;
}

/**
 * A record the customer must create at their DNS provider (docs/customdomains.md, "DNS instructions"), written so that a
 * dashboard can show it as it is (src/dns/records.ts; docs/customdomains.md, "DNS instructions").
 */
export interface RequiredDnsRecord {
  /**
   * CNAME for a subdomain, ALIAS for an apex (ALIAS or ANAME, whichever the provider calls it), TXT
   * for the ownership record (src/dns/ownership.ts) when the platform asks for it.
   */
  type: 'CNAME' | 'ALIAS' | 'TXT';
  /** The full owner name, lowercase, no trailing dot: `www.shop.example.co.uk`. */
  name: string;
  /**
   * The owner name relative to `zone`, as DNS providers ask for it in their "Name" or "Host" field:
   * `www.shop` for `www.shop.example.co.uk` in `example.co.uk`, `@` for the apex. Absent on objects an
   * older operator wrote.
   */
  relativeName?: string;
  /**
   * The zone the record goes in: the registered domain of `name` by the Public Suffix List
   * (`example.co.uk`), where a DNS provider keeps the customer's records. Absent on objects an older
   * operator wrote.
   */
  zone?: string;
  value: string;
  /** Seconds. */
  ttl: number;
  note?: string;
  /**
   * True for a record the customer may add but need not: the DNS-01 delegation
   * `_acme-challenge.<hostname> CNAME <target>` (docs/customdomains.md, "Certificates before the
   * move"). Absent on the records the domain needs.
   */
  optional?: boolean;
  /**
   * For an ALIAS: the records that do the same job at a provider without ALIAS/ANAME (create these
   * instead, all of them): the platform's addresses. Absent when the platform configures no fixed
   * addresses (`note` then says so) and on every other type.
   */
  alternatives?: AlternativeDnsRecord[];
}

/** A resource record as DNS answered it. */
export interface ObservedRecord {
  type: string;
  name: string;
  value: string;
}

export interface ObservedDns {
  /** RFC 3339. */
  checkedAt: string;
  /** RFC 3339: when the operator checks again on its own. */
  nextCheckAt?: string;
  result: string;
  message: string;
  records: ObservedRecord[];
  /**
   * RFC 3339: the first of the checks, in a row, whose definite answer no longer matched on a
   * verified domain; it stays verified until this time plus the grace period
   * (`--dns-mismatch-grace-seconds`). Absent while DNS matches.
   */
  failingSince?: string;
  /**
   * The CNAME at `_acme-challenge.<hostname>` as the last check found it, when the platform has a
   * DNS-01 challenge zone (`--dns01-challenge-zone`; docs/customdomains.md, "Certificates before the
   * move"): `Delegated` (it names `target`), `Absent`, `PointsElsewhere` (it names `found`) or
   * `Unknown` (the lookup failed). Absent when no challenge zone is configured.
   */
  challengeDelegation?: ChallengeDelegationStatus;
  /**
   * The operator's proof of the status it wrote (src/controllers/customdomain/status-proof.ts: an
   * HMAC by its ownership key over the Accepted status, the DNSVerified status and reason,
   * `verifiedAt`, the times and result above, the certificate's dnsNames and notAfter, the hostname
   * and the CustomDomain's uid). A status without a valid proof has its DNS checked again as for a
   * new domain and never makes the domain serve its hostname (claim-precedence.ts); its
   * `Accepted=True` latches the deploy gate only where a routing object of the operator's shows the
   * domain accepted (controllers/customdomain/acceptance.ts `acceptedBefore`).
   */
  proof?: string;
}

/** `status.observed.challengeDelegation`. */
export interface ChallengeDelegationStatus {
  result: 'Delegated' | 'Absent' | 'PointsElsewhere' | 'Unknown';
  /** The name `_acme-challenge.<hostname>` must be a CNAME of, in the platform's challenge zone. */
  target: string;
  /** PointsElsewhere: the name the CNAME names instead; Unknown: the failed answer (SERVFAIL, timeout, ...). */
  found?: string;
}

export interface CertificateStatus {
  secretName: string;
  /** RFC 3339. */
  notBefore: string;
  /** RFC 3339. */
  notAfter: string;
  /** RFC 3339: when the operator renews. */
  renewalTime: string;
  serialNumber: string;
  /** The issuer's distinguished name, from the certificate. */
  issuer: string;
  /**
   * The configured ACME issuer (`--acme-issuers` name, `default` with the single-issuer flags) that
   * issued it; absent for a certificate stored before issuers had names or not stored by Portico.
   */
  acmeIssuer?: string;
  dnsNames: string[];
  /** The ARI identifier of the certificate this one replaced (RFC 9773 §5). */
  replaces?: string;
  /** The CA's renewal information (RFC 9773), when it offers it. Times RFC 3339. */
  ari?: {
    certId: string;
    windowStart: string;
    windowEnd: string;
    explanationURL?: string;
    checkedAt: string;
    nextCheckAt: string;
  };
}

/**
 * Ownership verification by a TXT record (src/dns/ownership.ts): decided once per CustomDomain and
 * hostname, at its first DNS check.
 */
export interface OwnershipStatus {
  /** The hostname the decision is for; a domain whose hostname changes is decided again. */
  hostname: string;
  /** Whether the TXT record must be shown before DNS verification counts. */
  required: boolean;
  /**
   * Why: `PolicyAlways`, `PolicyNever`, `RecentlyClaimed` (another project released the hostname
   * within `--ownership-recent-days`) or `NotRecentlyClaimed`.
   */
  reason: string;
  /** A sentence for a person. */
  message: string;
  /** RFC 3339: when the TXT record was found. Once set, the record may be removed. */
  verifiedAt?: string;
  /**
   * The operator's proof of this decision (src/dns/ownership.ts `ownershipProof`: an HMAC by its
   * ownership key over the fields above and the CustomDomain's uid). A decision without a valid
   * proof, e.g. written by anyone else with the right to write status, is made again.
   */
  proof?: string;
}

/**
 * The certificate attempts that failed in a row, kept in status (as cert-manager keeps
 * `status.failedIssuanceAttempts` and `status.lastFailureTime` on a Certificate) so that a restarted
 * operator, or a new leader, resumes the backoff where it was instead of ordering at once
 * (src/controllers/customdomain/issuance-state.ts; docs/customdomains.md, "Issuance state").
 * Absent before the first failure, once a certificate is stored, and after a re-verify (docs/customdomains.md, "Issuance state":
 * a fresh attempt now). Times RFC 3339.
 */
export interface IssuanceStatus {
  /** Attempts (first issuance or renewal) that failed in a row since the last certificate; at least 1. */
  failedAttempts: number;
  /** RFC 3339: when the last attempt failed. */
  lastFailureTime: string;
  /** UpperCamelCase, as the CertificateReady reason: `IssuanceFailed`, `CARateLimited`, `CAAForbidsIssuance`, … */
  lastFailureReason: string;
  /** The failure in words (the CA's own, where it gave some). */
  lastFailureMessage?: string;
  /**
   * RFC 3339: no order for this domain before this time: the published backoff after the last
   * failure (1, 2, 4 … 60 minutes), or `retryAfter` when later.
   */
  nextAttemptTime: string;
  /** RFC 3339: the CA asked for no new order before this time (its Retry-After, RFC 8555 §6.6). */
  retryAfter?: string;
}

export interface CustomDomainStatus {
  observedGeneration?: number;
  phase?: Phase;
  conditions?: Condition[];
  dnsRecords?: RequiredDnsRecord[];
  observed?: ObservedDns;
  certificate?: CertificateStatus;
  /** RFC 3339: when DNS verification last turned true. */
  verifiedAt?: string;
  /** The last value of the verify-requested-at annotation the operator acted on. */
  lastVerifyRequest?: string;
  ownership?: OwnershipStatus;
  /** The failed certificate attempts the backoff counts from; absent when there are none. */
  issuance?: IssuanceStatus;
}

export interface CustomDomain {
  apiVersion: typeof API_VERSION;
  kind: typeof CUSTOM_DOMAIN_KIND;
  metadata: V1ObjectMeta & { name: string; namespace: string };
  spec: CustomDomainSpec;
  status?: CustomDomainStatus;
}

/** The queue key of an object: `namespace/name`. */
export function objectKey(obj: { metadata?: { namespace?: string; name?: string } }): string {
  return `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
}

/** Splits a `namespace/name` queue key. Throws `Error` on a key without a slash. */
export function splitKey(key: string): { namespace: string; name: string } {
  const slash = key.indexOf('/');
  if (slash < 0) throw new Error(`invalid object key "${key}": expected namespace/name`);
  return { namespace: key.slice(0, slash), name: key.slice(slash + 1) };
}

/** Annotation on the TLS Secret: the ARI identifier of the certificate it replaced. */
export const REPLACES_ANNOTATION = 'portico.dev/replaces';

/** Annotation on the TLS Secret: the configured ACME issuer (`--acme-issuers` name) that issued it. */
export const ACME_ISSUER_ANNOTATION = 'portico.dev/acme-issuer';

/** The names of the objects Portico owns for one CustomDomain. Pure. */
export function ownedNames(domain: Pick<CustomDomain, 'metadata'>): { ingress: string; secret: string } {
  const base = domain.metadata.name;
  return { ingress: `portico-${base}`, secret: `${base}-tls` };
}
