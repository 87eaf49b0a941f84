/**
 * A CA that no longer knows the operator's account (RFC 8555 §6.7 accountDoesNotExist), played by
 * restarting the stack's Pebble, which keeps its accounts in memory: the operator drops its
 * registration, registers the same key again (newAccount, §7.3) and places the order that met the
 * problem again, in the same attempt: no failed attempt, no back-off, no operator restart.
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
  it('registers the account again once the CA answers accountDoesNotExist, and issues in the same attempt', async () => {
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
    // The first new order names the old account: the CA answers accountDoesNotExist, the operator
    // registers again and places it again. Before, that attempt failed and the next came after the
    // 60 s back-off (with the benchmark's CA restarts, 195 orders of a 10,000-domain run failed that way).
    const ready = await waitForCondition(ns, 'b', 'Ready', 'True', undefined, 60_000);
    expect(ready.status?.issuance).toBeUndefined();
    expect((await operatorLogLines(gone)).length).toBeGreaterThan(goneBefore);
    expect((await operatorLogLines('placing the order again once registered')).length).toBeGreaterThan(0);
    // The first domain's certificate, from the CA's former root, still serves.
    await waitForCondition(ns, 'a', 'Ready', 'True');
  });
});
