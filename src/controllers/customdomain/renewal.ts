/**
 * When to renew a certificate: at a time chosen in the CA's ARI window (RFC 9773) when the directory
 * offers `renewalInfo`, otherwise two thirds into its lifetime. The ARI answer is kept in the status
 * (`status.certificate.ari`) and asked again after the CA's Retry-After or on a verify request.
 */
import type { Logger } from 'pino';
import { ariCertificateId, fetchRenewalWindow, selectRenewalTime } from '../../acme/ari.js';
import type { AcmeDirectory } from '../../acme/directory.js';
import type { CertificateStatus } from '../../api/customdomain.js';

export class RenewalPlanner {
  readonly #directory: AcmeDirectory;
  readonly #random: () => number;

  constructor(directory: AcmeDirectory, random: () => number = Math.random) {
    this.#directory = directory;
    this.#random = random;
  }

  /**
   * The certificate status with `renewalTime` (and `ari`) decided. Never throws: without a usable
   * ARI answer the previous decision, or the 2/3-lifetime rule, stands.
   *
   * @param serving the facts of the certificate in the Secret, renewalTime at 2/3 of its lifetime
   * @param previous the status the domain showed, to keep a decision for the same serial
   * @param force ask the CA again even before its Retry-After (a verify request)
   */
  async plan(
    serving: CertificateStatus,
    certificatePem: string,
    previous: CertificateStatus | undefined,
    now: Date,
    force: boolean,
    log: Logger,
  ): Promise<CertificateStatus> {
    const same = previous?.serialNumber === serving.serialNumber ? previous : undefined;
    const kept = same?.ari ? { ...serving, ari: same.ari, renewalTime: same.renewalTime } : serving;
    const due = !same?.ari?.nextCheckAt || Date.parse(same.ari.nextCheckAt) <= now.getTime();
    if (!due && !force) return kept;
    try {
      return (await this.#ask(serving, certificatePem, same, now)) ?? kept;
    } catch (err) {
      log.warn({ err }, 'ACME renewal information unavailable; keeping the current renewal time');
      return kept;
    }
  }

  /** The status with the CA's current ARI answer, or undefined when the CA offers no ARI. */
  async #ask(
    serving: CertificateStatus,
    certificatePem: string,
    same: CertificateStatus | undefined,
    now: Date,
  ): Promise<CertificateStatus | undefined> {
    const { renewalInfo } = await this.#directory.facts();
    if (!renewalInfo) return undefined;
    const certId = ariCertificateId(certificatePem);
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
