/**
 * The operator is SIGKILLed at each step of an issuance (docs/reliability.md, "Custom domains:
 * faults of the parts Portico depends on"): after the new order, after the CA accepted the
 * challenge response, after finalize, and before the Secret write. A new operator then takes over.
 * Each time: at most one extra order at the CA (the killed process's order is lost with it, the
 * next places one), the domain Ready, exactly one TLS Secret, whose key is its certificate's (no
 * key lost, none mismatched).
 *
 * The steps are held by the fault proxy in front of the real Pebble, with Pebble's answer held on its
 * way back (Pebble has acted on the request; the operator has not heard of it), and for the last step
 * the kube-apiserver frozen (SIGSTOP) once the certificate is downloaded, so that the operator is
 * killed with the certificate and its key in memory only.
 */
import { readFile } from 'node:fs/promises';
import { describe, expect, it } from 'vitest';
import { KUBE_APISERVER } from '../../src/sandbox/kube-apiserver.js';
import {
  createCustomDomain,
  createProject,
  dns,
  sandbox,
  waitFor,
  waitForCondition,
} from './support/cluster.js';
import type { AcmeRequestKind } from './support/acme-fault-proxy.js';
import { freezeComponent, thawComponent } from './support/components.js';
import { tlsSecrets, uniqueHostname, useProxiedOperator, within } from './support/proxied-operator.js';

const target = sandbox.platformCnameTarget;

/**
 * A short Lease, so that the next operator takes over a SIGKILLed one's Lease within seconds (a
 * killed leader never releases it): valid 6 s, renewed every 1 s.
 */
const LEADER_ELECTION = {
  '--leader-election-lease-duration-seconds': '6',
  '--leader-election-renew-deadline-seconds': '4',
  '--leader-election-retry-period-seconds': '1',
};

const faults = useProxiedOperator('operator-crash', LEADER_ELECTION);

interface Step {
  /** What the CA has done when the operator is killed. */
  readonly name: string;
  /** The request whose answer (from Pebble) is held while the operator is killed. */
  readonly heldAnswer: AcmeRequestKind;
  /** Freeze the kube-apiserver once the certificate is downloaded, and kill then. */
  readonly beforeSecretWrite?: boolean;
}

const STEPS: readonly Step[] = [
  { name: 'after new-order (the order exists at the CA)', heldAnswer: 'new-order' },
  { name: 'after the CA accepted the challenge response', heldAnswer: 'challenge-response' },
  { name: 'after finalize (the CA issued the certificate)', heldAnswer: 'finalize' },
  { name: 'before the Secret write', heldAnswer: 'certificate', beforeSecretWrite: true },
];

/** Whether the operator's log has `msg` for `hostname`. */
async function logged(log: string, hostname: string, msg: string): Promise<boolean> {
  const text = await readFile(log, 'utf8').catch(() => '');
  return text.split('\n').some((l) => l.includes(`"msg":"${msg}"`) && l.includes(`"hostname":"${hostname}"`));
}

describe('operator SIGKILL at each step of an issuance', () => {
  it.each(STEPS)(
    '$name: at most one extra order, no key lost, Ready in the end',
    async (step) => {
      const { ns, hostname } = uniqueHostname('crash');
      await createProject(ns);
      await dns.setCname(hostname, target);
      const held = faults
        .proxy()
        .hold((x) => x.kind === step.heldAnswer && x.hostnames.includes(hostname), 'answer');
      await createCustomDomain(ns, 'www', { hostname, service: { name: 'web' } });
      const exchange = await within(
        `Pebble's answer to the ${step.heldAnswer} request`,
        held.arrived,
        120_000,
      );

      const killed = faults.operator();
      if (step.beforeSecretWrite === true) {
        await freezeComponent(KUBE_APISERVER);
        try {
          held.release();
          // The operator holds the certificate and its key; its next request (the live read before
          // the Secret write) waits on the frozen API server.
          await waitFor(
            'the operator to have the certificate',
            async () =>
              (await logged(killed.log, hostname, 'ACME order valid; certificate downloaded'))
                ? true
                : undefined,
            30_000,
            50,
          );
          await faults.kill();
        } finally {
          await thawComponent(KUBE_APISERVER);
        }
      } else {
        await faults.kill();
        // The killed operator never heard the answer.
        expect(exchange.status).toBeUndefined();
        held.release();
      }
      expect(await logged(killed.log, hostname, 'certificate stored')).toBe(false);

      // The next operator gets the domain Ready.
      await faults.replace();
      const ready = await waitForCondition(ns, 'www', 'Ready', 'True', undefined, 120_000);
      const orders = faults.exchangesFor(hostname, 'new-order');
      expect(orders.length).toBeGreaterThanOrEqual(1);
      expect(orders.length).toBeLessThanOrEqual(2);
      expect(orders.every((x) => x.status === 201)).toBe(true);
      expect(await tlsSecrets(ns)).toEqual([
        {
          name: 'www-tls',
          serialNumber: ready.status?.certificate?.serialNumber,
          dnsNames: [hostname],
          keyMatches: true,
        },
      ]);
    },
    180_000,
  );
});
