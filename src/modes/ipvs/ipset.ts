/**
 * The ipsets IPVS mode uses, as kube-proxy's IPVS proxier defines them
 * (pkg/proxy/ipvs/ipset.go, and ipsetInfo in pkg/proxy/ipvs/proxier.go):
 *
 * - `KUBE-CLUSTER-IP`, type hash:ip,port: one "ClusterIP,proto:port" entry per
 *   virtual server. nat KUBE-SERVICES marks traffic to these for masquerade
 *   when it comes from outside the cluster CIDR (or always, with
 *   --masquerade-all);
 * - `KUBE-LOOP-BACK`, type hash:ip,port,ip: one "endpointIP,proto:port,endpointIP"
 *   entry per real server. KUBE-POSTROUTING masquerades a packet that goes to
 *   the endpoint it came from (hairpin);
 * - the sets of the external frontends (frontends.ts), with kube-proxy's
 *   names and types: KUBE-EXTERNAL-IP, KUBE-EXTERNAL-IP-LOCAL,
 *   KUBE-LOAD-BALANCER, KUBE-LOAD-BALANCER-LOCAL, KUBE-LOAD-BALANCER-FW
 *   (hash:ip,port), KUBE-LOAD-BALANCER-SOURCE-IP (hash:ip,port,ip),
 *   KUBE-LOAD-BALANCER-SOURCE-CIDR (hash:ip,port,net), KUBE-NODE-PORT-TCP,
 *   KUBE-NODE-PORT-LOCAL-TCP, KUBE-NODE-PORT-UDP, KUBE-NODE-PORT-LOCAL-UDP
 *   (bitmap:port, entry: the port) and KUBE-NODE-PORT-SCTP,
 *   KUBE-NODE-PORT-LOCAL-SCTP (hash:ip,port, entry: "nodeIP,sctp:port");
 * - `KUBE-HEALTH-CHECK-NODE-PORT` (bitmap:port): the health-check NodePorts,
 *   and `KUBE-IPVS-IPS` (hash:ip): every address bound to kube-ipvs0, for
 *   filter KUBE-NODE-PORT and KUBE-IPVS-FILTER;
 * - drover's own KUBE-EXTERNAL-NO-LOCAL and KUBE-INTERNAL-NO-LOCAL
 *   (hash:ip,port): the frontends whose traffic policy Local finds
 *   endpoints on other nodes only, dropped in filter KUBE-PROXY-FIREWALL.
 *   rules/ipvs/static.rules matches on them.
 *
 * A sync reads the sets back with `ipset save`, and writes only the
 * differences (and the `create` of a missing set) with ONE
 * `ipset restore -exist`, spawned with an argument array, input on stdin.
 * Every entry is validated before it is written, so nothing can add a
 * command or an option to the restore input. A set that holds an entry
 * drover cannot write back (one added by hand, such as
 * "10.96.0.10,icmp:echo-request") is rebuilt instead: its desired entries go
 * into a scratch set that is then swapped with it, which the kernel does
 * atomically, so rules matching the set never see it half-filled (ipset(8),
 * "swap").
 *
 * Each IP family has its own sets, as kube-proxy's IPv4 and IPv6 proxiers
 * each keep theirs (pkg/proxy/ipvs/ipset.go NewIPSet): the IPv6 ones are
 * named with "KUBE-6-" for "KUBE-" (KUBE-6-CLUSTER-IP), cut to 31
 * characters as kube-proxy cuts them (KUBE-6-LOAD-BALANCER-SOURCE-CID),
 * and hash sets are created `family inet6`. The code works with the IPv4
 * names ({@link OwnedSetName}); {@link familySetName} gives a family's
 * name in the kernel, and every function that reads or writes the kernel's
 * sets takes the family (default IPv4).
 *
 * The ipset tool itself (entry syntax and validation, the save parser, the
 * command I/O and its fake) is kernel/ipset; this module is the IPVS mode's
 * layout of sets on top of it.
 */
import type { IPFamily } from '../../model/types.ts';
import { DroverError } from '../../errors.ts';
import {
  checkEntry,
  ipPortEntry,
  ipPortIPEntry,
  isWritableEntry,
  MAX_SET_NAME,
  parseIpsetSave as parseSavedSets,
  SystemIpset as KernelIpset,
  type SavedSet,
} from '../../kernel/ipset/ipset.ts';

/** The ClusterIP set (hash:ip,port). */
export const CLUSTER_IP_SET = 'KUBE-CLUSTER-IP';
/** The hairpin set (hash:ip,port,ip). */
export const LOOP_BACK_SET = 'KUBE-LOOP-BACK';
/** External IP:port of externalTrafficPolicy Cluster service ports: masqueraded (hash:ip,port). */
export const EXTERNAL_IP_SET = 'KUBE-EXTERNAL-IP';
/** External IP:port of externalTrafficPolicy Local service ports: not masqueraded (hash:ip,port). */
export const EXTERNAL_IP_LOCAL_SET = 'KUBE-EXTERNAL-IP-LOCAL';
/** LoadBalancer ingress IP:port (hash:ip,port). */
export const LOAD_BALANCER_SET = 'KUBE-LOAD-BALANCER';
/** LoadBalancer ingress IP:port of externalTrafficPolicy Local service ports (hash:ip,port). */
export const LOAD_BALANCER_LOCAL_SET = 'KUBE-LOAD-BALANCER-LOCAL';
/** LoadBalancer ingress IP:port with loadBalancerSourceRanges (hash:ip,port). */
export const LOAD_BALANCER_FW_SET = 'KUBE-LOAD-BALANCER-FW';
/** "lbIP,proto:port,lbIP": the LoadBalancer IP allowed as its own source (hash:ip,port,ip). */
export const LOAD_BALANCER_SOURCE_IP_SET = 'KUBE-LOAD-BALANCER-SOURCE-IP';
/** "lbIP,proto:port,CIDR": an allowed source range (hash:ip,port,net). */
export const LOAD_BALANCER_SOURCE_CIDR_SET = 'KUBE-LOAD-BALANCER-SOURCE-CIDR';
/** NodePorts of TCP service ports (bitmap:port). */
export const NODE_PORT_TCP_SET = 'KUBE-NODE-PORT-TCP';
/** NodePorts of TCP service ports with externalTrafficPolicy Local (bitmap:port). */
export const NODE_PORT_LOCAL_TCP_SET = 'KUBE-NODE-PORT-LOCAL-TCP';
/** NodePorts of UDP service ports (bitmap:port). */
export const NODE_PORT_UDP_SET = 'KUBE-NODE-PORT-UDP';
/** NodePorts of UDP service ports with externalTrafficPolicy Local (bitmap:port). */
export const NODE_PORT_LOCAL_UDP_SET = 'KUBE-NODE-PORT-LOCAL-UDP';
/** "nodeIP,sctp:nodePort" of SCTP service ports (hash:ip,port, as kube-proxy). */
export const NODE_PORT_SCTP_SET = 'KUBE-NODE-PORT-SCTP';
/** "nodeIP,sctp:nodePort" of SCTP service ports with externalTrafficPolicy Local (hash:ip,port). */
export const NODE_PORT_LOCAL_SCTP_SET = 'KUBE-NODE-PORT-LOCAL-SCTP';

/**
 * drover's own set (kube-proxy's IPVS mode has none): "ip,proto:port" of each
 * external virtual server of an externalTrafficPolicy Local service port
 * whose endpoints are all on other nodes. filter KUBE-PROXY-FIREWALL drops
 * new connections to them, as kube-proxy's iptables mode does ("has no local
 * endpoints"), instead of IPVS refusing them (hash:ip,port).
 */
export const EXTERNAL_NO_LOCAL_SET = 'KUBE-EXTERNAL-NO-LOCAL';

/**
 * drover's own set (kube-proxy's IPVS mode has none): "ClusterIP,proto:port"
 * of each service port with internalTrafficPolicy Local whose endpoints are
 * all on other nodes. filter KUBE-PROXY-FIREWALL drops new connections to
 * them, as kube-proxy's iptables mode does, where IPVS would refuse them
 * (hash:ip,port).
 */
export const INTERNAL_NO_LOCAL_SET = 'KUBE-INTERNAL-NO-LOCAL';

/**
 * The health-check NodePort (`spec.healthCheckNodePort`) of each
 * LoadBalancer service with externalTrafficPolicy Local, accepted in filter
 * KUBE-NODE-PORT, as kube-proxy's kubeHealthCheckNodePortSet (bitmap:port).
 */
export const HEALTH_CHECK_NODE_PORT_SET = 'KUBE-HEALTH-CHECK-NODE-PORT';

/**
 * Every address bound to kube-ipvs0, as kube-proxy's kubeIPVSSet (hash:ip):
 * filter KUBE-IPVS-FILTER rejects a new connection to one of them at a port
 * that is not a virtual server (kubernetes issue 72236).
 */
export const IPVS_IPS_SET = 'KUBE-IPVS-IPS';

/** The name of one of drover's sets. */
export type OwnedSetName = (typeof IPVS_SETS)[number]['name'];

/** ipset type of KUBE-CLUSTER-IP. */
export const CLUSTER_IP_SET_TYPE = 'hash:ip,port';
/** ipset type of KUBE-LOOP-BACK. */
export const LOOP_BACK_SET_TYPE = 'hash:ip,port,ip';

/** The sets drover owns and their ipset types, in the order they are written (kube-proxy's ipsetInfo order). */
export const IPVS_SETS = [
  { name: CLUSTER_IP_SET, type: CLUSTER_IP_SET_TYPE },
  { name: LOOP_BACK_SET, type: LOOP_BACK_SET_TYPE },
  { name: EXTERNAL_IP_SET, type: 'hash:ip,port' },
  { name: EXTERNAL_IP_LOCAL_SET, type: 'hash:ip,port' },
  { name: LOAD_BALANCER_SET, type: 'hash:ip,port' },
  { name: LOAD_BALANCER_FW_SET, type: 'hash:ip,port' },
  { name: LOAD_BALANCER_LOCAL_SET, type: 'hash:ip,port' },
  { name: LOAD_BALANCER_SOURCE_IP_SET, type: 'hash:ip,port,ip' },
  { name: LOAD_BALANCER_SOURCE_CIDR_SET, type: 'hash:ip,port,net' },
  { name: NODE_PORT_TCP_SET, type: 'bitmap:port' },
  { name: NODE_PORT_LOCAL_TCP_SET, type: 'bitmap:port' },
  { name: NODE_PORT_UDP_SET, type: 'bitmap:port' },
  { name: NODE_PORT_LOCAL_UDP_SET, type: 'bitmap:port' },
  { name: NODE_PORT_SCTP_SET, type: 'hash:ip,port' },
  { name: NODE_PORT_LOCAL_SCTP_SET, type: 'hash:ip,port' },
  { name: HEALTH_CHECK_NODE_PORT_SET, type: 'bitmap:port' },
  { name: IPVS_IPS_SET, type: 'hash:ip' },
  { name: EXTERNAL_NO_LOCAL_SET, type: 'hash:ip,port' },
  { name: INTERNAL_NO_LOCAL_SET, type: 'hash:ip,port' },
] as const;

/** Options of `create` for a missing hash set: IPv4, kube-proxy's hash size and element limit. */
export const CREATE_OPTIONS = 'family inet hashsize 1024 maxelem 65536';

/** Options of `create` for a missing IPv6 hash set (kube-proxy's IPv6 proxier: `family inet6`). */
export const CREATE_OPTIONS_6 = 'family inet6 hashsize 1024 maxelem 65536';

/** Options of `create` for a missing bitmap:port set: every port (kube-proxy's range); a bitmap has no family. */
export const BITMAP_CREATE_OPTIONS = 'range 0-65535';

/** The `create` options of a set of `type` for `family`. */
function createOptions(type: string, family: IPFamily): string {
  if (type === 'bitmap:port') return BITMAP_CREATE_OPTIONS;
  return family === 'IPv6' ? CREATE_OPTIONS_6 : CREATE_OPTIONS;
}

/** The `family` create option (ipset(8)) of a family's hash sets. */
function ipsetFamily(family: IPFamily): string {
  return family === 'IPv6' ? 'inet6' : 'inet';
}

/**
 * The name of one of drover's sets (given by its IPv4 name) in the kernel
 * for `family`: the IPv4 name itself, or for IPv6 "KUBE-6-" in place of
 * "KUBE-", cut to {@link MAX_SET_NAME} characters, as kube-proxy names its
 * IPv6 proxier's sets (pkg/proxy/ipvs/ipset.go NewIPSet):
 * "KUBE-6-CLUSTER-IP", "KUBE-6-LOAD-BALANCER-SOURCE-CID".
 */
export function familySetName(name: string, family: IPFamily): string {
  if (family === 'IPv4' || !name.startsWith('KUBE-')) return name;
  return `KUBE-6-${name.slice('KUBE-'.length)}`.slice(0, MAX_SET_NAME);
}

/**
 * The scratch set a rebuild of `name` fills and swaps in: "KUBE-CLUSTER-IP-SWAP",
 * and for a name too long for that, "LOAD-BALANCER" shortened to "LB" and
 * "HEALTH-CHECK" to "HC": "KUBE-LB-SOURCE-CIDR-SWAP", "KUBE-HC-NODE-PORT-SWAP"
 * (at most {@link MAX_SET_NAME} characters).
 * It exists only inside one restore; one left over (a crash, or a restore
 * that failed part way) is destroyed by the next full sync and by cleanup.
 */
export function swapSetName(name: string): string {
  const plain = `${name}-SWAP`;
  if (plain.length <= MAX_SET_NAME) return plain;
  const short = `${name.replace('LOAD-BALANCER', 'LB').replace('HEALTH-CHECK', 'HC')}-SWAP`;
  // An IPv6 name ("KUBE-6-NODE-PORT-LOCAL-SCTP") may need one more cut.
  return short.length <= MAX_SET_NAME ? short : short.replace('NODE-PORT', 'NP');
}

/** Every set name of `family` {@link parseIpsetSave} keeps by default: drover's sets and their scratch sets, with the family's names. */
export function ownedSetNames(family: IPFamily): readonly string[] {
  return IPVS_SETS.flatMap((s) => {
    const name = familySetName(s.name, family);
    return [name, swapSetName(name)];
  });
}

/** {@link ownedSetNames} of IPv4. */
export const OWNED_SET_NAMES: readonly string[] = ownedSetNames('IPv4');

/**
 * A KUBE-CLUSTER-IP entry, as `ipset save` prints it: "10.96.0.10,tcp:80".
 * @throws IpsetValidationError
 */
export function clusterIPEntry(clusterIP: string, protocol: string, servicePort: number): string {
  return ipPortEntry(clusterIP, protocol, servicePort);
}

/**
 * A KUBE-LOOP-BACK entry, as `ipset save` prints it: "10.244.1.2,tcp:8080,10.244.1.2".
 * @throws IpsetValidationError
 */
export function loopBackEntry(endpointIP: string, protocol: string, targetPort: number): string {
  return ipPortIPEntry(endpointIP, protocol, targetPort, endpointIP);
}

/**
 * Parse `ipset save` output, keeping only the named sets (by default
 * drover's IPv4 sets and their scratch sets; {@link ownedSetNames} for
 * another family's), as kernel/ipset's parser does.
 */
export function parseIpsetSave(text: string, names: readonly string[] = OWNED_SET_NAMES): Map<string, SavedSet> {
  return parseSavedSets(text, names);
}

/**
 * Desired entries of drover's sets (a Set is used as it is, without a
 * copy); a set left out is wanted empty.
 */
export type DesiredSets = { readonly [CLUSTER_IP_SET]: ReadonlySet<string> | readonly string[]; readonly [LOOP_BACK_SET]: ReadonlySet<string> | readonly string[] } & {
  readonly [name in OwnedSetName]?: ReadonlySet<string> | readonly string[];
};

/** One entry a plan adds or deletes. */
export interface IpsetEntryChange {
  readonly set: string;
  /** As `ipset save` prints it; an extra entry is the kernel's text, which may be one drover would never write. */
  readonly entry: string;
}

/** What {@link planIpsetRestore} (against the read-back) or {@link planIpsetChanges} (against what drover last wrote) writes. */
export interface IpsetPlan {
  /** `ipset restore -exist` input; "" when nothing differs. */
  readonly input: string;
  /** Sets created (`missingSets.length`). */
  readonly created: number;
  /** Entries that become present (`missing.length`); a rebuilt set rewrites more, see `rebuilt`. */
  readonly added: number;
  /** Entries that go (`extra.length`). */
  readonly deleted: number;
  /** Sets that do not exist and are created, in write order. */
  readonly missingSets: readonly string[];
  /** Desired entries the kernel lacks, sorted within each set. */
  readonly missing: readonly IpsetEntryChange[];
  /** Entries the kernel has (or drover last wrote) and drover does not want, sorted within each set. */
  readonly extra: readonly IpsetEntryChange[];
  /** Sets rebuilt through a scratch set and `swap`, because an extra entry could not be written back in a `del`. */
  readonly rebuilt: readonly string[];
  /** Scratch sets left over by an interrupted rebuild; the plan destroys them. */
  readonly leftovers: readonly string[];
}

/** A set of drover's exists with another type or family; drover will not guess what to do with it. */
export class IpsetTypeError extends DroverError {
  constructor(name: string, have: string, want: string) {
    super(`ipset ${name} exists with type ${have}, drover needs ${want}: remove it with drover cleanup --mode ipvs (which first deletes the rules that use it) and restart drover`);
    this.name = 'IpsetTypeError';
  }
}

/**
 * The `ipset restore -exist` input that turns `current` (parsed `ipset
 * save`) into `desired`: `create` for a missing set, `del` for extra entries,
 * `add` for missing ones, each set in sorted order. When an extra entry is
 * not one drover could write (it was added by hand), that set is rebuilt
 * instead: `create` its scratch set, `add` every desired entry to it, `swap`
 * it with the set, `destroy` it. A scratch set left over by an interrupted
 * rebuild is destroyed first. Pure.
 * @param family whose sets (named by {@link familySetName}, created with its `family`) and entries; default IPv4
 * @throws IpsetTypeError when a set exists with another type or family;
 *   IpsetValidationError for a desired entry that is not valid.
 */
export function planIpsetRestore(desired: DesiredSets, current: ReadonlyMap<string, SavedSet>, family: IPFamily = 'IPv4'): IpsetPlan {
  const lines: string[] = [];
  const missingSets: string[] = [];
  const missing: IpsetEntryChange[] = [];
  const extra: IpsetEntryChange[] = [];
  const rebuilt: string[] = [];
  const leftovers: string[] = [];
  let added = 0;
  let deleted = 0;
  const want6 = ipsetFamily(family);
  for (const logical of IPVS_SETS) {
    const set = { name: familySetName(logical.name, family), type: logical.type };
    const have = current.get(set.name);
    // A bitmap:port set has no family; a hash set without the option is inet.
    const foreignFamily = have !== undefined && set.type !== 'bitmap:port' && (have.family ?? 'inet') !== want6;
    if (have && (have.type !== set.type || foreignFamily)) {
      throw new IpsetTypeError(set.name, foreignFamily ? `${have.type} family ${have.family ?? 'inet'}` : have.type, foreignFamily ? `${set.type} family ${want6}` : set.type);
    }
    if (!have) {
      lines.push(`create ${set.name} ${set.type} ${createOptions(set.type, family)}`);
      missingSets.push(set.name);
    }
    // Only what is written is checked (again): entries come from the
    // validating constructors, and a sync should not re-check 10,000 of them.
    const given = desired[logical.name] ?? [];
    const want: ReadonlySet<string> = given instanceof Set ? given : new Set(given);
    const present = have?.entries ?? new Set<string>();
    const extras = [...present].filter((x) => !want.has(x)).sort();
    const adds = [...want].filter((x) => !present.has(x)).sort();
    extra.push(...extras.map((entry) => ({ set: set.name, entry })));
    missing.push(...adds.map((entry) => ({ set: set.name, entry })));
    deleted += extras.length;
    added += adds.length;
    const scratch = swapSetName(set.name);
    if (current.has(scratch)) {
      lines.push(`destroy ${scratch}`);
      leftovers.push(scratch);
    }
    if (extras.every((e) => isWritableEntry(set.type, e, family))) {
      lines.push(...entryLines(set, adds, extras, family));
    } else {
      // A foreign entry is never echoed into the input: the set is rebuilt around it.
      lines.push(`create ${scratch} ${set.type} ${createOptions(set.type, family)}`);
      for (const e of [...want].sort()) lines.push(`add ${scratch} ${checkEntry(set.type, e, family)}`);
      lines.push(`swap ${scratch} ${set.name}`, `destroy ${scratch}`);
      rebuilt.push(set.name);
    }
  }
  return { input: lines.length > 0 ? `${lines.join('\n')}\n` : '', created: missingSets.length, added, deleted, missingSets, missing, extra, rebuilt, leftovers };
}

/** Entries that became wanted in one of drover's sets, and entries that stopped being wanted. */
export interface IpsetSetChanges {
  /** One of {@link IPVS_SETS}, by its IPv4 name. */
  readonly set: string;
  readonly add: readonly string[];
  readonly del: readonly string[];
}

/**
 * The `ipset restore -exist` input of known changes to drover's sets, which
 * exist already (a partial sync, which trusts what it wrote): `del` lines,
 * then `add` lines, in the order given, to the sets of `family` (default
 * IPv4; {@link familySetName}). Pure.
 * @throws IpsetValidationError for an entry that is not valid; Error for a set that is not drover's.
 */
export function planIpsetChanges(changes: readonly IpsetSetChanges[], family: IPFamily = 'IPv4'): IpsetPlan {
  const lines: string[] = [];
  for (const c of changes) {
    const set = IPVS_SETS.find((s) => s.name === c.set) as { readonly name: string; readonly type: string } | undefined;
    if (!set) throw new Error(`${c.set} is not one of drover's ipsets`);
    lines.push(...entryLines({ name: familySetName(set.name, family), type: set.type }, c.add, c.del, family));
  }
  const entries = (pick: (c: IpsetSetChanges) => readonly string[]): IpsetEntryChange[] =>
    changes.flatMap((c) => pick(c).map((entry) => ({ set: familySetName(c.set, family), entry })));
  const missing = entries((c) => c.add);
  const extra = entries((c) => c.del);
  return { input: lines.length > 0 ? `${lines.join('\n')}\n` : '', created: 0, added: missing.length, deleted: extra.length, missingSets: [], missing, extra, rebuilt: [], leftovers: [] };
}

/** `del` lines for `del`, then `add` lines for `add`, every entry checked against the set's type and family. */
function entryLines(set: { readonly name: string; readonly type: string }, add: readonly string[], del: readonly string[], family: IPFamily): string[] {
  return [...del.map((e) => `del ${set.name} ${checkEntry(set.type, e, family)}`), ...add.map((e) => `add ${set.name} ${checkEntry(set.type, e, family)}`)];
}

/** The `ipset restore` input that destroys those of drover's sets of `family` (default IPv4), and scratch sets, present in `current`. Pure. */
export function planIpsetDestroy(current: ReadonlyMap<string, SavedSet>, family: IPFamily = 'IPv4'): string {
  const lines = ownedSetNames(family).filter((name) => current.has(name)).map((name) => `destroy ${name}`);
  return lines.length > 0 ? `${lines.join('\n')}\n` : '';
}

/** The real ipset (kernel/ipset), limited to drover's sets: `entryCount` takes only the name of one of them, of either family. */
export class SystemIpset extends KernelIpset {
  /** @throws Error for a name that is not one of drover's sets; as kernel/ipset's SystemIpset otherwise. */
  override async entryCount(name: string): Promise<number | undefined> {
    if (!OWNED_SET_NAMES.includes(name) && !ownedSetNames('IPv6').includes(name)) throw new Error(`${JSON.stringify(name)} is not one of drover's ipsets`);
    return super.entryCount(name);
  }
}
