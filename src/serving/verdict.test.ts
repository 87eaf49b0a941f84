import { describe, expect, it } from 'vitest';
import {
  judgeServing,
  normalizeSerial,
  servedMessage,
  SERVING_REASONS,
  type ObservedResponse,
  type ServedCertificate,
  type ServingExpectation,
} from './verdict.js';

const expected: ServingExpectation = {
  address: 'ingress-nginx-controller.ingress-nginx.svc:443',
  hostname: 'www.shop.example',
  serialNumber: '00:ab:12',
};

const issued: ServedCertificate = {
  serialNumber: 'AB12',
  subject: 'CN=www.shop.example',
  issuer: 'CN=Pebble Intermediate CA 1a2b3c',
  notAfter: '2027-02-23T00:00:00.000Z',
  dnsNames: ['www.shop.example'],
  fingerprint256: 'AA:BB',
  coversHostname: true,
};

const other: ServedCertificate = {
  ...issued,
  serialNumber: 'CD34',
  fingerprint256: 'CC:DD',
  issuer: 'CN=Other CA',
};

function response(statusCode: number, bodyDigest: string, bodyPreview = ''): ObservedResponse {
  return { statusCode, headers: {}, bodyDigest, bodyPreview };
}

describe('normalizeSerial', () => {
  it('reads the hex forms node:crypto, openssl and status fields write as one', () => {
    expect(normalizeSerial('00:ab:12')).toBe('AB12');
    expect(normalizeSerial('0AB12')).toBe('AB12');
    expect(normalizeSerial(' ab12 ')).toBe('AB12');
    expect(normalizeSerial('00')).toBe('');
  });
});

describe('judgeServing on observations', () => {
  it('names the data plane (--data-plane-name) when it cannot be reached or serves another certificate', () => {
    const traefik = { ...expected, address: '127.0.0.1:8443', dataPlaneName: 'Traefik' };
    const down = judgeServing(traefik, {
      step: 'tls',
      error: { code: 'ECONNREFUSED', message: 'connect ECONNREFUSED 127.0.0.1:8443' },
    });
    expect(down.message).toBe(
      'The serving check got no TLS connection to Traefik at 127.0.0.1:8443 for www.shop.example: ECONNREFUSED (nothing listens there). ' +
        'Check the address (--serving-check-address) and that Traefik runs; the check is retried.',
    );
    const wrong = judgeServing(traefik, {
      step: 'certificate',
      certificate: other,
      defaultCertificate: other,
    });
    expect(wrong.message).toMatch(
      /^For www\.shop\.example, Traefik at 127\.0\.0\.1:8443 serves its default certificate/,
    );
    const unnamed = judgeServing(expected, { step: 'tls', error: { code: 'ETIMEDOUT', message: 'timeout' } });
    expect(unnamed.message).toContain('no TLS connection to the data plane at ingress-nginx-controller');
    expect(unnamed.message).toContain('and that the ingress controller runs;');
  });

  it('counts the answer as the route’s when the default backend answers 421 or not at all, and says so', () => {
    for (const defaultResponse of [response(421, 'x'), { code: 'ECONNRESET', message: 'socket hang up' }]) {
      const verdict = judgeServing(expected, {
        step: 'done',
        certificate: issued,
        response: response(404, 'x'),
        defaultResponse,
      });
      expect(verdict.result).toBe('serving');
      if (verdict.result === 'serving') expect(verdict.compared).toBe(false);
      expect(verdict.message).toContain('not compared with the default backend');
    }
  });

  it('words a serving verdict as what was served where, and the answer, a redirect’s Location included', () => {
    const redirect: ObservedResponse = {
      ...response(301, 'r'),
      headers: { location: 'https://shop.example/a?b=c' },
    };
    const verdict = judgeServing(
      { ...expected, path: '/a?b=c' },
      { step: 'done', certificate: issued, response: redirect, defaultResponse: response(404, 'd') },
    );
    expect(verdict.result).toBe('serving');
    if (verdict.result !== 'serving') return;
    expect(verdict.served).toBe(
      'www.shop.example: served certificate AB12 (valid until 2027-02-23T00:00:00.000Z) at ingress-nginx-controller.ingress-nginx.svc:443',
    );
    expect(verdict.answer).toBe(
      'GET https://www.shop.example/a?b=c answered HTTP 301, Location https://shop.example/a?b=c.',
    );
    expect(verdict.message).toBe(`${verdict.served}: ${verdict.answer}`);
    expect(servedMessage(verdict, 'checked 2026-11-29T03:00:00.000Z')).toBe(
      `${verdict.served}, checked 2026-11-29T03:00:00.000Z: ${verdict.answer}`,
    );
    expect(verdict.message).not.toContain('serves over HTTPS');
  });

  it('tells the default backend by status and body together', () => {
    const judge = (mine: ObservedResponse, theirs: ObservedResponse): string =>
      judgeServing(expected, { step: 'done', certificate: issued, response: mine, defaultResponse: theirs })
        .result;
    expect(judge(response(404, 'd'), response(404, 'd'))).toBe('not-reaching-project');
    expect(judge(response(404, 'p'), response(404, 'd'))).toBe('serving');
    expect(judge(response(503, 'd'), response(404, 'd'))).toBe('serving');
  });

  it("judges the answer by the domain's spec: a redirect domain's must be its redirect, a former redirect's no longer that redirect", () => {
    const answered = (statusCode: number, location?: string): ObservedResponse => ({
      ...response(statusCode, `r${statusCode}`),
      headers: location === undefined ? {} : { location },
    });
    const judge = (e: ServingExpectation, mine: ObservedResponse) =>
      judgeServing(
        { ...e, dataPlaneName: 'Traefik' },
        { step: 'done', certificate: issued, response: mine, defaultResponse: response(404, 'd') },
      );
    const redirecting = { ...expected, redirectOrigin: 'https://shop.example' };
    expect(judge(redirecting, answered(301, 'https://shop.example/')).result).toBe('serving');
    expect(judge(redirecting, answered(308, 'https://shop.example:443/x?y=1')).result).toBe('serving');
    // The project's page, or a redirect elsewhere: the data plane still has the earlier route.
    const page = judge(redirecting, answered(200));
    expect(page.result).toBe('not-reaching-project');
    expect(page.reason).toBe('ProjectNotReached');
    expect(page.message).toContain(
      "answers HTTP 200 (an empty body), not the redirect to https://shop.example the domain's spec asks for: Traefik does not answer with the domain's current route yet",
    );
    expect(judge(redirecting, answered(301, 'https://old.example/')).result).toBe('not-reaching-project');
    expect(judge(redirecting, answered(200, 'https://shop.example/')).result).toBe('not-reaching-project');
    expect(judge(redirecting, answered(301, 'not a url')).result).toBe('not-reaching-project');

    // A serving domain that redirected to old.example before: that redirect is the earlier route.
    const formerRedirect = { ...expected, previousRedirectOrigin: 'https://old.example' };
    const stale = judge(formerRedirect, answered(301, 'https://old.example/'));
    expect(stale.result).toBe('not-reaching-project');
    expect(stale.message).toContain(
      'the redirect to https://old.example the domain had before its spec changed to serve the project',
    );
    expect(judge(formerRedirect, answered(200)).result).toBe('serving');
    // The project's own redirects elsewhere are its answers.
    expect(judge(formerRedirect, answered(302, 'https://login.example/')).result).toBe('serving');
    expect(judge(expected, answered(301, 'https://old.example/')).result).toBe('serving');
  });

  it('names another certificate as such when the default certificate cannot be had', () => {
    const verdict = judgeServing(expected, {
      step: 'certificate',
      certificate: other,
      defaultCertificate: { code: 'ECONNRESET', message: 'closed' },
    });
    expect(verdict.result).toBe('wrong-certificate');
    if (verdict.result !== 'wrong-certificate') return;
    expect(verdict.kind).toBe('other');
    expect(verdict.message).toContain(
      'another certificate (subject CN=www.shop.example, issuer CN=Other CA, serial CD34',
    );
    expect(verdict.message).toContain('not the certificate Portico issued (serial AB12)');
  });

  it('refuses a certificate whose serial changed between the TLS and the HTTP connection', () => {
    const verdict = judgeServing(expected, {
      step: 'done',
      certificate: other,
      response: response(200, 'p'),
      defaultResponse: response(404, 'd'),
    });
    expect(verdict.result).toBe('wrong-certificate');
  });

  it('has a catalogue entry (severity, one line) for every reason it gives', () => {
    const reasons = new Set<string>([
      'Live',
      'CertificateNotServed',
      'ProjectNotReached',
      'DataPlaneUnreachable',
    ]);
    expect(new Set(Object.keys(SERVING_REASONS))).toEqual(reasons);
    expect(SERVING_REASONS.Live.severity).toBe('Normal');
    for (const entry of Object.values(SERVING_REASONS)) expect(entry.doc).not.toContain('\n');
  });
});
