import { describe, expect, it } from 'vitest';
import { nameInUse, notRouted } from './routing.js';

describe('nameInUse', () => {
  it('is undefined when nothing at our names belongs to someone else', () => {
    expect(nameInUse([], [])).toBeUndefined();
  });

  it("names objects another CustomDomain owns and objects that are not Portico's, in that order", () => {
    const state = nameInUse(['Ingress www (CustomDomain shop/other)'], ['HTTPProxy www']);
    expect(state).toMatchObject({ kind: 'not-routed', reason: 'NameInUse' });
    const message = state?.kind === 'not-routed' ? state.message : '';
    expect(message.indexOf('Ingress www (CustomDomain shop/other)')).toBeLessThan(
      message.indexOf('HTTPProxy www'),
    );
    expect(message).toContain('never overwrites');
  });
});

describe('notRouted', () => {
  it('waits for DNS verification', () => {
    expect(notRouted()).toMatchObject({ kind: 'not-routed', reason: 'AwaitingDNSVerification' });
  });
});
