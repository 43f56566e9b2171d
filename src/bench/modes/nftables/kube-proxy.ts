/**
 * kube-proxy's nftables layout for the benchmark's kube-proxy-style
 * baseline: a table `ip kube-proxy` as kube-proxy's nftables proxier
 * writes it (pkg/proxy/nftables/proxier.go; ported from the project's
 * kernel-cost probe, shared/limits/gen.mjs), and the `nft -f` transaction
 * its partial sync writes for one service port changing. Pure.
 *
 * The layout: a verdict map `service-ips` (`ip . protocol . port : goto
 * service-…`), looked up by chain `services`, which the nat base chains
 * jump to; per service port a chain `service-HASH-ns/name/proto/port` that
 * marks traffic from outside the cluster CIDR for masquerade and picks an
 * endpoint with `numgen random mod N vmap { 0 : goto endpoint-…, … }`; per
 * endpoint a chain `endpoint-HASH-ns/name/proto/port__ip/port` with the
 * hairpin mark and the DNAT; `mark-for-masquerade` and `masquerading` as
 * kube-proxy has them.
 *
 * A change, as kube-proxy's partial sync writes it for a changed service
 * port: its service chain and every endpoint chain of its new state added
 * (`add chain`, a no-op when it exists), flushed and filled again; its
 * `service-ips` element added when it is new, deleted when the service
 * port goes; the chains it no longer uses flushed now and deleted by the
 * next transaction (kube-proxy deletes stale chains in a later sync, as
 * older kernels do not see a chain unreferenced at once).
 *
 * The table lives in the node namespace beside drover's, with its base
 * chains hooked as kube-proxy's are (the kernel validates the chain graph
 * from them), but its ClusterIPs are moved out of drover's range (see
 * {@link KUBE_PROXY_IP_OFFSET}) so that it never answers the bench's
 * connections.
 */
import { createHash } from 'node:crypto';
import { ipv4ToUint32, uint32ToIPv4 } from '../../../model/addr.ts';
import type { ServicePort } from '../../../model/types.ts';
import { nftProtocol, safeIPv4, safePort, type NftProtocol } from '../../../modes/nftables/elements.ts';

/** The table, as nft names it. */
export const KUBE_PROXY_TABLE = 'ip kube-proxy';

/** Added to every ClusterIP (16 in the second octet: drover's 10.96.0.0/12 becomes 10.112.0.0/12). */
export const KUBE_PROXY_IP_OFFSET = 16 << 16;

const T = KUBE_PROXY_TABLE;

/** One endpoint of a service port in kube-proxy's layout. */
export interface KpEndpoint {
  readonly ip: string;
  readonly port: number;
  readonly chain: string;
}

/** One service port in kube-proxy's layout. */
export interface KpService {
  /** ServicePortName, "ns/name:port". */
  readonly key: string;
  /** The ClusterIP, moved by {@link KUBE_PROXY_IP_OFFSET}. */
  readonly clusterIP: string;
  readonly protocol: NftProtocol;
  readonly port: number;
  readonly chain: string;
  readonly endpoints: readonly KpEndpoint[];
}

const B32 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ234567';

/** The first 8 characters of base32(sha256(s)) (RFC 4648 alphabet, as kube-proxy's hashAndTruncate). */
export function hash8(s: string): string {
  // 8 characters take 40 bits: the first 5 bytes of the digest.
  let v = 0n;
  for (const b of createHash('sha256').update(s).digest().subarray(0, 5)) v = (v << 8n) | BigInt(b);
  let out = '';
  for (let i = 7; i >= 0; i--) out += B32[Number((v >> BigInt(i * 5)) & 31n)];
  return out;
}

/** Service port `sp` in kube-proxy's layout (ready endpoints only, as the bench has). */
export function kpService(sp: ServicePort): KpService {
  const protocol = nftProtocol(sp.protocol);
  const base = `${sp.namespace}/${sp.name}/${protocol}/${sp.portName || sp.port}`;
  const hashBase = `${sp.key}/${protocol}`;
  const endpoints = sp.endpoints
    .filter((e) => e.ready)
    .map((e) => ({ ip: safeIPv4(e.ip), port: safePort(e.port), chain: `endpoint-${hash8(`${hashBase}__${e.ip}:${e.port}`)}-${base}__${e.ip}/${e.port}` }));
  return {
    key: sp.key,
    clusterIP: uint32ToIPv4((ipv4ToUint32(safeIPv4(sp.clusterIP)) + KUBE_PROXY_IP_OFFSET) >>> 0),
    protocol,
    port: safePort(sp.port),
    chain: `service-${hash8(hashBase)}-${base}`,
    endpoints,
  };
}

/** The `service-ips` key of `s`. */
function elementKey(s: KpService): string {
  return `${s.clusterIP} . ${s.protocol} . ${s.port}`;
}

/** Every chain of `s`: its service chain, then its endpoint chains. */
export function chainsOf(s: KpService): string[] {
  return [s.chain, ...s.endpoints.map((e) => e.chain)];
}

/** The rules of `s`'s endpoint chains (`add rule` lines). */
function endpointRuleLines(s: KpService): string[] {
  return s.endpoints.flatMap((e) => [
    `add rule ${T} ${e.chain} ip saddr ${e.ip} jump mark-for-masquerade`,
    `add rule ${T} ${e.chain} meta l4proto ${s.protocol} dnat to ${e.ip}:${e.port} comment "${s.key}"`,
  ]);
}

/** The masquerade rule of `s`'s service chain: appended (`add`), or put first (`insert`) into a chain that has its pick already. */
const masqueradeLine = (s: KpService, clusterCIDR: string, verb: 'add' | 'insert' = 'add'): string =>
  `${verb} rule ${T} ${s.chain} ip daddr ${s.clusterIP} ${s.protocol} dport ${s.port} ip saddr != ${clusterCIDR} jump mark-for-masquerade comment "${s.key} cluster IP"`;

/** The endpoint pick of `s`'s service chain, with its anonymous verdict map; none without endpoints. */
function pickLines(s: KpService): string[] {
  if (s.endpoints.length === 0) return [];
  const vmap = s.endpoints.map((e, i) => `${i} : goto ${e.chain}`).join(', ');
  return [`add rule ${T} ${s.chain} numgen random mod ${s.endpoints.length} vmap { ${vmap} } comment "${s.key}"`];
}

/** The rules of `s`'s chains (`add rule` lines), endpoint chains first (a goto needs its chain). */
function ruleLines(s: KpService, clusterCIDR: string): string[] {
  return [...endpointRuleLines(s), masqueradeLine(s, clusterCIDR), ...pickLines(s)];
}

const element = (s: KpService): string => `${elementKey(s)} : goto ${s.chain}`;

/** Most elements on one `add element` line. */
const ELEMENTS_PER_LINE = 1000;

/**
 * The `nft -f` script that writes the whole table for `services` (deleting
 * it first when it exists), as kube-proxy's full sync into an empty table:
 * the same chains, rules and elements, in one transaction.
 *
 * Ordered for the kernel's cost: each service port's chains, then at once
 * its endpoint pick, and only then every other rule, the masquerade rule
 * of a service chain inserted before its pick (so that every chain ends
 * up as kube-proxy's). Binding a rule to an anonymous set (the pick's
 * `vmap { … }`) makes the kernel walk the whole transaction so far
 * (nf_tables_api.c, `nft_set_trans_bind`), so with every chain declared
 * before any rule, a full sync costs the kernel time quadratic in its
 * size: at 30,000 service ports of 10 endpoints some 330,000 chains walked
 * once per service port, beyond 15 minutes of one CPU in the kernel (a
 * soft lockup on a 2-core machine), and 40 s at 4,000. This order walks
 * only the chains and picks before each: 16 s at 4,000, about 2 minutes
 * at 10,000, on a busy 2-core machine (load 14-19). Naming each anonymous
 * set also scans every set of the table (`nf_tables_set_alloc_name`),
 * which no order avoids: the table stays quadratic to write, a cost of
 * kube-proxy's layout, which is why the bench writes it only at the sizes
 * that measure its baseline (--detail-max).
 */
export function kubeProxyTableScript(services: readonly KpService[], clusterCIDR: string): string {
  const lines = [
    `add table ${T}`,
    `delete table ${T}`,
    `add table ${T}`,
    `add chain ${T} mark-for-masquerade`,
    `add rule ${T} mark-for-masquerade meta mark set meta mark or 0x4000`,
    `add chain ${T} masquerading`,
    `add rule ${T} masquerading meta mark and 0x4000 == 0 return`,
    `add rule ${T} masquerading meta mark set meta mark xor 0x4000`,
    `add rule ${T} masquerading masquerade fully-random`,
    `add map ${T} service-ips { type ipv4_addr . inet_proto . inet_service : verdict ; }`,
    `add chain ${T} services`,
    `add rule ${T} services ip daddr . meta l4proto . th dport vmap @service-ips`,
    `add chain ${T} nat-prerouting { type nat hook prerouting priority dstnat ; policy accept ; }`,
    `add rule ${T} nat-prerouting jump services`,
    `add chain ${T} nat-output { type nat hook output priority -100 ; policy accept ; }`,
    `add rule ${T} nat-output jump services`,
    `add chain ${T} nat-postrouting { type nat hook postrouting priority srcnat ; policy accept ; }`,
    `add rule ${T} nat-postrouting jump masquerading`,
  ];
  for (const s of services) {
    for (const c of chainsOf(s)) lines.push(`add chain ${T} ${c}`);
    lines.push(...pickLines(s));
  }
  for (const s of services) lines.push(...endpointRuleLines(s), masqueradeLine(s, clusterCIDR, 'insert'));
  const served = services.filter((s) => s.endpoints.length > 0);
  for (let k = 0; k < served.length; k += ELEMENTS_PER_LINE) lines.push(`add element ${T} service-ips { ${served.slice(k, k + ELEMENTS_PER_LINE).map(element).join(', ')} }`);
  return `${lines.join('\n')}\n`;
}

/** One kube-proxy-style transaction and the stale chains it leaves for the next one. */
export interface KpChange {
  /** The `nft -f` script ("" when nothing changes). */
  readonly script: string;
  /** Chains flushed by this transaction and no longer used: the next transaction deletes them. */
  readonly stale: readonly string[];
}

/**
 * kube-proxy's partial sync for one service port going from `before` to
 * `after` (see the module comment); `stale` are the chains an earlier
 * transaction flushed and left, deleted first unless `after` uses them again.
 */
export function kubeProxyChange(before: KpService | undefined, after: KpService | undefined, stale: readonly string[], clusterCIDR: string): KpChange {
  const used = new Set(after ? chainsOf(after) : []);
  const lines: string[] = [];
  for (const c of stale) if (!used.has(c)) lines.push(`delete chain ${T} ${c}`);
  const servedBefore = before !== undefined && before.endpoints.length > 0;
  const servedAfter = after !== undefined && after.endpoints.length > 0;
  if (servedBefore && (!servedAfter || elementKey(before) !== elementKey(after!) || before.chain !== after!.chain)) {
    lines.push(`delete element ${T} service-ips { ${elementKey(before)} }`);
  }
  if (after) {
    for (const c of chainsOf(after)) lines.push(`add chain ${T} ${c}`, `flush chain ${T} ${c}`);
    lines.push(...ruleLines(after, clusterCIDR));
  }
  if (servedAfter && !(servedBefore && elementKey(before!) === elementKey(after!) && before!.chain === after!.chain)) {
    lines.push(`add element ${T} service-ips { ${element(after!)} }`);
  }
  const nowStale = (before ? chainsOf(before) : []).filter((c) => !used.has(c));
  for (const c of nowStale) lines.push(`flush chain ${T} ${c}`);
  return { script: lines.length === 0 ? '' : `${lines.join('\n')}\n`, stale: nowStale };
}
