import { readFileSync } from 'node:fs';
import { toolFlags } from '../sandbox/tools.js';
import { describe, expect, it } from 'vitest';
import { DATA_PLANES } from './registry.js';
import {
  SANDBOX_DATA_PLANE_MODULES,
  SANDBOX_DATA_PLANES,
  sandboxDataPlaneModule,
} from './sandbox-registry.js';

describe('the sandbox data plane registry', () => {
  it('runs contour, envoy-gateway, traefik and none, each but none a data plane the operator knows', () => {
    expect(SANDBOX_DATA_PLANES).toEqual(['contour', 'envoy-gateway', 'traefik', 'none']);
    for (const name of SANDBOX_DATA_PLANES.filter((n) => n !== 'none'))
      expect(DATA_PLANES as readonly string[]).toContain(name);
  });

  it('stops Contour and Envoy Gateway before the operator, as before the modules', () => {
    expect(SANDBOX_DATA_PLANE_MODULES.flatMap((m) => m.stopFirst)).toEqual(['contour', 'envoy-gateway']);
  });

  it('builds the Envoy Gateway and Traefik tool sets only for their data planes, each flag a tools.sh of its folder', () => {
    expect(sandboxDataPlaneModule('contour').tools.flag).toBeUndefined();
    expect(sandboxDataPlaneModule('envoy-gateway').tools.flag).toBe('--envoy-gateway');
    expect(sandboxDataPlaneModule('traefik').tools.flag).toBe('--traefik');
    expect(toolFlags({ dataPlanes: [sandboxDataPlaneModule('traefik').tools] })).toEqual(['--traefik']);
    expect(toolFlags({ test: true, dataPlanes: SANDBOX_DATA_PLANE_MODULES.map((m) => m.tools) })).toEqual([
      '--test',
    ]);
    for (const m of SANDBOX_DATA_PLANE_MODULES) {
      if (m.tools.flag === undefined) continue;
      const script = readFileSync(new URL(`./${m.name}/tools.sh`, import.meta.url), 'utf8');
      expect(script).toMatch(new RegExp(`^tool_flag=${m.tools.flag}$`, 'm'));
    }
  });

  it('starts nothing for none: the acknowledgement off, no attachment, the chart’s class kept', async () => {
    const none = sandboxDataPlaneModule('none');
    const started = await none.start({
      chartDefaults: true,
      chart: { controllerKubeconfig: '/k', ingressClass: 'portico' },
    } as Parameters<typeof none.start>[0]);
    expect(started).toEqual({
      controllerOptions: {
        dataPlaneAcknowledgement: false,
        rateLimitAttachments: [],
        ingressClass: 'portico',
      },
      env: {},
    });
  });

  it('checks only the processes whose facts <dir>/env holds', () => {
    const env = { contourHealthUrl: 'http://127.0.0.1:1/healthz' } as Parameters<
      (typeof SANDBOX_DATA_PLANE_MODULES)[number]['checks']
    >[0];
    const names = SANDBOX_DATA_PLANE_MODULES.flatMap((m) => m.checks(env)).map((c) => c.name);
    expect(names).toEqual(['contour']);
  });
});
