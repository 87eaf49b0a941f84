/**
 * Configuration of `portico controller`, from flags with environment fallbacks
 * (`--platform-cname-target` or `PORTICO_PLATFORM_CNAME_TARGET`, and so on). Parsed with node:util's
 * parseArgs; every value is checked here so a bad setting stops the process at start with a clear
 * message instead of failing later.
 */
import { isIP } from 'node:net';
import type { LevelWithSilent } from 'pino';
import { flagUsage, readFlags, type FlagSpec } from '../command-flags.js';
import {
  IssuerConfigError,
  parseIssuers,
  singleIssuer,
  type AcmeIssuerSettings,
} from '../acme/issuer-config.js';
import type { FailoverPolicy } from '../acme/issuer-selection.js';
import { DEFAULT_ATTACHMENT_HEADERS } from '../controllers/ratelimitpolicy/attachment.js';
import type { ContourAttachmentOptions } from '../controllers/ratelimitpolicy/contour-attacher.js';
import type { RateLimitServiceTarget } from '../routing/envoy-gateway-ratelimit.js';
import { OWNERSHIP_POLICIES, type OwnershipPolicy } from '../dns/ownership.js';
import {
  checkRoutingOptions,
  parseGatewayParentRefs,
  type IngressFlavor,
  type RoutingMode,
  type RoutingOptions,
} from '../routing/options.js';
import { parseDataPlaneAddress } from '../serving/serving-check.js';
import type { ProjectHeader } from '../serving/verdict.js';

export interface ControllerConfig {
  kubeconfig: string | undefined;
  /** The operator's own namespace: the ACME account Secret lives here. */
  namespace: string;
  /** {platform_cname_target} of the spec (§2): the value every customer CNAME must equal. */
  platformCnameTarget: string;
  /** IPv4/IPv6 addresses an apex's A/AAAA records must equal; [] means the CNAME target's addresses. */
  apexAddresses: string[];
  /** The platform's own domains: no CustomDomain may claim them or a name under them. */
  reservedDomains: string[];
  /**
   * `--allow-special-use-hostnames`: names under `test` and `example` (RFC 6761) may be claimed
   * (domain/claimable.ts); false on a platform.
   */
  allowSpecialUseHostnames: boolean;
  /** `host:port` DNS servers for verification; [] means the system's. */
  dnsServers: string[];
  dnsTimeoutMs: number;
  /**
   * Milliseconds a verified domain stays verified while DNS answers definitely that its record no
   * longer matches (dns-outcome.ts); resolver failures never unverify it.
   */
  dnsMismatchGraceMs: number;
  /**
   * Milliseconds a domain that was verified may have DNS pointing elsewhere before it is reported
   * as a dangling record (DNSVerified reason DanglingRecord).
   */
  danglingAfterMs: number;
  /** Ownership verification by TXT record (src/dns/ownership.ts, docs/customdomains.md). */
  ownershipVerification: {
    policy: OwnershipPolicy;
    /** `recently-claimed`: how recent a release by another project requires it, milliseconds. */
    recentMs: number;
    /** The Secret, in the operator's namespace, that holds the token key. */
    keySecretName: string;
  };
  /** The first ACME issuer's directory URL (for the log). */
  acmeDirectoryUrl: string;
  /**
   * The ACME issuers, in order (src/acme/issuer-config.ts): `--acme-issuers`, else one issuer named
   * `default` from the single-issuer flags.
   */
  acmeIssuers: AcmeIssuerSettings[];
  /** When an issuer is passed over for the next (src/acme/issuer-selection.ts). */
  acmeFailover: FailoverPolicy;
  acmeEmail: string | undefined;
  acmeEab: { kid: string; hmacKey: string } | undefined;
  acmeAccountSecretName: string;
  /** Milliseconds the ACME CA has to answer each request before the attempt fails. */
  acmeRequestTimeoutMs: number;
  /** Milliseconds verified without a certificate before CertificateReady reports it overdue. */
  certificateOverdueMs: number;
  /**
   * The ACME account's budget (src/acme/order-budget.ts): new orders per sliding window, the
   * window in milliseconds, and orders in flight at once. Defaults: Let's Encrypt's 300 per 3 hours;
   * 50 in flight.
   */
  acmeOrderBudget: { orders: number; windowMs: number; maxInFlight: number };
  /** ACME profile to request; undefined lets the CA choose. */
  acmeProfile: string | undefined;
  /** CAA issuer domain names of the CA; [] means the directory's `meta.caaIdentities`. */
  acmeCaaIdentities: string[];
  /** `host:port` the HTTP-01 challenge server listens on. */
  http01ListenAddress: string;
  /** The port the CA connects to for HTTP-01, used by the self-check. */
  http01SelfCheckPort: number;
  /** In-cluster address of the challenge server, for the Ingress challenge path; undefined in the sandbox. */
  http01Service: { fqdn: string; port: number } | undefined;
  ingressClassName: string | undefined;
  /** How domains are routed (docs/routing.md). */
  routing: Pick<
    RoutingOptions,
    | 'mode'
    | 'ingressFlavor'
    | 'gatewayParentRefs'
    | 'gatewayHttpsPort'
    | 'nginxRedirectKeepsPath'
    | 'traefikSafeNaming'
    | 'dataPlaneAcknowledgement'
    | 'dataPlaneName'
  >;
  /**
   * The serving check (src/serving/, docs/routing.md "Serving check"): Ready only once the data
   * plane at `address` (the ingress controller's in-cluster HTTPS `host:port`) serves the issued
   * certificate and routes the hostname. Undefined when --serving-check-address is unset (off).
   */
  servingCheck:
    | {
        address: string;
        /** Milliseconds between checks of a serving domain, and the longest retry delay. */
        intervalMs: number;
        /** Milliseconds for each connection and each request of a check. */
        timeoutMs: number;
        projectHeader?: ProjectHeader;
      }
    | undefined;
  /**
   * Attaching RateLimitPolicy `spec.targetRefs` to Contour's HTTPProxies and writing the
   * ExtensionService Contour's `rateLimitService` names (docs/ratelimits.md, "Attaching to Contour");
   * undefined when `--contour-attachment=false`.
   */
  contourAttachment: ContourAttachmentOptions | undefined;
  /**
   * Attaching RateLimitPolicy HTTPRoute `spec.targetRefs` through one EnvoyPatchPolicy per Gateway
   * (docs/routing.md, "Envoy Gateway"): where Envoy finds the rate-limit service (`--ratelimit-service`
   * in the ExtensionService's namespace, `--cluster-domain`); undefined when
   * `--envoy-gateway-attachment=false` (the default).
   */
  envoyGatewayAttachment: RateLimitServiceTarget | undefined;
  metricsListenAddress: string;
  /** Workers reconciling in parallel. */
  workers: number;
  /** Milliseconds between full resyncs. */
  resyncMs: number;
  /**
   * Growth of the resident set size, bytes, that asks V8 for a footprint-reducing collection
   * (memory-reducer.ts); 0 turns the reducer off.
   */
  memoryReductionGrowthBytes: number;
  /**
   * Resident set size, bytes, the operator keeps under with footprint-reducing collections (a soft
   * limit, memory-reducer.ts); 0 for none.
   */
  memoryTargetBytes: number;
  logLevel: LevelWithSilent;
  /** Lease-based leader election; undefined when disabled (a single replica). Seconds. */
  leaderElection:
    | {
        namespace: string;
        leaseDurationSeconds: number;
        renewDeadlineSeconds: number;
        retryPeriodSeconds: number;
      }
    | undefined;
}

/** Thrown for a missing or malformed setting; the message names the flag and its variable. */
export class ConfigError extends Error {
  readonly code = 'CONFIG_ERROR';
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

const options = {
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
  'acme-profile': {
    type: 'string',
    env: 'PORTICO_ACME_PROFILE',
    help: 'ACME profile to request, e.g. classic or shortlived (default: the CA chooses)',
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
    help: 'nginx | traefik | contour: how an Ingress says "redirect", or (contour) an HTTPProxy per domain instead of an Ingress (ingress mode)',
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
  'data-plane-name': {
    type: 'string',
    env: 'PORTICO_DATA_PLANE_NAME',
    help: 'the data plane\'s name in the Routed messages, e.g. Contour ("Contour took Ingress portico-www ..."); unset: "the ingress controller"',
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
  'serving-check-project-header': {
    type: 'string',
    env: 'PORTICO_SERVING_CHECK_PROJECT_HEADER',
    help: "name[=value]: a header the platform's backends add to every answer; an answer without it is not the project's",
  },
  'contour-attachment': {
    type: 'string',
    env: 'PORTICO_CONTOUR_ATTACHMENT',
    default: 'true',
    help: "true | false: wire RateLimitPolicy targetRefs into Contour's HTTPProxies and write the rate-limit ExtensionService",
  },
  'envoy-gateway-attachment': {
    type: 'string',
    env: 'PORTICO_ENVOY_GATEWAY_ATTACHMENT',
    default: 'false',
    help: 'true | false: wire RateLimitPolicy targetRefs of kind HTTPRoute into Envoy Gateway with one EnvoyPatchPolicy per Gateway (needs extensionApis.enableEnvoyPatchPolicy and XDSNameSchemeV2)',
  },
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
    help: 'full resync period',
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
  help: { type: 'boolean', env: '', help: 'show this help' },
} as const satisfies Record<string, FlagSpec>;

type OptionName = keyof typeof options;

/** The flag reference printed by `portico controller --help`. */
export function controllerUsage(): string {
  return flagUsage('portico controller', options);
}

function positiveInt(name: OptionName, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n <= 0)
    throw new ConfigError(`--${name} must be a positive integer, got "${value}"`);
  return n;
}

function nonNegativeInt(name: OptionName, value: string): number {
  const n = Number(value);
  if (!Number.isInteger(n) || n < 0)
    throw new ConfigError(`--${name} must be a whole number, 0 or more, got "${value}"`);
  return n;
}

function hostPort(name: OptionName, value: string): { fqdn: string; port: number } {
  const at = value.lastIndexOf(':');
  if (at <= 0) throw new ConfigError(`--${name} must be host:port, got "${value}"`);
  return { fqdn: value.slice(0, at), port: positiveInt(name, value.slice(at + 1)) };
}

function bool(name: OptionName, value: string): boolean {
  if (value !== 'true' && value !== 'false')
    throw new ConfigError(`--${name} must be true or false, got "${value}"`);
  return value === 'true';
}

function routingSettings(
  get: (name: OptionName) => string | undefined,
  required: (name: OptionName) => string,
): ControllerConfig['routing'] {
  const refs = get('gateway-parent-refs');
  const routing: ControllerConfig['routing'] = {
    mode: required('routing-mode') as RoutingMode,
    ingressFlavor: required('ingress-flavor') as IngressFlavor,
    nginxRedirectKeepsPath: bool('nginx-redirect-keeps-path', required('nginx-redirect-keeps-path')),
    traefikSafeNaming: bool('traefik-safe-naming', required('traefik-safe-naming')),
    gatewayHttpsPort: positiveInt('gateway-https-port', required('gateway-https-port')),
    dataPlaneAcknowledgement: bool('data-plane-acknowledgement', required('data-plane-acknowledgement')),
  };
  const dataPlaneName = get('data-plane-name');
  if (dataPlaneName !== undefined && dataPlaneName !== '') routing.dataPlaneName = dataPlaneName;
  try {
    if (refs) routing.gatewayParentRefs = parseGatewayParentRefs(refs);
    checkRoutingOptions(routing);
  } catch (err) {
    throw new ConfigError((err as Error).message);
  }
  return routing;
}

function leaderElection(
  get: (name: OptionName) => string | undefined,
  required: (name: OptionName) => string,
): ControllerConfig['leaderElection'] {
  const enabled = required('leader-elect');
  if (enabled !== 'true' && enabled !== 'false')
    throw new ConfigError(`--leader-elect must be true or false, got "${enabled}"`);
  if (enabled === 'false') return undefined;
  const le = {
    namespace: get('leader-election-namespace') ?? required('namespace'),
    leaseDurationSeconds: positiveInt(
      'leader-election-lease-duration-seconds',
      required('leader-election-lease-duration-seconds'),
    ),
    renewDeadlineSeconds: positiveInt(
      'leader-election-renew-deadline-seconds',
      required('leader-election-renew-deadline-seconds'),
    ),
    retryPeriodSeconds: positiveInt(
      'leader-election-retry-period-seconds',
      required('leader-election-retry-period-seconds'),
    ),
  };
  if (!(
    le.retryPeriodSeconds < le.renewDeadlineSeconds && le.renewDeadlineSeconds < le.leaseDurationSeconds
  )) {
    throw new ConfigError('leader election needs retry period < renew deadline < lease duration');
  }
  return le;
}

function ownershipSettings(
  required: (name: OptionName) => string,
): ControllerConfig['ownershipVerification'] {
  const policy = required('ownership-verification');
  if (!(OWNERSHIP_POLICIES as readonly string[]).includes(policy))
    throw new ConfigError(
      `--ownership-verification must be one of ${OWNERSHIP_POLICIES.join(', ')}, got "${policy}"`,
    );
  return {
    policy: policy as OwnershipPolicy,
    recentMs: positiveInt('ownership-recent-days', required('ownership-recent-days')) * 86_400_000,
    keySecretName: required('ownership-key-secret'),
  };
}

/** A request header name (RFC 9110 §5.1 token), lowercased as Envoy compares them. */
function headerName(name: OptionName, value: string): string {
  if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(value))
    throw new ConfigError(`--${name} must be a header name such as x-api-key-id, got "${value}"`);
  return value.toLowerCase();
}

/** The Contour attachment settings; undefined when --contour-attachment=false. */
function contourAttachmentSettings(
  required: (name: OptionName) => string,
): ControllerConfig['contourAttachment'] {
  if (!bool('contour-attachment', required('contour-attachment'))) return undefined;
  return rateLimitWiring(required);
}

/** The Envoy Gateway attachment settings; undefined when --envoy-gateway-attachment=false. */
function envoyGatewayAttachmentSettings(
  required: (name: OptionName) => string,
): ControllerConfig['envoyGatewayAttachment'] {
  if (!bool('envoy-gateway-attachment', required('envoy-gateway-attachment'))) return undefined;
  const wiring = rateLimitWiring(required);
  const clusterDomain = required('cluster-domain');
  if (!/^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/.test(clusterDomain))
    throw new ConfigError(
      `--cluster-domain must be a DNS domain such as cluster.local, got "${clusterDomain}"`,
    );
  return {
    serviceName: wiring.extensionService.serviceName,
    serviceNamespace: wiring.extensionService.namespace,
    servicePort: wiring.extensionService.servicePort,
    clusterDomain,
    timeoutMs: wiring.extensionService.timeoutMs,
    headers: wiring.headers,
  };
}

/** The rate-limit service and headers both attachments wire (the `--ratelimit-*` flags). */
function rateLimitWiring(required: (name: OptionName) => string): ContourAttachmentOptions {
  const namespace = required('namespace');
  const ext = required('ratelimit-extension-service');
  const slash = ext.indexOf('/');
  const service = required('ratelimit-service');
  const colon = service.lastIndexOf(':');
  if (colon <= 0)
    throw new ConfigError(
      `--ratelimit-service must be name:port, e.g. portico-ratelimit:8081, got "${service}"`,
    );
  const servicePort = positiveInt('ratelimit-service', service.slice(colon + 1));
  if (servicePort > 65535)
    throw new ConfigError(`--ratelimit-service port must be at most 65535, got ${servicePort}`);
  const headers = {
    keyId: headerName('ratelimit-key-id-header', required('ratelimit-key-id-header')),
    plan: headerName('ratelimit-plan-header', required('ratelimit-plan-header')),
  };
  if (headers.keyId === headers.plan)
    throw new ConfigError('--ratelimit-key-id-header and --ratelimit-plan-header must be different headers');
  return {
    headers,
    extensionService: {
      namespace: slash < 0 ? namespace : ext.slice(0, slash),
      name: slash < 0 ? ext : ext.slice(slash + 1),
      serviceName: service.slice(0, colon),
      servicePort,
      timeoutMs: positiveInt('ratelimit-gateway-timeout-ms', required('ratelimit-gateway-timeout-ms')),
    },
  };
}

/** The serving-check settings; undefined when no address is set (the check is off). */
function servingCheckSettings(
  get: (name: OptionName) => string | undefined,
  required: (name: OptionName) => string,
): ControllerConfig['servingCheck'] {
  const intervalMs =
    positiveInt('serving-check-interval-seconds', required('serving-check-interval-seconds')) * 1000;
  const timeoutMs = positiveInt('serving-check-timeout-ms', required('serving-check-timeout-ms'));
  const header = get('serving-check-project-header');
  let projectHeader: ProjectHeader | undefined;
  if (header !== undefined && header !== '') {
    const at = header.indexOf('=');
    const name = (at < 0 ? header : header.slice(0, at)).trim();
    // RFC 9110 §5.1: a field name is a token.
    if (!/^[!#$%&'*+.^_`|~0-9A-Za-z-]+$/.test(name))
      throw new ConfigError(`--serving-check-project-header must be name[=value], got "${header}"`);
    projectHeader = at < 0 ? { name } : { name, value: header.slice(at + 1).trim() };
  }
  const address = get('serving-check-address');
  if (address === undefined || address === '') return undefined;
  try {
    parseDataPlaneAddress(address);
  } catch (err) {
    throw new ConfigError(`--serving-check-address: ${(err as Error).message}`);
  }
  return { address, intervalMs, timeoutMs, ...(projectHeader ? { projectHeader } : {}) };
}

/**
 * The ACME issuers: `--acme-issuers` when set, else the single-issuer flags as a list of one. The
 * order budget and account Secret flags are every issuer's defaults.
 *
 * @throws ConfigError for a bad list (IssuerConfigError's message), a missing or non-http(s)
 *   `--acme-directory-url`, or only one of `--acme-eab-kid` and `--acme-eab-hmac-key`
 */
function acmeIssuers(
  get: (name: OptionName) => string | undefined,
  required: (name: OptionName) => string,
): AcmeIssuerSettings[] {
  const email = get('acme-email');
  const defaults = {
    ...(email ? { email } : {}),
    accountSecretName: required('acme-account-secret'),
    orderBudget: {
      orders: positiveInt('acme-orders-per-window', required('acme-orders-per-window')),
      windowMs: positiveInt('acme-order-window-seconds', required('acme-order-window-seconds')) * 1000,
      maxInFlight: positiveInt('acme-max-orders-in-flight', required('acme-max-orders-in-flight')),
    },
  };
  const listed = get('acme-issuers');
  if (listed) {
    try {
      return parseIssuers(listed, defaults);
    } catch (err) {
      if (err instanceof IssuerConfigError) throw new ConfigError(err.message);
      throw err;
    }
  }
  const directory = required('acme-directory-url');
  if (!/^https?:\/\//.test(directory))
    throw new ConfigError(`--acme-directory-url must be an http(s) URL, got "${directory}"`);
  const kid = get('acme-eab-kid');
  const hmacKey = get('acme-eab-hmac-key');
  if (Boolean(kid) !== Boolean(hmacKey))
    throw new ConfigError('--acme-eab-kid and --acme-eab-hmac-key go together');
  const profile = get('acme-profile');
  return singleIssuer(
    {
      directoryUrl: directory,
      eab: kid && hmacKey ? { keyId: kid, hmacKey } : undefined,
      profile,
      caaIdentities: list(get('acme-caa-identities')),
    },
    defaults,
  );
}

/** A comma-separated list, trimmed, without empty entries. */
function list(value: string | undefined): string[] {
  return (value ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}

/** A list of IP addresses; throws `ConfigError` on anything else. */
function addresses(value: string | undefined): string[] {
  const ips = list(value);
  const bad = ips.filter((ip) => isIP(ip) === 0);
  if (bad.length > 0) throw new ConfigError(`--apex-addresses must be IP addresses, got ${bad.join(', ')}`);
  return ips;
}

/** The configured reserved domains plus the platform target itself, lowercased, without trailing dots. */
function reservedDomains(value: string | undefined, target: string): string[] {
  const listed = (value ?? '').split(',').map((s) => s.trim().toLowerCase().replace(/\.$/, ''));
  return [...new Set([...listed, target.toLowerCase().replace(/\.$/, '')])].filter(Boolean);
}

const LEVELS = new Set(['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent']);

/**
 * Reads the configuration. Throws `ConfigError` for a missing required setting or a bad value.
 * Returns `{help: true}` when `--help` was given.
 */
export function parseControllerConfig(
  args: string[],
  env: NodeJS.ProcessEnv = process.env,
): ControllerConfig | { help: true } {
  const flags = readFlags(options, args, env, (message) => new ConfigError(message));
  if ('help' in flags) return flags;
  const { get, required } = flags;
  const logLevel = required('log-level');
  if (!LEVELS.has(logLevel)) throw new ConfigError(`--log-level must be one of ${[...LEVELS].join(', ')}`);
  const issuers = acmeIssuers(get, required);
  const directory = issuers[0]?.directoryUrl ?? '';
  const kid = get('acme-eab-kid');
  const hmacKey = get('acme-eab-hmac-key');
  const http01Service = get('http01-service');
  const ingressClass = get('ingress-class');
  return {
    kubeconfig: get('kubeconfig'),
    namespace: required('namespace'),
    platformCnameTarget: required('platform-cname-target').toLowerCase().replace(/\.$/, ''),
    apexAddresses: addresses(get('apex-addresses')),
    reservedDomains: reservedDomains(get('reserved-domains'), required('platform-cname-target')),
    allowSpecialUseHostnames: bool('allow-special-use-hostnames', required('allow-special-use-hostnames')),
    dnsServers: list(get('dns-server')),
    dnsTimeoutMs: positiveInt('dns-timeout-ms', required('dns-timeout-ms')),
    dnsMismatchGraceMs:
      nonNegativeInt('dns-mismatch-grace-seconds', required('dns-mismatch-grace-seconds')) * 1000,
    danglingAfterMs: positiveInt('dangling-after-seconds', required('dangling-after-seconds')) * 1000,
    ownershipVerification: ownershipSettings(required),
    acmeDirectoryUrl: directory,
    acmeIssuers: issuers,
    acmeFailover: {
      failuresBeforeFailover: positiveInt(
        'acme-failover-after-failures',
        required('acme-failover-after-failures'),
      ),
      longRetryAfterMs:
        positiveInt('acme-failover-retry-after-seconds', required('acme-failover-retry-after-seconds')) *
        1000,
      passOverMs:
        positiveInt('acme-failover-pass-over-seconds', required('acme-failover-pass-over-seconds')) * 1000,
    },
    acmeEmail: get('acme-email'),
    acmeEab: kid && hmacKey ? { kid, hmacKey } : undefined,
    acmeAccountSecretName: required('acme-account-secret'),
    acmeRequestTimeoutMs:
      positiveInt('acme-request-timeout-seconds', required('acme-request-timeout-seconds')) * 1000,
    acmeProfile: get('acme-profile'),
    certificateOverdueMs:
      positiveInt('certificate-overdue-seconds', required('certificate-overdue-seconds')) * 1000,
    acmeOrderBudget: {
      orders: positiveInt('acme-orders-per-window', required('acme-orders-per-window')),
      windowMs: positiveInt('acme-order-window-seconds', required('acme-order-window-seconds')) * 1000,
      maxInFlight: positiveInt('acme-max-orders-in-flight', required('acme-max-orders-in-flight')),
    },
    acmeCaaIdentities: list(get('acme-caa-identities')),
    http01ListenAddress: required('http01-listen-address'),
    http01SelfCheckPort: positiveInt('http01-self-check-port', required('http01-self-check-port')),
    http01Service: http01Service ? hostPort('http01-service', http01Service) : undefined,
    ingressClassName: ingressClass,
    routing: routingSettings(get, required),
    servingCheck: servingCheckSettings(get, required),
    contourAttachment: contourAttachmentSettings(required),
    envoyGatewayAttachment: envoyGatewayAttachmentSettings(required),
    metricsListenAddress: required('metrics-listen-address'),
    workers: positiveInt('workers', required('workers')),
    resyncMs: positiveInt('resync-seconds', required('resync-seconds')) * 1000,
    memoryReductionGrowthBytes:
      nonNegativeInt('memory-reduction-growth-mib', required('memory-reduction-growth-mib')) * 1024 * 1024,
    memoryTargetBytes: nonNegativeInt('memory-target-mib', required('memory-target-mib')) * 1024 * 1024,
    logLevel: logLevel as LevelWithSilent,
    leaderElection: leaderElection(get, required),
  };
}
