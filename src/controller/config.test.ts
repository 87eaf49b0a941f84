import { describe, expect, it } from 'vitest';
import { ConfigError, parseControllerConfig } from './config.js';

const required = [
  '--platform-cname-target',
  'Sites.Platform.Example.',
  '--acme-directory-url',
  'https://ca.example/dir',
];

describe('parseControllerConfig', () => {
  it('reads flags, normalizes the target and reserves it', () => {
    const c = parseControllerConfig([...required, '--dns-server', '127.0.0.1:53, 10.0.0.1:53'], {});
    if ('help' in c) throw new Error('unexpected help');
    expect(c.platformCnameTarget).toBe('sites.platform.example');
    expect(c.dnsServers).toEqual(['127.0.0.1:53', '10.0.0.1:53']);
    expect(c.reservedDomains).toEqual(['sites.platform.example']);
    expect(c.workers).toBe(4);
  });

  it('falls back to environment variables', () => {
    const c = parseControllerConfig([], {
      PORTICO_PLATFORM_CNAME_TARGET: 't.example',
      PORTICO_ACME_DIRECTORY_URL: 'https://ca.example/dir',
      PORTICO_APEX_ADDRESSES: '203.0.113.1,2001:db8::1',
    });
    if ('help' in c) throw new Error('unexpected help');
    expect(c.apexAddresses).toEqual(['203.0.113.1', '2001:db8::1']);
  });

  it('reads the ACME request timeout in seconds from the flag or the environment, 30 s by default', () => {
    const byDefault = parseControllerConfig(required, {});
    const fromFlag = parseControllerConfig([...required, '--acme-request-timeout-seconds', '3'], {
      PORTICO_ACME_REQUEST_TIMEOUT_SECONDS: '45',
    });
    const fromEnv = parseControllerConfig(required, { PORTICO_ACME_REQUEST_TIMEOUT_SECONDS: '45' });
    if ('help' in byDefault || 'help' in fromFlag || 'help' in fromEnv) throw new Error('unexpected help');
    expect(byDefault.acmeRequestTimeoutMs).toBe(30_000);
    expect(fromFlag.acmeRequestTimeoutMs).toBe(3_000);
    expect(fromEnv.acmeRequestTimeoutMs).toBe(45_000);
    expect(() => parseControllerConfig([...required, '--acme-request-timeout-seconds', '0.5'], {})).toThrow(
      /--acme-request-timeout-seconds must be a positive integer, got "0.5"/,
    );
  });

  it('waits 1,800 s (30 minutes, docs/troubleshooting.md) for a certificate before CertificateOverdue unless told otherwise', () => {
    const byDefault = parseControllerConfig(required, {});
    const fromFlag = parseControllerConfig([...required, '--certificate-overdue-seconds', '60'], {});
    if ('help' in byDefault || 'help' in fromFlag) throw new Error('unexpected help');
    expect(byDefault.certificateOverdueMs).toBe(1_800_000);
    expect(fromFlag.certificateOverdueMs).toBe(60_000);
  });

  it('retries a failed order first after 60 s (docs/customdomains.md, "Schedules") unless told otherwise', () => {
    const byDefault = parseControllerConfig(required, {});
    const fromFlag = parseControllerConfig([...required, '--issuance-first-retry-seconds', '3'], {});
    const fromEnv = parseControllerConfig(required, { PORTICO_ISSUANCE_FIRST_RETRY_SECONDS: '5' });
    if ('help' in byDefault || 'help' in fromFlag || 'help' in fromEnv) throw new Error('unexpected help');
    expect(byDefault.issuanceFirstRetryMs).toBe(60_000);
    expect(fromFlag.issuanceFirstRetryMs).toBe(3_000);
    expect(fromEnv.issuanceFirstRetryMs).toBe(5_000);
    expect(() => parseControllerConfig([...required, '--issuance-first-retry-seconds', '0'], {})).toThrow(
      /--issuance-first-retry-seconds must be a positive integer/,
    );
  });

  it('rejects a missing target, a bad number, a bad address and half an EAB, naming the flag', () => {
    expect(() => parseControllerConfig(['--acme-directory-url', 'https://x/dir'], {})).toThrow(
      /--platform-cname-target/,
    );
    expect(() => parseControllerConfig([...required, '--workers', '0'], {})).toThrow(
      /--workers must be a positive integer/,
    );
    expect(() => parseControllerConfig([...required, '--apex-addresses', 'example.com'], {})).toThrow(
      ConfigError,
    );
    expect(() => parseControllerConfig([...required, '--acme-eab-kid', 'k'], {})).toThrow(/go together/);
    expect(() => parseControllerConfig([...required, '--no-such-flag'], {})).toThrow();
  });

  it('reads the DNS-01 challenge zone settings, off without a zone, and says what is missing or wrong', () => {
    const off = parseControllerConfig(required, {});
    if ('help' in off) throw new Error('unexpected help');
    expect(off.dns01).toBeUndefined();

    const secret = Buffer.alloc(32, 3).toString('base64');
    const on = parseControllerConfig(
      [
        ...required,
        '--dns01-challenge-zone',
        'ACME-Challenges.Example.NET.',
        '--dns01-server',
        'ns1.example.net:53',
      ],
      { PORTICO_DNS01_TSIG_KEY_NAME: 'portico-challenge.', PORTICO_DNS01_TSIG_SECRET: secret },
    );
    if ('help' in on) throw new Error('unexpected help');
    expect(on.dns01).toEqual({
      zone: 'acme-challenges.example.net',
      server: { host: 'ns1.example.net', port: 53 },
      key: { name: 'portico-challenge.', algorithm: 'hmac-sha256', secret: Buffer.alloc(32, 3) },
    });

    expect(() => parseControllerConfig([...required, '--dns01-challenge-zone', 'z.example'], {})).toThrow(
      '--dns01-challenge-zone needs --dns01-server, --dns01-tsig-key-name, --dns01-tsig-secret too',
    );
    const base = [
      ...required,
      '--dns01-challenge-zone',
      'z.example',
      '--dns01-server',
      'ns:53',
      '--dns01-tsig-key-name',
      'k',
    ];
    expect(() => parseControllerConfig([...base, '--dns01-tsig-secret', 'not base64!'], {})).toThrow(
      '--dns01-tsig-secret must be the key secret in base64',
    );
    expect(() =>
      parseControllerConfig(
        [...base, '--dns01-tsig-secret', secret, '--dns01-tsig-algorithm', 'hmac-md5'],
        {},
      ),
    ).toThrow(/--dns01-tsig-algorithm must be one of hmac-sha256/);
  });

  it('reads the apps domain, its zone and the RFC 2136 settings, reserves the domain, and refuses bad values', () => {
    const off = parseControllerConfig(required, {});
    if ('help' in off) throw new Error('unexpected help');
    expect(off.appsDomain).toBeUndefined();

    const secret = Buffer.alloc(32, 5).toString('base64');
    const access = ['--dns01-server', 'ns1.example.net:53', '--dns01-tsig-key-name', 'portico.'];
    const on = parseControllerConfig([...required, '--apps-domain', 'Apps.Platform.Example.', ...access], {
      PORTICO_DNS01_TSIG_SECRET: secret,
    });
    if ('help' in on) throw new Error('unexpected help');
    expect(on.appsDomain).toEqual({
      domain: 'apps.platform.example',
      zone: 'apps.platform.example',
      server: { host: 'ns1.example.net', port: 53 },
      key: { name: 'portico.', algorithm: 'hmac-sha256', secret: Buffer.alloc(32, 5) },
    });
    expect(on.reservedDomains).toContain('apps.platform.example');
    // No challenge zone is needed for the apps domain alone.
    expect(on.dns01).toBeUndefined();

    const zoned = parseControllerConfig(
      [
        ...required,
        '--apps-domain',
        'apps.platform.example',
        '--apps-domain-zone',
        'platform.example',
        ...access,
      ],
      { PORTICO_DNS01_TSIG_SECRET: secret },
    );
    if ('help' in zoned) throw new Error('unexpected help');
    expect(zoned.appsDomain?.zone).toBe('platform.example');

    expect(() =>
      parseControllerConfig(
        [
          ...required,
          '--apps-domain',
          'apps.platform.example',
          '--apps-domain-zone',
          'other.example',
          ...access,
        ],
        { PORTICO_DNS01_TSIG_SECRET: secret },
      ),
    ).toThrow('--apps-domain-zone other.example must be apps.platform.example or a domain above it');
    expect(() => parseControllerConfig([...required, '--apps-domain', 'apps.example'], {})).toThrow(
      '--apps-domain needs --dns01-server, --dns01-tsig-key-name, --dns01-tsig-secret too',
    );
    expect(() =>
      parseControllerConfig([...required, '--apps-domain', '*.apps.example', ...access], {
        PORTICO_DNS01_TSIG_SECRET: secret,
      }),
    ).toThrow(/--apps-domain \*\.apps\.example: hostname must not be a wildcard/);
  });

  it('reads the ownership verification and dangling settings, and refuses an unknown policy', () => {
    const c = parseControllerConfig(required, {});
    if ('help' in c) throw new Error('unexpected help');
    expect(c.ownershipVerification).toEqual({
      policy: 'recently-claimed',
      recentMs: 30 * 86_400_000,
      keySecretName: 'portico-ownership-key',
    });
    expect(c.danglingAfterMs).toBe(7 * 86_400_000);
    const set = parseControllerConfig(
      [...required, '--ownership-verification', 'always', '--dangling-after-seconds', '5'],
      {},
    );
    if ('help' in set) throw new Error('unexpected help');
    expect(set.ownershipVerification.policy).toBe('always');
    expect(set.danglingAfterMs).toBe(5000);
    expect(() => parseControllerConfig([...required, '--ownership-verification', 'sometimes'], {})).toThrow(
      /--ownership-verification must be one of always, recently-claimed, never, got "sometimes"/,
    );
    expect(() => parseControllerConfig([...required, '--ownership-verification', 'sometimes'], {})).toThrow(
      ConfigError,
    );
  });

  it('reads the Contour attachment: on by default, with the documented ExtensionService, Service, timeout and headers', () => {
    const byDefault = parseControllerConfig(required, {});
    if ('help' in byDefault) throw new Error('unexpected help');
    expect([...byDefault.rateLimitAttachments.keys()]).toEqual(['contour']);
    expect(byDefault.rateLimitAttachments.get('contour')).toEqual({
      headers: { keyId: 'x-api-key-id', plan: 'x-api-plan' },
      extensionService: {
        namespace: 'portico-system',
        name: 'portico-ratelimit',
        serviceName: 'portico-ratelimit',
        servicePort: 8081,
        timeoutMs: 1000,
      },
      clusterDomain: 'cluster.local',
    });
    const set = parseControllerConfig(
      [
        ...required,
        '--ratelimit-extension-service',
        'contour/rls',
        '--ratelimit-service',
        'rls:9000',
        '--ratelimit-key-id-header',
        'X-Key',
      ],
      { PORTICO_RATELIMIT_GATEWAY_TIMEOUT_MS: '250', PORTICO_RATELIMIT_PLAN_HEADER: 'x-tier' },
    );
    if ('help' in set) throw new Error('unexpected help');
    expect(set.rateLimitAttachments.get('contour')).toEqual({
      headers: { keyId: 'x-key', plan: 'x-tier' },
      extensionService: {
        namespace: 'contour',
        name: 'rls',
        serviceName: 'rls',
        servicePort: 9000,
        timeoutMs: 250,
      },
      clusterDomain: 'cluster.local',
    });
    const off = parseControllerConfig([...required, '--contour-attachment', 'false'], {});
    if ('help' in off) throw new Error('unexpected help');
    expect(off.rateLimitAttachments.has('contour')).toBe(false);
    expect(() => parseControllerConfig([...required, '--ratelimit-service', 'rls'], {})).toThrow(
      /--ratelimit-service must be name:port/,
    );
    expect(() => parseControllerConfig([...required, '--ratelimit-plan-header', 'x plan'], {})).toThrow(
      /--ratelimit-plan-header must be a header name/,
    );
    expect(() => parseControllerConfig([...required, '--ratelimit-plan-header', 'X-API-KEY-ID'], {})).toThrow(
      /must be different headers/,
    );
  });

  it('reads the Envoy Gateway attachment: off by default, else the rate-limit Service Envoy calls', () => {
    const off = parseControllerConfig(required, {});
    if ('help' in off) throw new Error('unexpected help');
    expect(off.rateLimitAttachments.has('envoy-gateway')).toBe(false);
    const on = parseControllerConfig(
      [...required, '--envoy-gateway-attachment', 'true', '--ratelimit-service', 'rls:9000'],
      { PORTICO_CLUSTER_DOMAIN: 'example.internal', PORTICO_NAMESPACE: 'portico' },
    );
    if ('help' in on) throw new Error('unexpected help');
    expect(on.rateLimitAttachments.get('envoy-gateway')).toEqual({
      headers: { keyId: 'x-api-key-id', plan: 'x-api-plan' },
      extensionService: {
        namespace: on.namespace,
        name: 'portico-ratelimit',
        serviceName: 'rls',
        servicePort: 9000,
        timeoutMs: 1000,
      },
      clusterDomain: 'example.internal',
    });
    expect(() =>
      parseControllerConfig(
        [...required, '--envoy-gateway-attachment', 'true', '--cluster-domain', 'Bad_Domain'],
        {},
      ),
    ).toThrow(/--cluster-domain must be a DNS domain/);
  });

  it('reads the data-plane acknowledgement (on by default) and the gateway HTTPS port (443 by default)', () => {
    const byDefault = parseControllerConfig(required, {});
    const off = parseControllerConfig([...required, '--gateway-https-port', '8443'], {
      PORTICO_DATA_PLANE_ACKNOWLEDGEMENT: 'false',
    });
    if ('help' in byDefault || 'help' in off) throw new Error('unexpected help');
    expect(byDefault.routing.dataPlaneAcknowledgement).toBe(true);
    expect(byDefault.routing.gatewayHttpsPort).toBe(443);
    expect(off.routing.dataPlaneAcknowledgement).toBe(false);
    expect(off.routing.gatewayHttpsPort).toBe(8443);
    expect(() => parseControllerConfig([...required, '--data-plane-acknowledgement', 'off'], {})).toThrow(
      /--data-plane-acknowledgement must be true or false, got "off"/,
    );
    expect(() => parseControllerConfig([...required, '--gateway-https-port', '70000'], {})).toThrow(
      /gateway HTTPS port 70000 is not a port number/,
    );
  });

  it('reads the data plane (unset by default), which names it in messages unless --data-plane-name does', () => {
    const byDefault = parseControllerConfig(required, {});
    const contour = parseControllerConfig([...required, '--data-plane', 'contour'], {});
    const named = parseControllerConfig([...required, '--data-plane-name', 'Edge'], {
      PORTICO_DATA_PLANE: 'envoy-gateway',
    });
    if ('help' in byDefault || 'help' in contour || 'help' in named) throw new Error('unexpected help');
    expect(byDefault.routing.dataPlane).toBeUndefined();
    expect(byDefault.routing.dataPlaneName).toBeUndefined();
    expect(contour.routing).toMatchObject({ dataPlane: 'contour', dataPlaneName: 'Contour' });
    expect(named.routing).toMatchObject({ dataPlane: 'envoy-gateway', dataPlaneName: 'Edge' });
    expect(() => parseControllerConfig([...required, '--data-plane', 'haproxy'], {})).toThrow(
      /--data-plane must be one of contour, envoy-gateway, traefik, ingress-nginx, got "haproxy"/,
    );
  });

  it('leaves the serving check off without an address, and reads its settings from flags or the environment', () => {
    const off = parseControllerConfig(required, { PORTICO_SERVING_CHECK_ADDRESS: '' });
    if ('help' in off) throw new Error('unexpected help');
    expect(off.servingCheck).toBeUndefined();
    const byDefault = parseControllerConfig(required, {
      PORTICO_SERVING_CHECK_ADDRESS: 'ingress-nginx-controller.ingress-nginx.svc:443',
    });
    if ('help' in byDefault) throw new Error('unexpected help');
    expect(byDefault.servingCheck).toEqual({
      address: 'ingress-nginx-controller.ingress-nginx.svc:443',
      intervalMs: 600_000,
      timeoutMs: 5_000,
      propagationGraceMs: 30_000,
    });
    const set = parseControllerConfig(
      [
        ...required,
        '--serving-check-address',
        '[fd00::1]:8443',
        '--serving-check-interval-seconds',
        '60',
        '--serving-check-timeout-ms',
        '1500',
        '--serving-check-project-header',
        'X-Served-By=platform',
        '--serving-check-propagation-seconds',
        '0',
      ],
      {},
    );
    if ('help' in set) throw new Error('unexpected help');
    expect(set.servingCheck).toEqual({
      address: '[fd00::1]:8443',
      intervalMs: 60_000,
      timeoutMs: 1_500,
      propagationGraceMs: 0,
      projectHeader: { name: 'X-Served-By', value: 'platform' },
    });
    const anyValue = parseControllerConfig(
      [...required, '--serving-check-address', 'ingress:443', '--serving-check-project-header', 'X-Project'],
      {},
    );
    if ('help' in anyValue) throw new Error('unexpected help');
    expect(anyValue.servingCheck?.projectHeader).toEqual({ name: 'X-Project' });
  });

  it('refuses a malformed serving-check address, interval, timeout or header, naming the flag', () => {
    expect(() =>
      parseControllerConfig([...required, '--serving-check-address', 'https://ingress/'], {}),
    ).toThrow(/--serving-check-address: the serving-check address must be host:port/);
    expect(() =>
      parseControllerConfig([...required, '--serving-check-address', 'ingress:99999'], {}),
    ).toThrow(ConfigError);
    expect(() => parseControllerConfig([...required, '--serving-check-interval-seconds', '0'], {})).toThrow(
      /--serving-check-interval-seconds must be a positive integer/,
    );
    expect(() => parseControllerConfig([...required, '--serving-check-timeout-ms', '1.5'], {})).toThrow(
      /--serving-check-timeout-ms must be a positive integer/,
    );
    expect(() =>
      parseControllerConfig([...required, '--serving-check-project-header', 'X Bad=1'], {}),
    ).toThrow(/--serving-check-project-header must be name\[=value\]/);
  });

  it('makes the single-issuer flags a list of one issuer named default, with the budget flags', () => {
    const c = parseControllerConfig(
      [...required, '--acme-max-orders-in-flight', '7', '--acme-profile', 'classic'],
      {},
    );
    if ('help' in c) throw new Error('unexpected help');
    expect(c.acmeIssuers).toEqual([
      {
        name: 'default',
        directoryUrl: 'https://ca.example/dir',
        profile: 'classic',
        caaIdentities: [],
        accountSecretName: 'portico-acme-account',
        orderBudget: { orders: 300, windowMs: 10_800_000, maxInFlight: 7 },
      },
    ]);
    expect(c.acmeFailover).toEqual({
      failuresBeforeFailover: 3,
      longRetryAfterMs: 600_000,
      passOverMs: 600_000,
    });
  });

  it('reads --acme-issuers instead of --acme-directory-url, and the failover flags', () => {
    const c = parseControllerConfig(
      ['--platform-cname-target', 't.example', '--acme-failover-after-failures', '1'],
      {
        PORTICO_ACME_ISSUERS:
          '[{"name":"a","directoryUrl":"https://a.example/dir"},{"name":"b","directoryUrl":"https://b.example/dir"}]',
      },
    );
    if ('help' in c) throw new Error('unexpected help');
    expect(c.acmeIssuers.map((i) => [i.name, i.accountSecretName])).toEqual([
      ['a', 'portico-acme-account'],
      ['b', 'portico-acme-account-b'],
    ]);
    expect(c.acmeDirectoryUrl).toBe('https://a.example/dir');
    expect(c.acmeFailover.failuresBeforeFailover).toBe(1);
  });

  it('stops at start on a bad issuer list, naming the entry and the field', () => {
    const issuers =
      '[{"name":"a","directoryUrl":"https://a.example/dir","externalAccountBinding":{"keyId":"kid"}}]';
    expect(() =>
      parseControllerConfig(['--platform-cname-target', 't.example', '--acme-issuers', issuers], {}),
    ).toThrow(ConfigError);
    expect(() =>
      parseControllerConfig(['--platform-cname-target', 't.example', '--acme-issuers', issuers], {}),
    ).toThrow(
      /acme\.issuers\[0\] \(a\)\.externalAccountBinding: keyId is set but hmacKeySecretRef\.name is not/,
    );
    expect(() => parseControllerConfig([...required, '--acme-failover-after-failures', '0'], {})).toThrow(
      /--acme-failover-after-failures must be a positive integer/,
    );
  });

  it('reads --check-config from the command line only, and checks everything else as a start does', () => {
    expect(parseControllerConfig(required, {})).toMatchObject({ checkConfig: false });
    expect(parseControllerConfig([...required, '--check-config'], {})).toMatchObject({ checkConfig: true });
    // No variable turns it on: a Pod's environment could otherwise keep it from ever starting.
    expect(parseControllerConfig(required, { PORTICO_CHECK_CONFIG: 'true' })).toMatchObject({
      checkConfig: false,
    });
    expect(() => parseControllerConfig([...required, '--check-config', '--workers', '0'], {})).toThrow(
      /--workers must be a positive integer/,
    );
  });
});
