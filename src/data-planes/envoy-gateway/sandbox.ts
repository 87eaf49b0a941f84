/**
 * The sandbox's Envoy Gateway (`portico sandbox up --data-plane envoy-gateway`): its and Gateway
 * API's CRDs, `envoy-gateway server` (src/data-planes/envoy-gateway/sandbox-process.ts), and the platform's
 * GatewayClass and Gateway; the operator runs in gateway mode with that Gateway as parent and
 * attaches rate limits through EnvoyPatchPolicies. Development only.
 */
import path from 'node:path';

import { ensureNamespace } from '../../sandbox/cluster.js';
import {
  ENVOY_GATEWAY,
  ENVOY_GATEWAY_NAME,
  ENVOY_GATEWAY_NAMESPACE,
  SANDBOX_GATEWAY,
  applyPlatformGateway,
  gatewayParentRefsArg,
  installEnvoyGatewayCrds,
  startEnvoyGateway,
} from './sandbox-process.js';
import { httpProbe } from '../../sandbox/readiness.js';
import { defineSandboxDataPlane } from '../sandbox-types.js';
import { envoyGateway } from './index.js';

/**
 * Its CRDs with Gateway API's experimental channel, from the module version the binaries were
 * built from (tools.sh).
 */
const ENVOY_GATEWAY_CRDS = 'envoy-gateway-crds.yaml';

export const envoyGatewaySandbox = defineSandboxDataPlane({
  name: envoyGateway.name,
  // Not yet: the subdomain HTTPRoute needs the platform listener to carry the wildcard.
  appsDomain: false,
  tools: { flag: '--envoy-gateway', executables: [ENVOY_GATEWAY, 'egctl'], files: [ENVOY_GATEWAY_CRDS] },
  ports: { admin: 'tcp' },
  stopFirst: [ENVOY_GATEWAY],
  envFacts: {
    envoyGatewayAdminUrl: {
      variable: 'ENVOY_GATEWAY_ADMIN_URL',
      doc: "Envoy Gateway's admin API (`/api/server_info`, `/api/config_dump`: the resources as it holds them)",
    },
    gateway: { variable: 'GATEWAY', doc: "The Gateway Portico's routes attach to, `namespace/name`" },
  },
  async start({ paths, tools, kubectl, step, ports, chart }) {
    step(
      `installing Envoy Gateway's and Gateway API's CRDs; starting Envoy Gateway (admin on 127.0.0.1:${ports.admin})`,
    );
    await installEnvoyGatewayCrds(kubectl, path.join(tools.binDir, ENVOY_GATEWAY_CRDS));
    await ensureNamespace(kubectl, ENVOY_GATEWAY_NAMESPACE);
    const started = await startEnvoyGateway(
      paths,
      path.join(tools.binDir, ENVOY_GATEWAY),
      kubectl,
      ports.admin,
    );
    step(
      `applying GatewayClass ${SANDBOX_GATEWAY.gatewayClassName} and Gateway ${gatewayParentRefsArg(SANDBOX_GATEWAY)}`,
    );
    await applyPlatformGateway(kubectl, paths, SANDBOX_GATEWAY);
    return {
      controllerOptions: {
        dataPlaneAcknowledgement: true,
        dataPlane: envoyGateway.name,
        dataPlaneName: ENVOY_GATEWAY_NAME,
        gatewayParentRefs: gatewayParentRefsArg(SANDBOX_GATEWAY),
        rateLimitAttachments: [envoyGateway.name],
        ...(chart.ingressClass === undefined ? {} : { ingressClass: chart.ingressClass }),
      },
      env: { envoyGatewayAdminUrl: started.adminUrl, gateway: gatewayParentRefsArg(SANDBOX_GATEWAY) },
    };
  },
  checks: (env) =>
    env.envoyGatewayAdminUrl === undefined
      ? []
      : [
          {
            name: ENVOY_GATEWAY,
            hasProcess: true,
            probe: httpProbe(`${env.envoyGatewayAdminUrl}/api/server_info`),
          },
        ],
});
