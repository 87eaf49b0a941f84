import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { lazyChild } from './logger.js';

function capture(): { lines: Record<string, unknown>[]; stream: Writable } {
  const lines: Record<string, unknown>[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, callback) {
      lines.push(JSON.parse(chunk.toString()) as Record<string, unknown>);
      callback();
    },
  });
  return { lines, stream };
}

describe('lazyChild', () => {
  it('makes no child until used, then logs with the bindings and the redaction as the child does', () => {
    const { lines, stream } = capture();
    const parent = pino({ level: 'info', redact: { paths: ['*.data'], censor: '[redacted]' } }, stream);
    let children = 0;
    const child = parent.child.bind(parent);
    parent.child = ((...args: Parameters<typeof parent.child>) => {
      children += 1;
      return child(...args);
    }) as typeof parent.child;

    const log = lazyChild(parent, { namespace: 'team-a', name: 'www' });
    expect(children).toBe(0);
    log.info({ secret: { data: 'key material' } }, 'stored');
    log.warn('again');
    expect(children).toBe(1);
    expect(lines).toMatchObject([
      { namespace: 'team-a', name: 'www', secret: { data: '[redacted]' }, msg: 'stored', level: 30 },
      { namespace: 'team-a', name: 'www', msg: 'again', level: 40 },
    ]);
    log.level = 'error';
    log.warn('not written');
    expect(lines).toHaveLength(2);
    expect(parent.level).toBe('info');
  });
});
