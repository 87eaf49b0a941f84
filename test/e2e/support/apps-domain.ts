/**
 * An operator of an e2e file's own with an apps domain (docs/customdomains.md, "The auto-generated
 * subdomain"): Knot serving the apps zone and taking TSIG-signed RFC 2136 updates, a BIND resolver
 * in front of it for a second Pebble that validates DNS-01 through it (and HTTP-01 on the stack
 * operator's challenge port), and the operator started with `--apps-domain` and the RFC 2136 flags in
 * place of the stack's, which `stopAppsDomainOperator` restarts. Also the Project reads the files
 * share.
 */
import { randomBytes, X509Certificate } from 'node:crypto';
import { PatchStrategy, setHeaderOptions, type V1Secret } from '@kubernetes/client-node';
import { VERIFY_REQUESTED_AT_ANNOTATION } from '../../../src/api/customdomain.js';
import type { Project } from '../../../src/api/project.js';
import { APPS_DOMAIN_SECRET } from '../../../src/controller/main.js';
import {
  parseRenewalRecord,
  RENEWAL_INFO_ANNOTATION,
  type RenewalRecord,
} from '../../../src/controllers/project/apps-renewal.js';
import type { TsigKey } from '../../../src/dns/dynamic-update.js';
import { OPERATOR_NAMESPACE } from '../../../src/sandbox/stack.js';
import { startChallengeZone, stopChallengeZone, type ChallengeZone } from './challenge-zone.js';
import { kube, renewalWindowInThePast, waitFor } from './cluster.js';
import { startSecondPebble, stopSecondPebble, type SecondPebble } from './second-pebble.js';
import {
  challengePort,
  restartStackController,
  runAll,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
} from './stack-controller.js';

export const projectApi = { group: 'portico.dev', version: 'v1alpha1', plural: 'projects' } as const;

/** What `startAppsDomainOperator` started. */
export interface AppsDomainStack {
  readonly zone: ChallengeZone;
  readonly pebble: SecondPebble;
  readonly operator: OperatorProcess;
  readonly stack: ControllerCommand;
  readonly pebbleName: string;
  /** The operator's ACME account Secret (`--acme-account-secret`), deleted by `stopAppsDomainOperator`. */
  readonly accountSecret: string;
}

/**
 * Starts the apps zone, the second Pebble `pebbleName` (certificates valid `certificateSeconds`) and
 * the operator `name` with `--apps-domain appsDomain`, the RFC 2136 flags, an ACME account Secret
 * of its own and `flags`, the stack's operator stopped.
 *
 * @throws Error when the stack operator is not found or a part does not start
 */
export async function startAppsDomainOperator(
  name: string,
  appsDomain: string,
  options: { pebbleName: string; certificateSeconds: number; flags: Readonly<Record<string, string>> },
): Promise<AppsDomainStack> {
  const accountSecret = `${name}-${Date.now().toString(36)}`;
  const key: TsigKey = { name: 'portico-apps.', algorithm: 'hmac-sha256', secret: randomBytes(32) };
  const zone = await startChallengeZone(appsDomain, key);
  const stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
  const pebble = await startSecondPebble(
    options.pebbleName,
    {
      default: {
        description: `${options.certificateSeconds}-second certificates`,
        validityPeriod: options.certificateSeconds,
      },
    },
    { dnsServer: `${zone.resolver.host}:${zone.resolver.port}`, httpPort: challengePort(stack) },
  );
  const operator = await startOperator(stack, name, {
    '--acme-directory-url': pebble.directoryUrl,
    '--acme-account-secret': accountSecret,
    '--apps-domain': appsDomain,
    '--dns01-server': `${zone.zoneServer.host}:${zone.zoneServer.port}`,
    '--dns01-tsig-key-name': key.name,
    '--dns01-tsig-algorithm': key.algorithm,
    '--dns01-tsig-secret': key.secret.toString('base64'),
    ...options.flags,
  });
  return { zone, pebble, operator, stack, pebbleName: options.pebbleName, accountSecret };
}

/** Stops what `startAppsDomainOperator` started (each step run, errors collected) and restarts the stack's operator. */
export async function stopAppsDomainOperator(
  started: AppsDomainStack | undefined,
  ...more: (() => Promise<unknown>)[]
): Promise<void> {
  await runAll(
    ...more,
    async () => {
      if (started) await stopOperator(started.operator);
    },
    async () => {
      if (started) await stopSecondPebble(started.pebbleName);
    },
    () => stopChallengeZone(),
    async () => {
      for (const name of [APPS_DOMAIN_SECRET, ...(started ? [started.accountSecret] : [])])
        await kube()
          .core.deleteNamespacedSecret({ namespace: OPERATOR_NAMESPACE, name })
          .catch(() => undefined);
    },
    () => restartStackController(started?.stack),
  );
}

/** Creates the Project `name` (default `site`) in `namespace`. */
export async function createProjectObject(
  namespace: string,
  spec: Project['spec'],
  name = 'site',
): Promise<void> {
  await kube().custom.createNamespacedCustomObject({
    ...projectApi,
    namespace,
    body: { apiVersion: 'portico.dev/v1alpha1', kind: 'Project', metadata: { name, namespace }, spec },
  });
}

export async function getProject(namespace: string, name = 'site'): Promise<Project> {
  return (await kube().custom.getNamespacedCustomObject({ ...projectApi, namespace, name })) as Project;
}

/** Waits until the Project's status.subdomain matches `want` for its current generation. */
export async function waitForSubdomain(
  namespace: string,
  want: Partial<NonNullable<NonNullable<Project['status']>['subdomain']>>,
  timeoutMs = 60_000,
): Promise<Project> {
  return waitFor(
    `${namespace}/site status.subdomain ${JSON.stringify(want)}`,
    async () => {
      const p = await getProject(namespace);
      if (p.status?.observedGeneration !== p.metadata.generation) return undefined;
      const s = p.status?.subdomain;
      if (s === undefined) return undefined;
      return Object.entries(want).every(([k, v]) => (s as unknown as Record<string, unknown>)[k] === v)
        ? p
        : undefined;
    },
    timeoutMs,
  );
}

/** The wildcard Secret in the operator's namespace, or undefined. */
export async function readAppsSecret(): Promise<V1Secret | undefined> {
  return kube()
    .core.readNamespacedSecret({ namespace: OPERATOR_NAMESPACE, name: APPS_DOMAIN_SECRET })
    .catch(() => undefined);
}

/** The leaf certificate of a TLS Secret. */
export function leafOf(secret: V1Secret): X509Certificate {
  return new X509Certificate(Buffer.from(secret.data?.['tls.crt'] ?? '', 'base64'));
}

/**
 * The `namespace/name` of each Secret in `secrets` whose leaf certificate is the wildcard of
 * `appsDomain` (its only name `*.<appsDomain>`): a copy of the apps domain's key. Secrets without a
 * parsable certificate (a CustomDomain's before issuance, any other data) are not copies.
 */
export function wildcardCopies(secrets: readonly V1Secret[], appsDomain: string): string[] {
  const wildcard = (s: V1Secret): boolean => {
    try {
      return leafOf(s).subjectAltName === `DNS:*.${appsDomain}`;
    } catch {
      return false;
    }
  };
  return secrets.filter(wildcard).map((s) => `${s.metadata?.namespace ?? ''}/${s.metadata?.name ?? ''}`);
}

/** The renewal decision the operator keeps on the wildcard Secret (`portico.dev/renewal-info`), if any. */
export function renewalRecordOf(secret: V1Secret | undefined): RenewalRecord | undefined {
  return parseRenewalRecord(secret?.metadata?.annotations?.[RENEWAL_INFO_ANNOTATION]);
}

/** The wildcard Secret and its leaf certificate, once it holds one. */
async function readWildcard(): Promise<{ secret: V1Secret; leaf: X509Certificate } | undefined> {
  const secret = await readAppsSecret();
  return secret?.data?.['tls.crt'] === undefined ? undefined : { secret, leaf: leafOf(secret) };
}

/**
 * The wildcard certificate in the Secret and the renewal decision the operator keeps for it, read
 * together, once the decision has the CA's ARI answer (RFC 9773) for that certificate.
 */
export async function wildcardWithDecision(
  timeoutMs = 30_000,
): Promise<{ leaf: X509Certificate; decision: RenewalRecord; annotation: string }> {
  return waitFor(
    "the wildcard Secret with the operator's ARI decision for its certificate",
    async () => {
      const held = await readWildcard();
      if (held === undefined) return undefined;
      const { secret, leaf } = held;
      const decision = renewalRecordOf(secret);
      const annotation = secret.metadata?.annotations?.[RENEWAL_INFO_ANNOTATION] ?? '';
      return decision?.serialNumber === leaf.serialNumber && decision.ari
        ? { leaf, decision, annotation }
        : undefined;
    },
    timeoutMs,
  );
}

/**
 * Makes the wildcard due for renewal now, as a CA would (RFC 9773): the Pebble at `managementUrl`
 * answers renewalInfo for `leaf` with a window in the past (`/set-renewal-info/`), and a verify
 * request on the wildcard Secret (`portico.dev/verify-requested-at`, what a platform team writes)
 * makes the operator ask again at its next look (within its `--resync-seconds`).
 */
export async function wildcardWindowInThePast(leaf: X509Certificate, managementUrl: string): Promise<void> {
  await renewalWindowInThePast(leaf.toString(), managementUrl);
  await kube().core.patchNamespacedSecret(
    {
      namespace: OPERATOR_NAMESPACE,
      name: APPS_DOMAIN_SECRET,
      body: { metadata: { annotations: { [VERIFY_REQUESTED_AT_ANNOTATION]: `renew-${Date.now()}` } } },
    },
    setHeaderOptions('Content-Type', PatchStrategy.MergePatch),
  );
}

/** Waits until the wildcard Secret holds a certificate other than `old`; resolves to it and the Secret. */
export async function wildcardRenewedFrom(
  old: X509Certificate,
  timeoutMs = 120_000,
): Promise<{ leaf: X509Certificate; secret: V1Secret }> {
  return waitFor(
    'the wildcard Secret to hold a renewed certificate',
    async () => {
      const held = await readWildcard();
      return held !== undefined && held.leaf.serialNumber !== old.serialNumber ? held : undefined;
    },
    timeoutMs,
    1000,
  );
}
