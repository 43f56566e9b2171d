/**
 * Reading the live IPVS-mode state that the inspect commands work on (never
 * drover's memory): every virtual server with its real servers (IPVS over
 * generic netlink), the addresses of kube-ipvs0 (rtnetlink), every ipset
 * (`ipset save`) and, when asked, the filter and nat tables of both families
 * (`iptables-save`, `ip6tables-save`).
 * All I/O goes through the backend's interfaces, so tests use the fakes.
 */
import type { IptablesExec } from '../../kernel/iptables/exec.ts';
import type { ParsedDump } from '../../kernel/iptables/parse.ts';
import { compareText } from './desired.ts';
import { familySetName, IPVS_SETS, parseIpsetSave } from './ipset.ts';
import type { IpsetExec, SavedSet } from '../../kernel/ipset/ipset.ts';
import { joinHostPort } from '../../model/addr.ts';
import type { IPFamily } from '../../model/types.ts';
import { readVirtualServers, type IpvsKernel } from './kernel.ts';
import { DUMMY_INTERFACE, hostPrefixLength, type InterfaceAddress, type LinkManager } from '../../kernel/rtnetlink/link.ts';
import type { KernelVirtualServer } from './reconcile.ts';
import { IPVS_SYSCTLS, type Sysctls } from './sysctl.ts';
import { readTables } from '../../kernel/iptables/live.ts';

/** The I/O the IPVS inspect commands need. */
export interface IpvsInspectIO {
  readonly ipvs: IpvsKernel;
  readonly ipset: IpsetExec;
  readonly links: LinkManager;
  readonly iptables: IptablesExec;
  /** ip6tables of the same variant: the IPv6 family's rules (dual-stack.ts). */
  readonly iptables6: IptablesExec;
  /** The network namespace's sysctls (/proc/sys/net is per namespace). */
  readonly sysctls: Sysctls;
}

/** The live IPVS-mode state. */
export interface IpvsLive {
  /** Every non-fwmark virtual server of either family by virtualServerKey ("TCP/10.96.0.10:80", "TCP/fd00:96::10:80"), sorted by key, with its real servers in the kernel's order. */
  readonly virtualServers: ReadonlyMap<string, KernelVirtualServer>;
  /** Entries the codec does not model (fwmark), one line each; they are not shown. */
  readonly unsupported: readonly string[];
  /** The IPv4 addresses of kube-ipvs0; null when there is no such link. */
  readonly bound: readonly InterfaceAddress[] | null;
  /** Its IPv6 addresses (the IPv6 family's); null when there is no such link. */
  readonly bound6: readonly InterfaceAddress[] | null;
  /** Every ipset of the network namespace by name (entries as `ipset save` prints them). */
  readonly sets: ReadonlyMap<string, SavedSet>;
  /** The filter and nat tables (line numbers as in `iptables-save -t TABLE`); empty unless read with `tables: true`. */
  readonly tables: ParsedDump;
  /** The IPv6 filter and nat tables (line numbers as in `ip6tables-save -t TABLE`); empty unless read with `tables: true`, or when {@link tables6Error} is set. */
  readonly tables6: ParsedDump;
  /** Why `ip6tables-save` could not read the IPv6 tables (a kernel without IPv6); undefined when it could or was not asked to. */
  readonly tables6Error?: string;
  /** The value of each sysctl IPVS mode sets (IPVS_SYSCTLS); undefined for one the kernel lacks. Read with `tables: true`, else empty. */
  readonly sysctls: ReadonlyMap<string, string | undefined>;
}

/** The names of every set in `ipset save` output. */
function setNames(save: string): string[] {
  return [...save.matchAll(/^create (\S+)/gm)].map((m) => m[1]!);
}

/**
 * The IPv6 filter and nat tables, or why they cannot be read: a node
 * without IPv6 (ipv6.disable=1) has no IPv6 tables, and IPVS mode then
 * never programs the IPv6 family, so this is no error of the IPv4 side's.
 */
async function readTables6(exec: IptablesExec): Promise<{ tables6: ParsedDump; tables6Error?: string }> {
  try {
    return { tables6: await readTables(exec) };
  } catch (err) {
    return { tables6: new Map(), tables6Error: (err as Error).message };
  }
}

/**
 * Read the live IPVS-mode state. The reads run one after the other (the
 * IPVS client serialises its dumps anyway).
 * @param opts.tables also read the filter and nat tables of both families and IPVS mode's sysctls (trace, diff, status)
 * @throws IpvsRequestError when a netlink dump fails, CommandError when
 *   `ipset save` or `iptables-save` fails (a failing `ip6tables-save` is
 *   kept in `tables6Error`), Error from rtnetlink.
 */
export async function readIpvsLive(io: IpvsInspectIO, opts: { tables?: boolean } = {}): Promise<IpvsLive> {
  const read = await readVirtualServers(io.ipvs, () => true);
  const virtualServers = new Map([...read.state].sort(([a], [b]) => compareText(a, b)));
  const index = await io.links.find(DUMMY_INTERFACE);
  const bound = index === undefined ? null : await io.links.addresses(index);
  const bound6 = index === undefined ? null : await io.links.addresses(index, 'IPv6');
  const save = await io.ipset.save();
  const sets = parseIpsetSave(save, setNames(save));
  const tables = opts.tables ? await readTables(io.iptables) : new Map();
  const v6 = opts.tables ? await readTables6(io.iptables6) : { tables6: new Map() };
  const sysctls = new Map<string, string | undefined>();
  for (const { name } of opts.tables ? IPVS_SYSCTLS : []) sysctls.set(name, await io.sysctls.read(name));
  return { virtualServers, unsupported: read.unsupported, bound, bound6, sets, tables, ...v6, sysctls };
}

/**
 * The note an inspect command prints (on stderr) about the virtual servers it
 * could not take into account: "drover: fwmark virtual servers not
 * shown: …", or "" when there are none. `what` says what the command did not
 * do with them ("not shown").
 */
export function unsupportedNote(live: Pick<IpvsLive, 'unsupported'>, what: string): string {
  return live.unsupported.length > 0 ? `drover: fwmark virtual servers ${what}: ${live.unsupported.join('; ')}\n` : '';
}

/** The /32 addresses of kube-ipvs0 as a set, or with `family` IPv6 its /128 ones (empty when the link is missing). */
export function boundAddresses(live: Pick<IpvsLive, 'bound'> & Partial<Pick<IpvsLive, 'bound6'>>, family: IPFamily = 'IPv4'): Set<string> {
  const full = hostPrefixLength(family);
  return new Set(((family === 'IPv6' ? live.bound6 : live.bound) ?? []).filter((a) => a.prefixLength === full).map((a) => a.address));
}

/** "TCP 10.96.0.10:80" for a virtual server key, "TCP [fd00:96::10]:80" for an IPv6 one. */
export function virtualServerLabel(vs: { readonly protocol: string; readonly address: string; readonly port: number }): string {
  return `${vs.protocol} ${joinHostPort(vs.address, vs.port)}`;
}

/** What `drover status --mode ipvs` counts in the live state. */
export interface IpvsCounts {
  readonly virtualServers: number;
  readonly realServers: number;
  /** Real servers with weight 0 (quiesced: draining or set by hand). */
  readonly quiesced: number;
  /** Entries of each of drover's sets, IPv4 ones then the IPv6 family's (KUBE-6-…); null for a set that does not exist. */
  readonly sets: Readonly<Record<string, number | null>>;
  /** Addresses on kube-ipvs0, of both families; null when the link does not exist. */
  readonly addresses: number | null;
}

/** Count the live state's virtual servers, real servers, drover's set entries and kube-ipvs0 addresses. Pure. */
export function ipvsCounts(live: IpvsLive): IpvsCounts {
  const dests = [...live.virtualServers.values()].flatMap((v) => v.dests);
  return {
    virtualServers: live.virtualServers.size,
    realServers: dests.length,
    quiesced: dests.filter((d) => d.weight === 0).length,
    sets: Object.fromEntries((['IPv4', 'IPv6'] as const).flatMap((f) => IPVS_SETS.map((s) => familySetName(s.name, f))).map((name) => [name, live.sets.get(name)?.entries.size ?? null])),
    addresses: live.bound === null ? null : live.bound.length + (live.bound6 ?? []).length,
  };
}
