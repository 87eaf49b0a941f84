import 'reflect-metadata';
import { webcrypto } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import * as x509 from '@peculiar/x509';
import pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ariCertificateId } from '../../acme/ari.js';
import { AcmeDirectory } from '../../acme/directory.js';
import type { CertificateStatus } from '../../api/customdomain.js';
import { closeServer, listenOn } from '../../../test/support/loopback-server.js';
import { ARI_FAILURE_RETRY_MS, RenewalPlanner } from './renewal.js';

x509.cryptoProvider.set(webcrypto);

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' };
const log = pino({ level: 'silent' });

/** A self-signed leaf with an Authority Key Identifier (what ARI names a certificate by), as PEM. */
async function leafPem(): Promise<{ pem: string; serialNumber: string }> {
  const keys = await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    name: 'CN=www.shop.example',
    notBefore: new Date('2026-11-01T00:00:00Z'),
    notAfter: new Date('2027-01-30T00:00:00Z'),
    keys,
    signingAlgorithm: ALGORITHM,
    extensions: [await x509.AuthorityKeyIdentifierExtension.create(keys.publicKey)],
  });
  return { pem: cert.toString('pem'), serialNumber: cert.serialNumber };
}

// A CA stand-in on loopback: its directory offers renewalInfo, and renewalInfo answers 404 (the CA
// does not know the certificate: Pebble after a restart) until `windowAnswers` is set.
let server: Server;
let base: string;
const asked: string[] = [];
let windowAnswers = false;

beforeAll(async () => {
  server = createServer((req, res) => {
    if (req.url === '/dir' || req.url === '/dir-b') {
      const ari = req.url === '/dir' ? `${base}/ari` : `${base}/ari-b`;
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ newOrder: `${base}/order`, renewalInfo: ari }));
      return;
    }
    asked.push(req.url ?? '');
    if (!windowAnswers) {
      res.statusCode = 404;
      res.end();
      return;
    }
    res.setHeader('content-type', 'application/json');
    res.setHeader('retry-after', '21600');
    res.end(
      JSON.stringify({ suggestedWindow: { start: '2026-12-20T00:00:00Z', end: '2026-12-22T00:00:00Z' } }),
    );
  });
  base = `http://127.0.0.1:${String(await listenOn(server))}`;
});

afterAll(() => closeServer(server));

describe('RenewalPlanner', () => {
  it('does not ask the CA again for a certificate whose renewalInfo failed, until the retry time or a verify request', async () => {
    const planner = new RenewalPlanner(new AcmeDirectory(`${base}/dir`), () => 0);
    const { pem, serialNumber } = await leafPem();
    let resolved = 0;
    const certId = (): Promise<string> => {
      resolved += 1;
      return Promise.resolve(ariCertificateId(pem));
    };
    const serving: CertificateStatus = {
      secretName: 'portico-www',
      serialNumber,
      notBefore: '2026-11-01T00:00:00Z',
      notAfter: '2027-01-30T00:00:00Z',
      dnsNames: ['www.shop.example'],
      renewalTime: '2026-12-31T00:00:00Z',
    } as CertificateStatus;
    const t0 = new Date('2026-11-25T10:00:00Z');
    const later = (ms: number): Date => new Date(t0.getTime() + ms);

    // The 2/3-lifetime time stands while the CA cannot answer; one request, not one per reconcile.
    expect(await planner.plan(serving, certId, undefined, t0, false, log)).toEqual(serving);
    for (let i = 1; i <= 5; i++)
      await planner.plan(serving, certId, undefined, later(i * 60_000), false, log);
    expect(asked).toHaveLength(1);

    // A verify request asks at once.
    await planner.plan(serving, certId, undefined, later(10 * 60_000), true, log);
    expect(asked).toHaveLength(2);

    // Past the retry time it asks again, and an answer gives the window and its next check.
    windowAnswers = true;
    const planned = await planner.plan(
      serving,
      certId,
      undefined,
      later(10 * 60_000 + ARI_FAILURE_RETRY_MS),
      false,
      log,
    );
    expect(asked).toHaveLength(3);
    expect(planned.renewalTime).toBe('2026-12-20T00:00:00.000Z');
    expect(planned.ari).toMatchObject({
      windowStart: '2026-12-20T00:00:00.000Z',
      windowEnd: '2026-12-22T00:00:00.000Z',
    });
    // The identifier is computed once per request to the CA, never by a reconcile that asks nothing.
    expect(resolved).toBe(3);
    const after = later(11 * 60_000 + ARI_FAILURE_RETRY_MS);
    expect(await planner.plan(serving, certId, planned, after, false, log)).toEqual(planned);
    expect(asked).toHaveLength(3);
    expect(resolved).toBe(3);
  });

  it('asks the CA that issued the certificate (status.certificate.acmeIssuer), the first one when it names none', async () => {
    windowAnswers = true;
    const directories = { a: new AcmeDirectory(`${base}/dir`), b: new AcmeDirectory(`${base}/dir-b`) };
    const planner = new RenewalPlanner(
      (name) => (name === 'b' ? directories.b : directories.a),
      () => 0,
    );
    const { pem, serialNumber } = await leafPem();
    const certId = (): Promise<string> => Promise.resolve(ariCertificateId(pem));
    const serving = {
      secretName: 'portico-www',
      serialNumber,
      notBefore: '2026-11-01T00:00:00Z',
      notAfter: '2027-01-30T00:00:00Z',
      dnsNames: ['www.shop.example'],
      renewalTime: '2026-12-31T00:00:00Z',
    } as CertificateStatus;
    const now = new Date('2026-11-25T10:00:00Z');
    asked.length = 0;
    await planner.plan({ ...serving, acmeIssuer: 'b' }, certId, undefined, now, true, log);
    await planner.plan(serving, certId, undefined, now, true, log);
    const id = ariCertificateId(pem);
    expect(asked).toEqual([`/ari-b/${id}`, `/ari/${id}`]);
  });
});
