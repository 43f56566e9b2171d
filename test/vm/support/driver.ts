/**
 * A long-lived helper that drives IPVS mode from INSIDE a network namespace
 * for the VM tests and the IPVS measurement: netlink sockets act in the
 * namespace of the process that opens them, so the test process (in the root
 * namespace) cannot hold them. Start it with
 * `ip netns exec NS node --import tsx test/vm/support/driver.ts`, or
 * driver.js where the tests run compiled (see driver-client.ts); it reads one JSON request per line on stdin and answers
 * one JSON line per request on stdout: `{ id, result }` or `{ id, error }`.
 *
 * Requests (`cmd`):
 * - `open`: create an IpvsBackend on the real kernel (IpvsClient, ipset,
 *   iptables-nft, rtnetlink, /proc/sys) with the given options, or with
 *   `dualStack` the DualStackIpvsBackend of both families (ip6tables-nft);
 * - `sync`: backend.sync(snapshot of `services` (and `ipv6Services`, the
 *   IPv6 view) on `node`, { full, changed }); when opened with `conntrack`,
 *   one sync of a Proxier over the backend instead (it works out what
 *   changed itself), which then deletes the stale UDP conntrack entries of
 *   both families, as `drover run` does;
 * - `cleanup`: backend.cleanup();
 * - `checkGraceful`, `pending`: the graceful-termination check and list;
 * - `dump`: every virtual server with its destinations, through a fresh IpvsClient;
 * - `bulk`: `services` virtual servers with `dests` destinations each, all
 *   commands sent at once through one IpvsClient (its bounded pipeline), and
 *   the socket's receive buffer (SO_RCVBUF in force, bytes);
 * - `trace`: `drover trace --mode ipvs` of `packet` (IPv4) over the live
 *   state of the namespace (src/modes/ipvs/trace.ts ipvsTraceContext);
 * - `close`: stop the backend's timer and close the sockets.
 * The process exits when stdin closes.
 */
import { createInterface } from 'node:readline';
import { SystemIptables } from '../../../src/kernel/iptables/exec.ts';
import { IpvsBackend } from '../../../src/modes/ipvs/backend.ts';
import { DualStackIpvsBackend } from '../../../src/modes/ipvs/dual-stack.ts';
import { SystemIpset } from '../../../src/modes/ipvs/ipset.ts';
import { RtnlLinkManager } from '../../../src/kernel/rtnetlink/link.ts';
import { IpvsClient } from '../../../src/kernel/ipvs/client.ts';
import { ProcSysctls } from '../../../src/modes/ipvs/sysctl.ts';
import type { RenderOptions } from '../../../src/config/render.ts';
import type { NodeInfo, ServicePort, Snapshot } from '../../../src/model/types.ts';
import { SystemConntrack } from '../../../src/conntrack/exec.ts';
import { Proxier } from '../../../src/proxier/proxier.ts';
import { nodeAddresses } from '../../../src/modes/ipvs/node-ips.ts';
import { createLogger, type Logger } from '../../../src/util/log.ts';
import { trace, type Packet } from '../../../src/inspect/trace.ts';
import { localAddresses } from '../../../src/kernel/iptables/live.ts';
import { readIpvsLive } from '../../../src/modes/ipvs/live.ts';
import { ipvsTraceContext } from '../../../src/modes/ipvs/trace.ts';

/** Options of the `open` request. */
export interface OpenRequest {
  readonly scheduler?: string;
  readonly serviceCIDR?: string;
  readonly gracefulPeriodMs?: number;
  readonly gracefulCheckIntervalMs?: number;
  readonly render?: RenderOptions;
  /** Read the node namespace's addresses for NodePorts and external IPs (node-ips.ts), as `drover run` does; default: none. */
  readonly readNodeAddresses?: boolean;
  /** Both families (dual-stack.ts), the IPv6 one with this `--cluster-cidr` entry. */
  readonly dualStack?: { readonly clusterCIDR6: string };
  /** Sync through a Proxier that deletes stale UDP conntrack entries (conntrack/stale.ts), as `drover run`. */
  readonly conntrack?: boolean;
}

let backend: IpvsBackend | DualStackIpvsBackend | undefined;
/** The Proxier of an `open` with `conntrack`, and the snapshot its source hands out (the last `sync` request's). */
let proxier: { readonly proxier: Proxier; set(snapshot: Snapshot): void } | undefined;

/** With `o.conntrack`, a Proxier over `backend` whose source is the snapshot of the latest `sync` request; else undefined. */
function proxierOf(o: OpenRequest, b: IpvsBackend | DualStackIpvsBackend, logger: Logger): typeof proxier {
  if (!o.conntrack) return undefined;
  let current: Snapshot = { services: new Map() };
  const p = new Proxier({
    source: { load: async () => ({ snapshot: current }), watch: () => undefined, close: () => undefined },
    backend: b,
    logger,
    minSyncPeriodMs: 0,
    syncPeriodMs: 3_600_000,
    conntrack: new SystemConntrack(),
  });
  return { proxier: p, set: (s: Snapshot) => { current = s; } };
}

/** The IPv4 family's backend (pending removals and the graceful check). */
function v4(): IpvsBackend {
  if (!backend) throw new Error('open first');
  return backend instanceof DualStackIpvsBackend ? backend.families.IPv4 : backend;
}
let client: IpvsClient | undefined;
let links: RtnlLinkManager | undefined;

async function handle(req: Record<string, unknown>): Promise<unknown> {
  switch (req.cmd) {
    case 'open': {
      const o = (req.options ?? {}) as OpenRequest;
      client = await IpvsClient.open();
      links = new RtnlLinkManager();
      const addresses = o.readNodeAddresses ? nodeAddresses(undefined) : undefined;
      const logger = createLogger((process.env.DROVER_DRIVER_LOG as 'info' | undefined) ?? 'warn');
      if (o.dualStack) {
        const addresses6 = o.readNodeAddresses ? nodeAddresses(undefined, undefined, 'IPv6') : undefined;
        backend = new DualStackIpvsBackend({
          shared: {
            ipvs: client,
            ipset: new SystemIpset(),
            links,
            sysctls: new ProcSysctls(),
            scheduler: o.scheduler ?? 'rr',
            gracefulPeriodMs: o.gracefulPeriodMs ?? 900_000,
            gracefulCheckIntervalMs: o.gracefulCheckIntervalMs ?? 5000,
          },
          IPv4: {
            iptables: new SystemIptables({ variant: 'nft' }),
            render: o.render ?? { clusterCIDR: '10.244.0.0/16', masqueradeAll: false },
            serviceCIDR: o.serviceCIDR ?? '10.96.0.0/12',
            ...(addresses ? { nodeAddresses: addresses } : {}),
          },
          IPv6: {
            iptables: new SystemIptables({ variant: 'nft', family: 'IPv6' }),
            render: { clusterCIDR: o.dualStack.clusterCIDR6, masqueradeAll: false, family: 'IPv6' },
            ...(addresses6 ? { nodeAddresses: addresses6 } : {}),
          },
          logger,
        });
        proxier = proxierOf(o, backend, logger);
        return { familyId: client.familyId, nodeAddresses: addresses, nodeAddresses6: addresses6 };
      }
      backend = new IpvsBackend({
        ipvs: client,
        ipset: new SystemIpset(),
        iptables: new SystemIptables({ variant: 'nft' }),
        links,
        sysctls: new ProcSysctls(),
        render: o.render ?? { clusterCIDR: '10.244.0.0/16', masqueradeAll: false },
        scheduler: o.scheduler ?? 'rr',
        serviceCIDR: o.serviceCIDR ?? '10.96.0.0/12',
        gracefulPeriodMs: o.gracefulPeriodMs ?? 900_000,
        gracefulCheckIntervalMs: o.gracefulCheckIntervalMs ?? 5000,
        ...(addresses ? { nodeAddresses: addresses } : {}),
        logger,
      });
      proxier = proxierOf(o, backend, logger);
      return { familyId: client.familyId, nodeAddresses: addresses };
    }
    case 'sync': {
      if (!backend) throw new Error('open first');
      const services = req.services as ServicePort[];
      const node = req.node as NodeInfo | undefined;
      const v6 = req.ipv6Services as ServicePort[] | undefined;
      const snapshot: Snapshot = { services: new Map(services.map((s) => [s.key, s])), ...(v6 ? { ipv6Services: new Map(v6.map((s) => [s.key, s])) } : {}), ...(node ? { node } : {}) };
      proxier?.set(snapshot);
      const result = proxier
        ? await proxier.proxier.syncOnce({ full: req.full === true })
        : await backend.sync(snapshot, { full: req.full === true, changed: new Set((req.changed as string[]) ?? []) });
      return { result, detail: result.detail };
    }
    case 'checkGraceful':
      return v4().checkGraceful();
    case 'pending':
      return v4().pendingRemovals();
    case 'cleanup':
      if (!backend) throw new Error('open first');
      return backend.cleanup();
    case 'dump': {
      const c = await IpvsClient.open();
      try {
        const services = await c.dumpServices();
        const out = [];
        for (const s of services.entries) out.push({ service: s, dests: (await c.dumpDests(s)).entries });
        return { services: out, unsupported: services.unsupported };
      } finally {
        c.close();
      }
    }
    case 'bulk': {
      const c = await IpvsClient.open({ timeoutMs: 120_000 }); // per request; the emulated guest can stall for seconds under load
      try {
        const nServices = Number(req.services);
        const nDests = Number(req.dests);
        const vss = Array.from({ length: nServices }, (_, i) => ({
          protocol: 'TCP' as const,
          address: `10.100.${i >> 8}.${i & 255}`,
          port: 80,
          scheduler: 'rr',
        }));
        const start = performance.now();
        const results = await Promise.allSettled(
          vss.map(async (vs, i) => {
            await c.newService(vs);
            await Promise.all(
              Array.from({ length: nDests }, (_, j) =>
                c.newDest(vs, { address: `10.200.${i & 255}.${j + 1}`, port: 8080, weight: 1, forwarding: 'masq' }),
              ),
            );
          }),
        );
        const ms = performance.now() - start;
        const failures = results.filter((r) => r.status === 'rejected').map((r) => String((r as PromiseRejectedResult).reason));
        const dump = await c.dumpServices();
        let dests = 0;
        for (const s of dump.entries) if (s.address.startsWith('10.100.')) dests += (await c.dumpDests(s)).entries.length;
        return { commands: nServices * (1 + nDests), ms, failures, services: dump.entries.filter((s) => s.address.startsWith('10.100.')).length, dests, recvBufferBytes: c.recvBufferBytes };
      } finally {
        c.close();
      }
    }
    case 'trace': {
      if (!client || !links) throw new Error('open first');
      const io = { ipvs: client, ipset: new SystemIpset(), iptables: new SystemIptables({ variant: 'nft' }), iptables6: new SystemIptables({ variant: 'nft', family: 'IPv6' }), links, sysctls: new ProcSysctls() };
      const [live, local] = await Promise.all([readIpvsLive(io, { tables: true }), localAddresses()]);
      return trace(ipvsTraceContext(live, local), req.packet as Packet);
    }
    case 'close':
      backend?.close();
      client?.close();
      links?.close();
      return true;
    default:
      throw new Error(`unknown command ${String(req.cmd)}`);
  }
}

const rl = createInterface({ input: process.stdin });
rl.on('line', (line) => {
  let req: Record<string, unknown>;
  try {
    req = JSON.parse(line) as Record<string, unknown>;
  } catch {
    process.stdout.write(`${JSON.stringify({ id: null, error: 'bad JSON' })}\n`);
    return;
  }
  handle(req).then(
    (result) => process.stdout.write(`${JSON.stringify({ id: req.id, result })}\n`),
    (err: Error) => process.stdout.write(`${JSON.stringify({ id: req.id, error: `${err.name}: ${err.message}` })}\n`),
  );
});
rl.on('close', () => {
  backend?.close();
  client?.close();
  links?.close();
});
process.stdout.write(`${JSON.stringify({ ready: true })}\n`);
