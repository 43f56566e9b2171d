/**
 * The small HTTP servers of `drover run`: metrics on
 * `--metrics-bind-address` and health on `--healthz-bind-address`, each a
 * table of paths (node:http; GET and HEAD only).
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import type { BindAddress } from '../model/addr.ts';

/** What a route answers. */
export interface RouteAnswer {
  readonly status: number;
  readonly contentType: string;
  readonly body: string;
  /** More response headers, name → value (e.g. a Service health check's endpoint weight). */
  readonly headers?: Readonly<Record<string, string>>;
}

/**
 * Path → how to answer it; a route may be async (the metrics registry is).
 * The path `*` answers every path the table does not name (a Service's
 * health check answers on any path, as kube-proxy's does).
 */
export type Routes = Readonly<Record<string, () => RouteAnswer | Promise<RouteAnswer>>>;

/** A listening server; `port` is the one bound (useful with port 0). */
export interface RunningServer {
  readonly port: number;
  close(): Promise<void>;
}

/**
 * Listen on `bind` and answer GET and HEAD of the paths in `routes`
 * (query strings ignored); 404 for other paths (unless a `*` route
 * takes them), 405 for other methods, 500 when a route throws. Every
 * answer carries `X-Content-Type-Options: nosniff`, as kube-proxy's do.
 * @throws the listen error (e.g. EADDRINUSE), naming the address.
 */
export async function serve(bind: BindAddress, routes: Routes): Promise<RunningServer> {
  const server: Server = createServer((req, res) => {
    const path = (req.url ?? '/').split('?')[0]!;
    const route = Object.hasOwn(routes, path) ? routes[path] : routes['*'];
    const send = (a: RouteAnswer) => {
      res.writeHead(a.status, { ...a.headers, 'Content-Type': a.contentType, 'X-Content-Type-Options': 'nosniff' });
      res.end(req.method === 'HEAD' ? undefined : a.body);
    };
    if (req.method !== 'GET' && req.method !== 'HEAD') return send(text(405, 'method not allowed\n'));
    if (!route) return send(text(404, 'not found\n'));
    Promise.resolve()
      .then(route)
      .then(send, (err: Error) => send(text(500, `${err.message}\n`)));
  });
  const host = bind.ip.text;
  await new Promise<void>((resolve, reject) => {
    server.once('error', (err: NodeJS.ErrnoException) =>
      reject(new Error(`cannot listen on ${bind.ip.family === 6 ? `[${host}]` : host}:${bind.port}: ${err.code ?? err.message}`)),
    );
    server.listen(bind.port, host, () => resolve());
  });
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}

function text(status: number, body: string): RouteAnswer {
  return { status, contentType: 'text/plain; charset=utf-8', body };
}
