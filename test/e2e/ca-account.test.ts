/**
 * A CA that no longer knows the operator's account (RFC 8555 §6.7 accountDoesNotExist), played by
 * restarting the stack's Pebble, which keeps its accounts in memory: the order that meets the
 * problem fails, the operator drops its registration, and the next order registers the same key
 * again (newAccount, §7.3) and succeeds, without restarting the operator.
 */
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { PEBBLE } from '../../src/sandbox/pebble.js';
import { sandboxPaths } from '../../src/sandbox/paths.js';
import { startComponent, stopComponent } from './support/components.js';
import {
  createCustomDomain,
  createProject,
  dns,
  requestVerify,
  sandbox,
  unique,
  waitForCondition,
} from './support/cluster.js';

/** Lines of the stack operator's log that contain `text`. */
async function operatorLogLines(text: string): Promise<string[]> {
  const log = await readFile(sandboxPaths(sandbox.sandboxDir).log('portico-controller'), 'utf8');
  return log.split('\n').filter((line) => line.includes(text));
}

describe('a CA that lost the account', () => {
  it('registers the account again once the CA answers accountDoesNotExist, and issues', async () => {
    const ns = unique('acct');
    await createProject(ns);
    const first = `a.${ns}.example`;
    await dns.setCname(first, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'a', { hostname: first, service: { name: 'web' } });
    await waitForCondition(ns, 'a', 'Ready', 'True');

    // Pebble restarted: a fresh CA with no account of before.
    await startComponent(await stopComponent(PEBBLE));
    const gone = 'the ACME CA no longer knows the account';
    const goneBefore = (await operatorLogLines(gone)).length;

    const second = `b.${ns}.example`;
    await dns.setCname(second, sandbox.platformCnameTarget);
    await createCustomDomain(ns, 'b', { hostname: second, service: { name: 'web' } });
    // The first order names the old account: it fails, and the operator forgets the registration.
    const failed = await waitForCondition(ns, 'b', 'CertificateReady', 'False', 'IssuanceFailed', 90_000);
    const message = failed.status?.conditions?.find((c) => c.type === 'CertificateReady')?.message ?? '';
    expect(message.toLowerCase()).toContain('account');
    // Re-verify (spec §3) starts a fresh attempt at once instead of after the 60 s backoff; with the
    // old registration it would fail the same way, every time, until the operator restarted.
    await requestVerify(ns, 'b');
    await waitForCondition(ns, 'b', 'Ready', 'True', undefined, 90_000);
    expect((await operatorLogLines(gone)).length).toBeGreaterThan(goneBefore);
    // The first domain's certificate, from the CA's former root, still serves.
    await waitForCondition(ns, 'a', 'Ready', 'True');
  });
});
