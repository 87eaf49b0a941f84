/**
 * Envoy Gateway's rate-limit attacher as the RateLimitPolicy controller drives it
 * (`--envoy-gateway-attachment`; docs/routing.md, "Envoy Gateway"): its work-queue keys, one per
 * Gateway whose EnvoyPatchPolicy Portico keeps and one that queues them all (at start and each
 * resync), handled beside the policies' keys by the controller's worker loop; the verdicts of a
 * policy's targets (attacher.ts reads and writes the objects).
 */
import type { RateLimitPolicy } from '../../api/ratelimitpolicy.js';
import type { TargetVerdict } from '../../controllers/ratelimitpolicy/attachment.js';
import {
  EnvoyGatewayAttacher,
  envoyGatewayDisabledVerdict,
  type EnvoyGatewayWatchHandlers,
} from './attacher.js';
import type { RateLimitAttacherModule } from '../types.js';
import { envoyGateway } from './index.js';
import { isEnvoyGatewayTarget } from '../../controllers/ratelimitpolicy/envoy-gateway-attachment.js';
import { targetsOf } from '../../controllers/ratelimitpolicy/attachment.js';

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
 * The verdicts of `policy`'s HTTPRoute and Gateway targets, by target key, queuing the
 * EnvoyPatchPolicy of each Gateway that does not carry this generation of the policy yet.
 */
export async function envoyGatewayVerdicts(
  eg: EnvoyGatewayAttacher,
  policy: RateLimitPolicy,
  policies: readonly RateLimitPolicy[],
  enqueue: (key: string) => void,
): Promise<{ verdicts: ReadonlyMap<string, TargetVerdict>; pending: boolean }> {
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
  eg: EnvoyGatewayAttacher,
  key: string,
  policies: readonly RateLimitPolicy[],
  enqueue: (key: string) => void,
  isPolicy: (key: string) => boolean,
): Promise<void> {
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

/** Envoy Gateway's attacher, as attacher-registry.ts lists it. */
export const envoyGatewayAttacher: RateLimitAttacherModule = {
  dataPlane: envoyGateway,
  disabledVerdict: envoyGatewayDisabledVerdict,
  create: (context) => {
    const { wiring, policies, enqueue } = context;
    const eg = new EnvoyGatewayAttacher({
      kubeConfig: context.kubeConfig,
      objects: context.objects,
      service: {
        serviceName: wiring.extensionService.serviceName,
        serviceNamespace: wiring.extensionService.namespace,
        servicePort: wiring.extensionService.servicePort,
        clusterDomain: wiring.clusterDomain,
        timeoutMs: wiring.extensionService.timeoutMs,
        headers: wiring.headers,
      },
      log: context.log,
      watch: envoyGatewayWatch(policies, { add: enqueue }),
    });
    return {
      resyncKeys: [EPP_LIST_KEY],
      start: () => {
        eg.start();
      },
      stop: () => eg.stop(),
      ownsKey: isEnvoyGatewayKey,
      reconcileKey: async (key) => {
        await reconcileEnvoyGatewayKey(
          eg,
          key,
          policies.list(),
          enqueue,
          (k) => policies.get(k) !== undefined,
        );
        return undefined;
      },
      attach: async (policy) => {
        const read = await envoyGatewayVerdicts(eg, policy, policies.list(), enqueue);
        return {
          verdicts: read.verdicts,
          ...(read.pending ? { requeueAfterMs: ENVOY_GATEWAY_PENDING_MS } : {}),
        };
      },
      // A policy gone: the EnvoyPatchPolicies of the Gateways that carry it are written again without it.
      settle: async (namespace, name, policy) => {
        if (policy !== undefined) return;
        for (const gateway of await eg.gatewaysCarrying(`${namespace}/${name}`))
          enqueue(envoyPatchPolicyKey(gateway));
      },
    };
  },
};
