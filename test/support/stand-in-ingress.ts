/**
 * A TLS server standing in for the ingress controller in tests of the serving check (the unit tests
 * of src/serving/ and the e2e test), as ingress-nginx behaves: per SNI name the certificate of the Secret it loaded for that host, else its
 * default certificate (self-signed, the subject of ingress-nginx's "Fake Certificate"); per Host
 * header the project's answer when the host has a route, else the default backend's 404.
 */
// @peculiar/x509 v2 needs a Reflect metadata polyfill loaded before it (see its README).
import 'reflect-metadata';

import { webcrypto } from 'node:crypto';
import { createServer, type Server } from 'node:https';
import { createSecureContext, type SecureContext } from 'node:tls';
import * as x509 from '@peculiar/x509';
import { closeServer, listenOn } from './loopback-server.js';

x509.cryptoProvider.set(webcrypto);

/** The subject of ingress-nginx's self-signed default certificate (its --default-ssl-certificate unset). */
export const FAKE_CERTIFICATE_SUBJECT = 'O=Acme Co, CN=Kubernetes Ingress Controller Fake Certificate';

const ALGORITHM = { name: 'ECDSA', namedCurve: 'P-256', hash: 'SHA-256' } as const;

/** A certificate and its key, PEM. */
export interface CertificatePem {
  certPem: string;
  keyPem: string;
}

/** A self-signed certificate for `dnsNames` with `subject` (a distinguished name), valid 90 days. */
export async function selfSignedCertificate(subject: string, dnsNames: string[]): Promise<CertificatePem> {
  const keys = await webcrypto.subtle.generateKey(ALGORITHM, true, ['sign', 'verify']);
  const cert = await x509.X509CertificateGenerator.createSelfSigned({
    name: subject,
    keys,
    signingAlgorithm: ALGORITHM,
    notBefore: new Date(Date.now() - 60_000),
    notAfter: new Date(Date.now() + 90 * 86_400_000),
    extensions: [new x509.SubjectAlternativeNameExtension(dnsNames.map((value) => ({ type: 'dns', value })))],
  });
  const key = await webcrypto.subtle.exportKey('pkcs8', keys.privateKey);
  return { certPem: cert.toString('pem'), keyPem: x509.PemConverter.encode(key, 'PRIVATE KEY') };
}

/** An HTTP answer of a route. */
export interface RouteAnswer {
  status: number;
  body: string;
  headers?: Record<string, string>;
}

export class StandInIngress {
  readonly #certificates = new Map<string, SecureContext>();
  readonly #routes = new Map<string, RouteAnswer>();
  readonly #server: Server;
  /** The SNI names of the TLS handshakes, in order. */
  readonly servernames: string[] = [];
  /** TCP connections accepted. */
  connections = 0;
  /** Handshakes the client broke off (what ingress-nginx would log). */
  readonly handshakeErrors: string[] = [];

  constructor(defaultCertificate: CertificatePem) {
    this.#server = createServer(
      {
        cert: defaultCertificate.certPem,
        key: defaultCertificate.keyPem,
        SNICallback: (name, callback) => {
          this.servernames.push(name);
          callback(null, this.#certificates.get(name.toLowerCase()));
        },
      },
      (req, res) => {
        const route = this.#routes.get(req.headers.host ?? '');
        if (route) {
          res.writeHead(route.status, { 'content-type': 'text/html', ...route.headers });
          res.end(route.body);
        } else {
          res.writeHead(404, { server: 'nginx', 'content-type': 'text/plain' });
          res.end('default backend - 404');
        }
      },
    );
    this.#server.on('connection', () => {
      this.connections++;
    });
    this.#server.on('tlsClientError', (err) => {
      this.handshakeErrors.push(err.message);
    });
  }

  /** The ingress controller loads a Secret for `hostname` (replacing the one it had). */
  load(hostname: string, pem: CertificatePem): void {
    this.#certificates.set(hostname, createSecureContext({ cert: pem.certPem, key: pem.keyPem }));
  }

  /** The ingress controller routes `hostname` (the Host header) to a backend that answers `answer`. */
  route(hostname: string, answer: RouteAnswer): void {
    this.#routes.set(hostname, answer);
  }

  /** Listens on 127.0.0.1 and a free port; resolves to `host:port`. */
  async listen(): Promise<string> {
    return `127.0.0.1:${String(await listenOn(this.#server))}`;
  }

  async close(): Promise<void> {
    await closeServer(this.#server);
  }
}
