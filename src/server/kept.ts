/**
 * A server that keeps trying to listen: kube-proxy runs each of its
 * servers under `wait.Until(…, 5*time.Second, …)`
 * (cmd/kube-proxy/app/server.go), so an address that is taken (another
 * process holds the port) is tried again every 5 s while the proxy keeps
 * running. Used by every server of `drover run`.
 */
import type { BindAddress } from '../model/addr.ts';
import type { Logger } from '../util/log.ts';
import { serve, type Routes, type RunningServer } from './http.ts';

/** How long to wait before trying a listen address again, ms (kube-proxy: 5 s). */
export const RETRY_MS = 5000;

/** A server that {@link keepServing} keeps trying to start. */
export interface KeptServer {
  /** The port bound; undefined while not listening. */
  port(): number | undefined;
  /** Stop trying, and stop serving; idempotent. */
  close(): Promise<void>;
}

/** Options of {@link keepServing}. */
export interface KeepServingOptions {
  /** Time between two attempts, ms; default {@link RETRY_MS}. */
  readonly retryMs?: number;
  /** Fields added to each log line (e.g. the Service a health check is for). */
  readonly fields?: Readonly<Record<string, unknown>>;
}

/**
 * Serve `routes` on `bind` (http.ts serve); when listening fails, log it
 * and try again every `retryMs`, until it succeeds or the server is
 * closed. The first failure is logged at error level as "cannot serve
 * <what>; will retry"; later attempts that fail the same way at debug
 * level, so that a port held for hours is one line, not one every 5 s.
 * Resolves after the first attempt, whatever its outcome; never rejects.
 */
export async function keepServing(bind: BindAddress, what: string, logger: Logger, routes: Routes, opts: KeepServingOptions = {}): Promise<KeptServer> {
  const retryMs = opts.retryMs ?? RETRY_MS;
  const fields = opts.fields ?? {};
  let server: RunningServer | undefined;
  let timer: NodeJS.Timeout | undefined;
  let closed = false;
  let lastError: string | undefined;
  const attempt = async (): Promise<void> => {
    try {
      const s = await serve(bind, routes);
      if (closed) return void (await s.close());
      server = s;
      logger.info({ ...fields, address: bind.ip.text, port: s.port }, `serving ${what}`);
    } catch (err) {
      const message = (err as Error).message;
      const level = message === lastError ? 'debug' : 'error';
      lastError = message;
      logger[level]({ ...fields, err: message, retryInMs: retryMs }, `cannot serve ${what}; will retry`);
      if (!closed) timer = setTimeout(() => void attempt(), retryMs).unref();
    }
  };
  await attempt();
  return {
    port: () => server?.port,
    close: async () => {
      closed = true;
      clearTimeout(timer);
      const s = server;
      server = undefined;
      await s?.close();
    },
  };
}
