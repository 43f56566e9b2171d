/**
 * Pure planning of a service port's external frontends in IPVS mode, the
 * way kube-proxy's IPVS proxier programs them (pkg/proxy/ipvs/proxier.go,
 * syncProxyRules: "Capture externalIPs", "Capture load-balancer ingress",
 * the NodePort block; syncEndpoint with onlyNodeLocalEndpoints =
 * ExternalPolicyLocal). Each family's proxier programs the external IPs,
 * ingress IPs, source ranges and node addresses of its family only (model/
 * frontends.ts), as kube-proxy's IPv4 and IPv6 proxiers do; the family is
 * the ClusterIP's (`base.address`). The text below names the IPv4 sets; the
 * IPv6 family's are named KUBE-6-… in the kernel (ipset.ts familySetName).
 *
 * Per service port, in kube-proxy's order, one virtual server (same
 * protocol, scheduler and session affinity as the ClusterIP one) for:
 * - every IPv4 external IP, at externalIP:port. Its address is bound to
 *   kube-ipvs0 unless it is already an address of another interface of the
 *   host ("We must not add the address to the dummy device if it exist on
 *   another interface"); set entry "ip,proto:port" in KUBE-EXTERNAL-IP
 *   (masqueraded), or KUBE-EXTERNAL-IP-LOCAL under externalTrafficPolicy
 *   Local (not masqueraded: the client address is kept);
 * - every IPv4 LoadBalancer ingress IP in VIP mode (ipMode Proxy is skipped:
 *   the node must not capture it, model/policy.ts externallyAccessible), at
 *   ingressIP:port, bound to kube-ipvs0 like an external IP; entries in
 *   KUBE-LOAD-BALANCER, KUBE-LOAD-BALANCER-LOCAL under policy Local, and with
 *   IPv4 loadBalancerSourceRanges (model/frontend-index.ts FrontendEntry.sourceRanges: none when
 *   every range is IPv6 or one is 0.0.0.0/0, and then every client is let
 *   in, as kube-proxy's IPv4 proxier and iptables mode do):
 *   KUBE-LOAD-BALANCER-FW, one KUBE-LOAD-BALANCER-SOURCE-CIDR entry
 *   "ip,proto:port,range" per range (host bits cleared), and
 *   "ip,proto:port,ip" in KUBE-LOAD-BALANCER-SOURCE-IP when a range holds
 *   this node's IPv4 InternalIP (a VIP that loops back from the node, as
 *   kube-proxy's allowFromNode);
 * - the NodePort, on every node address given (`nodePortIPs`: the host's
 *   IPv4 addresses without loopback and kube-ipvs0, or those in
 *   `--nodeport-addresses`), at nodeIP:nodePort, never bound; entry: the
 *   port in KUBE-NODE-PORT-TCP / -UDP (bitmap:port), and in
 *   KUBE-NODE-PORT-LOCAL-TCP / -UDP under policy Local; for SCTP
 *   "nodeIP,sctp:nodePort" in KUBE-NODE-PORT-SCTP (-LOCAL-SCTP), as
 *   kube-proxy.
 *
 * Real servers are the endpoint policy's (model/policy.ts
 * categorizeEndpoints): the `cluster` set under externalTrafficPolicy
 * Cluster, the `local` set under Local; desired.ts gives each its
 * KUBE-LOOP-BACK (hairpin) entry. rules/ipvs/static.rules matches the sets.
 *
 * With externalTrafficPolicy Local and no local endpoint:
 * - when some endpoint exists on another node (the policy's
 *   hasAnyEndpoints), the external virtual servers get the cluster set as
 *   real servers, as kube-proxy's IPVS proxier does (syncEndpoint, "Allow
 *   access from local PODs even if no local endpoints exist"), so that this
 *   node's pods and the node itself still reach the Service through its
 *   external frontends, as kube-proxy's iptables mode short-circuits them.
 *   External clients are DROPPED, as kube-proxy's iptables mode drops them
 *   ("has no local endpoints"), where kube-proxy's IPVS mode lets them
 *   through (kubernetes issues 71596, 124260): each such virtual server's
 *   "ip,proto:port" goes into drover's own set KUBE-EXTERNAL-NO-LOCAL, and
 *   filter KUBE-PROXY-FIREWALL (INPUT, before IPVS's LOCAL_IN hook) drops
 *   new connections to it that do not come from the cluster CIDR, so the
 *   client times out and a load balancer's health check takes the node out.
 *   The node's own connections never pass INPUT (IPVS takes them at
 *   LOCAL_OUT) and nat KUBE-SERVICES marks them for masquerade, since
 *   their source is the frontend's own address;
 * - when no endpoint exists anywhere, it is REFUSED, as by kube-proxy's
 *   REJECT: IPVS finds no destination and answers with ICMP port
 *   unreachable (ip_vs_leave), which TCP reports as ECONNREFUSED.
 *
 * An address bound to kube-ipvs0 also goes into KUBE-IPVS-IPS (filter
 * KUBE-IPVS-FILTER).
 */
import { frontendEntries } from '../../model/frontend-index.ts';
import { parseIP } from '../../model/addr.ts';
import type { EndpointSets } from '../../model/policy.ts';
import type { Endpoint, NodeInfo, ServicePort } from '../../model/types.ts';
import { validateVirtualServer, type VirtualServer } from '../../kernel/ipvs/codec.ts';
import {
  EXTERNAL_IP_LOCAL_SET,
  EXTERNAL_IP_SET,
  EXTERNAL_NO_LOCAL_SET,
  IPVS_IPS_SET,
  LOAD_BALANCER_FW_SET,
  LOAD_BALANCER_LOCAL_SET,
  LOAD_BALANCER_SET,
  LOAD_BALANCER_SOURCE_CIDR_SET,
  LOAD_BALANCER_SOURCE_IP_SET,
  NODE_PORT_LOCAL_SCTP_SET,
  NODE_PORT_LOCAL_TCP_SET,
  NODE_PORT_LOCAL_UDP_SET,
  NODE_PORT_SCTP_SET,
  NODE_PORT_TCP_SET,
  NODE_PORT_UDP_SET,
  type OwnedSetName,
} from './ipset.ts';
import { ipEntry, ipPortEntry, ipPortIPEntry, ipPortNetEntry, IpsetValidationError, portEntry } from '../../kernel/ipset/ipset.ts';

/** One entry of one of drover's sets. */
export interface SetEntry {
  readonly set: OwnedSetName;
  /** As `ipset save` prints it, validated. */
  readonly entry: string;
}

/** Which frontend a virtual server serves. */
export type FrontendKind = 'externalIP' | 'loadBalancer' | 'nodePort';

/** The addresses of this host that the external frontends depend on, read when the backend starts (node-ips.ts). */
export interface NodeAddresses {
  /** Addresses of the backend's family that get one virtual server per NodePort, sorted; empty: NodePorts are not programmed. */
  readonly nodePortIPs: readonly string[];
  /** Addresses of the backend's family of the host's interfaces other than kube-ipvs0: an external or ingress IP among them is not bound to kube-ipvs0. */
  readonly hostAddresses: readonly string[];
}

/** No node address known: no NodePort virtual server, every external IP bound. */
export const NO_NODE_ADDRESSES: NodeAddresses = Object.freeze({ nodePortIPs: [], hostAddresses: [] });

/**
 * The parts of one external virtual server; desired.ts turns `endpoints`
 * into its real servers and their KUBE-LOOP-BACK entries, as for the
 * ClusterIP.
 */
export interface ExternalFrontend {
  readonly kind: FrontendKind;
  readonly vs: VirtualServer;
  /** The endpoints it sends to, in endpoint order: the policy's cluster set, or its local set under externalTrafficPolicy Local (the cluster set when only other nodes have endpoints). */
  readonly endpoints: readonly Endpoint[];
  /** True when `vs.address` is bound to kube-ipvs0. */
  readonly bind: boolean;
  /** Its entries in the frontend sets (not KUBE-LOOP-BACK). */
  readonly entries: readonly SetEntry[];
}

/** NodePort sets per protocol: [masquerade set, Local set]. */
const NODE_PORT_SETS: Readonly<Record<VirtualServer['protocol'], readonly [OwnedSetName, OwnedSetName]>> = {
  TCP: [NODE_PORT_TCP_SET, NODE_PORT_LOCAL_TCP_SET],
  UDP: [NODE_PORT_UDP_SET, NODE_PORT_LOCAL_UDP_SET],
  SCTP: [NODE_PORT_SCTP_SET, NODE_PORT_LOCAL_SCTP_SET],
};

/**
 * The external frontends of `sp` on `node` (Snapshot.node), with `sets`
 * its endpoint sets (model/policy.ts categorizeEndpoints). `base` is the
 * ClusterIP virtual server, whose scheduler and persistence they share.
 * Frontends with the same address, port and protocol as an earlier one (or
 * as the ClusterIP) are left out. Pure.
 * @throws IpsetValidationError for an address, port or protocol that is not
 *   valid; IpvsValidationError for a virtual server IPVS would refuse (the
 *   model validates first; this is a second line of defence).
 */
export function externalFrontends(sp: ServicePort, sets: EndpointSets, base: VirtualServer, addresses: NodeAddresses, node?: NodeInfo): ExternalFrontend[] {
  const local = sp.externalTrafficPolicy === 'Local';
  const here = sets.local ?? [];
  // Endpoints elsewhere but none here under policy Local: external clients
  // are dropped, this node's pods and the node itself use the cluster set.
  const dropped = local && sets.hasAnyEndpoints && here.length === 0;
  const endpoints = (local && !dropped ? here : sets.cluster) ?? [];
  const proto = base.protocol;
  const family = base.address.includes(':') ? 'IPv6' : 'IPv4';
  const host = new Set(addresses.hostAddresses);
  const out: ExternalFrontend[] = [];
  const seen = new Set<string>([`${base.address}:${base.port}`]);
  const add = (kind: FrontendKind, address: string, port: number, bind: boolean, own: readonly SetEntry[]): void => {
    const parsed = parseIP(address);
    if (parsed === undefined || parsed.text !== address || (parsed.family === 6) !== (family === 'IPv6')) throw new IpsetValidationError(`${family} address`, address);
    if (seen.has(`${address}:${port}`)) return;
    seen.add(`${address}:${port}`);
    const vs: VirtualServer = { ...base, address, port };
    validateVirtualServer(vs);
    const entries: SetEntry[] = [...own];
    if (dropped) entries.push({ set: EXTERNAL_NO_LOCAL_SET, entry: ipPortEntry(address, proto, port) });
    if (bind) entries.push({ set: IPVS_IPS_SET, entry: ipEntry(address) });
    out.push({ kind, vs, endpoints, bind, entries });
  };

  // The frontends are the model's (model/frontend-index.ts), in kube-proxy's order after the ClusterIP.
  for (const e of frontendEntries(sp, family, node)) {
    if (e.kind === 'ExternalIP') {
      add('externalIP', e.address, e.port, !host.has(e.address), [{ set: local ? EXTERNAL_IP_LOCAL_SET : EXTERNAL_IP_SET, entry: ipPortEntry(e.address, proto, e.port) }]);
    } else if (e.kind === 'LoadBalancer') {
      const entry = ipPortEntry(e.address, proto, e.port);
      const own: SetEntry[] = [{ set: LOAD_BALANCER_SET, entry }];
      if (local) own.push({ set: LOAD_BALANCER_LOCAL_SET, entry });
      if (e.sourceRanges.length > 0) {
        own.push({ set: LOAD_BALANCER_FW_SET, entry });
        for (const r of e.sourceRanges) own.push({ set: LOAD_BALANCER_SOURCE_CIDR_SET, entry: ipPortNetEntry(e.address, proto, e.port, r.text.slice(0, r.text.indexOf('/')), r.bits) });
        if (e.allowFromNode) own.push({ set: LOAD_BALANCER_SOURCE_IP_SET, entry: ipPortIPEntry(e.address, proto, e.port, e.address) });
      }
      add('loadBalancer', e.address, e.port, !host.has(e.address), own);
    } else if (e.kind === 'NodePort') {
      // Every NodePort address of the model's entry is one of this host's, read when the backend started.
      const [masqSet, localSet] = NODE_PORT_SETS[proto];
      for (const nodeIP of addresses.nodePortIPs) {
        const entry = proto === 'SCTP' ? ipPortEntry(nodeIP, proto, e.port) : portEntry(e.port);
        add('nodePort', nodeIP, e.port, false, [{ set: masqSet, entry }, ...(local ? [{ set: localSet, entry }] : [])]);
      }
    }
  }
  return out;
}
