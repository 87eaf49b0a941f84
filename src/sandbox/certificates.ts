/**
 * The sandbox's keys and certificates, generated with @peculiar/x509 on WebCrypto. All keys are
 * ECDSA P-256 (fast to generate; accepted by kube-apiserver, Go's TLS stack and Node's), private
 * keys are PKCS#8 PEM.
 *
 * Two independent trust roots:
 * - the cluster CA: signs the kube-apiserver serving certificate and the admin client certificate;
 * - the Pebble listener CA: signs the serving certificate of Pebble's HTTPS listeners. It is NOT the
 *   CA that issues ACME certificates (Pebble makes that one up at start; see its /roots/0).
 */
// @peculiar/x509 v2 needs a Reflect metadata polyfill loaded before it (see its README).
import 'reflect-metadata';

import { webcrypto } from 'node:crypto';
import { writeFile } from 'node:fs/promises';

import * as x509 from '@peculiar/x509';

import type { SandboxPaths } from './paths.js';

x509.cryptoProvider.set(webcrypto);

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const DAY_MS = 24 * 60 * 60 * 1000;
/** Validity of every generated certificate, in days. The sandbox is local and short-lived. */
const VALIDITY_DAYS = 365;

/** A certificate and its private key, PEM. */
export interface PemPair {
  readonly certPem: string;
  readonly keyPem: string;
}

/** Everything the sandbox's processes and clients need. */
export interface SandboxCertificates {
  readonly clusterCa: PemPair;
  readonly apiServer: PemPair;
  /** CN=portico-admin, O=system:masters. */
  readonly admin: PemPair;
  /**
   * CN=system:node:localhost, O=system:nodes: the kubelet's client certificate (`sandbox up
   * --kubelet`, src/sandbox/kubelet.ts).
   */
  readonly node: PemPair;
  /** The service-account token signing key (private, PKCS#8 PEM) and its public key (SPKI PEM). */
  readonly serviceAccount: { readonly privateKeyPem: string; readonly publicKeyPem: string };
  readonly pebbleCa: PemPair;
  /** SANs 127.0.0.1, localhost, pebble. */
  readonly pebbleServing: PemPair;
}

interface Authority {
  readonly cert: x509.X509Certificate;
  readonly keys: webcrypto.CryptoKeyPair;
}

async function generateKeys(): Promise<webcrypto.CryptoKeyPair> {
  return webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']);
}

async function privateKeyPem(key: webcrypto.CryptoKey): Promise<string> {
  return x509.PemConverter.encode(await webcrypto.subtle.exportKey('pkcs8', key), 'PRIVATE KEY');
}

async function publicKeyPem(key: webcrypto.CryptoKey): Promise<string> {
  return x509.PemConverter.encode(await webcrypto.subtle.exportKey('spki', key), 'PUBLIC KEY');
}

function validity(): { notBefore: Date; notAfter: Date } {
  const now = Date.now();
  // Back-date a little so a clock a few seconds behind does not reject a fresh certificate.
  return { notBefore: new Date(now - 60_000), notAfter: new Date(now + VALIDITY_DAYS * DAY_MS) };
}

async function createAuthority(commonName: string): Promise<Authority> {
  const keys = await generateKeys();
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    name: `CN=${commonName}`,
    keys,
    signingAlgorithm: ALGORITHM,
    ...validity(),
    extensions: [
      new x509.BasicConstraintsExtension(true, 0, true),
      new x509.KeyUsagesExtension(x509.KeyUsageFlags.keyCertSign | x509.KeyUsageFlags.cRLSign, true),
      await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
    ],
  });
  return { cert, keys };
}

interface LeafSpec {
  readonly subject: string;
  readonly usage: 'server' | 'client';
  readonly dnsNames?: readonly string[];
  readonly ipAddresses?: readonly string[];
}

async function createLeaf(issuer: Authority, spec: LeafSpec): Promise<PemPair> {
  const keys = await generateKeys();
  const names: x509.JsonGeneralName[] = [
    ...(spec.dnsNames ?? []).map((value) => ({ type: 'dns' as const, value })),
    ...(spec.ipAddresses ?? []).map((value) => ({ type: 'ip' as const, value })),
  ];
  const extensions: x509.Extension[] = [
    new x509.BasicConstraintsExtension(false, undefined, true),
    new x509.KeyUsagesExtension(x509.KeyUsageFlags.digitalSignature, true),
    new x509.ExtendedKeyUsageExtension(
      [spec.usage === 'server' ? x509.ExtendedKeyUsage.serverAuth : x509.ExtendedKeyUsage.clientAuth],
      false,
    ),
    await x509.AuthorityKeyIdentifierExtension.create(issuer.keys.publicKey),
    await x509.SubjectKeyIdentifierExtension.create(keys.publicKey),
  ];
  if (names.length > 0) extensions.push(new x509.SubjectAlternativeNameExtension(names, false));
  const cert = await x509.X509CertificateGenerator.create({
    subject: spec.subject,
    issuer: issuer.cert.subject,
    publicKey: keys.publicKey,
    signingKey: issuer.keys.privateKey,
    signingAlgorithm: ALGORITHM,
    ...validity(),
    extensions,
  });
  return { certPem: cert.toString('pem'), keyPem: await privateKeyPem(keys.privateKey) };
}

async function authorityPem(authority: Authority): Promise<PemPair> {
  return { certPem: authority.cert.toString('pem'), keyPem: await privateKeyPem(authority.keys.privateKey) };
}

/** Generates a fresh set of sandbox certificates (about 50 ms). */
export async function generateSandboxCertificates(): Promise<SandboxCertificates> {
  const [clusterCa, pebbleCa, serviceAccountKeys] = await Promise.all([
    createAuthority('portico-sandbox-cluster-ca'),
    createAuthority('portico-sandbox-pebble-listener-ca'),
    generateKeys(),
  ]);
  const loopback = { dnsNames: ['localhost'], ipAddresses: ['127.0.0.1'] };
  const [apiServer, admin, node, pebbleServing] = await Promise.all([
    createLeaf(clusterCa, { subject: 'CN=kube-apiserver', usage: 'server', ...loopback }),
    createLeaf(clusterCa, { subject: 'CN=portico-admin, O=system:masters', usage: 'client' }),
    createLeaf(clusterCa, { subject: 'CN=system:node:localhost, O=system:nodes', usage: 'client' }),
    createLeaf(pebbleCa, {
      subject: 'CN=pebble',
      usage: 'server',
      dnsNames: ['localhost', 'pebble'],
      ipAddresses: ['127.0.0.1'],
    }),
  ]);
  return {
    clusterCa: await authorityPem(clusterCa),
    apiServer,
    admin,
    node,
    serviceAccount: {
      privateKeyPem: await privateKeyPem(serviceAccountKeys.privateKey),
      publicKeyPem: await publicKeyPem(serviceAccountKeys.publicKey),
    },
    pebbleCa: await authorityPem(pebbleCa),
    pebbleServing,
  };
}

/** File names under `<dir>/certs/`. */
export const CERT_FILES = {
  clusterCaCert: 'cluster-ca.crt',
  clusterCaKey: 'cluster-ca.key',
  apiServerCert: 'kube-apiserver.crt',
  apiServerKey: 'kube-apiserver.key',
  adminCert: 'admin.crt',
  adminKey: 'admin.key',
  nodeCert: 'node.crt',
  nodeKey: 'node.key',
  serviceAccountKey: 'service-account.key',
  serviceAccountPub: 'service-account.pub',
  pebbleCaCert: 'pebble-ca.crt',
  pebbleCaKey: 'pebble-ca.key',
  pebbleCert: 'pebble.crt',
  pebbleKey: 'pebble.key',
} as const;

/** Writes every certificate and key to `<dir>/certs/` (keys mode 0600). */
export async function writeSandboxCertificates(
  paths: SandboxPaths,
  certs: SandboxCertificates,
): Promise<void> {
  const files: [string, string, boolean][] = [
    [CERT_FILES.clusterCaCert, certs.clusterCa.certPem, false],
    [CERT_FILES.clusterCaKey, certs.clusterCa.keyPem, true],
    [CERT_FILES.apiServerCert, certs.apiServer.certPem, false],
    [CERT_FILES.apiServerKey, certs.apiServer.keyPem, true],
    [CERT_FILES.adminCert, certs.admin.certPem, false],
    [CERT_FILES.adminKey, certs.admin.keyPem, true],
    [CERT_FILES.nodeCert, certs.node.certPem, false],
    [CERT_FILES.nodeKey, certs.node.keyPem, true],
    [CERT_FILES.serviceAccountKey, certs.serviceAccount.privateKeyPem, true],
    [CERT_FILES.serviceAccountPub, certs.serviceAccount.publicKeyPem, false],
    [CERT_FILES.pebbleCaCert, certs.pebbleCa.certPem, false],
    [CERT_FILES.pebbleCaKey, certs.pebbleCa.keyPem, true],
    [CERT_FILES.pebbleCert, certs.pebbleServing.certPem, false],
    [CERT_FILES.pebbleKey, certs.pebbleServing.keyPem, true],
  ];
  await Promise.all(
    files.map(([name, pem, secret]) => writeFile(paths.cert(name), pem, { mode: secret ? 0o600 : 0o644 })),
  );
}
