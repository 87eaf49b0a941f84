import { describe, expect, it } from 'vitest';

import {
  ENVOY_GATEWAY_CONTROLLER_NAME,
  SANDBOX_GATEWAY,
  envoyGatewayConfig,
  gatewayParentRefsArg,
  platformGatewayObjects,
} from './sandbox-process.js';
import { SandboxError } from '../../sandbox/errors.js';
import { renderEnvFile, type SandboxEnv } from '../../sandbox/state.js';

describe('envoyGatewayConfig', () => {
  it('runs the Kubernetes provider without leader election, with EnvoyPatchPolicy and listener names tcp-<port> (XDSNameSchemeV2), the admin API on loopback at the port given, and no fixed-port listener it can turn off', () => {
    const config = envoyGatewayConfig(4321);
    expect(config).toMatchObject({
      apiVersion: 'gateway.envoyproxy.io/v1alpha1',
      kind: 'EnvoyGateway',
      gateway: { controllerName: ENVOY_GATEWAY_CONTROLLER_NAME },
      provider: {
        type: 'Kubernetes',
        kubernetes: { leaderElection: { disable: true }, proxyTopologyInjector: { disabled: true } },
      },
      admin: { address: { host: '127.0.0.1', port: 4321 } },
      telemetry: { metrics: { prometheus: { disable: true } } },
      extensionApis: { enableEnvoyPatchPolicy: true },
      runtimeFlags: { enabled: ['XDSNameSchemeV2'] },
    });
  });

  it('refuses a port outside 1-65535 with a message naming it', () => {
    for (const port of [0, 65536, 1.5, -1])
      expect(() => envoyGatewayConfig(port)).toThrow(
        new SandboxError(`Envoy Gateway's admin port ${port} is not a port number (1-65535)`),
      );
  });
});

describe('platformGatewayObjects', () => {
  it("makes a GatewayClass of Envoy Gateway's controller and a Gateway that admits ListenerSets and routes from every namespace", () => {
    const [gatewayClass, gateway] = platformGatewayObjects(SANDBOX_GATEWAY);
    expect(gatewayClass).toEqual({
      apiVersion: 'gateway.networking.k8s.io/v1',
      kind: 'GatewayClass',
      metadata: { name: 'portico' },
      spec: { controllerName: 'gateway.envoyproxy.io/gatewayclass-controller' },
    });
    expect(gateway).toMatchObject({
      kind: 'Gateway',
      metadata: { name: 'portico', namespace: 'envoy-gateway-system' },
      spec: {
        gatewayClassName: 'portico',
        allowedListeners: { namespaces: { from: 'All' } },
        listeners: [
          { name: 'http', port: 80, protocol: 'HTTP', allowedRoutes: { namespaces: { from: 'All' } } },
        ],
      },
    });
    expect(gatewayParentRefsArg(SANDBOX_GATEWAY)).toBe('envoy-gateway-system/portico');
  });
});

describe('the env file of a sandbox with Envoy Gateway', () => {
  it('says which data plane runs, where its admin API is, and the Gateway', () => {
    const env = {
      sandboxDir: '/s',
      toolsBinDir: '/t',
      kubeconfig: '/s/kubeconfig',
      apiServerUrl: 'https://127.0.0.1:6443',
      externalCluster: false,
      platformCnameTarget: 'sites.portico.test',
      dnsServer: '127.0.0.1:8053',
      dnsMgmtUrl: 'http://127.0.0.1:8055',
      acmeDirectoryUrl: 'https://127.0.0.1:14000/dir',
      acmeMgmtUrl: 'https://127.0.0.1:15000',
      acmeCaBundle: '/s/certs/pebble-ca.crt',
      controllerMetricsUrl: 'http://127.0.0.1:8080/metrics',
      controllerReadyzUrl: 'http://127.0.0.1:8080/readyz',
      http01Port: 5002,
      redisUrl: 'redis://127.0.0.1:6379',
      ratelimitGrpcAddr: '127.0.0.1:8081',
      ratelimitMetricsUrl: 'http://127.0.0.1:8082/metrics',
      ratelimitReadyzUrl: 'http://127.0.0.1:8082/readyz',
      dataPlane: 'envoy-gateway',
      envoyGatewayAdminUrl: 'http://127.0.0.1:19999',
      gateway: 'envoy-gateway-system/portico',
    } satisfies SandboxEnv;
    const text = renderEnvFile(env);
    expect(text).toContain("export DATA_PLANE='envoy-gateway'\n");
    expect(text).toContain("export ENVOY_GATEWAY_ADMIN_URL='http://127.0.0.1:19999'\n");
    expect(text).toContain("export GATEWAY='envoy-gateway-system/portico'\n");
    expect(text).not.toContain('CONTOUR_');
  });
});
