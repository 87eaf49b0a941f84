/**
 * Issues one certificate over ACME (RFC 8555 §7.4): new order, HTTP-01 for each pending
 * authorization (key authorization served by the operator, self-checked, then the challenge is
 * answered), finalize with a fresh ECDSA P-256 key, download the chain.
 */
import * as acme from 'acme-client';
import type { Logger } from 'pino';
import { evaluateCaa } from '../dns/caa.js';
import type { DnsResolver } from '../dns/resolver.js';
import type { AcmeDirectory } from './directory.js';
import type { AcmeAccount } from './account.js';
import type { ChallengeStore } from './challenge-store.js';
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
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'AcmeIssuanceError';
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
}

export interface IssuerOptions {
  /** The ACME profile to request (draft-ietf-acme-profiles); undefined lets the CA choose. */
  profile?: string;
  /** Issuer domain names for the CAA check; undefined means the directory's `caaIdentities`. */
  caaIdentities?: readonly string[];
  /** The port the CA's HTTP-01 validation connects to (80, or Pebble's httpPort in the sandbox). */
  http01Port: number;
  selfCheck: { attempts: number; intervalMs: number; timeoutMs: number };
}

export class AcmeIssuer {
  readonly #account: AcmeAccount;
  readonly #store: ChallengeStore;
  readonly #resolver: DnsResolver;
  readonly #options: IssuerOptions;
  readonly #directory: AcmeDirectory;

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
   * `CaaLookupError`, `AcmeIssuanceError`, `AcmeDirectoryError` or a network error.
   */
  async issue(hostname: string, log: Logger, options: IssueOptions = {}): Promise<IssuedCertificate> {
    await this.#checkCaa(hostname);
    const client = await this.#account.client();
    const order = await client.createOrder({
      identifiers: [{ type: 'dns', value: hostname }],
      ...(this.#options.profile ? { profile: this.#options.profile } : {}),
      ...(options.replaces ? { replaces: options.replaces } : {}),
    });
    log.info(
      { orderUrl: order.url, replaces: options.replaces, profile: this.#options.profile },
      'ACME order created',
    );
    const authorizations = await client.getAuthorizations(order);
    for (const authz of authorizations) {
      if (authz.status === 'valid') continue;
      await this.#solveHttp01(client, authz, log);
    }
    const [keyPem, csr] = await acme.crypto.createCsr(
      { ...(hostname.length <= 64 ? { commonName: hostname } : {}), altNames: [hostname] },
      await acme.crypto.createPrivateEcdsaKey('P-256'),
    );
    const finalized = await client.finalizeOrder(order, csr);
    const certificatePem = await client.getCertificate(finalized);
    log.info({ orderUrl: order.url }, 'ACME order valid; certificate downloaded');
    return { certificatePem, privateKeyPem: keyPem.toString('utf8'), orderUrl: order.url };
  }

  async #checkCaa(hostname: string): Promise<void> {
    const identities = this.#options.caaIdentities ?? (await this.#directory.facts()).caaIdentities;
    if (identities.length === 0) return; // the CA names no identity to check against
    const found = await this.#resolver.relevantCaa(hostname);
    if ('failed' in found) {
      throw new CaaLookupError(
        `the CAA lookup of ${found.owner} failed (${found.failed.kind}); no certificate is ordered until it answers (RFC 8659 §5.4)`,
      );
    }
    const verdict = evaluateCaa(found.owner, found.records, identities);
    if (!verdict.allowed) throw new CaaForbidsIssuanceError(verdict.message);
  }

  async #solveHttp01(client: acme.Client, authz: acme.Authorization, log: Logger): Promise<void> {
    const challenge = authz.challenges.find((c) => c.type === 'http-01');
    if (!challenge) {
      throw new AcmeIssuanceError(
        `the CA offered no http-01 challenge for ${authz.identifier.value} (offered: ${authz.challenges.map((c) => c.type).join(', ')})`,
      );
    }
    const keyAuthorization = await client.getChallengeKeyAuthorization(challenge);
    await this.#store.publish(challenge.token, keyAuthorization);
    try {
      await selfCheckHttp01({
        hostname: authz.identifier.value,
        port: this.#options.http01Port,
        token: challenge.token,
        keyAuthorization,
        resolver: this.#resolver,
        ...this.#options.selfCheck,
      });
      await client.completeChallenge(challenge);
      await client.waitForValidStatus(challenge).catch((err: unknown) => {
        throw new AcmeIssuanceError(
          `the CA could not validate http-01 for ${authz.identifier.value}: ${(err as Error).message}`,
          { cause: err },
        );
      });
      log.info({ authorization: authz.url }, 'http-01 challenge valid');
    } finally {
      await this.#store.withdraw(challenge.token);
    }
  }
}
