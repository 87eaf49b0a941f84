/**
 * The issuance phase of a CustomDomain reconcile: an order runs in the background (the
 * IssuanceTracker holds one per domain and re-queues the domain when it settles); the issued
 * certificate is written to the domain's Secret, retried while the API server does not answer, and
 * remembered (its serial and ARI identifier, RFC 9773 §4.1) until the caches show it.
 */
import type { V1Secret } from '@kubernetes/client-node';
import type { X509Certificate } from 'node:crypto';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Logger } from 'pino';
import { ORDER_ABANDONED, SHUTTING_DOWN } from '../../../acme/issuance-tracker.js';
import { AriError, ariCertificateId } from '../../../acme/ari.js';
import { IssuanceCancelledError } from '../../../acme/issuer.js';
import type { IssuedByCertificate } from '../../../acme/issuer-set.js';
import {
  ACME_ISSUER_ANNOTATION,
  REPLACES_ANNOTATION,
  ownedNames,
  type CustomDomain,
} from '../../../api/customdomain.js';
import {
  brokenChainLink,
  certificateFacts,
  leafCertificate,
  type CertificateFacts,
} from '../../../certificates/inspect.js';
import { parsedSecret, tlsSecretProblem } from '../../../certificates/parsed-secret.js';
import { normalizeDnsName } from '../../../dns/answers.js';
import { apiStatusCode } from '../../../kube/errors.js';
import { backoffDelayMs, type BackoffPolicy } from '../../../kube/backoff.js';
import { ownedMetadata } from '../../../routing/ingress.js';
import type { CustomDomainReconcilerDeps } from './deps.js';
import type { OwnedObjects } from './objects.js';

/**
 * Starts certificate orders in the background (IssuanceTracker) and stores what they issue; keeps
 * what it stored until the caches show it.
 */
export class Issuance {
  readonly #d: CustomDomainReconcilerDeps;
  readonly #objects: OwnedObjects;
  /**
   * The ARI identifiers of the certificates this process stored, by issuer and serial
   * (`certIdKey`), until the first renewalInfo request of each takes it: the cached Secret keeps no
   * PEM, and this spares that request a live read of the Secret. Bounded (oldest dropped).
   */
  readonly #storedCertIds = new Map<string, string>();
  /**
   * The serial number (hex, as status.certificate.serialNumber) of the certificate this process
   * last stored for a domain, by key, until the informer cache shows it. The tracker re-queues the
   * domain the moment the order settles, before the watch event of the Secret write arrives: the
   * cache then still holds the certificate being renewed, past its renewal time, and a second
   * renewal would be ordered at once (seen in e2e: the CA refused it as `alreadyReplaced`; a CA
   * without ARI would have issued a duplicate). Bounded by the orders that finished but whose
   * Secret the cache has not yet seen.
   */
  readonly #storedSerials = new Map<string, string>();

  constructor(deps: CustomDomainReconcilerDeps, objects: OwnedObjects) {
    this.#d = deps;
    this.#objects = objects;
  }

  /** The serial this process last stored for `key` and the cache has not yet shown, if any. */
  storedSerial(key: string): string | undefined {
    return this.#storedSerials.get(key);
  }

  /** Forgets the serial stored for `key` (the cache shows it, or the domain is gone). */
  forgetStoredSerial(key: string): void {
    this.#storedSerials.delete(key);
  }

  /**
   * @param order.replaces the ARI identifier of the certificate being renewed (RFC 9773 §5)
   * @param order.priorFailures failed attempts in a row before this one, for a tracker that has no
   *   outcome of its own for the domain (a fresh process resuming from status.issuance)
   * @param order.dns01RecordName answer DNS-01 with the TXT record at this name in the challenge
   *   zone (docs/customdomains.md, "Certificates before the move"); absent: HTTP-01
   */
  start(
    domain: CustomDomain,
    key: string,
    log: Logger,
    order: { replaces?: string; priorFailures: number; dns01RecordName?: string },
  ): void {
    const { hostname } = domain.spec;
    const { replaces, dns01RecordName } = order;
    const started = this.#d.tracker.start(
      key,
      hostname,
      async (signal) => {
        try {
          const issued = await this.#d.issuer.issue(hostname, log, {
            ...(replaces ? { replaces } : {}),
            ...(dns01RecordName ? { dns01RecordName } : {}),
            issuedBy: domain.status?.certificate?.acmeIssuer,
            signal,
          });
          if (signal.aborted) return;
          // Judged before anything is written: a certificate that cannot serve the hostname never
          // replaces the one the Secret holds (docs/customdomains.md, "The last good certificate").
          const unusable = issuedCertificateProblem(domain, issued, this.#d.now());
          if (unusable !== undefined) throw new IssuedCertificateUnusableError(unusable);
          // The certificate exists only in memory now: an API server that is briefly unreachable
          // must not cost it (and a new order), so the write is retried until it lands.
          await untilApiAnswers(
            () => this.#storeCertificate(domain, key, issued, replaces),
            hostname,
            signal,
            log,
          );
          this.#d.metrics.acmeOrdersTotal.inc({ result: 'valid' });
          log.info({ orderUrl: issued.orderUrl }, 'certificate stored');
        } catch (err) {
          if (err instanceof IssuanceCancelledError) {
            this.#d.metrics.acmeOrdersTotal.inc({ result: 'cancelled' });
            log.info(
              signal.reason === SHUTTING_DOWN
                ? 'certificate order abandoned: the operator is shutting down (the next leader places a new one)'
                : signal.reason === ORDER_ABANDONED
                  ? 'abandoned certificate order ended'
                  : 'certificate order dropped: the domain was removed or is no longer accepted',
            );
          } else {
            this.#d.metrics.acmeOrdersTotal.inc({ result: 'failed' });
            log.warn({ err }, 'certificate order failed');
          }
          throw err;
        }
      },
      order.priorFailures,
    );
    if (started)
      log.info(
        { priorFailures: order.priorFailures, challenge: dns01RecordName ? 'dns-01' : 'http-01' },
        'certificate order started',
      );
  }

  /**
   * Writes the issued certificate into the domain's Secret, unless the domain was deleted or
   * re-created meanwhile. Live read: the order took seconds to minutes, and the cache may not have
   * seen that yet.
   */
  async #storeCertificate(
    domain: CustomDomain,
    key: string,
    issued: IssuedByCertificate,
    replaces?: string,
  ): Promise<void> {
    const current = await this.#objects.readLive(domain.metadata.namespace, domain.metadata.name);
    if (!current || current.metadata.uid !== domain.metadata.uid || current.metadata.deletionTimestamp)
      return;
    const annotations = {
      [REPLACES_ANNOTATION]: replaces ?? '',
      [ACME_ISSUER_ANNOTATION]: issued.acmeIssuer,
    };
    // The copy first: a Secret the tenant can reach never holds a certificate the copy lacks.
    await this.#d.lastGood.keep(current, {
      certificatePem: issued.certificatePem,
      privateKeyPem: issued.privateKeyPem,
      annotations,
    });
    const secret: V1Secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { ...ownedMetadata(current, ownedNames(current).secret), annotations },
      type: 'kubernetes.io/tls',
      data: {
        [TLS_CERT]: Buffer.from(issued.certificatePem).toString('base64'),
        [TLS_KEY]: Buffer.from(issued.privateKeyPem).toString('base64'),
      },
    };
    await this.#objects.apply(secret);
    this.#rememberCertId(key, issued.certificatePem);
  }

  /** The identifier `#rememberCertId` kept for the certificate with `facts`, once. */
  takeStoredCertId(facts: CertificateFacts): string | undefined {
    const key = certIdKey(facts);
    const stored = this.#storedCertIds.get(key);
    this.#storedCertIds.delete(key);
    return stored;
  }

  /**
   * Keeps the serial number of a certificate just stored for `key` until the cache shows it, and its
   * ARI identifier for its first renewalInfo request.
   */
  #rememberCertId(key: string, chainPem: string): void {
    try {
      const leaf = leafCertificate(chainPem);
      const facts = certificateFacts(leaf);
      this.#storedSerials.set(key, facts.serialNumber);
      const certId = leafAriCertId(leaf);
      if (certId === undefined) return;
      if (this.#storedCertIds.size >= MAX_STORED_CERT_IDS) {
        const oldest = this.#storedCertIds.keys().next().value;
        if (oldest !== undefined) this.#storedCertIds.delete(oldest);
      }
      this.#storedCertIds.set(certIdKey(facts), certId);
    } catch {
      // No parse: the first request reads the Secret and says so.
    }
  }
}

/**
 * Thrown by an order whose issued certificate cannot serve the domain (it does not parse, its key is
 * not the certificate's, its chain is broken, it names other hostnames, or it is not valid now):
 * nothing is written, the Secret keeps what it holds, and the attempt counts as failed with reason
 * `IssuedCertificateUnusable` (docs/customdomains.md); the message says what was wrong.
 */
export class IssuedCertificateUnusableError extends Error {
  readonly code = 'ISSUED_CERTIFICATE_UNUSABLE';
  /** The CertificateReady reason (issuance-tracker.ts takes an error's own `reason`). */
  readonly reason = 'IssuedCertificateUnusable';
  constructor(message: string) {
    super(message);
    this.name = 'IssuedCertificateUnusableError';
  }
}

/**
 * What makes `issued` unable to serve `domain` at `now`, as a sentence, or undefined when it can:
 * the judgment of a Secret that would hold it (parsed-secret.ts `tlsSecretProblem`).
 */
export function issuedCertificateProblem(
  domain: CustomDomain,
  issued: Pick<IssuedByCertificate, 'certificatePem' | 'privateKeyPem'>,
  now: Date,
): string | undefined {
  return issuedCertificateProblemFor(
    { secretName: ownedNames(domain).secret, hostname: normalizeDnsName(domain.spec.hostname) },
    issued,
    now,
  );
}

/**
 * What makes `issued` unable to serve `target.hostname` (normalized; a wildcard `*.X` is matched as
 * written, as the certificate's dNSName) at `now` from Secret `target.secretName`, as a sentence, or
 * undefined when it can: `tlsSecretProblem` of a Secret that would hold it, then the chain's
 * signatures. Used for every certificate Portico stores (a CustomDomain's, the apps domain's wildcard).
 */
export function issuedCertificateProblemFor(
  target: { secretName: string; hostname: string },
  issued: Pick<IssuedByCertificate, 'certificatePem' | 'privateKeyPem'>,
  now: Date,
): string | undefined {
  const would: V1Secret = {
    data: {
      [TLS_CERT]: Buffer.from(issued.certificatePem).toString('base64'),
      [TLS_KEY]: Buffer.from(issued.privateKeyPem).toString('base64'),
    },
  };
  let problem = tlsSecretProblem(parsedSecret(would), target.hostname, now);
  if (problem === undefined) {
    // The signatures too (the Secret cache checks names and key identifiers only).
    const broken = brokenChainLink(issued.certificatePem, leafCertificate(issued.certificatePem), true);
    if (broken !== undefined) problem = `holds a broken certificate chain: ${broken}`;
  }
  return problem === undefined
    ? undefined
    : `The certificate the CA issued was not stored, as Secret ${target.secretName} would then have been unable to serve: it ${problem}. The Secret keeps the certificate it holds.`;
}

/** The keys of a kubernetes.io/tls Secret. */
export const TLS_CERT = 'tls.crt';
const TLS_KEY = 'tls.key';

/** Retry delays of a certificate write while the API server does not answer: 1 s doubling to 30 s. */
const STORE_RETRY: BackoffPolicy = { baseMs: 1_000, maxMs: 30_000 };

/**
 * Runs `write` until it succeeds, retrying (with STORE_RETRY backoff: 1 s doubling to 30 s) while
 * the API server cannot be reached or answers 429 or 5xx; any other error is thrown at once. Throws
 * IssuanceCancelledError when `signal` fires first (the domain was removed, or the operator stops).
 * An issued certificate exists only in memory until written: every certificate Portico stores
 * goes through here.
 */
export async function untilApiAnswers(
  write: () => Promise<void>,
  hostname: string,
  signal: AbortSignal,
  log: Logger,
): Promise<void> {
  for (let failures = 1; ; failures++) {
    try {
      await write();
      return;
    } catch (err) {
      const code = apiStatusCode(err);
      if (code !== undefined && code !== 429 && code < 500) throw err;
      const retryInMs = backoffDelayMs(STORE_RETRY, failures);
      log.warn({ err, retryInMs }, 'could not store the certificate; retrying');
      await sleep(retryInMs, undefined, { signal }).catch(() => undefined);
      if (signal.aborted) throw new IssuanceCancelledError(hostname);
    }
  }
}

/** The key of `#storedCertIds`: a certificate's issuer and serial. */
function certIdKey(facts: Pick<CertificateFacts, 'issuer' | 'serialNumber'>): string {
  return `${facts.issuer}\u0000${facts.serialNumber}`;
}

/**
 * The ARI identifier (RFC 9773 §4.1) of `leaf`; undefined when it has no Authority Key Identifier
 * (the CA cannot be asked about it). Throws what `ariCertificateId` throws but AriError.
 */
export function leafAriCertId(leaf: X509Certificate): string | undefined {
  try {
    return ariCertificateId(leaf.toString());
  } catch (err) {
    if (err instanceof AriError) return undefined;
    throw err;
  }
}

/** At most this many identifiers of certificates just stored wait for their first renewalInfo request. */
const MAX_STORED_CERT_IDS = 4_096;
