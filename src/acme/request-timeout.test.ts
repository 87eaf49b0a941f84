import { once } from 'node:events';
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import * as acme from 'acme-client';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { IssuanceTracker } from './issuance-tracker.js';
import {
  abortedRequestError,
  AcmeRequestTimeoutError,
  formatSeconds,
  limitAcmeRequests,
  requestTimeoutMessage,
} from './request-timeout.js';

const finalize = {
  method: 'POST',
  url: 'https://ca.example/acme/finalize/1/2',
  timeoutMs: 30_000,
};

describe('AcmeRequestTimeoutError', () => {
  it('says the CA did not answer, which request and within how long', () => {
    const err = new AcmeRequestTimeoutError(finalize);
    expect(err.code).toBe('ACME_REQUEST_TIMEOUT');
    expect(err.reason).toBe('IssuanceFailed');
    expect(err.message).toBe(
      'the ACME CA did not answer a request within 30 s (POST https://ca.example/acme/finalize/1/2); the request was abandoned',
    );
  });
  it('names the step and the name once the issuer places it, keeping the original as cause', () => {
    const plain = new AcmeRequestTimeoutError(finalize);
    const placed = plain.during('finalize', 'www.shop.example');
    expect(placed).toBeInstanceOf(AcmeRequestTimeoutError);
    expect(placed.message).toBe(
      'the ACME CA did not answer the finalize for www.shop.example within 30 s (POST https://ca.example/acme/finalize/1/2); the request was abandoned',
    );
    expect(placed.context).toEqual({ step: 'finalize', hostname: 'www.shop.example' });
    expect(placed.request).toBe(plain.request);
    expect(placed.cause).toBe(plain);
  });
  it('writes durations in seconds', () => {
    expect(formatSeconds(30_000)).toBe('30 s');
    expect(formatSeconds(250)).toBe('0.25 s');
    expect(requestTimeoutMessage({ ...finalize, timeoutMs: 3_000 })).toContain('within 3 s');
  });
});

describe('abortedRequestError', () => {
  const aborted = (reason?: unknown): AbortSignal => AbortSignal.abort(reason);
  const live = (): AbortSignal => new AbortController().signal;
  const failure = new Error('canceled');

  it('gives the run’s cancel reason first, even when the deadline passed too', () => {
    const reason = new Error('the domain was removed');
    const err = abortedRequestError(
      failure,
      { cancel: aborted(reason), caller: undefined, deadline: aborted() },
      finalize,
    );
    expect(err).toBe(reason);
  });
  it('gives the caller’s abort reason next', () => {
    const reason = new Error('caller gave up');
    const err = abortedRequestError(
      failure,
      { cancel: live(), caller: aborted(reason), deadline: aborted() },
      finalize,
    );
    expect(err).toBe(reason);
  });
  it('makes a request past its deadline an AcmeRequestTimeoutError caused by what axios threw', () => {
    const err = abortedRequestError(
      failure,
      { cancel: live(), caller: undefined, deadline: aborted() },
      finalize,
    );
    expect(err).toBeInstanceOf(AcmeRequestTimeoutError);
    expect((err as AcmeRequestTimeoutError).request).toEqual(finalize);
    expect((err as AcmeRequestTimeoutError).cause).toBe(failure);
  });
  it('leaves every other failure alone', () => {
    const err = abortedRequestError(
      failure,
      { cancel: undefined, caller: undefined, deadline: live() },
      finalize,
    );
    expect(err).toBe(failure);
  });
});

/** A local HTTP server that accepts every request and never answers; counts what it receives. */
async function silentServer(): Promise<{ url: string; received: IncomingMessage[]; server: Server }> {
  const received: IncomingMessage[] = [];
  const server = createServer((req) => {
    received.push(req);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : 0;
  return { url: `http://127.0.0.1:${port}`, received, server };
}

describe('limitAcmeRequests on acme-client’s HTTP client (real axios http adapter)', () => {
  let silent: Awaited<ReturnType<typeof silentServer>>;

  beforeEach(async () => {
    silent = await silentServer();
  });
  afterEach(() => {
    silent.server.closeAllConnections();
    silent.server.close();
  });

  it('refuses a timeout that is not a positive number of milliseconds', () => {
    expect(() => {
      limitAcmeRequests(acme.axios, 0);
    }).toThrow(RangeError);
    expect(() => {
      limitAcmeRequests(acme.axios, 1.5);
    }).toThrow(RangeError);
  });

  it('ends a request the CA never answers with AcmeRequestTimeoutError at the deadline, sent once', async () => {
    limitAcmeRequests(acme.axios, 300);
    const started = Date.now();
    const request = acme.axios.request({ url: `${silent.url}/acme/new-order`, method: 'post', data: '{}' });
    const err = await request.then(
      () => undefined,
      (e: unknown) => e,
    );
    const elapsed = Date.now() - started;
    expect(err).toBeInstanceOf(AcmeRequestTimeoutError);
    expect((err as Error).message).toBe(
      `the ACME CA did not answer a request within 0.3 s (POST ${silent.url}/acme/new-order); the request was abandoned`,
    );
    expect(elapsed).toBeGreaterThanOrEqual(290);
    expect(elapsed).toBeLessThan(3_000);
    // acme-client did not replay it.
    await new Promise((r) => setTimeout(r, 300));
    expect(silent.received).toHaveLength(1);
  });

  it('applies a new deadline when called again', async () => {
    limitAcmeRequests(acme.axios, 5_000);
    limitAcmeRequests(acme.axios, 200);
    const err = await acme.axios.get(`${silent.url}/dir`).catch((e: unknown) => e);
    expect((err as AcmeRequestTimeoutError).request?.timeoutMs).toBe(200);
  });

  it('reaches an acme.Client call as AcmeRequestTimeoutError, not a TypeError', async () => {
    limitAcmeRequests(acme.axios, 200);
    const client = new acme.Client({
      directoryUrl: `${silent.url}/dir`,
      accountKey: await acme.crypto.createPrivateEcdsaKey('P-256'),
    });
    const err = await client.createAccount({ termsOfServiceAgreed: true }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(AcmeRequestTimeoutError);
    expect((err as Error).message).toContain(`(GET ${silent.url}/dir)`);
  });

  it('leaves acme-client’s replay of a failed request alone, on a deadline of its own', async () => {
    const settings = (acme.axios.defaults as unknown as { acmeSettings: { retryDefaultDelay: number } })
      .acmeSettings;
    const delay = settings.retryDefaultDelay;
    settings.retryDefaultDelay = 0.4; // seconds before acme-client replays a request that got no answer
    limitAcmeRequests(acme.axios, 1_000);
    // The first attempt's connection is reset; the replay is answered after the first deadline.
    silent.server.on('request', (_req: IncomingMessage, res: ServerResponse) => {
      if (silent.received.length === 1) {
        res.socket?.destroy();
        return;
      }
      setTimeout(() => {
        res.writeHead(200, { 'content-type': 'application/json' }).end('{"status":"valid"}');
      }, 700);
    });
    const started = Date.now();
    try {
      const response = await acme.axios.post(`${silent.url}/acme/order/1`, '{}');
      expect(response.status).toBe(200);
      expect(response.data).toEqual({ status: 'valid' });
      expect(Date.now() - started).toBeGreaterThan(1_000);
      expect(silent.received).toHaveLength(2);
    } finally {
      settings.retryDefaultDelay = delay;
    }
  });

  it('aborts the request of a cancelled tracker run at once, and sends nothing more for it', async () => {
    limitAcmeRequests(acme.axios, 60_000);
    const tracker = new IssuanceTracker(() => undefined);
    const outcomes: unknown[] = [];
    tracker.start('ns/a', 'a.example', async () => {
      for (const path of ['/acme/chall/1', '/acme/chall/1']) {
        outcomes.push(await acme.axios.post(`${silent.url}${path}`, '{}').catch((e: unknown) => e));
      }
    });
    await new Promise<void>((resolve) => {
      silent.server.once('request', () => {
        resolve();
      });
    });
    const cancelledAt = Date.now();
    tracker.cancel('ns/a');
    while (outcomes.length < 2) await new Promise((r) => setTimeout(r, 10));
    expect(Date.now() - cancelledAt).toBeLessThan(1_000);
    for (const outcome of outcomes) expect((outcome as Error).name).toBe('AbortError');
    expect(silent.received).toHaveLength(1);
  });
});
