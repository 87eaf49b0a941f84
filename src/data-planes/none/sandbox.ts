/**
 * `portico sandbox up --data-plane none`: nothing takes the routes; the operator's acknowledgement
 * is off and Routed says the route is unconfirmed. The operator has no `--data-plane none` (it is
 * simply not declared), so this folder has no index.ts. Development only.
 */
import { defineSandboxDataPlane } from '../sandbox-types.js';

export const noneSandbox = defineSandboxDataPlane({
  name: 'none',
  // Nothing serves.
  appsDomain: false,
  tools: { executables: [], files: [] },
  ports: {},
  stopFirst: [],
  envFacts: {},
  start: ({ chart }) =>
    Promise.resolve({
      controllerOptions: {
        dataPlaneAcknowledgement: false,
        rateLimitAttachments: [],
        ...(chart.ingressClass === undefined ? {} : { ingressClass: chart.ingressClass }),
      },
      env: {},
    }),
  checks: () => [],
});
