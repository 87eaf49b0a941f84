/**
 * The catalogue of every reason a CustomDomain's conditions and Events carry: its severity (the
 * Event type recorded when a condition turns to it) and one line on what it means. One place, so a
 * new reason cannot be written without saying whether a person must act (a reason missing from a
 * hand-kept list of Warning reasons was once recorded as Normal). docs/customdomains.md has
 * a row for each (checked by reasons.test.ts).
 */

/** `Warning`: a person must act (or should know something went wrong); `Normal`: progress. */
export type ReasonSeverity = 'Normal' | 'Warning';

export interface ReasonEntry {
  readonly severity: ReasonSeverity;
  /** One line: what the reason means. */
  readonly doc: string;
}

/** Every CustomDomain condition and Event reason, by condition (Kubernetes API conventions: UpperCamelCase). */
export const CUSTOM_DOMAIN_REASONS = {
  // Accepted (acceptance.ts)
  Accepted: { severity: 'Normal', doc: 'the plan, deploy, hostname and claim gates pass' },
  InvalidHostname: { severity: 'Warning', doc: 'a label is punycode but not a valid A-label (RFC 5891)' },
  PlanNotEligible: {
    severity: 'Warning',
    doc: 'custom domains need Pro or above (docs/customdomains.md, "Conditions and reasons")',
  },
  NotDeployed: {
    severity: 'Warning',
    doc: 'the project has no successful deploy yet: its Service has no ready endpoint',
  },
  ReservedHostname: { severity: 'Warning', doc: "the hostname is one of the platform's own domains" },
  HostnameNotPublic: {
    severity: 'Warning',
    doc: 'not under an ICANN public suffix, or cluster-internal or special-use (RFC 6761)',
  },
  HostnameDisallowedCharacter: {
    severity: 'Warning',
    doc: 'an internationalized label has a code point IDNA2008 disallows (RFC 5892), e.g. an emoji',
  },
  HostnameAlreadyClaimed: {
    severity: 'Warning',
    doc: 'another project holds the hostname (docs/customdomains.md, "Who holds a hostname")',
  },
  HostnameClaimYielded: {
    severity: 'Warning',
    doc: 'this domain held the hostname but its project was not deployed within the grace; a deployed project took it over',
  },
  // DNSVerified (dns/verdict.ts)
  RecordMatches: { severity: 'Normal', doc: 'the CNAME (or apex ALIAS/ANAME addresses) match' },
  RecordNotFound: { severity: 'Warning', doc: 'no record at the name' },
  ConflictingRecord: { severity: 'Warning', doc: 'another record sits where the CNAME should be' },
  CNAMEMismatch: { severity: 'Warning', doc: 'the CNAME points elsewhere' },
  AddressMismatch: { severity: 'Warning', doc: "an apex resolves to addresses that are not the platform's" },
  DNSServerFailure: { severity: 'Warning', doc: 'the resolver answered SERVFAIL' },
  DNSTimeout: { severity: 'Warning', doc: 'the resolver did not answer in time' },
  DNSError: { severity: 'Warning', doc: 'another resolver error' },
  TargetUnresolvable: { severity: 'Warning', doc: "the platform's target has no addresses" },
  OwnershipNotVerified: {
    severity: 'Warning',
    doc: 'the record matches, but the ownership TXT record the platform asks for is not shown',
  },
  DanglingRecord: {
    severity: 'Warning',
    doc: 'the domain is still attached, but its DNS has pointed elsewhere longer than --dangling-after-seconds',
  },
  NotAccepted: { severity: 'Normal', doc: 'not checked or routed before the domain is accepted' },
  // CertificateReady (status.ts, acme/)
  Issued: { severity: 'Normal', doc: 'a certificate serves' },
  Renewing: { severity: 'Normal', doc: 'a renewal order is in progress; the certificate serves' },
  RenewalFailed: { severity: 'Warning', doc: 'the last renewal failed; the certificate still serves' },
  RenewalQueued: { severity: 'Normal', doc: "the renewal waits for the CA budget's turn" },
  RenewalAwaitsVerification: {
    severity: 'Warning',
    doc: 'the renewal is due but waits until DNS verifies again',
  },
  AwaitingDNSVerification: { severity: 'Normal', doc: 'waits for DNS verification' },
  Pending: { severity: 'Normal', doc: 'the order starts now' },
  Issuing: { severity: 'Normal', doc: 'an ACME order is in progress' },
  Reissuing: { severity: 'Warning', doc: 'the Secret cannot serve; a new certificate is being issued' },
  IssuedCertificateUnusable: {
    severity: 'Warning',
    doc: 'the CA issued a certificate that could not serve the domain (unparsable, wrong key, broken chain, other names, not valid now); it was not stored',
  },
  CAAForbidsIssuance: { severity: 'Warning', doc: "CAA records exclude the platform's CA (RFC 8659)" },
  CAALookupFailed: { severity: 'Warning', doc: 'the CAA lookup failed (RFC 8659 §5.4)' },
  IssuanceFailed: { severity: 'Warning', doc: 'the order failed' },
  CARateLimited: { severity: 'Warning', doc: 'the CA answered 429 rateLimited' },
  ExternalAccountBindingFailed: {
    severity: 'Warning',
    doc: "the CA refused the ACME account's external account binding, or its HMAC key's Secret is missing",
  },
  ChallengeZoneRefused: {
    severity: 'Warning',
    doc: "the challenge zone's server refused the DNS-01 record update (RFC 2136): a wrong TSIG key, or a zone that takes no updates from it",
  },
  ChallengeZoneUnreachable: {
    severity: 'Warning',
    doc: "the challenge zone's server did not answer the DNS-01 record update in time, or the connection failed",
  },
  ChallengeDelegationMismatch: {
    severity: 'Warning',
    doc: "_acme-challenge.<hostname> is a CNAME to another name than the domain's in the challenge zone: no certificate before DNS verification",
  },
  OrderQueued: { severity: 'Normal', doc: "the order waits for the CA budget's turn" },
  CertificateOverdue: {
    severity: 'Warning',
    doc: 'no certificate 30 minutes after verification (docs/troubleshooting.md)',
  },
  // Routed (routing/plan.ts, reconciler.ts)
  RoutesReady: { severity: 'Normal', doc: 'the routing objects are applied' },
  NoBackend: { severity: 'Warning', doc: 'neither spec.service nor spec.redirect is set' },
  ServicePortNotFound: { severity: 'Warning', doc: 'the Service has no such port' },
  NameInUse: { severity: 'Warning', doc: "an object at Portico's name is another domain's" },
  // Routed, redirect domains (routing/redirect.ts)
  RedirectToSelf: { severity: 'Warning', doc: "spec.redirect.to is the domain's own hostname" },
  RedirectTargetReserved: {
    severity: 'Warning',
    doc: "spec.redirect.to is one of the platform's own (reserved) domains, which no CustomDomain can serve",
  },
  RedirectTargetNotFound: {
    severity: 'Warning',
    doc: 'no CustomDomain of the project has the hostname spec.redirect.to names',
  },
  RedirectTargetOtherProject: {
    severity: 'Warning',
    doc: 'spec.redirect.to is a hostname of another project',
  },
  RedirectTargetNotServing: {
    severity: 'Normal',
    doc: 'the redirect waits until its target is Ready (or the target is being deleted)',
  },
  RedirectChain: { severity: 'Warning', doc: 'the redirect target redirects too (a → b → c)' },
  RedirectLoop: { severity: 'Warning', doc: 'the redirect target redirects back to this domain (a → b → a)' },
  // Routed, the data plane's acknowledgement (routing/acknowledgement.ts); a refusal by the ingress
  // controller or gateway carries the data plane's own reason, which is not catalogued here
  AwaitingDataPlane: {
    severity: 'Normal',
    doc: 'the routing is written; the ingress controller or gateway has not yet reported taking it',
  },
  ListenerSetUnsupported: {
    severity: 'Warning',
    doc: 'gateway mode: the API server serves no ListenerSet, so the certificate cannot be attached to the Gateway',
  },
  HTTPProxyUnsupported: {
    severity: 'Warning',
    doc: "ingress mode, flavor contour: the API server serves no HTTPProxy (Contour's CRDs are not installed)",
  },
  UnsupportedByDataPlane: {
    severity: 'Warning',
    doc: 'the data plane named by --data-plane ignores the routing flavor (or its redirect) the operator writes; the message names the flags that work',
  },
  // Conflicted (routing/foreign-routes.ts, status.ts); ForeignRoute is also Ready's reason and the
  // Warning Event recorded once per newly seen object
  ForeignRoute: {
    severity: 'Warning',
    doc: 'a route Portico does not own (Ingress, HTTPProxy, HTTPRoute) names the hostname',
  },
  NoForeignRoute: { severity: 'Normal', doc: 'the foreign routes that named the hostname are gone' },
  // Ready
  Live: {
    severity: 'Normal',
    doc: 'every other condition holds; with the serving check on, it saw the issued certificate served and the route answer',
  },
  // Ready, the serving check (serving/verdict.ts SERVING_REASONS picks its own from here, serving/schedule.ts)
  CertificateNotServed: {
    severity: 'Warning',
    doc: 'the data plane serves another certificate for the hostname than the one Portico issued',
  },
  ProjectNotReached: {
    severity: 'Warning',
    doc: "a request for the hostname gets the data plane's default backend, or an answer of the domain's earlier spec, not the domain's route",
  },
  DataPlaneUnreachable: {
    severity: 'Warning',
    doc: 'the serving check could not connect to the data plane or got no answer',
  },
  AwaitingServing: {
    severity: 'Normal',
    doc: 'the data plane took the route but does not serve the issued certificate or route yet, within the propagation grace after the first check',
  },
  ServingCheckPending: {
    severity: 'Normal',
    doc: 'the serving check of this certificate is due and waits for a free slot',
  },
  // Events only
  Removed: { severity: 'Normal', doc: 'routing and the certificate Secret were removed' },
  CertificateRestored: {
    severity: 'Warning',
    doc: "the domain's Secret could not serve (edited, replaced or deleted by someone else); the last good certificate was written back",
  },
  HostnameClaimReplaced: {
    severity: 'Warning',
    doc: 'a HostnameClaim that did not count was replaced by this domain',
  },
  HostnameClaimTakenOver: {
    severity: 'Normal',
    doc: 'this deployed domain took over the claim of a domain whose project was not deployed within the grace',
  },
} as const satisfies Record<string, ReasonEntry>;

export type CustomDomainReason = keyof typeof CUSTOM_DOMAIN_REASONS;

/** The reasons recorded as Warning Events when a condition turns to them. */
export const WARNING_REASONS: ReadonlySet<string> = new Set(
  Object.entries(CUSTOM_DOMAIN_REASONS)
    .filter(([, entry]) => entry.severity === 'Warning')
    .map(([reason]) => reason),
);

/** The Event type for `reason`: its catalogue severity (Normal for a reason not in it). */
export function eventTypeOf(reason: string): ReasonSeverity {
  return WARNING_REASONS.has(reason) ? 'Warning' : 'Normal';
}

/**
 * Every reason of a RateLimitPolicy's `Attached` condition (src/controllers/ratelimitpolicy/attachment.ts),
 * in the same form; docs/ratelimits.md has a row for each (checked by reasons.test.ts).
 */
export const RATE_LIMIT_ATTACHED_REASONS = {
  Attached: {
    severity: 'Normal',
    doc: "every target carries the policy's descriptors and Contour accepts it",
  },
  AwaitingContour: {
    severity: 'Normal',
    doc: 'the descriptors are applied; Contour has not yet reported on that generation of the HTTPProxy',
  },
  TargetsNotRead: {
    severity: 'Normal',
    doc: "Unknown: the operator has not listed HTTPProxies yet (is Contour's HTTPProxy CRD installed?)",
  },
  TargetNotFound: {
    severity: 'Warning',
    doc: "no object of the target's kind and name in the policy's namespace",
  },
  UnsupportedTarget: {
    severity: 'Warning',
    doc: 'the target is none of a projectcontour.io HTTPProxy, a gateway.networking.k8s.io HTTPRoute or Gateway',
  },
  NotRootProxy: {
    severity: 'Warning',
    doc: 'the HTTPProxy has no spec.virtualhost: rate limits attach to a root proxy',
  },
  FieldConflict: {
    severity: 'Warning',
    doc: "another field manager (a person, a tool, another policy) owns the HTTPProxy's rate-limit descriptors; Portico leaves them",
  },
  RefusedByContour: {
    severity: 'Warning',
    doc: 'Contour reports the HTTPProxy invalid (its message follows)',
  },
  ApplyFailed: {
    severity: 'Warning',
    doc: 'the API server refused the apply for another reason (its message follows)',
  },
  AwaitingEnvoyGateway: {
    severity: 'Normal',
    doc: "Unknown: the Gateway's or the target's EnvoyPatchPolicy is being applied, or Envoy Gateway has not yet reported on its generation",
  },
  RefusedByEnvoyGateway: {
    severity: 'Warning',
    doc: "Envoy Gateway refuses the target's or the Gateway's EnvoyPatchPolicy (Accepted or Programmed False; its reason and message follow)",
  },
  NoParentGateway: {
    severity: 'Warning',
    doc: 'the HTTPRoute has no parent Gateway or ListenerSet the operator could read with an HTTP or HTTPS listener',
  },
  EnvoyGatewayAttachmentDisabled: {
    severity: 'Warning',
    doc: 'the operator runs with --envoy-gateway-attachment=false and writes no EnvoyPatchPolicy',
  },
  ContourAttachmentDisabled: {
    severity: 'Warning',
    doc: 'the operator runs with --contour-attachment=false and writes no HTTPProxy',
  },
} as const satisfies Record<string, ReasonEntry>;

export type RateLimitAttachedReason = keyof typeof RATE_LIMIT_ATTACHED_REASONS;
