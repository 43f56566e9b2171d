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
 */
import { isCanonicalIPv4, parseIP } from '../../model/addr.ts';
import type { IPFamily } from '../../model/types.ts';
import { CommandError, runCommand } from '../../kernel/exec.ts';
import { DroverError } from '../../errors.ts';

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

/** The longest set name the kernel takes (IPSET_MAXNAMELEN 32, with its NUL). */
export const MAX_SET_NAME = 31;

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

/** A value for an ipset entry is not valid; nothing was written. */
export class IpsetValidationError extends DroverError {
  constructor(what: string, value: string) {
    super(`refusing to write ${what} ${JSON.stringify(value)} to ipset: not valid`);
    this.name = 'IpsetValidationError';
  }
}

const PROTO = /^(tcp|udp|sctp)$/;

/** True for a dotted-quad IPv4 address or canonical IPv6 text (RFC 5952, as ipset prints it). */
function isCanonicalIP(value: string): boolean {
  if (!value.includes(':')) return isCanonicalIPv4(value);
  const parsed = parseIP(value);
  return parsed?.family === 6 && parsed.text === value;
}

function ip(value: string): string {
  if (!isCanonicalIP(value)) throw new IpsetValidationError(value.includes(':') ? 'IPv6 address' : 'IPv4 address', value);
  return value;
}

/** A port drover writes: an integer 1-65535. */
function isPort(value: number): boolean {
  return Number.isInteger(value) && value >= 1 && value <= 65535;
}

function port(value: number): number {
  if (!isPort(value)) throw new IpsetValidationError('port', String(value));
  return value;
}

function proto(value: string): string {
  const p = value.toLowerCase();
  if (!PROTO.test(p)) throw new IpsetValidationError('protocol', value);
  return p;
}

/**
 * A KUBE-CLUSTER-IP entry, as `ipset save` prints it: "10.96.0.10,tcp:80".
 * @throws IpsetValidationError
 */
export function clusterIPEntry(clusterIP: string, protocol: string, servicePort: number): string {
  return `${ip(clusterIP)},${proto(protocol)}:${port(servicePort)}`;
}

/**
 * A KUBE-LOOP-BACK entry, as `ipset save` prints it: "10.244.1.2,tcp:8080,10.244.1.2".
 * @throws IpsetValidationError
 */
export function loopBackEntry(endpointIP: string, protocol: string, targetPort: number): string {
  const a = ip(endpointIP);
  return `${a},${proto(protocol)}:${port(targetPort)},${a}`;
}

/**
 * An entry "ip,proto:port" of a hash:ip,port set (KUBE-EXTERNAL-IP,
 * KUBE-LOAD-BALANCER and their -LOCAL and -FW sets, KUBE-NODE-PORT-SCTP).
 * @throws IpsetValidationError
 */
export function ipPortEntry(address: string, protocol: string, p: number): string {
  return clusterIPEntry(address, protocol, p);
}

/**
 * An entry of a hash:ip set (KUBE-IPVS-IPS): the address, "10.96.0.10".
 * @throws IpsetValidationError
 */
export function ipEntry(address: string): string {
  return ip(address);
}

/**
 * A bitmap:port entry (KUBE-NODE-PORT-TCP/-UDP and their -LOCAL sets): the port, "30080".
 * @throws IpsetValidationError
 */
export function portEntry(p: number): string {
  return String(port(p));
}

/**
 * A KUBE-LOAD-BALANCER-SOURCE-IP entry "lbIP,proto:port,sourceIP".
 * @throws IpsetValidationError
 */
export function ipPortIPEntry(address: string, protocol: string, p: number, source: string): string {
  return `${ip(address)},${proto(protocol)}:${port(p)},${ip(source)}`;
}

/**
 * A KUBE-LOAD-BALANCER-SOURCE-CIDR entry "lbIP,proto:port,net", the net as
 * `ipset save` prints it: "10.0.0.0/8", and a host-length net without its
 * length ("10.1.2.3", "fd00::1"). Prefix lengths 1-32 for IPv4, 1-128 for
 * IPv6 (the kernel refuses /0 in a hash:net type; frontends.ts never writes
 * one: 0.0.0.0/0 or ::/0 means no firewall).
 * @throws IpsetValidationError
 */
export function ipPortNetEntry(address: string, protocol: string, p: number, network: string, bits: number): string {
  const width = network.includes(':') ? 128 : 32;
  if (!Number.isInteger(bits) || bits < 1 || bits > width) throw new IpsetValidationError('prefix length', String(bits));
  return `${ip(address)},${proto(protocol)}:${port(p)},${ip(network)}${bits === width ? '' : `/${bits}`}`;
}

const ENTRY: Readonly<Record<string, RegExp>> = {
  'hash:ip': /^([0-9a-f.:]+)$/,
  'hash:ip,port': /^([0-9a-f.:]+),(tcp|udp|sctp):(\d{1,5})$/,
  'hash:ip,port,ip': /^([0-9a-f.:]+),(tcp|udp|sctp):(\d{1,5}),([0-9a-f.:]+)$/,
  'hash:ip,port,net': /^([0-9a-f.:]+),(tcp|udp|sctp):(\d{1,5}),([0-9a-f.:]+)(?:\/([1-9]|[1-9]\d|1[01]\d|12[0-8]))?$/,
  'bitmap:port': /^()()(\d{1,5})$/,
};

/**
 * Check an entry of one of drover's sets again, just before it is written.
 * @param family the family of the set's addresses (default IPv4)
 * @throws IpsetValidationError
 */
export function checkEntry(setType: string, entry: string, family: IPFamily = 'IPv4'): string {
  if (!isWritableEntry(setType, entry, family)) throw new IpsetValidationError(`${setType} entry`, entry);
  return entry;
}

/** An address of `family` that drover writes: a dotted quad (IPv4) or canonical IPv6 text. */
function isFamilyAddress(text: string, family: IPFamily): boolean {
  return text.includes(':') === (family === 'IPv6') && isCanonicalIP(text);
}

/**
 * Whether `entry` is one drover writes to a set of `setType` and `family`:
 * addresses of the family, tcp, udp or sctp, ports 1-65535, prefix lengths
 * of the family.
 */
function isWritableEntry(setType: string, entry: string, family: IPFamily): boolean {
  const m = ENTRY[setType]?.exec(entry);
  if (!m) return false;
  if (setType === 'bitmap:port') return isPort(Number(m[3])) && String(Number(m[3])) === m[3];
  if (setType === 'hash:ip') return isFamilyAddress(m[1]!, family);
  if (m[5] !== undefined && Number(m[5]) > (family === 'IPv6' ? 128 : 32)) return false;
  return isFamilyAddress(m[1]!, family) && isPort(Number(m[3])) && (m[4] === undefined || isFamilyAddress(m[4], family));
}

/** One set as `ipset save` shows it. */
export interface SavedSet {
  /** Set type, e.g. "hash:ip,port". */
  readonly type: string;
  /** The `family` create option, "inet" or "inet6"; absent when the line has none (ipset then means inet; a bitmap has none). */
  readonly family?: string;
  /** Entries as printed (`add NAME <entry>` without options such as timeouts). */
  readonly entries: ReadonlySet<string>;
}

/**
 * Parse `ipset save` output, keeping only the named sets (by default
 * drover's IPv4 sets and their scratch sets; {@link ownedSetNames} for
 * another family's). A set missing from the output is missing from the
 * result. A host-length net (/32, /128) is kept without its length.
 */
export function parseIpsetSave(text: string, names: readonly string[] = OWNED_SET_NAMES): Map<string, SavedSet> {
  const wanted = new Set(names);
  const sets = new Map<string, { type: string; family?: string; entries: Set<string> }>();
  for (const line of text.split('\n')) {
    const words = line.trim().split(/\s+/);
    if (words.length < 3 || !wanted.has(words[1]!)) continue;
    if (words[0] === 'create') {
      const f = words.indexOf('family', 3);
      sets.set(words[1]!, { type: words[2]!, ...(f > 0 && words[f + 1] ? { family: words[f + 1] } : {}), entries: new Set() });
    } else if (words[0] === 'add') {
      const set = sets.get(words[1]!);
      // A /32 net may be printed with or without its length; drover writes it without.
      set?.entries.add(set.type === 'hash:ip,port,net' ? words[2]!.replace(words[2]!.includes(':') ? /\/128$/ : /\/32$/, '') : words[2]!);
    }
  }
  return sets;
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

/** The ipset I/O IPVS mode needs; FakeIpset implements it in memory. */
export interface IpsetExec {
  /** `ipset save`: every set of the network namespace, in save format. */
  save(): Promise<string>;
  /**
   * `ipset restore -exist` with `input` on stdin.
   * @throws CommandError with ipset's message (it names the failing line).
   */
  restore(input: string): Promise<void>;
  /**
   * The number of entries of one of drover's sets, by its name in the
   * kernel ({@link familySetName}) (`ipset list -t NAME`, which prints the
   * set's header and no member: O(1) in the set's size); undefined when the
   * set does not exist. Used by the cheap drift check.
   * @throws CommandError for any other failure; Error for a name that is not one of drover's.
   */
  entryCount(name: string): Promise<number | undefined>;
}

/** The real ipset, spawned with an argument array (never a shell), in the process's network namespace or a named one. */
export class SystemIpset implements IpsetExec {
  /**
   * @param timeoutMs longest wait for one ipset command, in ms.
   * @param netns run ipset in this named network namespace (`ip netns exec`); default: the current one.
   */
  constructor(
    private readonly timeoutMs = 120_000,
    private readonly netns?: string,
  ) {}

  async save(): Promise<string> {
    const res = await runCommand('ipset', ['save'], this.runOpts());
    if (res.code !== 0) throw new CommandError('ipset save', res.code, res.stderr);
    return res.stdout;
  }

  async restore(input: string): Promise<void> {
    const res = await runCommand('ipset', ['restore', '-exist'], { ...this.runOpts(), input });
    if (res.code !== 0) throw new CommandError('ipset restore -exist', res.code, res.stderr);
  }

  async entryCount(name: string): Promise<number | undefined> {
    if (!OWNED_SET_NAMES.includes(name) && !ownedSetNames('IPv6').includes(name)) throw new Error(`${JSON.stringify(name)} is not one of drover's ipsets`);
    const res = await runCommand('ipset', ['list', '-t', name], this.runOpts());
    if (res.code !== 0) {
      if (/does not exist/.test(res.stderr)) return undefined;
      throw new CommandError(`ipset list -t ${name}`, res.code, res.stderr);
    }
    return parseEntryCount(res.stdout, name);
  }

  private runOpts(): { netns?: string; timeoutMs: number } {
    return { timeoutMs: this.timeoutMs, ...(this.netns ? { netns: this.netns } : {}) };
  }
}

/**
 * The "Number of entries: N" line of `ipset list -t` output (ipset(8),
 * LIST with -terse).
 * @throws DroverError when the output has no such line.
 */
export function parseEntryCount(listing: string, name: string): number {
  const m = /^Number of entries: (\d+)$/m.exec(listing);
  if (!m) throw new DroverError(`ipset list -t ${name}: no "Number of entries" line in ${JSON.stringify(listing.slice(0, 200))}`);
  return Number(m[1]);
}
