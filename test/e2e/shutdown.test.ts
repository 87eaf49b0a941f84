/**
 * SIGTERM at any moment of start-up ends the operator cleanly and at once: exit code 0, well within
 * the 5 s after which `portico` gives up on what still holds the process open (and exits 1). The
 * moments that matter are the ones where a request is out: the lease being taken, the informers'
 * first lists and watches being opened.
 */
import { readFile } from 'node:fs/promises';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { waitFor } from './support/cluster.js';
import {
  restartStackController,
  runAll,
  startOperator,
  stopOperator,
  stopStackController,
  type ControllerCommand,
  type OperatorProcess,
} from './support/stack-controller.js';

let stack: ControllerCommand | undefined;
let current: OperatorProcess | undefined;

beforeAll(async () => {
  stack = await stopStackController();
  if (!stack) throw new Error('the stack operator was not found');
});

afterAll(async () => {
  await runAll(
    async () => {
      if (current) await stopOperator(current);
    },
    () => restartStackController(stack),
  );
});

function sleep(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms));
}

/** Starts an operator, waits for `moment`, sends SIGTERM; returns how long the exit took, ms. */
async function stopAt(name: string, moment: 'serving' | 'leading', delayMs: number): Promise<number> {
  if (!stack) throw new Error('the stack operator was not found');
  current = await startOperator(stack, name);
  const operator = current;
  if (moment === 'leading') {
    await waitFor(
      `operator ${name} to start its controllers`,
      async () =>
        (await readFile(operator.log, 'utf8')).includes('"controller started"') ? true : undefined,
      30_000,
      10,
    );
  }
  await sleep(delayMs);
  const stoppedAt = Date.now();
  await stopOperator(operator); // throws unless the exit code is 0
  current = undefined;
  return Date.now() - stoppedAt;
}

describe('SIGTERM during start-up', () => {
  it('exits with code 0 at once, whether the lease, the lists or the watches are under way', async () => {
    const exits: Record<string, number> = {};
    exits['serving /healthz'] = await stopAt('shutdown-serving', 'serving', 0);
    for (const delayMs of [0, 20, 60, 150, 400]) {
      exits[`leading +${delayMs} ms`] = await stopAt(`shutdown-leading-${delayMs}`, 'leading', delayMs);
    }
    for (const [moment, ms] of Object.entries(exits)) {
      expect(ms, `exit after SIGTERM at ${moment}`).toBeLessThan(4_000);
    }
  }, 180_000);
});
