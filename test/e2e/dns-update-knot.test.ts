/**
 * RFC 2136 updates signed with TSIG, judged by a real authoritative server: Knot DNS serving a
 * challenge zone that accepts updates signed with one key and a zone that accepts none. What the
 * server says (its RCODE and TSIG error) is what the client reports; what it serves afterwards is
 * read back over DNS.
 */
import { randomBytes } from 'node:crypto';
import { Resolver } from 'node:dns/promises';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { TsigKey } from '../../src/dns/dynamic-update.js';
import {
  DnsUpdateClient,
  DnsUpdateRefusedError,
  DnsUpdateTransportError,
} from '../../src/dns/update-client.js';
import { KNOT, startKnot } from '../../src/sandbox/knot.js';
import { sandboxPaths } from '../../src/sandbox/paths.js';
import { pickFreePorts } from '../../src/sandbox/ports.js';
import { stopProcess } from '../../src/sandbox/processes.js';
import { sandbox } from './support/cluster.js';

const CHALLENGE_ZONE = 'acme-challenges.portico.test';
const FROZEN_ZONE = 'frozen.portico.test';
const key: TsigKey = { name: 'portico-challenge.', algorithm: 'hmac-sha256', secret: randomBytes(32) };
const paths = sandboxPaths(sandbox.sandboxDir);

let server: { host: string; port: number };
let resolver: Resolver;

function client(overrides: Partial<ConstructorParameters<typeof DnsUpdateClient>[0]> = {}): DnsUpdateClient {
  return new DnsUpdateClient({ server, zone: CHALLENGE_ZONE, key, timeoutMs: 5000, ...overrides });
}

/** The TXT values Knot serves at `name` (none when the name has no TXT RRset). */
async function served(name: string): Promise<string[]> {
  try {
    return (await resolver.resolveTxt(name)).map((strings) => strings.join(''));
  } catch (err: unknown) {
    if ((err as { code?: string }).code === 'ENODATA' || (err as { code?: string }).code === 'ENOTFOUND')
      return [];
    throw err;
  }
}

beforeAll(async () => {
  const ports = await pickFreePorts({ dns: 'tcp+udp' });
  const started = await startKnot(paths, path.join(sandbox.toolsBinDir, 'knotd'), ports.dns, key, [
    { name: CHALLENGE_ZONE, updatable: true },
    { name: FROZEN_ZONE, updatable: false },
  ]);
  server = started.server;
  resolver = new Resolver({ timeout: 2000, tries: 1 });
  resolver.setServers([`${server.host}:${server.port}`]);
}, 60_000);

afterAll(async () => {
  await stopProcess(paths, KNOT);
});

describe('DNS UPDATE with TSIG against Knot DNS', () => {
  it('publishes a challenge TXT record that the zone then serves, and withdraws it', async () => {
    const name = `k7x2q.${CHALLENGE_ZONE}`;
    const value = 'LoqXcYV8q5ONbJQxbmR7SCTNo3tiAXDfowyjxAjEuX0';
    await client().publishTxt(name, value, 60);
    expect(await served(name)).toEqual([value]);

    // A second value at the same name (two orders at once) is added beside the first, and withdrawing
    // one leaves the other (RFC 2136 §2.5.4 deletes one RR, not the RRset).
    const second = 'd8pXl3Eo0y1xPZ7oYb6kqgW2x4wq9mV3sE2JcF5nT1A';
    await client().publishTxt(name, second, 60);
    expect((await served(name)).sort()).toEqual([value, second].sort());
    await client().withdrawTxt(name, value);
    expect(await served(name)).toEqual([second]);
    await client().withdrawTxt(name, second);
    expect(await served(name)).toEqual([]);
  });

  it('withdrawing a record that is not there succeeds and changes nothing', async () => {
    const name = `absent.${CHALLENGE_ZONE}`;
    await client().withdrawTxt(name, 'never-published');
    expect(await served(name)).toEqual([]);
  });

  it('a wrong TSIG secret is refused with NOTAUTH and BADSIG, and nothing is written', async () => {
    const name = `badsig.${CHALLENGE_ZONE}`;
    const wrong = client({ key: { ...key, secret: randomBytes(32) } });
    const error = await wrong.publishTxt(name, 'x', 60).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(DnsUpdateRefusedError);
    expect(error).toMatchObject({ rcode: 'NOTAUTH', tsigError: 'BADSIG' });
    expect(await served(name)).toEqual([]);
  });

  it('a key name the server does not know is refused with NOTAUTH and BADKEY', async () => {
    const unknown = client({ key: { ...key, name: 'someone-else.' } });
    const error = await unknown.publishTxt(`badkey.${CHALLENGE_ZONE}`, 'x', 60).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(DnsUpdateRefusedError);
    expect(error).toMatchObject({ rcode: 'NOTAUTH', tsigError: 'BADKEY' });
  });

  it('a clock outside the fudge is refused with BADTIME', async () => {
    const late = client({ now: () => Date.now() - 3_600_000 });
    const error = await late.publishTxt(`badtime.${CHALLENGE_ZONE}`, 'x', 60).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(DnsUpdateRefusedError);
    expect(error).toMatchObject({ rcode: 'NOTAUTH', tsigError: 'BADTIME' });
  });

  it('a zone that allows no updates refuses a correctly signed one', async () => {
    const frozen = client({ zone: FROZEN_ZONE });
    const name = `x.${FROZEN_ZONE}`;
    const error = await frozen.publishTxt(name, 'x', 60).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(DnsUpdateRefusedError);
    expect((error as DnsUpdateRefusedError).rcode).toMatch(/^(REFUSED|NOTAUTH)$/);
    expect(await served(name)).toEqual([]);
  });

  it('a name outside the zone is refused before anything is sent', async () => {
    await expect(client().publishTxt('_acme-challenge.example.com', 'x', 60)).rejects.toThrow(
      /is not inside the zone acme-challenges\.portico\.test/,
    );
  });

  it('a server that does not listen is a transport error naming the address', async () => {
    const closed = await pickFreePorts({ dns: 'tcp' });
    const nowhere = client({ server: { host: '127.0.0.1', port: closed.dns }, timeoutMs: 2000 });
    const error = await nowhere.publishTxt(`x.${CHALLENGE_ZONE}`, 'x', 60).catch((err: unknown) => err);
    expect(error).toBeInstanceOf(DnsUpdateTransportError);
    expect((error as Error).message).toContain(`127.0.0.1:${closed.dns}`);
  });
});
