/**
 * A certificate authority made in memory for unit tests (@peculiar/x509 over WebCrypto): a root
 * that signs intermediates, an intermediate that signs leaves, each with its key as PEM. For the
 * cases a real CA does not produce (a broken chain, a certificate for another name, an expired one).
 */
import 'reflect-metadata';
import { webcrypto, type webcrypto as WebCrypto } from 'node:crypto';
import * as x509 from '@peculiar/x509';

x509.cryptoProvider.set(webcrypto);

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
const DAY_MS = 86_400_000;

type CryptoKeyPair = WebCrypto.CryptoKeyPair;

export interface TestCertificate {
  certPem: string;
  keyPem: string;
  cert: x509.X509Certificate;
  keys: CryptoKeyPair;
}

async function keyPair(): Promise<CryptoKeyPair> {
  return webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']);
}

async function keyPem(keys: CryptoKeyPair): Promise<string> {
  return x509.PemConverter.encode(await webcrypto.subtle.exportKey('pkcs8', keys.privateKey), 'PRIVATE KEY');
}

/** A self-signed CA certificate named `CN=<name>`. */
export async function testRoot(name: string): Promise<TestCertificate> {
  const keys = await keyPair();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    name: `CN=${name}`,
    notBefore: new Date(Date.now() - DAY_MS),
    notAfter: new Date(Date.now() + 30 * DAY_MS),
    keys,
    signingAlgorithm: ALGORITHM,
    extensions: [
      new x509.BasicConstraintsExtension(true, undefined, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { certPem: cert.toString('pem'), keyPem: await keyPem(keys), cert, keys };
}

/**
 * A certificate signed by `issuer`: a CA named `CN=<name>` when `options.ca`, else a leaf for the
 * dNSNames `names`. Valid from `notBefore` to `notAfter` (default: a day ago to 30 days on). Without
 * a Subject Key Identifier (`noSubjectKeyIdentifier`), a certificate it issues is linked to it by
 * name alone: only the signature tells another key of the same name.
 */
export async function testIssued(
  issuer: TestCertificate,
  names: string[],
  options: { ca?: boolean; notBefore?: Date; notAfter?: Date; noSubjectKeyIdentifier?: boolean } = {},
): Promise<TestCertificate> {
  const keys = await keyPair();
  const extensions: x509.Extension[] = [
    await x509.AuthorityKeyIdentifierExtension.create(issuer.keys.publicKey),
  ];
  if (options.noSubjectKeyIdentifier !== true)
    extensions.push(await x509.SubjectKeyIdentifierExtension.create(keys.publicKey));
  if (options.ca === true) {
    extensions.push(
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
    );
  } else {
    extensions.push(
      new x509.SubjectAlternativeNameExtension(names.map((value) => ({ type: 'dns' as const, value }))),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
    );
  }
  const cert = await x509.X509CertificateGenerator.create({
    serialNumber: Buffer.from(webcrypto.getRandomValues(new Uint8Array(8)))
      .toString('hex')
      .replace(/^[89a-f]/, '1'),
    subject: `CN=${names[0] ?? 'leaf'}`,
    issuer: issuer.cert.subject,
    notBefore: options.notBefore ?? new Date(Date.now() - DAY_MS),
    notAfter: options.notAfter ?? new Date(Date.now() + 30 * DAY_MS),
    signingKey: issuer.keys.privateKey,
    publicKey: keys.publicKey,
    signingAlgorithm: ALGORITHM,
    extensions,
  });
  return { certPem: cert.toString('pem'), keyPem: await keyPem(keys), cert, keys };
}
