/**
 * The RateLimitPolicy controller's work-queue keys for Envoy Gateway (docs/routing.md, "Envoy
 * Gateway"): one key per Gateway whose EnvoyPatchPolicy Portico keeps, and one that queues them all
 * (at start and each resync). Handled beside the policies' keys by the controller's worker loop.
 */
import type { RateLimitPolicy } from '../../api/ratelimitpolicy.js';
import type { TargetVerdict } from './attachment.js';
import {
  envoyGatewayDisabledVerdict,
  targetKey,
  type EnvoyGatewayAttacher,
  type EnvoyGatewayWatchHandlers,
} from './envoy-gateway-attacher.js';
import { isEnvoyGatewayTarget } from './envoy-gateway-attachment.js';
import { targetsOf } from './attachment.js';

/** The prefix of a Gateway's EnvoyPatchPolicy key (`envoypatchpolicy:<namespace>/<name>` of the Gateway). */
const EPP_KEY_PREFIX = 'envoypatchpolicy:';
/** The key that queues every Gateway whose EnvoyPatchPolicy Portico keeps (at start and each resync). */
export const EPP_LIST_KEY = 'envoypatchpolicies';
/** How soon a policy whose HTTPRoute targets wait on Envoy Gateway is looked at again, milliseconds. */
export const ENVOY_GATEWAY_PENDING_MS = 2_000;

/** The queue key of the EnvoyPatchPolicy of `gateway` (`<namespace>/<name>`). */
export function envoyPatchPolicyKey(gateway: string): string {
  return `${EPP_KEY_PREFIX}${gateway}`;
}

/** Whether `key` is one of the Envoy Gateway keys rather than a policy's `namespace/name`. */
export function isEnvoyGatewayKey(key: string): boolean {
  return key === EPP_LIST_KEY || key.startsWith(EPP_KEY_PREFIX);
}

/**
 * The verdicts of `policy`'s HTTPRoute targets, by target key (disabled when the attachment is off),
 * queuing the EnvoyPatchPolicy of each Gateway that does not carry this generation of the policy yet.
 */
export async function envoyGatewayVerdicts(
  eg: EnvoyGatewayAttacher | undefined,
  policy: RateLimitPolicy,
  policies: readonly RateLimitPolicy[],
  enqueue: (key: string) => void,
): Promise<{ verdicts: ReadonlyMap<string, TargetVerdict>; pending: boolean }> {
  if (eg === undefined) {
    const refs = targetsOf(policy).filter(isEnvoyGatewayTarget);
    return {
      verdicts: new Map(refs.map((r) => [targetKey(r), envoyGatewayDisabledVerdict(r)])),
      pending: false,
    };
  }
  const read = await eg.verdicts(policy, policies);
  for (const gateway of read.behind) enqueue(envoyPatchPolicyKey(gateway));
  return read;
}

/**
 * Handles an Envoy Gateway key: a Gateway's EnvoyPatchPolicy applied (or deleted) and the policies
 * whose entry changed queued; or, for the list key, every Gateway whose EnvoyPatchPolicy Portico keeps
 * queued.
 *
 * @param isPolicy whether a `namespace/name` is a policy the cache holds
 */
export async function reconcileEnvoyGatewayKey(
  eg: EnvoyGatewayAttacher | undefined,
  key: string,
  policies: readonly RateLimitPolicy[],
  enqueue: (key: string) => void,
  isPolicy: (key: string) => boolean,
): Promise<void> {
  if (eg === undefined) return;
  if (key === EPP_LIST_KEY) {
    for (const epp of await eg.patchPolicies()) {
      const gateway = (epp as { spec?: { targetRef?: { name?: string } } }).spec?.targetRef?.name;
      if (gateway !== undefined) enqueue(envoyPatchPolicyKey(`${epp.metadata.namespace}/${gateway}`));
    }
    return;
  }
  const changed = await eg.syncGateway(key.slice(EPP_KEY_PREFIX.length), policies);
  for (const policyKey of changed) if (isPolicy(policyKey)) enqueue(policyKey);
}

/**
 * What the attacher's watches of HTTPRoutes, Gateways and ListenerSets queue: a Gateway's
 * EnvoyPatchPolicies key, and the policies that target a changed HTTPRoute or Gateway.
 *
 * @param policies the policies' cache (`list(namespace)`)
 * @param queue the controller's work queue
 */
export function envoyGatewayWatch(
  policies: { list(namespace: string): readonly RateLimitPolicy[] },
  queue: { add(key: string): void },
): EnvoyGatewayWatchHandlers {
  return {
    gateway: (gateway) => {
      queue.add(envoyPatchPolicyKey(gateway));
    },
    targeted: (namespace, kind, name) => {
      for (const p of policies.list(namespace))
        if (targetsOf(p).some((r) => isEnvoyGatewayTarget(r) && r.kind === kind && r.name === name))
          queue.add(`${namespace}/${p.metadata.name}`);
    },
  };
}
