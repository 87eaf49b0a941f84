/**
 * `portico controller`: builds the operator from its configuration, starts the HTTP-01 challenge
 * server, the observability server and the controllers, and shuts down cleanly on SIGTERM/SIGINT
 * (stop watching, abandon ACME orders in flight, finish the keys in hand, close the servers).
 */
import { randomUUID } from 'node:crypto';
import { once } from 'node:events';
import { hostname } from 'node:os';
import type { Server } from 'node:http';
import { CoreV1Api, CustomObjectsApi, KubernetesObjectApi } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { ConfigMapChallengeStore } from '../acme/challenge-store.js';
import { createHttp01Server } from '../acme/http01-server.js';
import { IssuanceTracker, orderOutcomeOf } from '../acme/issuance-tracker.js';
import type { AcmeIssuerSet } from '../acme/issuer-set.js';
import { abandonedPolls } from '../acme/account.js';
import { budgetOf, buildIssuers, directoryOf, type BuiltIssuer } from '../acme/issuers.js';
import { CustomDomainController } from '../controllers/customdomain/controller.js';
import type { ClusterView } from '../controllers/customdomain/cluster-view.js';
import { CustomDomainReconciler } from '../controllers/customdomain/reconciler.js';
import { HostnameClaims, type ClaimsCache } from '../controllers/customdomain/hostname-claims.js';
import { OwnershipStore } from '../controllers/customdomain/ownership-store.js';
import { isProvenStatus } from '../controllers/customdomain/status-proof.js';
import { acceptedBeforeIn } from '../controllers/customdomain/phases/acceptance.js';
import { RateLimitPolicyController } from '../controllers/ratelimitpolicy/controller.js';
import { ProjectController } from '../controllers/project/controller.js';
import {
  AppsDomainCertificate,
  type AppsCertificateOptions,
} from '../controllers/project/apps-certificate.js';
import { RenewalPlanner } from '../controllers/customdomain/renewal.js';
import { DnsResolver } from '../dns/resolver.js';
import { DNS_UPDATE_TIMEOUT_MS, DnsUpdateClient } from '../dns/update-client.js';
import { normalizeDnsName } from '../domain/hostname.js';
import { registeredDomain } from '../dns/records.js';
import type { CustomDomain } from '../api/customdomain.js';
import { EventRecorder } from '../kube/events.js';
import { loadKubeConfig, type PooledKubeConfig } from '../kube/kubeconfig.js';
import { LeaderElector } from '../kube/leader-election.js';
import { WorkQueue } from '../kube/work-queue.js';
import {
  DEFAULT_MEMORY_REDUCER_POLICY,
  MemoryHold,
  MemoryReducer,
  type MemoryReducerOptions,
} from './memory-reducer.js';
import { createObservabilityServer } from '../observability/http-server.js';
import { createLogger } from '../observability/logger.js';
import { createControllerMetrics } from '../observability/metrics.js';
import { ConfigError, controllerUsage, parseControllerConfig, type ControllerConfig } from './config.js';
import { ServingChecker } from '../serving/checker.js';
import { LastGoodCertificates } from '../controllers/customdomain/last-good-certificates.js';
import { DEFAULT_UNREACHABLE_GRACE_MS } from '../serving/schedule.js';

/**
 * The Lease the controller replicas elect a leader with; one replica is active
 * (docs/architecture.md, "The two processes"; docs/install.md on leader election).
 */
export const LEASE_NAME = 'portico-controller';

/** The Secret, in the operator's namespace, that holds the apps domain's wildcard certificate. */
export const APPS_DOMAIN_SECRET = 'portico-apps-domain-tls';

async function listen(
  server: Server,
  address: string,
  log: Logger,
  what: string,
  reusePort = false,
): Promise<void> {
  const at = address.lastIndexOf(':');
  const host = address.slice(0, at) || '0.0.0.0';
  const port = Number(address.slice(at + 1));
  // reusePort: replicas on one host (the sandbox, tests) share the HTTP-01 port the CA validates on,
  // and the kernel spreads challenge requests over them as a Service would (Linux SO_REUSEPORT).
  server.listen({ port, host, reusePort });
  await once(server, 'listening');
  log.info({ address }, `${what} listening`);
}

function build(
  config: ControllerConfig,
  log: Logger,
): {
  controller: CustomDomainController;
  store: ConfigMapChallengeStore;
  metrics: ReturnType<typeof createControllerMetrics>;
  objects: KubernetesObjectApi;
  rateLimitPolicies: RateLimitPolicyController;
  projects: ProjectController;
  tracker: IssuanceTracker;
  /** Each configured ACME issuer's account, directory and order queue, in order. */
  issuers: BuiltIssuer[];
  kubeConfig: PooledKubeConfig;
  /** The issuers with failover: order turns and orders. */
  issuer: AcmeIssuerSet;
  /** The CustomDomain work queue. */
  queue: WorkQueue;
  /** Engaged by the memory reducer; holds the reconcile workers and the requests to the CA. */
  memoryHold: MemoryHold;
  /** The apps domain's wildcard certificate; undefined without --apps-domain. */
  appsCertificate: AppsDomainCertificate | undefined;
} {
  const kubeConfig = loadKubeConfig(config.kubeconfig);
  const core = kubeConfig.makeApiClient(CoreV1Api);
  const customObjects = kubeConfig.makeApiClient(CustomObjectsApi);
  const objects = KubernetesObjectApi.makeApiClient(kubeConfig);
  const metrics = createControllerMetrics();
  const resolver = new DnsResolver({ servers: config.dnsServers, timeoutMs: config.dnsTimeoutMs, tries: 2 });
  const store = new ConfigMapChallengeStore(kubeConfig, objects, config.namespace, log);
  const memoryHold = new MemoryHold(metrics.memoryHoldSecondsTotal);
  const relief = (): Promise<void> | undefined => memoryHold.relief();
  const queue = new WorkQueue(undefined, { name: 'customdomain' });
  // Set once the issuers are built: the wildcard's turn in an order budget wakes it, not the queue.
  // eslint-disable-next-line prefer-const
  let appsCertificate: AppsDomainCertificate | undefined;
  // Per configured issuer: its account, directory, issuer and order queue (src/acme/issuers.ts).
  const { set: issuer, issuers } = buildIssuers(config.acmeIssuers, config.acmeFailover, {
    core,
    namespace: config.namespace,
    store,
    resolver,
    requestTimeoutMs: config.acmeRequestTimeoutMs,
    relief,
    http01Port: config.http01SelfCheckPort,
    selfCheck: { attempts: 5, intervalMs: 1_000, timeoutMs: 5_000 },
    ...(config.dns01
      ? {
          dns01: new DnsUpdateClient({
            server: config.dns01.server,
            zone: config.dns01.zone,
            key: config.dns01.key,
            timeoutMs: DNS_UPDATE_TIMEOUT_MS,
          }),
        }
      : {}),
    // A domain whose turn came holds a free order slot: at high priority it places its order ahead
    // of a backlog (a burst's first reconciles), which at normal priority left the slot unused for
    // seconds and made every waiting domain's expected time too late (docs/performance.md, twelfth
    // round).
    requeue: (key) => {
      if (key === appsCertificate?.orderKey) appsCertificate.wake();
      else queue.addHighPriority(key);
    },
    log,
  });
  const directory = issuers[0]?.directory;
  if (!directory) throw new ConfigError('no ACME issuer is configured');
  // When to renew (ARI, RFC 9773, else two thirds): one planner for the CustomDomains and the
  // apps domain's wildcard, each certificate asked of the CA that issued it.
  const renewal = new RenewalPlanner((acmeIssuer) => directoryOf(issuers, acmeIssuer) ?? directory);
  const tracker: IssuanceTracker = new IssuanceTracker((key) => {
    // The order ended: its slot is free (the domains whose turn came are re-queued), and the domain
    // reads its outcome at high priority: a stored certificate makes it Live without waiting
    // behind a backlog.
    issuer.settled(key, orderOutcomeOf(tracker.lastOutcome(key)), new Date());
    queue.addHighPriority(key);
  });
  const ownership = new OwnershipStore(
    core,
    objects,
    { namespace: config.namespace, keySecret: config.ownershipVerification.keySecretName },
    log,
  );
  // At most half the workers (at least one) wait on the data plane at once: a blackholed address
  // holds each check up to four times its timeout.
  const serving = config.servingCheck
    ? new ServingChecker({
        address: config.servingCheck.address,
        ...(config.routing.dataPlaneName === undefined
          ? {}
          : { dataPlaneName: config.routing.dataPlaneName }),
        timeoutMs: config.servingCheck.timeoutMs,
        ...(config.servingCheck.projectHeader ? { projectHeader: config.servingCheck.projectHeader } : {}),
        policy: {
          intervalMs: config.servingCheck.intervalMs,
          unreachableGraceMs: DEFAULT_UNREACHABLE_GRACE_MS,
          propagationGraceMs: config.servingCheck.propagationGraceMs,
        },
        maxConcurrent: Math.max(1, Math.floor(config.workers / 2)),
        // A check that found no free slot runs as soon as one frees, not 2 s later by polling; an
        // answer the checker's own probe saw changed (the data plane serves the certificate now)
        // goes ahead of the line, as a settled order does: Ready should say it at once.
        wake: (key, why) => {
          if (why === 'answer') queue.addHighPriority(key);
          else queue.add(key);
        },
      })
    : undefined;
  const routing = {
    ...config.routing,
    ...(config.ingressClassName ? { ingressClassName: config.ingressClassName } : {}),
    ...(config.http01Service ? { http01Service: config.http01Service } : {}),
  };
  const createReconciler = (view: ClusterView & ClaimsCache): CustomDomainReconciler =>
    new CustomDomainReconciler({
      platformCnameTarget: config.platformCnameTarget,
      reservedDomains: config.reservedDomains,
      allowSpecialUseHostnames: config.allowSpecialUseHostnames,
      apexAddresses: config.apexAddresses,
      dns01ChallengeZone: config.dns01?.zone,
      certificateOverdueMs: config.certificateOverdueMs,
      issuanceFirstRetryMs: config.issuanceFirstRetryMs,
      dnsMismatchGraceMs: config.dnsMismatchGraceMs,
      danglingAfterMs: config.danglingAfterMs,
      ownership: {
        policy: config.ownershipVerification.policy,
        recentMs: config.ownershipVerification.recentMs,
        store: ownership,
      },
      view,
      claims: new HostnameClaims(customObjects, log, {
        cache: view,
        events: new EventRecorder(core, 'portico-controller', log),
        releases: ownership,
        undeployedGraceMs: config.undeployedClaimGraceMs,
        // A domain serves its hostname for the claim rules only with the operator's proof on its
        // status (docs/customdomains.md, "What status Portico trusts"); every reconcile loads the key first.
        proven: (domain) => {
          const key = ownership.loadedKey();
          const hostname = normalizeDnsName(domain.spec.hostname);
          return key !== undefined && isProvenStatus(key, domain.metadata.uid ?? '', hostname, domain.status);
        },
        // A holder's Accepted=True keeps its hold past the grace only as the operator proves it
        // (the status proof, or a routing object of the operator's for it, in its routing class).
        acceptedBefore: (domain) => acceptedBeforeIn(view, ownership.loadedKey(), domain, routing),
      }),
      routing,
      customObjects,
      core,
      objects,
      resolver,
      issuer,
      tracker,
      budget: issuer,
      lastGood: new LastGoodCertificates(core, objects, config.namespace),
      renewal,
      ...(serving ? { serving } : {}),
      events: new EventRecorder(core, 'portico-controller', log),
      metrics,
      log,
      now: () => new Date(),
    });
  // Set right after the CustomDomain controller, whose cache it reads; no event arrives before start().
  // eslint-disable-next-line prefer-const
  let projects: ProjectController | undefined;
  const controller = new CustomDomainController({
    kubeConfig,
    ...(config.ingressClassName ? { ingressClassName: config.ingressClassName } : {}),
    routingClass: routing,
    createReconciler,
    queue,
    metrics,
    log,
    workers: config.workers,
    resyncMs: config.resyncMs,
    relief,
    onSynced: (domains) => {
      seedOrderBudgets(issuers, domains, new Date());
    },
    onCustomDomainChange: (domain, verb) => {
      metrics.readyTransitions.onChange(domain, verb);
      projects?.onCustomDomainChange(domain);
    },
    onServiceChange: (namespace) => projects?.onNamespaceChange(namespace),
    onForeignRouteChange: (namespace, hostnames) => projects?.onForeignRouteChange(namespace, hostnames),
    loadedKey: () => ownership.loadedKey(),
  });
  const apps = config.appsDomain;
  appsCertificate = appsDomainCertificate(config, {
    kubeConfig,
    issuer,
    renewal,
    core,
    objects,
    log,
    events: new EventRecorder(core, 'portico-controller', log),
    countPastCertificate: (certificate) => {
      seedPastCertificate(issuers, certificate, new Date());
    },
    onChange: () => projects?.onCertificateChange(),
  });
  // Projects keep one CustomDomain per hostname in step with them, read from the controller's cache.
  const view = controller.view();
  projects = new ProjectController({
    kubeConfig,
    domains: controller,
    log,
    metrics,
    resyncMs: config.resyncMs,
    events: new EventRecorder(core, 'portico-controller', log),
    ...(apps && appsCertificate
      ? {
          subdomain: {
            appsDomain: apps.domain,
            certificate: appsCertificate,
            view,
            objects,
            operatorNamespace: config.namespace,
            routing: {
              ...config.routing,
              ...(config.ingressClassName ? { ingressClassName: config.ingressClassName } : {}),
            },
          },
        }
      : {}),
  });
  // The per-domain metrics read the controller's cache at each scrape (none kept in between).
  metrics.readCustomDomainsFrom(() => controller.customDomains());
  // RateLimitPolicy resources compile into the rate-limit service's ConfigMap in this namespace.
  const rateLimitPolicies = new RateLimitPolicyController({
    kubeConfig,
    objects,
    log,
    metrics,
    namespace: config.namespace,
    resyncMs: config.resyncMs,
    events: new EventRecorder(core, 'portico-controller', log),
    attachments: config.rateLimitAttachments,
  });
  return {
    controller,
    store,
    metrics,
    objects,
    rateLimitPolicies,
    projects,
    tracker,
    issuers,
    kubeConfig,
    issuer,
    queue,
    memoryHold,
    appsCertificate,
  };
}

/**
 * The apps domain's wildcard certificate (docs/customdomains.md, "The auto-generated subdomain"),
 * ordered through the operator's ACME issuers like a CustomDomain's (failover, order budgets, retry
 * schedule, CAA), answering DNS-01 by RFC 2136 updates of the apps zone; undefined without
 * --apps-domain.
 */
function appsDomainCertificate(
  config: ControllerConfig,
  deps: Pick<
    AppsCertificateOptions,
    'issuer' | 'renewal' | 'core' | 'objects' | 'log' | 'events' | 'onChange' | 'kubeConfig'
  > &
    Required<Pick<AppsCertificateOptions, 'countPastCertificate'>>,
): AppsDomainCertificate | undefined {
  const apps = config.appsDomain;
  if (apps === undefined) return undefined;
  return new AppsDomainCertificate({
    ...deps,
    appsDomain: apps.domain,
    secret: { namespace: config.namespace, name: APPS_DOMAIN_SECRET },
    dns01: new DnsUpdateClient({
      server: apps.server,
      zone: apps.zone,
      key: apps.key,
      timeoutMs: DNS_UPDATE_TIMEOUT_MS,
    }),
    firstRetryMs: config.issuanceFirstRetryMs,
    recheckMs: config.resyncMs,
  });
}

/** An hour: Let's Encrypt backdates a certificate's notBefore by about this much. */
const NOT_BEFORE_BACKDATE_MS = 60 * 60_000;

/**
 * After a restart, counts the certificates the domains' status shows as orders of the account and
 * certificates of their registered domains (`seedPastCertificate`), so the budget does not start
 * empty. Failed orders before the restart are not known.
 */
function seedOrderBudgets(
  issuers: readonly BuiltIssuer[],
  domains: readonly CustomDomain[],
  now: Date,
): void {
  for (const domain of domains) {
    const certificate = domain.status?.certificate;
    if (certificate?.notBefore === undefined) continue;
    seedPastCertificate(
      issuers,
      {
        notBefore: certificate.notBefore,
        acmeIssuer: certificate.acmeIssuer,
        registeredDomain: registeredDomain(normalizeDnsName(domain.spec.hostname)),
      },
      now,
    );
  }
}

/**
 * Counts one certificate issued before this process started in the budget of the issuer that
 * issued it (the first for a certificate that names none; none for an issuer no longer configured),
 * as an order of the account and a certificate of its registered domain, at notBefore plus an hour
 * (CAs backdate notBefore) or now if sooner. A notBefore that does not parse counts nothing.
 */
function seedPastCertificate(
  issuers: readonly BuiltIssuer[],
  certificate: { notBefore: string; acmeIssuer: string | undefined; registeredDomain: string },
  now: Date,
): void {
  const notBefore = Date.parse(certificate.notBefore);
  if (Number.isNaN(notBefore)) return;
  const budget = budgetOf(issuers, certificate.acmeIssuer);
  if (!budget) return;
  const at = new Date(Math.min(now.getTime(), notBefore + NOT_BEFORE_BACKDATE_MS));
  budget.recordPastOrder(at);
  budget.recordPastCertificate(certificate.registeredDomain, at);
}

/**
 * The reducer that gives back what a burst of work left committed and keeps the resident set under
 * the memory target (memory-reducer.ts, docs/performance.md); undefined when both settings are 0.
 */
function memoryReducer(
  config: ControllerConfig,
  options: Omit<MemoryReducerOptions, 'policy'>,
): MemoryReducer | undefined {
  const growth = config.memoryReductionGrowthBytes;
  if (growth === 0 && config.memoryTargetBytes === 0) return undefined;
  const defaults = DEFAULT_MEMORY_REDUCER_POLICY;
  return new MemoryReducer({
    ...options,
    policy: {
      ...defaults,
      growthBytes: growth > 0 ? growth : Infinity,
      idleGrowthBytes: growth > 0 ? defaults.idleGrowthBytes : Infinity,
      targetBytes: config.memoryTargetBytes,
    },
  });
}

/**
 * The configuration `args` (and the environment) give, or the exit code when the command ends at
 * reading it: 0 after `--help` (the usage printed) or `--check-config` (the configuration valid), 2
 * for a bad configuration (the error and the usage printed).
 *
 * @throws what parseControllerConfig throws other than a ConfigError or a parseArgs error
 */
function readConfig(args: string[]): ControllerConfig | number {
  let parsed: ReturnType<typeof parseControllerConfig>;
  try {
    parsed = parseControllerConfig(args);
  } catch (err) {
    if (err instanceof ConfigError || (err as { code?: string }).code?.startsWith('ERR_PARSE_ARGS')) {
      process.stderr.write(`portico controller: ${(err as Error).message}\n\n${controllerUsage()}`);
      return 2;
    }
    throw err;
  }
  if ('help' in parsed) {
    process.stdout.write(controllerUsage());
    return 0;
  }
  if (parsed.checkConfig) {
    process.stdout.write('portico controller: the configuration is valid (--check-config: not started)\n');
    return 0;
  }
  return parsed;
}

/**
 * Runs until SIGTERM or SIGINT. Returns the exit code: 0 after a clean stop, 2 for bad configuration.
 * With `--check-config`, returns 0 once the configuration is read and checked, without starting.
 */
export async function runController(args: string[]): Promise<number> {
  const config = readConfig(args);
  if (typeof config === 'number') return config;
  const log = createLogger(config.logLevel);
  const {
    controller,
    store,
    metrics,
    objects,
    rateLimitPolicies,
    projects,
    tracker,
    issuers,
    kubeConfig,
    issuer,
    queue,
    memoryHold,
    appsCertificate,
  } = build(config, log);
  const elector = config.leaderElection
    ? new LeaderElector(
        objects,
        { ...config.leaderElection, name: LEASE_NAME, identity: `${hostname()}_${randomUUID().slice(0, 8)}` },
        log,
      )
    : undefined;
  const http01 = createHttp01Server(store);
  // A replica that is not the leader serves challenges and metrics, so it is ready as it is.
  const observability = createObservabilityServer(
    metrics.registry,
    () => !elector?.leading || (controller.synced && rateLimitPolicies.synced && projects.synced),
  );
  const reducer = memoryReducer(config, {
    log,
    reductions: metrics.memoryReductionsTotal,
    isIdle: () => queue.length === 0,
    hold: memoryHold,
  });
  reducer?.start();
  store.start();
  await listen(http01, config.http01ListenAddress, log, 'HTTP-01 challenge server', true);
  await listen(observability, config.metricsListenAddress, log, 'metrics and health server');

  let stopping = false;
  const lost = new Promise<string>((resolve) => {
    const startReconciling = (): void => {
      // Leadership won while shutting down starts nothing: started informers would outlive the stop.
      if (stopping) return;
      controller.start();
      rateLimitPolicies.start();
      projects.start();
      appsCertificate?.start();
      log.info(
        {
          platformCnameTarget: config.platformCnameTarget,
          acmeIssuers: config.acmeIssuers.map((i) => `${i.name} ${i.directoryUrl}`),
        },
        'controller started',
      );
    };
    if (elector)
      elector.run(startReconciling, () => {
        resolve('lost leadership');
      });
    else startReconciling();
  });
  const reason = await Promise.race([lost, stopSignal()]);
  stopping = true;
  log.info({ reason }, 'shutting down');
  // Orders in flight are abandoned, not waited for: their challenges are withdrawn and the CA is
  // asked nothing more; the next leader places new ones.
  for (const built of issuers) built.queue.stop();
  reducer?.stop();
  await Promise.all([
    controller.stop(),
    rateLimitPolicies.stop(),
    projects.stop(),
    tracker.stop(),
    appsCertificate?.stop(),
  ]);
  for (const built of issuers) built.account.close();
  await elector?.stop();
  await store.stop();
  await kubeConfig.close();
  http01.close();
  observability.close();
  http01.closeAllConnections();
  observability.closeAllConnections();
  // Losing the lease ends the process (as controller-runtime does); its supervisor starts a fresh one.
  const code = reason === 'lost leadership' ? 1 : 0;
  const abandonedCalls = issuer.abandonedCalls() + abandonedPolls();
  if (abandonedCalls > 0) {
    // The polling loops of abandoned orders sleep in acme-client between attempts they are refused;
    // waiting for them would only delay the exit (up to the CLI's 5 s guard, or their last attempt).
    log.info({ abandonedCalls }, 'stopped; exiting without waiting for abandoned ACME polling loops');
    process.exit(code);
  }
  log.info('stopped');
  return code;
}

function stopSignal(): Promise<string> {
  return new Promise<string>((resolve) => {
    process.once('SIGTERM', () => {
      resolve('SIGTERM');
    });
    process.once('SIGINT', () => {
      resolve('SIGINT');
    });
  });
}
