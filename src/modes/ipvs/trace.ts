/**
 * IPVS in `drover trace` (the engine is src/inspect/trace.ts; IPVS mode's
 * iptables rules and ipsets are walked by src/modes/iptables/trace.ts).
 *
 * IPVS hooks LOCAL_IN after filter INPUT (priority NF_IP_PRI_NAT_SRC - 2)
 * and LOCAL_OUT after nat OUTPUT (NF_IP_PRI_NAT_DST + 1), and sends the
 * packet it schedules back through LOCAL_OUT and POSTROUTING (ip_vs_nat_xmit,
 * net/netfilter/ipvs/ip_vs_xmit.c), which is where the engine lets a
 * dataplane take a connection:
 *
 *   from outside the node: nat PREROUTING → filter INPUT → IPVS → filter OUTPUT → nat POSTROUTING
 *   from the node itself:  nat OUTPUT → IPVS → filter OUTPUT → nat POSTROUTING
 *
 * Packets from outside reach IPVS only when their destination is one of the
 * node's addresses (a ClusterIP bound on kube-ipvs0). The real servers and
 * their probabilities come from schedule.ts. IPVS steps and verdicts carry
 * the table `ipvs`; {@link ipvsTraceFormat} prints them.
 */
import type { DataplaneBranch, DataplaneClaim, NatExit, Packet, Step, TraceContext, TraceDataplane } from '../../inspect/trace.ts';
import type { TraceFormat } from '../../inspect/trace-format.ts';
import { joinHostPort } from '../../model/addr.ts';
import type { IPFamily } from '../../model/types.ts';
import { iptablesTraceContext } from '../shared/kube-chains/trace.ts';
import { virtualServerLabel, type IpvsLive } from './live.ts';
import type { KernelVirtualServer } from './reconcile.ts';
import { ipvsSchedule } from './schedule.ts';

/** The `table` of IPVS steps and verdicts in a trace (and its `--json`). */
const IPVS_TABLE = 'ipvs';

/** The virtual server a packet is addressed to. */
function virtualServerFor(virtualServers: ReadonlyMap<string, KernelVirtualServer>, pkt: Packet): KernelVirtualServer | undefined {
  return virtualServers.get(`${pkt.proto.toUpperCase()}/${pkt.dst}:${pkt.dport}`);
}

/** What IPVS does with a new connection to `vs`: the real servers it schedules, or why it refuses. */
function schedule(vs: KernelVirtualServer, packet: Packet): { notes: string[]; branches: DataplaneBranch[] } {
  const e = vs.entry;
  const where = `${virtualServerLabel(e)} ${e.scheduler}`;
  const notes: string[] = [];
  if (e.persistent) notes.push(`virtual server ${where} is persistent (${e.persistent.timeoutSeconds} s): assumed no persistence template for this client yet (a returning client goes to the real server it used before)`);
  for (const d of vs.dests.filter((x) => x.weight === 0)) notes.push(`real server ${joinHostPort(d.address, d.port)} has weight 0 (quiesced): no new connections`);
  const s = ipvsSchedule(e, vs.dests);
  if (s.kind === 'refused') return { notes, branches: [{ probability: 1, ends: { kind: 'refused', where, reason: s.reason } }] };
  if (s.kind === 'unknown') {
    return { notes, branches: [{ probability: 1, ends: { kind: 'unknown', table: IPVS_TABLE, chain: where, line: 0, reason: `cannot evaluate: ${s.reason}` } }] };
  }
  const branches = s.branches.map(({ dest, probability }): DataplaneBranch => {
    const step: Step = {
      table: IPVS_TABLE,
      chain: where,
      line: 0,
      rule: `-> ${joinHostPort(dest.address, dest.port)} ${dest.forwarding === 'masq' ? 'Masq' : dest.forwarding} weight ${dest.weight}`,
      ...(probability < 1 ? { note: `taken with probability ${probability.toFixed(4)}` } : {}),
    };
    if (dest.forwarding !== 'masq') {
      return { probability, step, ends: { kind: 'unknown', table: IPVS_TABLE, chain: where, line: 0, reason: `cannot evaluate forwarding method ${dest.forwarding} (only Masq is traced)` } };
    }
    return { probability, step, sends: { ...packet, dst: dest.address, dport: dest.port } };
  });
  return { notes, branches };
}

/**
 * IPVS as a trace dataplane, over the kernel's virtual servers by
 * virtualServerKey ("TCP/10.96.0.10:80"). A connection iptables did not
 * DNAT goes to its virtual server, or else to the catch-all virtual server
 * of port 0 (ip_vs_ctl.c ip_vs_service_find).
 */
export function ipvsDataplane(virtualServers: ReadonlyMap<string, KernelVirtualServer>): TraceDataplane {
  return {
    afterNat({ origin, packet, dnatted, local }: NatExit): DataplaneClaim {
      // IPVS sees the packet as iptables left it; a packet iptables DNATed is not for a virtual server.
      if (dnatted) return { notes: [] };
      const exact = virtualServerFor(virtualServers, packet);
      const catchAll = exact ? undefined : virtualServerFor(virtualServers, { ...packet, dport: 0 });
      const vs = exact ?? catchAll;
      const label = (port: number) => `${packet.proto.toUpperCase()} ${joinHostPort(packet.dst, port)}`;
      if (!vs) return { notes: [`no IPVS virtual server for ${label(packet.dport)}`] };
      const notes = catchAll ? [`no IPVS virtual server for ${label(packet.dport)}; the catch-all virtual server ${label(0)} takes the connection`] : [];
      if (origin === 'outside' && !local) {
        notes.push(`${packet.dst} is not one of the node's addresses (not bound on kube-ipvs0), so IPVS does not see this packet from outside the node`);
        return { notes };
      }
      return { notes, takes: schedule(vs, packet) };
    },
  };
}

/**
 * The trace context of IPVS mode over a live read-back (live.ts
 * readIpvsLive with `tables`): the iptables rules of `family` (`tables`,
 * or for IPv6 `tables6`, the ip6tables rules over the KUBE-6- sets) and the
 * ipsets, walked by the iptables evaluator, and IPVS as the dataplane (a
 * packet's key finds the virtual servers of its own family only). `local`
 * holds the node's addresses of the packet's family (kube-ipvs0's included),
 * as iptables mode's live.ts localAddresses reads them. Pure.
 */
export function ipvsTraceContext(live: Pick<IpvsLive, 'tables' | 'tables6' | 'sets' | 'virtualServers'>, local: ReadonlySet<string>, family: IPFamily = 'IPv4'): TraceContext {
  return { ...iptablesTraceContext(family === 'IPv6' ? live.tables6 : live.tables, local, live.sets), dataplane: ipvsDataplane(live.virtualServers) };
}

/**
 * How IPVS prints in a trace: a step is the real server it picks, under the
 * header `ipvs <virtual server> <scheduler>` (`-> 10.244.1.2:8080 Masq
 * weight 1`; IPv6 addresses in brackets, `ipvs TCP [fd00:96::10]:80 rr`,
 * `-> [fd00:244:1::2]:8080`), and the endpoints are real servers.
 */
export const ipvsTraceFormat: TraceFormat = {
  table: IPVS_TABLE,
  step: (s) => s.rule,
  describe(v) {
    if (v.kind === 'refused') return `refused by IPVS virtual server ${v.where}: ${v.reason}`;
    if (v.kind === 'unknown') return `${IPVS_TABLE} ${v.chain}: ${v.reason}`;
    return undefined;
  },
  target: { verb: 'IPVS to', one: 'real server', many: 'real servers' },
};
