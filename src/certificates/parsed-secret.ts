/**
 * The certificate of a `kubernetes.io/tls` Secret, parsed once per Secret object: informer caches
 * hand out the same object until the Secret changes, so a reconcile that finds the Secret as it was
 * reads its facts from here instead of parsing the chain and the private key again. A cached Secret
 * is parsed as it arrives and then keeps no `data` (`slimTlsSecret`).
 */
import { createPrivateKey } from 'node:crypto';
import type { V1Secret } from '@kubernetes/client-node';
import { ariCertificateId } from '../acme/ari.js';
import { sharedString } from '../kube/shared-strings.js';
import { inspectCertificate, leafCertificate, type CertificateFacts } from './inspect.js';

export interface ParsedTlsSecret {
  /**
   * The leaf's ARI certificate identifier (RFC 9773 §4.1: its Authority Key Identifier and serial),
   * or undefined when the leaf has no Authority Key Identifier. Kept instead of the leaf's PEM:
   * about 60 bytes instead of 700 to 2,000 per cached Secret.
   */
  ariCertId: string | undefined;
  facts: CertificateFacts;
  /** The dNSName entries of the leaf, lowercase. */
  hostnames: ReadonlySet<string>;
  /** `tls.key` is the leaf's private key. */
  keyMatches: boolean;
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
    const inspected = inspectCertificate(chainPem);
    // Every certificate of a CA names the same issuer: one copy for all cached Secrets.
    const facts = { ...inspected, issuer: sharedString(inspected.issuer) };
    let ariCertId: string | undefined;
    try {
      ariCertId = ariCertificateId(leaf.toString());
    } catch {
      ariCertId = undefined;
    }
    let keyMatches: boolean;
    try {
      keyMatches = leaf.checkPrivateKey(createPrivateKey(keyPem));
    } catch {
      keyMatches = false;
    }
    return { ariCertId, facts, hostnames: new Set(facts.dnsNames.map((n) => n.toLowerCase())), keyMatches };
  } catch {
    return null;
  }
}
