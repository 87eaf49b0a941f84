import { describe, expect, it } from 'vitest';
import {
  redisClientOptions,
  redisConnectionErrorKind,
  tlsConnectionOptions,
  type RedisConnectionSettings,
} from './redis-connection.js';

const common = {
  commandTimeout: 500,
  maxRetriesPerRequest: 0,
  enableOfflineQueue: false,
  enableAutoPipelining: false,
};
const noFiles = {
  caFile: undefined,
  certFile: undefined,
  keyFile: undefined,
  serverName: undefined,
  refreshMs: 60_000,
};
const base: Omit<RedisConnectionSettings, 'topology'> = {
  tls: true,
  tlsFiles: noFiles,
  username: 'portico',
  password: 'secret',
};
const tls = tlsConnectionOptions(
  { ca: Buffer.from('CA'), cert: Buffer.from('C'), key: Buffer.from('K') },
  'redis.internal',
);

describe('tlsConnectionOptions', () => {
  it('sets what the files gave, and the server name', () => {
    expect(tls).toEqual({
      ca: Buffer.from('CA'),
      cert: Buffer.from('C'),
      key: Buffer.from('K'),
      servername: 'redis.internal',
    });
    expect(tlsConnectionOptions({}, undefined)).toEqual({});
  });
});

describe('redisClientOptions', () => {
  it('gives one server its address, database, credentials and the shared TLS object', () => {
    const client = redisClientOptions(
      { ...base, topology: { kind: 'standalone', host: 'r', port: 6380, db: 3 } },
      tls,
      common,
    );
    expect(client).toEqual({
      kind: 'redis',
      options: { host: 'r', port: 6380, db: 3, username: 'portico', password: 'secret', tls, ...common },
    });
    expect(client.kind === 'redis' && client.options.tls).toBe(tls);
  });

  it('leaves TLS out when it is off', () => {
    const client = redisClientOptions(
      { ...base, tls: false, topology: { kind: 'standalone', host: 'r', port: 1, db: 0 } },
      undefined,
      common,
    );
    expect(client.kind === 'redis' && 'tls' in client.options).toBe(false);
  });

  it('keeps the host names of a TLS cluster (dnsLookup) and gives each node credentials and TLS', async () => {
    const client = redisClientOptions(
      { ...base, topology: { kind: 'cluster', seeds: [{ host: 'redis-0.redis', port: 6379 }] } },
      tls,
      common,
    );
    if (client.kind !== 'cluster') throw new Error('not a cluster');
    expect(client.seeds).toEqual([{ host: 'redis-0.redis', port: 6379 }]);
    expect(client.options.redisOptions).toEqual({
      username: 'portico',
      password: 'secret',
      tls,
      commandTimeout: 500,
      maxRetriesPerRequest: 0,
    });
    expect(client.options.enableOfflineQueue).toBe(false);
    const lookup = client.options.dnsLookup;
    const resolved = await new Promise<string>((resolve) => {
      lookup?.('redis-1.redis.svc', (_err, address) => {
        resolve(address);
      });
    });
    expect(resolved).toBe('redis-1.redis.svc');
    const plain = redisClientOptions(
      { ...base, tls: false, topology: { kind: 'cluster', seeds: [{ host: 'a', port: 1 }] } },
      undefined,
      common,
    );
    expect(plain.kind === 'cluster' && plain.options.dnsLookup).toBeUndefined();
  });

  it('asks the sentinels for the primary, with TLS to both and the failover detector', () => {
    const client = redisClientOptions(
      {
        ...base,
        topology: {
          kind: 'sentinel',
          sentinels: [
            { host: 's1', port: 26379 },
            { host: 's2', port: 26380 },
          ],
          masterName: 'counters',
          db: 0,
          sentinelTls: true,
          sentinelUsername: 'sentinel-user',
          sentinelPassword: 'sentinel-secret',
        },
      },
      tls,
      common,
    );
    expect(client).toEqual({
      kind: 'redis',
      options: {
        sentinels: [
          { host: 's1', port: 26379 },
          { host: 's2', port: 26380 },
        ],
        name: 'counters',
        db: 0,
        username: 'portico',
        password: 'secret',
        sentinelUsername: 'sentinel-user',
        sentinelPassword: 'sentinel-secret',
        sentinelTLS: tls,
        tls,
        enableTLSForSentinelMode: true,
        sentinelCommandTimeout: 500,
        failoverDetector: true,
        ...common,
      },
    });
  });
});

describe('redisConnectionErrorKind', () => {
  it('tells a refused password, a failed handshake and missing sentinels from other failures', () => {
    // Redis 7's replies and node:tls's codes.
    expect(
      redisConnectionErrorKind(new Error('WRONGPASS invalid username-password pair or user is disabled.')),
    ).toBe('auth');
    expect(redisConnectionErrorKind(new Error('NOAUTH Authentication required.'))).toBe('auth');
    const untrusted = Object.assign(new Error('self-signed certificate in certificate chain'), {
      code: 'SELF_SIGNED_CERT_IN_CHAIN',
    });
    expect(redisConnectionErrorKind(untrusted)).toBe('tls');
    const altName = Object.assign(new Error("Hostname/IP does not match certificate's altnames"), {
      code: 'ERR_TLS_CERT_ALTNAME_INVALID',
    });
    expect(redisConnectionErrorKind(altName)).toBe('tls');
    expect(
      redisConnectionErrorKind(new Error('All sentinels are unreachable. Retrying from scratch after 10ms.')),
    ).toBe('sentinel');
    expect(
      redisConnectionErrorKind(
        Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:1'), { code: 'ECONNREFUSED' }),
      ),
    ).toBe('connection');
    expect(redisConnectionErrorKind('not an error')).toBe('connection');
  });
});
