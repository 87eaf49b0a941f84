/**
 * The certificate of a `kubernetes.io/tls` Secret, parsed once per Secret object: informer caches
 * hand out the same object until the Secret changes, so a reconcile that finds the Secret as it was
 * reads its facts from here instead of parsing the chain and the private key again. A cached Secret
 * is parsed as it arrives and then keeps no `data` (`slimTlsSecret`).
 */
import { createPrivateKey } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import { sharedString } from '../kube/shared-strings.js';
import { brokenChainLink, certificateFacts, leafCertificate, type CertificateFacts } from './inspect.js';

/**
 * What a reconcile reads of a TLS Secret. Not the leaf's ARI identifier (RFC 9773 §4.1): finding its
 * Authority Key Identifier takes an ASN.1 parse of the whole certificate (0.4–0.8 ms, most of a
 * restart's CPU at 10,000 domains: docs/performance.md), and the identifier is needed only when the
 * CA is asked, which the domain's status already names for its certificate
 * (`status.certificate.ari.certId`).
 */
export interface ParsedTlsSecret {
  facts: CertificateFacts;
  /** The dNSName entries of the leaf, lowercase. */
  hostnames: ReadonlySet<string>;
  /** `tls.key` is the leaf's private key. */
  keyMatches: boolean;
  /**
   * What breaks the chain of `tls.crt` (inspect.ts `brokenChainLink`, names and key identifiers,
   * not signatures), or undefined when each certificate is issued by the next.
   */
  brokenChain: string | undefined;
}

/**
 * What makes the certificate of a TLS Secret unable to serve `hostname` (normalized) at `now`, as
 * the rest of a sentence that starts with "Secret <name>" (docs/customdomains.md, `Reissuing`):
 * nothing that parses, a key that is not the certificate's, a broken chain, other hostnames, not
 * yet or no longer valid. Undefined: it can serve. The first of these that applies, in that order.
 *
 * @param parsed `parsedSecret` of the Secret (undefined: it did not parse)
 */
export function tlsSecretProblem(
  parsed: ParsedTlsSecret | undefined,
  hostname: string,
  now: Date,
): string | undefined {
  if (!parsed) return 'has no tls.crt and tls.key that parse as a certificate and its key';
  if (!parsed.keyMatches) return "holds a tls.key that is not the certificate's private key";
  if (parsed.brokenChain !== undefined) return `holds a broken certificate chain: ${parsed.brokenChain}`;
  const { facts } = parsed;
  if (!parsed.hostnames.has(hostname))
    return `holds a certificate for ${facts.dnsNames.join(', ') || 'no DNS name'}, not ${hostname}`;
  if (now < new Date(facts.notBefore)) return `holds a certificate not valid before ${facts.notBefore}`;
  if (now >= new Date(facts.notAfter)) return `holds a certificate that expired at ${facts.notAfter}`;
  return undefined;
}

const parsed = new WeakMap<V1Secret, ParsedTlsSecret | null>();

/**
 * The parsed leaf certificate of `secret` (`data["tls.crt"]`, `data["tls.key"]`, base64), or
 * undefined when either is missing or does not parse. Never throws. Cached per Secret object, so
 * the caller must not modify the Secret it passes.
 */
export function parsedSecret(secret: V1Secret): ParsedTlsSecret | undefined {
  let entry = parsed.get(secret);
  if (entry === undefined) {
    entry = parse(secret);
    parsed.set(secret, entry);
  }
  return entry ?? undefined;
}

/**
 * Trims a Secret as an informer cache keeps it: parses its certificate now (remembered for this
 * object, so `parsedSecret(secret)` answers from it) and removes `data`, the PEM chain and the
 * private key. The cache then holds the facts a reconcile reads and no key material: about 2 KiB less
 * per domain (docs/performance.md). Mutates `secret`.
 */
export function slimTlsSecret(secret: V1Secret): void {
  parsedSecret(secret);
  // Set to undefined, not deleted: a deleted property turns the object into a hash table (V8's
  // dictionary mode), several times its size.
  Reflect.set(secret, 'data', undefined);
}

function parse(secret: V1Secret): ParsedTlsSecret | null {
  const chainPem = Buffer.from(secret.data?.['tls.crt'] ?? '', 'base64').toString('utf8');
  const keyPem = Buffer.from(secret.data?.['tls.key'] ?? '', 'base64').toString('utf8');
  try {
    const leaf = leafCertificate(chainPem);
    const inspected = certificateFacts(leaf);
    // Every certificate of a CA names the same issuer: one copy for all cached Secrets.
    const facts = { ...inspected, issuer: sharedString(inspected.issuer) };
    let keyMatches: boolean;
    try {
      keyMatches = leaf.checkPrivateKey(createPrivateKey(keyPem));
    } catch {
      keyMatches = false;
    }
    return {
      facts,
      hostnames: new Set(facts.dnsNames.map((n) => n.toLowerCase())),
      keyMatches,
      // Names and key identifiers only: this runs for every Secret a restart lists (inspect.ts).
      brokenChain: brokenChainLink(chainPem, leaf, false),
    };
  } catch {
    return null;
  }
}
