import { describe, expect, it } from 'vitest';
import { untilAborted, validationError } from './issuer.js';

const cancelled = (): Error => new Error('cancelled');

describe('untilAborted', () => {
  it('gives the work’s value or error when the signal does not fire', async () => {
    const signal = new AbortController().signal;
    await expect(untilAborted(Promise.resolve(7), signal, cancelled)).resolves.toBe(7);
    await expect(untilAborted(Promise.reject(new Error('CA said no')), signal, cancelled)).rejects.toThrow(
      'CA said no',
    );
    await expect(untilAborted(Promise.resolve(8), undefined, cancelled)).resolves.toBe(8);
  });

  it('rejects as soon as the signal fires, without waiting for the work (a polling loop asleep)', async () => {
    const controller = new AbortController();
    let finish: (value: number) => void = () => undefined;
    const asleep = new Promise<number>((resolve) => {
      finish = resolve;
    });
    const raced = untilAborted(asleep, controller.signal, cancelled);
    controller.abort();
    await expect(raced).rejects.toThrow('cancelled');
    finish(1); // settles later; its value is dropped
    await expect(raced).rejects.toThrow('cancelled');
  });

  it('rejects at once when the signal fired before, and a late failure of the work is not unhandled', async () => {
    const failing = new Promise<number>((_, reject) => {
      setTimeout(() => {
        reject(new Error('late'));
      }, 10);
    });
    await expect(untilAborted(failing, AbortSignal.abort(), cancelled)).rejects.toThrow('cancelled');
    await new Promise((resolve) => setTimeout(resolve, 30));
  });
});

describe('validationError', () => {
  it('is a failed validation only when the CA reports the authorization invalid', async () => {
    const invalid = await validationError(new Error('Connection refused'), 'www.example.com', () =>
      Promise.resolve(true),
    );
    expect(invalid.validationFailed).toBe(true);
    expect(invalid.message).toBe('the CA could not validate http-01 for www.example.com: Connection refused');

    const refused = await validationError(
      new Error('Account https://ca.example/acct/1 not found.'),
      'www.example.com',
      () => Promise.resolve(false),
    );
    expect(refused.validationFailed).toBe(false);
    expect(refused.message).toBe(
      'the http-01 validation for www.example.com did not complete: Account https://ca.example/acct/1 not found.',
    );
  });
});
