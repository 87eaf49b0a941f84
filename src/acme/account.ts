/**
 * The ACME account (RFC 8555 §7.3): one account per operator, whose private key lives in a Secret of
 * the operator's namespace so every replica and every restart uses the same account.
 */
import { Agent as HttpsAgent } from 'node:https';
import type { CoreV1Api } from '@kubernetes/client-node';
import * as acme from 'acme-client';
import type { Logger } from 'pino';
import { MANAGED_BY_LABEL, MANAGED_BY_VALUE } from '../api/customdomain.js';
import { isConflict, isNotFound } from '../kube/errors.js';
import { recordAcmeRequest } from '../observability/shared-metrics.js';
import { outsideIssuance } from './issuance-tracker.js';
import {
  appendResponseTransform,
  failFastOnRateLimit,
  problemOf,
  type ResponseTransformHost,
} from './rate-limit.js';
import { ReplayNoncePool, reuseReplayNonces } from './replay-nonces.js';
import { holdRequests } from './request-hold.js';
import { failFastOnServerError } from './server-error.js';
import { AcmeEndpoints, observeAcmeRequests } from './request-metrics.js';
import { acmeClientAxios, limitAcmeRequests, type RequestAdapter } from './request-timeout.js';
import { unreachable } from './issuer-selection.js';

export const ACCOUNT_KEY_FIELD = 'private-key.pem';

/**
 * How long a refused external account binding is kept before the account registers again:
 * 60 s. Every order in between fails at once with the same error, without a request to the CA.
 */
export const BINDING_REFUSAL_HOLD_MS = 60_000;

/**
 * The account could not be registered with its external account binding (RFC 8555 §7.3.4): the CA
 * refused it (a wrong HMAC key, an unknown key id), or its HMAC key's Secret is missing. The CA is
 * unusable until it is fixed: a CA failure for failover (issuer-selection.ts), and the
 * CertificateReady reason of the orders it failed.
 */
export class AcmeAccountBindingError extends Error {
  readonly code = 'ACME_ACCOUNT_BINDING_FAILED';
  readonly reason = 'ExternalAccountBindingFailed';
  readonly caFailure = true;
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = 'AcmeAccountBindingError';
  }
}

/**
 * Whether `err` is a problem document the CA answered (RFC 8555 §6.7), as acme-client throws it: a
 * plain `Error` with the problem's detail. Portico's own errors and axios's are subclasses.
 */
function isCaProblem(err: unknown): boolean {
  return err instanceof Error && Object.getPrototypeOf(err) === Error.prototype;
}

/** RFC 8555 §6.7: the request names an account (its `kid`) that the CA does not know. */
export const ACCOUNT_DOES_NOT_EXIST_PROBLEM = 'urn:ietf:params:acme:error:accountDoesNotExist';

const ON_ACCOUNT_GONE = Symbol.for('portico.acme.onAccountGone');

/**
 * Calls `onGone` whenever the CA at `origin` answers a request of acme-client's HTTP client with the
 * problem `accountDoesNotExist` (RFC 8555 §6.7): the CA lost or dropped the account, e.g. a CA whose
 * state was reset. The answer itself is left to acme-client, which fails the request with its
 * detail. Installs one response transform per process (acme-client has one HTTP client); a later
 * call for the same origin only replaces its `onGone`. An answer from an origin with no callback of
 * its own goes to the one registered without an origin, if any.
 *
 * @param instance acme-client's axios instance, `acme.axios`
 * @param origin the CA's origin (`https://ca.example:14000`), as `new URL(directoryUrl).origin`
 */
export function onAccountGone(instance: ResponseTransformHost, onGone: () => void, origin = ''): void {
  const host = instance as ResponseTransformHost & { [ON_ACCOUNT_GONE]?: Map<string, () => void> };
  const installed = host[ON_ACCOUNT_GONE] !== undefined;
  const callbacks = (host[ON_ACCOUNT_GONE] ??= new Map());
  callbacks.set(origin, onGone);
  if (installed) return;
  appendResponseTransform(instance, function (data) {
    if (problemOf(data).problemType !== ACCOUNT_DOES_NOT_EXIST_PROBLEM) return data;
    const url = (this as { url?: unknown } | undefined)?.url;
    (callbacks.get(originOf(url)) ?? callbacks.get(''))?.();
    return data;
  });
}

/**
 * The CA could not be reached (the connection was refused or dropped, its name did not resolve): a
 * CA failure for failover (issuer-selection.ts). It carries no request config, so acme-client
 * passes it through instead of retrying the request.
 */
export class AcmeCaUnreachableError extends Error {
  readonly code = 'ACME_CA_UNREACHABLE';
  readonly reason = 'IssuanceFailed';
  readonly caFailure = true;
  constructor(url: string, options?: ErrorOptions) {
    const cause = options?.cause instanceof Error ? `: ${options.cause.message}` : '';
    super(`the ACME CA could not be reached at ${url}${cause}`, options);
    this.name = 'AcmeCaUnreachableError';
  }
}

/**
 * The polls (acme-client's `waitForValidStatus`) waiting on a URL, told when a request to it is
 * refused or dropped. acme-client retries any error of a poll `pollAttempts` times with backoff, so
 * an order in flight at a CA that went down held its domain (and, with one order in flight, the
 * issuer's whole line) for about 80 s before failing over; told here, the poll ends at once.
 */
export class UnreachableWatch {
  readonly #waiting = new Map<string, Set<(err: AcmeCaUnreachableError) => void>>();
  #abandoned = 0;

  /**
   * Polls ended early whose acme-client loop still runs in the background (asleep between the
   * attempts the CA refuses): a process stopping need not wait for them.
   */
  abandoned(): number {
    return this.#abandoned;
  }

  /** Ends every poll waiting on `url` with `err`. */
  report(url: string, err: AcmeCaUnreachableError): void {
    for (const end of [...(this.#waiting.get(url) ?? [])]) end(err);
  }

  /**
   * `work`'s outcome, or a rejection with the first `AcmeCaUnreachableError` reported for `url`,
   * whichever comes first. An abandoned `work` settles in the background (its requests to a CA that
   * refuses connections fail at once) and its outcome is dropped.
   */
  until<T>(url: string, work: Promise<T>): Promise<T> {
    return new Promise<T>((resolve, reject) => {
      const waiting = this.#waiting.get(url) ?? new Set();
      this.#waiting.set(url, waiting);
      const done = (): void => {
        waiting.delete(end);
        if (waiting.size === 0 && this.#waiting.get(url) === waiting) this.#waiting.delete(url);
      };
      let endedEarly = false;
      const end = (err: AcmeCaUnreachableError): void => {
        done();
        endedEarly = true;
        this.#abandoned += 1;
        reject(err);
      };
      const settled = (): void => {
        done();
        if (endedEarly) this.#abandoned -= 1;
        endedEarly = false;
      };
      waiting.add(end);
      work.then(
        (value) => {
          settled();
          resolve(value);
        },
        (err: unknown) => {
          settled();
          // Passed on as it came: acme-client and the request adapter decide what it is.
          // eslint-disable-next-line @typescript-eslint/prefer-promise-reject-errors
          reject(err);
        },
      );
    });
  }
}

/** The process's polls (acme-client has one HTTP client per process; a URL names one CA's object). */
const UNREACHABLE = new UnreachableWatch();

/** Polls of this process ended early and still running in the background (`UnreachableWatch.abandoned`). */
export function abandonedPolls(): number {
  return UNREACHABLE.abandoned();
}

/**
 * `send`, with a request the CA's address refuses or drops failing as `AcmeCaUnreachableError`,
 * which `watch` is told of (the polls waiting on that URL end with it).
 */
export function failFastWhenUnreachable(
  send: RequestAdapter,
  watch: UnreachableWatch = UNREACHABLE,
): RequestAdapter {
  return async (config) => {
    try {
      return await send(config);
    } catch (err) {
      if ((err as { response?: unknown } | null)?.response === undefined && unreachable(err)) {
        const failure = new AcmeCaUnreachableError(config.url ?? '', { cause: err });
        watch.report(config.url ?? '', failure);
        throw failure;
      }
      throw err;
    }
  };
}

/** The origin of a URL, '' for anything else. */
function originOf(url: unknown): string {
  if (typeof url !== 'string') return '';
  try {
    return new URL(url).origin;
  } catch {
    return '';
  }
}

/** The URLs of the CAs this process talks to, by resource: one map, as acme-client has one HTTP client. */
const ACME_ENDPOINTS = new AcmeEndpoints();

export interface AcmeAccountOptions {
  directoryUrl: string;
  /** Contact address; `mailto:` is added. Optional for CAs that do not require one. */
  email?: string;
  /**
   * External account binding (RFC 8555 §7.3.4), for CAs that require it: the key id and the HMAC key
   * (base64url), given or read at registration from a key of a Secret in `secret.namespace`.
   */
  externalAccountBinding?: { kid: string; hmacKey: string | { secretRef: { name: string; key: string } } };
  /**
   * Certificates trusted for the CA's HTTPS instead of Node's default set (which already holds
   * NODE_EXTRA_CA_CERTS); undefined keeps the default. acme-client has one HTTP client, so every
   * account of the process must be given the same list.
   */
  trustedCertificates?: readonly string[];
  /**
   * A request the CA's address refuses or drops (ECONNREFUSED, ...) fails at once with
   * `AcmeCaUnreachableError` instead of acme-client retrying it 5 times over 75 s: with another
   * issuer to fail over to, waiting for a CA that is down only delays the order. Process-wide (one
   * HTTP client); set it the same on every account.
   */
  failFastWhenUnreachable?: boolean;
  /** Where the account key is kept. */
  secret: { namespace: string; name: string };
  /** Polling backoff of the ACME client, milliseconds. */
  pollMinMs: number;
  pollMaxMs: number;
  pollAttempts: number;
  /**
   * How long the CA has to answer each request, milliseconds; past it the request fails with
   * `AcmeRequestTimeoutError`. Applies to acme-client's one HTTP client, so to the whole process.
   */
  requestTimeoutMs: number;
  /**
   * Asked before each request that reaches the CA; a promise holds it until it resolves (the memory
   * reducer's `MemoryHold`; request-hold.ts). None unless given.
   */
  relief?: () => Promise<void> | undefined;
}

export class AcmeAccount {
  readonly #core: CoreV1Api;
  readonly #options: AcmeAccountOptions;
  readonly #log: Logger;
  #client: Promise<acme.Client> | undefined;
  #dropped = 0;
  /**
   * acme-client's connections to the CA: kept alive between requests (an idle one for 5 s, as Node's
   * global agent does), destroyed by `close`.
   */
  readonly #agent: HttpsAgent;
  /** A binding the CA refused, kept until `untilMs` so each order does not register again. */
  #refused: { err: AcmeAccountBindingError; untilMs: number } | undefined;

  constructor(core: CoreV1Api, options: AcmeAccountOptions, log: Logger) {
    this.#core = core;
    this.#options = options;
    this.#log = log;
    this.#agent = new HttpsAgent({
      keepAlive: true,
      timeout: 5_000,
      ...(options.trustedCertificates ? { ca: [...options.trustedCertificates] } : {}),
    });
  }

  /**
   * A client bound to the registered account. The first call loads or creates the key and registers
   * (newAccount with an existing key returns the existing account). A failure is not cached. The
   * registration is shared by every caller, so it runs outside the caller's issuance run: cancelling
   * that run does not abort it (its requests still have the request timeout). Rejects with the
   * registration's error (`AcmeRequestTimeoutError`, a Kubernetes API error, an ACME problem).
   */
  client(): Promise<acme.Client> {
    const refused = this.#refused;
    if (refused && Date.now() < refused.untilMs) return Promise.reject(refused.err);
    this.#client ??= outsideIssuance(() => this.#register()).catch((err: unknown) => {
      this.#client = undefined;
      if (err instanceof AcmeAccountBindingError) {
        this.#refused = { err, untilMs: Date.now() + BINDING_REFUSAL_HOLD_MS };
      }
      throw err;
    });
    return this.#client;
  }

  /**
   * How many times the registration was dropped because the CA answered `accountDoesNotExist`: a
   * caller that sees it change across a failed request knows the failure was the lost account, and
   * that `client()` now registers again.
   */
  get droppedRegistrations(): number {
    return this.#dropped;
  }

  /** Drops the registration (the CA no longer knows the account): the next `client()` registers again. */
  #forgetRegistration(): void {
    if (this.#client === undefined) return;
    this.#client = undefined;
    this.#dropped += 1;
    this.#log.warn(
      { directoryUrl: this.#options.directoryUrl },
      'the ACME CA no longer knows the account (accountDoesNotExist); registering it again',
    );
  }

  /**
   * Closes the connections to the CA, idle or busy (at shutdown, once the orders in flight were
   * abandoned: a connection still tied to an abandoned request would hold the process open).
   */
  close(): void {
    this.#agent.destroy();
  }

  async #register(): Promise<acme.Client> {
    // A 429 from the CA ends the order at once (AcmeRateLimitedError) instead of acme-client
    // sleeping Retry-After inside it and replaying the request.
    failFastOnRateLimit(acme.axios);
    // A 5xx to a signed request ends the order at once with the CA's answer (AcmeServerError)
    // instead of acme-client replaying a request whose nonce is spent (server-error.ts).
    failFastOnServerError(acme.axios);
    // A CA that no longer knows the account answers every order with accountDoesNotExist: the
    // next order registers again (newAccount with the same key; RFC 8555 §7.3) instead of every
    // order failing until the operator restarts.
    onAccountGone(
      acme.axios,
      () => {
        this.#forgetRegistration();
      },
      new URL(this.#options.directoryUrl).origin,
    );
    // Every request to the CA gets a deadline, and one of a cancelled order stops at once. Beneath
    // the deadline, acme-client's nonce requests are answered with the nonces of the CA's earlier
    // answers (acme-client would ask for a fresh one before each signed request). Beneath the
    // pool, a request waits while the memory hold is engaged, then is counted by endpoint and
    // status, and timed, as it reaches the CA.
    acme.axios.defaults.httpsAgent = this.#agent;
    const { httpAdapter, settle } = acmeClientAxios();
    const counted = observeAcmeRequests(httpAdapter, ACME_ENDPOINTS, recordAcmeRequest);
    const observed = this.#options.failFastWhenUnreachable ? failFastWhenUnreachable(counted) : counted;
    const relief = this.#options.relief;
    limitAcmeRequests(
      acme.axios,
      this.#options.requestTimeoutMs,
      reuseReplayNonces(relief ? holdRequests(observed, relief) : observed, settle, new ReplayNoncePool()),
    );
    const accountKey = await this.#loadOrCreateKey();
    const binding = this.#options.externalAccountBinding;
    const hmacKey = binding ? await this.#hmacKey(binding.hmacKey) : undefined;
    const client = new acme.Client({
      directoryUrl: this.#options.directoryUrl,
      accountKey,
      backoffAttempts: this.#options.pollAttempts,
      backoffMin: this.#options.pollMinMs,
      backoffMax: this.#options.pollMaxMs,
      ...(binding && hmacKey ? { externalAccountBinding: { kid: binding.kid, hmacKey } } : {}),
    });
    if (this.#options.failFastWhenUnreachable) {
      // A poll ends at the first request the CA refuses or drops, not after every backoff attempt.
      const poll = client.waitForValidStatus.bind(client);
      client.waitForValidStatus = <T>(item: T): Promise<T> =>
        UNREACHABLE.until((item as { url?: string }).url ?? '', poll(item));
    }
    try {
      await client.createAccount({
        termsOfServiceAgreed: true,
        ...(this.#options.email ? { contact: [`mailto:${this.#options.email}`] } : {}),
      });
    } catch (err) {
      // A problem the CA answered to a newAccount with a binding (RFC 8555 §7.3.4: the CA checks
      // the key id and the MAC): the binding is refused (a wrong HMAC key, an unknown key id).
      if (binding && isCaProblem(err)) {
        throw new AcmeAccountBindingError(
          `the ACME CA ${this.#options.directoryUrl} refused the account's external account binding (key id ${binding.kid}): ${(err as Error).message}`,
          { cause: err },
        );
      }
      throw err;
    }
    this.#log.info(
      { accountUrl: client.getAccountUrl(), directoryUrl: this.#options.directoryUrl },
      'ACME account ready',
    );
    return client;
  }

  /** The HMAC key, given or read from its Secret. Throws AcmeAccountBindingError when it is missing. */
  async #hmacKey(source: string | { secretRef: { name: string; key: string } }): Promise<string> {
    if (typeof source === 'string') return source;
    const { namespace } = this.#options.secret;
    const { name, key } = source.secretRef;
    let secret;
    try {
      secret = await this.#core.readNamespacedSecret({ namespace, name });
    } catch (err) {
      if (!isNotFound(err)) throw err;
      throw new AcmeAccountBindingError(
        `the Secret ${namespace}/${name} with the external account binding's HMAC key does not exist`,
      );
    }
    const data = secret.data?.[key];
    if (!data)
      throw new AcmeAccountBindingError(
        `the Secret ${namespace}/${name} has no key ${key} with the external account binding's HMAC key`,
      );
    return Buffer.from(data, 'base64').toString('utf8').trim();
  }

  async #loadOrCreateKey(): Promise<string> {
    const { namespace, name } = this.#options.secret;
    try {
      const secret = await this.#core.readNamespacedSecret({ namespace, name });
      const data = secret.data?.[ACCOUNT_KEY_FIELD];
      if (!data)
        throw new Error(
          `Secret ${namespace}/${name} has no ${ACCOUNT_KEY_FIELD}: delete it to create a new account`,
        );
      return Buffer.from(data, 'base64').toString('utf8');
    } catch (err) {
      if (!isNotFound(err)) throw err;
    }
    const key = (await acme.crypto.createPrivateEcdsaKey('P-256')).toString('utf8');
    try {
      await this.#core.createNamespacedSecret({
        namespace,
        body: {
          metadata: { name, namespace, labels: { [MANAGED_BY_LABEL]: MANAGED_BY_VALUE } },
          type: 'Opaque',
          data: { [ACCOUNT_KEY_FIELD]: Buffer.from(key).toString('base64') },
        },
      });
      this.#log.info({ namespace, name }, 'created ACME account key');
      return key;
    } catch (err) {
      // Another replica created it first: use theirs.
      if (isConflict(err)) return this.#loadOrCreateKey();
      throw err;
    }
  }
}
