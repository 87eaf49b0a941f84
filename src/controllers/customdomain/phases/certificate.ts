/**
 * The certificate phase of a CustomDomain reconcile. The Secret's certificate is judged as it is
 * read (usable, or what is wrong with it); the failure the next attempt waits for comes from the
 * tracker's memory, else from status.issuance (issuance-state.ts); the decision is pure
 * (certificate-decision.ts); this class does the reads and carries the decision out.
 */
import type { V1Secret } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { AriError } from '../../../acme/ari.js';
import type { OrderKind } from '../../../acme/order-decision.js';
import { ownedNames, type CustomDomain, type CertificateStatus } from '../../../api/customdomain.js';
import { leafCertificate, type CertificateFacts } from '../../../certificates/inspect.js';
import { parsedSecret, tlsSecretProblem } from '../../../certificates/parsed-secret.js';
import { normalizeDnsName } from '../../../dns/answers.js';
import { registeredDomain } from '../../../dns/records.js';
import { eventTypeOf } from '../../../api/reasons.js';
import { ownedMetadata } from '../../../routing/ingress.js';
import { issuanceStatus, lastIssuanceFailure, type IssuanceFailure } from '../issuance-state.js';
import { heldCertificateStatus } from '../renewal.js';
import type { QueuedOrder } from '../status.js';
import type { CustomDomainReconcilerDeps } from './deps.js';
import type { OwnedObjects } from './objects.js';
import { leafAriCertId, TLS_CERT, type Issuance } from './issuance.js';
import {
  decideCertificate,
  mayOrder,
  orderMayStart,
  type ChallengeDelegation,
  type CertificateDecision,
  type CertificateDecisionInput,
  type CertificateOutcome,
  type StoredCertificateVerdict,
} from './certificate-decision.js';

/**
 * The certificate in a domain's Secret: `usable` (its facts for status, and a resolver of its ARI
 * identifier, `RenewalPlanner.plan`), or `unusable` with what is wrong, a sentence that starts with
 * "Secret <name>".
 */
type StoredCertificate =
  | {
      usable: { status: CertificateStatus; ariCertId: () => Promise<string | undefined> };
      unusable?: undefined;
    }
  | { usable?: undefined; unusable: string };

/**
 * The certificate phase: reads what the Secret holds, plans its renewal (renewal.ts, ARI), takes the
 * pure decision (certificate-decision.ts) and carries it out: a turn in the order budget, an order
 * started through the issuance phase, an order abandoned.
 */
export class CertificatePhase {
  readonly #d: CustomDomainReconcilerDeps;
  readonly #objects: OwnedObjects;
  readonly #issuance: Issuance;

  constructor(deps: CustomDomainReconcilerDeps, objects: OwnedObjects, issuance: Issuance) {
    this.#d = deps;
    this.#objects = objects;
    this.#issuance = issuance;
  }

  /**
   * The certificate part of a reconcile, with what status.issuance should say. The failure the next
   * attempt waits for comes from the tracker's memory while this process has an outcome for the
   * domain, else from the domain's status.issuance (a restarted operator or a new leader resumes the
   * backoff); a verify request (docs/customdomains.md, "Verify and re-verify") starts afresh (issuance-state.ts).
   *
   * @param verifyRequested a verify request is pending: ask the CA for renewal information again,
   *   and attempt a failed order now
   */
  async run(
    domain: CustomDomain,
    key: string,
    verified: boolean,
    verifyRequested: boolean,
    now: Date,
    log: Logger,
    delegation?: ChallengeDelegation,
  ): Promise<CertificateOutcome> {
    const failure = lastIssuanceFailure(
      this.#d.tracker.lastOutcome(key),
      domain.status?.issuance,
      verifyRequested,
      this.#d.issuanceFirstRetryMs,
    );
    const outcome = await this.#certificateState(
      domain,
      key,
      { verified, verifyRequested, failure, delegation },
      now,
      log,
    );
    const issuance = issuanceStatus(failure, outcome.state);
    return issuance ? { ...outcome, issuance } : outcome;
  }

  async #certificateState(
    domain: CustomDomain,
    key: string,
    at: {
      verified: boolean;
      verifyRequested: boolean;
      failure: IssuanceFailure | undefined;
      delegation: ChallengeDelegation | undefined;
    },
    now: Date,
    log: Logger,
  ): Promise<CertificateOutcome> {
    const { verified, verifyRequested, failure, delegation } = at;
    const inFlight = this.#d.tracker.inFlight(key);
    const found = await this.#storedCertificate(
      domain,
      key,
      orderMayStart(mayOrder({ verified, delegation }), inFlight, failure, now),
    );
    // A Secret that cannot serve, or is gone, gets the last good certificate back before anything
    // is decided on it (docs/customdomains.md, "The last good certificate").
    const seen = found?.usable ? found : ((await this.#restoreLastGood(domain, found, log)) ?? found);
    // What Portico owns is checked on every pass: a Secret that cannot serve (edited by hand, or a
    // certificate past its validity) is replaced at once, and the status says why (not held back).
    const stored = await this.#judged(domain, seen, verifyRequested, now, log);
    const input: CertificateDecisionInput = {
      verified,
      verifyRequested,
      stored,
      inFlight,
      failure,
      verifiedAt: domain.status?.verifiedAt,
      lastVerifyRequest: domain.status?.lastVerifyRequest,
      overdueMs: this.#d.certificateOverdueMs,
      ...(delegation ? { delegation } : {}),
      now,
    };
    let decision = decideCertificate(input);
    if (decision.action === 'abandon') {
      // Re-verify past the overdue threshold with an order stuck in flight (overdue.ts): the run is
      // aborted (the issuer withdraws its challenge; its end records no outcome, so no failure and
      // no failed validation) and its in-flight slot in the order budget is freed (the order stays
      // counted in the account window); a fresh order is asked for at once.
      if (this.#d.tracker.abandon(key)) {
        this.#d.budget.withdraw(key);
        log.info(
          { orderStartedAt: decision.orderStartedAt.toISOString() },
          'certificate order abandoned: re-verify with no certificate past the overdue threshold; placing a fresh one',
        );
        return this.#certificateState(domain, key, at, now, log);
      }
      decision = decideCertificate({ ...input, abandonRefused: true });
    }
    return this.#carryOut(domain, key, decision, now, log);
  }
  /**
   * What the Secret holds, for the decision: a usable certificate with its renewal time planned
   * (renewal.ts: ARI, or two thirds of its lifetime), an unusable one with why, or none.
   */
  async #judged(
    domain: CustomDomain,
    seen: StoredCertificate | undefined,
    verifyRequested: boolean,
    now: Date,
    log: Logger,
  ): Promise<StoredCertificateVerdict> {
    return seen?.usable
      ? {
          kind: 'usable',
          certificate: await this.#d.renewal.plan(
            seen.usable.status,
            seen.usable.ariCertId,
            domain.status?.certificate,
            now,
            verifyRequested,
            log,
          ),
        }
      : seen?.unusable !== undefined
        ? { kind: 'unusable', problem: seen.unusable }
        : { kind: 'none' };
  }

  /** Carries out `decision`: leaves the budget's line, or asks it for a turn and starts the order. */
  #carryOut(
    domain: CustomDomain,
    key: string,
    decision: CertificateDecision,
    now: Date,
    log: Logger,
  ): CertificateOutcome {
    switch (decision.action) {
      case 'abandon':
        // decideCertificate never abandons once told the tracker refused (abandonRefused).
        throw new Error(`certificate decision for ${key}: abandon asked twice`);
      case 'report':
        return decision.outcome;
      case 'withdraw':
        this.#d.budget.withdraw(key);
        return decision.outcome;
      case 'order': {
        const queued = this.#admit(domain, key, decision.kind, now);
        if (queued) return decision.queued(queued);
        if (decision.unusable !== undefined)
          log.warn({ problem: decision.unusable }, 'certificate Secret unusable; issuing a new certificate');
        this.#issuance.start(domain, key, log, {
          priorFailures: decision.priorFailures,
          ...(decision.replaces ? { replaces: decision.replaces } : {}),
          ...(decision.dns01RecordName ? { dns01RecordName: decision.dns01RecordName } : {}),
        });
        return decision.started;
      }
    }
  }

  /**
   * The certificate in the domain's Secret when it can serve the hostname now (`usable`); else
   * `unusable` with what is wrong, in words (docs/customdomains.md, "Certificates": the key is not the certificate's, the
   * certificate names other hostnames, is not yet or no longer valid, or does not parse); undefined
   * when there is no Secret. Reads the Secret cache; `live` reads the API server instead (see
   * `#certificate`).
   *
   * Validity is judged at the time the Secret is read, not at the reconcile's start: a reconcile
   * that waited on the API server (30 s and more while etcd restarts) can find a certificate stored
   * meanwhile, issued after its start; judged at the start it was "not yet valid", and a second
   * order was placed for a domain that had just got its certificate (a CI run of
   * test/e2e/control-plane-restart.test.ts).
   */
  async #servingCertificate(domain: CustomDomain, live: boolean): Promise<StoredCertificate | undefined> {
    const secretName = ownedNames(domain).secret;
    const header = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { namespace: domain.metadata.namespace, name: secretName },
    };
    const seen = live ? ({ cached: false } as const) : this.#d.view.owned(header);
    const secret = seen.cached
      ? (seen.object as V1Secret | undefined)
      : await this.#objects.readSecretLive(header.metadata);
    if (!secret) return undefined;
    return this.#judge(domain, secret);
  }

  /** `secret` (the domain's Secret) as `#servingCertificate` judges it. */
  #judge(domain: CustomDomain, secret: V1Secret): StoredCertificate {
    const secretName = ownedNames(domain).secret;
    const header = { namespace: domain.metadata.namespace, name: secretName };
    const parsed = parsedSecret(secret);
    const problem = tlsSecretProblem(parsed, normalizeDnsName(domain.spec.hostname), this.#d.now());
    if (problem !== undefined || !parsed) return { unusable: `Secret ${secretName} ${problem}` };
    const { facts } = parsed;
    const status = heldCertificateStatus(secretName, facts, secret.metadata?.annotations);
    const ariCertId = (): Promise<string | undefined> => this.#ariCertId(domain, facts, secret, header);
    return { usable: { status, ariCertId } };
  }

  /**
   * Before the routing phase: whether the domain's Secret holds a certificate that can serve, after
   * giving it the last good certificate back when the cache shows it cannot (or shows it gone while
   * the domain had a certificate; `#restoreLastGood`, which reads it live first). The routing phase
   * thus never acts on a broken Secret the informer cache holds (docs/customdomains.md, "The last
   * good certificate"): the cache still shows the Secret as the tenant wrote it until the watch
   * brings the restore, and a TLS block taken away on its strength takes HTTPS away from a hostname
   * whose last good certificate is back in the Secret. True: it holds, or holds again, a usable
   * certificate; undefined: nothing could be restored (no copy, or the copy cannot serve either),
   * and the routing judges the Secret as before. Rejects with the API error of a read or write.
   */
  async usableBeforeRouting(domain: CustomDomain, log: Logger): Promise<true | undefined> {
    const cached = await this.#servingCertificate(domain, false);
    if (cached?.usable) return true;
    const restored = await this.#restoreLastGood(domain, cached, log);
    return restored?.usable ? true : undefined;
  }

  /**
   * Writes the domain's last good certificate (last-good-certificates.ts, in the operator's
   * namespace) back into its Secret when the Secret cannot serve (`found.unusable`) or is gone
   * (`found` undefined) while the domain has had a certificate, and records a Warning Event
   * `CertificateRestored` saying what was wrong and what was restored. Resolves the Secret as now
   * written (usable), or undefined when nothing was restored: no copy (a certificate stored before
   * Portico kept copies), or a copy that cannot serve either (expired): a new certificate is then
   * ordered as before. The Secret is read live first: a cache that lags a write shows no problem to
   * fix. Rejects with the API error of a read or write (the work queue retries).
   */
  async #restoreLastGood(
    domain: CustomDomain,
    found: StoredCertificate | undefined,
    log: Logger,
  ): Promise<StoredCertificate | undefined> {
    if (found === undefined && domain.status?.certificate === undefined) return undefined;
    const live = await this.#servingCertificate(domain, true);
    if (live?.usable) return live;
    const copy = await this.#d.lastGood.read(domain);
    if (copy === undefined) return undefined;
    const secretName = ownedNames(domain).secret;
    const secret: V1Secret = {
      apiVersion: 'v1',
      kind: 'Secret',
      metadata: { ...ownedMetadata(domain, secretName), annotations: copy.annotations },
      type: 'kubernetes.io/tls',
      data: {
        [TLS_CERT]: Buffer.from(copy.certificatePem).toString('base64'),
        'tls.key': Buffer.from(copy.privateKeyPem).toString('base64'),
      },
    };
    const restored = this.#judge(domain, secret);
    const kept = this.#d.lastGood.at(domain);
    if (!restored.usable) {
      log.warn(
        { problem: restored.unusable, copy: kept },
        'the last good certificate cannot serve either; ordering a new one',
      );
      return undefined;
    }
    await this.#objects.apply(secret);
    const { serialNumber, notAfter } = restored.usable.status;
    const wrong = live?.unusable ?? `Secret ${secretName} was deleted`;
    log.warn({ problem: wrong, serialNumber }, 'certificate Secret restored from the last good certificate');
    this.#d.metrics.certificateRestoresTotal.inc();
    await this.#d.events.record(
      domain,
      eventTypeOf('CertificateRestored'),
      'CertificateRestored',
      `${wrong}: restored the last good certificate (serial ${serialNumber}, valid until ${notAfter}), kept by Portico in Secret ${kept.namespace}/${kept.name}.`,
    );
    return restored;
  }

  /**
   * The ARI identifier (RFC 9773 §4.1) of the certificate with `facts`: the one the domain's status
   * names when it shows the same serial from the same issuer (computed when it was first asked),
   * else the one kept when this process stored the certificate (`#rememberCertId`), else computed
   * from the Secret's leaf. A cached Secret keeps no PEM (parsed-secret.ts), so that last case reads
   * the Secret live: a certificate stored by another process (a restart between the issuance and
   * the first request, an imported one), once. Resolves undefined when the leaf has no Authority
   * Key Identifier; rejects with AriError when the Secret now holds another certificate, or with
   * the API error.
   */
  async #ariCertId(
    domain: CustomDomain,
    facts: CertificateFacts,
    secret: V1Secret,
    at: { namespace: string; name: string },
  ): Promise<string | undefined> {
    const known = shownCertId(domain, facts) ?? this.#issuance.takeStoredCertId(facts);
    if (known !== undefined) return known;
    const held = secret.data?.[TLS_CERT] ? secret : await this.#objects.readSecretLive(at);
    const pem = Buffer.from(held?.data?.[TLS_CERT] ?? '', 'base64').toString('utf8');
    const leaf = leafCertificate(pem);
    if (leaf.serialNumber !== facts.serialNumber)
      throw new AriError(`Secret ${at.name} holds another certificate now (serial ${leaf.serialNumber})`);
    return leafAriCertId(leaf);
  }

  /**
   * The Secret's certificate as `#servingCertificate` judges it, from the cache; read live when an
   * order could be placed next (`orderNext`: a first issuance, or a renewal if the certificate is
   * due) and the cache does not yet show the certificate this process stored a moment ago: an order
   * costs the CA budget, and the order that stored it re-queues the domain at once, often before the
   * Secret's watch event arrives (`#storedSerials`).
   */
  async #storedCertificate(
    domain: CustomDomain,
    key: string,
    orderNext: boolean,
  ): Promise<StoredCertificate | undefined> {
    const cached = await this.#servingCertificate(domain, false);
    const stored = this.#issuance.storedSerial(key);
    if (stored === undefined) {
      // A certificate stored but not parsed here: read live only before a first order.
      if (cached?.usable || !orderNext || this.#d.tracker.lastOutcome(key)?.state !== 'succeeded')
        return cached;
      return this.#servingCertificate(domain, true);
    }
    if (cached?.usable?.status.serialNumber === stored) {
      this.#issuance.forgetStoredSerial(key);
      return cached;
    }
    if (!orderNext) return cached;
    // Live read: this process stored a certificate the cache has not seen yet, and an order would
    // otherwise be decided on the one it replaced (or on none).
    const live = await this.#servingCertificate(domain, true);
    if (live?.usable?.status.serialNumber !== stored) this.#issuance.forgetStoredSerial(key);
    return live;
  }

  /**
   * Asks the ACME account's order budget for a turn (src/acme/order-budget.ts). Undefined: admitted,
   * start the order now (it counts from this moment). Otherwise the queued state, whose message names
   * the limit, the place in line and the expected time; the domain is re-queued for that time, or
   * sooner by the tracker when an order settles and frees room.
   */
  #admit(domain: CustomDomain, key: string, kind: OrderKind, now: Date): QueuedOrder | undefined {
    const hostname = normalizeDnsName(domain.spec.hostname);
    const decision = this.#d.budget.request(
      {
        key,
        tenant: domain.metadata.namespace,
        hostname,
        registeredDomain: registeredDomain(hostname),
        kind,
        issuedBy: domain.status?.certificate?.acmeIssuer,
        // The moment of asking, not the reconcile's start: a reconcile that began earlier but asks
        // later (its DNS check took longer) must not go ahead of a domain already told its place.
        queuedAt: this.#d.now(),
      },
      now,
    );
    if (decision.admitted) return undefined;
    return {
      kind: 'queued',
      limit: decision.reason,
      message: decision.message,
      position: decision.position,
      expectedAt: decision.expectedAt,
    };
  }
}

/**
 * The ARI identifier the domain's status shows for the certificate with `facts` (same serial and
 * issuer), computed when the CA was first asked about it.
 */
function shownCertId(domain: CustomDomain, facts: CertificateFacts): string | undefined {
  const shown = domain.status?.certificate;
  return shown?.ari?.certId && shown.serialNumber === facts.serialNumber && shown.issuer === facts.issuer
    ? shown.ari.certId
    : undefined;
}
