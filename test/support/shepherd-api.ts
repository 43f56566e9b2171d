/**
 * A test double of a Shepherd API server (internal/shepherd/apiserver.go),
 * on loopback, serving what drover reads in Shepherd's own wire format:
 *
 *   GET /api/v1/namespaces                → {"namespaces": [...]}, sorted, "default" always there
 *   GET /api/v1/namespaces/{ns}/services  → a JSON list of Services, `null` when there is none
 *   GET /api/v1/cluster/summary           → {"services": ..., "namespaces": ...} (the rest left out)
 *
 * Services are encoded as Go's encoding/json encodes Shepherd's types.go:
 * snake_case, `target_port` always present, `protocol`, `node_port`,
 * `status.cluster_ip` and `status.endpoints` left out when empty
 * (omitempty), `selector` null when not set. With a token, every /api/
 * request without `Authorization: Bearer <token>` gets 401 "unauthorized",
 * as Shepherd's authRequireBearer answers. It is not Shepherd: it keeps no
 * pods and runs no controllers; a test sets the endpoints itself.
 *
 * Faults a test can switch on: `answer` ('garbage': a body that is not
 * JSON; 'slow': no answer for 10 s), a set of namespaces whose service list
 * answers 500, and {@link FakeShepherd.stop}/{@link FakeShepherd.restart}
 * (the port refuses connections in between).
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo, Socket } from 'node:net';

/** One `spec.ports` entry as a test writes it (protocol lower-case and optional, as in Shepherd). */
export interface FakePort {
  readonly name?: string;
  readonly port: number;
  readonly target_port?: number;
  readonly protocol?: string;
}

/**
 * A Shepherd Service as its API server sends it: `ports` and `endpoints`
 * ("ip:port" strings, one per pod and target port) as given.
 */
export function shepherdService(namespace: string, name: string, ports: readonly FakePort[], endpoints: readonly string[] = []): Record<string, unknown> {
  return {
    kind: 'Service',
    metadata: { name, namespace, uid: `uid-${namespace}-${name}`, created_at: '2026-01-01T00:00:00Z' },
    spec: {
      selector: { app: name },
      ports: ports.map((p) => ({
        ...(p.name ? { name: p.name } : {}),
        port: p.port,
        target_port: p.target_port ?? 0,
        ...(p.protocol ? { protocol: p.protocol } : {}),
      })),
      type: 'ClusterIP',
    },
    status: endpoints.length > 0 ? { endpoints: [...endpoints] } : {},
  };
}

/** How the double answers every request. */
export type FakeAnswer = 'ok' | 'garbage' | 'slow';

/** See the module comment. */
export class FakeShepherd {
  /** Namespace → its Services (raw objects, served as they are, in this order). */
  readonly services = new Map<string, unknown[]>();
  /** Namespaces whose service list answers 500. */
  readonly failing = new Set<string>();
  /** Every request: path and Authorization header. */
  readonly requests: Array<{ path: string; authorization: string | undefined }> = [];
  answer: FakeAnswer = 'ok';
  private server: Server;
  private readonly sockets = new Set<Socket>();
  private port = 0;

  private constructor(private readonly token: string | undefined) {
    this.server = this.makeServer();
  }

  /** Start on 127.0.0.1 (a free port); `token`: demand this bearer token. */
  static async start(opts: { token?: string } = {}): Promise<FakeShepherd> {
    const fake = new FakeShepherd(opts.token);
    await fake.listen();
    return fake;
  }

  /** "http://127.0.0.1:PORT". */
  get url(): string {
    return `http://127.0.0.1:${this.port}`;
  }

  /** The `--source` of this server: "shepherd+http://127.0.0.1:PORT". */
  get source(): string {
    return `shepherd+${this.url}`;
  }

  /** Replace the Services of `namespace` (an empty list removes the namespace, as in Shepherd). */
  set(namespace: string, services: unknown[]): void {
    if (services.length === 0) this.services.delete(namespace);
    else this.services.set(namespace, services);
  }

  /** Stop listening and drop open connections: the port refuses connections until {@link restart}. */
  async stop(): Promise<void> {
    for (const s of this.sockets) s.destroy();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }

  /** Listen again on the same port. */
  async restart(): Promise<void> {
    this.server = this.makeServer();
    await this.listen();
  }

  private makeServer(): Server {
    const server = createServer((req, res) => this.handle(req, res));
    server.on('connection', (s) => {
      this.sockets.add(s);
      s.on('close', () => this.sockets.delete(s));
    });
    return server;
  }

  private async listen(): Promise<void> {
    await new Promise<void>((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(this.port, '127.0.0.1', () => resolve());
    });
    this.port = (this.server.address() as AddressInfo).port;
  }

  private handle(req: IncomingMessage, res: ServerResponse): void {
    const url = new URL(req.url ?? '/', this.url);
    this.requests.push({ path: `${url.pathname}${url.search}`, authorization: req.headers.authorization });
    if (this.answer === 'slow') {
      setTimeout(() => json(res, 200, []), 10_000).unref();
      return;
    }
    if (this.token !== undefined && url.pathname.startsWith('/api/') && req.headers.authorization?.trim() !== `Bearer ${this.token}`) {
      text(res, 401, 'unauthorized\n');
      return;
    }
    if (this.answer === 'garbage') {
      text(res, 200, '<html>this is not Shepherd</html>\n');
      return;
    }
    const namespaces = [...new Set(['default', ...this.services.keys()])].sort();
    if (url.pathname === '/api/v1/namespaces') return json(res, 200, { namespaces });
    if (url.pathname === '/api/v1/cluster/summary') {
      const all = url.searchParams.get('namespace');
      const list = all === null || all === '' || all === 'all' ? [...this.services.values()].flat() : (this.services.get(all) ?? []);
      return json(res, 200, { info: { name: 'shepherd' }, services: list.length > 0 ? list : null, namespaces });
    }
    const m = /^\/api\/v1\/namespaces\/([^/]+)\/services$/.exec(url.pathname);
    if (m) {
      const ns = decodeURIComponent(m[1]!);
      if (this.failing.has(ns)) return text(res, 500, 'list services: store is closed\n');
      const list = this.services.get(ns) ?? [];
      return json(res, 200, list.length > 0 ? list : null);
    }
    text(res, 404, '404 page not found\n');
  }
}

/** Answer JSON as Shepherd's respondJSON does (json.Encoder: one line, then "\n"). */
function json(res: ServerResponse, status: number, body: unknown): void {
  res.writeHead(status, { 'Content-Type': 'application/json' });
  res.end(`${JSON.stringify(body)}\n`);
}

/** Answer plain text as Go's http.Error does. */
function text(res: ServerResponse, status: number, body: string): void {
  res.writeHead(status, { 'Content-Type': 'text/plain; charset=utf-8', 'X-Content-Type-Options': 'nosniff' });
  res.end(body);
}
