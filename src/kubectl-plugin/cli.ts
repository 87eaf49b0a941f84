#!/usr/bin/env node
/**
 * `kubectl portico status|verify|explain [TYPE] NAME [-n namespace]`: the kubectl plugin (the npm
 * package's bin `kubectl-portico`; kubectl runs any `kubectl-<name>` executable on PATH as
 * `kubectl <name>`). It talks to the API server with the user's kubeconfig, as kubectl does
 * (`--kubeconfig`, else `$KUBECONFIG`, else `~/.kube/config`, else in-cluster), never through kubectl.
 *
 * Exit codes: 0 done, 1 error (the object not found, the API server refused or unreachable), 2 usage.
 * What is printed is built by the pure format.ts and resources.ts; this file only reads and writes
 * the API.
 */
import {
  CoreV1Api,
  CustomObjectsApi,
  KubeConfig,
  KubernetesObjectApi,
  PatchStrategy,
  type CoreV1Event,
} from '@kubernetes/client-node';
import {
  API_VERSION,
  CUSTOM_DOMAIN_KIND,
  CUSTOM_DOMAIN_PLURAL,
  GROUP,
  VERIFY_REQUESTED_AT_ANNOTATION,
  VERSION,
  type CustomDomain,
} from '../api/customdomain.js';
import { PROJECT_PLURAL, type Project } from '../api/project.js';
import { RATE_LIMIT_POLICY_PLURAL, type RateLimitPolicy } from '../api/ratelimitpolicy.js';
import { buildInfo, formatVersion } from '../build-info.js';
import { apiStatusCode } from '../kube/errors.js';
import { parsePluginArgs, USAGE, type Output, type ResourceKind } from './args.js';
import { explain, formatExplanation, formatStatus, statusReport, type DomainEvent } from './format.js';
import {
  formatPolicyStatus,
  formatProjectStatus,
  policyReport,
  projectReport,
  serializeReport,
} from './resources.js';

/** A failure to report to the user with exit code 1; `message` says what happened and what to do. */
export class PluginError extends Error {
  readonly code = 'PORTICO_PLUGIN_ERROR';
  constructor(message: string) {
    super(message);
    this.name = 'PluginError';
  }
}

interface Target {
  kc: KubeConfig;
  namespace: string;
  name: string;
}

/** Loads the kubeconfig as kubectl would; throws PluginError for an unknown context. */
function loadKubeConfig(path: string | undefined, context: string | undefined): KubeConfig {
  const kc = new KubeConfig();
  if (path) kc.loadFromFile(path);
  else kc.loadFromDefault();
  if (context !== undefined) {
    if (kc.getContextObject(context) === null)
      throw new PluginError(`context "${context}" is not in the kubeconfig`);
    kc.setCurrentContext(context);
  }
  return kc;
}

/** The context's namespace, else `default` (kubectl's rule). */
function contextNamespace(kc: KubeConfig): string {
  return kc.getContextObject(kc.getCurrentContext())?.namespace ?? 'default';
}

/** The plural and the `kubectl get` name of each kind. */
const PLURALS: Record<ResourceKind, string> = {
  CustomDomain: CUSTOM_DOMAIN_PLURAL,
  RateLimitPolicy: RATE_LIMIT_POLICY_PLURAL,
  Project: PROJECT_PLURAL,
};

/** Reads one object; a 404 is a PluginError naming what was searched and how to list them. */
async function readObject<T>(resource: ResourceKind, { kc, namespace, name }: Target): Promise<T> {
  const plural = PLURALS[resource];
  try {
    return (await kc.makeApiClient(CustomObjectsApi).getNamespacedCustomObject({
      group: GROUP,
      version: VERSION,
      plural,
      namespace,
      name,
    })) as T;
  } catch (err) {
    if (apiStatusCode(err) === 404) {
      throw new PluginError(
        `${resource.toLowerCase()} "${name}" not found in namespace "${namespace}" (list them: kubectl get ${plural} -A; a CRD not installed also answers 404)`,
      );
    }
    throw err;
  }
}

function readDomain(target: Target): Promise<CustomDomain> {
  return readObject<CustomDomain>('CustomDomain', target);
}

function toDomainEvent(e: CoreV1Event): DomainEvent {
  const when = e.lastTimestamp ?? e.eventTime ?? e.metadata.creationTimestamp;
  return {
    type: e.type ?? '',
    reason: e.reason ?? '',
    message: e.message ?? '',
    count: e.count ?? 1,
    lastSeen: when === undefined ? undefined : new Date(when),
    sequence: Number(e.metadata.resourceVersion ?? 0) || 0,
  };
}

/** The core/v1 Events whose involvedObject is `object` (by uid). */
async function readEvents(
  kc: KubeConfig,
  object: { metadata: { uid?: string; namespace: string } },
): Promise<DomainEvent[]> {
  const uid = object.metadata.uid;
  if (uid === undefined) return [];
  const list = await kc.makeApiClient(CoreV1Api).listNamespacedEvent({
    namespace: object.metadata.namespace,
    fieldSelector: `involvedObject.uid=${uid}`,
  });
  return list.items.map(toDomainEvent);
}

async function status(resource: ResourceKind, target: Target, output: Output): Promise<string> {
  const now = new Date();
  const print = <R extends object>(report: R, text: (r: R) => string): string =>
    output === 'text' ? text(report) : serializeReport(report, output);
  if (resource === 'RateLimitPolicy') {
    const policy = await readObject<RateLimitPolicy>(resource, target);
    return print(policyReport(policy, await readEvents(target.kc, policy), now), formatPolicyStatus);
  }
  if (resource === 'Project') {
    const project = await readObject<Project>(resource, target);
    return print(projectReport(project, await readEvents(target.kc, project), now), formatProjectStatus);
  }
  const domain = await readDomain(target);
  const report = statusReport(domain, await readEvents(target.kc, domain), now);
  return print(report, (r) => formatStatus(r, now));
}

/** Sets the verify annotation to now (RFC 3339, seconds) with a merge patch; says what it did. */
async function verify(target: Target): Promise<string> {
  const before = await readDomain(target);
  const previous = before.metadata.annotations?.[VERIFY_REQUESTED_AT_ANNOTATION];
  const value = `${new Date().toISOString().slice(0, 19)}Z`;
  await KubernetesObjectApi.makeApiClient(target.kc).patch(
    {
      apiVersion: API_VERSION,
      kind: CUSTOM_DOMAIN_KIND,
      metadata: {
        name: target.name,
        namespace: target.namespace,
        annotations: { [VERIFY_REQUESTED_AT_ANNOTATION]: value },
      },
    },
    undefined,
    undefined,
    undefined,
    undefined,
    PatchStrategy.MergePatch,
  );
  return [
    `customdomain ${target.namespace}/${target.name}: annotation ${VERIFY_REQUESTED_AT_ANNOTATION}=${value} set (was ${previous ?? 'not set'}).`,
    'Portico checks DNS now, asks the CA for renewal information again, and retries a failed certificate attempt without waiting for its backoff.',
    `Follow it: kubectl portico status ${target.name} -n ${target.namespace}`,
    '',
  ].join('\n');
}

async function explainDomain(target: Target): Promise<string> {
  return formatExplanation(explain(await readDomain(target)));
}

/**
 * Runs the plugin with `argv` (the arguments after `kubectl portico`); writes to stdout and stderr
 * and resolves to the exit code. Never rejects.
 */
export async function runPlugin(argv: readonly string[]): Promise<number> {
  const args = parsePluginArgs(argv);
  if (args.kind === 'help') {
    process.stdout.write(USAGE);
    return 0;
  }
  if (args.kind === 'version') {
    process.stdout.write(formatVersion('kubectl-portico', buildInfo(), process.version));
    return 0;
  }
  if (args.kind === 'usage-error') {
    process.stderr.write(`kubectl portico: ${args.message}\n\n${USAGE}`);
    return 2;
  }
  try {
    const kc = loadKubeConfig(args.kubeconfig, args.context);
    const target = { kc, name: args.name, namespace: args.namespace ?? contextNamespace(kc) };
    const commands = {
      status: () => status(args.resource, target, args.output),
      verify: () => verify(target),
      explain: () => explainDomain(target),
    };
    process.stdout.write(await commands[args.command]());
    return 0;
  } catch (err) {
    process.stderr.write(`kubectl portico ${args.command}: ${describeError(err)}\n`);
    return 1;
  }
}

/** A one-line account of `err`: the API server's message when it sent one. */
function describeError(err: unknown): string {
  if (err instanceof PluginError) return err.message;
  const code = apiStatusCode(err);
  const body = typeof err === 'object' && err !== null && 'body' in err ? err.body : undefined;
  if (code !== undefined) {
    const message = typeof body === 'string' ? (/"message":"([^"]*)"/.exec(body)?.[1] ?? body) : '';
    return `the API server answered ${code}: ${message}`;
  }
  return err instanceof Error ? err.message : String(err);
}

// Pipes and files are written synchronously on Linux, so exiting at once loses no output. No
// top-level await: the single executable (scripts/build-plugin-sea.ts) bundles this as CommonJS.
void runPlugin(process.argv.slice(2)).then((code) => process.exit(code));
