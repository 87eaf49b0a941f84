/**
 * Whose an object at a name Portico uses is, as the reconcile must know before it applies or
 * deletes one: Portico never overwrites or deletes another CustomDomain's object, nor an HTTPProxy
 * it did not write. Pure: reads labels only.
 */
import type { KubernetesObject } from '@kubernetes/client-node';
import {
  CUSTOM_DOMAIN_LABEL,
  MANAGED_BY_LABEL,
  MANAGED_BY_VALUE,
  type CustomDomain,
} from '../../api/customdomain.js';
import { CONTOUR_API_VERSION, HTTPPROXY_KIND } from '../../routing/contour.js';
import type { ObjectHeader } from '../../routing/plan.js';

/**
 * The CustomDomain that `obj`'s owner label (`portico.dev/customdomain`) names when it is another
 * than `domain`; undefined when it names `domain` or there is no such label (an object made by
 * hand at a name Portico uses is Portico's to replace).
 */
export function otherOwner(obj: KubernetesObject | undefined, domain: CustomDomain): string | undefined {
  const owner = obj?.metadata?.labels?.[CUSTOM_DOMAIN_LABEL];
  return owner !== undefined && owner !== domain.metadata.name ? owner : undefined;
}

/**
 * Kinds where an object without Portico's `app.kubernetes.io/managed-by=portico` label is someone
 * else's and never overwritten or deleted: HTTPProxy (docs/routing.md, "Foreign routes"). A platform team writes its own
 * HTTPProxies (e.g. the API's, which RateLimitPolicies target) in the same namespaces, and one at
 * `portico-<name>` is theirs, not a leftover of Portico's. (Other kinds keep the rule of
 * `otherOwner`: an unlabelled object at Portico's name is Portico's to replace.)
 */
export function foreignKind(header: ObjectHeader): boolean {
  return header.apiVersion === CONTOUR_API_VERSION && header.kind === HTTPPROXY_KIND;
}

/**
 * Whether `obj` (at `header`) must be left alone by `domain`: another CustomDomain's by its owner
 * label, or, for a `foreignKind`, not labelled as Portico's at all.
 */
export function notOurs(header: ObjectHeader, obj: KubernetesObject, domain: CustomDomain): boolean {
  if (otherOwner(obj, domain) !== undefined) return true;
  return foreignKind(header) && obj.metadata?.labels?.[MANAGED_BY_LABEL] !== MANAGED_BY_VALUE;
}
