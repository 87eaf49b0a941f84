import type { V1Secret } from '@kubernetes/client-node';
import { beforeAll, describe, expect, it } from 'vitest';
import { testIssued, testRoot, type TestCertificate } from '../../test/support/test-ca.js';
import { parsedSecret, tlsSecretProblem } from './parsed-secret.js';

function tlsSecret(certPem: string, keyPem: string): V1Secret {
  return {
    data: {
      'tls.crt': Buffer.from(certPem).toString('base64'),
      'tls.key': Buffer.from(keyPem).toString('base64'),
    },
  };
}

const HOST = 'www.shop.example';
const judge = (certPem: string, keyPem: string, now = new Date()): string | undefined =>
  tlsSecretProblem(parsedSecret(tlsSecret(certPem, keyPem)), HOST, now);

describe('tlsSecretProblem: what keeps a TLS Secret from serving its hostname (docs/customdomains.md, "The last good certificate")', () => {
  let root: TestCertificate;
  let intermediate: TestCertificate;
  let otherIntermediate: TestCertificate;
  let leaf: TestCertificate;
  beforeAll(async () => {
    root = await testRoot('Test Root');
    intermediate = await testIssued(root, ['Test Intermediate'], { ca: true });
    // The same subject as `intermediate`, another key: the name links, the signature does not.
    otherIntermediate = await testIssued(root, ['Test Intermediate'], { ca: true });
    leaf = await testIssued(intermediate, [HOST]);
  });

  it('finds nothing wrong with a leaf and its key, alone or followed by its issuer and root', () => {
    expect(judge(leaf.certPem, leaf.keyPem)).toBeUndefined();
    expect(judge(`${leaf.certPem}\n${intermediate.certPem}`, leaf.keyPem)).toBeUndefined();
    expect(judge(`${leaf.certPem}\n${intermediate.certPem}\n${root.certPem}`, leaf.keyPem)).toBeUndefined();
  });

  it('names garbage, and a key that is not the certificate’s', () => {
    expect(judge('not a certificate', 'not a key')).toBe(
      'has no tls.crt and tls.key that parse as a certificate and its key',
    );
    expect(judge(leaf.certPem, intermediate.keyPem)).toBe(
      "holds a tls.key that is not the certificate's private key",
    );
  });

  it('names a broken chain: an issuer of the same name with another key, another issuer, one that does not parse', () => {
    expect(judge(`${leaf.certPem}\n${otherIntermediate.certPem}`, leaf.keyPem)).toMatch(
      /^holds a broken certificate chain: certificate 1 \(serial [0-9A-F]+\) is not issued and signed by certificate 2 \(subject CN=Test Intermediate\)$/,
    );
    expect(judge(`${leaf.certPem}\n${root.certPem}`, leaf.keyPem)).toMatch(
      /certificate 1 .* is not issued and signed by certificate 2 \(subject CN=Test Root\)/,
    );
    expect(
      judge(`${leaf.certPem}\n${intermediate.certPem}\n${otherIntermediate.certPem}`, leaf.keyPem),
    ).toMatch(/certificate 2 .* is not issued and signed by certificate 3/);
    const garbage = '-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----';
    expect(judge(`${leaf.certPem}\n${garbage}`, leaf.keyPem)).toBe(
      'holds a broken certificate chain: certificate 2 of the chain does not parse',
    );
  });

  it('checks names and key identifiers only, not signatures (a cached Secret; issuance.ts verifies signatures before a write)', async () => {
    const sameNameNoKeyId = await testIssued(root, ['Test Intermediate'], {
      ca: true,
      noSubjectKeyIdentifier: true,
    });
    expect(judge(`${leaf.certPem}\n${sameNameNoKeyId.certPem}`, leaf.keyPem)).toBeUndefined();
  });

  it('names a certificate for other hostnames, exactly (a wildcard of Portico’s is never ordered)', async () => {
    const other = await testIssued(intermediate, ['other.example', 'www.other.example']);
    expect(judge(other.certPem, other.keyPem)).toBe(
      `holds a certificate for other.example, www.other.example, not ${HOST}`,
    );
  });

  it('names a certificate not yet valid, and one that expired', async () => {
    const later = await testIssued(intermediate, [HOST], {
      notBefore: new Date(Date.now() + 3_600_000),
      notAfter: new Date(Date.now() + 7_200_000),
    });
    expect(judge(later.certPem, later.keyPem)).toMatch(/^holds a certificate not valid before \d{4}-/);
    const past = await testIssued(intermediate, [HOST], {
      notBefore: new Date(Date.now() - 7_200_000),
      notAfter: new Date(Date.now() - 3_600_000),
    });
    expect(judge(past.certPem, past.keyPem)).toMatch(/^holds a certificate that expired at \d{4}-/);
  });
});
