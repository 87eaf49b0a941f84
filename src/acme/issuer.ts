/**
 * Issues one certificate over ACME (RFC 8555 §7.4): new order, HTTP-01 for each pending
 * authorization (key authorization served by the operator, self-checked, then the challenge is
 * answered) or, for a hostname that delegates `_acme-challenge` to the platform's challenge zone,
 * DNS-01 (the TXT record written there by an RFC 2136 update), finalize with a fresh ECDSA P-256
 * key, download the chain.
 *
 * A cancelled order (the domain was removed) stops at once: its key authorization is withdrawn the
 * moment the signal fires, even while a request to the CA is still waiting for an answer, and
 * nothing more is sent to the CA; a request still out is aborted. A rate-limit answer (HTTP 429)
 * ends the order with `AcmeRateLimitedError`, and no request for that name goes to the CA before its
 * Retry-After time. A request the CA does not answer in time (`--acme-request-timeout-seconds`) ends
 * the order with `AcmeRequestTimeoutError`, which names the step; a server error (HTTP 5xx) to a
 * signed request ends it with `AcmeServerError`, which names the CA's answer (server-error.ts).
 *
 * A renewal's new order names the certificate it replaces (RFC 9773 §5). That is a hint for the CA's
 * rate limits, not a condition of the renewal: a new order the CA refuses with `replaces` (for one,
 * `alreadyReplaced` when an earlier order already named that certificate, or a CA that no longer
 * knows it) is placed again at once without it, and only its refusal fails the attempt. A new
 * order the CA refuses because it no longer knows the account (RFC 8555 §6.7 `accountDoesNotExist`,
 * a CA whose state was reset) is placed again once the account is registered anew (§7.3), in the
 * same attempt.
 */
import * as acme from 'acme-client';
import type { Logger } from 'pino';
import { caaLookupName, evaluateCaa, isWildcardName } from '../dns/caa.js';
import type { DnsResolver } from '../dns/resolver.js';
import { DnsUpdateTransportError } from '../dns/update-client.js';
import type { AcmeDirectory } from './directory.js';
import type { AcmeAccount } from './account.js';
import type { ChallengeStore } from './challenge-store.js';
import { currentIssuanceSignal } from './issuance-tracker.js';
import { AcmeRateLimitedError, RateLimitGate } from './rate-limit.js';
import { AcmeRequestTimeoutError } from './request-timeout.js';
import { AcmeServerError } from './server-error.js';
import { selfCheckHttp01 } from './self-check.js';

export interface IssuedCertificate {
  /** PEM chain, leaf first. */
  certificatePem: string;
  /** PEM, PKCS#8. */
  privateKeyPem: string;
  /** The order URL, for the record. */
  orderUrl: string;
}

/** Thrown when an order cannot complete: the CA offered no usable challenge or refused validation. */
export class AcmeIssuanceError extends Error {
  readonly code = 'ACME_ISSUANCE_FAILED';
  /** The CA tried the challenge and found it invalid: counts against the hostname's failed validations. */
  readonly validationFailed: boolean;
  constructor(message: string, options?: ErrorOptions & { validationFailed?: boolean }) {
    super(message, options);
    this.name = 'AcmeIssuanceError';
    this.validationFailed = options?.validationFailed ?? false;
  }
}

/**
 * The DNS-01 TXT record could not be written in the platform's challenge zone (RFC 2136): the
 * zone's server refused the update (`ChallengeZoneRefused`: its RCODE and TSIG error are in the
 * message; a wrong TSIG key, a zone that takes no updates from the key) or could not be reached
 * (`ChallengeZoneUnreachable`). The CertificateReady reason of the order (docs/troubleshooting.md);
 * not the CA's failure, so it moves no order to another CA.
 */
export class Dns01PublishError extends AcmeIssuanceError {
  readonly reason: 'ChallengeZoneRefused' | 'ChallengeZoneUnreachable';
  /** Not the CA's failure, even when a refused connection is in its cause (issuer-selection.ts). */
  readonly caFailure = false;
  constructor(message: string, unreachable: boolean, options?: ErrorOptions) {
    super(message, options);
    this.name = 'Dns01PublishError';
    this.reason = unreachable ? 'ChallengeZoneUnreachable' : 'ChallengeZoneRefused';
  }
}

/** The CertificateReady reasons of `Dns01PublishError`: the order after one answers HTTP-01 where it can. */
export const DNS01_PUBLISH_REASONS: readonly string[] = ['ChallengeZoneRefused', 'ChallengeZoneUnreachable'];

/** Thrown when the order was cancelled (the domain was removed): nothing more is asked of the CA. */
export class IssuanceCancelledError extends Error {
  readonly code = 'ISSUANCE_CANCELLED';
  readonly reason = 'IssuanceCancelled';
  constructor(hostname: string) {
    super(`the order for ${hostname} was cancelled; nothing more is asked of the CA`);
    this.name = 'IssuanceCancelledError';
  }
}

/** Thrown when CAA records exclude the CA (RFC 8659): diagnosed before ordering, not waited for. */
export class CaaForbidsIssuanceError extends Error {
  readonly code = 'CAA_FORBIDS_ISSUANCE';
  readonly reason = 'CAAForbidsIssuance';
  constructor(message: string) {
    super(message);
    this.name = 'CaaForbidsIssuanceError';
  }
}

/** Thrown when the CAA lookup fails (SERVFAIL, timeout): a CA must not issue then (RFC 8659 §5.4). */
export class CaaLookupError extends Error {
  readonly code = 'CAA_LOOKUP_FAILED';
  readonly reason = 'CAALookupFailed';
  constructor(message: string) {
    super(message);
    this.name = 'CaaLookupError';
  }
}

export interface IssueOptions {
  /** ARI certificate identifier of the certificate this order replaces (RFC 9773 §5). */
  replaces?: string;
  /**
   * Cancels the order: no further request goes to the CA and a published key authorization is
   * withdrawn at once. Default: the signal of the `IssuanceTracker` run this call is part of.
   */
  signal?: AbortSignal;
  /**
   * Answer DNS-01 instead of HTTP-01, with the TXT record written at this name in the platform's
   * challenge zone, which `_acme-challenge.<hostname>` is a CNAME of (`dns/challenge-delegation.ts`).
   * Needs `IssuerOptions.dns01`.
   */
  dns01RecordName?: string;
  /**
   * The zone's publisher for this order's DNS-01 record, when it is another zone than the challenge
   * zone of `IssuerOptions.dns01` (the apps domain's zone, for its wildcard certificate).
   */
  dns01Publisher?: Dns01Publisher;
}

/** Writes and removes DNS-01 TXT records in the platform's challenge zone (`dns/update-client.ts`). */
export interface Dns01Publisher {
  /** @throws when the zone's server refuses or cannot be reached */
  publishTxt(name: string, value: string, ttlSeconds: number): Promise<void>;
  withdrawTxt(name: string, value: string): Promise<void>;
}

/** TTL of a DNS-01 TXT record, in seconds: short, as it lives only for one validation. */
export const DNS01_TXT_TTL_SECONDS = 60;

export interface IssuerOptions {
  /** The ACME profile to request (draft-ietf-acme-profiles); undefined lets the CA choose. */
  profile?: string;
  /** Issuer domain names for the CAA check; undefined means the directory's `caaIdentities`. */
  caaIdentities?: readonly string[];
  /** The port the CA's HTTP-01 validation connects to (80, or Pebble's httpPort in the sandbox). */
  http01Port: number;
  selfCheck: { attempts: number; intervalMs: number; timeoutMs: number };
  /** The challenge zone's publisher; without it an order asking for DNS-01 fails. */
  dns01?: Dns01Publisher;
}

export class AcmeIssuer {
  readonly #account: AcmeAccount;
  readonly #store: ChallengeStore;
  readonly #resolver: DnsResolver;
  readonly #options: IssuerOptions;
  readonly #directory: AcmeDirectory;
  readonly #gate = new RateLimitGate();
  /** Calls of cancelled orders still running in the background (see `abandonedCalls`). */
  #abandoned = 0;

  constructor(
    account: AcmeAccount,
    directory: AcmeDirectory,
    store: ChallengeStore,
    resolver: DnsResolver,
    options: IssuerOptions,
  ) {
    this.#account = account;
    this.#directory = directory;
    this.#store = store;
    this.#resolver = resolver;
    this.#options = options;
  }

  /**
   * Issues a certificate for `hostname`: CAA check, then the order. Throws `CaaForbidsIssuanceError`,
   * `CaaLookupError`, `AcmeIssuanceError`, `AcmeRateLimitedError` (the CA answered 429 now, or its
   * last Retry-After for this name has not passed: then nothing is sent), `AcmeRequestTimeoutError`
   * (the CA did not answer a request in time), `IssuanceCancelledError`, `AcmeDirectoryError` or a
   * network error.
   */
  async issue(hostname: string, log: Logger, options: IssueOptions = {}): Promise<IssuedCertificate> {
    const signal = options.signal ?? currentIssuanceSignal();
    this.#gate.check(hostname, new Date());
    await this.#checkCaa(hostname);
    try {
      return await this.#order(hostname, log, options, signal);
    } catch (err) {
      if (err instanceof AcmeRateLimitedError) {
        this.#gate.record(hostname, err);
        log.warn(
          { retryAfter: err.retryAfter, step: err.context?.step },
          'the ACME CA rate-limited the order',
        );
      }
      throw err;
    }
  }

  async #order(
    hostname: string,
    log: Logger,
    options: IssueOptions,
    signal: AbortSignal | undefined,
  ): Promise<IssuedCertificate> {
    const ca = <T>(step: string, call: () => Promise<T>): Promise<T> =>
      this.#ca(step, hostname, signal, call);
    const register = (): Promise<acme.Client> => ca('account registration', () => this.#account.client());
    let client = await register();
    let replaces = options.replaces;
    let registeredAgain = false;
    let order: acme.Order | undefined;
    while (order === undefined) {
      const dropped = this.#account.droppedRegistrations;
      try {
        order = await ca('new order', () =>
          client.createOrder({
            identifiers: [{ type: 'dns', value: hostname }],
            ...(this.#options.profile ? { profile: this.#options.profile } : {}),
            ...(replaces ? { replaces } : {}),
          }),
        );
      } catch (err) {
        if (!registeredAgain && caProblem(err) && this.#account.droppedRegistrations !== dropped) {
          // RFC 8555 §6.7 accountDoesNotExist: the CA lost the account (a CA whose state was reset).
          log.warn(
            { err },
            'the ACME CA no longer knew the account; placing the order again once registered',
          );
          registeredAgain = true;
          client = await register();
        } else if (replaces && refusedReplacement(err)) {
          log.warn(
            { err, replaces },
            'the ACME CA refused the renewal order that names the certificate it replaces; ordering again without replaces',
          );
          replaces = undefined;
        } else {
          throw err;
        }
      }
    }
    // The profile the CA put on the order (draft-ietf-acme-profiles), which may differ from the one asked.
    const profile = (order as { profile?: unknown }).profile;
    log.info(
      {
        orderUrl: order.url,
        replaces,
        profileRequested: this.#options.profile,
        profile: typeof profile === 'string' ? profile : undefined,
      },
      'ACME order created',
    );
    const authorizations = await ca('authorization', () => client.getAuthorizations(order));
    for (const authz of authorizations) {
      if (authz.status === 'valid') continue;
      if (options.dns01RecordName === undefined) await this.#solveHttp01(client, order, authz, log, signal);
      else
        await this.#solveDns01(
          client,
          order,
          authz,
          options.dns01RecordName,
          options.dns01Publisher ?? this.#options.dns01,
          log,
          signal,
        );
    }
    const [keyPem, csr] = await acme.crypto.createCsr(
      { ...(hostname.length <= 64 ? { commonName: hostname } : {}), altNames: [hostname] },
      await acme.crypto.createPrivateEcdsaKey('P-256'),
    );
    const finalized = await ca('finalize', () => client.finalizeOrder(order, csr));
    const certificatePem = await ca('certificate download', () => client.getCertificate(finalized));
    log.info({ orderUrl: order.url }, 'ACME order valid; certificate downloaded');
    return { certificatePem, privateKeyPem: keyPem.toString('utf8'), orderUrl: order.url };
  }

  /**
   * One exchange with the CA: not started once cancelled, its result dropped if cancelled
   * meanwhile, a rate limit or a request timeout placed at `step`.
   */
  async #ca<T>(
    step: string,
    hostname: string,
    signal: AbortSignal | undefined,
    call: () => Promise<T>,
  ): Promise<T> {
    if (signal?.aborted) throw new IssuanceCancelledError(hostname);
    let result: T;
    try {
      result = await this.#unlessCancelled(call(), signal, hostname);
    } catch (err) {
      if (signal?.aborted) throw new IssuanceCancelledError(hostname);
      if (isStepError(err)) throw err.during(step, hostname);
      throw err;
    }
    if (signal?.aborted) throw new IssuanceCancelledError(hostname);
    return result;
  }

  /**
   * How many calls of cancelled orders are still running in the background: an acme-client polling
   * loop asleep between attempts (up to its backoff maximum, for up to its attempt count), whose
   * every request is refused at once, or an HTTP-01 self-check between its attempts. Neither can be
   * stopped from outside, and at shutdown neither is worth waiting for.
   */
  abandonedCalls(): number {
    return this.#abandoned;
  }

  /**
   * `work`, not waited for once `signal` fires (`untilAborted`): it then rejects with
   * IssuanceCancelledError, and `work` counts in `abandonedCalls` until it settles.
   */
  async #unlessCancelled<T>(work: Promise<T>, signal: AbortSignal | undefined, hostname: string): Promise<T> {
    try {
      return await untilAborted(work, signal, () => new IssuanceCancelledError(hostname));
    } catch (err) {
      if (signal?.aborted) {
        this.#abandoned += 1;
        const settled = (): void => {
          this.#abandoned -= 1;
        };
        work.then(settled, settled);
      }
      throw err;
    }
  }

  /**
   * RFC 8659: the relevant CAA RRset (for a wildcard `*.X`, X's and up, §3) judged for the CA's
   * identities, `issuewild` first for a wildcard (§4.3; dns/caa.ts `evaluateCaa`).
   *
   * @throws CaaLookupError, CaaForbidsIssuanceError
   */
  async #checkCaa(hostname: string): Promise<void> {
    const identities = this.#options.caaIdentities ?? (await this.#directory.facts()).caaIdentities;
    if (identities.length === 0) return; // the CA names no identity to check against
    const found = await this.#resolver.relevantCaa(caaLookupName(hostname));
    if ('failed' in found) {
      throw new CaaLookupError(
        `the CAA lookup of ${found.owner} failed (${found.failed.kind}); no certificate is ordered until it answers (RFC 8659 §5.4)`,
      );
    }
    const verdict = evaluateCaa(found.owner, found.records, identities, {
      wildcard: isWildcardName(hostname),
    });
    if (!verdict.allowed) throw new CaaForbidsIssuanceError(verdict.message);
  }

  /**
   * DNS-01 through the platform's challenge zone (RFC 8555 §8.4): the TXT record (base64url of the
   * key authorization's SHA-256) written at `recordName` by an RFC 2136 update, the challenge
   * answered, the record removed afterwards whatever the outcome. The zone's server confirmed the
   * write (its NOERROR answer, signed); that the customer's CNAME leads there was checked before
   * DNS-01 was chosen.
   *
   * @throws AcmeIssuanceError when the CA offers no dns-01 challenge, no publisher is configured, the
   *   zone refuses the write (the server's RCODE in the message) or the CA finds the challenge invalid
   */
  async #solveDns01(
    client: acme.Client,
    order: acme.Order,
    authz: acme.Authorization,
    recordName: string,
    publisher: Dns01Publisher | undefined,
    log: Logger,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const hostname = authz.identifier.value;
    if (publisher === undefined) {
      throw new AcmeIssuanceError(`dns-01 was asked for ${hostname} but no challenge zone is configured`);
    }
    const challenge = authz.challenges.find((c) => c.type === 'dns-01');
    if (!challenge) {
      throw new AcmeIssuanceError(
        `the CA offered no dns-01 challenge for ${hostname} (offered: ${authz.challenges.map((c) => c.type).join(', ')})`,
      );
    }
    const value = await client.getChallengeKeyAuthorization(challenge);
    if (signal?.aborted) throw new IssuanceCancelledError(hostname);
    try {
      await publisher.publishTxt(recordName, value, DNS01_TXT_TTL_SECONDS);
    } catch (err) {
      throw new Dns01PublishError(
        `could not write the dns-01 record of ${hostname} at ${recordName}: ${err instanceof Error ? err.message : String(err)}`,
        err instanceof DnsUpdateTransportError,
        { cause: err },
      );
    }
    log.info({ authorization: authz.url, recordName }, 'dns-01 TXT record written in the challenge zone');
    try {
      await this.#ca('challenge response', hostname, signal, () => client.completeChallenge(challenge));
      await this.#ca('challenge validation', hostname, signal, () =>
        client.waitForValidStatus(challenge).catch(async (err: unknown) => {
          if (isStepError(err)) throw err;
          throw await validationError(
            err,
            hostname,
            () => authorizationInvalid(client, order, authz.url),
            'dns-01',
          );
        }),
      );
      log.info({ authorization: authz.url }, 'dns-01 challenge valid');
    } finally {
      // Never fails the order: a record left behind answers nothing once the challenge is done.
      await publisher.withdrawTxt(recordName, value).catch((err: unknown) => {
        log.warn({ err, authorization: authz.url, recordName }, 'could not remove the dns-01 TXT record');
      });
    }
  }

  async #solveHttp01(
    client: acme.Client,
    order: acme.Order,
    authz: acme.Authorization,
    log: Logger,
    signal: AbortSignal | undefined,
  ): Promise<void> {
    const hostname = authz.identifier.value;
    const challenge = authz.challenges.find((c) => c.type === 'http-01');
    if (!challenge) {
      throw new AcmeIssuanceError(
        `the CA offered no http-01 challenge for ${hostname} (offered: ${authz.challenges.map((c) => c.type).join(', ')})`,
      );
    }
    const keyAuthorization = await client.getChallengeKeyAuthorization(challenge);
    await this.#store.publish(challenge.token, keyAuthorization);
    // Cancelled while a request is out: withdraw now from every replica, not when the CA answers,
    // so the CA cannot validate it.
    const withdrawNow = (): void => {
      this.#store.withdraw(challenge.token, { writeNow: true }).then(
        () => {
          log.info({ authorization: authz.url }, 'order cancelled; http-01 key authorization withdrawn');
        },
        (err: unknown) => {
          log.warn({ err, authorization: authz.url }, 'could not withdraw the http-01 key authorization');
        },
      );
    };
    signal?.addEventListener('abort', withdrawNow, { once: true });
    try {
      if (signal?.aborted) throw new IssuanceCancelledError(hostname);
      // Up to its attempts × (timeout + interval): not waited for once the order is cancelled.
      await this.#unlessCancelled(
        selfCheckHttp01({
          hostname,
          port: this.#options.http01Port,
          token: challenge.token,
          keyAuthorization,
          resolver: this.#resolver,
          ...this.#options.selfCheck,
        }),
        signal,
        hostname,
      );
      await this.#ca('challenge response', hostname, signal, () => client.completeChallenge(challenge));
      await this.#ca('challenge validation', hostname, signal, () =>
        client.waitForValidStatus(challenge).catch(async (err: unknown) => {
          if (isStepError(err)) throw err;
          throw await validationError(err, hostname, () => authorizationInvalid(client, order, authz.url));
        }),
      );
      log.info({ authorization: authz.url }, 'http-01 challenge valid');
    } finally {
      signal?.removeEventListener('abort', withdrawNow);
      // Never fails the order: the CA is done with the key authorization, and a valid challenge
      // failed over its clean-up (the API server restarting, say) would cost a new order.
      await this.#store.withdraw(challenge.token).catch((err: unknown) => {
        log.warn({ err, authorization: authz.url }, 'could not withdraw the http-01 key authorization');
      });
    }
  }
}

/**
 * `work`'s outcome, or a rejection with `cancelled()` as soon as `signal` fires, whichever comes
 * first. acme-client's polling (`waitForValidStatus`, `finalizeOrder`) sleeps between attempts, up
 * to its backoff maximum, and retries a failed request: a cancelled run's requests fail at once, but
 * waiting for the loop to give up held a cancelled order, and with it the operator's shutdown, for
 * up to a minute (seen at 10,000 domains with the CA not answering). The abandoned `work` settles
 * in the background and its outcome is dropped.
 */
export function untilAborted<T>(
  work: Promise<T>,
  signal: AbortSignal | undefined,
  cancelled: () => Error,
): Promise<T> {
  if (signal === undefined) return work;
  return new Promise<T>((resolve, reject) => {
    const onAbort = (): void => {
      reject(cancelled());
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    work.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        resolve(value);
      },
      (err: unknown) => {
        signal.removeEventListener('abort', onAbort);
        // Passed on as it came: acme-client and the request adapter decide what it is.
        // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
        reject(err);
      },
    );
  });
}

/**
 * The error of an http-01 validation that did not end valid: acme-client throws the same plain
 * Error for an invalid challenge and for a request of its polling the CA refused (a lost account,
 * say), so only an authorization the CA reports invalid (RFC 8555 §7.1.6; `isInvalid` asks it) is a
 * failed validation (`validationFailed`), which counts against the hostname's limit of failed
 * validations (order-budget.ts): in a benchmark whose CA lost its account at each restart, 11
 * orders in flight at two restarts were counted so.
 *
 * @param err what acme-client's `waitForValidStatus` threw
 */
export async function validationError(
  err: unknown,
  hostname: string,
  isInvalid: () => Promise<boolean>,
  challengeType: 'http-01' | 'dns-01' = 'http-01',
): Promise<AcmeIssuanceError> {
  const message = err instanceof Error ? err.message : String(err);
  if (await isInvalid()) {
    return new AcmeIssuanceError(`the CA could not validate ${challengeType} for ${hostname}: ${message}`, {
      cause: err,
      validationFailed: true,
    });
  }
  return new AcmeIssuanceError(
    `the ${challengeType} validation for ${hostname} did not complete: ${message}`,
    {
      cause: err,
    },
  );
}

/**
 * Whether the CA reports the authorization at `authorizationUrl` of `order` `invalid` (RFC 8555
 * §7.1.6), asked once (a POST-as-GET per authorization of the order). False when it reports another
 * status or cannot be asked.
 */
async function authorizationInvalid(
  client: acme.Client,
  order: acme.Order,
  authorizationUrl: string,
): Promise<boolean> {
  try {
    const authorizations = await client.getAuthorizations(order);
    return authorizations.some((a) => a.url === authorizationUrl && a.status === 'invalid');
  } catch {
    return false;
  }
}

/**
 * Whether `err` is one of the CA's answers (or its silence) that the issuer places at a step of the
 * order (`during`): a rate limit, a request timeout or a server error.
 */
function isStepError(err: unknown): err is AcmeRateLimitedError | AcmeRequestTimeoutError | AcmeServerError {
  return (
    err instanceof AcmeRateLimitedError ||
    err instanceof AcmeRequestTimeoutError ||
    err instanceof AcmeServerError
  );
}

/**
 * Whether a failed new order that named the certificate it replaces may be placed again without
 * it: the CA answered it with a problem (`caProblem`) or a server error (`AcmeServerError`). Not a
 * rate limit (which holds for any order), a request timeout, a cancellation or a network error.
 */
function refusedReplacement(err: unknown): boolean {
  return err instanceof AcmeServerError || caProblem(err);
}

/**
 * Whether `err` is a problem document the CA answered (RFC 8555 §6.7), as acme-client throws it: a
 * plain `Error` carrying the problem's detail (api.js). Portico's own errors (a rate limit, a request
 * timeout, a cancellation) and axios's (no answer) are subclasses of `Error`.
 */
function caProblem(err: unknown): boolean {
  return err instanceof Error && Object.getPrototypeOf(err) === Error.prototype;
}
