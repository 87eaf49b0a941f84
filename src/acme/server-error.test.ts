import * as acme from 'acme-client';
import { describe, expect, it } from 'vitest';
import { AcmeServerError, failFastOnServerError, serverErrorOf } from './server-error.js';

const SERVER_INTERNAL = 'urn:ietf:params:acme:error:serverInternal';

describe('serverErrorOf', () => {
  it('makes a 5xx answer to a POST an AcmeServerError that names the answer', () => {
    const err = serverErrorOf('post', 500, { type: SERVER_INTERNAL, detail: 'could not find\n an order' });
    expect(err).toBeInstanceOf(AcmeServerError);
    expect(err?.reason).toBe('IssuanceFailed');
    expect(err?.message).toBe(
      'the ACME CA failed a request (HTTP 500, urn:ietf:params:acme:error:serverInternal: could not find an order)',
    );
    expect(err?.during('new order', 'www.example.com').message).toBe(
      'the ACME CA failed the new order for www.example.com (HTTP 500, urn:ietf:params:acme:error:serverInternal: could not find an order)',
    );
    expect(serverErrorOf('POST', 503, 'Service Unavailable')?.message).toBe(
      'the ACME CA failed a request (HTTP 503)',
    );
  });

  it('leaves other answers and requests without a signed body alone', () => {
    expect(serverErrorOf('post', 400, { type: 'urn:ietf:params:acme:error:badNonce' })).toBeUndefined();
    expect(serverErrorOf('post', 429, {})).toBeUndefined();
    expect(serverErrorOf('post', 201, {})).toBeUndefined();
    expect(serverErrorOf('get', 500, {})).toBeUndefined();
    expect(serverErrorOf('head', 503, {})).toBeUndefined();
    expect(serverErrorOf(undefined, 500, {})).toBeUndefined();
  });
});

describe('failFastOnServerError on acme-client’s HTTP client', () => {
  /** An adapter that answers like axios's http adapter does under acme-client (every status rejects). */
  function answering(status: number, body: string) {
    const calls: unknown[] = [];
    const adapter = (config: unknown): Promise<never> => {
      calls.push(config);
      const headers = { 'content-type': 'application/problem+json' };
      const response = { status, statusText: '', headers, data: body, config, request: {} };
      return Promise.reject(
        Object.assign(new Error(`Request failed with status code ${status}`), { config, response }),
      );
    };
    return { calls, adapter };
  }
  const settings = (acme.axios.defaults as unknown as { acmeSettings: { retryDefaultDelay: number } })
    .acmeSettings;

  it('ends a 5xx to a POST at once instead of replaying its spent nonce; a GET keeps acme-client’s retries', async () => {
    failFastOnServerError(acme.axios);
    failFastOnServerError(acme.axios); // idempotent
    const delay = settings.retryDefaultDelay;
    settings.retryDefaultDelay = 0.01; // seconds before acme-client replays a request
    try {
      const body = JSON.stringify({ type: SERVER_INTERNAL, detail: 'the CA failed' });
      const post = answering(500, body);
      const request = acme.axios.request({
        url: 'https://ca.invalid/order-plz',
        method: 'post',
        adapter: post.adapter,
      });
      const err = (await request.catch((e: unknown) => e)) as AcmeServerError;
      expect(err).toBeInstanceOf(AcmeServerError);
      expect(err.answer).toEqual({ status: 500, problemType: SERVER_INTERNAL, detail: 'the CA failed' });
      expect(post.calls).toHaveLength(1);

      const get = answering(503, body);
      const read = acme.axios.request({ url: 'https://ca.invalid/dir', method: 'get', adapter: get.adapter });
      const readErr = await read.catch((e: unknown) => e);
      expect(readErr).not.toBeInstanceOf(AcmeServerError);
      expect(get.calls).toHaveLength(6); // the request and acme-client's 5 retries
    } finally {
      settings.retryDefaultDelay = delay;
    }
  });
});
