import { describe, expect, it } from 'vitest';
import { flagUsage, readFlags, type FlagSpec } from './command-flags.js';

const specs = {
  'redis-url': { type: 'string', env: ['PORTICO_REDIS_URL', 'REDIS_URL'], help: 'where Redis is' },
  workers: { type: 'string', env: 'PORTICO_WORKERS', default: '2', help: 'parallel reconciles' },
  cluster: { type: 'boolean', env: 'PORTICO_CLUSTER', help: 'Redis Cluster' },
  help: { type: 'boolean', env: '', help: 'show this help' },
} as const satisfies Record<string, FlagSpec>;

const missing = (message: string): Error => new RangeError(message);

function read(args: string[], env: NodeJS.ProcessEnv = {}) {
  const flags = readFlags(specs, args, env, missing);
  if ('help' in flags) throw new Error('unexpected --help');
  return flags;
}

describe('readFlags', () => {
  it('takes the flag, else the first non-empty variable, else the default', () => {
    expect(read(['--redis-url', 'redis://a:1'], { PORTICO_REDIS_URL: 'redis://b:2' }).get('redis-url')).toBe(
      'redis://a:1',
    );
    expect(read([], { PORTICO_REDIS_URL: '', REDIS_URL: 'redis://c:3' }).get('redis-url')).toBe(
      'redis://c:3',
    );
    expect(read([]).get('workers')).toBe('2');
    expect(read([], { PORTICO_WORKERS: '8' }).get('workers')).toBe('8');
  });

  it("reads a boolean flag given on the command line as 'true'", () => {
    expect(read(['--cluster']).get('cluster')).toBe('true');
    expect(read([], { PORTICO_CLUSTER: 'yes' }).get('cluster')).toBe('yes');
    expect(read([]).get('cluster')).toBeUndefined();
  });

  it('names the flag, its variables and its help when a required one is missing', () => {
    expect(() => read([]).required('redis-url')).toThrow(
      new RangeError('--redis-url (or $PORTICO_REDIS_URL, $REDIS_URL) is required: where Redis is'),
    );
  });

  it('answers --help, and refuses an unknown flag', () => {
    expect(readFlags(specs, ['--help'], {}, missing)).toEqual({ help: true });
    expect(() => readFlags(specs, ['--nope'], {}, missing)).toThrow(/--nope/);
  });
});

describe('flagUsage', () => {
  it('prints each flag with its default and variables', () => {
    const text = flagUsage('portico demo', specs);
    expect(text.split('\n')[0]).toBe('usage: portico demo [flags]');
    expect(text).toContain('--workers                  parallel reconciles (default 2) [$PORTICO_WORKERS]');
    expect(text).toContain('--redis-url                where Redis is [$PORTICO_REDIS_URL, $REDIS_URL]');
    expect(text).toContain('--help                     show this help\n');
  });
});
