/**
 * A KubeConfig whose API clients share one connection pool to the API server.
 *
 * `@kubernetes/client-node` 2.0.1 builds a new undici Agent in `applySecurityAuthentication` for
 * every request (`createDispatcher` is not cached, unlike the https.Agent of `applyToHTTPSOptions`),
 * so every GET, PATCH and watch opened a TLS connection of its own: a new TLS context and a full
 * handshake each time, and a socket left open until undici's keep-alive timeout. At 1,000
 * CustomDomains that was most of a reconcile's CPU and most of the operator's memory, which lived
 * outside the JS heap (docs/performance.md has the figures). Reusing the first dispatcher keeps
 * connections alive across requests, as client-go does with its one transport per config.
 *
 * Credentials are still applied per request (headers such as a rotated service-account token are
 * read as before); the pool keeps the TLS material it was built with, so a client certificate
 * rotated on disk is picked up by a restart, as with client-go's cached transports.
 */
import { KubeConfig, type RequestContext } from '@kubernetes/client-node';

/** undici's Dispatcher, as client-node's RequestContext types it. */
type Dispatcher = NonNullable<ReturnType<RequestContext['getDispatcher']>>;

export class PooledKubeConfig extends KubeConfig {
  #dispatcher: Dispatcher | undefined;

  override async applySecurityAuthentication(context: RequestContext): Promise<void> {
    await super.applySecurityAuthentication(context);
    const fresh = context.getDispatcher();
    if (fresh === undefined) return; // plain HTTP without TLS options: fetch's global pool
    if (this.#dispatcher === undefined) {
      this.#dispatcher = fresh;
      return;
    }
    // The fresh one was never used: it holds no socket, and the garbage collector takes it
    // (closing it would cost an error object with a stack trace per request).
    if (fresh !== this.#dispatcher) context.setDispatcher(this.#dispatcher);
  }

  /**
   * Closes the pool's idle connections and waits for requests in flight (watches must be stopped
   * first, or this waits for them). Requests made after `close` open a new pool. Never rejects.
   */
  async close(): Promise<void> {
    const dispatcher = this.#dispatcher;
    this.#dispatcher = undefined;
    await dispatcher?.close().catch(() => undefined);
  }
}

/**
 * Loads the kubeconfig at `path`, or the in-cluster service account when `path` is undefined.
 * Throws what client-node throws for an unreadable or invalid file.
 */
export function loadKubeConfig(path: string | undefined): PooledKubeConfig {
  const kc = new PooledKubeConfig();
  if (path) kc.loadFromFile(path);
  else kc.loadFromCluster();
  return kc;
}
