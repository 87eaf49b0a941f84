/**
 * Builds the operator's ACME issuers from their settings (issuer-config.ts): per issuer, its account
 * (its own account-key Secret and external account binding), directory, issuer and order queue
 * (its own budget and fair line), joined in an `AcmeIssuerSet` with failover (issuer-selection.ts).
 */
import { readFileSync } from 'node:fs';
import * as tls from 'node:tls';
import type { CoreV1Api } from '@kubernetes/client-node';
import type { Logger } from 'pino';
import { AcmeAccount } from './account.js';
import type { ChallengeStore } from './challenge-store.js';
import { AcmeDirectory } from './directory.js';
import type { AcmeIssuerSettings } from './issuer-config.js';
import { AcmeIssuer, type IssuerOptions } from './issuer.js';
import { AcmeIssuerSet } from './issuer-set.js';
import type { FailoverPolicy } from './issuer-selection.js';
import type { OrderBudget } from './order-budget.js';
import { OrderQueue } from './order-queue.js';
import type { DnsResolver } from '../dns/resolver.js';

/** One built issuer. */
export interface BuiltIssuer {
  readonly settings: AcmeIssuerSettings;
  readonly account: AcmeAccount;
  readonly directory: AcmeDirectory;
  readonly queue: OrderQueue;
}

export interface IssuerDeps {
  readonly core: CoreV1Api;
  /** The operator's namespace: the account and HMAC key Secrets live there. */
  readonly namespace: string;
  readonly store: ChallengeStore;
  readonly resolver: DnsResolver;
  readonly requestTimeoutMs: number;
  readonly relief: () => Promise<void> | undefined;
  readonly http01Port: number;
  readonly selfCheck: IssuerOptions['selfCheck'];
  /**
   * Writes DNS-01 TXT records in the platform's challenge zone (RFC 2136); every issuer uses it.
   * Undefined when no challenge zone is configured: orders answer HTTP-01 only.
   */
  readonly dns01?: IssuerOptions['dns01'];
  /** Queues a domain whose order turn came. */
  readonly requeue: (key: string) => void;
  readonly log: Logger;
}

/**
 * The certificates the CAs' HTTPS is checked against: undefined (Node's default set, with
 * NODE_EXTRA_CA_CERTS) when no issuer names a `caBundleFile`, else that set plus every issuer's
 * bundle. acme-client sends every CA's requests through one HTTP client, so the union is trusted
 * for all of them.
 *
 * @throws Error naming the file when a bundle cannot be read
 */
export function trustedCertificates(issuers: readonly AcmeIssuerSettings[]): string[] | undefined {
  const files = issuers.flatMap((i) => (i.caBundleFile ? [i.caBundleFile] : []));
  if (files.length === 0) return undefined;
  const bundles = files.map((file) => {
    try {
      return readFileSync(file, 'utf8');
    } catch (err) {
      throw new Error(`cannot read the ACME CA bundle ${file}: ${(err as Error).message}`, { cause: err });
    }
  });
  return [...tls.getCACertificates('default'), ...bundles];
}

/** The issuers, and the set that orders from them. */
export function buildIssuers(
  settings: readonly AcmeIssuerSettings[],
  policy: FailoverPolicy,
  deps: IssuerDeps,
): { set: AcmeIssuerSet; issuers: BuiltIssuer[] } {
  const trusted = trustedCertificates(settings);
  const issuers: BuiltIssuer[] = [];
  const members = settings.map((s) => {
    const log = deps.log.child({ acmeIssuer: s.name });
    const binding = s.externalAccountBinding;
    const account = new AcmeAccount(
      deps.core,
      {
        directoryUrl: s.directoryUrl,
        ...(s.email ? { email: s.email } : {}),
        ...(binding
          ? {
              externalAccountBinding: {
                kid: binding.keyId,
                hmacKey:
                  'value' in binding.hmacKey
                    ? binding.hmacKey.value
                    : { secretRef: binding.hmacKey.secretRef },
              },
            }
          : {}),
        ...(trusted ? { trustedCertificates: trusted } : {}),
        // With another issuer to go to, a CA that is down fails the order at once.
        failFastWhenUnreachable: settings.length > 1,
        secret: { namespace: deps.namespace, name: s.accountSecretName },
        pollMinMs: 250,
        pollMaxMs: 5_000,
        pollAttempts: 20,
        requestTimeoutMs: deps.requestTimeoutMs,
        relief: deps.relief,
      },
      log,
    );
    const directory = new AcmeDirectory(s.directoryUrl);
    const issuer = new AcmeIssuer(account, directory, deps.store, deps.resolver, {
      ...(s.profile ? { profile: s.profile } : {}),
      ...(s.caaIdentities.length > 0 ? { caaIdentities: s.caaIdentities } : {}),
      http01Port: deps.http01Port,
      selfCheck: deps.selfCheck,
      ...(deps.dns01 ? { dns01: deps.dns01 } : {}),
    });
    const queue = new OrderQueue(
      {
        ca: s.name,
        limits: {
          accountOrders: { limit: s.orderBudget.orders, windowMs: s.orderBudget.windowMs },
          maxInFlight: s.orderBudget.maxInFlight,
        },
      },
      deps.requeue,
    );
    issuers.push({ settings: s, account, directory, queue });
    return { name: s.name, issuer, queue };
  });
  return { set: new AcmeIssuerSet(members, policy), issuers };
}

/**
 * The budget of the issuer that issued a certificate named `acmeIssuer` (the first issuer for a
 * certificate that names none, stored before issuers had names), for seeding budgets after a
 * restart. Undefined for an issuer this operator does not have: that order went to another CA's
 * account and counts against none of these.
 */
export function budgetOf(
  issuers: readonly BuiltIssuer[],
  acmeIssuer: string | undefined,
): OrderBudget | undefined {
  if (acmeIssuer === undefined) return issuers[0]?.queue.budget;
  return issuers.find((i) => i.settings.name === acmeIssuer)?.queue.budget;
}

/**
 * The directory of the issuer named `acmeIssuer` (status.certificate.acmeIssuer): the CA that issued
 * a certificate is the one that answers its renewalInfo (RFC 9773 §4). The first issuer's for a
 * certificate that names none (stored before issuers had names) or an issuer no longer configured.
 */
export function directoryOf(
  issuers: readonly BuiltIssuer[],
  acmeIssuer: string | undefined,
): AcmeDirectory | undefined {
  const named = acmeIssuer === undefined ? undefined : issuers.find((i) => i.settings.name === acmeIssuer);
  return (named ?? issuers[0])?.directory;
}
