import { describe, expect, it } from 'vitest';
import { parseRateLimitServerConfig } from './config.js';

describe('parseRateLimitServerConfig', () => {
  it('has the documented defaults', () => {
    expect(parseRateLimitServerConfig(['--redis-url', 'redis://127.0.0.1:6379'], {})).toMatchObject({
      grpcListenAddress: '0.0.0.0:8081',
      metricsListenAddress: '0.0.0.0:8082',
      failureMode: 'local',
      gatewayDomain: 'portico-gateway',
      redis: {
        topology: { kind: 'standalone', host: '127.0.0.1', port: 6379, db: 0 },
        tls: false,
        username: undefined,
        password: undefined,
      },
      configNamespace: 'portico-system',
      configName: 'portico-ratelimit-config',
      statusName: 'portico-ratelimit-status',
      heartbeatIntervalMs: 30_000,
      kubeconfig: undefined,
    });
  });

  it('reads PORTICO_RATELIMIT_* variables, flags winning', () => {
    const config = parseRateLimitServerConfig(['--failure-mode', 'deny'], {
      PORTICO_RATELIMIT_REDIS_URL: 'redis://r:1',
      PORTICO_RATELIMIT_REDIS_CLUSTER: 'true',
      PORTICO_RATELIMIT_FAILURE_MODE: 'allow',
      POD_NAME: 'rl-0',
    });
    expect(config).toMatchObject({
      redis: { topology: { kind: 'cluster', seeds: [{ host: 'r', port: 1 }] } },
      failureMode: 'deny',
      instance: 'rl-0',
    });
  });

  it('refuses bad values naming the flag', () => {
    expect(() => parseRateLimitServerConfig([], {})).toThrow(/--redis-url/);
    expect(() => parseRateLimitServerConfig(['--redis-url', 'http://x'], {})).toThrow(/redis:\/\//);
    expect(() =>
      parseRateLimitServerConfig(['--redis-url', 'redis://x:1', '--failure-mode', 'maybe'], {}),
    ).toThrow('--failure-mode must be one of local, allow, deny, got "maybe"');
    expect(() =>
      parseRateLimitServerConfig(['--redis-url', 'redis://x:1', '--grpc-listen-address', 'nope'], {}),
    ).toThrow(/--grpc-listen-address/);
    for (const seconds of ['0', '1.5', '301', 'soon']) {
      expect(() =>
        parseRateLimitServerConfig(
          ['--redis-url', 'redis://x:1', '--heartbeat-interval-seconds', seconds],
          {},
        ),
      ).toThrow(/--heartbeat-interval-seconds must be an integer from 1 to 300/);
    }
    expect(
      parseRateLimitServerConfig(['--redis-url', 'redis://x:1', '--heartbeat-interval-seconds', '5'], {}),
    ).toMatchObject({ heartbeatIntervalMs: 5_000 });
    expect(() =>
      parseRateLimitServerConfig(['--redis-url', 'redis://x:1', '--gateway-domain', 'shop/api'], {}),
    ).toThrow(/--gateway-domain "shop\/api" has the shape of a policy's domain/);
    expect(
      parseRateLimitServerConfig(['--redis-url', 'redis://x:1'], {
        PORTICO_RATELIMIT_GATEWAY_DOMAIN: 'contour',
      }),
    ).toMatchObject({ gatewayDomain: 'contour' });
  });

  it('reads keepalive and the maximum connection age in seconds, with the documented defaults', () => {
    const base = ['--redis-url', 'redis://x:1'];
    expect(parseRateLimitServerConfig(base, {})).toMatchObject({
      grpcTls: undefined,
      grpcConnection: {
        keepaliveTimeMs: 30_000,
        keepaliveTimeoutMs: 10_000,
        maxConnectionAgeMs: 300_000,
        maxConnectionAgeGraceMs: 10_000,
      },
    });
    expect(
      parseRateLimitServerConfig([...base, '--grpc-max-connection-age-seconds', '60'], {}),
    ).toMatchObject({ grpcConnection: { maxConnectionAgeMs: 60_000 } });
    expect(() => parseRateLimitServerConfig([...base, '--grpc-keepalive-time-seconds', '0'], {})).toThrow(
      '--grpc-keepalive-time-seconds must be a whole number of seconds from 1 to 7200, got "0"',
    );
  });

  it('takes TLS files together, mTLS only with them, and refuses a file it cannot read', () => {
    const base = ['--redis-url', 'redis://x:1'];
    const here = new URL(import.meta.url).pathname;
    expect(
      parseRateLimitServerConfig(
        [
          ...base,
          '--grpc-tls-cert-file',
          here,
          '--grpc-tls-key-file',
          here,
          '--grpc-tls-client-ca-file',
          here,
        ],
        {},
      ),
    ).toMatchObject({ grpcTls: { certFile: here, keyFile: here, clientCaFile: here, refreshMs: 60_000 } });
    expect(() => parseRateLimitServerConfig([...base, '--grpc-tls-cert-file', here], {})).toThrow(
      '--grpc-tls-cert-file and --grpc-tls-key-file go together',
    );
    expect(() => parseRateLimitServerConfig([...base, '--grpc-tls-client-ca-file', here], {})).toThrow(
      '--grpc-tls-client-ca-file needs --grpc-tls-cert-file and --grpc-tls-key-file',
    );
    expect(() =>
      parseRateLimitServerConfig(
        [...base, '--grpc-tls-cert-file', '/nonexistent/tls.crt', '--grpc-tls-key-file', here],
        {},
      ),
    ).toThrow('--grpc-tls-cert-file "/nonexistent/tls.crt" cannot be read');
  });

  it('reads --check-config from the command line only, and checks everything else as a start does', () => {
    const redis = ['--redis-url', 'redis://127.0.0.1:6379'];
    expect(parseRateLimitServerConfig(redis, {})).toMatchObject({ checkConfig: false });
    expect(parseRateLimitServerConfig([...redis, '--check-config'], {})).toMatchObject({ checkConfig: true });
    expect(() =>
      parseRateLimitServerConfig(
        [...redis, '--check-config', '--redis-password-file', '/nonexistent/pw'],
        {},
      ),
    ).toThrow('--redis-password-file "/nonexistent/pw" cannot be used');
  });
});
