/**
 * Attaching a RateLimitPolicy to Contour through its `spec.targetRefs` (docs/ratelimits.md,
 * "Attaching to Contour"): what the operator applies to each target HTTPProxy, the ExtensionService
 * that points Contour at the rate-limit service, and the `Attached` verdict. Pure: the controller
 * reads the HTTPProxies and applies what this returns.
 *
 * Facts from Contour v1.33.8's source this rests on:
 * - Contour sends ONE rate-limit `domain` for every HTTPProxy (its config's `rateLimitService.domain`,
 *   `internal/envoy/v3/ratelimit.go` `GlobalRateLimitFilter`), so each descriptor's first entry names
 *   the policy: a `genericKey` `portico.dev/policy=<namespace>/<name>` (the server maps it:
 *   `src/ratelimit/gateway-domain.ts`).
 * - A `requestHeader` entry becomes Envoy's `request_headers` action without `skip_if_absent`
 *   (`GlobalRateLimits`): when the header is missing Envoy drops the WHOLE descriptor. So the optional
 *   plan takes two descriptors that exclude each other: one with the plan header, one for requests
 *   without it (`requestHeaderValueMatch` with `notpresent`, which Envoy sends as the entry
 *   `header_match=<value>`; the server ignores that entry and applies the default plan). A third
 *   descriptor, for requests without the key id header, carries `remoteAddress` (Envoy's
 *   `remote_address` action), so the server applies the policy's `missingKeyId` rule to them
 *   instead of their passing unlimited.
 * - `spec.virtualhost.rateLimitPolicy.global.descriptors` is an atomic list (no list type in
 *   Contour's CRD): one field manager owns all of it, so two writers conflict instead of merging.
 */
import { createHash } from 'node:crypto';
import type { Condition } from '../../api/customdomain.js';
import { type PolicyTargetRef, type RateLimitPolicy } from '../../api/ratelimitpolicy.js';
import { policyDescriptors, type RateLimitHeaders } from '../../routing/ratelimit-descriptors.js';
import { contour } from '../../data-planes/contour/index.js';
import { DATA_PLANE_MODULES } from '../../data-planes/registry.js';
import { isAttachmentTarget, type RateLimitWiring, type TargetVerdict } from '../../data-planes/types.js';

export const CONTOUR_GROUP = 'projectcontour.io';
export const HTTPPROXY_KIND = 'HTTPProxy';
export const HTTPPROXY_API_VERSION = 'projectcontour.io/v1';
export const HTTPPROXY_PLURAL = 'httpproxies';
export const EXTENSION_SERVICE_KIND = 'ExtensionService';
export const EXTENSION_SERVICE_API_VERSION = 'projectcontour.io/v1alpha1';
export const EXTENSION_SERVICE_PLURAL = 'extensionservices';

/** Every field manager of a policy's HTTPProxy fields starts with this. */
export const ATTACHMENT_MANAGER_PREFIX = 'portico-ratelimit/';
/** The API server's bound on a field manager's name (characters). */
const MAX_FIELD_MANAGER_CHARS = 128;

/** The request headers the gateway's auth layer sets (the controller's flags). */
export type AttachmentHeaders = RateLimitHeaders;

/** Defaults of `--ratelimit-key-id-header` and `--ratelimit-plan-header`. */
export const DEFAULT_ATTACHMENT_HEADERS: AttachmentHeaders = { keyId: 'x-api-key-id', plan: 'x-api-plan' };

/** An HTTPProxy as far as attachment reads it (projectcontour.io/v1). */
export interface HTTPProxy {
  apiVersion?: string;
  kind?: string;
  metadata: {
    name: string;
    namespace: string;
    generation?: number;
    resourceVersion?: string;
    uid?: string;
    managedFields?: { manager?: string; operation?: string }[];
  };
  spec?: {
    virtualhost?: { fqdn?: string; rateLimitPolicy?: unknown };
    [key: string]: unknown;
  };
  status?: {
    /** `valid`, `invalid` or `orphaned`. */
    currentStatus?: string;
    description?: string;
    conditions?: {
      type: string;
      status: string;
      observedGeneration?: number;
      reason?: string;
      message?: string;
      errors?: { type?: string; reason?: string; message?: string }[];
    }[];
  };
}

/**
 * The field manager of one policy's fields on its HTTPProxies: `portico-ratelimit/<policy name>`
 * (the namespace is the HTTPProxy's own). One manager per policy, so two policies that target one
 * HTTPProxy conflict (the second is told which policy holds the field) instead of overwriting each
 * other, and the operator can tell its fields on an HTTPProxy the policy no longer targets. A name that
 * would make it longer than the API server's 128 characters is cut to 92 characters and followed by
 * `-` and 16 hex digits of its SHA-256.
 */
export function attachmentFieldManager(policyName: string): string {
  const plain = `${ATTACHMENT_MANAGER_PREFIX}${policyName}`;
  if (plain.length <= MAX_FIELD_MANAGER_CHARS) return plain;
  const digest = createHash('sha256').update(policyName).digest('hex').slice(0, 16);
  return `${ATTACHMENT_MANAGER_PREFIX}${policyName.slice(0, 92)}-${digest}`;
}

/**
 * Trims a cached HTTPProxy to what attachment reads (informer `keep`): `spec.virtualhost`'s `fqdn` and
 * `rateLimitPolicy` (and whether there is a virtual host at all), and Contour's verdict in `status`
 * (`currentStatus`, `description`, the `Valid` condition). Routes, includes and TLS settings, the bulk
 * of an HTTPProxy, are dropped. Mutates `proxy`.
 */
export function trimProxy(proxy: HTTPProxy): void {
  const vh = proxy.spec?.virtualhost;
  proxy.spec =
    vh === undefined
      ? {}
      : {
          virtualhost: {
            ...(vh.fqdn === undefined ? {} : { fqdn: vh.fqdn }),
            ...(vh.rateLimitPolicy === undefined ? {} : { rateLimitPolicy: vh.rateLimitPolicy }),
          },
        };
  const status = proxy.status;
  if (status === undefined) return;
  proxy.status = {
    ...(status.currentStatus === undefined ? {} : { currentStatus: status.currentStatus }),
    ...(status.description === undefined ? {} : { description: status.description }),
    conditions: (status.conditions ?? []).filter((c) => c.type === 'Valid'),
  };
}

/**
 * True when `ref` is a kind this operator can wire into Contour: the targets of Contour's
 * `rateLimitAttachment` (src/data-planes/contour, an HTTPProxy).
 */
export function isSupportedTarget(ref: PolicyTargetRef): boolean {
  return isAttachmentTarget(contour, ref);
}

/** `group/kind name` of a target, for messages (`HTTPProxy api` for the core case). */
export function describeTarget(ref: PolicyTargetRef): string {
  return ref.group === '' ? `${ref.kind} ${ref.name}` : `${ref.group}/${ref.kind} ${ref.name}`;
}

/** The policy's targets, each once, in the order written. */
export function targetsOf(policy: RateLimitPolicy): PolicyTargetRef[] {
  const seen = new Set<string>();
  const out: PolicyTargetRef[] = [];
  for (const ref of policy.spec.targetRefs ?? []) {
    const key = `${ref.group}/${ref.kind}/${ref.name}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push(ref);
  }
  return out;
}

/**
 * Contour's `spec.virtualhost.rateLimitPolicy.global.descriptors` for a policy: the policy's
 * descriptors (routing/ratelimit-descriptors.ts, the one definition) in Contour's terms. With the plan
 * header, `[portico.dev/policy, key_id, plan]`; without it,
 * `[portico.dev/policy, key_id, header_match=no-plan-header]`; without the key id header,
 * `[portico.dev/policy, header_match=no-key-id-header, remote_address]`.
 */
export function contourDescriptors(policy: RateLimitPolicy, headers: AttachmentHeaders): unknown[] {
  return policyDescriptors(policy, headers).map((entries) => ({
    entries: entries.map((entry) => {
      switch (entry.kind) {
        case 'fixed':
          return { genericKey: { key: entry.key, value: entry.value } };
        case 'header':
          return { requestHeader: { headerName: entry.header, descriptorKey: entry.key } };
        case 'headerAbsent':
          return {
            requestHeaderValueMatch: {
              headers: [{ name: entry.header, notpresent: true }],
              expectMatch: true,
              value: entry.value,
            },
          };
        case 'remoteAddress':
          return { remoteAddress: {} };
      }
    }),
  }));
}

/**
 * The server-side apply configuration of a policy's fields on one HTTPProxy (apply it with
 * `attachmentFieldManager(policy)`, never with force): only
 * `spec.virtualhost.rateLimitPolicy.global.descriptors`. `resourceVersion` is the one the operator
 * judged the HTTPProxy at: the API server refuses the apply (409) when it changed since (judged again
 * at the next pass). It does NOT stop an apply from creating a deleted HTTPProxy (kube-apiserver
 * v1.37 creates it regardless); for this configuration Contour's CRD does, which requires
 * `virtualhost.fqdn` (and RBAC without `create` on HTTPProxies would: an apply that would create is
 * authorized as `create`).
 */
export function httpProxyApply(
  policy: RateLimitPolicy,
  target: { name: string; resourceVersion: string },
  headers: AttachmentHeaders,
): HTTPProxy {
  return {
    apiVersion: HTTPPROXY_API_VERSION,
    kind: HTTPPROXY_KIND,
    metadata: {
      name: target.name,
      namespace: policy.metadata.namespace,
      resourceVersion: target.resourceVersion,
    },
    spec: {
      virtualhost: { rateLimitPolicy: { global: { descriptors: contourDescriptors(policy, headers) } } },
    },
  };
}

/**
 * The empty apply configuration that removes every field a manager owns on an HTTPProxy, never the
 * HTTPProxy (`resourceVersion` as in `httpProxyApply`). Applied to an HTTPProxy deleted since it was
 * read, it creates an empty one where the operator may create HTTPProxies; the attacher then deletes
 * that object by its uid (contour-attacher.ts `release`).
 */
export function httpProxyRelease(target: {
  namespace: string;
  name: string;
  resourceVersion: string;
}): HTTPProxy {
  return {
    apiVersion: HTTPPROXY_API_VERSION,
    kind: HTTPPROXY_KIND,
    metadata: { name: target.name, namespace: target.namespace, resourceVersion: target.resourceVersion },
  };
}

/** The managers of a policy's fields on `proxy` (`portico-ratelimit/...`), from its managedFields. */
export function attachmentManagersOn(proxy: HTTPProxy): string[] {
  const managers = new Set<string>();
  for (const entry of proxy.metadata.managedFields ?? []) {
    if (entry.operation === 'Apply' && entry.manager?.startsWith(ATTACHMENT_MANAGER_PREFIX)) {
      managers.add(entry.manager);
    }
  }
  return [...managers];
}

/** Where Contour finds the rate-limit service (the controller's flags). */
export type ExtensionServiceOptions = RateLimitWiring['extensionService'];

/**
 * The ExtensionService (projectcontour.io/v1alpha1) Contour's `rateLimitService.extensionService`
 * names: the rate-limit server's Service over plaintext HTTP/2 (`h2c`), Envoy's rate-limit protocol
 * v3, and the response timeout Contour gives the ratelimit filter (Contour reads it when it starts:
 * `cmd/contour/serve.go` `getExtensionSvcConfig`).
 */
export function extensionServiceApply(o: ExtensionServiceOptions): Record<string, unknown> {
  return {
    apiVersion: EXTENSION_SERVICE_API_VERSION,
    kind: EXTENSION_SERVICE_KIND,
    metadata: { name: o.name, namespace: o.namespace },
    spec: {
      protocol: 'h2c',
      protocolVersion: 'v3',
      services: [{ name: o.serviceName, port: o.servicePort }],
      timeoutPolicy: { response: `${o.timeoutMs}ms` },
    },
  };
}

/** What the controller found or did for one target. */
export type TargetOutcome =
  | { readonly kind: 'unsupported' }
  | { readonly kind: 'disabled' }
  | { readonly kind: 'notFound' }
  | { readonly kind: 'notRoot' }
  | { readonly kind: 'conflict'; readonly message: string }
  | { readonly kind: 'applyFailed'; readonly message: string }
  /** Applied (or already as desired); `proxy` is the HTTPProxy as the API server returned it. */
  | { readonly kind: 'applied'; readonly proxy: HTTPProxy };

/** One target's verdict (its type is the data planes' attachers', data-planes/types.ts). */
export type { TargetVerdict };

/** Contour's own words on why it refused `proxy`: its description and each error of `Valid`. */
function contourRefusal(proxy: HTTPProxy, valid: NonNullable<HTTPProxy['status']>['conditions']): string {
  const errors = (valid?.[0]?.errors ?? []).map((e) => e.message ?? e.reason ?? '').filter((m) => m !== '');
  const parts = [proxy.status?.description ?? '', ...errors].filter((m) => m !== '');
  return parts.length === 0 ? 'no reason given' : [...new Set(parts)].join('; ');
}

/** The verdict on an applied HTTPProxy, from the status Contour wrote for its current generation. */
function appliedVerdict(ref: PolicyTargetRef, proxy: HTTPProxy): TargetVerdict {
  const what = describeTarget(ref);
  const generation = proxy.metadata.generation ?? 0;
  const valid = (proxy.status?.conditions ?? []).filter(
    (c) => c.type === 'Valid' && (c.observedGeneration ?? -1) >= generation,
  );
  if (valid.length === 0) {
    return {
      ref,
      wired: false,
      reason: 'AwaitingContour',
      message: `${what}: descriptors applied; Contour has not yet reported on generation ${generation}`,
    };
  }
  if (valid[0]?.status !== 'True' || proxy.status?.currentStatus === 'invalid') {
    return {
      ref,
      wired: false,
      reason: 'RefusedByContour',
      message: `${what}: Contour reports it invalid: ${contourRefusal(proxy, valid)}`,
    };
  }
  const fqdn = proxy.spec?.virtualhost?.fqdn;
  return {
    ref,
    wired: true,
    reason: 'Attached',
    message: `${what}${fqdn === undefined ? '' : ` (${fqdn})`}: descriptors applied and accepted by Contour`,
  };
}

/** `a`, `a and b`, `a, b and c`. */
function listed(items: readonly string[]): string {
  return items.length <= 1 ? items.join('') : `${items.slice(0, -1).join(', ')} and ${items.at(-1) ?? ''}`;
}

const COUNT_WORDS = ['', 'one', 'two', 'three', 'four'];

/**
 * The targets some data plane wires (each module's `rateLimitAttachment`, in registry order), for
 * the UnsupportedTarget message; a data plane whose attachment is off by default says which are its
 * own (`the last two`, or their names when others follow): `projectcontour.io/HTTPProxy,
 * gateway.networking.k8s.io/HTTPRoute and gateway.networking.k8s.io/Gateway (the last two with
 * Envoy Gateway)`.
 */
const SUPPORTED_TARGETS = (() => {
  const modules = DATA_PLANE_MODULES.flatMap((m) =>
    m.rateLimitAttachment === undefined || m.rateLimitAttachment.targets.length === 0
      ? []
      : [{ name: m.displayName, attachment: m.rateLimitAttachment }],
  );
  const all = modules.flatMap((m) => m.attachment.targets.map((t) => `${t.group}/${t.kind}`));
  const notes: string[] = [];
  let end = all.length;
  for (const m of modules.toReversed()) {
    const count = m.attachment.targets.length;
    if (!m.attachment.defaultOn) {
      const which =
        end === all.length
          ? `the last ${COUNT_WORDS[count] ?? String(count)}`
          : listed(all.slice(end - count, end));
      notes.unshift(`${which} with ${m.name}`);
    }
    end -= count;
  }
  return `${listed(all)}${notes.length === 0 ? '' : ` (${notes.join('; ')})`}`;
})();

/**
 * The verdict on one target.
 *
 * @param namespace the policy's namespace, for messages
 */
export function targetVerdict(
  ref: PolicyTargetRef,
  outcome: TargetOutcome,
  namespace: string,
): TargetVerdict {
  const what = describeTarget(ref);
  switch (outcome.kind) {
    case 'unsupported':
      return {
        ref,
        wired: false,
        reason: 'UnsupportedTarget',
        message: `${what}: only ${SUPPORTED_TARGETS} targets are supported`,
      };
    case 'disabled':
      return {
        ref,
        wired: false,
        reason: 'ContourAttachmentDisabled',
        message: `${what}: the operator runs with --contour-attachment=false`,
      };
    case 'notFound':
      return {
        ref,
        wired: false,
        reason: 'TargetNotFound',
        message: `${what}: not found in namespace ${namespace}`,
      };
    case 'notRoot':
      return {
        ref,
        wired: false,
        reason: 'NotRootProxy',
        message: `${what}: has no spec.virtualhost (not a root HTTPProxy); rate limits attach to a root proxy's virtual host`,
      };
    case 'conflict':
      return {
        ref,
        wired: false,
        reason: 'FieldConflict',
        message: `${what}: another field manager owns the field Portico writes, left as it is: ${outcome.message}`,
      };
    case 'applyFailed':
      return { ref, wired: false, reason: 'ApplyFailed', message: `${what}: ${outcome.message}` };
    case 'applied':
      return appliedVerdict(ref, outcome.proxy);
  }
}

/**
 * The `Attached` condition from every target's verdict (undefined when the policy has no targets:
 * nothing to attach, so no condition). True when every target is wired; Unknown when every target
 * that is not wired is pending (its data plane has not reported yet); else False with the reason of
 * the first target that is not, and a message naming each such target.
 */
export function attachedCondition(
  verdicts: readonly TargetVerdict[],
): Pick<Condition, 'type' | 'status' | 'reason' | 'message'> | undefined {
  if (verdicts.length === 0) return undefined;
  const failing = verdicts.filter((v) => !v.wired);
  const first = failing[0];
  if (first === undefined) {
    return {
      type: 'Attached',
      status: 'True',
      reason: 'Attached',
      message: verdicts.map((v) => v.message).join('; '),
    };
  }
  const ok = verdicts.length - failing.length;
  const blocking = failing.find((v) => v.pending !== true);
  return {
    type: 'Attached',
    status: blocking === undefined ? 'Unknown' : 'False',
    reason: (blocking ?? first).reason,
    message: `${failing.map((v) => v.message).join('; ')} (${ok} of ${verdicts.length} targets wired)`,
  };
}
