import { describe, expect, it } from 'vitest';

import { renderEnvFile, type SandboxEnv } from './state.js';

const env: SandboxEnv = {
  sandboxDir: "/tmp/it's here",
  toolsBinDir: '/root/.cache/portico/tools/bin',
  kubeconfig: "/tmp/it's here/kubeconfig",
  apiServerUrl: 'https://127.0.0.1:6443',
  externalCluster: false,
  etcdUrl: 'http://127.0.0.1:2379',
  platformCnameTarget: 'sites.portico.test',
  dnsServer: '127.0.0.1:8053',
  dnsMgmtUrl: 'http://127.0.0.1:8055',
  acmeDirectoryUrl: 'https://127.0.0.1:14000/dir',
  acmeMgmtUrl: 'https://127.0.0.1:15000',
  acmeCaBundle: "/tmp/it's here/certs/pebble-ca.crt",
  controllerMetricsUrl: 'http://127.0.0.1:8080/metrics',
  controllerReadyzUrl: 'http://127.0.0.1:8080/readyz',
  http01Port: 5002,
  redisUrl: 'redis://127.0.0.1:6379',
  ratelimitGrpcAddr: '127.0.0.1:8081',
  ratelimitMetricsUrl: 'http://127.0.0.1:8082/metrics',
  ratelimitReadyzUrl: 'http://127.0.0.1:8082/readyz',
  dataPlane: 'contour',
  contourXdsAddr: '127.0.0.1:8083',
  contourHealthUrl: 'http://127.0.0.1:8084/healthz',
  contourMetricsUrl: 'http://127.0.0.1:8085/metrics',
};

/** `env` without the Contour fields (a sandbox of `--data-plane none`). */
function withoutContour(full: SandboxEnv): SandboxEnv {
  return Object.fromEntries(
    Object.entries(full).filter(([key]) => !key.startsWith('contour')),
  ) as unknown as SandboxEnv;
}

describe('renderEnvFile', () => {
  it('exports every variable README.md lists for .sandbox/env, quoted for a POSIX shell', () => {
    const text = renderEnvFile(env);
    for (const name of [
      'KUBECONFIG',
      'PLATFORM_CNAME_TARGET',
      'DNS_SERVER',
      'DNS_MGMT_URL',
      'ACME_DIRECTORY_URL',
      'ACME_MGMT_URL',
      'ACME_CA_BUNDLE',
      'CONTROLLER_METRICS_URL',
      'HTTP01_PORT',
      'SANDBOX_DIR',
      'REDIS_URL',
      'RATELIMIT_GRPC_ADDR',
    ]) {
      expect(text).toMatch(new RegExp(`^export ${name}='`, 'm'));
    }
    expect(text).toContain(`export KUBECONFIG='/tmp/it'\\''s here/kubeconfig'`);
    expect(text).toContain(`export HTTP01_PORT='5002'`);
  });

  it('says which data plane runs and, for Contour, its xDS address; none without one', () => {
    expect(renderEnvFile(env)).toContain(
      `export DATA_PLANE='contour'\nexport CONTOUR_XDS_ADDR='127.0.0.1:8083'`,
    );
    const none = renderEnvFile({ ...withoutContour(env), dataPlane: 'none' });
    expect(none).toContain(`export DATA_PLANE='none'`);
    expect(none).not.toContain('CONTOUR_');
  });
});
