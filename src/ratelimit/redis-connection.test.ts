import { Cluster, Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';
import {
  applyRedisCredentials,
  clusterNodeCredentials,
  redisClientOptions,
  redisConnectionErrorHint,
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

describe('applyRedisCredentials', () => {
  it('sets the options a Redis reads on its next connection, leaving undefined credentials as they are', () => {
    const client = new Redis({ lazyConnect: true, username: 'u', password: 'A' });
    try {
      applyRedisCredentials(client, { username: undefined, password: 'B', sentinelPassword: undefined });
      expect(client.options).toMatchObject({ username: 'u', password: 'B' });
    } finally {
      client.disconnect();
    }
  });

  it("sets the sentinels' password of a Sentinel client's connector (the same options object)", () => {
    const client = new Redis({
      lazyConnect: true,
      sentinels: [{ host: '127.0.0.1', port: 1 }],
      name: 'm',
      password: 'A',
      sentinelPassword: 'S',
    });
    try {
      applyRedisCredentials(client, { username: undefined, password: 'B', sentinelPassword: 'T' });
      expect(client.options).toMatchObject({ password: 'B', sentinelPassword: 'T' });
      const connector = (client as unknown as { connector: { options: object } }).connector;
      expect(connector.options).toBe(client.options);
    } finally {
      client.disconnect();
    }
  });

  it("sets a Cluster's redisOptions and a node added later, never a sentinel password", () => {
    const cluster = new Cluster([{ host: '127.0.0.1', port: 1 }], {
      lazyConnect: true,
      redisOptions: { username: 'u', password: 'A' },
    });
    const node = new Redis({ lazyConnect: true, username: 'u', password: 'A' });
    try {
      const credentials = { username: 'v', password: 'B', sentinelPassword: 'T' };
      applyRedisCredentials(cluster, credentials);
      expect(cluster.options.redisOptions).toMatchObject({ username: 'v', password: 'B' });
      expect(cluster.options.redisOptions).not.toHaveProperty('sentinelPassword');
      clusterNodeCredentials(node, credentials);
      expect(node.options).toMatchObject({ username: 'v', password: 'B' });
      expect(node.options.sentinelPassword).toBeUndefined();
    } finally {
      cluster.disconnect();
      node.disconnect();
    }
  });
});

describe('redisConnectionErrorHint', () => {
  const sentinelTopology = {
    kind: 'sentinel' as const,
    sentinels: [{ host: 's1', port: 26379 }],
    masterName: 'counters',
    db: 0,
    sentinelTls: false,
    sentinelUsername: undefined,
    sentinelPassword: undefined,
  };
  const timedOut = new Error(
    'All sentinels are unreachable. Retrying from scratch after 10ms. Last error: Command timed out',
  );

  it('names the sentinel password flag when a sentinel password is set', () => {
    const hint = redisConnectionErrorHint('sentinel', timedOut, {
      ...base,
      topology: { ...sentinelTopology, sentinelPassword: 'wrong' },
    });
    expect(hint).toContain('--redis-sentinels');
    expect(hint).toContain('--redis-sentinel-master-name');
    expect(hint).toContain('--redis-sentinel-password');
    expect(hint).not.toContain('--redis-sentinel-password-file');
  });

  it('names the file flag when the sentinel password comes from a file', () => {
    const hint = redisConnectionErrorHint('sentinel', timedOut, {
      ...base,
      topology: { ...sentinelTopology, sentinelPassword: 'wrong' },
      credentialFiles: { usernameFile: undefined, passwordFile: undefined, sentinelPasswordFile: '/p' },
    });
    expect(hint).toContain('--redis-sentinel-password-file');
  });

  it('names it when a sentinel answers NOAUTH or WRONGPASS though no password is set', () => {
    for (const last of ['NOAUTH Authentication required.', 'WRONGPASS invalid username-password pair']) {
      const err = new Error(
        `All sentinels are unreachable. Retrying from scratch after 10ms. Last error: ${last}`,
      );
      const hint = redisConnectionErrorHint('sentinel', err, { ...base, topology: sentinelTopology });
      expect(hint).toContain('--redis-sentinel-password');
      expect(hint).toContain('a sentinel refused the password');
    }
  });

  it('does not name it for sentinels without a password that do not answer', () => {
    const hint = redisConnectionErrorHint('sentinel', timedOut, { ...base, topology: sentinelTopology });
    expect(hint).toContain('--redis-sentinels');
    expect(hint).not.toContain('password');
  });

  it('names the password file flag for a refused password read from a file', () => {
    const topology = { kind: 'standalone' as const, host: 'r', port: 6379, db: 0 };
    expect(redisConnectionErrorHint('auth', new Error('WRONGPASS'), { ...base, topology })).toContain(
      '--redis-password /',
    );
    expect(
      redisConnectionErrorHint('auth', new Error('WRONGPASS'), {
        ...base,
        topology,
        credentialFiles: { usernameFile: undefined, passwordFile: '/p', sentinelPasswordFile: undefined },
      }),
    ).toContain('--redis-password-file');
  });
});
