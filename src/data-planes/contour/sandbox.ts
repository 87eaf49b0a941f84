/**
 * The sandbox's Contour (`portico sandbox up --data-plane contour`, the default): its CRDs, the
 * rate-limit ExtensionService, and `contour serve` (src/data-planes/contour/sandbox-process.ts). Where the sandbox runs
 * as the chart does, Contour serves the chart's class alone and the operator is declared
 * `--data-plane contour` with the `contour` flavor (HTTPProxy); without the chart's defaults (the
 * e2e stack) the operator keeps the default Ingress flavor, undeclared, because its test files read
 * the Ingresses it writes and start operators of their own from its command line in other modes and
 * flavors; its redirects are therefore not served by Contour (contour-httpproxy.test.ts shows what a
 * declared Contour says of them). Development only.
 */
import path from 'node:path';

import { httpProbe } from '../../sandbox/readiness.js';
import { CONTOUR, applyRateLimitExtension, installContourCrds, startContour } from './sandbox-process.js';
import { defineSandboxDataPlane } from '../sandbox-types.js';
import { contour } from './index.js';

/** Its CRDs, from the module version the binary was built from (tools.sh). */
const CONTOUR_CRDS = 'contour-crds.yaml';

export const contourSandbox = defineSandboxDataPlane({
  name: contour.name,
  // Contour takes the subdomain HTTPProxy with the wildcard delegated to it.
  appsDomain: true,
  tools: { executables: [CONTOUR], files: [CONTOUR_CRDS] },
  ports: { xds: 'tcp', metrics: 'tcp', health: 'tcp', debug: 'tcp' },
  stopFirst: [CONTOUR],
  envFacts: {
    contourXdsAddr: {
      variable: 'CONTOUR_XDS_ADDR',
      doc: "`127.0.0.1:<port>` of Contour's xDS server (`contour cli lds --contour <addr>`)",
    },
    contourHealthUrl: { doc: "Contour's `/healthz`" },
    contourMetricsUrl: { variable: 'CONTOUR_METRICS_URL', doc: "Contour's Prometheus endpoint" },
  },
  async start({ paths, tools, kubectl, step, ports, operatorNamespace, chartDefaults, chart }) {
    step(
      `installing Contour's CRDs; starting Contour (xDS on 127.0.0.1:${ports.xds}, serving class ${chart.ingressClass ?? 'none and contour'})`,
    );
    await installContourCrds(kubectl, path.join(tools.binDir, CONTOUR_CRDS));
    await applyRateLimitExtension(kubectl, paths, operatorNamespace);
    const started = await startContour(
      paths,
      path.join(tools.binDir, CONTOUR),
      kubectl.kubeconfig,
      ports,
      operatorNamespace,
      chart.contourInstance,
    );
    return {
      controllerOptions: {
        dataPlaneAcknowledgement: true,
        dataPlaneName: contour.displayName,
        ...(chartDefaults ? { dataPlane: contour.name, ingressFlavor: 'contour' } : {}),
        rateLimitAttachments: [contour.name],
        ...(chart.ingressClass === undefined ? {} : { ingressClass: chart.ingressClass }),
      },
      env: {
        contourXdsAddr: started.xdsAddr,
        contourHealthUrl: started.healthUrl,
        contourMetricsUrl: started.metricsUrl,
      },
    };
  },
  checks: (env) =>
    env.contourHealthUrl === undefined
      ? []
      : [{ name: CONTOUR, hasProcess: true, probe: httpProbe(env.contourHealthUrl) }],
});
