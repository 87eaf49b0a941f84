import { execFile } from 'node:child_process';
import { promisify } from 'node:util';
import { describe, expect, it } from 'vitest';

const run = promisify(execFile);
const CLI = new URL('./cli.ts', import.meta.url).pathname;

/** Runs `portico <args>` from source; `preload` is a module evaluated before the command. */
async function portico(
  args: string[],
  preload?: string,
): Promise<{ code: number; stderr: string; ms: number }> {
  const imports = ['--import', 'tsx', ...(preload ? ['--import', `data:text/javascript,${preload}`] : [])];
  const started = Date.now();
  try {
    const { stderr } = await run(process.execPath, [...imports, CLI, ...args]);
    return { code: 0, stderr, ms: Date.now() - started };
  } catch (err) {
    const { code, stderr } = err as { code: number; stderr: string };
    return { code, stderr, ms: Date.now() - started };
  }
}

describe('portico exit', () => {
  it('exits as soon as a command returns and nothing is left open', async () => {
    const { code, stderr, ms } = await portico(['--help']);
    expect(code).toBe(0);
    expect(stderr).toBe('');
    expect(ms).toBeLessThan(5_000);
  });

  it('exits 1 five seconds after the command returned when something still holds the process open', async () => {
    // A timer that never ends stands in for a leaked informer or socket.
    const { code, stderr, ms } = await portico(['--help'], 'setInterval(() => {}, 1000)');
    expect(code).toBe(1);
    expect(stderr).toMatch(/^portico: still running 5 s after stopping \(open: .*Timeout ×1.*\); exiting\n$/);
    expect(ms).toBeGreaterThanOrEqual(5_000);
  }, 20_000);
});

describe('portico --version', () => {
  it('prints the version and the commit (a development build from the sources)', async () => {
    const { stdout } = await run(process.execPath, ['--import', 'tsx', CLI, '--version']);
    expect(stdout).toBe(`portico 0.0.0-dev (commit unknown, Node.js ${process.version})\n`);
  });
});
