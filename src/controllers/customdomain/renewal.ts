/**
 * When to renew a certificate, a CustomDomain's or the apps domain's wildcard
 * (controllers/project/apps-certificate.ts): at a time chosen in the CA's ARI window (RFC 9773) when
 * the directory offers `renewalInfo`, otherwise two thirds into its lifetime. The ARI answer is kept
 * (a CustomDomain's `status.certificate.ari`; the wildcard Secret's `portico.dev/renewal-info`,
 * project/apps-renewal.ts) and asked again after the CA's Retry-After or on a verify request. A
 * certificate's renewalInfo is asked of the CA that issued it (`status.certificate.acmeIssuer`,
 * docs/install.md "Several ACME issuers"): another CA does not know it. A
 * request that fails (the CA does not know the certificate, is down, or answers something that is not
 * a renewal window) is not sent again for that certificate before ARI_FAILURE_RETRY_MS, unless a
 * verify request forces it: without this, every reconcile of such a domain (each periodic resync, for
 * all of them) asked the CA again. RFC 9773 leaves the retry time after an error to the client.
 */
import type { Logger } from 'pino';
import { AriError, fetchRenewalWindow, selectRenewalTime } from '../../acme/ari.js';
import type { AcmeDirectory } from '../../acme/directory.js';
import {
  ACME_ISSUER_ANNOTATION,
  REPLACES_ANNOTATION,
  type CertificateStatus,
} from '../../api/customdomain.js';
import { defaultRenewalTime, type CertificateFacts } from '../../certificates/inspect.js';

/** After a failed renewalInfo request, no other for the same certificate before this (ms): 1 hour. */
export const ARI_FAILURE_RETRY_MS = 60 * 60 * 1000;

/**
 * The directory of the issuer named `acmeIssuer` (status.certificate.acmeIssuer); for a certificate
 * that names none, or an issuer no longer configured, the first issuer's.
 */
export type DirectoryOf = (acmeIssuer: string | undefined) => AcmeDirectory;

/**
 * The status of a usable certificate held in the Secret `secretName`, before `RenewalPlanner.plan`
 * decides its renewal: its facts, a renewal time two thirds into its lifetime
 * (`defaultRenewalTime`), and the ACME issuer and replaced certificate its Secret's annotations
 * name (`portico.dev/acme-issuer`, `portico.dev/replaces`). What a CustomDomain's certificate phase
 * and the apps domain's wildcard certificate both plan from. Pure.
 */
export function heldCertificateStatus(
  secretName: string,
  facts: CertificateFacts,
  annotations: Readonly<Record<string, string>> | undefined,
): CertificateStatus {
  const replaces = annotations?.[REPLACES_ANNOTATION];
  const acmeIssuer = annotations?.[ACME_ISSUER_ANNOTATION];
  return {
    ...facts,
    secretName,
    renewalTime: defaultRenewalTime(facts).toISOString(),
    ...(replaces ? { replaces } : {}),
    ...(acmeIssuer ? { acmeIssuer } : {}),
  };
}

/** The ARI decision `RenewalPlanner.plan` makes, as a CustomDomain's certificate phase and the apps domain's wildcard use it. */
export type RenewalPlanning = Pick<RenewalPlanner, 'plan'>;

export class RenewalPlanner {
  readonly #directoryOf: DirectoryOf;
  readonly #random: () => number;
  /** Certificate serial → when its renewalInfo may be asked again after a failure (Unix ms). */
  readonly #failedUntil = new Map<string, number>();
  /** Unix ms of the last sweep of `#failedUntil`'s past entries. */
  #sweptAtMs = 0;

  /** @param directories one directory (a single issuer), or the directory of each issuer by name */
  constructor(directories: AcmeDirectory | DirectoryOf, random: () => number = Math.random) {
    this.#directoryOf = typeof directories === 'function' ? directories : () => directories;
    this.#random = random;
  }

  /**
   * The certificate status with `renewalTime` (and `ari`) decided. Never throws: without a usable
   * ARI answer the previous decision, or the 2/3-lifetime rule, stands.
   *
   * @param serving the facts of the certificate in the Secret, renewalTime at 2/3 of its lifetime;
   *   its `acmeIssuer` picks the CA asked
   * @param ariCertId resolves its ARI certificate identifier (RFC 9773 §4.1, `ariCertificateId`), or
   *   undefined when it has no Authority Key Identifier (a failure, as a CA's error is); called only
   *   when the CA is asked, so a reconcile that asks nothing never computes it. It may reject (e.g.
   *   the Secret could not be read), which counts as a failure
   * @param previous the status the domain showed, to keep a decision for the same serial
   * @param force ask the CA again even before its Retry-After (a verify request)
   */
  async plan(
    serving: CertificateStatus,
    ariCertId: () => Promise<string | undefined>,
    previous: CertificateStatus | undefined,
    now: Date,
    force: boolean,
    log: Logger,
  ): Promise<CertificateStatus> {
    const same = previous?.serialNumber === serving.serialNumber ? previous : undefined;
    const kept = same?.ari ? { ...serving, ari: same.ari, renewalTime: same.renewalTime } : serving;
    const due = !same?.ari?.nextCheckAt || Date.parse(same.ari.nextCheckAt) <= now.getTime();
    if (!force && (!due || this.#failedRecently(serving.serialNumber, now.getTime()))) return kept;
    try {
      const planned = (await this.#ask(serving, ariCertId, same, now)) ?? kept;
      this.#failedUntil.delete(serving.serialNumber);
      return planned;
    } catch (err) {
      const retryAt = now.getTime() + ARI_FAILURE_RETRY_MS;
      this.#failedUntil.set(serving.serialNumber, retryAt);
      this.#sweep(now.getTime());
      log.warn(
        { err, retryAt: new Date(retryAt).toISOString() },
        'ACME renewal information unavailable; keeping the current renewal time',
      );
      return kept;
    }
  }

  /** Whether a renewalInfo request for `serial` failed less than ARI_FAILURE_RETRY_MS ago. */
  #failedRecently(serial: string, nowMs: number): boolean {
    const until = this.#failedUntil.get(serial);
    if (until === undefined) return false;
    if (nowMs < until) return true;
    this.#failedUntil.delete(serial);
    return false;
  }

  /** Drops past entries (certificates replaced since, or domains removed), at most once per retry time. */
  #sweep(nowMs: number): void {
    if (nowMs - this.#sweptAtMs < ARI_FAILURE_RETRY_MS) return;
    this.#sweptAtMs = nowMs;
    for (const [serial, until] of this.#failedUntil) if (until <= nowMs) this.#failedUntil.delete(serial);
  }

  /** The status with the CA's current ARI answer, or undefined when the CA offers no ARI. */
  async #ask(
    serving: CertificateStatus,
    resolveCertId: () => Promise<string | undefined>,
    same: CertificateStatus | undefined,
    now: Date,
  ): Promise<CertificateStatus | undefined> {
    const { renewalInfo } = await this.#directoryOf(serving.acmeIssuer).facts();
    if (!renewalInfo) return undefined;
    const certId = await resolveCertId();
    if (certId === undefined)
      throw new AriError('the certificate has no Authority Key Identifier, so ARI cannot name it');
    const window = await fetchRenewalWindow(renewalInfo, certId);
    const previousTime = same?.ari ? Date.parse(same.renewalTime) : NaN;
    const inside = previousTime >= Date.parse(window.start) && previousTime <= Date.parse(window.end);
    const renewalTime = inside ? new Date(previousTime) : selectRenewalTime(window, now, this.#random);
    return {
      ...serving,
      renewalTime: renewalTime.toISOString(),
      ari: {
        certId,
        windowStart: window.start,
        windowEnd: window.end,
        ...(window.explanationURL ? { explanationURL: window.explanationURL } : {}),
        checkedAt: now.toISOString(),
        nextCheckAt: new Date(now.getTime() + window.retryAfterSeconds * 1000).toISOString(),
      },
    };
  }
}
