/**
 * Structured JSON logs (pino). Secrets never reach a log line: known secret-bearing paths are
 * redacted, and callers log names and hostnames, never key material.
 */
import { pino, type Bindings, type Logger, type LevelWithSilent } from 'pino';

export function createLogger(level: LevelWithSilent): Logger {
  return pino({
    level,
    base: { component: 'portico-controller' },
    timestamp: pino.stdTimeFunctions.isoTime,
    redact: {
      paths: ['*.data', '*.privateKeyPem', '*.keyAuthorization', '*.hmacKey', '*.accountKey'],
      censor: '[redacted]',
    },
  });
}

/**
 * `parent.child(bindings)`, made only when first used. A child of a logger with these redaction
 * paths costs about 7.8 KB of allocation (pino runs each binding through the wildcard redaction;
 * about 1 KB without it), and a reconcile that has nothing to do logs nothing: at a resync of
 * 10,000 domains the per-reconcile children were a tenth of what it allocated (docs/performance.md,
 * eleventh round). Any property read or write (a level method, `child`, `level`…) makes the child
 * and goes to it, so the result behaves as the child does.
 */
export function lazyChild(parent: Logger, bindings: Bindings): Logger {
  let child: Logger | undefined;
  return new Proxy(parent, {
    get(_target, property) {
      child ??= parent.child(bindings);
      const value: unknown = Reflect.get(child, property, child);
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(child) : value;
    },
    set(_target, property, value) {
      child ??= parent.child(bindings);
      return Reflect.set(child, property, value, child);
    },
  });
}
