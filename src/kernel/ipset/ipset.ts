/**
 * ipset(8), the tool of the kernel's IP sets (net/netfilter/ipset), as the
 * IPVS mode drives it: the save-format parser, the entry syntax of the set
 * types drover writes (hash:ip, hash:ip,port, hash:ip,port,ip,
 * hash:ip,port,net, bitmap:port) with the validation every written entry
 * goes through, and the command I/O ({@link IpsetExec}: `ipset save`,
 * `ipset restore -exist`, `ipset list -t`). The in-memory fake is fake.ts.
 *
 * ipset has no transaction: `ipset restore` applies its input line by line
 * and stops at the first failing line, keeping what the lines before it
 * did; only `swap` of two sets is atomic in the kernel. Which sets exist
 * and what they hold is the IPVS mode's layout (modes/ipvs/ipset.ts).
 */
import { isCanonicalIPv4, parseIP } from '../../model/addr.ts';
import type { IPFamily } from '../../model/types.ts';
import { CommandError, runCommand } from '../exec.ts';
import { DroverError } from '../../errors.ts';

/** The longest set name the kernel takes (IPSET_MAXNAMELEN 32, with its NUL). */
export const MAX_SET_NAME = 31;

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

/** A set name ipset takes as one argument: 1 to {@link MAX_SET_NAME} characters, not starting with "-" (it would be read as an option), no space or control character. */
const SET_NAME = /^[A-Za-z0-9_.:][A-Za-z0-9_.:+-]{0,30}$/;

/**
 * `name` when it is a valid set name to put on ipset's command line.
 * @throws IpsetValidationError otherwise.
 */
export function checkSetName(name: string): string {
  if (!SET_NAME.test(name)) throw new IpsetValidationError('set name', name);
  return name;
}

/**
 * An entry "ip,proto:port" of a hash:ip,port set (KUBE-EXTERNAL-IP,
 * KUBE-LOAD-BALANCER and their -LOCAL and -FW sets, KUBE-NODE-PORT-SCTP).
 * @throws IpsetValidationError
 */
export function ipPortEntry(address: string, protocol: string, p: number): string {
  return `${ip(address)},${proto(protocol)}:${port(p)}`;
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
 * Check an entry of a set of `setType` again, just before it is written.
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
export function isWritableEntry(setType: string, entry: string, family: IPFamily): boolean {
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
 * Parse `ipset save` output, keeping only the sets named in `names`. A set
 * missing from the output is missing from the result. A host-length net
 * (/32, /128) is kept without its length.
 */
export function parseIpsetSave(text: string, names: readonly string[]): Map<string, SavedSet> {
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

/** The ipset I/O: what a mode calls; {@link SystemIpset} runs ipset(8), FakeIpset (fake.ts) is in memory. */
export interface IpsetExec {
  /** `ipset save`: every set of the network namespace, in save format. */
  save(): Promise<string>;
  /**
   * `ipset restore -exist` with `input` on stdin.
   * @throws CommandError with ipset's message (it names the failing line).
   */
  restore(input: string): Promise<void>;
  /**
   * The number of entries of set `name` (`ipset list -t NAME`, which prints
   * the set's header and no member: O(1) in the set's size); undefined when
   * the set does not exist. Used by the cheap drift check.
   * @throws CommandError for any other failure; IpsetValidationError for a name that is not a set name (see {@link checkSetName}).
   */
  entryCount(name: string): Promise<number | undefined>;
}

/** The real ipset(8), spawned with an argument array (never a shell), in the process's network namespace or a named one. */
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
    const res = await runCommand('ipset', ['list', '-t', checkSetName(name)], this.runOpts());
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
