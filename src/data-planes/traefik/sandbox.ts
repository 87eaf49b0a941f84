/**
 * The sandbox's Traefik (`portico sandbox up --data-plane traefik`): Traefik serving HTTPS itself in
 * front of a real backend of the example project, the operator writing the `traefik` flavor and
 * checking what is served. The parts are src/data-planes/traefik/sandbox-process.ts's (`startTraefikDataPlane`,
 * `TRAEFIK_CONTROLLER_OPTIONS`, `traefikSandboxEnv`). Development only.
 */
import path from 'node:path';

import { httpProbe } from '../../sandbox/readiness.js';
import {
  PROJECT_BACKEND,
  TRAEFIK,
  TRAEFIK_CONTROLLER_OPTIONS,
  startTraefikDataPlane,
  traefikSandboxEnv,
} from './sandbox-process.js';
import type { SandboxCheck } from '../sandbox-types.js';
import { defineSandboxDataPlane } from '../sandbox-types.js';
import { traefik } from './index.js';

/** Its CRDs (Middleware, IngressRoute, ...), from the module version the binary was built from (tools.sh). */
const TRAEFIK_CRDS = 'traefik-crds.yaml';

export const traefikSandbox = defineSandboxDataPlane({
  name: traefik.name,
  // Traefik takes the subdomain Ingress and the wildcard from its TLSStore `default`.
  appsDomain: true,
  tools: { flag: '--traefik', executables: [TRAEFIK], files: [TRAEFIK_CRDS] },
  ports: { web: 'tcp', websecure: 'tcp', ping: 'tcp', backend: 'tcp' },
  stopFirst: [],
  envFacts: {
    ingressHttpAddr: {
      variable: 'INGRESS_HTTP_ADDR',
      doc: "`127.0.0.1:<port>` where the data plane serves HTTP (Traefik's `web`)",
    },
    ingressHttpsAddr: {
      variable: 'INGRESS_HTTPS_ADDR',
      doc: "`127.0.0.1:<port>` where the data plane serves HTTPS (Traefik's `websecure`)",
    },
    traefikPingUrl: { doc: "Traefik's `/ping`" },
    projectBackendUrl: { doc: "The example project's backend (src/sandbox/project-backend.ts)" },
  },
  async start({ paths, repoRoot, tools, kubectl, step, ports, chart, httpsRedirect }) {
    const binaries = {
      traefik: path.join(tools.binDir, TRAEFIK),
      traefikCrds: path.join(tools.binDir, TRAEFIK_CRDS),
    };
    const started = await startTraefikDataPlane(paths, repoRoot, binaries, kubectl, step, ports, {
      ...(chart.ingressClass === undefined ? {} : { ingressClass: chart.ingressClass }),
      httpsRedirect: httpsRedirect === true,
    });
    return {
      controllerOptions: {
        dataPlaneAcknowledgement: true,
        ...TRAEFIK_CONTROLLER_OPTIONS,
        rateLimitAttachments: [],
        ...(chart.ingressClass === undefined ? {} : { ingressClass: chart.ingressClass }),
        // Only Traefik serves in the sandbox: Contour and Envoy Gateway run without an Envoy.
        servingCheckAddress: started.traefik.httpsAddr,
      },
      env: traefikSandboxEnv(started),
      examplesDir: started.examplesDir,
    };
  },
  checks: (env) => {
    const checks: SandboxCheck[] = [];
    if (env.traefikPingUrl !== undefined)
      checks.push({ name: TRAEFIK, hasProcess: true, probe: httpProbe(env.traefikPingUrl) });
    if (env.projectBackendUrl !== undefined)
      checks.push({ name: PROJECT_BACKEND, hasProcess: true, probe: httpProbe(env.projectBackendUrl) });
    return checks;
  },
});
