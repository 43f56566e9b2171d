/**
 * drover's logger: pino, JSON lines on stderr (one object per event, `msg` plus
 * structured fields), so that logs can be shipped as they are.
 */
import { pino, type Logger } from 'pino';

export type { Logger };

/** Log levels accepted by `--log-level`. */
export const LOG_LEVELS = ['trace', 'debug', 'info', 'warn', 'error', 'fatal', 'silent'] as const;
export type LogLevel = (typeof LOG_LEVELS)[number];

/**
 * Create the process logger. Writes to stderr (fd 2) synchronously, so that
 * a fatal error is never lost on exit.
 */
export function createLogger(level: LogLevel = 'info'): Logger {
  return pino(
    { level, base: { app: 'drover' }, timestamp: pino.stdTimeFunctions.isoTime },
    pino.destination({ dest: 2, sync: true }),
  );
}

/** A logger that drops everything, for tests and library use. */
export function silentLogger(): Logger {
  return pino({ level: 'silent' });
}
