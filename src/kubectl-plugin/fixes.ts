/**
 * What to do about each CustomDomain reason: the fix `kubectl portico explain` prints. Each text is
 * also the "fix" cell of its row in docs/troubleshooting.md's reason index, word for word
 * (fixes.test.ts checks both ways), so the plugin and the doc never disagree.
 *
 * Placeholders `<namespace>`, `<name>` and `<hostname>` are filled in by `fillPlaceholders` with the
 * domain explained, so a command in a fix can be copied as it is printed.
 */

/** The fix for each reason of `src/api/reasons.ts` (a reason without one gets `UNKNOWN_REASON_FIX`). */
export const REASON_FIXES: Readonly<Record<string, string>> = {
  // Accepted
  Accepted: 'Nothing to do.',
  InvalidHostname:
    'Write the hostname with valid A-labels (an IDN converted by a UTS #46 tool such as `idn2`). `spec.hostname` cannot be changed: delete this domain (`kubectl delete customdomain -n <namespace> <name>`) and create one with the right hostname.',
  PlanNotEligible:
    "Upgrade the project to Pro or above: the platform's tenant provisioning sets the namespace label `portico.dev/plan` (`kubectl get namespace <namespace> --show-labels`; missing means free). The domain is accepted as soon as the label changes.",
  NotDeployed:
    'Deploy the project: the Service in `spec.service` needs one ready endpoint (`kubectl get endpointslices -n <namespace>`). The domain is accepted as soon as one is ready.',
  HostnameNotPublic:
    'The hostname is not a public name (cluster-internal, local, special-use, or not under an ICANN public suffix): use a hostname under a domain the customer registered, in a new CustomDomain, and delete this one.',
  HostnameDisallowedCharacter:
    'An internationalized label has a character IDNA2008 does not allow (an emoji or other symbol): use a hostname of letters, digits and hyphens, in a new CustomDomain, and delete this one.',
  ReservedHostname:
    "The hostname is one of the platform's own domains (`--reserved-domains`, or the CNAME target): use the customer's own hostname in a new CustomDomain and delete this one.",
  HostnameAlreadyClaimed:
    "Another project holds the hostname; a cluster admin sees which with `kubectl get hostnameclaim <hostname>`. It moves only after that project's CustomDomain is deleted; this domain then takes it at once and must show the ownership TXT record. A holder whose project was never deployed gives it up to a deployed project after `--undeployed-claim-grace-seconds` (the message gives the time).",
  HostnameClaimYielded:
    "This domain held the hostname, but its project had no successful deploy within `--undeployed-claim-grace-seconds` of its creation, and a deployed project took the hostname over. Deploy the project; the hostname comes back only once the other project's CustomDomain is deleted (a cluster admin sees which with `kubectl get hostnameclaim <hostname>`), then this domain takes it at once and must show the ownership TXT record.",
  // DNSVerified
  RecordMatches: 'Nothing to do.',
  RecordNotFound:
    "Create the record `status.dnsRecords` lists (`kubectl portico status <name> -n <namespace>` shows it) at the customer's DNS provider, under the name its `relativeName` gives in the zone `zone` (`@` is the apex), then press Re-verify: `kubectl portico verify <name> -n <namespace>`. Propagation can take up to 48 hours; Portico keeps checking on its own.",
  ConflictingRecord:
    'Delete the record the message names (an A/AAAA or other record where the CNAME should be, or a stray A/AAAA beside an apex ALIAS) and keep only the record in `status.dnsRecords`, then `kubectl portico verify <name> -n <namespace>`.',
  CNAMEMismatch:
    'Change the CNAME so that its value is exactly the one in `status.dnsRecords` (the platform target, no other host), then `kubectl portico verify <name> -n <namespace>`.',
  AddressMismatch:
    'Point the apex ALIAS/ANAME at the platform target in `status.dnsRecords` (or, at a provider without ALIAS/ANAME, create the A/AAAA records listed as its `alternatives`) and remove A/AAAA records set by hand to other addresses, then `kubectl portico verify <name> -n <namespace>`.',
  DNSServerFailure:
    "The customer's name servers answer SERVFAIL (often a broken DNSSEC chain or a lame delegation): check with `dig <hostname>` and have the DNS provider fix it. Portico asks again every 15 s.",
  DNSTimeout:
    "The customer's name servers do not answer in time: check the delegation with `dig +trace <hostname>`, and the operator's way to its resolvers (`--dns-server`). Portico asks again every 15 s.",
  DNSError:
    "The message has the resolver's error: check the operator's resolvers (`--dns-server`) and its egress to them. Portico asks again every 15 s.",
  TargetUnresolvable:
    "A platform problem, not the customer's: the platform CNAME target (`--platform-cname-target`) has no A/AAAA records. Fix the platform's DNS; every domain waits for it.",
  OwnershipNotVerified:
    'Publish the TXT record `_portico-challenge.<hostname>` with the exact value `status.dnsRecords` lists, then `kubectl portico verify <name> -n <namespace>`. Once found it may be removed again.',
  DanglingRecord:
    'Ask the customer: restore the record in `status.dnsRecords` (the report clears at the next check), or release the hostname by deleting the domain: `kubectl delete customdomain -n <namespace> <name>`.',
  NotAccepted: 'See the Accepted condition: DNS is not checked, and nothing is routed, before it is True.',
  // CertificateReady
  Issued: 'Nothing to do.',
  Renewing: 'Nothing to do: the current certificate serves until the new one replaces it.',
  RenewalFailed:
    'The current certificate serves until its notAfter. Fix the cause in parentheses in the message (see that reason), then `kubectl portico verify <name> -n <namespace>` to try again at once; otherwise the next attempt is at the time the message gives.',
  RenewalQueued:
    'Nothing to do: the renewal waits its turn in the CA budget; the message says when it comes.',
  RenewalAwaitsVerification:
    'Get DNS verified again (see the DNSVerified reason and its fix); the renewal is ordered as soon as it is. The certificate expires at `status.certificate.notAfter`.',
  AwaitingDNSVerification: 'See the DNSVerified condition: the order starts right after verification.',
  Pending: 'Nothing to do: the order starts now.',
  Issuing:
    'Wait: an order usually completes within minutes. Still no certificate 30 minutes after verification turns into CertificateOverdue.',
  Reissuing:
    'Nothing to do: a new certificate is being ordered. Do not edit the Secret `<name>-tls` by hand: Portico writes it.',
  IssuedCertificateUnusable:
    "Nothing to do for the domain: the CA's certificate was not stored and the Secret keeps the one it holds; the next attempt follows the backoff. If it repeats, the CA (or what stands between it and the operator) returns certificates that cannot serve: the message says what was wrong (a platform fix).",
  CAAForbidsIssuance:
    'Add the CAA record the message names (e.g. `0 issue "letsencrypt.org"`) at the name that holds the CAA records, or remove the records that exclude the platform\'s CA; for a subdomain that is a CNAME, that may be the platform target\'s CAA (a platform fix). Then `kubectl portico verify <name> -n <namespace>`.',
  CAALookupFailed:
    "The customer's name servers failed the CAA query (check with `dig CAA <hostname>`), and a CA must not issue then. Fix their DNS, then `kubectl portico verify <name> -n <namespace>`.",
  IssuanceFailed:
    "Read the CA's words in the message (e.g. the challenge at `/.well-known/acme-challenge/` not reaching the platform, an unknown ACME profile, the CA down). Fix the cause, then `kubectl portico verify <name> -n <namespace>` for an attempt now; otherwise the next attempt follows the backoff (1, 2, 4 … 60 minutes).",
  CARateLimited:
    'Wait: nothing is sent to the CA for this name before the Retry-After the message gives. If it repeats, the order budget (chart values `acme.orderBudget.*`) is above what the CA allows the account: lower it.',
  ExternalAccountBindingFailed:
    "Check the issuer the message names: its `externalAccountBinding.keyId` and the HMAC key in the Secret `hmacKeySecretRef` names (in the operator's namespace) must be the pair the CA gave (base64url, as given). Fix the Secret or the key id; the account registers again within a minute, and the next attempt follows the backoff (or `kubectl portico verify <name> -n <namespace>` at once). With several issuers, new orders go to the next issuer meanwhile.",
  ChallengeZoneRefused:
    "A platform fix: the message quotes the server's RCODE and TSIG error. BADKEY, BADSIG or NOTAUTH: the operator's `dns01.tsigKey` (name, algorithm, the secret in the Secret) must be the key the zone's server holds; REFUSED: the server's update policy must let that key write TXT records in the zone. The next attempt follows the backoff (or `kubectl portico verify <name> -n <namespace>` at once); a verified domain answers HTTP-01 meanwhile.",
  ChallengeZoneUnreachable:
    "A platform fix: `dns01.server` must be the challenge zone's authoritative server, reachable from the operator over TCP (port 53 by default). The next attempt follows the backoff; a verified domain answers HTTP-01 meanwhile.",
  ChallengeDelegationMismatch:
    'Point `_acme-challenge.<hostname>` at the target the optional record in `status.dnsRecords` gives (the message names both), or remove it and let the certificate be issued by HTTP-01 once DNS is verified.',
  OrderQueued:
    "Nothing to do: the order waits for the ACME account's budget; the message gives its place in line and the expected time.",
  CertificateOverdue:
    'Find the cause in the message (CAA, the challenge not routed to the platform, the CA rate-limiting), fix it, then `kubectl portico verify <name> -n <namespace>` for a fresh attempt.',
  // Routed
  RoutesReady: 'Nothing to do.',
  NoBackend: 'Set `spec.service` (or `spec.redirect`) on the CustomDomain.',
  ServicePortNotFound:
    'Give the Service in `spec.service` the port `spec.service.port` names, or set `spec.service.port` to one of the ports the message lists (`kubectl get service -n <namespace>`).',
  NameInUse:
    "An object at Portico's name for this domain (Ingress `portico-<name>`, Secret `<name>-tls`) carries another CustomDomain's `portico.dev/customdomain` label: remove that object or correct its label.",
  RedirectToSelf:
    "Set `spec.redirect.to` to the domain visitors should go to, normally the project's primary domain (the CRD refuses a redirect to itself; only an object stored before that rule can hold one): `kubectl edit customdomain -n <namespace> <name>`.",
  RedirectTargetReserved:
    "Set `spec.redirect.to` to a domain of this project that serves, normally its primary domain (`kubectl portico status <name> -n <namespace>`): the target is one of the platform's reserved domains (`--reserved-domains`, or under one), which no CustomDomain can be attached to, so the redirect would never be routed.",
  RedirectTargetNotFound:
    "Create the target as a CustomDomain of this project with `spec.service`, or set `spec.redirect.to` to a hostname of this project's domains (`kubectl get customdomain -n <namespace>`; the message lists those that serve).",
  RedirectTargetOtherProject:
    "A redirect goes only to a domain of the same project: set `spec.redirect.to` to one of this project's domains (`kubectl get customdomain -n <namespace>`). To send visitors to another project, that project must serve the hostname itself.",
  RedirectTargetNotServing:
    'Nothing to do if the target is on its way: the redirect is routed once the target is Ready (`kubectl portico status <target> -n <namespace>` shows what holds it back). If the target is being deleted, set `spec.redirect.to` to another domain of this project.',
  RedirectChain:
    'Set `spec.redirect.to` to the domain the target redirects to when it serves (the message names it), so that visitors get one redirect, not two.',
  RedirectLoop:
    "Make one of the two domains serve the project (`spec.service` instead of `spec.redirect`), or point both at the project's primary domain.",
  AwaitingDataPlane:
    'Usually nothing: an ingress controller or gateway reports within seconds. If it stays, the message names what is not reported: the controller of the Ingress class must run and publish its address (ingress-nginx: `--publish-service`), or the Gateway must accept the HTTPRoute and the ListenerSet (`kubectl get httproute,listenerset -n <namespace> portico-<name> -o yaml`). For a data plane that never reports, the platform sets `--data-plane-acknowledgement=false` (docs/routing.md).',
  ListenerSetUnsupported:
    "A platform fix: install the Gateway API CRDs v1.5 or later (standard channel) so that the API server serves ListenerSet, then restart the operator; the Gateway must allow ListenerSets from the projects' namespaces (`spec.allowedListeners`, docs/routing.md).",
  HTTPProxyUnsupported:
    "A platform fix: install Contour's CRDs (`examples/contour/01-crds.yaml` of the Contour release) so that the API server serves HTTPProxy (projectcontour.io/v1), then restart the operator; or start it with another `--ingress-flavor` (docs/routing.md).",
  UnsupportedByDataPlane:
    'A platform fix: start the operator with the flags the message names (for Contour `--ingress-flavor contour`, for Traefik `--ingress-flavor traefik`, for Envoy Gateway `--routing-mode gateway`; docs/routing.md, "Data planes and flavors"). The domain is routed at the next reconcile after the restart.',
  // Conflicted
  ForeignRoute:
    "The message names each object as `Kind namespace/name`. Find who made it (`kubectl get ingress -n <its namespace> <its name> -o yaml --show-managed-fields`: the field managers) and delete it or remove `<hostname>` from its hosts: the hostname is this project's (its HostnameClaim). Ready returns as soon as it is gone (the operator watches these kinds).",
  NoForeignRoute: 'Nothing to do.',
  // Ready
  Live: "Nothing to do. Without the serving check, Ready rests on the certificate and the data plane's acknowledgement, and no request was made (`--serving-check-address` turns the check on); with it, the message says what the check saw.",
  CertificateNotServed:
    "The message names the certificate served. The ingress controller's default certificate: it has not loaded the Secret `<name>-tls` yet, or does not serve the Ingress `portico-<name>` (its class, the controller's logs); the certificate the renewal replaced: wait, the check repeats within seconds; another certificate: another Ingress or listener claims the hostname, or `--serving-check-address` is not the ingress controller that serves the domain.",
  ProjectNotReached:
    "The request for the hostname got the same answer as the data plane's default backend (or lacks `--serving-check-project-header`): the ingress controller does not route the hostname. Check that it took the Ingress `portico-<name>` or the HTTPRoute (`kubectl get ingress,httproute -n <namespace> portico-<name> -o yaml`, the controller's logs) and that the Service's pods answer. Or, after a change of the domain's spec, it still got the earlier route's answer (a redirect domain not answering its redirect, a former redirect still redirecting): the data plane has not loaded the change; the check repeats.",
  DataPlaneUnreachable:
    "A platform fix: the operator cannot reach `--serving-check-address` (the message has the error). Check that the address is the ingress controller's in-cluster HTTPS Service and port, that the controller runs, and that the operator's NetworkPolicy allows egress to it (chart: `routing.servingCheck`). A domain that served keeps Ready for 5 minutes meanwhile; the check is retried.",
  AwaitingServing:
    "Usually nothing: the data plane took the route and is loading the Secret and route (Traefik took about 5 s here); the check repeats every second meanwhile. If it persists past `--serving-check-propagation-seconds` (default 30), Ready's reason becomes the check's Warning (`CertificateNotServed` or `ProjectNotReached`), whose fix applies.",
  ServingCheckPending:
    'Nothing to do: the check runs within seconds, once one of the checks running ends. If it stays, the data plane is slow to answer (each check waits up to four times `--serving-check-timeout-ms`).',
  // Events
  Removed: 'Nothing to do.',
  CertificateRestored:
    'Nothing to do for the domain: its last good certificate serves again. Find who or what wrote the Secret `<name>-tls` (its managedFields name the writer): Portico writes it, and every change it cannot serve is undone.',
  HostnameClaimReplaced:
    "Nothing to do for the domain. A HostnameClaim that did not count was replaced; the operator's log names the old holder. Claims are the operator's: find who wrote one by hand.",
  HostnameClaimTakenOver:
    "Nothing to do. The hostname's former holder was never deployed within `--undeployed-claim-grace-seconds`; this deployed domain took its claim. Under `--ownership-verification recently-claimed` it must show the ownership TXT record first (the takeover counts as a release by the other project).",
};

/** What `explain` prints for a reason the catalogue does not know (an operator newer than the plugin). */
export const UNKNOWN_REASON_FIX =
  "This reason is not in this plugin's catalogue (is the operator newer?): read the condition's message, and docs/troubleshooting.md.";

/**
 * `fix` with `<namespace>`, `<name>` and `<hostname>` replaced by the domain's own values. Pure.
 */
export function fillPlaceholders(
  fix: string,
  domain: { namespace: string; name: string; hostname: string },
): string {
  return fix
    .replaceAll('<namespace>', domain.namespace)
    .replaceAll('<name>', domain.name)
    .replaceAll('<hostname>', domain.hostname);
}
