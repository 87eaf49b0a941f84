import 'reflect-metadata';
import { webcrypto, X509Certificate } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import * as x509 from '@peculiar/x509';
import { beforeAll, describe, expect, it } from 'vitest';
import { hasFastProperties } from '../../test/support/v8-representation.js';
import { parsedSecret, slimTlsSecret } from './parsed-secret.js';

x509.cryptoProvider.set(webcrypto);

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };

/** A self-signed leaf for `hostname` and its key, as PEM. */
async function leafFor(hostname: string): Promise<{ certPem: string; keyPem: string }> {
  const keys = await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    name: `CN=${hostname}`,
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + 86_400_000),
    keys,
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: hostname }]),
      await x509.AuthorityKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  const keyPem = x509.PemConverter.encode(
    await webcrypto.subtle.exportKey('pkcs8', keys.privateKey),
    'PRIVATE KEY',
  );
  return { certPem: cert.toString('pem'), keyPem };
}

function tlsSecret(certPem: string, keyPem: string): V1Secret {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { namespace: 'shop', name: 'portico-www' },
    type: 'kubernetes.io/tls',
    data: {
      'tls.crt': Buffer.from(certPem).toString('base64'),
      'tls.key': Buffer.from(keyPem).toString('base64'),
    },
  };
}

describe('parsedSecret and slimTlsSecret', () => {
  let leaf: { certPem: string; keyPem: string };
  let otherKeyPem: string;
  beforeAll(async () => {
    leaf = await leafFor('www.shop.example');
    otherKeyPem = (await leafFor('other.example')).keyPem;
  });

  it('reads the leaf’s names and facts, not the intermediate’s, and whether the key is the leaf’s', () => {
    const intermediate = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n';
    const parsed = parsedSecret(tlsSecret(`${leaf.certPem}\n${intermediate}`, leaf.keyPem));
    expect(parsed?.hostnames).toEqual(new Set(['www.shop.example']));
    expect(parsed?.keyMatches).toBe(true);
    expect(parsed?.facts.dnsNames).toEqual(['www.shop.example']);
    expect(parsed?.facts.serialNumber).toBe(new X509Certificate(leaf.certPem).serialNumber);
    expect(parsedSecret(tlsSecret(leaf.certPem, otherKeyPem))?.keyMatches).toBe(false);
  });

  it('is undefined for a Secret without a certificate', () => {
    expect(parsedSecret({ metadata: { name: 'x' }, data: {} })).toBeUndefined();
  });

  it('keeps the parse of a slimmed Secret, which holds no PEM and no key any more', () => {
    const secret = tlsSecret(leaf.certPem, leaf.keyPem);
    const before = parsedSecret(tlsSecret(leaf.certPem, leaf.keyPem));
    slimTlsSecret(secret);
    expect(secret.data).toBeUndefined();
    expect(JSON.stringify(secret)).not.toContain('LS0tLS1');
    expect(parsedSecret(secret)).toEqual(before);
  });

  it('leaves the slimmed Secret a fast-mode object (a `delete` would make a hash table of it)', () => {
    const secret = tlsSecret(leaf.certPem, leaf.keyPem);
    expect(hasFastProperties(secret)).toBe(true);
    slimTlsSecret(secret);
    expect(hasFastProperties(secret)).toBe(true);
  });
});
