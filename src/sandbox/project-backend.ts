/**
 * The example project's web server in the sandbox: a plain HTTP server on 127.0.0.1 that answers every
 * request with a small page naming the project, the Host it was asked for and the path. It stands in
 * for the project's Pods, so that a data plane that proxies (Traefik, `--data-plane traefik`) has a
 * real backend to serve the project's domains from (docs/routing.md, "Traefik").
 *
 * Run as a process of the sandbox: `node dist/sandbox/project-backend.js <port> <project>`.
 */
import { createServer, type Server } from 'node:http';
import { once } from 'node:events';
import { pathToFileURL } from 'node:url';

/** Escapes the five characters HTML gives a meaning to. */
function escapeHtml(text: string): string {
  return text.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);
}

/**
 * The page the backend answers: an HTML document whose title and first heading are `project`, and
 * whose text names the Host header and the request target it was asked for.
 */
export function projectPage(project: string, host: string, target: string): string {
  return (
    `<!doctype html>\n<html><head><meta charset="utf-8"><title>${escapeHtml(project)}</title></head>\n` +
    `<body><h1>${escapeHtml(project)}</h1>\n` +
    `<p>Project ${escapeHtml(project)} answered ${escapeHtml(host)} ${escapeHtml(target)}</p></body></html>\n`
  );
}

/**
 * Starts the backend on `127.0.0.1:port` (0: a free port) and resolves once it listens.
 *
 * @returns the server and the port it listens on
 * @throws the listen error (EADDRINUSE, ...)
 */
export async function startProjectBackend(
  project: string,
  port = 0,
): Promise<{ server: Server; port: number }> {
  const server = createServer((req, res) => {
    const body = projectPage(project, req.headers.host ?? '', req.url ?? '/');
    res.writeHead(200, { 'content-type': 'text/html; charset=utf-8', 'x-portico-project': project });
    res.end(req.method === 'HEAD' ? undefined : body);
  });
  server.listen(port, '127.0.0.1');
  await once(server, 'listening');
  const address = server.address();
  return { server, port: typeof address === 'object' && address !== null ? address.port : port };
}

/** Stops `server` listening and resolves once its connections are closed. */
export function closeServer(server: Server): Promise<void> {
  return new Promise((resolve, reject) => {
    server.close((err) => {
      if (err) reject(err);
      else resolve();
    });
    server.closeAllConnections();
  });
}

if (process.argv[1] !== undefined && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const [portArg, project] = process.argv.slice(2);
  const port = Number(portArg);
  if (!Number.isInteger(port) || port <= 0 || project === undefined || project === '') {
    process.stderr.write('usage: node project-backend.js <port> <project>\n');
    process.exit(2);
  }
  const { port: listening } = await startProjectBackend(project, port);
  process.stdout.write(`project ${project}: listening on 127.0.0.1:${listening}\n`);
  const stop = (): void => {
    process.exit(0);
  };
  process.on('SIGTERM', stop);
  process.on('SIGINT', stop);
}
