/**
 * The layout of nftables mode: drover's own table `ip drover`, its sets,
 * maps and chains. The chains are fixed but for one rule per endpoint
 * count in use; what changes with Services and endpoints is set and map
 * elements (elements.ts), so that the common changes cost the kernel a
 * few milliseconds (a plain element) and never the validation of the whole
 * chain graph that a new jump or goto costs it (see README, "nftables
 * mode").
 *
 * A *frontend* is an address, a protocol and a port clients connect to:
 * a ClusterIP, an external IP, a LoadBalancer ingress IP (`ipMode: VIP`),
 * or a NodePort on one of this node's addresses (one frontend per address,
 * as IPVS mode has one virtual server per address). How a new connection
 * to one is handled, after kube-proxy's proxiers (pkg/proxy/iptables and
 * pkg/proxy/nftables proxier.go):
 *
 * 1. nat `prerouting` (priority dstnat) and `output` (-100) jump to
 *    `services`, which returns at once unless the frontend is in
 *    `service-ips`. A LoadBalancer frontend in `firewall` drops clients
 *    that `firewall-allow` (its `loadBalancerSourceRanges`) does not hold.
 *    ClusterIP traffic from outside `--cluster-cidr` (all of it with
 *    `--masquerade-all`), and all traffic to an external frontend under
 *    externalTrafficPolicy Cluster, get the masquerade mark.
 * 2. A frontend in `external-local` (externalTrafficPolicy Local) goes to
 *    `external-local`: pods and the node itself (masqueraded) go on to
 *    every endpoint (`pick`); other clients keep their address and get
 *    one of this node's endpoints (map `local-endpoints`), or are dropped
 *    when it has none.
 * 3. `pick`: a client with ClientIP affinity goes to the endpoint it had
 *    (map `affinity`, filled by `affinity-prerouting`/`-output` with the
 *    timeout of the frontend's `affinity-T` set); otherwise, for the
 *    frontend's endpoint count N (set `endpoint-count-N`), DNAT to
 *    `endpoints[frontend . numgen random mod N]`: each endpoint with
 *    probability 1/N. One such rule per endpoint count in use, not per
 *    Service.
 * 4. nat `postrouting` (srcnat) jumps to `masquerading`: hairpin traffic
 *    (an endpoint reaching itself through its Service, set `hairpin`) is
 *    marked, and marked packets are masqueraded (`fully-random`), as
 *    kube-proxy's KUBE-POSTROUTING does.
 * 5. filter `input`, `forward` and `output` (-110) send new connections to
 *    `endpoints-check`: a frontend in `no-endpoints` is rejected (ICMP port
 *    unreachable); one in `no-local-endpoints` (internalTrafficPolicy Local,
 *    endpoints on other nodes only) dropped. `forward` first drops packets
 *    conntrack marks INVALID (unless `--conntrack-tcp-be-liberal`), as
 *    kube-proxy's forward chain does: their DNAT is not undone, and a
 *    client answering one provokes a reset (kubernetes issue 74839).
 *
 * Every rule carries a comment; a full sync compares each chain's rules by
 * their comments and each set by its type (plan.ts).
 */
import { parseCIDR } from '../../model/addr.ts';
import type { IPFamily } from '../../model/types.ts';
import type { RenderOptions } from '../../config/render.ts';
import { UnsafeElementError } from './elements.ts';

/** A table of drover's: its nft family and name. */
export interface NftTable {
  readonly family: 'ip' | 'ip6';
  readonly name: 'drover';
}

/**
 * What differs between drover's IPv4 table `ip drover` and its IPv6 table
 * `ip6 drover`, which have the same sets, maps and chains: the table, the
 * address type of set keys (nft(8) "ipv4_addr", "ipv6_addr"), the payload
 * protocol of address matches and of `dnat … to` (`ip daddr`, `ip6 daddr`),
 * and the prefix length of one address. kube-proxy's nftables proxier
 * builds its IPv6 table the same way, from one template per family
 * (pkg/proxy/nftables/proxier.go: ipvX_addr, ipX, "ip6 daddr").
 */
export interface NftFamily {
  readonly family: IPFamily;
  readonly table: NftTable;
  readonly addr: 'ipv4_addr' | 'ipv6_addr';
  readonly l3: 'ip' | 'ip6';
  readonly hostBits: 32 | 128;
}

/** Each family's table and syntax; drover reads and writes no other table. */
export const NFT_FAMILIES: Readonly<Record<IPFamily, NftFamily>> = Object.freeze({
  IPv4: { family: 'IPv4', table: { family: 'ip', name: 'drover' }, addr: 'ipv4_addr', l3: 'ip', hostBits: 32 },
  IPv6: { family: 'IPv6', table: { family: 'ip6', name: 'drover' }, addr: 'ipv6_addr', l3: 'ip6', hostBits: 128 },
});

/** The {@link NftFamily} of `family` (default IPv4). */
export function nftFamily(family: IPFamily = 'IPv4'): NftFamily {
  return NFT_FAMILIES[family];
}

/** The IPv4 table, `ip drover`. */
export const TABLE = NFT_FAMILIES.IPv4.table;

/** A table as nft names it in a command: `ip drover`, `ip6 drover`. */
export function tableRef(family: IPFamily = 'IPv4'): string {
  const t = NFT_FAMILIES[family].table;
  return `${t.family} ${t.name}`;
}

/** The masquerade bit of the packet mark, kube-proxy's (`--masquerade-bit` 14). */
export const MASQUERADE_MARK = '0x00004000';

/** Sets of frontends. */
export const SERVICE_IPS = 'service-ips';
export const CLUSTER_IPS = 'cluster-ips';
export const EXTERNAL_IPS = 'external-ips';
export const EXTERNAL_LOCAL = 'external-local';
export const NO_ENDPOINTS = 'no-endpoints';
export const NO_LOCAL_ENDPOINTS = 'no-local-endpoints';
export const FIREWALL = 'firewall';
/** Set of `frontend . client CIDR` intervals. */
export const FIREWALL_ALLOW = 'firewall-allow';
/** Set of `endpoint . endpoint . protocol . port`. */
export const HAIRPIN = 'hairpin';
/** The dynamic map of `client . frontend` → endpoint. */
export const AFFINITY_MAP = 'affinity';

/** The frontend sets a frontend is in or out of by what it is (plan.ts), in the order they are planned. */
export const MEMBERSHIP_SETS = [SERVICE_IPS, CLUSTER_IPS, EXTERNAL_IPS, EXTERNAL_LOCAL, NO_ENDPOINTS, NO_LOCAL_ENDPOINTS, FIREWALL] as const;

/**
 * An endpoint selection: a map from a frontend and a slot to an endpoint,
 * with one set of frontends per endpoint count. `main` serves every
 * frontend; `local` only the external frontends of externalTrafficPolicy
 * Local, for clients that are neither pods nor the node.
 */
export interface Selection {
  readonly name: 'main' | 'local';
  readonly map: string;
  readonly countPrefix: string;
}

export const MAIN: Selection = { name: 'main', map: 'endpoints', countPrefix: 'endpoint-count-' };
export const LOCAL: Selection = { name: 'local', map: 'local-endpoints', countPrefix: 'local-endpoint-count-' };
export const SELECTIONS: readonly Selection[] = [MAIN, LOCAL];

/** The set of the frontends of selection `sel` with `n` endpoints. */
export function countSetName(sel: Selection, n: number): string {
  if (!Number.isInteger(n) || n < 1) throw new UnsafeElementError('endpoint count', String(n));
  return `${sel.countPrefix}${n}`;
}

/** The selection and endpoint count of a set name made by {@link countSetName}; undefined for any other name. */
export function countOfSet(name: string): { readonly sel: Selection; readonly n: number } | undefined {
  const m = /^(local-)?endpoint-count-([1-9][0-9]*)$/.exec(name);
  return m ? { sel: m[1] ? LOCAL : MAIN, n: Number(m[2]) } : undefined;
}

/** The set of the frontends whose affinity lasts `seconds`. */
export function affinitySetName(seconds: number): string {
  if (!Number.isInteger(seconds) || seconds < 1 || seconds > 86400) throw new UnsafeElementError('affinity timeout', String(seconds));
  return `affinity-${seconds}`;
}

/** The timeout of a set name made by {@link affinitySetName}; undefined for any other name. */
export function timeoutOfSet(name: string): number | undefined {
  const m = /^affinity-([1-9][0-9]*)$/.exec(name);
  return m ? Number(m[1]) : undefined;
}

/** A set or map of the table. */
export interface SetDecl {
  readonly name: string;
  /** The declaration's body lines, as nft reads them. */
  readonly body: readonly string[];
  /** The key type as `nft -j list` gives it, its parts joined by " . ". */
  readonly keyType: string;
  /** The value type of a map as `nft -j list` gives it; undefined for a set. */
  readonly mapType?: string;
}

/**
 * A rule that nft cannot compile, written over nf_tables netlink instead
 * (affinity-rule.ts): the IPv6 table's ClientIP affinity record rule of
 * protocol `proto` and timeout `seconds`. Appended to its chain after the
 * script that writes the chain.
 */
export interface AffinityRecordSpec {
  readonly kind: 'affinity-record';
  readonly proto: 'tcp' | 'udp' | 'sctp';
  readonly seconds: number;
}

/**
 * A rule that nft compiles only with a dependency drover does not want
 * (pick-rule.ts): the rule that picks one of `count` endpoints of
 * selection `selection`, for every protocol. The script writes it as nft
 * text (TCP only) with comment `replaces`, and drover then replaces that
 * rule, in place, over netlink.
 */
export interface PickRuleSpec {
  readonly kind: 'pick';
  readonly selection: Selection['name'];
  readonly count: number;
  /** The comment of the rule the script writes and the netlink rule replaces. */
  readonly replaces: string;
}

/** A rule written over nf_tables netlink (netlink-rules.ts). */
export type NetlinkRuleSpec = AffinityRecordSpec | PickRuleSpec;

/**
 * One rule of a chain: its text (without the comment) and its comment,
 * which names it. With `netlink`, nft cannot write the rule as it is meant:
 * an affinity record rule is left out of scripts (script.ts, as a `#` line)
 * and appended to its chain over netlink after the script; a pick rule is
 * written by the script with its `replaces` comment and replaced over
 * netlink after it (backend.ts). `text` is still how `drover trace`
 * evaluates it.
 */
export interface RuleDecl {
  readonly text: string;
  readonly comment: string;
  readonly netlink?: NetlinkRuleSpec;
}

/** A chain of the table; `base` for the ones attached to a hook. */
export interface ChainDecl {
  readonly name: string;
  readonly base?: { readonly type: 'nat' | 'filter'; readonly hook: string; readonly priority: number };
  readonly rules: readonly RuleDecl[];
}

/** The whole structure of the table. */
export interface Layout {
  readonly sets: readonly SetDecl[];
  readonly chains: readonly ChainDecl[];
}

/** What the variable part of the layout depends on: the endpoint counts and affinity timeouts in use. */
export interface LayoutInputs {
  /** Endpoint counts per selection, ascending, no duplicates. */
  readonly counts: { readonly main: readonly number[]; readonly local: readonly number[] };
  /** Affinity timeouts in seconds, ascending, no duplicates. */
  readonly timeouts: readonly number[];
}

const MARK = `meta mark set meta mark | ${MASQUERADE_MARK}`;

/** A frontend's key type: `ipv4_addr . inet_proto . inet_service` (ipv6_addr for IPv6). */
const frontendType = (fam: NftFamily): string => `${fam.addr} . inet_proto . inet_service`;
/** A frontend's match: `ip daddr . meta l4proto . th dport` (ip6 daddr for IPv6). */
const frontendMatch = (fam: NftFamily): string => `${fam.l3} daddr . meta l4proto . th dport`;

function frontendSet(name: string, comment: string, fam: NftFamily): SetDecl {
  return { name, body: [`type ${frontendType(fam)}`, `comment "${comment}"`], keyType: frontendType(fam) };
}

function slotMap(sel: Selection, comment: string, fam: NftFamily): SetDecl {
  const ip = `${fam.l3} daddr`;
  return {
    name: sel.map,
    // `tcp dport` types the port in the declaration: nft 1.0.6 cannot read a typeof with `th dport` back from the
    // kernel ("conflicting protocols specified: ip vs. th"), so later scripts against the table would fail.
    body: [`typeof ${ip} . meta l4proto . tcp dport . numgen random mod 1 : ${ip} . tcp dport`, `comment "${comment}"`],
    keyType: `${frontendType(fam)} . integer`,
    mapType: `${fam.addr} . inet_service`,
  };
}

/** The sets and maps that are always there, in the table of `family` (default IPv4). */
export function fixedSets(family: IPFamily = 'IPv4'): SetDecl[] {
  const fam = nftFamily(family);
  const ft = frontendType(fam);
  const a = fam.addr;
  return [
    frontendSet(SERVICE_IPS, 'frontends with endpoints: IP . protocol . port', fam),
    frontendSet(CLUSTER_IPS, 'ClusterIP frontends with endpoints', fam),
    frontendSet(EXTERNAL_IPS, 'external frontends under externalTrafficPolicy Cluster: masqueraded', fam),
    frontendSet(EXTERNAL_LOCAL, 'external frontends under externalTrafficPolicy Local', fam),
    frontendSet(NO_ENDPOINTS, 'frontends without endpoints: rejected', fam),
    frontendSet(NO_LOCAL_ENDPOINTS, 'ClusterIP frontends with endpoints on other nodes only under internalTrafficPolicy Local: dropped', fam),
    frontendSet(FIREWALL, 'LoadBalancer frontends with loadBalancerSourceRanges', fam),
    {
      name: FIREWALL_ALLOW,
      body: [`type ${ft} . ${a}`, 'flags interval', 'comment "LoadBalancer frontend . allowed client range"'],
      keyType: `${ft} . ${a}`,
    },
    slotMap(MAIN, 'endpoint of each slot of each frontend', fam),
    slotMap(LOCAL, "this node's endpoint of each slot of each externalTrafficPolicy Local frontend", fam),
    {
      name: AFFINITY_MAP,
      body: [`type ${a} . ${ft} : ${a} . inet_service`, 'size 1048576', 'flags dynamic,timeout', 'comment "ClientIP affinity: client . frontend to endpoint"'],
      keyType: `${a} . ${ft}`,
      mapType: `${a} . inet_service`,
    },
    {
      name: HAIRPIN,
      body: [`type ${a} . ${a} . inet_proto . inet_service`, 'comment "endpoints reaching themselves through a service: masqueraded"'],
      keyType: `${a} . ${a} . inet_proto . inet_service`,
    },
  ];
}

/** The set of the frontends of `sel` with `n` endpoints, in the table of `family` (default IPv4). */
export function countSet(sel: Selection, n: number, family: IPFamily = 'IPv4'): SetDecl {
  const whose = sel === LOCAL ? " of this node's" : '';
  return frontendSet(countSetName(sel, n), `frontends with ${n}${whose} endpoint${n === 1 ? '' : 's'}`, nftFamily(family));
}

/** The set of the frontends whose ClientIP affinity lasts `seconds`, in the table of `family` (default IPv4). */
export function affinitySet(seconds: number, family: IPFamily = 'IPv4'): SetDecl {
  return frontendSet(affinitySetName(seconds), `frontends with ClientIP affinity of ${seconds} s`, nftFamily(family));
}

/**
 * The rule that picks one of `n` endpoints of selection `sel`, any protocol, in the table of `family` (default IPv4).
 * Written over netlink (`netlink`, pick-rule.ts): nft compiles its text for TCP only. Its comment ends in ", any
 * protocol"; the script's TCP-only rule, and an earlier drover's, have the comment without it.
 */
export function countRule(sel: Selection, n: number, family: IPFamily = 'IPv4'): RuleDecl {
  const fam = nftFamily(family);
  const F = frontendMatch(fam);
  const whose = sel === LOCAL ? 'local ' : '';
  const tcpOnly = `one of ${n} ${whose}endpoint${n === 1 ? '' : 's'}`;
  return {
    text: `${F} @${countSetName(sel, n)} dnat ${fam.l3} to ${F} . numgen random mod ${n} map @${sel.map}`,
    comment: `${tcpOnly}, any protocol`,
    netlink: { kind: 'pick', selection: sel.name, count: n, replaces: tcpOnly },
  };
}

/** The rule that sends a client with affinity to its endpoint. */
function affinityLookup(fam: NftFamily): RuleDecl {
  return { text: `dnat ${fam.l3} to ${fam.l3} saddr . ${frontendMatch(fam)} map @${AFFINITY_MAP}`, comment: 'the endpoint of a client with affinity' };
}

/**
 * The rules that record a client's endpoint for the frontends of `seconds`' affinity, one per protocol, in the table of
 * `family` (default IPv4). The IPv6 ones are written over netlink (`netlink`; affinity-rule.ts explains why).
 */
export function affinityRecordRules(seconds: number, family: IPFamily = 'IPv4'): RuleDecl[] {
  const l3 = nftFamily(family).l3;
  const orig = `ct original ${l3} daddr . meta l4proto . ct original proto-dst`;
  return (['tcp', 'udp', 'sctp'] as const).map((p) => ({
    text: `ct state new ct status dnat meta l4proto ${p} ${orig} @${affinitySetName(seconds)} update @${AFFINITY_MAP} { ${l3} saddr . ${orig} timeout ${seconds}s : ${l3} daddr . th dport }`,
    comment: `${p} affinity of ${seconds} s`,
    ...(family === 'IPv6' ? { netlink: { kind: 'affinity-record' as const, proto: p, seconds } } : {}),
  }));
}

/** The masquerade rule for ClusterIP traffic, or none (no `--cluster-cidr`, no `--masquerade-all`, as kube-proxy). */
function clusterMasquerade(opts: RenderOptions, fam: NftFamily): RuleDecl | undefined {
  const F = frontendMatch(fam);
  if (opts.masqueradeAll) return { text: `${F} @${CLUSTER_IPS} ${MARK}`, comment: 'masquerade all ClusterIP traffic' };
  if (opts.clusterCIDR === undefined) return undefined;
  return { text: `${F} @${CLUSTER_IPS} ${fam.l3} saddr != ${clusterCIDR(opts, fam)} ${MARK}`, comment: `masquerade ClusterIP traffic from outside ${opts.clusterCIDR}` };
}

/** `--cluster-cidr`, checked to be a canonical CIDR of the table's family. @throws UnsafeElementError */
function clusterCIDR(opts: RenderOptions, fam: NftFamily): string {
  const c = parseCIDR(opts.clusterCIDR!);
  if (c === undefined || c.prefix.text !== opts.clusterCIDR || c.prefix.family !== (fam.family === 'IPv4' ? 4 : 6)) throw new UnsafeElementError('cluster CIDR', opts.clusterCIDR!);
  return opts.clusterCIDR!;
}

const CHECK: RuleDecl = { text: 'ct state new jump endpoints-check', comment: 'frontends without endpoints' };

/**
 * The drop of forwarded conntrack-INVALID packets (kube-proxy's nftables
 * proxier: `ct state invalid drop` in its forward chain), first in
 * `filter-forward`; left out with `tcpBeLiberal` (RenderOptions).
 */
export const INVALID_DROP: RuleDecl = { text: 'ct state invalid drop', comment: 'conntrack INVALID packets, which keep their DNAT undone' };

/** Every chain for `inputs`, in the table of `opts.family` (default IPv4; `clusterCIDR` must be of that family). */
export function chains(opts: RenderOptions, inputs: LayoutInputs): ChainDecl[] {
  const fam = nftFamily(opts.family);
  const F = frontendMatch(fam);
  const AFFINITY_LOOKUP = affinityLookup(fam);
  const masquerade = clusterMasquerade(opts, fam);
  // The comment names the CIDR: a full sync compares rules by their comments, so another --cluster-cidr must give another comment.
  const pods = opts.clusterCIDR !== undefined ? [{ text: `${fam.l3} saddr ${clusterCIDR(opts, fam)} goto pick`, comment: `pods (${opts.clusterCIDR}) go to every endpoint` }] : [];
  const record = inputs.timeouts.flatMap((t) => affinityRecordRules(t, fam.family));
  return [
    { name: 'nat-prerouting', base: { type: 'nat', hook: 'prerouting', priority: -100 }, rules: [{ text: 'jump services', comment: 'services' }] },
    { name: 'nat-output', base: { type: 'nat', hook: 'output', priority: -100 }, rules: [{ text: 'jump services', comment: 'services' }] },
    { name: 'nat-postrouting', base: { type: 'nat', hook: 'postrouting', priority: 100 }, rules: [{ text: 'jump masquerading', comment: 'masquerade' }] },
    {
      name: 'services',
      rules: [
        { text: `${F} != @${SERVICE_IPS} return`, comment: 'not a frontend with endpoints' },
        { text: `${F} @${FIREWALL} ${F} . ${fam.l3} saddr != @${FIREWALL_ALLOW} drop`, comment: 'client not in loadBalancerSourceRanges' },
        ...(masquerade ? [masquerade] : []),
        { text: `${F} @${EXTERNAL_IPS} ${MARK}`, comment: 'masquerade external traffic' },
        { text: `${F} @${EXTERNAL_LOCAL} goto external-local`, comment: 'externalTrafficPolicy Local' },
        { text: 'goto pick', comment: 'every endpoint' },
      ],
    },
    {
      name: 'external-local',
      rules: [
        ...pods,
        { text: `fib saddr type local ${MARK}`, comment: 'masquerade traffic from this node' },
        { text: 'fib saddr type local goto pick', comment: 'this node goes to every endpoint' },
        AFFINITY_LOOKUP,
        ...inputs.counts.local.map((n) => countRule(LOCAL, n, fam.family)),
        { text: 'drop', comment: 'no local endpoint' },
      ],
    },
    { name: 'pick', rules: [AFFINITY_LOOKUP, ...inputs.counts.main.map((n) => countRule(MAIN, n, fam.family))] },
    {
      name: 'masquerading',
      rules: [
        { text: `ct status dnat ${fam.l3} saddr . ${fam.l3} daddr . meta l4proto . th dport @${HAIRPIN} ${MARK}`, comment: 'hairpin' },
        { text: `meta mark & ${MASQUERADE_MARK} == 0 return`, comment: 'not marked for masquerade' },
        { text: `meta mark set meta mark ^ ${MASQUERADE_MARK}`, comment: 'clear the masquerade mark' },
        { text: 'masquerade fully-random', comment: 'service traffic requiring SNAT' },
      ],
    },
    { name: 'affinity-prerouting', base: { type: 'filter', hook: 'prerouting', priority: -99 }, rules: record },
    { name: 'affinity-output', base: { type: 'filter', hook: 'output', priority: -99 }, rules: record },
    {
      name: 'endpoints-check',
      rules: [
        { text: `${F} @${NO_ENDPOINTS} reject`, comment: 'frontend has no endpoints' },
        { text: `${F} @${NO_LOCAL_ENDPOINTS} drop`, comment: 'frontend has no local endpoints' },
      ],
    },
    { name: 'filter-input', base: { type: 'filter', hook: 'input', priority: -110 }, rules: [CHECK] },
    { name: 'filter-forward', base: { type: 'filter', hook: 'forward', priority: -110 }, rules: opts.tcpBeLiberal === true ? [CHECK] : [INVALID_DROP, CHECK] },
    { name: 'filter-output', base: { type: 'filter', hook: 'output', priority: -110 }, rules: [CHECK] },
  ];
}

/** The whole layout for `inputs`, of the table of `opts.family` (default IPv4). */
export function layout(opts: RenderOptions, inputs: LayoutInputs): Layout {
  const family = opts.family ?? 'IPv4';
  return {
    sets: [
      ...fixedSets(family),
      ...inputs.counts.main.map((n) => countSet(MAIN, n, family)),
      ...inputs.counts.local.map((n) => countSet(LOCAL, n, family)),
      ...inputs.timeouts.map((t) => affinitySet(t, family)),
    ],
    chains: chains(opts, inputs),
  };
}

/** A rule as nft reads it. */
export function ruleText(rule: RuleDecl): string {
  return `${rule.text} comment "${rule.comment}"`;
}

/** A chain's declaration line, for a base chain. */
export function chainHeader(c: ChainDecl): string | undefined {
  if (!c.base) return undefined;
  return `type ${c.base.type} hook ${c.base.hook} priority ${c.base.priority}; policy accept;`;
}
