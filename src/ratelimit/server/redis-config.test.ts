import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { RedisConnectionSettings } from '../redis-connection.js';
import { parseRateLimitServerConfig, type RateLimitServerConfig } from './config.js';

const dir = mkdtempSync(path.join(tmpdir(), 'portico-redis-config-'));
const ca = path.join(dir, 'ca.crt');
const cert = path.join(dir, 'tls.crt');
const key = path.join(dir, 'tls.key');
for (const file of [ca, cert, key]) writeFileSync(file, 'PEM');

function redis(args: string[], env: NodeJS.ProcessEnv = {}): RedisConnectionSettings {
  return (parseRateLimitServerConfig(args, env) as RateLimitServerConfig).redis;
}

describe('the Redis connection flags', () => {
  it('reads host, port, database, TLS and credentials from the URL', () => {
    expect(redis(['--redis-url', 'rediss://rl:p%40ss@redis.example:6380/2'])).toEqual({
      topology: { kind: 'standalone', host: 'redis.example', port: 6380, db: 2 },
      tls: true,
      tlsFiles: {
        caFile: undefined,
        certFile: undefined,
        keyFile: undefined,
        serverName: undefined,
        refreshMs: 60_000,
      },
      username: 'rl',
      password: 'p@ss',
    });
    expect(redis(['--redis-url', 'redis://[::1]'])).toMatchObject({
      topology: { kind: 'standalone', host: '::1', port: 6379, db: 0 },
      tls: false,
    });
  });

  it('takes username and password from their flags or variables over the URL', () => {
    expect(
      redis(['--redis-url', 'redis://old:old@r:1', '--redis-username', 'portico'], {
        PORTICO_RATELIMIT_REDIS_PASSWORD: 'from-secret',
      }),
    ).toMatchObject({ username: 'portico', password: 'from-secret' });
  });

  it('reads the TLS files, checked readable, with TLS from --redis-tls', () => {
    expect(
      redis([
        '--redis-url',
        'redis://r:6379',
        '--redis-tls',
        '--redis-tls-ca-file',
        ca,
        '--redis-tls-cert-file',
        cert,
        '--redis-tls-key-file',
        key,
        '--redis-tls-server-name',
        'redis.internal',
        '--redis-tls-refresh-seconds',
        '5',
      ]),
    ).toMatchObject({
      tls: true,
      tlsFiles: { caFile: ca, certFile: cert, keyFile: key, serverName: 'redis.internal', refreshMs: 5_000 },
    });
  });

  it('refuses TLS files without TLS, half a key pair and unreadable files', () => {
    expect(() => redis(['--redis-url', 'redis://r:1', '--redis-tls-ca-file', ca])).toThrow(
      '--redis-tls-ca-file needs TLS: a rediss:// URL, --redis-tls or --redis-sentinel-tls',
    );
    expect(() => redis(['--redis-url', 'rediss://r:1', '--redis-tls-cert-file', cert])).toThrow(
      '--redis-tls-cert-file and --redis-tls-key-file go together',
    );
    expect(() =>
      redis(['--redis-url', 'rediss://r:1', '--redis-tls-ca-file', path.join(dir, 'none')]),
    ).toThrow(/--redis-tls-ca-file ".*none" cannot be read/);
    expect(() => redis(['--redis-url', 'rediss://r:1', '--redis-tls-refresh-seconds', '0'])).toThrow(
      /--redis-tls-refresh-seconds must be a whole number of seconds from 1 to 3600/,
    );
  });

  it('reads a cluster from the URL and --redis-cluster-nodes', () => {
    expect(
      redis(['--redis-url', 'rediss://a:7000', '--redis-cluster', '--redis-cluster-nodes', 'b:7001, c:7002']),
    ).toMatchObject({
      topology: {
        kind: 'cluster',
        seeds: [
          { host: 'a', port: 7000 },
          { host: 'b', port: 7001 },
          { host: 'c', port: 7002 },
        ],
      },
      tls: true,
    });
    expect(() => redis(['--redis-url', 'redis://a:1', '--redis-cluster-nodes', 'b:2'])).toThrow(
      '--redis-cluster-nodes needs --redis-cluster',
    );
    expect(() => redis(['--redis-url', 'redis://a:1/3', '--redis-cluster'])).toThrow(
      /a Redis Cluster has only database 0/,
    );
    expect(() =>
      redis(['--redis-url', 'redis://a:1', '--redis-cluster', '--redis-cluster-nodes', 'b:x']),
    ).toThrow('--redis-cluster-nodes must list host:port, got "b:x"');
  });

  it('reads Sentinel: the sentinels, the master name, their credentials and TLS', () => {
    expect(
      redis(
        [
          '--redis-sentinels',
          's1:26379,s2:26379,s3:26379',
          '--redis-sentinel-master-name',
          'counters',
          '--redis-sentinel-tls',
          '--redis-tls',
          '--redis-tls-ca-file',
          ca,
          '--redis-db',
          '1',
        ],
        { PORTICO_RATELIMIT_REDIS_SENTINEL_PASSWORD: 'sp', PORTICO_RATELIMIT_REDIS_PASSWORD: 'rp' },
      ),
    ).toEqual({
      topology: {
        kind: 'sentinel',
        sentinels: [
          { host: 's1', port: 26379 },
          { host: 's2', port: 26379 },
          { host: 's3', port: 26379 },
        ],
        masterName: 'counters',
        db: 1,
        sentinelTls: true,
        sentinelUsername: undefined,
        sentinelPassword: 'sp',
      },
      tls: true,
      tlsFiles: {
        caFile: ca,
        certFile: undefined,
        keyFile: undefined,
        serverName: undefined,
        refreshMs: 60_000,
      },
      username: undefined,
      password: 'rp',
    });
  });

  it('refuses a Redis named twice or not at all, and flags of another topology', () => {
    expect(() => redis([])).toThrow(/--redis-url \(or \$PORTICO_RATELIMIT_REDIS_URL\) is required/);
    expect(() => redis(['--redis-url', 'redis://r:1', '--redis-sentinels', 's:26379'])).toThrow(
      '--redis-url and --redis-sentinels name Redis in two ways: set one',
    );
    expect(() => redis(['--redis-sentinels', 's:26379'])).toThrow(
      /--redis-sentinels needs --redis-sentinel-master-name/,
    );
    expect(() =>
      redis(['--redis-sentinels', 's:26379', '--redis-sentinel-master-name', 'm', '--redis-cluster']),
    ).toThrow('--redis-cluster and --redis-sentinels: a Redis Cluster has no sentinels');
    expect(() => redis(['--redis-url', 'redis://r:1', '--redis-sentinel-master-name', 'm'])).toThrow(
      '--redis-sentinel-master-name needs --redis-sentinels',
    );
    expect(() => redis(['--redis-sentinels', ',', '--redis-sentinel-master-name', 'm'])).toThrow(
      '--redis-sentinels must list host:port, got ","',
    );
    expect(() =>
      redis(['--redis-sentinels', 's:26379', '--redis-sentinel-master-name', 'm', '--redis-db', 'one']),
    ).toThrow(/--redis-db must name a database by its number/);
  });

  it('reads the credentials from files, with the files kept for reloading', () => {
    const user = path.join(dir, 'username');
    const pass = path.join(dir, 'password');
    const sentinelPass = path.join(dir, 'sentinel-password');
    writeFileSync(user, 'portico\n');
    writeFileSync(pass, 'from-file\n');
    writeFileSync(sentinelPass, 'sentinel-secret');
    expect(
      redis(['--redis-url', 'redis://old:old@r:1', '--redis-username-file', user], {
        PORTICO_RATELIMIT_REDIS_PASSWORD_FILE: pass,
      }),
    ).toMatchObject({
      username: 'portico',
      password: 'from-file',
      credentialFiles: { usernameFile: user, passwordFile: pass, sentinelPasswordFile: undefined },
    });
    expect(
      redis([
        '--redis-sentinels',
        's:26379',
        '--redis-sentinel-master-name',
        'm',
        '--redis-sentinel-password-file',
        sentinelPass,
      ]),
    ).toMatchObject({
      topology: { kind: 'sentinel', sentinelPassword: 'sentinel-secret' },
      credentialFiles: { sentinelPasswordFile: sentinelPass },
    });
    expect(redis(['--redis-url', 'redis://r:1'])).not.toHaveProperty('credentialFiles');
  });

  it('refuses a credential file that cannot be read or is empty, a file with its value flag, and a sentinel file without sentinels', () => {
    const empty = path.join(dir, 'empty');
    writeFileSync(empty, '\n');
    expect(() =>
      redis(['--redis-url', 'redis://r:1', '--redis-password-file', path.join(dir, 'nope')]),
    ).toThrow(/--redis-password-file ".*nope" cannot be used: ENOENT/);
    expect(() => redis(['--redis-url', 'redis://r:1', '--redis-username-file', empty])).toThrow(
      /--redis-username-file ".*empty" cannot be used: the file is empty/,
    );
    expect(() =>
      redis(['--redis-url', 'redis://r:1', '--redis-password-file', empty, '--redis-password', 'x']),
    ).toThrow('--redis-password-file and --redis-password name the same credential: set one');
    expect(() => redis(['--redis-url', 'redis://r:1', '--redis-sentinel-password-file', empty])).toThrow(
      '--redis-sentinel-password-file needs --redis-sentinels',
    );
  });
});
