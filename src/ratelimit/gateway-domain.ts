/**
 * Which policy a descriptor is checked against (docs/ratelimits.md, "The check the gateway sends"
 * and "Attaching to Contour").
 *
 * A caller that configures the domain per policy (Envoy's own ratelimit filter, a direct gRPC client)
 * sends the policy's `<namespace>/<name>` as the request's `domain`, and every descriptor of the
 * request is checked against that policy. Contour instead sends ONE domain for everything behind it
 * (its config's `rateLimitService.domain`, `internal/envoy/v3/ratelimit.go` `GlobalRateLimitFilter`),
 * so a request whose domain is the server's gateway domain names the policy in each descriptor: its
 * FIRST entry is `portico.dev/policy=<namespace>/<name>` (a Contour `genericKey` the operator writes).
 * The other entries (`key_id`, `plan`, and Contour's `header_match`) keep their meaning.
 * Pure.
 */
import { DESCRIPTOR_POLICY } from '../api/ratelimitpolicy.js';
import type { DescriptorEntry } from './limits.js';

/**
 * The policy domain one descriptor is checked against.
 *
 * @param requestDomain the request's `domain` ('' when unset)
 * @param entries the descriptor's entries, in the order the gateway sent them
 * @param gatewayDomain the server's `--gateway-domain`
 * @returns `requestDomain` when it is not the gateway domain; else the value of the descriptor's first
 *   entry when its key is `portico.dev/policy`, else `''` (no policy: the descriptor is not limited)
 */
export function descriptorDomain(
  requestDomain: string,
  entries: readonly DescriptorEntry[],
  gatewayDomain: string,
): string {
  if (requestDomain !== gatewayDomain) return requestDomain;
  const first = entries[0];
  return first?.key === DESCRIPTOR_POLICY ? (first.value ?? '') : '';
}

/** A namespace (DNS label) `/` a name (DNS subdomain): the shape of every policy's domain. */
const POLICY_DOMAIN_SHAPE = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?\/[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/;

/**
 * Why `value` cannot be the gateway domain, or undefined when it can: it must be non-empty, at most
 * 512 characters (the request bound on `domain`), and never a policy's `<namespace>/<name>` (else that
 * policy's direct callers would be read as gateway checks).
 */
export function gatewayDomainProblem(value: string): string | undefined {
  if (value === '') return 'must not be empty';
  if (value.length > 512) return `is ${value.length} characters long; at most 512 are allowed`;
  if (POLICY_DOMAIN_SHAPE.test(value)) {
    return `"${value}" has the shape of a policy's domain (<namespace>/<name>); use a value without '/', e.g. portico-gateway`;
  }
  return undefined;
}
