/**
 * What the e2e tests use to talk to the real stack: typed Kubernetes clients on the sandbox's admin
 * kubeconfig, the DNS server's management API, Pebble's roots, and polling with a deadline.
 */
import {
  CoordinationV1Api,
  CoreV1Api,
  CustomObjectsApi,
  DiscoveryV1Api,
  KubeConfig,
  NetworkingV1Api,
  type CoreV1Event,
} from '@kubernetes/client-node';
import { readFile } from 'node:fs/promises';
import { get, request } from 'node:https';
import { inject } from 'vitest';
import {
  API_VERSION,
  CUSTOM_DOMAIN_PLURAL,
  GROUP,
  VERSION,
  type CustomDomain,
  type CustomDomainSpec,
} from '../../../src/api/customdomain.js';
import {
  HOSTNAME_CLAIM_KIND,
  HOSTNAME_CLAIM_PLURAL,
  type CustomDomainRef,
  type HostnameClaim,
} from '../../../src/api/hostnameclaim.js';
import { DnsManagementClient } from '../../../src/sandbox/dns-server.js';

export const sandbox = inject('sandbox');

/** Group, version and plural of the namespaced CustomDomain API, for CustomObjectsApi calls. */
export const customDomainApi = { group: GROUP, version: VERSION, plural: CUSTOM_DOMAIN_PLURAL } as const;

export function kube(): {
  core: CoreV1Api;
  custom: CustomObjectsApi;
  networking: NetworkingV1Api;
  discovery: DiscoveryV1Api;
  coordination: CoordinationV1Api;
} {
  const kc = new KubeConfig();
  kc.loadFromFile(sandbox.kubeconfig);
  return {
    core: kc.makeApiClient(CoreV1Api),
    custom: kc.makeApiClient(CustomObjectsApi),
    networking: kc.makeApiClient(NetworkingV1Api),
    discovery: kc.makeApiClient(DiscoveryV1Api),
    coordination: kc.makeApiClient(CoordinationV1Api),
  };
}

export const dns = new DnsManagementClient(sandbox.dnsMgmtUrl);

/** A name unique to this run, for namespaces and hostnames. */
export function unique(prefix: string): string {
  return `${prefix}-${Date.now().toString(36)}${Math.floor(Math.random() * 1e4).toString(36)}`;
}

/** Polls `probe` every `intervalMs` until it returns a value other than undefined; throws after `timeoutMs`. */
export async function waitFor<T>(
  what: string,
  probe: () => Promise<T | undefined> | T | undefined,
  timeoutMs = 60_000,
  intervalMs = 250,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let lastError: unknown;
  while (Date.now() < deadline) {
    try {
      const value = await probe();
      if (value !== undefined) return value;
    } catch (err) {
      lastError = err;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${what}${lastError instanceof Error ? `: ${lastError.message}` : ''}`,
  );
}

/**
 * Creates a project: namespace `name` (label `portico.dev/plan` = `plan`, none when null) with a
 * Service `web` (port 80), and, when `deployed`, an EndpointSlice with one ready endpoint, which is
 * what a successful deploy leaves behind (no kubelet runs here, so the test writes it).
 */
export async function createProject(
  name: string,
  options: { plan?: string | null; deployed?: boolean } = {},
): Promise<void> {
  const { core } = kube();
  const plan = options.plan === undefined ? 'pro' : options.plan;
  const labels = plan === null ? {} : { 'portico.dev/plan': plan };
  await core.createNamespace({ body: { metadata: { name, labels } } });
  await core.createNamespacedService({
    namespace: name,
    body: {
      metadata: { name: 'web' },
      spec: { ports: [{ name: 'http', port: 80 }], selector: { app: 'web' } },
    },
  });
  if (options.deployed ?? true) await markDeployed(name);
}

/** Writes an EndpointSlice for Service `web` with one ready endpoint: the project's first deploy. */
export async function markDeployed(namespace: string): Promise<void> {
  await kube().discovery.createNamespacedEndpointSlice({
    namespace,
    body: {
      metadata: { name: 'web-1', labels: { 'kubernetes.io/service-name': 'web' } },
      addressType: 'IPv4',
      endpoints: [{ addresses: ['10.0.0.10'], conditions: { ready: true } }],
      ports: [{ name: 'http', port: 8080, protocol: 'TCP' }],
    },
  });
}

export async function createCustomDomain(
  namespace: string,
  name: string,
  spec: CustomDomainSpec,
): Promise<void> {
  await kube().custom.createNamespacedCustomObject({
    ...customDomainApi,
    namespace,
    body: { apiVersion: API_VERSION, kind: 'CustomDomain', metadata: { name, namespace }, spec },
  });
}

/**
 * A project (createProject) whose hostname `www.<ns>.example` has its CNAME to the platform, and its
 * serving CustomDomain `www` (Service `web`, port 80); `ns` is `unique(prefix)`.
 */
export async function createServingDomain(prefix: string): Promise<{ ns: string; hostname: string }> {
  const ns = unique(prefix);
  const hostname = `www.${ns}.example`;
  await createProject(ns);
  await dns.setCname(hostname, sandbox.platformCnameTarget);
  await createCustomDomain(ns, 'www', { hostname, service: { name: 'web', port: 80 } });
  return { ns, hostname };
}

/** The CustomDomain's condition `type` as status holds it; an empty object when it has none. */
export function domainCondition(
  cd: CustomDomain,
  type: string,
): { status?: string; reason?: string; message?: string } {
  return cd.status?.conditions?.find((c) => c.type === type) ?? {};
}

/** The Events of `namespace` about CustomDomain `name`, as the API server lists them. */
export async function domainEvents(namespace: string, name: string): Promise<CoreV1Event[]> {
  const list = await kube().core.listNamespacedEvent({ namespace });
  return list.items.filter((e) => e.involvedObject.kind === 'CustomDomain' && e.involvedObject.name === name);
}

/** Garbage in a TLS Secret's data: `tls.crt` and `tls.key` that parse as nothing. */
export const GARBAGE_TLS_DATA: Readonly<Record<string, string>> = {
  'tls.crt': Buffer.from('garbage').toString('base64'),
  'tls.key': Buffer.from('x').toString('base64'),
};

/**
 * Replaces the data of Secret `name` with `data`, keeping its metadata (labels, annotations,
 * resourceVersion), as an edit by hand would.
 */
export async function overwriteSecretData(
  namespace: string,
  name: string,
  data: Readonly<Record<string, string>>,
): Promise<void> {
  const secret = await kube().core.readNamespacedSecret({ namespace, name });
  await kube().core.replaceNamespacedSecret({ namespace, name, body: { ...secret, data: { ...data } } });
}

export async function getCustomDomain(namespace: string, name: string): Promise<CustomDomain> {
  return (await kube().custom.getNamespacedCustomObject({
    ...customDomainApi,
    namespace,
    name,
  })) as CustomDomain;
}

/** Waits until the CustomDomain's condition `type` has `status` (and `reason`, if given). */
export async function waitForCondition(
  namespace: string,
  name: string,
  type: string,
  status: 'True' | 'False',
  reason?: string,
  timeoutMs = 60_000,
): Promise<CustomDomain> {
  return waitFor(
    `${namespace}/${name} ${type}=${status}${reason ? ` (${reason})` : ''}`,
    async () => {
      const cd = await getCustomDomain(namespace, name);
      const c = cd.status?.conditions?.find((x) => x.type === type);
      return c?.status === status && (!reason || c.reason === reason) ? cd : undefined;
    },
    timeoutMs,
  );
}

/**
 * POSTs `body` as JSON to Pebble's management API at `path` (e.g. `/set-ari-response`), trusting the
 * sandbox's ACME CA bundle: the stack's Pebble, or the one at `managementUrl` (a second Pebble a file
 * starts, whose management API is served with the same CA). Rejects with the status and answer unless
 * Pebble answers 200.
 */
export async function postPebbleManagement(
  path: string,
  body: unknown,
  managementUrl: string = sandbox.acmeMgmtUrl,
): Promise<void> {
  const ca = await readFile(sandbox.acmeCaBundle);
  await new Promise<void>((resolve, reject) => {
    const req = request(
      `${managementUrl}${path}`,
      { method: 'POST', ca, headers: { 'user-agent': 'portico-e2e' } },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (chunk: string) => (text += chunk));
        res.on('end', () => {
          if (res.statusCode === 200) resolve();
          else reject(new Error(`POST ${path}: HTTP ${res.statusCode}: ${text}`));
        });
      },
    );
    req.on('error', reject);
    req.end(JSON.stringify(body));
  });
}

/**
 * Moves the CA's suggested renewal window (ARI, RFC 9773) of the certificate `certificatePem` into
 * the past (a 60 s window that began an hour ago), so the next check of the domain (e.g.
 * `requestVerify`) renews it. The stack's Pebble, or the one at `managementUrl`.
 */
export async function renewalWindowInThePast(
  certificatePem: string,
  managementUrl: string = sandbox.acmeMgmtUrl,
): Promise<void> {
  const past = Date.now() - 3_600_000;
  await postPebbleManagement(
    '/set-renewal-info/',
    {
      Certificate: certificatePem,
      ARIResponse: JSON.stringify({
        suggestedWindow: { start: new Date(past).toISOString(), end: new Date(past + 60_000).toISOString() },
      }),
    },
    managementUrl,
  );
}

/** GETs `url` over HTTPS trusting the sandbox's ACME CA bundle (Pebble's endpoints). */
export async function getPebble(url: string): Promise<string> {
  const ca = await readFile(sandbox.acmeCaBundle);
  return new Promise((resolve, reject) => {
    get(url, { ca }, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => {
        if (res.statusCode === 200) resolve(body);
        else reject(new Error(`GET ${url}: HTTP ${res.statusCode}`));
      });
    }).on('error', reject);
  });
}

/** The stack operator's count of failed ACME orders (`portico_acme_orders_total{result="failed"}`). */
export async function failedAcmeOrders(): Promise<number> {
  const text = await (await fetch(sandbox.controllerMetricsUrl)).text();
  const line = text.split('\n').find((l) => l.startsWith('portico_acme_orders_total{result="failed"}'));
  return Number(line?.split(' ')[1] ?? 0);
}

/**
 * Presses the spec's Verify / Re-verify button: sets the annotation `portico.dev/verify-requested-at`
 * (default value: now, RFC 3339), which makes the operator check DNS at once.
 */
export async function requestVerify(
  namespace: string,
  name: string,
  value: string = new Date().toISOString(),
): Promise<void> {
  await kube().custom.patchNamespacedCustomObject({
    ...customDomainApi,
    namespace,
    name,
    body: [{ op: 'add', path: '/metadata/annotations', value: { 'portico.dev/verify-requested-at': value } }],
  });
}

/** Deletes CustomDomain `namespace/name` (the finalizer then runs: the object may stay a moment). */
export async function deleteCustomDomain(namespace: string, name: string): Promise<void> {
  await kube().custom.deleteNamespacedCustomObject({
    ...customDomainApi,
    namespace,
    name,
  });
}

/**
 * Deletes each CustomDomain of `created` (emptying the list) and waits, up to `waitFor`'s limit each,
 * until its finalizer is done; a domain that stays is reported on stderr under `label`, not thrown, so
 * a file's clean-up never hides its own failure.
 */
export async function deleteCreatedDomains(
  created: { namespace: string; name: string }[],
  label: string,
): Promise<void> {
  for (const { namespace, name } of created.splice(0)) {
    await deleteCustomDomain(namespace, name).catch(() => undefined);
    await waitFor(`${namespace}/${name} to be gone`, async () => {
      try {
        await getCustomDomain(namespace, name);
        return undefined;
      } catch {
        return true;
      }
    }).catch((err: unknown) => {
      process.stderr.write(`${label} cleanup: ${(err as Error).message}\n`);
    });
  }
}

/** Group, version and plural of the cluster-scoped HostnameClaim API, for CustomObjectsApi calls. */
export const hostnameClaimApi = { group: GROUP, version: VERSION, plural: HOSTNAME_CLAIM_PLURAL } as const;

/** A HostnameClaim object: `hostname` held by the CustomDomain `ref` names. */
export function hostnameClaim(hostname: string, ref: CustomDomainRef): HostnameClaim {
  return {
    apiVersion: API_VERSION,
    kind: HOSTNAME_CLAIM_KIND,
    metadata: { name: hostname },
    spec: { customDomainRef: ref },
  };
}

/** The HostnameClaim of `hostname`, or undefined when there is none. */
export async function getHostnameClaim(hostname: string): Promise<HostnameClaim | undefined> {
  try {
    return (await kube().custom.getClusterCustomObject({
      ...hostnameClaimApi,
      name: hostname,
    })) as HostnameClaim;
  } catch (err) {
    if ((err as { code?: number }).code === 404) return undefined;
    throw err;
  }
}
