import { describe, expect, it } from 'vitest';
import { parseIssuers, singleIssuer, type IssuerDefaults } from './issuer-config.js';

const DEFAULTS: IssuerDefaults = {
  email: 'ops@example.com',
  accountSecretName: 'portico-acme-account',
  orderBudget: { orders: 300, windowMs: 10_800_000, maxInFlight: 50 },
};

describe('parseIssuers', () => {
  it('reads a list in order, with each entry’s own settings and the defaults for the rest', () => {
    const issuers = parseIssuers(
      `
- name: letsencrypt
  directoryUrl: https://acme-v02.api.letsencrypt.org/directory
  profile: classic
  caaIdentities: [letsencrypt.org]
- name: zerossl
  directoryUrl: https://acme.zerossl.com/v2/DV90
  email: certs@example.com
  externalAccountBinding:
    keyId: kid-1
    hmacKeySecretRef: {name: zerossl-eab}
  caBundleFile: /etc/portico/acme-ca/zerossl/ca.crt
  orderBudget: {orders: 100, windowSeconds: 3600}
`,
      DEFAULTS,
    );
    expect(issuers).toEqual([
      {
        name: 'letsencrypt',
        directoryUrl: 'https://acme-v02.api.letsencrypt.org/directory',
        email: 'ops@example.com',
        profile: 'classic',
        caaIdentities: ['letsencrypt.org'],
        accountSecretName: 'portico-acme-account',
        orderBudget: DEFAULTS.orderBudget,
      },
      {
        name: 'zerossl',
        directoryUrl: 'https://acme.zerossl.com/v2/DV90',
        email: 'certs@example.com',
        externalAccountBinding: {
          keyId: 'kid-1',
          hmacKey: { secretRef: { name: 'zerossl-eab', key: 'hmac-key' } },
        },
        caaIdentities: [],
        caBundleFile: '/etc/portico/acme-ca/zerossl/ca.crt',
        accountSecretName: 'portico-acme-account-zerossl',
        orderBudget: { orders: 100, windowMs: 3_600_000, maxInFlight: 50 },
      },
    ]);
  });

  it('reads JSON too (the chart renders the list as JSON)', () => {
    const [issuer] = parseIssuers('[{"name":"a","directoryUrl":"https://ca.example/dir"}]', DEFAULTS);
    expect(issuer?.name).toBe('a');
  });

  it('treats an empty EAB (the chart’s defaults) as none', () => {
    const [issuer] = parseIssuers(
      '[{"name":"a","directoryUrl":"https://ca.example/dir","externalAccountBinding":{"keyId":"","hmacKeySecretRef":{"name":"","key":"hmac-key"}}}]',
      DEFAULTS,
    );
    expect(issuer?.externalAccountBinding).toBeUndefined();
  });

  const bad: [string, string, RegExp][] = [
    ['not YAML', '[', /--acme-issuers is not YAML or JSON/],
    ['not a list', 'name: a', /must be a list of at least one issuer/],
    ['an empty list', '[]', /must be a list of at least one issuer/],
    [
      'a bad name',
      '[{"name":"Let Encrypt","directoryUrl":"https://ca/dir"}]',
      /acme\.issuers\[0\] \(Let Encrypt\)\.name: must be a lower-case DNS label/,
    ],
    [
      'a directory that is no URL',
      '[{"name":"a","directoryUrl":"ca/dir"}]',
      /acme\.issuers\[0\] \(a\)\.directoryUrl: must be an http\(s\) URL/,
    ],
    [
      'an unknown field',
      '[{"name":"a","directoryUrl":"https://ca/dir","directory":"x"}]',
      /acme\.issuers\[0\] \(a\)/,
    ],
    [
      'a name used twice',
      '[{"name":"a","directoryUrl":"https://ca/dir"},{"name":"a","directoryUrl":"https://cb/dir"}]',
      /acme\.issuers\[1\] \(a\): the name "a" is used twice/,
    ],
    [
      'an EAB key id without its HMAC Secret',
      '[{"name":"a","directoryUrl":"https://ca/dir","externalAccountBinding":{"keyId":"kid"}}]',
      /acme\.issuers\[0\] \(a\)\.externalAccountBinding: keyId is set but hmacKeySecretRef\.name is not/,
    ],
    [
      'an HMAC Secret without its key id',
      '[{"name":"a","directoryUrl":"https://ca/dir","externalAccountBinding":{"hmacKeySecretRef":{"name":"s"}}}]',
      /hmacKeySecretRef is set but keyId is not/,
    ],
    [
      'a budget that is not a positive integer',
      '[{"name":"a","directoryUrl":"https://ca/dir","orderBudget":{"orders":0}}]',
      /acme\.issuers\[0\] \(a\)\.orderBudget\.orders/,
    ],
  ];
  it.each(bad)('refuses %s with a clear error', (_name, text, message) => {
    expect(() => parseIssuers(text, DEFAULTS)).toThrow(message);
  });
});

describe('singleIssuer', () => {
  it('makes the single-issuer flags a list of one named default, with the account Secret as before', () => {
    expect(
      singleIssuer(
        {
          directoryUrl: 'https://ca/dir',
          eab: { keyId: 'kid', hmacKey: 'c2VjcmV0' },
          profile: 'shortlived',
          caaIdentities: [],
        },
        DEFAULTS,
      ),
    ).toEqual([
      {
        name: 'default',
        directoryUrl: 'https://ca/dir',
        email: 'ops@example.com',
        externalAccountBinding: { keyId: 'kid', hmacKey: { value: 'c2VjcmV0' } },
        profile: 'shortlived',
        caaIdentities: [],
        accountSecretName: 'portico-acme-account',
        orderBudget: DEFAULTS.orderBudget,
      },
    ]);
  });
});
