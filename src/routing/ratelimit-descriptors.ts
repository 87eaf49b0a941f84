/**
 * The rate-limit descriptors a gateway sends Portico's rate-limit service for one RateLimitPolicy,
 * once, in gateway-neutral terms; each gateway's wiring renders them in its own API: Contour's
 * HTTPProxy `rateLimitPolicy.global.descriptors` (controllers/ratelimitpolicy/attachment.ts) and
 * Envoy's route `RateLimit` actions (envoy.config.route.v3.RateLimit, {@link envoyRateLimits}), which
 * is what Contour itself turns its descriptors into and what an Envoy Gateway EnvoyPatchPolicy
 * carries (docs/ratelimits.md, "Attaching to Contour"; docs/routing.md, "Envoy Gateway").
 *
 * Three descriptors per policy, excluding each other, so that Envoy sends exactly one for every
 * request (Envoy drops a whole descriptor when a `request_headers` action finds no header:
 * `RateLimit.Action.RequestHeaders`):
 *
 *   1. with the key id and plan headers: `[portico.dev/policy, key_id, plan]`;
 *   2. with the key id header, without the plan header:
 *      `[portico.dev/policy, key_id, header_match=no-plan-header]`, for which the server applies the
 *      default plan;
 *   3. without the key id header: `[portico.dev/policy, header_match=no-key-id-header,
 *      remote_address]`, for which the server applies the policy's `missingKeyId` rule (limited per
 *      client address under the default plan, or refused: docs/ratelimits.md, "Checks without a key
 *      id"). It carries no plan entry, so a keyless client cannot choose its plan with a header.
 *
 * Without the third, a request without the key id header produced no descriptor, the service was
 * never asked, and the request passed unlimited and without rate-limit headers. The first entry names
 * the policy because the gateway sends one `domain` for every policy (the server maps it:
 * src/ratelimit/gateway-domain.ts).
 */
import {
  DESCRIPTOR_KEY_ID,
  DESCRIPTOR_PLAN,
  DESCRIPTOR_POLICY,
  policyDomain,
} from '../api/ratelimitpolicy.js';

/**
 * The value of the `header_match` entry Envoy sends for a request without the plan header (Envoy's
 * `header_value_match` action's default descriptor key). The server ignores the entry; the value
 * says why it is there.
 */
export const NO_PLAN_HEADER_VALUE = 'no-plan-header';

/** The value of the `header_match` entry Envoy sends for a request without the key id header. */
export const NO_KEY_ID_HEADER_VALUE = 'no-key-id-header';

/** The request headers the gateway's auth layer sets (the controller's flags). */
export interface RateLimitHeaders {
  /** Lowercase header carrying the API key id, e.g. `x-api-key-id`. */
  readonly keyId: string;
  /** Lowercase header carrying the plan, e.g. `x-api-plan`. */
  readonly plan: string;
}

/** One descriptor entry, as the gateway produces it from a request. */
export type DescriptorEntry =
  /** A fixed `key=value`. */
  | { readonly kind: 'fixed'; readonly key: string; readonly value: string }
  /** `key=<value of header>`; the whole descriptor is dropped when the header is missing. */
  | { readonly kind: 'header'; readonly header: string; readonly key: string }
  /** `header_match=<value>` when `header` is absent from the request; else the descriptor is dropped. */
  | { readonly kind: 'headerAbsent'; readonly header: string; readonly value: string }
  /** `remote_address=<the client's address>`, as Envoy's connection manager trusts it (never dropped). */
  | { readonly kind: 'remoteAddress' };

/** The three descriptors of a policy (see the file's docstring), each a list of entries in order. */
export function policyDescriptors(
  policy: { metadata: { namespace: string; name: string } },
  headers: RateLimitHeaders,
): DescriptorEntry[][] {
  const identity: DescriptorEntry = { kind: 'fixed', key: DESCRIPTOR_POLICY, value: policyDomain(policy) };
  const keyId: DescriptorEntry = { kind: 'header', header: headers.keyId, key: DESCRIPTOR_KEY_ID };
  return [
    [identity, keyId, { kind: 'header', header: headers.plan, key: DESCRIPTOR_PLAN }],
    [identity, keyId, { kind: 'headerAbsent', header: headers.plan, value: NO_PLAN_HEADER_VALUE }],
    [
      identity,
      { kind: 'headerAbsent', header: headers.keyId, value: NO_KEY_ID_HEADER_VALUE },
      { kind: 'remoteAddress' },
    ],
  ];
}

/**
 * A policy's descriptors as Envoy route `RateLimit` entries (envoy.config.route.v3.RateLimit, proto
 * JSON field names), one per descriptor: `generic_key`, `request_headers`, `header_value_match`
 * with a `present_match` inverted for an absent header, and `remote_address`, as Contour v1.33
 * renders its own descriptors (internal/envoy/v3/ratelimit.go).
 */
export function envoyRateLimits(
  policy: { metadata: { namespace: string; name: string } },
  headers: RateLimitHeaders,
): { actions: Record<string, unknown>[] }[] {
  return policyDescriptors(policy, headers).map((entries) => ({
    actions: entries.map((entry) => {
      switch (entry.kind) {
        case 'fixed':
          return { generic_key: { descriptor_key: entry.key, descriptor_value: entry.value } };
        case 'header':
          return { request_headers: { header_name: entry.header, descriptor_key: entry.key } };
        case 'headerAbsent':
          return {
            header_value_match: {
              descriptor_value: entry.value,
              expect_match: true,
              headers: [{ name: entry.header, present_match: true, invert_match: true }],
            },
          };
        case 'remoteAddress':
          return { remote_address: {} };
      }
    }),
  }));
}
