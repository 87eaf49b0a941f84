/**
 * Issues one certificate over ACME (RFC 8555 §7.4): new order, HTTP-01 for each pending
 * authorization (key authorization served by the operator, self-checked, then the challenge is
 * answered), finalize with a fresh ECDSA P-256 key, download the chain.
 */
import * as acme from 'acme-client';
import type { Logger } from 'pino';
import type { DnsResolver } from '../dns/resolver.js';
import type { AcmeAccount } from './account.js';
import type { Http01ChallengeStore } from './challenge-store.js';
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

export interface IssuerOptions {
  /** The port the CA's HTTP-01 validation connects to (80, or Pebble's httpPort in the sandbox). */
  http01Port: number;
  selfCheck: { attempts: number; intervalMs: number; timeoutMs: number };
}

export class AcmeIssuer {
  readonly #account: AcmeAccount;
  readonly #store: Http01ChallengeStore;
  readonly #resolver: DnsResolver;
  readonly #options: IssuerOptions;

  constructor(
    account: AcmeAccount,
    store: Http01ChallengeStore,
    resolver: DnsResolver,
    options: IssuerOptions,
  ) {
    this.#account = account;
    this.#store = store;
    this.#resolver = resolver;
    this.#options = options;
  }

  /** Issues a certificate for `hostname`. Throws `AcmeIssuanceError` or a network error. */
  async issue(hostname: string, log: Logger): Promise<IssuedCertificate> {
    const client = await this.#account.client();
    const order = await client.createOrder({ identifiers: [{ type: 'dns', value: hostname }] });
    log.info({ orderUrl: order.url }, 'ACME order created');
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

  async #solveHttp01(client: acme.Client, authz: acme.Authorization, log: Logger): Promise<void> {
    const challenge = authz.challenges.find((c) => c.type === 'http-01');
    if (!challenge) {
      throw new AcmeIssuanceError(
        `the CA offered no http-01 challenge for ${authz.identifier.value} (offered: ${authz.challenges.map((c) => c.type).join(', ')})`,
      );
    }
    const keyAuthorization = await client.getChallengeKeyAuthorization(challenge);
    this.#store.set(challenge.token, keyAuthorization);
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
      this.#store.delete(challenge.token);
    }
  }
}
