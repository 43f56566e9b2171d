/**
 * What `drover takeover --mode nftables` prints, survey and plan, on a node
 * that holds iptables mode's state of one Service with a ClusterIP and a
 * NodePort (iptables-nft, IPv4 only): the text the unit tests build from a
 * fake survey and the kernel test reads from a real one; and the fakes the
 * unit tests of the check trace.
 */
import type { TraceContext } from '../../src/inspect/trace.ts';
import { modeDriver } from '../../src/modes/registry.ts';
import { ipv4Frontends, type Snapshot } from '../../src/model/types.ts';
import { ep, snap, sp } from './snapshots.ts';

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
