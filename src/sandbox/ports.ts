/**
 * Free loopback ports, picked at run time so several sandboxes (a developer's and the e2e tests')
 * can run side by side.
 */
import { createSocket } from 'node:dgram';
import { createServer, type Server } from 'node:net';

const LOOPBACK = '127.0.0.1';

/** What a port is needed for: `tcp` only, or `tcp+udp` (a DNS server listens on both). */
export type PortKind = 'tcp' | 'tcp+udp';

function listenTcp(port: number): Promise<Server> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.unref();
    server.once('error', reject);
    server.listen({ host: LOOPBACK, port, exclusive: true }, () => {
      resolve(server);
    });
  });
}

function closeTcp(server: Server): Promise<void> {
  return new Promise((resolve) =>
    server.close(() => {
      resolve();
    }),
  );
}

function udpPortIsFree(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createSocket('udp4');
    socket.unref();
    socket.once('error', () => {
      socket.close();
      resolve(false);
    });
    socket.bind({ address: LOOPBACK, port, exclusive: true }, () => {
      socket.close(() => {
        resolve(true);
      });
    });
  });
}

/**
 * Picks distinct free ports on 127.0.0.1, one per key of `kinds`. All TCP listeners are held open
 * until every port is picked, so the ports differ from each other; for `tcp+udp` the same port must
 * be free for UDP too. A process may still take a port between this call and the server binding it;
 * the window is short, and a component that fails to bind says so in its log.
 *
 * @param kinds what each port is for, by name
 * @returns the port numbers, by the same names
 * @throws Error when no free port is found after 20 tries for one entry
 */
export async function pickFreePorts<K extends string>(
  kinds: Readonly<Record<K, PortKind>>,
): Promise<Record<K, number>> {
  const held: Server[] = [];
  const ports: Partial<Record<K, number>> = {};
  try {
    for (const name of Object.keys(kinds) as K[]) {
      ports[name] = await pickOne(kinds[name], held);
    }
  } finally {
    await Promise.all(held.map(closeTcp));
  }
  return ports as Record<K, number>;
}

async function pickOne(kind: PortKind, held: Server[]): Promise<number> {
  for (let attempt = 0; attempt < 20; attempt++) {
    const server = await listenTcp(0);
    held.push(server);
    const address = server.address();
    if (address === null || typeof address === 'string') throw new Error('TCP listener has no port');
    if (kind === 'tcp' || (await udpPortIsFree(address.port))) return address.port;
  }
  throw new Error(`no free ${kind} port on ${LOOPBACK} after 20 tries`);
}
