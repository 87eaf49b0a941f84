/** The server's JSON log lines (pino), the same in both of its threads. */
import { pino, type Logger, type LevelWithSilent } from 'pino';

export function createServerLogger(level: LevelWithSilent): Logger {
  return pino({
    level,
    base: { component: 'portico-ratelimit-server' },
    timestamp: pino.stdTimeFunctions.isoTime,
  });
}
