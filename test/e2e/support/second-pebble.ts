/**
 * A second Pebble beside the e2e stack's own, for tests that need a CA set up differently (several
 * profiles, say) without touching the stack's. Same binary, same DNS server (the stack's
 * pebble-challtestsrv) and same listener certificate as the stack's Pebble, so an operator started
 * from the stack's command line (NODE_EXTRA_CA_CERTS) trusts it already; its own free ports, config
 * file and root CA. Its pid file sits in the stack's pids/, so `sandbox down` stops it as well.
 */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { sandboxPaths } from '../../../src/sandbox/paths.js';
import { PEBBLE, startPebble, type PebbleProfile } from '../../../src/sandbox/pebble.js';
import { pickFreePorts } from '../../../src/sandbox/ports.js';
import { readPid, stopProcess } from '../../../src/sandbox/processes.js';
import { sandbox } from './cluster.js';

const paths = sandboxPaths(sandbox.sandboxDir);

export interface SecondPebble {
  /** Its component name: `<stack>/logs/<name>.log`, `<stack>/pids/<name>.pid`, `<stack>/<name>.json`. */
  readonly name: string;
  readonly directoryUrl: string;
  /** Its management API (`/roots/0` is its own issuing root, not the stack's). */
  readonly managementUrl: string;
  /** The port its HTTP-01 validation connects to: the operator's challenge server must listen there. */
  readonly httpPort: number;
}

/** The executable the stack's Pebble runs, read from its command line. */
async function stackPebbleBinary(): Promise<string> {
  const pid = await readPid(paths, PEBBLE);
  if (pid === undefined) throw new Error(`the stack's Pebble has no pid file in ${paths.pidsDir}`);
  const [binary] = (await readFile(`/proc/${pid}/cmdline`, 'utf8')).split('\0');
  if (!binary) throw new Error(`cannot read the command line of the stack's Pebble (pid ${pid})`);
  return binary;
}

/**
 * Starts a second Pebble offering `profiles` and waits until its directory answers (at most 30 s).
 *
 * @param name its component name, distinct from `pebble`
 * @param profiles the profiles it offers, by name (validity periods in seconds)
 * @param more.httpPort the port its HTTP-01 validation connects to (default: a free one); the
 *   stack's `--http01-self-check-port` makes it validate on the operator's challenge server
 * @param more.externalAccountMacKeys require external account binding with these keys (key id →
 *   base64url HMAC key)
 * @param more.dnsServer the DNS server its validation asks (`host:port`); default the stack's own
 */
export async function startSecondPebble(
  name: string,
  profiles: Readonly<Record<string, PebbleProfile>>,
  more: {
    httpPort?: number;
    externalAccountMacKeys?: Readonly<Record<string, string>>;
    dnsServer?: string;
  } = {},
): Promise<SecondPebble> {
  const picked = await pickFreePorts({ listen: 'tcp', management: 'tcp', http01: 'tcp', tlsAlpn01: 'tcp' });
  const ports = { ...picked, http01: more.httpPort ?? picked.http01 };
  const started = await startPebble(
    paths,
    await stackPebbleBinary(),
    await readFile(sandbox.acmeCaBundle, 'utf8'),
    {
      listenPort: ports.listen,
      managementPort: ports.management,
      httpPort: ports.http01,
      tlsPort: ports.tlsAlpn01,
      dnsServer: more.dnsServer ?? sandbox.dnsServer,
      profiles,
      ...(more.externalAccountMacKeys ? { externalAccountMacKeys: more.externalAccountMacKeys } : {}),
    },
    { name, configPath: path.join(paths.dir, `${name}.json`) },
  );
  return {
    name,
    directoryUrl: started.directoryUrl,
    managementUrl: started.managementUrl,
    httpPort: ports.http01,
  };
}

/** Stops a Pebble that `startSecondPebble` started (SIGTERM, SIGKILL after 5 s) and removes its pid file. */
export async function stopSecondPebble(name: string): Promise<void> {
  if (name === PEBBLE) throw new Error("stopSecondPebble never stops the stack's own Pebble");
  await stopProcess(paths, name);
}
