/**
 * Servers that unit and e2e tests start on the loopback interface: listen on a free port, and close
 * without waiting for kept-alive connections.
 */
import type { Server as HttpServer } from 'node:http';
import type { Server as HttpsServer } from 'node:https';
import type { AddressInfo, Server as TcpServer } from 'node:net';

/** Listens on 127.0.0.1 and a free port; resolves to the port. */
export async function listenOn(server: TcpServer): Promise<number> {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  return (server.address() as AddressInfo).port;
}

/** Closes every connection of an HTTP(S) server, then the server. */
export async function closeServer(server: HttpServer | HttpsServer): Promise<void> {
  server.closeAllConnections();
  await new Promise((resolve) => server.close(resolve));
}
