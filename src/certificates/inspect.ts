/**
 * Reads what the status shows of a certificate, and decides when to renew it. Pure apart from
 * parsing (node:crypto's X509Certificate does no I/O).
 */
import { createPrivateKey, X509Certificate } from 'node:crypto';

export interface CertificateFacts {
  /** RFC 3339. */
  notBefore: string;
  /** RFC 3339. */
  notAfter: string;
  /** Uppercase hex, as node:crypto prints it. */
  serialNumber: string;
  /** The issuer's distinguished name, one line. */
  issuer: string;
  /** The dNSName entries of the subjectAltName extension. */
  dnsNames: string[];
}

/** Thrown when a PEM chain holds no parsable certificate. */
export class CertificateParseError extends Error {
  readonly code = 'CERTIFICATE_PARSE_ERROR';
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'CertificateParseError';
  }
}

const PEM_CERTIFICATE = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----/g;

/** The first (leaf) certificate of a PEM chain. Throws `CertificateParseError`. */
export function leafCertificate(chainPem: string): X509Certificate {
  const match = new RegExp(PEM_CERTIFICATE.source).exec(chainPem);
  if (!match) throw new CertificateParseError('no PEM certificate found');
  try {
    return new X509Certificate(match[0]);
  } catch (err) {
    throw new CertificateParseError(`the leaf certificate does not parse: ${(err as Error).message}`, {
      cause: err,
    });
  }
}

/** The facts of the leaf certificate of `chainPem`. Throws `CertificateParseError`. */
export function inspectCertificate(chainPem: string): CertificateFacts {
  return certificateFacts(leafCertificate(chainPem));
}

/**
 * The dNSName entries (RFC 5280 §4.2.1.6) of `cert`'s subjectAltName extension, in order, as
 * node:crypto prints them (`DNS:www.example.com, DNS:example.com`); [] when it has none.
 */
export function subjectAltDnsNames(cert: Pick<X509Certificate, 'subjectAltName'>): string[] {
  return (cert.subjectAltName ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter((s) => s.startsWith('DNS:'))
    .map((s) => s.slice(4));
}

/** The facts of a parsed certificate. */
export function certificateFacts(cert: X509Certificate): CertificateFacts {
  const dnsNames = subjectAltDnsNames(cert);
  return {
    notBefore: new Date(cert.validFromDate).toISOString(),
    notAfter: new Date(cert.validToDate).toISOString(),
    serialNumber: cert.serialNumber,
    issuer: cert.issuer.replaceAll('\n', ', '),
    dnsNames,
  };
}

/**
 * When to renew without ARI: two thirds into the validity period (the common ACME client practice,
 * e.g. 60 days into a 90-day certificate).
 */
export function defaultRenewalTime(facts: Pick<CertificateFacts, 'notBefore' | 'notAfter'>): Date {
  const start = Date.parse(facts.notBefore);
  const end = Date.parse(facts.notAfter);
  return new Date(start + Math.floor(((end - start) * 2) / 3));
}

/**
 * True when the certificate in `chainPem` can serve `hostname` at `now` and `privateKeyPem` is its key.
 * Never throws: an unparsable certificate or key is unusable.
 */
export function certificateServes(
  chainPem: string,
  privateKeyPem: string,
  hostname: string,
  now: Date,
): boolean {
  try {
    const cert = leafCertificate(chainPem);
    if (cert.checkHost(hostname) === undefined) return false;
    if (now < new Date(cert.validFromDate) || now >= new Date(cert.validToDate)) return false;
    return cert.checkPrivateKey(createPrivateKey(privateKeyPem));
  } catch {
    return false;
  }
}

/**
 * Parsed issuing certificates, by PEM text: every leaf of a CA is followed by the same few, so a
 * chain check parses each once. Bounded (cleared when full).
 */
const issuers = new Map<string, X509Certificate | null>();
const MAX_ISSUERS = 64;

function issuerCertificate(pem: string): X509Certificate | undefined {
  let cert = issuers.get(pem);
  if (cert === undefined) {
    try {
      cert = new X509Certificate(pem);
    } catch {
      cert = null;
    }
    if (issuers.size >= MAX_ISSUERS) issuers.clear();
    issuers.set(pem, cert);
  }
  return cert ?? undefined;
}

/**
 * What breaks the chain `chainPem` whose first certificate is `leaf`, in words ("certificate 2 of
 * the chain does not parse", "certificate 1 (serial …) is not issued and signed by certificate 2
 * (subject …)"), or undefined when each certificate is issued by the next one: its issuer is the
 * next one's subject and its Authority Key Identifier the next one's key (RFC 5280 §4.1.2.4,
 * §4.2.1.1; node:crypto's `checkIssued`), and, with `signatures`, it carries the next one's valid
 * signature. A leaf alone is a chain (nothing to link; whether the last one leads to a trusted root
 * is the data plane's clients' to judge, with their trust store). Never throws.
 *
 * @param signatures also verify each signature: 0.03–0.6 ms a link (RSA to ECDSA, measured on the
 *   project's busy 2-core machine), so a cache that parses every Secret at a restart checks the
 *   names and key identifiers only (parsed-secret.ts), and a certificate about to be written gets
 *   the full check (issuance.ts)
 */
export function brokenChainLink(
  chainPem: string,
  leaf: X509Certificate,
  signatures: boolean,
): string | undefined {
  const pems = chainPem.match(PEM_CERTIFICATE) ?? [];
  let child = leaf;
  for (let i = 1; i < pems.length; i++) {
    const parent = issuerCertificate(pems[i] ?? '');
    if (parent === undefined) return `certificate ${i + 1} of the chain does not parse`;
    let linked: boolean;
    try {
      linked = child.checkIssued(parent) && (!signatures || child.verify(parent.publicKey));
    } catch {
      linked = false;
    }
    if (!linked)
      return `certificate ${i} (serial ${child.serialNumber}) is not issued and signed by certificate ${i + 1} (subject ${parent.subject.replaceAll('\n', ', ')})`;
    child = parent;
  }
  return undefined;
}
