/**
 * What `drover takeover --mode nftables` prints, survey and plan, on a node
 * that holds iptables mode's state of one Service with a ClusterIP and a
 * NodePort (iptables-nft, IPv4 only): the text the unit tests build from a
 * fake survey and the kernel test reads from a real one; and the fakes the
 * unit tests of the check trace.
 */
import type { ExecutionContext } from 'ava';
import type { TraceContext } from '../../src/inspect/trace.ts';
import type { Topology } from '../../src/testbed/topology.ts';
import { modeDriver } from '../../src/modes/registry.ts';
import { ipv4Frontends, type Snapshot } from '../../src/model/types.ts';
import { ep, snap, sp } from './snapshots.ts';
import { startLoads } from './faults.ts';

/** The survey and the plan on iptables mode's state, taken over with `--netns` (see the module comment). */
export const IPTABLES_TO_NFTABLES_PLAN =
  'found:\n' +
  '  iptables mode: iptables-nft IPv4: 13 chains, 15 hook rules\n' +
  '  IPVS mode: nothing\n' +
  "    not read: IPVS virtual servers: not read with --netns (netlink reads drover's own network namespace)\n" +
  '  nftables mode: nothing\n' +
  '  kube-proxy nftables mode: nothing\n' +
  'plan:\n' +
  '  1. full sync in nftables mode, from nothing\n' +
  '  2. check every frontend: iptables mode must send it to the same endpoints as nftables mode\n' +
  '  3. remove iptables mode\n';

/** The node's addresses of the check's unit tests. */
export const NODE = { IPv4: ['192.168.100.1'], IPv6: [] as string[] };

/** `snapshot` fully synced into mode `mode`'s fakes (service CIDR 172.30.0.0/16), and the trace context of what they hold. */
export async function traced(mode: string, snapshot: Snapshot): Promise<TraceContext> {
  const fake = await modeDriver(mode).fake({ render: { clusterCIDR: '10.244.0.0/16', masqueradeAll: false }, nodeAddresses: NODE.IPv4, serviceCIDR: '172.30.0.0/16' });
  await fake.backend.sync(snapshot, { full: true, changed: new Set() });
  return fake.trace();
}

/** Service nsd/web:http: ClusterIP 172.30.0.50:80, NodePort 30080, `endpoints` ("ip:port"). */
export const web = (endpoints: string[]): Snapshot =>
  snap(sp('nsd/web:http', '172.30.0.50', 80, endpoints.map((e) => ep(e)), { type: 'NodePort', frontends: ipv4Frontends('172.30.0.50', 30080) }));

/** A frontend that traffic runs to during a takeover: its name in the log, and where. */
export type TrafficFrontend = readonly [string, { readonly host: string; readonly port: number; readonly protocol?: 'tcp' | 'udp' }];

/**
 * Run `act` (a takeover, whose stdout ends "done in N ms…") with steady
 * traffic from the topology's first client to each of `frontends`: 4
 * long-lived connections (or UDP flows) each making a request every 50 ms,
 * and a new one every 50 ms, from 0.5 s before `act` until 1 s after it.
 * Logs each frontend's counts under `label`, and checks that traffic ran
 * and that none failed and none was lost (also stopped on failure).
 * @returns what `act` resolved with.
 */
export async function underTraffic<R extends { readonly stdout: string }>(t: ExecutionContext, topo: Topology, label: string, frontends: readonly TrafficFrontend[], act: () => Promise<R>): Promise<R> {
  const opts = { held: 4, intervalMs: 50, timeoutMs: 3000, heldTimeoutMs: 5000 };
  const loads = await startLoads(t, topo, frontends.map(([, f]) => ({ ...f, ...opts })));
  await new Promise((r) => setTimeout(r, 500));
  const r = await act();
  await new Promise((r) => setTimeout(r, 1000));
  const summaries = await Promise.all(loads.map((l) => l.stop()));
  const ms = /done in ([0-9]+) ms/.exec(r.stdout)?.[1];
  for (const [i, [what]] of frontends.entries()) {
    const s = summaries[i]!;
    t.log(`takeover ${label}, ${what}: attempted ${s.attempted}, failed ${s.failed}, lost ${s.lost} (held ${s.held}, ${s.heldRequests} requests on them); old state gone ${ms} ms after the start`);
    t.true(s.attempted > 10 && s.heldRequests > 0, `${what}: traffic ran`);
    t.is(s.failed, 0, `${what}: ${JSON.stringify(s.errors)}`);
    t.is(s.lost, 0, `${what}: ${JSON.stringify(s.lostErrors)}`);
  }
  return r;
}
