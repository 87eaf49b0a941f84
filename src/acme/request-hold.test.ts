import { describe, expect, it } from 'vitest';
import { holdRequests } from './request-hold.js';

describe('holdRequests', () => {
  it('sends at once while there is no hold, and only after the relief while there is', async () => {
    const sent: string[] = [];
    let held: Promise<undefined> | undefined = undefined;
    const adapter = holdRequests(
      (config) => {
        sent.push(config.url ?? '');
        return Promise.resolve({ status: 200 });
      },
      () => held,
    );
    await expect(adapter({ url: 'https://ca.test/first' })).resolves.toEqual({ status: 200 });
    expect(sent).toEqual(['https://ca.test/first']);

    const hold = Promise.withResolvers<undefined>();
    held = hold.promise;
    const second = adapter({ url: 'https://ca.test/second' });
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(sent).toEqual(['https://ca.test/first']);
    hold.resolve(undefined);
    await expect(second).resolves.toEqual({ status: 200 });
    expect(sent).toEqual(['https://ca.test/first', 'https://ca.test/second']);
  });
});
