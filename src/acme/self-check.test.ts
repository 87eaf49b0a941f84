import 'reflect-metadata';

import { webcrypto } from 'node:crypto';
import { createServer as createHttpServer, type Server as HttpServer } from 'node:http';
import { createServer as createHttpsServer, type Server as HttpsServer } from 'node:https';
import * as x509 from '@peculiar/x509';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { closeServer, listenOn } from '../../test/support/loopback-server.js';
import type { DnsResolver } from '../dns/resolver.js';
import { MAX_REDIRECTS, SelfCheckError, selfCheckHttp01 } from './self-check.js';

x509.cryptoProvider.set(webcrypto);

const HOSTNAME = 'www.shop.example';
const TOKEN = 'tok-1';
const KEY_AUTHORIZATION = 'tok-1.thumbprint';
const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

/** Every name resolves to 127.0.0.1, as the sandbox's DNS answers for a platform hostname. */
const loopback = {
  lookupAddresses: () =>
    Promise.resolve({ a: { kind: 'records', values: ['127.0.0.1'] }, aaaa: { kind: 'nodata' } }),
} as unknown as DnsResolver;

/** A self-signed certificate for `name`: what a data plane serves before it has the issued one. */
async function selfSigned(name: string): Promise<{ cert: string; key: string }> {
  const keys = await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    name: `CN=${name}`,
    keys,
    signingAlgorithm: ALGORITHM,
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + 86_400_000),
  });
  const pkcs8 = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
  return { cert: cert.toString('pem'), key: x509.PemConverter.encode(pkcs8, 'PRIVATE KEY') };
}

let https: HttpsServer;
let httpsPort = 0;
let redirecting: HttpServer;
let redirectingPort = 0;
const seen: string[] = [];

beforeAll(async () => {
  // The HTTPS entrypoint: serves the challenge (its certificate names another host, and is trusted by nobody).
  https = createHttpsServer(await selfSigned('TRAEFIK DEFAULT CERT'), (req, res) => {
    seen.push(`https ${req.headers.host ?? ''} ${req.url ?? ''}`);
    if (req.url === `/.well-known/acme-challenge/${TOKEN}`) res.end(KEY_AUTHORIZATION);
    else res.writeHead(404).end('404 page not found');
  });
  httpsPort = await listenOn(https);
  // The HTTP entrypoint: every request to HTTPS, as Traefik's entrypoint redirect answers (301).
  redirecting = createHttpServer((req, res) => {
    seen.push(`http ${req.headers.host ?? ''} ${req.url ?? ''}`);
    const host = (req.headers.host ?? '').replace(/:\d+$/, '');
    res.writeHead(301, { location: `https://${host}:${httpsPort}${req.url ?? '/'}` }).end();
  });
  redirectingPort = await listenOn(redirecting);
});

afterAll(async () => {
  await closeServer(https);
  await closeServer(redirecting);
});

const args = (token: string): Parameters<typeof selfCheckHttp01>[0] => ({
  hostname: HOSTNAME,
  port: redirectingPort,
  token,
  keyAuthorization: KEY_AUTHORIZATION,
  resolver: loopback,
  attempts: 1,
  intervalMs: 10,
  timeoutMs: 2_000,
});

describe('selfCheckHttp01 and redirects (RFC 8555 §8.3: the CA follows them)', () => {
  it('follows an HTTP → HTTPS redirect to the challenge, as Pebble and Let’s Encrypt do, not verifying that certificate', async () => {
    seen.length = 0;
    await expect(selfCheckHttp01(args(TOKEN))).resolves.toBeUndefined();
    expect(seen).toEqual([
      `http ${HOSTNAME}:${redirectingPort} /.well-known/acme-challenge/${TOKEN}`,
      `https ${HOSTNAME}:${httpsPort} /.well-known/acme-challenge/${TOKEN}`,
    ]);
  });

  it('names the redirects in the error when the target does not serve the challenge', async () => {
    const error = await selfCheckHttp01(args('other')).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(SelfCheckError);
    expect((error as Error).message).toContain(
      `(HTTP 404 after redirects to https://${HOSTNAME}:${httpsPort}/.well-known/acme-challenge/other)`,
    );
  });

  it(`stops after ${MAX_REDIRECTS} redirects, and at a redirect to another scheme than http or https`, async () => {
    const looping = createHttpServer((req, res) => res.writeHead(302, { location: req.url ?? '/' }).end());
    const loopingPort = await listenOn(looping);
    try {
      const error = await selfCheckHttp01({ ...args(TOKEN), port: loopingPort }).catch((e: unknown) => e);
      expect((error as Error).message).toContain(`more than ${MAX_REDIRECTS} redirects`);
    } finally {
      await closeServer(looping);
    }
    const ftp = createHttpServer((_req, res) =>
      res.writeHead(301, { location: 'ftp://files.example/x' }).end(),
    );
    const ftpPort = await listenOn(ftp);
    try {
      const error = await selfCheckHttp01({ ...args(TOKEN), port: ftpPort }).catch((e: unknown) => e);
      expect((error as Error).message).toContain(
        'redirect to ftp://files.example/x, not an http or https URL',
      );
    } finally {
      await closeServer(ftp);
    }
  });
});
