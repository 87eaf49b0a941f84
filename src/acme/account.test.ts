import { describe, expect, it } from 'vitest';
import { AcmeCaUnreachableError, failFastWhenUnreachable, UnreachableWatch } from './account.js';
import { orderResultOf } from './issuer-selection.js';

describe('failFastWhenUnreachable', () => {
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:14000'), { code: 'ECONNREFUSED' });

  it('turns a refused connection into AcmeCaUnreachableError, which carries no request config and counts as a CA failure', async () => {
    const send = failFastWhenUnreachable(() => Promise.reject(refused));
    const err: unknown = await send({ url: 'https://127.0.0.1:14000/dir', method: 'get' }).catch(
      (e: unknown) => e,
    );
    expect(err).toBeInstanceOf(AcmeCaUnreachableError);
    expect((err as Error).message).toBe(
      'the ACME CA could not be reached at https://127.0.0.1:14000/dir: connect ECONNREFUSED 127.0.0.1:14000',
    );
    expect((err as { config?: unknown }).config).toBeUndefined();
    expect(orderResultOf(err)).toEqual({ kind: 'ca-failure' });
  });

  it('passes answers and other errors on as they are', async () => {
    const answer = { status: 200 };
    expect(await failFastWhenUnreachable(() => Promise.resolve(answer))({ url: 'u' })).toBe(answer);
    const withResponse = Object.assign(new Error('reset after the answer'), {
      code: 'ECONNRESET',
      response: { status: 500 },
    });
    const other = new Error('bad');
    await expect(failFastWhenUnreachable(() => Promise.reject(withResponse))({ url: 'u' })).rejects.toBe(
      withResponse,
    );
    await expect(failFastWhenUnreachable(() => Promise.reject(other))({ url: 'u' })).rejects.toBe(other);
  });
});

describe('UnreachableWatch', () => {
  const refused = Object.assign(new Error('connect ECONNREFUSED 127.0.0.1:14000'), { code: 'ECONNREFUSED' });

  it('ends a poll at the first request to its URL the CA refuses, and leaves polls of other URLs alone', async () => {
    const watch = new UnreachableWatch();
    // A poll that would go on retrying for a long time.
    const never = new Promise<string>(() => undefined);
    const polled = watch.until('https://ca.example/chall/1', never);
    const other = watch.until('https://ca.example/chall/2', Promise.resolve('valid'));
    const send = failFastWhenUnreachable(() => Promise.reject(refused), watch);
    await expect(send({ url: 'https://ca.example/chall/1', method: 'post' })).rejects.toBeInstanceOf(
      AcmeCaUnreachableError,
    );
    await expect(polled).rejects.toBeInstanceOf(AcmeCaUnreachableError);
    await expect(other).resolves.toBe('valid');
  });

  it("passes the poll's own outcome on, and forgets a settled poll", async () => {
    const watch = new UnreachableWatch();
    await expect(watch.until('u', Promise.resolve(1))).resolves.toBe(1);
    const bad = new Error('invalid challenge');
    await expect(watch.until('u', Promise.reject(bad))).rejects.toBe(bad);
    // Nothing waits on `u` any more: a report ends nothing.
    watch.report('u', new AcmeCaUnreachableError('u'));
    expect(watch.abandoned()).toBe(0);
  });

  it('counts a poll ended early as abandoned until its loop settles in the background', async () => {
    const watch = new UnreachableWatch();
    let finish: (value: string) => void = () => undefined;
    const loop = new Promise<string>((resolve) => (finish = resolve));
    const polled = watch.until('https://ca.example/order/1', loop);
    expect(watch.abandoned()).toBe(0);
    watch.report('https://ca.example/order/1', new AcmeCaUnreachableError('https://ca.example/order/1'));
    await expect(polled).rejects.toBeInstanceOf(AcmeCaUnreachableError);
    // The stopping process need not wait for it.
    expect(watch.abandoned()).toBe(1);
    finish('valid');
    await loop;
    await Promise.resolve();
    expect(watch.abandoned()).toBe(0);
  });
});
