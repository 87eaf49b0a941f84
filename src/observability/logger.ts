/**
 * Structured JSON logs (pino). Secrets never reach a log line: known secret-bearing paths are
 * redacted, and callers log names and hostnames, never key material.
 */
import { pino, type Logger, type LevelWithSilent } from 'pino';

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
