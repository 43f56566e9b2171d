/**
 * A running test API server (test/peers/cmd/test-apiserver: embedded etcd
 * and the real kube-apiserver on 127.0.0.1), for the cluster tests: start,
 * stop, restart with its data kept, requests as the admin or with another
 * token, and etcd compaction.
 *
 * Its state directory (etcd data, keys, certificates, kubeconfig) is a
 * temporary directory removed by {@link TestApiServer.destroy}; its log is
 * `apiserver.log` beside it, kept until then for failure messages.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import { request as httpsRequest } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

/** What test-apiserver prints in its READY line (test/peers/cmd/test-apiserver/main.go `state`). */
export interface ApiServerState {
  readonly server: string;
  readonly etcd: string;
  readonly securePort: number;
  readonly etcdClientPort: number;
  readonly adminToken: string;
  readonly kubeconfig: string;
  readonly ca: string;
  readonly stateDir: string;
  readonly serviceClusterIPRange: string;
  readonly pid: number;
}

/**
 * kube-apiserver flags every test server gets, before the test's own. On
 * SIGTERM kube-apiserver waits for its open requests before it exits, and a
 * watch (drover's) stays open until the HTTP server's shutdown timeout, the
 * request timeout (60 s): a stop then took 60 s, and a test with a restart
 * a minute more. With a watch termination grace period, it ends the watches
 * itself, as on a node that drains kube-apiserver, and exits in about a
 * second.
 */
const SHUTDOWN_ARGS = ['--shutdown-watch-termination-grace-period=2s'];

/** Options of {@link TestApiServer.start}. */
export interface TestApiServerOptions {
  /** --service-cluster-ip-range; two CIDRs (IPv4,IPv6) for dual-stack [10.96.0.0/16]. */
  readonly serviceClusterIPRange?: string;
  /** More kube-apiserver flags, after the ones test-apiserver sets (a later flag wins). */
  readonly apiserverArgs?: readonly string[];
  /** Longest wait for READY, ms [300 000: a busy machine takes minutes for a first start]. */
  readonly readyTimeoutMs?: number;
}

/** An answer of the API server: the HTTP status and the JSON body (undefined when empty or not JSON). */
export interface ApiAnswer<T = unknown> {
  readonly status: number;
  readonly body: T;
}

/** A generic Kubernetes object as the tests write it. */
export type Obj = Record<string, unknown> & { metadata?: { name?: string; namespace?: string; resourceVersion?: string; [k: string]: unknown } };

/** See the module comment. */
export class TestApiServer {
  private child: ChildProcess | undefined;
  private exited: Promise<void> = Promise.resolve();
  private constructor(
    private readonly binary: string,
    /** The parent of the state directory and the log. */
    readonly dir: string,
    private readonly opts: TestApiServerOptions,
    private current: ApiServerState | undefined = undefined,
  ) {}

  /**
   * Start a test API server with a new state directory; resolves once it
   * answers /readyz.
   * @throws Error with the end of its log when it exits or is not ready in time.
   */
  static async start(binary: string, opts: TestApiServerOptions = {}): Promise<TestApiServer> {
    // The server picks free ports for etcd and itself, then binds them: another test's process can take one in
    // between (its log then says "address already in use"). A start that lost that race is made again, anew.
    for (let attempt = 1; ; attempt++) {
      const dir = await mkdtemp(join(tmpdir(), 'drover-apiserver-'));
      const s = new TestApiServer(binary, dir, opts);
      try {
        await s.launch();
        return s;
      } catch (err) {
        await s.destroy();
        if (attempt >= 3 || !(err as Error).message.includes('address already in use')) throw err;
      }
    }
  }

  /** The server's state (address, admin token, kubeconfig, ...). @throws Error when it is not running. */
  get state(): ApiServerState {
    if (this.current === undefined) throw new Error('the test API server is not running');
    return this.current;
  }

  /** The state directory (etcd data, keys, kubeconfig), kept across {@link restart}. */
  get stateDir(): string {
    return join(this.dir, 'state');
  }

  /** Its log file (stdout and stderr of every start). */
  get logFile(): string {
    return join(this.dir, 'apiserver.log');
  }

  /** The last `lines` lines of its log, for failure messages. */
  async logTail(lines = 40): Promise<string> {
    const text = await readFile(this.logFile, 'utf8').catch(() => '');
    return text.split('\n').slice(-lines).join('\n');
  }

  private async launch(): Promise<void> {
    const args = ['--state-dir', this.stateDir];
    if (this.opts.serviceClusterIPRange) args.push('--service-cluster-ip-range', this.opts.serviceClusterIPRange);
    args.push('--', ...SHUTDOWN_ARGS, ...(this.opts.apiserverArgs ?? []));
    const log = createWriteStream(this.logFile, { flags: 'a' });
    const child = spawn(this.binary, args, { stdio: ['ignore', 'pipe', 'pipe'] });
    this.child = child;
    child.stderr.pipe(log, { end: false });
    this.exited = new Promise((resolve) => child.once('exit', () => resolve()));
    child.once('close', () => log.end());
    const lines = createInterface({ input: child.stdout });
    const timeoutMs = this.opts.readyTimeoutMs ?? 300_000;
    const state = await new Promise<ApiServerState>((resolve, reject) => {
      const timer = setTimeout(() => reject(new Error(`the test API server was not ready within ${timeoutMs / 1000} s`)), timeoutMs);
      lines.on('line', (line) => {
        log.write(`${line}\n`);
        if (!line.startsWith('READY ')) return;
        clearTimeout(timer);
        resolve(JSON.parse(line.slice('READY '.length)) as ApiServerState);
      });
      void this.exited.then(() => {
        clearTimeout(timer);
        reject(new Error(`the test API server exited with code ${String(child.exitCode)} before it was ready`));
      });
    }).catch(async (err: Error) => {
      child.kill('SIGKILL');
      await this.exited;
      throw new Error(`${err.message}; its log ends with:\n${await this.logTail()}`);
    });
    this.current = state;
  }

  /**
   * Stop it (SIGTERM: kube-apiserver shuts down, then etcd), keeping the
   * state directory; SIGKILL after `graceMs`. Idempotent.
   */
  async stop(graceMs = 60_000): Promise<void> {
    const child = this.child;
    this.child = undefined;
    this.current = undefined;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return;
    child.kill('SIGTERM');
    const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
    await this.exited;
    clearTimeout(timer);
  }

  /** Stop it and start it again on the same state directory (etcd data, keys and ports kept). */
  async restart(): Promise<void> {
    await this.stop();
    await this.launch();
  }

  /** Stop it and remove the state directory and log. Never throws. */
  async destroy(): Promise<void> {
    await this.stop().catch(() => undefined);
    if (this.child) this.child.kill('SIGKILL');
    await rm(this.dir, { recursive: true, force: true }).catch(() => undefined);
  }

  /**
   * One request to the API server, as the admin unless `token` is given.
   * `body` is sent as JSON (or as a merge patch for PATCH).
   * @returns the status and parsed body; never throws for an HTTP status.
   * @throws Error when the server cannot be reached.
   */
  async request<T = Obj>(method: string, path: string, body?: unknown, token?: string): Promise<ApiAnswer<T>> {
    const st = this.state;
    const ca = await readFile(st.ca);
    const data = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const contentType = method === 'PATCH' ? 'application/merge-patch+json' : 'application/json';
    return new Promise((resolve, reject) => {
      const req = httpsRequest(
        new URL(path, st.server),
        {
          method,
          ca,
          headers: {
            Authorization: `Bearer ${token ?? st.adminToken}`,
            Accept: 'application/json',
            ...(data ? { 'Content-Type': contentType, 'Content-Length': data.length } : {}),
          },
          timeout: 120_000,
        },
        (res) => {
          const chunks: Buffer[] = [];
          res.on('data', (c: Buffer) => chunks.push(c));
          res.on('end', () => {
            const text = Buffer.concat(chunks).toString('utf8');
            let parsed: unknown;
            try {
              parsed = text === '' ? undefined : JSON.parse(text);
            } catch {
              parsed = text;
            }
            resolve({ status: res.statusCode ?? 0, body: parsed as T });
          });
        },
      );
      req.on('timeout', () => req.destroy(new Error(`${method} ${path}: no answer within 120 s`)));
      req.on('error', reject);
      req.end(data);
    });
  }

  /**
   * {@link request} that must succeed (2xx).
   * @throws Error naming the request, the status and the server's message otherwise.
   */
  async must<T = Obj>(method: string, path: string, body?: unknown, token?: string): Promise<T> {
    const r = await this.request<T>(method, path, body, token);
    if (r.status < 200 || r.status > 299) {
      const message = (r.body as { message?: string } | undefined)?.message ?? JSON.stringify(r.body);
      throw new Error(`${method} ${path}: HTTP ${r.status}: ${message}`);
    }
    return r.body;
  }

  /** etcd's current revision (its v3 JSON gateway). */
  async etcdRevision(): Promise<number> {
    const r = await etcdCall(this.state.etcd, '/v3/kv/range', { key: Buffer.from('/registry/').toString('base64'), limit: 1 });
    return Number((r as { header: { revision: string } }).header.revision);
  }

  /** Compact etcd's history up to `revision` (default: the current one), physically, as kube-apiserver's compactor does. */
  async compactEtcd(revision?: number): Promise<number> {
    const rev = revision ?? (await this.etcdRevision());
    await etcdCall(this.state.etcd, '/v3/kv/compaction', { revision: String(rev), physical: true });
    return rev;
  }
}

/** POST a JSON body to etcd's v3 gateway. @throws Error on a non-2xx answer. */
async function etcdCall(base: string, path: string, body: unknown): Promise<unknown> {
  const res = await fetch(new URL(path, base), { method: 'POST', body: JSON.stringify(body), headers: { 'Content-Type': 'application/json' } });
  const text = await res.text();
  if (!res.ok) throw new Error(`etcd ${path}: HTTP ${res.status}: ${text}`);
  return JSON.parse(text) as unknown;
}
