// @peculiar/x509 v2 needs a Reflect metadata polyfill loaded before it (see its README).
import 'reflect-metadata';

import { webcrypto } from 'node:crypto';
import { createServer as createHttpServer } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { createServer as createTcpServer, type Server as TcpServer, type Socket } from 'node:net';
import * as x509 from '@peculiar/x509';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { inspectCertificate } from '../certificates/inspect.js';
import { closeServer, listenOn } from '../../test/support/loopback-server.js';
import { FAKE_CERTIFICATE_SUBJECT, StandInIngress } from '../../test/support/stand-in-ingress.js';
import { checkServing, parseDataPlaneAddress, ServingAddressError } from './serving-check.js';

x509.cryptoProvider.set(webcrypto);

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;
const HOSTNAME = 'www.shop.example';

interface Pem {
  certPem: string;
  keyPem: string;
  /** As Portico stores it (inspectCertificate, status.certificate.serialNumber). */
  serialNumber: string;
}

async function keyPem(key: webcrypto.CryptoKey): Promise<string> {
  return x509.PemConverter.encode(await webcrypto.subtle.exportKey('pkcs8', key), 'PRIVATE KEY');
}

function validity(): { notBefore: Date; notAfter: Date } {
  return { notBefore: new Date(Date.now() - 60_000), notAfter: new Date(Date.now() + 90 * 86_400_000) };
}

async function selfSigned(subject: string, dnsNames: string[]): Promise<Pem> {
  const keys = await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    name: subject,
    keys,
    signingAlgorithm: ALGORITHM,
    ...validity(),
    extensions: [new x509.SubjectAlternativeNameExtension(dnsNames.map((value) => ({ type: 'dns', value })))],
  });
  const certPem = cert.toString('pem');
  return {
    certPem,
    keyPem: await keyPem(keys.privateKey),
    serialNumber: inspectCertificate(certPem).serialNumber,
  };
}

interface Authority {
  cert: x509.X509Certificate;
  keys: webcrypto.CryptoKeyPair;
}

/** A certificate for `hostname` signed by `ca`, as an ACME CA issues one (a fresh random serial each). */
async function issue(ca: Authority, hostname: string): Promise<Pem> {
  const keys = await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.create({
    subject: `CN=${hostname}`,
    issuer: ca.cert.subject,
    publicKey: keys.publicKey,
    signingKey: ca.keys.privateKey,
    signingAlgorithm: ALGORITHM,
    ...validity(),
    extensions: [new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: hostname }])],
  });
  const certPem = cert.toString('pem');
  return {
    certPem,
    keyPem: await keyPem(keys.privateKey),
    serialNumber: inspectCertificate(certPem).serialNumber,
  };
}

const PROJECT_PAGE = {
  status: 200,
  body: '<!doctype html><title>Shop</title>',
  headers: { 'x-served-by': 'shop' },
};

let ca: Authority;
let fakeDefault: Pem;
let issued: Pem;
let ingress: StandInIngress;
let address: string;

beforeAll(async () => {
  const keys = await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    name: 'CN=Pebble Intermediate CA 1a2b3c',
    keys,
    signingAlgorithm: ALGORITHM,
    ...validity(),
    extensions: [new x509.BasicConstraintsExtension(true, 0, true)],
  });
  ca = { cert, keys };
  [fakeDefault, issued] = await Promise.all([
    selfSigned(FAKE_CERTIFICATE_SUBJECT, ['ingress.local']),
    issue(ca, HOSTNAME),
  ]);
});

async function startIngress(): Promise<void> {
  ingress = new StandInIngress(fakeDefault);
  address = await ingress.listen();
}

describe('checkServing against a TLS server standing in for the ingress controller', () => {
  afterEach(async () => {
    await ingress.close();
  });

  it('serving: the issued certificate for SNI = the hostname, and the project answers', async () => {
    await startIngress();
    ingress.load(HOSTNAME, issued);
    ingress.route(HOSTNAME, PROJECT_PAGE);

    const verdict = await checkServing({ address, hostname: HOSTNAME, serialNumber: issued.serialNumber });

    expect(verdict.result).toBe('serving');
    expect(verdict.reason).toBe('Live');
    if (verdict.result !== 'serving') return;
    expect(verdict.certificate.serialNumber).toBe(issued.serialNumber.replace(/^0+/, ''));
    expect(verdict.certificate.coversHostname).toBe(true);
    expect(verdict.response.statusCode).toBe(200);
    expect(verdict.compared).toBe(true);
    expect(verdict.message).toBe(
      `${HOSTNAME}: served certificate ${verdict.certificate.serialNumber} (valid until ${verdict.certificate.notAfter}) at ${address}: GET https://${HOSTNAME}/ answered HTTP 200.`,
    );
    // One connection for the certificate, one kept alive for both requests.
    expect(ingress.connections).toBe(2);
    expect(ingress.handshakeErrors).toEqual([]);
  });

  it('names a served certificate with an empty subject, as Pebble issues them, without failing', async () => {
    await startIngress();
    const keys = await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']);
    const cert = await x509.X509CertificateGenerator.create({
      subject: '',
      issuer: ca.cert.subject,
      publicKey: keys.publicKey,
      signingKey: ca.keys.privateKey,
      signingAlgorithm: ALGORITHM,
      ...validity(),
      extensions: [new x509.SubjectAlternativeNameExtension([{ type: 'dns', value: HOSTNAME }])],
    });
    ingress.load(HOSTNAME, {
      certPem: cert.toString('pem'),
      keyPem: await keyPem(keys.privateKey),
    });

    const verdict = await checkServing({ address, hostname: HOSTNAME, serialNumber: issued.serialNumber });

    expect(verdict.result).toBe('wrong-certificate');
    if (verdict.result !== 'wrong-certificate') return;
    expect(verdict.certificate.subject).toBe('');
    expect(verdict.message).toContain(
      'another certificate (subject (empty), issuer CN=Pebble Intermediate CA 1a2b3c',
    );
  });

  it("wrong-certificate: the ingress's default certificate, named by its subject", async () => {
    await startIngress();
    // The Ingress is routed but the controller has not loaded the Secret: it serves its own certificate.
    ingress.route(HOSTNAME, PROJECT_PAGE);

    const verdict = await checkServing({ address, hostname: HOSTNAME, serialNumber: issued.serialNumber });

    expect(verdict.result).toBe('wrong-certificate');
    expect(verdict.reason).toBe('CertificateNotServed');
    if (verdict.result !== 'wrong-certificate') return;
    expect(verdict.kind).toBe('default');
    expect(verdict.certificate.subject).toBe(FAKE_CERTIFICATE_SUBJECT);
    expect(verdict.certificate.coversHostname).toBe(false);
    expect(verdict.message).toContain('its default certificate');
    expect(verdict.message).toContain(`subject ${FAKE_CERTIFICATE_SUBJECT}, self-signed`);
    expect(verdict.message).toContain(`not valid for ${HOSTNAME}`);
    expect(verdict.message).toContain(`serial ${issued.serialNumber.replace(/^0+/, '')}`);
  });

  it('after a renewal: serving only once the new serial is expected and served', async () => {
    await startIngress();
    ingress.load(HOSTNAME, issued);
    ingress.route(HOSTNAME, PROJECT_PAGE);
    const renewed = await issue(ca, HOSTNAME);
    expect(renewed.serialNumber).not.toBe(issued.serialNumber);

    // Renewed into the Secret, not yet loaded by the ingress controller.
    const stale = await checkServing({
      address,
      hostname: HOSTNAME,
      serialNumber: renewed.serialNumber,
      previousSerialNumber: issued.serialNumber,
    });
    expect(stale.result).toBe('wrong-certificate');
    if (stale.result === 'wrong-certificate') {
      expect(stale.kind).toBe('previous');
      expect(stale.message).toContain('has not loaded the renewed Secret');
    }

    ingress.load(HOSTNAME, renewed);
    const fresh = await checkServing({ address, hostname: HOSTNAME, serialNumber: renewed.serialNumber });
    expect(fresh.result).toBe('serving');

    // The old serial no longer passes once the new certificate is served.
    const old = await checkServing({ address, hostname: HOSTNAME, serialNumber: issued.serialNumber });
    expect(old.result).toBe('wrong-certificate');
    if (old.result === 'wrong-certificate') expect(old.kind).toBe('other');
  });

  it("not-reaching-project: the issued certificate, but the default backend's 404 for the host", async () => {
    await startIngress();
    ingress.load(HOSTNAME, issued); // the Secret is loaded, but no route for the host

    const verdict = await checkServing({ address, hostname: HOSTNAME, serialNumber: issued.serialNumber });

    expect(verdict.result).toBe('not-reaching-project');
    expect(verdict.reason).toBe('ProjectNotReached');
    if (verdict.result !== 'not-reaching-project') return;
    expect(verdict.response.statusCode).toBe(404);
    expect(verdict.message).toContain(
      'HTTP 404 (server: nginx, content-type: text/plain, body "default backend - 404")',
    );
    expect(verdict.message).toContain("the same as the data plane's default backend");
  });

  it("serving: a project whose own page is a 404 is told apart from the default backend's", async () => {
    await startIngress();
    ingress.load(HOSTNAME, issued);
    ingress.route(HOSTNAME, { status: 404, body: '<h1>Shop: page not found</h1>' });

    const verdict = await checkServing({ address, hostname: HOSTNAME, serialNumber: issued.serialNumber });

    expect(verdict.result).toBe('serving');
  });

  it('not-reaching-project: the header the platform says its projects send is missing', async () => {
    await startIngress();
    ingress.load(HOSTNAME, issued);
    ingress.route(HOSTNAME, { status: 200, body: 'a page of someone else' });
    const projectHeader = { name: 'X-Served-By', value: 'shop' };

    const verdict = await checkServing({
      address,
      hostname: HOSTNAME,
      serialNumber: issued.serialNumber,
      projectHeader,
    });
    expect(verdict.result).toBe('not-reaching-project');
    expect(verdict.message).toContain('it lacks the header X-Served-By');

    ingress.route(HOSTNAME, PROJECT_PAGE);
    const good = await checkServing({
      address,
      hostname: HOSTNAME,
      serialNumber: issued.serialNumber,
      projectHeader,
    });
    expect(good.result).toBe('serving');
  });
});

describe('checkServing when the data plane cannot be reached', () => {
  const servers: TcpServer[] = [];
  const sockets: Socket[] = [];
  afterAll(async () => {
    for (const socket of sockets) socket.destroy();
    await Promise.all(servers.map((s) => new Promise((resolve) => s.close(resolve))));
  });

  it('unreachable: nothing listening (ECONNREFUSED)', async () => {
    const probe = createTcpServer();
    const port = await listenOn(probe);
    await new Promise((resolve) => probe.close(resolve));

    const verdict = await checkServing({
      address: `127.0.0.1:${port}`,
      hostname: HOSTNAME,
      serialNumber: issued.serialNumber,
    });

    expect(verdict.result).toBe('unreachable');
    expect(verdict.reason).toBe('DataPlaneUnreachable');
    if (verdict.result !== 'unreachable') return;
    expect(verdict.step).toBe('tls');
    expect(verdict.error.code).toBe('ECONNREFUSED');
    expect(verdict.message).toContain('ECONNREFUSED (nothing listens there)');
  });

  it('unreachable: a server that accepts the connection and never answers (ETIMEDOUT after timeoutMs)', async () => {
    const silent = createTcpServer((socket) => sockets.push(socket));
    servers.push(silent);
    const silentPort = await listenOn(silent);
    const started = Date.now();

    const verdict = await checkServing({
      address: `127.0.0.1:${String(silentPort)}`,
      hostname: HOSTNAME,
      serialNumber: issued.serialNumber,
      timeoutMs: 200,
    });

    expect(verdict.result).toBe('unreachable');
    if (verdict.result === 'unreachable') expect(verdict.error.code).toBe('ETIMEDOUT');
    expect(Date.now() - started).toBeLessThan(2_000);
  });
  it('unreachable: a data plane that closes the handshake for an SNI name it has no certificate for', async () => {
    // As Envoy does without a filter chain for the name (Node's TLS server closes without an alert).
    const refusing = createHttpsServer({
      SNICallback: (_name, callback) => {
        callback(new Error('no certificate for this name'));
      },
    });
    const port = await listenOn(refusing);

    const verdict = await checkServing({
      address: `127.0.0.1:${port}`,
      hostname: HOSTNAME,
      serialNumber: issued.serialNumber,
    });
    await closeServer(refusing);

    expect(verdict.result).toBe('unreachable');
    if (verdict.result !== 'unreachable') return;
    expect(verdict.error.code).toBe('ECONNRESET');
    expect(verdict.message).toContain('closed during the TLS handshake');
  });

  it('unreachable: the address is a plain HTTP port', async () => {
    const plain = createHttpServer((_req, res) => res.end('plain'));
    const port = await listenOn(plain);

    const verdict = await checkServing({
      address: `127.0.0.1:${port}`,
      hostname: HOSTNAME,
      serialNumber: issued.serialNumber,
    });
    await closeServer(plain);

    expect(verdict.result).toBe('unreachable');
    if (verdict.result !== 'unreachable') return;
    expect(verdict.error.code).toBe('ERR_SSL_WRONG_VERSION_NUMBER');
    expect(verdict.message).toContain('does not speak TLS');
  });
});

describe('parseDataPlaneAddress', () => {
  it('reads host:port, [ipv6]:port and a host alone (port 443)', () => {
    expect(parseDataPlaneAddress('ingress-nginx-controller.ingress-nginx.svc:443')).toEqual({
      host: 'ingress-nginx-controller.ingress-nginx.svc',
      port: 443,
    });
    expect(parseDataPlaneAddress('[fd00::10]:8443')).toEqual({ host: 'fd00::10', port: 8443 });
    expect(parseDataPlaneAddress('10.0.0.5')).toEqual({ host: '10.0.0.5', port: 443 });
  });

  it('refuses a URL, a path or a bad port with ServingAddressError', () => {
    for (const bad of ['', 'https://ingress:443', 'ingress:443/x', 'ingress:99999', 'ingress:http']) {
      expect(() => parseDataPlaneAddress(bad), bad).toThrow(ServingAddressError);
    }
  });
});
