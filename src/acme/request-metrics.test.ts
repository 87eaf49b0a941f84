import { describe, expect, it } from 'vitest';
import { AcmeEndpoints, noAnswerStatus, observeAcmeRequests, type AcmeEndpoint } from './request-metrics.js';
import type { AdapterRequestConfig } from './request-timeout.js';

const CA = 'https://ca.test:14000';
const DIRECTORY = {
  newNonce: `${CA}/nonce-plz`,
  newAccount: `${CA}/sign-me-up`,
  newOrder: `${CA}/order-plz`,
  revokeCert: `${CA}/revoke-cert`,
  keyChange: `${CA}/rollover-account-key`,
  renewalInfo: `${CA}/draft-ietf-acme-ari-03/renewalInfo/`,
  meta: { termsOfService: 'data:text/plain,ToS' },
};
const ORDER = {
  status: 'pending',
  identifiers: [{ type: 'dns', value: 'www.shop.test' }],
  authorizations: [`${CA}/authZ/abc`, `${CA}/authZ/def`],
  finalize: `${CA}/finalize-order/xyz`,
};
const AUTHZ = {
  status: 'pending',
  identifier: { type: 'dns', value: 'www.shop.test' },
  challenges: [
    { type: 'http-01', url: `${CA}/chalZ/1`, token: 't1' },
    { type: 'dns-01', url: `${CA}/chalZ/2`, token: 't2' },
  ],
};

describe('AcmeEndpoints', () => {
  it('names every URL of an issuance by the resource it belongs to, never by the URL', () => {
    const map = new AcmeEndpoints();
    expect(map.endpointOf(`${CA}/dir`)).toBe('other');
    expect(map.learn(`${CA}/dir`, 'other', { status: 200, body: DIRECTORY })).toBe('directory');
    expect(map.endpointOf(`${CA}/dir`)).toBe('directory');
    expect(map.endpointOf(DIRECTORY.newNonce)).toBe('newNonce');
    expect(map.endpointOf(DIRECTORY.newAccount)).toBe('newAccount');
    expect(map.endpointOf(DIRECTORY.newOrder)).toBe('newOrder');
    expect(map.endpointOf(DIRECTORY.revokeCert)).toBe('revokeCert');
    expect(map.endpointOf(DIRECTORY.keyChange)).toBe('keyChange');
    expect(map.endpointOf(`${DIRECTORY.renewalInfo}aki.serial`)).toBe('renewalInfo');

    map.learn(DIRECTORY.newAccount, 'newAccount', { status: 201, location: `${CA}/my-account/1`, body: {} });
    expect(map.endpointOf(`${CA}/my-account/1`)).toBe('account');

    map.learn(DIRECTORY.newOrder, 'newOrder', { status: 201, location: `${CA}/my-order/xyz`, body: ORDER });
    expect(map.endpointOf(`${CA}/my-order/xyz`)).toBe('order');
    expect(map.endpointOf(`${CA}/authZ/abc`)).toBe('authz');
    expect(map.endpointOf(`${CA}/authZ/def`)).toBe('authz');
    expect(map.endpointOf(`${CA}/finalize-order/xyz`)).toBe('finalize');

    map.learn(`${CA}/authZ/abc`, 'authz', { status: 200, body: AUTHZ });
    expect(map.endpointOf(`${CA}/chalZ/1`)).toBe('challenge');
    expect(map.endpointOf(`${CA}/chalZ/2`)).toBe('challenge');

    const valid = { ...ORDER, status: 'valid', certificate: `${CA}/certZ/777` };
    map.learn(`${CA}/finalize-order/xyz`, 'finalize', { status: 200, body: valid });
    expect(map.endpointOf(`${CA}/certZ/777`)).toBe('certificate');
    // An unknown URL stays `other`.
    expect(map.endpointOf(`${CA}/authZ/never-named`)).toBe('other');
  });

  it('learns nothing from an error answer', () => {
    const map = new AcmeEndpoints();
    map.learn(DIRECTORY.newOrder, 'newOrder', { status: 400, location: `${CA}/my-order/1`, body: ORDER });
    expect(map.endpointOf(`${CA}/my-order/1`)).toBe('other');
    expect(map.endpointOf(`${CA}/authZ/abc`)).toBe('other');
    expect(map.learn(`${CA}/dir`, 'other', { status: 503, body: DIRECTORY })).toBe('other');
  });

  it('keeps at most `capacity` learned URLs, forgetting the least recently used', () => {
    const map = new AcmeEndpoints(3);
    const body = (n: number): unknown => ({ authorizations: [`${CA}/authZ/${n}`] });
    map.learn('u', 'order', { status: 200, body: body(1) });
    map.learn('u', 'order', { status: 200, body: body(2) });
    map.learn('u', 'order', { status: 200, body: body(3) });
    // Using 1 makes 2 the least recently used.
    expect(map.endpointOf(`${CA}/authZ/1`)).toBe('authz');
    map.learn('u', 'order', { status: 200, body: body(4) });
    expect(map.learnedSize).toBe(3);
    expect(map.endpointOf(`${CA}/authZ/2`)).toBe('other');
    expect(map.endpointOf(`${CA}/authZ/1`)).toBe('authz');
    expect(map.endpointOf(`${CA}/authZ/4`)).toBe('authz');
  });

  it('refuses a capacity that is not a positive integer', () => {
    expect(() => new AcmeEndpoints(0)).toThrow(RangeError);
    expect(() => new AcmeEndpoints(1.5)).toThrow(RangeError);
  });
});

describe('noAnswerStatus', () => {
  it('tells a deadline from a cancellation from a failed connection', () => {
    const timedOut = new AbortController();
    timedOut.abort(new DOMException('deadline', 'TimeoutError'));
    const cancelled = new AbortController();
    cancelled.abort();
    expect(noAnswerStatus(timedOut.signal)).toBe('timeout');
    expect(noAnswerStatus(cancelled.signal)).toBe('cancelled');
    expect(noAnswerStatus(new AbortController().signal)).toBe('error');
    expect(noAnswerStatus(undefined)).toBe('error');
  });
});

describe('observeAcmeRequests', () => {
  type Recorded = [AcmeEndpoint, string, number];

  function setup(answer: (config: AdapterRequestConfig) => Promise<unknown>): {
    adapter: (config: AdapterRequestConfig) => Promise<unknown>;
    recorded: Recorded[];
  } {
    const recorded: Recorded[] = [];
    let clock = 0;
    const adapter = observeAcmeRequests(
      async (config) => {
        clock += 250;
        return answer(config);
      },
      new AcmeEndpoints(),
      (endpoint, status, seconds) => recorded.push([endpoint, status, seconds]),
      () => clock,
    );
    return { adapter, recorded };
  }

  it('records the endpoint, status and duration of answers, successes arriving as errors included', async () => {
    const { adapter, recorded } = setup((config) => {
      if (config.url === `${CA}/dir`)
        return Promise.resolve({ status: 200, headers: {}, data: JSON.stringify(DIRECTORY) });
      // acme-client's validateStatus refuses every answer: axios rejects with the response.
      if (config.url === DIRECTORY.newOrder)
        return Promise.reject(
          Object.assign(new Error('status 201'), {
            response: { status: 201, headers: { location: `${CA}/my-order/1` }, data: JSON.stringify(ORDER) },
          }),
        );
      return Promise.reject(
        Object.assign(new Error('status 429'), { response: { status: 429, headers: {} } }),
      );
    });
    await expect(adapter({ url: `${CA}/dir`, method: 'get' })).resolves.toMatchObject({ status: 200 });
    await expect(adapter({ url: DIRECTORY.newOrder, method: 'post' })).rejects.toThrow('status 201');
    await expect(adapter({ url: `${CA}/my-order/1`, method: 'post' })).rejects.toThrow('status 429');
    await expect(adapter({ url: `${CA}/authZ/abc`, method: 'post' })).rejects.toThrow('status 429');
    expect(recorded).toEqual([
      ['directory', '200', 0.25],
      ['newOrder', '201', 0.25],
      ['order', '429', 0.25],
      ['authz', '429', 0.25],
    ]);
  });

  it('records a request without an answer by how it ended', async () => {
    const { adapter, recorded } = setup((config) => {
      if (config.url === 'https://ca.test/slow') {
        const controller = new AbortController();
        controller.abort(new DOMException('deadline', 'TimeoutError'));
        config.signal = controller.signal;
      }
      return Promise.reject(Object.assign(new Error('ECONNREFUSED'), { code: 'ECONNREFUSED' }));
    });
    await expect(adapter({ url: 'https://ca.test/slow' })).rejects.toThrow('ECONNREFUSED');
    await expect(adapter({ url: 'https://ca.test/down' })).rejects.toThrow('ECONNREFUSED');
    expect(recorded).toEqual([
      ['other', 'timeout', 0.25],
      ['other', 'error', 0.25],
    ]);
  });
});
