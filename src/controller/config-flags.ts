/**
 * The flags of `portico controller`, each with its environment variable, default and help line
 * (`portico controller --help` prints them; config.ts reads and checks them).
 */
import { CHECK_CONFIG_FLAG, type FlagSpec } from '../command-flags.js';
import { DEFAULT_ATTACHMENT_HEADERS } from '../controllers/ratelimitpolicy/attachment.js';
import { DATA_PLANE_MODULES, DATA_PLANES } from '../data-planes/registry.js';
import { INGRESS_FLAVORS } from '../data-planes/types.js';
import { TSIG_ALGORITHMS } from '../dns/dynamic-update.js';

/**
 * Each data plane's rate-limit attachment flag, from its module's `rateLimitAttachment`
 * (`--contour-attachment`, `--envoy-gateway-attachment`): `true | false`, its own default.
 */
function attachmentFlags(): Record<`${string}-attachment`, FlagSpec> {
  return Object.fromEntries(
    DATA_PLANE_MODULES.flatMap((m) => {
      const a = m.rateLimitAttachment;
      if (a === undefined) return [];
      return [[a.flag.slice(2), { type: 'string', env: a.env, default: String(a.defaultOn), help: a.help }]];
    }),
  );
}

export const controllerOptions = {
  kubeconfig: { type: 'string', env: 'KUBECONFIG', help: 'kubeconfig path (default: in-cluster)' },
  namespace: {
    type: 'string',
    env: 'PORTICO_NAMESPACE',
    default: 'portico-system',
    help: "the operator's namespace",
  },
  'platform-cname-target': {
    type: 'string',
    env: 'PORTICO_PLATFORM_CNAME_TARGET',
    help: 'required: the CNAME target customers point to',
  },
  'apex-addresses': {
    type: 'string',
    env: 'PORTICO_APEX_ADDRESSES',
    help: "comma-separated IPs an apex's ALIAS/ANAME must resolve to (default: the CNAME target's A/AAAA)",
  },
  'reserved-domains': {
    type: 'string',
    env: 'PORTICO_RESERVED_DOMAINS',
    help: 'comma-separated platform domains no customer may claim (the CNAME target itself is always reserved)',
  },
  'allow-special-use-hostnames': {
    type: 'string',
    env: 'PORTICO_ALLOW_SPECIAL_USE_HOSTNAMES',
    default: 'false',
    help: 'true | false: let CustomDomains claim names under .test and .example (RFC 6761), for sandboxes and tests; never on a platform',
  },
  'dns-server': {
    type: 'string',
    env: 'PORTICO_DNS_SERVERS',
    help: 'comma-separated host:port resolvers (default: system)',
  },
  'dns-timeout-ms': {
    type: 'string',
    env: 'PORTICO_DNS_TIMEOUT_MS',
    default: '2000',
    help: 'per-try DNS timeout, ms',
  },
  'dns-mismatch-grace-seconds': {
    type: 'string',
    env: 'PORTICO_DNS_MISMATCH_GRACE_SECONDS',
    default: '900',
    help: 'seconds a verified domain stays verified while DNS answers that its record no longer matches (resolver failures never unverify it)',
  },
  'dangling-after-seconds': {
    type: 'string',
    env: 'PORTICO_DANGLING_AFTER_SECONDS',
    default: '604800',
    help: 'seconds a verified domain may have DNS pointing elsewhere before it is reported as a dangling record (DanglingRecord)',
  },
  'undeployed-claim-grace-seconds': {
    type: 'string',
    env: 'PORTICO_UNDEPLOYED_CLAIM_GRACE_SECONDS',
    default: '86400',
    help: "seconds a CustomDomain whose project was never deployed (never Accepted) keeps its hostname claim before a deployed project's CustomDomain of the same hostname takes it over",
  },
  'ownership-verification': {
    type: 'string',
    env: 'PORTICO_OWNERSHIP_VERIFICATION',
    default: 'recently-claimed',
    help: 'always | recently-claimed | never: when a new domain must show the TXT record _portico-challenge.<hostname>',
  },
  'ownership-recent-days': {
    type: 'string',
    env: 'PORTICO_OWNERSHIP_RECENT_DAYS',
    default: '30',
    help: 'recently-claimed: a hostname another project released within this many days needs the TXT record',
  },
  'ownership-key-secret': {
    type: 'string',
    env: 'PORTICO_OWNERSHIP_KEY_SECRET',
    default: 'portico-ownership-key',
    help: "Secret in the operator's namespace holding the key of the ownership tokens (created if missing)",
  },
  'acme-directory-url': {
    type: 'string',
    env: 'PORTICO_ACME_DIRECTORY_URL',
    help: 'required unless --acme-issuers is set: ACME directory URL',
  },
  'acme-issuers': {
    type: 'string',
    env: 'PORTICO_ACME_ISSUERS',
    help: 'YAML or JSON list of ACME issuers in order (name, directoryUrl, externalAccountBinding, profile, caBundleFile, orderBudget; docs/install.md); replaces --acme-directory-url, --acme-eab-*, --acme-profile and --acme-caa-identities',
  },
  'acme-failover-after-failures': {
    type: 'string',
    env: 'PORTICO_ACME_FAILOVER_AFTER_FAILURES',
    default: '3',
    help: 'orders an ACME issuer fails in a row (5xx, no answer, unreachable) before new orders go to the next issuer',
  },
  'acme-failover-retry-after-seconds': {
    type: 'string',
    env: 'PORTICO_ACME_FAILOVER_RETRY_AFTER_SECONDS',
    default: '600',
    help: 'a rateLimited answer whose Retry-After is at least this many seconds away sends new orders to the next issuer at once',
  },
  'acme-failover-pass-over-seconds': {
    type: 'string',
    env: 'PORTICO_ACME_FAILOVER_PASS_OVER_SECONDS',
    default: '600',
    help: 'seconds a failed-over ACME issuer is passed over before it is tried again',
  },
  'acme-email': { type: 'string', env: 'PORTICO_ACME_EMAIL', help: 'ACME account contact' },
  'acme-eab-kid': { type: 'string', env: 'PORTICO_ACME_EAB_KID', help: 'external account binding key id' },
  'acme-eab-hmac-key': {
    type: 'string',
    env: 'PORTICO_ACME_EAB_HMAC_KEY',
    help: 'external account binding HMAC key (base64url)',
  },
  'acme-request-timeout-seconds': {
    type: 'string',
    env: 'PORTICO_ACME_REQUEST_TIMEOUT_SECONDS',
    default: '30',
    help: 'seconds the ACME CA has to answer each request; past it the attempt fails and is retried on the backoff',
  },
  'acme-orders-per-window': {
    type: 'string',
    env: 'PORTICO_ACME_ORDERS_PER_WINDOW',
    default: '300',
    help: "new ACME orders the account may place per window (Let's Encrypt: 300 per 3 hours); more wait their turn",
  },
  'acme-order-window-seconds': {
    type: 'string',
    env: 'PORTICO_ACME_ORDER_WINDOW_SECONDS',
    default: '10800',
    help: 'the sliding window of --acme-orders-per-window, in seconds',
  },
  'acme-max-orders-in-flight': {
    type: 'string',
    env: 'PORTICO_ACME_MAX_ORDERS_IN_FLIGHT',
    default: '50',
    help: 'ACME orders in progress at once; more wait their turn (renewals first, tenants in turn)',
  },
  'certificate-overdue-seconds': {
    type: 'string',
    env: 'PORTICO_CERTIFICATE_OVERDUE_SECONDS',
    default: '1800',
    help: "seconds verified without a certificate before it is reported overdue (the spec's 30 minutes)",
  },
  'issuance-first-retry-seconds': {
    type: 'string',
    env: 'PORTICO_ISSUANCE_FIRST_RETRY_SECONDS',
    default: '60',
    help: 'seconds after a failed certificate order before the first retry; each further failure doubles it, up to 1 hour (docs/customdomains.md, "Schedules"); only tests set it shorter',
  },
  'acme-profile': {
    type: 'string',
    env: 'PORTICO_ACME_PROFILE',
    help: 'ACME profile to request, e.g. classic or shortlived (default: the CA chooses)',
  },
  'apps-domain': {
    type: 'string',
    env: 'PORTICO_APPS_DOMAIN',
    help: "the platform's apps domain: every Project is served at <namespace>.<apps domain> with one wildcard certificate issued by DNS-01 through --dns01-server (unset: off)",
  },
  'apps-domain-zone': {
    type: 'string',
    env: 'PORTICO_APPS_DOMAIN_ZONE',
    help: 'the zone the apps domain is in, which takes RFC 2136 updates for _acme-challenge.<apps domain> (default: the apps domain itself)',
  },
  'dns01-challenge-zone': {
    type: 'string',
    env: 'PORTICO_DNS01_CHALLENGE_ZONE',
    help: 'the platform zone DNS-01 records are written in for hostnames whose _acme-challenge is a CNAME into it (unset: off)',
  },
  'dns01-server': {
    type: 'string',
    env: 'PORTICO_DNS01_SERVER',
    help: "host:port of the challenge zone's authoritative server, which takes RFC 2136 updates over TCP",
  },
  'dns01-tsig-key-name': {
    type: 'string',
    env: 'PORTICO_DNS01_TSIG_KEY_NAME',
    help: 'name of the TSIG key the challenge zone accepts updates signed with',
  },
  'dns01-tsig-algorithm': {
    type: 'string',
    env: 'PORTICO_DNS01_TSIG_ALGORITHM',
    default: 'hmac-sha256',
    help: `TSIG algorithm: ${TSIG_ALGORITHMS.join(', ')}`,
  },
  'dns01-tsig-secret': {
    type: 'string',
    env: 'PORTICO_DNS01_TSIG_SECRET',
    help: 'the TSIG key secret, base64 (as BIND and Knot configurations hold it); from a Secret in the chart',
  },
  'acme-caa-identities': {
    type: 'string',
    env: 'PORTICO_ACME_CAA_IDENTITIES',
    help: "comma-separated CAA issuer names of the CA (default: the directory's meta.caaIdentities)",
  },
  'acme-account-secret': {
    type: 'string',
    env: 'PORTICO_ACME_ACCOUNT_SECRET',
    default: 'portico-acme-account',
    help: 'Secret holding the account key',
  },
  'http01-listen-address': {
    type: 'string',
    env: 'PORTICO_HTTP01_LISTEN_ADDRESS',
    default: '0.0.0.0:8089',
    help: 'challenge server address',
  },
  'http01-self-check-port': {
    type: 'string',
    env: 'PORTICO_HTTP01_SELF_CHECK_PORT',
    default: '80',
    help: 'port the CA validates on',
  },
  'http01-service': {
    type: 'string',
    env: 'PORTICO_HTTP01_SERVICE',
    help: 'in-cluster fqdn:port of the challenge server, routed from each Ingress',
  },
  'ingress-class': {
    type: 'string',
    env: 'PORTICO_INGRESS_CLASS',
    help: 'spec.ingressClassName of created Ingresses (and HTTPProxies, flavor contour); foreign routes of another class are not counted',
  },
  'routing-mode': {
    type: 'string',
    env: 'PORTICO_ROUTING_MODE',
    default: 'ingress',
    help: 'ingress | gateway: an Ingress per domain, or a Gateway API HTTPRoute per domain',
  },
  'ingress-flavor': {
    type: 'string',
    env: 'PORTICO_INGRESS_FLAVOR',
    default: 'nginx',
    help: `${INGRESS_FLAVORS.join(' | ')}: how an Ingress says "redirect", or (contour) an HTTPProxy per domain instead of an Ingress (ingress mode)`,
  },
  'gateway-parent-refs': {
    type: 'string',
    env: 'PORTICO_GATEWAY_PARENT_REFS',
    help: 'comma-separated [namespace/]name[:sectionName] Gateways the HTTPRoutes attach to (gateway mode)',
  },
  'gateway-https-port': {
    type: 'string',
    env: 'PORTICO_GATEWAY_HTTPS_PORT',
    default: '443',
    help: "port of each domain's HTTPS listener, attached to the Gateway with a ListenerSet (gateway mode)",
  },
  'data-plane-acknowledgement': {
    type: 'string',
    env: 'PORTICO_DATA_PLANE_ACKNOWLEDGEMENT',
    default: 'true',
    help: 'true | false: Routed waits until the ingress controller publishes an address for the Ingress, or the Gateway accepts the HTTPRoute and ListenerSet; false for a data plane that reports nothing (Routed and Ready then say the route is unconfirmed)',
  },
  'data-plane': {
    type: 'string',
    env: 'PORTICO_DATA_PLANE',
    help: `${DATA_PLANES.join(' | ')}: the data plane that takes the routes; a domain whose flavor it ignores is Routed=False, UnsupportedByDataPlane, naming the flags that work (docs/routing.md, "Data planes and flavors"); unset: not judged`,
  },
  'data-plane-name': {
    type: 'string',
    env: 'PORTICO_DATA_PLANE_NAME',
    help: 'the data plane\'s name in the Routed messages, e.g. Contour ("Contour took Ingress portico-www ..."); unset: the name of --data-plane, else "the ingress controller"',
  },
  'nginx-redirect-keeps-path': {
    type: 'string',
    env: 'PORTICO_NGINX_REDIRECT_KEEPS_PATH',
    default: 'true',
    help: 'true | false: append $request_uri to ingress-nginx redirects (see docs/routing.md)',
  },
  'traefik-safe-naming': {
    type: 'string',
    env: 'PORTICO_TRAEFIK_SAFE_NAMING',
    default: 'false',
    help: "true | false: Traefik's providers.kubernetesCRD.safeNaming is on",
  },
  'serving-check-address': {
    type: 'string',
    env: 'PORTICO_SERVING_CHECK_ADDRESS',
    help: "the ingress controller's in-cluster HTTPS host:port (e.g. ingress-nginx-controller.ingress-nginx.svc:443): Ready waits until it serves the issued certificate and routes the hostname (default: unset, no serving check)",
  },
  'serving-check-interval-seconds': {
    type: 'string',
    env: 'PORTICO_SERVING_CHECK_INTERVAL_SECONDS',
    default: '600',
    help: 'seconds between serving checks of a serving domain (a new certificate is checked at once; a failing check is retried after 5 s, doubling up to this)',
  },
  'serving-check-timeout-ms': {
    type: 'string',
    env: 'PORTICO_SERVING_CHECK_TIMEOUT_MS',
    default: '5000',
    help: 'ms each connection and request of a serving check may take',
  },
  'serving-check-propagation-seconds': {
    type: 'string',
    env: 'PORTICO_SERVING_CHECK_PROPAGATION_SECONDS',
    default: '30',
    help: "seconds after the first check of a certificate not yet seen served during which the data plane's default certificate or backend is AwaitingServing (it is loading what it took), not a Warning; 0: none",
  },
  'serving-check-project-header': {
    type: 'string',
    env: 'PORTICO_SERVING_CHECK_PROJECT_HEADER',
    help: "name[=value]: a header the platform's backends add to every answer; an answer without it is not the project's",
  },
  ...attachmentFlags(),
  'cluster-domain': {
    type: 'string',
    env: 'PORTICO_CLUSTER_DOMAIN',
    default: 'cluster.local',
    help: "the cluster's DNS domain: Envoy Gateway's Envoy reaches the rate-limit Service at <name>.<namespace>.svc.<domain>",
  },
  'ratelimit-extension-service': {
    type: 'string',
    env: 'PORTICO_RATELIMIT_EXTENSION_SERVICE',
    default: 'portico-ratelimit',
    help: "the ExtensionService Contour's rateLimitService.extensionService names: name (in --namespace) or namespace/name",
  },
  'ratelimit-service': {
    type: 'string',
    env: 'PORTICO_RATELIMIT_SERVICE',
    default: 'portico-ratelimit:8081',
    help: "name:port of the rate-limit server's Service (gRPC), in the ExtensionService's namespace",
  },
  'ratelimit-gateway-timeout-ms': {
    type: 'string',
    env: 'PORTICO_RATELIMIT_GATEWAY_TIMEOUT_MS',
    default: '1000',
    help: "ms Envoy waits for the rate-limit service (the ExtensionService's timeoutPolicy.response); above the server's --redis-timeout-ms so its failure mode answers first",
  },
  'ratelimit-key-id-header': {
    type: 'string',
    env: 'PORTICO_RATELIMIT_KEY_ID_HEADER',
    default: DEFAULT_ATTACHMENT_HEADERS.keyId,
    help: "request header the gateway's auth layer puts the API key id in (descriptor entry key_id)",
  },
  'ratelimit-plan-header': {
    type: 'string',
    env: 'PORTICO_RATELIMIT_PLAN_HEADER',
    default: DEFAULT_ATTACHMENT_HEADERS.plan,
    help: "request header the gateway's auth layer puts the key's plan in (descriptor entry plan)",
  },
  'metrics-listen-address': {
    type: 'string',
    env: 'PORTICO_METRICS_LISTEN_ADDRESS',
    default: '0.0.0.0:8080',
    help: '/metrics, /healthz, /readyz',
  },
  workers: { type: 'string', env: 'PORTICO_WORKERS', default: '4', help: 'parallel reconciles' },
  'resync-seconds': {
    type: 'string',
    env: 'PORTICO_RESYNC_SECONDS',
    default: '600',
    help: 'full resync period; also the longest wait between two looks at the apps domain wildcard Secret',
  },
  'memory-reduction-growth-mib': {
    type: 'string',
    env: 'PORTICO_MEMORY_REDUCTION_GROWTH_MIB',
    default: '48',
    help: 'RSS growth (MiB) after which V8 is asked to give back unused heap; 0 = never',
  },
  'memory-target-mib': {
    type: 'string',
    env: 'PORTICO_MEMORY_TARGET_MIB',
    default: '0',
    help: 'RSS (MiB) to stay under: at it V8 is asked to give back unused heap, at most every 2 s, and new work waits in between (every 10 s, backing off, while that cannot bring it under); 0 = none',
  },
  'log-level': {
    type: 'string',
    env: 'PORTICO_LOG_LEVEL',
    default: 'info',
    help: 'trace|debug|info|warn|error',
  },
  'leader-elect': {
    type: 'string',
    env: 'PORTICO_LEADER_ELECT',
    default: 'true',
    help: 'true|false: elect one active replica with a Lease named portico-controller',
  },
  'leader-election-namespace': {
    type: 'string',
    env: 'PORTICO_LEADER_ELECTION_NAMESPACE',
    help: "namespace of the Lease (default: the operator's namespace)",
  },
  'leader-election-lease-duration-seconds': {
    type: 'string',
    env: 'PORTICO_LEADER_ELECTION_LEASE_DURATION_SECONDS',
    default: '15',
    help: 'how long a Lease is valid after its last renewal',
  },
  'leader-election-renew-deadline-seconds': {
    type: 'string',
    env: 'PORTICO_LEADER_ELECTION_RENEW_DEADLINE_SECONDS',
    default: '10',
    help: 'how long the leader keeps trying to renew before it steps down',
  },
  'leader-election-retry-period-seconds': {
    type: 'string',
    env: 'PORTICO_LEADER_ELECTION_RETRY_PERIOD_SECONDS',
    default: '2',
    help: 'seconds between attempts to acquire or renew',
  },
  'check-config': CHECK_CONFIG_FLAG,
  help: { type: 'boolean', env: '', help: 'show this help' },
} as const satisfies Record<string, FlagSpec>;

/** The name of one of `portico controller`'s flags, without the leading `--`. */
export type OptionName = keyof typeof controllerOptions;
