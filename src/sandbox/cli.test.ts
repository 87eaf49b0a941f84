import { afterEach, describe, expect, it, vi } from 'vitest';
import { runSandbox } from './cli.js';

describe('portico sandbox up --https-redirect', () => {
  afterEach(() => {
    vi.restoreAllMocks();
  });

  it('is refused (exit 2, before anything starts) without --data-plane traefik, naming the data plane given', async () => {
    const stderr: string[] = [];
    vi.spyOn(process.stderr, 'write').mockImplementation((chunk) => {
      stderr.push(String(chunk));
      return true;
    });
    expect(await runSandbox(['up', '--https-redirect'])).toBe(2);
    expect(stderr.join('')).toContain('--https-redirect needs --data-plane traefik');
    expect(stderr.join('')).toContain('not "contour"');
    stderr.length = 0;
    expect(await runSandbox(['up', '--https-redirect', '--data-plane', 'envoy-gateway'])).toBe(2);
    expect(stderr.join('')).toContain('not "envoy-gateway"');
  });

  it('is listed in the usage', async () => {
    const stdout: string[] = [];
    vi.spyOn(process.stdout, 'write').mockImplementation((chunk) => {
      stdout.push(String(chunk));
      return true;
    });
    expect(await runSandbox(['--help'])).toBe(0);
    expect(stdout.join('')).toContain('[--https-redirect]');
  });
});
