/**
 * The data planes the sandbox can run (`portico sandbox up --data-plane`): the controller that takes
 * Portico's routes and whose acknowledgement the operator waits for. Each is a module of
 * src/data-planes/<name>/sandbox.ts, listed in src/data-planes/sandbox-registry.ts:
 *
 * - `contour` (default): a real Contour; the operator routes with Ingress (data-planes/contour/sandbox-process.ts).
 * - `envoy-gateway`: a real Envoy Gateway; the operator runs in gateway mode, an HTTPRoute and a
 *   ListenerSet per domain on the sandbox's Gateway (data-planes/envoy-gateway/sandbox-process.ts).
 * - `traefik`: a real Traefik that serves HTTPS itself, in front of a real backend of the example
 *   project; the operator writes the `traefik` flavor (data-planes/traefik/sandbox-process.ts).
 * - `none`: nothing takes the routes; the operator's acknowledgement is off and Routed says the
 *   route is unconfirmed.
 */
export { SANDBOX_DATA_PLANES, type SandboxDataPlane } from '../data-planes/sandbox-registry.js';
