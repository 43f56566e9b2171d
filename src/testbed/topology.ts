/**
 * Network-namespace testbed: one "node" namespace (where the proxy runs),
 * backend namespaces serving HTTP echo, and client namespaces, each joined to
 * the node by its own veth pair with point-to-point /32 addressing (no bridge):
 *
 *   client 192.168.100.2/32 ── eth0 ═ vc0 ── node ── vb0 ═ eth0 ── b1 10.244.1.2/32
 *          default via 192.168.100.1        (gw addrs:        default via 10.244.0.1
 *                                  192.168.100.1/32 on vc*, 10.244.0.1/32 on vb*)
 *
 * Nothing is created in the root namespace: veth pairs are created inside the
 * node namespace with their peer placed straight into the other namespace.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import type { Socket } from 'node:net';
import { fileURLToPath } from 'node:url';
import { run, type RunOptions, type RunResult } from '../kernel/exec.ts';

/** Default prefix of testbed namespace names (`drv-<6 hex>-<role>`); see scripts/netns-cleanup.sh. */
export const NETNS_PREFIX = 'drv';

/** A backend namespace to create: one address, echo servers on `ports` (TCP) and `udpPorts` (UDP). */
export interface BackendSpec {
  /** Short name, [a-z0-9-], unique in the topology; reported by the echo server. */
  name: string;
  /** IPv4 address, e.g. 10.244.1.2. */
  ip: string;
  /** IPv6 address too, e.g. fd00:244:1::2 (added with `nodad`, so it is usable at once); the echo server then listens on both families. */
  ip6?: string;
  ports: number[];
  /** UDP echo ports (echo-server.mjs `--udp-ports`): each datagram is answered with an EchoReply datagram [none]. */
  udpPorts?: number[];
}

/** A client namespace to create. */
export interface ClientSpec {
  /** Short name, [a-z0-9-], unique in the topology. */
  name: string;
  /** IPv4 address, e.g. 192.168.100.2 (outside the cluster CIDR) or 10.244.9.2 (inside). */
  ip: string;
  /** IPv6 address too, e.g. fd00:100::2 (added with `nodad`). */
  ip6?: string;
}

/** Input of {@link createTopology}. Defaults in brackets. */
export interface TopologySpec {
  backends: BackendSpec[];
  /** [one client `client` at 192.168.100.2] */
  clients?: ClientSpec[];
  /** Node address on every backend link, the backends' default gateway [10.244.0.1]. */
  gateway?: string;
  /** Node address on every client link, the clients' default gateway; use it as the node IP [192.168.100.1]. */
  nodeIp?: string;
  /** Routed to `lo` in the node namespace so OUTPUT DNAT can see ClusterIP traffic [10.96.0.0/12]. */
  serviceCidr?: string;
  /**
   * IPv6, used when a backend or client has an `ip6`: the node's address on
   * every backend link [fd00:244::1], on every client link [fd00:100::1],
   * and the IPv6 service CIDR routed to `lo` [fd00:96::/112]. Everything
   * IPv6 lives in the topology's namespaces only.
   */
  gateway6?: string;
  nodeIp6?: string;
  serviceCidr6?: string;
  /** Namespace name prefix [NETNS_PREFIX]. */
  prefix?: string;
  /** Bound on the wait for echo servers to listen, in ms [15 000]. */
  readyTimeoutMs?: number;
}

/** A created backend namespace. */
export interface BackendNs extends BackendSpec {
  /** Network namespace name. */
  netns: string;
}

/** A created client namespace. */
export interface ClientNs extends ClientSpec {
  /** Network namespace name. */
  netns: string;
}

/** A running testbed. Call {@link Topology.destroy} when done (also done on process exit/SIGINT/SIGTERM). */
export interface Topology {
  /** Random id shared by this topology's namespace names. */
  readonly id: string;
  /** Name of the node network namespace. */
  readonly node: string;
  readonly nodeIp: string;
  readonly gateway: string;
  readonly serviceCidr: string;
  /** The IPv6 counterparts of `gateway`, `nodeIp` and `serviceCidr` (see TopologySpec), whether or not any namespace has an IPv6 address. */
  readonly ipv6: { readonly gateway: string; readonly nodeIp: string; readonly serviceCidr: string };
  readonly backends: readonly BackendNs[];
  readonly clients: readonly ClientNs[];
  /** Every namespace of this topology: node, backends, clients. */
  readonly namespaces: readonly string[];
  /** The client called `name` (default: the first client). Throws if unknown. */
  client(name?: string): ClientNs;
  /** The backend called `name`. Throws if unknown. */
  backend(name: string): BackendNs;
  /** Run a command inside namespace `netns` (see {@link run}). */
  exec(netns: string, cmd: string, args: readonly string[], opts?: Omit<RunOptions, 'netns'>): Promise<RunResult>;
  /** Kill the echo servers and delete the namespaces. Idempotent; never throws. */
  destroy(): Promise<void>;
}

/**
 * argv (starting with the node binary) that runs one of the testbed's helper
 * scripts, e.g. `helperArgv('probe-cli.mjs', ['probe'])`. The helpers are
 * plain .mjs: node starts them in ~0.1 s, where `--import tsx` takes ~0.5 s.
 */
export function helperArgv(script: string, args: readonly string[]): string[] {
  return [process.execPath, fileURLToPath(new URL(script, import.meta.url)), ...args];
}

/**
 * Why the kernel testbed can't run here (not root, no `ip netns`), or
 * undefined when it can. Kernel tests use it to skip with a visible reason.
 */
export async function testbedUnavailableReason(): Promise<string | undefined> {
  if (process.platform !== 'linux') return `needs Linux, this is ${process.platform}`;
  if (process.getuid?.() !== 0) return 'needs root (network namespaces, iptables)';
  const r = await run('ip', ['netns', 'list'], { allowFail: true, timeoutMs: 5000 }).catch((e: Error) => e);
  if (r instanceof Error) return `\`ip netns\` unavailable: ${r.message}`;
  if (r.code !== 0) return `\`ip netns list\` failed: ${r.stderr.trim()}`;
  return undefined;
}

const NAME_RE = /^[a-z0-9][a-z0-9-]{0,19}$/;

/** Build a topology; on any failure everything created so far is removed and the error rethrown. */
export async function createTopology(spec: TopologySpec): Promise<Topology> {
  const prefix = spec.prefix ?? NETNS_PREFIX;
  const id = randomBytes(3).toString('hex');
  const clients = spec.clients ?? [{ name: 'client', ip: '192.168.100.2' }];
  const names = [...spec.backends, ...clients].map((x) => x.name);
  for (const n of names) {
    if (!NAME_RE.test(n) || n === 'node') throw new Error(`testbed: bad namespace name ${JSON.stringify(n)}`);
    if (names.indexOf(n) !== names.lastIndexOf(n)) throw new Error(`testbed: duplicate name ${n}`);
  }
  const ns = (role: string): string => `${prefix}-${id}-${role}`;
  const topo = new TestbedTopology(
    id,
    ns('node'),
    spec.nodeIp ?? '192.168.100.1',
    spec.gateway ?? '10.244.0.1',
    spec.serviceCidr ?? '10.96.0.0/12',
    spec.backends.map((b) => ({ ...b, ports: [...b.ports], ...(b.udpPorts ? { udpPorts: [...b.udpPorts] } : {}), netns: ns(b.name) })),
    clients.map((c) => ({ ...c, netns: ns(c.name) })),
    { gateway: spec.gateway6 ?? 'fd00:244::1', nodeIp: spec.nodeIp6 ?? 'fd00:100::1', serviceCidr: spec.serviceCidr6 ?? 'fd00:96::/112' },
  );
  try {
    await topo.build(spec.readyTimeoutMs ?? 15_000);
    return topo;
  } catch (err) {
    await topo.destroy();
    throw err;
  }
}

/** Live topologies, cleaned up synchronously if the process exits or is signalled. */
const live = new Set<TestbedTopology>();

function cleanupAllSync(): void {
  for (const t of live) t.destroySync();
}

function onSignal(signal: NodeJS.Signals): void {
  cleanupAllSync();
  uninstallHandlers();
  // Re-raise with default behaviour unless someone else handles this signal.
  if (process.listenerCount(signal) === 0) process.kill(process.pid, signal);
}

function installHandlers(): void {
  process.on('exit', cleanupAllSync);
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}

function uninstallHandlers(): void {
  process.off('exit', cleanupAllSync);
  process.off('SIGINT', onSignal);
  process.off('SIGTERM', onSignal);
}

function register(t: TestbedTopology): void {
  if (live.size === 0) installHandlers();
  live.add(t);
}

function unregister(t: TestbedTopology): void {
  if (live.delete(t) && live.size === 0) uninstallHandlers();
}

class TestbedTopology implements Topology {
  readonly namespaces: string[];
  private readonly servers: ChildProcess[] = [];
  private destroying: Promise<void> | undefined;

  constructor(
    readonly id: string,
    readonly node: string,
    readonly nodeIp: string,
    readonly gateway: string,
    readonly serviceCidr: string,
    readonly backends: BackendNs[],
    readonly clients: ClientNs[],
    readonly ipv6: { readonly gateway: string; readonly nodeIp: string; readonly serviceCidr: string },
  ) {
    this.namespaces = [node, ...backends.map((b) => b.netns), ...clients.map((c) => c.netns)];
    register(this);
  }

  client(name?: string): ClientNs {
    const c = name === undefined ? this.clients[0] : this.clients.find((x) => x.name === name);
    if (!c) throw new Error(`testbed: no client ${name ?? '(none defined)'}`);
    return c;
  }

  backend(name: string): BackendNs {
    const b = this.backends.find((x) => x.name === name);
    if (!b) throw new Error(`testbed: no backend ${name}`);
    return b;
  }

  exec(netns: string, cmd: string, args: readonly string[], opts: Omit<RunOptions, 'netns'> = {}): Promise<RunResult> {
    return run(cmd, args, { ...opts, netns });
  }

  /** Create namespaces, links, addresses and routes, then start the echo servers. */
  async build(readyTimeoutMs: number): Promise<void> {
    // Sequential: a failed `netns add` must not leave a sibling half-created behind our back.
    for (const name of this.namespaces) await run('ip', ['netns', 'add', name]);

    // Node side, one `ip -batch` inside the node namespace.
    const peers = [
      ...this.backends.map((b, i) => ({ ns: b.netns, ip: b.ip, ip6: b.ip6, link: `vb${i}`, gw: this.gateway, gw6: this.ipv6.gateway })),
      ...this.clients.map((c, i) => ({ ns: c.netns, ip: c.ip, ip6: c.ip6, link: `vc${i}`, gw: this.nodeIp, gw6: this.ipv6.nodeIp })),
    ];
    const dualStack = peers.some((p) => p.ip6 !== undefined);
    const nodeCmds = ['link set lo up'];
    for (const p of peers) {
      nodeCmds.push(
        `link add ${p.link} type veth peer name eth0 netns ${p.ns}`,
        `addr add ${p.gw}/32 dev ${p.link}`,
        `link set ${p.link} up`,
        `route add ${p.ip}/32 dev ${p.link}`,
      );
      // IPv6: the node's address on the link without duplicate address detection, so that it is usable at once.
      if (p.ip6 !== undefined) nodeCmds.push(`addr add ${p.gw6}/128 dev ${p.link} nodad`, `route add ${p.ip6}/128 dev ${p.link}`);
    }
    // Locally generated packets are routed *before* OUTPUT DNAT; without a
    // route a connect() to a ClusterIP fails with ENETUNREACH. `dev lo` is
    // enough: after DNAT the kernel re-routes to the backend's veth.
    nodeCmds.push(`route add ${this.serviceCidr} dev lo`);
    if (dualStack) nodeCmds.push(`route add ${this.ipv6.serviceCidr} dev lo`);
    await run('ip', ['-n', this.node, '-batch', '-'], { input: nodeCmds.join('\n') + '\n' });
    await run('sysctl', ['-qw', 'net.ipv4.ip_forward=1'], { netns: this.node });
    if (dualStack) await run('sysctl', ['-qw', 'net.ipv6.conf.all.forwarding=1'], { netns: this.node });

    // Peer side.
    await Promise.all(
      peers.map((p) =>
        run('ip', ['-n', p.ns, '-batch', '-'], {
          input: [
            'link set lo up',
            `addr add ${p.ip}/32 dev eth0`,
            'link set eth0 up',
            `route add ${p.gw}/32 dev eth0 scope link`,
            `route add default via ${p.gw} dev eth0`,
            ...(p.ip6 !== undefined
              ? [`addr add ${p.ip6}/128 dev eth0 nodad`, `route add ${p.gw6}/128 dev eth0`, `route add default via ${p.gw6} dev eth0`]
              : []),
          ].join('\n') + '\n',
        }),
      ),
    );

    await Promise.all(this.backends.map((b) => this.startServer(b, readyTimeoutMs)));
  }

  /** Start `b`'s echo server and wait for its READY line (bounded by `timeoutMs`). */
  private startServer(b: BackendNs, timeoutMs: number): Promise<void> {
    const argv = helperArgv('echo-server.mjs', ['--name', b.name, '--ip', b.ip, ...(b.ip6 !== undefined ? ['--ip6', b.ip6] : []), '--ports', b.ports.join(','), ...(b.udpPorts?.length ? ['--udp-ports', b.udpPorts.join(',')] : [])]);
    const child = spawn('ip', ['netns', 'exec', b.netns, ...argv], { stdio: ['pipe', 'pipe', 'pipe'] });
    this.servers.push(child);
    return new Promise((resolve, reject) => {
      let out = '';
      let err = '';
      const fail = (why: string): void => {
        clearTimeout(timer);
        reject(new Error(`testbed: echo server of ${b.name} (netns ${b.netns}) ${why}; stderr: ${err.trim()}`));
      };
      const timer = setTimeout(() => fail(`not listening after ${timeoutMs} ms`), timeoutMs);
      child.stderr.setEncoding('utf8').on('data', (d: string) => (err += d));
      child.stdout.setEncoding('utf8').on('data', (d: string) => {
        out += d;
        if (!out.includes('READY\n')) return;
        clearTimeout(timer);
        // Don't keep the event loop alive for servers: a forgotten destroy() is
        // still cleaned up by the exit handler.
        child.unref();
        for (const s of [child.stdin, child.stdout, child.stderr]) (s as Socket | null)?.unref();
        resolve();
      });
      child.on('error', (e) => fail(`failed to start: ${e.message}`));
      child.on('exit', (code, signal) => fail(`exited (${signal ?? code})`));
    });
  }

  destroy(): Promise<void> {
    this.destroying ??= this.teardown();
    return this.destroying;
  }

  private async teardown(): Promise<void> {
    try {
      await Promise.all(this.servers.map((c) => stopChild(c)));
      for (const name of this.namespaces) {
        // Anything still running in our namespaces (e.g. a probe that timed out) was started by us.
        const pids = await run('ip', ['netns', 'pids', name], { allowFail: true }).catch(() => undefined);
        for (const pid of pids?.code === 0 ? pids.stdout.split(/\s+/).filter(Boolean) : []) killQuietly(Number(pid));
        await run('ip', ['netns', 'del', name], { allowFail: true }).catch(() => undefined);
      }
    } finally {
      unregister(this);
    }
  }

  /** Synchronous best-effort teardown, for process exit and signal handlers. */
  destroySync(): void {
    for (const c of this.servers) if (c.pid !== undefined && c.exitCode === null) killQuietly(c.pid);
    for (const name of this.namespaces) {
      const pids = spawnSync('ip', ['netns', 'pids', name], { encoding: 'utf8' });
      for (const pid of pids.status === 0 ? pids.stdout.split(/\s+/).filter(Boolean) : []) killQuietly(Number(pid));
      spawnSync('ip', ['netns', 'del', name], { stdio: 'ignore' });
    }
    live.delete(this);
  }
}

function killQuietly(pid: number, signal: NodeJS.Signals = 'SIGKILL'): void {
  try {
    if (pid > 1 && pid !== process.pid) process.kill(pid, signal);
  } catch {
    // already gone
  }
}

/** SIGTERM a child, SIGKILL it after 2 s, resolve once it has exited. */
function stopChild(child: ChildProcess): Promise<void> {
  if (child.exitCode !== null || child.signalCode !== null || child.pid === undefined) return Promise.resolve();
  return new Promise((resolve) => {
    const timer = setTimeout(() => child.kill('SIGKILL'), 2000);
    child.once('exit', () => {
      clearTimeout(timer);
      resolve();
    });
    child.kill('SIGTERM');
  });
}
