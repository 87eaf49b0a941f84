/**
 * DNS-01 through CNAME delegation, judged by real parts: the customer's `_acme-challenge.<hostname>`
 * CNAME (in pebble-challtestsrv, the stack's DNS) points into the platform's challenge zone, served
 * by Knot DNS; Portico's issuer writes the TXT record there with a TSIG-signed RFC 2136 update; a
 * Pebble whose validation asks a BIND 9 resolver (which follows the CNAME from one server to the
 * other, as resolvers on the Internet do) validates it and issues. The hostname's own name points
 * nowhere near the platform: the certificate comes before the move.
 *
 * The issuer runs in the test process with the real account (its key in a Secret of the stack's API
 * server), the real ConfigMap challenge store and the stack's DNS resolver; the operator process is
 * not involved.
 */
import { randomBytes, X509Certificate } from 'node:crypto';
import { readFile } from 'node:fs/promises';
import { getCACertificates, setDefaultCACertificates } from 'node:tls';
import { KubeConfig, KubernetesObjectApi } from '@kubernetes/client-node';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { AcmeAccount } from '../../src/acme/account.js';
import { ConfigMapChallengeStore } from '../../src/acme/challenge-store.js';
import { AcmeDirectory } from '../../src/acme/directory.js';
import { AcmeIssuanceError, AcmeIssuer } from '../../src/acme/issuer.js';
import { acmeChallengeName, delegationTarget } from '../../src/dns/challenge-delegation.js';
import type { TsigKey } from '../../src/dns/dynamic-update.js';
import { DnsResolver } from '../../src/dns/resolver.js';
import { DnsUpdateClient } from '../../src/dns/update-client.js';
import { OPERATOR_NAMESPACE } from '../../src/sandbox/stack.js';
import { dns, kube, sandbox, unique } from './support/cluster.js';
import { startChallengeZone, stopChallengeZone } from './support/challenge-zone.js';
import { startSecondPebble, stopSecondPebble, type SecondPebble } from './support/second-pebble.js';

const CHALLENGE_ZONE = 'acme-challenges.portico.test';
const PEBBLE_NAME = 'pebble-dns01';
const NAMESPACE = 'dns01-customer';
const key: TsigKey = { name: 'portico-challenge.', algorithm: 'hmac-sha256', secret: randomBytes(32) };
const log = pino({ level: process.env.PORTICO_E2E_LOG_LEVEL ?? 'silent' });

let pebble: SecondPebble;
let zoneServer: { host: string; port: number };
let account: AcmeAccount;
let store: ConfigMapChallengeStore;
let resolver: DnsResolver;
let defaultCaCertificates: string[];

function issuer(publisher: DnsUpdateClient): AcmeIssuer {
  return new AcmeIssuer(account, new AcmeDirectory(pebble.directoryUrl), store, resolver, {
    http01Port: pebble.httpPort,
    selfCheck: { attempts: 1, intervalMs: 100, timeoutMs: 1000 },
    dns01: publisher,
  });
}

function publisher(secret: Buffer = key.secret): DnsUpdateClient {
  return new DnsUpdateClient({
    server: zoneServer,
    zone: CHALLENGE_ZONE,
    key: { ...key, secret },
    timeoutMs: 5000,
  });
}

/** The TXT values Knot serves at `name`. */
async function servedByZone(name: string): Promise<string[]> {
  const { Resolver } = await import('node:dns/promises');
  const direct = new Resolver({ timeout: 2000, tries: 1 });
  direct.setServers([`${zoneServer.host}:${zoneServer.port}`]);
  try {
    return (await direct.resolveTxt(name)).map((strings) => strings.join(''));
  } catch (err: unknown) {
    if (['ENODATA', 'ENOTFOUND'].includes((err as { code?: string }).code ?? '')) return [];
    throw err;
  }
}

beforeAll(async () => {
  const zone = await startChallengeZone(CHALLENGE_ZONE, key);
  zoneServer = zone.zoneServer;
  pebble = await startSecondPebble(
    PEBBLE_NAME,
    {},
    { dnsServer: `${zone.resolver.host}:${zone.resolver.port}` },
  );

  // acme-client's HTTPS agent trusts the default CAs: add the sandbox's Pebble listener CA to them
  // for this file, as NODE_EXTRA_CA_CERTS does for the operator process.
  defaultCaCertificates = getCACertificates('default');
  setDefaultCACertificates([...defaultCaCertificates, await readFile(sandbox.acmeCaBundle, 'utf8')]);

  const kc = new KubeConfig();
  kc.loadFromFile(sandbox.kubeconfig);
  account = new AcmeAccount(
    kube().core,
    {
      directoryUrl: pebble.directoryUrl,
      secret: { namespace: OPERATOR_NAMESPACE, name: unique('dns01-account') },
      pollMinMs: 200,
      pollMaxMs: 1000,
      pollAttempts: 30,
      requestTimeoutMs: 10_000,
    },
    log,
  );
  store = new ConfigMapChallengeStore(kc, KubernetesObjectApi.makeApiClient(kc), OPERATOR_NAMESPACE, log);
  resolver = new DnsResolver({ servers: [sandbox.dnsServer], timeoutMs: 2000, tries: 2 });
}, 120_000);

afterAll(async () => {
  account.close();
  setDefaultCACertificates(defaultCaCertificates);
  await stopSecondPebble(PEBBLE_NAME);
  await stopChallengeZone();
});

describe('DNS-01 through the platform challenge zone', () => {
  it('issues for a hostname whose _acme-challenge is delegated while its own name points elsewhere, and removes the TXT record after', async () => {
    const hostname = `${unique('moving')}.customer.test`;
    // The live site still runs elsewhere: its name has another provider's address, no CNAME to the platform.
    await dns.addA(hostname, ['198.51.100.7']);
    const target = delegationTarget(CHALLENGE_ZONE, NAMESPACE, hostname);
    await dns.setCname(acmeChallengeName(hostname), target);

    const issued = await issuer(publisher()).issue(hostname, log, { dns01RecordName: target });

    const leaf = new X509Certificate(issued.certificatePem);
    expect(leaf.subjectAltName).toBe(`DNS:${hostname}`);
    expect(await servedByZone(target)).toEqual([]);
  });

  it('the CA finds the challenge invalid when the delegation points at another name', async () => {
    const hostname = `${unique('elsewhere')}.customer.test`;
    const target = delegationTarget(CHALLENGE_ZONE, NAMESPACE, hostname);
    // Another namespace's label: the TXT record is written at `target`, the CA looks at the other name.
    await dns.setCname(
      acmeChallengeName(hostname),
      delegationTarget(CHALLENGE_ZONE, 'someone-else', hostname),
    );

    const error = await issuer(publisher())
      .issue(hostname, log, { dns01RecordName: target })
      .catch((err: unknown) => err);

    expect(error).toBeInstanceOf(AcmeIssuanceError);
    expect(error).toMatchObject({ validationFailed: true });
    expect((error as Error).message).toMatch(
      new RegExp(`the CA could not validate dns-01 for ${hostname.replace(/\./g, '\\.')}`),
    );
    expect(await servedByZone(target)).toEqual([]);
  });

  it('a zone that refuses the update (wrong TSIG secret) ends the order with the server RCODE, not a validation', async () => {
    const hostname = `${unique('badkey')}.customer.test`;
    const target = delegationTarget(CHALLENGE_ZONE, NAMESPACE, hostname);
    await dns.setCname(acmeChallengeName(hostname), target);

    const error = await issuer(publisher(randomBytes(32)))
      .issue(hostname, log, { dns01RecordName: target })
      .catch((err: unknown) => err);

    expect(error).toBeInstanceOf(AcmeIssuanceError);
    expect(error).toMatchObject({ validationFailed: false });
    expect((error as Error).message).toBe(
      `could not write the dns-01 record of ${hostname} at ${target}: DNS UPDATE of zone ${CHALLENGE_ZONE} refused: NOTAUTH, TSIG BADSIG`,
    );
  });
});
