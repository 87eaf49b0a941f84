/**
 * Configuration of `portico controller`, from flags with environment fallbacks
 * (`--platform-cname-target` or `PORTICO_PLATFORM_CNAME_TARGET`, and so on). Parsed with node:util's
 * parseArgs; every value is checked here so a bad setting stops the process at start with a clear
 * message instead of failing later.
 */
import { isIP } from 'node:net';
import type { LevelWithSilent } from 'pino';
import { flagUsage, readFlags } from '../command-flags.js';
import { controllerOptions, type OptionName } from './config-flags.js';
import {
  IssuerConfigError,
  parseIssuers,
  singleIssuer,
  type AcmeIssuerSettings,
} from '../acme/issuer-config.js';
import type { FailoverPolicy } from '../acme/issuer-selection.js';
import { OWNERSHIP_POLICIES, type OwnershipPolicy } from '../dns/ownership.js';
import { TSIG_ALGORITHMS, type TsigAlgorithm, type TsigKey } from '../dns/dynamic-update.js';
import { appsDomainProblem } from '../domain/apps-subdomain.js';
import { normalizeDnsName } from '../domain/hostname.js';
import {
  checkRoutingOptions,
  parseGatewayParentRefs,
  type IngressFlavor,
  type RoutingMode,
  type RoutingOptions,
} from '../routing/options.js';
import { DATA_PLANE_MODULES } from '../data-planes/registry.js';
import type { RateLimitWiring } from '../data-planes/types.js';
import { DATA_PLANE_NAMES, DATA_PLANES, type DataPlane } from '../routing/data-planes.js';
import { parseDataPlaneAddress } from '../serving/serving-check.js';
import type { ProjectHeader } from '../serving/verdict.js';

export interface ControllerConfig {
  kubeconfig: string | undefined;
  /** The operator's own namespace: the ACME account Secret lives here. */
  namespace: string;
  /** The platform CNAME target (docs/customdomains.md, "DNS instructions"): the value every customer CNAME must equal. */
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
  /**
   * Milliseconds a CustomDomain never accepted (its project never deployed) keeps its hostname claim,
   * from its creation, before a deployed claimant takes it over (claim-precedence.ts).
   */
  undeployedClaimGraceMs: number;
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
  /** Milliseconds after a failed certificate order before its first retry (then doubling, up to 1 hour). */
  issuanceFirstRetryMs: number;
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
  /**
   * DNS-01 through the platform's challenge zone (src/dns/challenge-delegation.ts,
   * docs/customdomains.md "Certificates before the move"): the zone, its authoritative server for
   * RFC 2136 updates and the TSIG key. Undefined when --dns01-challenge-zone is unset (off).
   */
  dns01: { zone: string; server: { host: string; port: number }; key: TsigKey } | undefined;
  /**
   * The platform's apps domain (docs/customdomains.md, "The auto-generated subdomain"): every
   * Project is served at `<label>.<domain>` with one wildcard certificate for `*.<domain>`, issued
   * by DNS-01 into `zone` (RFC 2136 updates to `server`, signed with `key`: the --dns01-server and
   * --dns01-tsig-* settings). Undefined when --apps-domain is unset (off).
   */
  appsDomain:
    { domain: string; zone: string; server: { host: string; port: number }; key: TsigKey } | undefined;
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
    | 'dataPlane'
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
        /**
         * Milliseconds after the first check of a certificate not yet seen served during which another
         * certificate or the default backend is `AwaitingServing` (schedule.ts); 0: none.
         */
        propagationGraceMs: number;
        projectHeader?: ProjectHeader;
      }
    | undefined;
  /**
   * The data planes whose rate-limit attachment is on (each module's `--<name>-attachment` flag:
   * `--contour-attachment`, on by default, docs/ratelimits.md, "Attaching to Contour";
   * `--envoy-gateway-attachment`, off by default, docs/routing.md, "Envoy Gateway"), by data plane
   * name, with where their proxies find the rate-limit service; empty when every one is off.
   */
  rateLimitAttachments: ReadonlyMap<string, RateLimitWiring>;
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
  /** `--check-config`: check this configuration and exit instead of starting. */
  checkConfig: boolean;
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

/** The flag reference printed by `portico controller --help`. */
export function controllerUsage(): string {
  return flagUsage('portico controller', controllerOptions);
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

/**
 * The RFC 2136 server and TSIG key (--dns01-server, --dns01-tsig-*) that `flag` needs.
 *
 * @throws ConfigError naming the missing or malformed settings
 */
function rfc2136Access(
  get: (name: OptionName) => string | undefined,
  flag: OptionName,
): { server: { host: string; port: number }; key: TsigKey } {
  const missing = (['dns01-server', 'dns01-tsig-key-name', 'dns01-tsig-secret'] as const).filter(
    (n) => !get(n),
  );
  if (missing.length > 0)
    throw new ConfigError(`--${flag} needs ${missing.map((n) => `--${n}`).join(', ')} too`);
  const server = hostPort('dns01-server', get('dns01-server') ?? '');
  const algorithm = get('dns01-tsig-algorithm') ?? 'hmac-sha256';
  if (!(TSIG_ALGORITHMS as readonly string[]).includes(algorithm))
    throw new ConfigError(
      `--dns01-tsig-algorithm must be one of ${TSIG_ALGORITHMS.join(', ')}, got "${algorithm}"`,
    );
  const encoded = (get('dns01-tsig-secret') ?? '').trim();
  const secret = Buffer.from(encoded, 'base64');
  if (secret.length === 0 || secret.toString('base64').replace(/=+$/, '') !== encoded.replace(/=+$/, ''))
    throw new ConfigError('--dns01-tsig-secret must be the key secret in base64');
  return {
    server: { host: server.fqdn, port: server.port },
    key: { name: get('dns01-tsig-key-name') ?? '', algorithm: algorithm as TsigAlgorithm, secret },
  };
}

/** The DNS-01 challenge zone settings; undefined when --dns01-challenge-zone is unset. */
function dns01Settings(get: (name: OptionName) => string | undefined): ControllerConfig['dns01'] {
  const zone = get('dns01-challenge-zone');
  if (zone === undefined || zone === '') return undefined;
  return { zone: zone.toLowerCase().replace(/\.$/, ''), ...rfc2136Access(get, 'dns01-challenge-zone') };
}

/**
 * The apps domain settings; undefined when --apps-domain is unset.
 *
 * @throws ConfigError when the domain breaks a hostname rule or leaves no room for a 63-character
 *   label (domain/apps-subdomain.ts), when the zone does not contain it, or without the RFC 2136 settings
 */
function appsDomainSettings(get: (name: OptionName) => string | undefined): ControllerConfig['appsDomain'] {
  const raw = get('apps-domain');
  if (raw === undefined || raw === '') return undefined;
  const domain = normalizeDnsName(raw.trim());
  const problem = appsDomainProblem(domain);
  if (problem !== undefined) throw new ConfigError(`--apps-domain ${raw}: ${problem}`);
  const zone = normalizeDnsName((get('apps-domain-zone') ?? domain).trim());
  if (domain !== zone && !domain.endsWith(`.${zone}`))
    throw new ConfigError(`--apps-domain-zone ${zone} must be ${domain} or a domain above it`);
  return { domain, zone, ...rfc2136Access(get, 'apps-domain') };
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
  const dataPlane = get('data-plane');
  if (dataPlane !== undefined && dataPlane !== '') {
    if (!(DATA_PLANES as readonly string[]).includes(dataPlane))
      throw new ConfigError(`--data-plane must be one of ${DATA_PLANES.join(', ')}, got "${dataPlane}"`);
    routing.dataPlane = dataPlane as DataPlane;
    routing.dataPlaneName = DATA_PLANE_NAMES[routing.dataPlane];
  }
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

/**
 * The data planes whose attachment flag is on, each with the wiring; the `--ratelimit-*` flags are
 * read only when one is, and `--cluster-domain` only when one on reads it.
 */
function rateLimitAttachmentSettings(
  required: (name: OptionName) => string,
): ControllerConfig['rateLimitAttachments'] {
  const on = DATA_PLANE_MODULES.flatMap((m) => {
    const a = m.rateLimitAttachment;
    return a !== undefined && bool(a.flag.slice(2) as OptionName, required(a.flag.slice(2) as OptionName))
      ? [{ name: m.name, attachment: a }]
      : [];
  });
  if (on.length === 0) return new Map();
  const wiring = rateLimitWiring(required);
  if (
    on.some((m) => m.attachment.usesClusterDomain === true) &&
    !/^[a-z0-9]([a-z0-9.-]*[a-z0-9])?$/.test(wiring.clusterDomain)
  )
    throw new ConfigError(
      `--cluster-domain must be a DNS domain such as cluster.local, got "${wiring.clusterDomain}"`,
    );
  return new Map(on.map((m) => [m.name, wiring]));
}

/** The rate-limit service and headers every attachment wires (the `--ratelimit-*` flags, `--cluster-domain`). */
function rateLimitWiring(required: (name: OptionName) => string): RateLimitWiring {
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
    clusterDomain: required('cluster-domain'),
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
  const propagationGraceMs =
    nonNegativeInt('serving-check-propagation-seconds', required('serving-check-propagation-seconds')) * 1000;
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
  return { address, intervalMs, timeoutMs, propagationGraceMs, ...(projectHeader ? { projectHeader } : {}) };
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
  const flags = readFlags(controllerOptions, args, env, (message) => new ConfigError(message));
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
    // The apps domain is the platform's: no CustomDomain may take a project's auto-generated subdomain.
    reservedDomains: reservedDomains(
      [get('reserved-domains'), get('apps-domain')].filter(Boolean).join(','),
      required('platform-cname-target'),
    ),
    allowSpecialUseHostnames: bool('allow-special-use-hostnames', required('allow-special-use-hostnames')),
    dnsServers: list(get('dns-server')),
    dnsTimeoutMs: positiveInt('dns-timeout-ms', required('dns-timeout-ms')),
    dnsMismatchGraceMs:
      nonNegativeInt('dns-mismatch-grace-seconds', required('dns-mismatch-grace-seconds')) * 1000,
    danglingAfterMs: positiveInt('dangling-after-seconds', required('dangling-after-seconds')) * 1000,
    undeployedClaimGraceMs:
      nonNegativeInt('undeployed-claim-grace-seconds', required('undeployed-claim-grace-seconds')) * 1000,
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
    issuanceFirstRetryMs:
      positiveInt('issuance-first-retry-seconds', required('issuance-first-retry-seconds')) * 1000,
    acmeOrderBudget: {
      orders: positiveInt('acme-orders-per-window', required('acme-orders-per-window')),
      windowMs: positiveInt('acme-order-window-seconds', required('acme-order-window-seconds')) * 1000,
      maxInFlight: positiveInt('acme-max-orders-in-flight', required('acme-max-orders-in-flight')),
    },
    acmeCaaIdentities: list(get('acme-caa-identities')),
    dns01: dns01Settings(get),
    appsDomain: appsDomainSettings(get),
    http01ListenAddress: required('http01-listen-address'),
    http01SelfCheckPort: positiveInt('http01-self-check-port', required('http01-self-check-port')),
    http01Service: http01Service ? hostPort('http01-service', http01Service) : undefined,
    ingressClassName: ingressClass,
    routing: routingSettings(get, required),
    servingCheck: servingCheckSettings(get, required),
    rateLimitAttachments: rateLimitAttachmentSettings(required),
    metricsListenAddress: required('metrics-listen-address'),
    workers: positiveInt('workers', required('workers')),
    resyncMs: positiveInt('resync-seconds', required('resync-seconds')) * 1000,
    memoryReductionGrowthBytes:
      nonNegativeInt('memory-reduction-growth-mib', required('memory-reduction-growth-mib')) * 1024 * 1024,
    memoryTargetBytes: nonNegativeInt('memory-target-mib', required('memory-target-mib')) * 1024 * 1024,
    logLevel: logLevel as LevelWithSilent,
    leaderElection: leaderElection(get, required),
    checkConfig: get('check-config') === 'true',
  };
}
