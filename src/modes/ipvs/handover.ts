/**
 * IPVS mode's part of `drover takeover` when the node moves away from it:
 * reading the layout's virtual servers for the survey, and waiting for the
 * connections they still carry before `cleanup` deletes them.
 *
 * Why the wait: a connection IPVS accepted lives in IPVS's own connection
 * table, not in a conntrack NAT binding. Its packets still reach IPVS at
 * LOCAL_IN (its virtual address stays local on kube-ipvs0), and IPVS
 * rewrites them. Once its virtual server is deleted, its destination is no
 * longer available, and with `net.ipv4.vs.expire_nodest_conn=1` (kube-proxy's
 * and drover's setting) the kernel drops its next packet and expires it.
 * New connections do not need IPVS once the new mode is programmed: its DNAT
 * in nat prerouting runs before the routing decision, so they never reach
 * LOCAL_IN with the virtual address.
 *
 * Everything runs in this process's network namespace (wiring.ts).
 */
import { IpvsClient, IpvsUnavailableError } from '../../kernel/ipvs/client.ts';
import { readIpvsConnections, type IpvsConnection } from '../../kernel/ipvs/conn-table.ts';
import { virtualServerKey } from '../../kernel/ipvs/keys.ts';
import { DUMMY_INTERFACE, RtnlLinkManager } from '../../kernel/rtnetlink/link.ts';
import { joinHostPort } from '../../model/addr.ts';
import { DEFAULT_SERVICE_CIDR } from '../../model/allocate.ts';
import type { IPFamily } from '../../model/types.ts';
import type { BackendConfig, DrainReport, ModeOptions } from '../driver.ts';
import { readVirtualServers, type IpvsKernel } from './kernel.ts';
import { nodeAddresses } from './node-ips.ts';
import { inLayout, type LayoutScope } from './owned.ts';
import type { KernelVirtualServer } from './reconcile.ts';

/** The layout's virtual servers, and the others, as read from the kernel. */
export interface LayoutServers {
  /** Those of IPVS mode's layout (owned.ts), with their real servers. */
  readonly layout: readonly KernelVirtualServer[];
  /** The others ("TCP 10.0.0.9:80"): another program's, left alone. */
  readonly foreign: readonly string[];
}

/** "TCP 10.96.0.10:80". */
function label(vs: KernelVirtualServer): string {
  return `${vs.entry.protocol} ${joinHostPort(vs.entry.address, vs.entry.port)}`;
}

/** Every virtual server of `kernel`, split by `scope` (owned.ts inLayout). */
export async function layoutServers(kernel: IpvsKernel, scope: LayoutScope): Promise<LayoutServers> {
  const { state } = await readVirtualServers(kernel, () => true);
  const all = [...state.values()];
  return { layout: all.filter((v) => inLayout(v.entry.address, scope)), foreign: all.filter((v) => !inLayout(v.entry.address, scope)).map(label) };
}

/** The active (established) connections IPVS holds for `servers`, over all their real servers. Pure. */
export function activeConnections(servers: readonly KernelVirtualServer[]): number {
  return servers.reduce((sum, vs) => sum + vs.dests.reduce((n, d) => n + d.activeConns, 0), 0);
}

/** The clock and pause of {@link waitForDrain}; the real ones by default. */
export interface DrainClock {
  readonly now: () => number;
  readonly sleep: (ms: number) => Promise<void>;
}

const REAL_CLOCK: DrainClock = { now: Date.now, sleep: (ms) => new Promise((r) => setTimeout(r, ms)) };

/**
 * Poll `count` (the active connections left) every `everyMs` until it is 0
 * or `boundMs` has passed since the call.
 * @returns the first count, the last one (0 when drained) and how long it took.
 */
export async function waitForDrain(count: () => Promise<number>, boundMs: number, everyMs = 250, clock: DrainClock = REAL_CLOCK): Promise<DrainReport> {
  const start = clock.now();
  const first = await count();
  let left = first;
  while (left > 0 && clock.now() - start < boundMs) {
    await clock.sleep(Math.min(everyMs, Math.max(0, boundMs - (clock.now() - start))));
    left = await count();
  }
  return { connections: first, left, ms: clock.now() - start };
}

/**
 * The scope of IPVS mode's layout in this namespace: kube-ipvs0's
 * addresses (both families), the host's addresses, and the service CIDR of
 * `render.serviceCidr` (IPv4; default 10.96.0.0/12, as cleanup's).
 */
async function liveScope(render: BackendConfig['render']): Promise<LayoutScope> {
  const links = new RtnlLinkManager();
  try {
    const index = await links.find(DUMMY_INTERFACE);
    const families: IPFamily[] = ['IPv4', 'IPv6'];
    const bound = index === undefined ? [] : (await Promise.all(families.map((f) => links.addresses(index, f)))).flat().map((a) => a.address);
    const host = families.flatMap((f) => nodeAddresses(undefined, undefined, f).hostAddresses);
    const cidr = render.serviceCidr ?? DEFAULT_SERVICE_CIDR;
    return { serviceCIDR: cidr, bound: new Set(bound), host: new Set(host) };
  } finally {
    links.close();
  }
}

/** Run `fn` with an IPVS client of this namespace; undefined when the kernel has no IPVS (so no virtual server). */
async function withIpvs<T>(fn: (kernel: IpvsKernel) => Promise<T>): Promise<T | undefined> {
  let client: IpvsClient;
  try {
    client = await IpvsClient.open();
  } catch (err) {
    if (err instanceof IpvsUnavailableError) return undefined;
    throw err;
  }
  try {
    return await fn(client);
  } finally {
    client.close();
  }
}

/**
 * The virtual servers part of IPVS mode's survey: lines for `found`,
 * `unread` and `ignored`, and `cannotRemove` when they could not be read
 * (driver.ts ModeSurvey); `render.serviceCidr` as cleanup's.
 */
export async function surveyVirtualServers(opts: ModeOptions, render: BackendConfig['render'] = {}): Promise<{ found: string[]; unread: string[]; ignored: string[]; cannotRemove?: string }> {
  if (opts.netns !== undefined) {
    const why = `IPVS virtual servers: not read with --netns (netlink reads drover's own network namespace)`;
    return { found: [], unread: [why], ignored: [], cannotRemove: `${why}; run drover inside the namespace instead: ip netns exec ${opts.netns} drover takeover …` };
  }
  try {
    const scope = await liveScope(render);
    const servers = await withIpvs((kernel) => layoutServers(kernel, scope));
    if (servers === undefined) return { found: [], unread: [], ignored: [] };
    const n = servers.layout.length;
    const reals = servers.layout.reduce((sum, vs) => sum + vs.dests.length, 0);
    return {
      found: n > 0 ? [`${n} virtual server${n === 1 ? '' : 's'}, ${reals} real server${reals === 1 ? '' : 's'}, ${activeConnections(servers.layout)} active connections`] : [],
      unread: [],
      ignored: servers.foreign.length > 0 ? [`virtual servers outside the layout, left alone: ${servers.foreign.join(', ')}`] : [],
    };
  } catch (err) {
    const why = `IPVS virtual servers: ${(err as Error).message}`;
    return { found: [], unread: [why], ignored: [], cannotRemove: why };
  }
}

/**
 * The entries of IPVS's connection table in state ESTABLISHED whose virtual
 * address, port and protocol are one of `servers`'. Pure.
 *
 * Not IPVS's ActiveConn counter: it also counts SYN_SENT and SYN_RECV
 * (tcp_state_active_table in ip_vs_proto_tcp.c, since Linux 4.8: "ipvs:
 * count pre-established TCP states as active"), and while
 * another mode serves beside IPVS, IPVS's reply hook in FORWARD
 * (ip_vs_reply4, ip_vs_out_hook) looks a packet up by real server and
 * client address and port only. The SYN-ACK of a new connection that the
 * other mode sent to the same real server from a client port an old IPVS
 * connection used moves that old entry (TIME_WAIT, CLOSE) to SYN_SENT, where
 * it counts as active for IPVS's SYN_SENT timeout (2 minutes) though no
 * packet of the client reaches IPVS for it.
 */
export function establishedOn(connections: readonly IpvsConnection[], servers: readonly KernelVirtualServer[]): number {
  const keys = new Set(servers.map((vs) => virtualServerKey(vs.entry)));
  return connections.filter((c) => c.state === 'ESTABLISHED' && keys.has(virtualServerKey({ protocol: c.protocol, address: c.virtualAddress, port: c.virtualPort }))).length;
}

/**
 * IPVS mode's drain (driver.ts ModeDriver.drain): wait until no connection
 * of the layout's virtual servers is ESTABLISHED in IPVS's connection table
 * ({@link establishedOn}), at most `boundMs`, reading the table once a
 * second (each read walks IPVS's whole table). Closing connections
 * (FIN_WAIT, TIME_WAIT, and CLOSE_WAIT, half-closed, which may still carry
 * data one way) and UDP flows are not waited for.
 * @throws Error when IPVS, kube-ipvs0 or the connection table cannot be read.
 */
export async function drainIpvs(config: BackendConfig, boundMs: number): Promise<DrainReport> {
  const scope = await liveScope(config.render);
  const servers = await withIpvs((kernel) => layoutServers(kernel, scope));
  if (servers === undefined || servers.layout.length === 0) return { connections: 0, left: 0, ms: 0 };
  return waitForDrain(async () => establishedOn(await readIpvsConnections(), servers.layout), boundMs, 1000);
}
