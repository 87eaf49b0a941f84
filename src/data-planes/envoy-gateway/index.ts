/**
 * Envoy Gateway (v1.9.1, its tools.sh) as a data plane: Gateway API only
 * (internal/provider/ imports no k8s.io/api/networking/v1, so it reads no Ingress, and names no
 * HTTPProxy); ListenerSet implemented (test/e2e/envoy-gateway-routes). It takes the `gateway`
 * flavor (routing/gateway.ts), whose HTTPRoute and ListenerSet are the shared Gateway API kinds
 * (../shared.ts). Rate limits attach through an EnvoyPatchPolicy per Gateway. Pure.
 */
import { GATEWAY_API_GROUP, HTTPROUTE_KIND } from '../../routing/gateway.js';
import { defineDataPlane } from '../types.js';

const GATEWAY_API_ONLY = 'it reads Gateway API routes only, no Ingress';

export const envoyGateway = defineDataPlane({
  name: 'envoy-gateway',
  displayName: 'Envoy Gateway',
  workingFlavor: 'gateway',
  workingFlags: '--routing-mode gateway --gateway-parent-refs <namespace>/<gateway>',
  flavors: {
    nginx: { serves: false, redirects: false, why: GATEWAY_API_ONLY },
    traefik: { serves: false, redirects: false, why: GATEWAY_API_ONLY },
    contour: { serves: false, redirects: false, why: 'it reads Gateway API routes only, no HTTPProxy' },
    gateway: { serves: true, redirects: true },
  },
  routeKinds: [],
  rateLimitAttachment: {
    flag: '--envoy-gateway-attachment',
    env: 'PORTICO_ENVOY_GATEWAY_ATTACHMENT',
    defaultOn: false,
    help: 'true | false: wire RateLimitPolicy targetRefs of kind HTTPRoute or Gateway into Envoy Gateway with EnvoyPatchPolicies in each Gateway namespace (needs extensionApis.enableEnvoyPatchPolicy and XDSNameSchemeV2)',
    targets: [
      { group: GATEWAY_API_GROUP, kind: HTTPROUTE_KIND },
      { group: GATEWAY_API_GROUP, kind: 'Gateway' },
    ],
    usesClusterDomain: true,
  },
});
