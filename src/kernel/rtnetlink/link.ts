/**
 * The dummy interface `kube-ipvs0` that holds every ClusterIP as a /32, so
 * that the kernel treats ClusterIPs as local addresses and IPVS sees
 * connections to them in LOCAL_IN (kube-proxy: pkg/proxy/ipvs/proxier.go,
 * defaultDummyDevice, and netlink_linux.go EnsureDummyDevice/EnsureAddressBind).
 * The link stays down, as kube-proxy leaves it: the kernel adds the local
 * route of an address whatever the link state. IPv6 ClusterIPs are bound
 * as /128 with IFA_F_NODAD (no duplicate address detection, which could
 * not run on a link that is down and would leave the address tentative),
 * next to the IPv4 ones: the link is shared by both families.
 *
 * The I/O is the small {@link LinkManager} interface: {@link RtnlLinkManager}
 * talks rtnetlink through the npm package `netlink@0.3.0` (RtNetlinkSocket),
 * in the process's own network namespace; FakeLinks (fake.ts) is in memory.
 * {@link planAddresses} is the pure diff.
 */
import { createRtNetlink, FlagsNew, type RtNetlinkSocket } from 'netlink';
import { compareAddresses, ipFromBytes } from '../../model/addr.ts';
import { AttrWriter } from '../netlink/nlattr.ts';
import { AF_INET6, parseIPAddress } from '../ipvs/codec.ts';
import type { IPFamily } from '../../model/types.ts';
import { isErrno, isExists, isPermission, netlinkErrorCode } from '../netlink/errno.ts';

/** The dummy interface's name (kube-proxy's defaultDummyDevice). */
export const DUMMY_INTERFACE = 'kube-ipvs0';

/** An address of an interface. */
export interface InterfaceAddress {
  /** Dotted quad, or canonical IPv6 text. */
  readonly address: string;
  /** Prefix length, 0-32 (IPv4) or 0-128 (IPv6). */
  readonly prefixLength: number;
}

/** The prefix length of one address of `family` (32 or 128): how drover binds addresses to kube-ipvs0. */
export function hostPrefixLength(family: IPFamily): number {
  return family === 'IPv6' ? 128 : 32;
}

/** rtnetlink operations on one link; every address is validated before it is sent. */
export interface LinkManager {
  /** Interface index of link `name`, or undefined when there is none. */
  find(name: string): Promise<number | undefined>;
  /**
   * Create dummy link `name` when it is missing (left down).
   * @returns its index and whether it was created now
   */
  ensureDummy(name: string): Promise<{ index: number; created: boolean }>;
  /** The addresses of `family` (default IPv4) of link `index`. */
  addresses(index: number, family?: IPFamily): Promise<InterfaceAddress[]>;
  /**
   * Add `address`/32 (an IPv6 one as /128, nodad) to link `index`; an address already there is not an error.
   * `label`: the IPv4 address's label (IFA_LABEL, ip-address(8) `label`), at most 15 characters; default: the link's name.
   */
  addAddress(index: number, address: string, label?: string): Promise<void>;
  /** The IPv4 addresses labelled `label` (IFA_LABEL), of any link, with the link's index. */
  labelled?(label: string): Promise<Array<InterfaceAddress & { readonly index: number }>>;
  /** Remove `address`/`prefixLength` from link `index`; an address already gone is not an error. */
  delAddress(index: number, addr: InterfaceAddress): Promise<void>;
  /** Delete link `index`. */
  deleteLink(index: number): Promise<void>;
}

/** What {@link planAddresses} changes. */
export interface AddressPlan {
  /** ClusterIPs to bind, sorted. */
  readonly add: readonly string[];
  /** Addresses to unbind (every address of kube-ipvs0 that is not a wanted /32), sorted. */
  readonly remove: readonly InterfaceAddress[];
}

/**
 * The difference between the wanted ClusterIPs and the addresses kube-ipvs0
 * has (of one family): kube-ipvs0 belongs to drover, so any other address
 * on it is stale. Pure.
 * @param full the prefix length a wanted address is bound with (32, or 128 for IPv6)
 */
export function planAddresses(wanted: readonly string[], current: readonly InterfaceAddress[], full = 32): AddressPlan {
  const want = new Set(wanted);
  const have = new Set(current.filter((a) => a.prefixLength === full).map((a) => a.address));
  return {
    add: [...want].filter((a) => !have.has(a)).sort(compareAddresses),
    remove: current
      .filter((a) => a.prefixLength !== full || !want.has(a.address))
      .sort((a, b) => compareAddresses(a.address, b.address) || a.prefixLength - b.prefixLength),
  };
}

const AF_INET = 2;
/** IFLA_INFO_KIND inside IFLA_LINKINFO (<linux/if_link.h>). */
const IFLA_INFO_KIND = 1;
/** Link names the kernel accepts (IFNAMSIZ 16, NUL included); drover only ever uses kube-ipvs0. */
const IFNAME = /^[A-Za-z0-9][A-Za-z0-9_.-]{0,14}$/;

function checkName(name: string): string {
  if (!IFNAME.test(name)) throw new Error(`refusing to use ${JSON.stringify(name)} as an interface name`);
  return name;
}

function checkIndex(index: number): number {
  if (!Number.isInteger(index) || index < 1 || index > 0x7fffffff) throw new Error(`interface index ${index} is not valid`);
  return index;
}

/** A {@link LinkManager} over rtnetlink (`netlink@0.3.0`), in this process's network namespace. */
export class RtnlLinkManager implements LinkManager {
  private readonly sock: RtNetlinkSocket;

  constructor(private readonly timeoutMs = 10_000) {
    this.sock = createRtNetlink();
    // Without a listener, a socket error would be thrown by EventEmitter.
    this.sock.socket.on('error', () => undefined);
  }

  async find(name: string): Promise<number | undefined> {
    checkName(name);
    const links = await this.sock.getLinks(undefined, undefined, { timeout: this.timeoutMs });
    return links.find((l) => l.attrs.ifname === name)?.data.index;
  }

  async ensureDummy(name: string): Promise<{ index: number; created: boolean }> {
    const existing = await this.find(name);
    if (existing !== undefined) return { index: existing, created: false };
    const linkinfo = new AttrWriter().string(IFLA_INFO_KIND, 'dummy').toBuffer();
    try {
      await this.sock.newLink({}, { ifname: checkName(name), linkinfo }, { flags: FlagsNew.CREATE | FlagsNew.EXCL, timeout: this.timeoutMs });
    } catch (err) {
      if (!isExists(err)) throw linkError(`create dummy link ${name}`, err);
    }
    const index = await this.find(name);
    if (index === undefined) throw new Error(`dummy link ${name} was created but cannot be found`);
    return { index, created: true };
  }

  async addresses(index: number, family: IPFamily = 'IPv4'): Promise<InterfaceAddress[]> {
    checkIndex(index);
    const af = family === 'IPv6' ? AF_INET6 : AF_INET;
    const size = family === 'IPv6' ? 16 : 4;
    const msgs = await this.sock.getAddresses(undefined, undefined, { timeout: this.timeoutMs });
    const out: InterfaceAddress[] = [];
    for (const m of msgs) {
      if (m.data.index !== index || m.data.family !== af) continue;
      const raw = m.attrs.local ?? m.attrs.address;
      if (!raw || raw.length !== size) continue;
      out.push({ address: ipFromBytes(raw).text, prefixLength: m.data.prefixlen ?? size * 8 });
    }
    return out;
  }

  async addAddress(index: number, address: string, label?: string): Promise<void> {
    const { af, bytes: raw } = parseIPAddress(address, 'kube-ipvs0 address');
    const v6 = af === AF_INET6;
    const prefixlen = v6 ? 128 : 32;
    if (label !== undefined && (v6 || !/^[A-Za-z0-9][A-Za-z0-9_.:-]{0,14}$/.test(label))) throw new Error(`refusing ${JSON.stringify(label)} as the label of ${address}`);
    try {
      await this.sock.newAddress(
        { family: af, prefixlen, index: checkIndex(index), ...(v6 ? { flags: { nodad: true } } : {}) },
        { local: raw, address: raw, ...(label !== undefined ? { label } : {}) },
        { flags: FlagsNew.CREATE | FlagsNew.EXCL, timeout: this.timeoutMs },
      );
    } catch (err) {
      if (!isExists(err)) throw linkError(`add ${address}/${prefixlen} to link ${index}`, err);
    }
  }

  async labelled(label: string): Promise<Array<InterfaceAddress & { readonly index: number }>> {
    const msgs = await this.sock.getAddresses(undefined, undefined, { timeout: this.timeoutMs });
    return msgs
      .filter((m) => m.data.family === AF_INET && m.attrs.label === label && (m.attrs.local ?? m.attrs.address)?.length === 4)
      .map((m) => ({ index: m.data.index!, address: ipFromBytes((m.attrs.local ?? m.attrs.address)!).text, prefixLength: m.data.prefixlen ?? 32 }));
  }

  async delAddress(index: number, addr: InterfaceAddress): Promise<void> {
    const { af, bytes: raw } = parseIPAddress(addr.address, 'kube-ipvs0 address');
    const max = af === AF_INET6 ? 128 : 32;
    if (!Number.isInteger(addr.prefixLength) || addr.prefixLength < 0 || addr.prefixLength > max) {
      throw new Error(`prefix length ${addr.prefixLength} is not valid`);
    }
    try {
      await this.sock.delAddress(
        { family: af, prefixlen: addr.prefixLength, index: checkIndex(index) },
        { local: raw, address: raw },
        { timeout: this.timeoutMs },
      );
    } catch (err) {
      if (!isErrno(err, 'EADDRNOTAVAIL')) throw linkError(`remove ${addr.address}/${addr.prefixLength} from link ${index}`, err);
    }
  }

  async deleteLink(index: number): Promise<void> {
    try {
      await this.sock.delLink({ index: checkIndex(index) }, {}, { timeout: this.timeoutMs });
    } catch (err) {
      if (!isErrno(err, 'ENODEV')) throw linkError(`delete link ${index}`, err);
    }
  }

  /** Close the socket. */
  close(): void {
    this.sock.socket.close();
  }
}

function linkError(what: string, err: unknown): Error {
  const code = netlinkErrorCode(err);
  return new Error(`rtnetlink: ${what} failed: ${code ?? (err instanceof Error ? err.message : String(err))}${isPermission(err) ? ' (CAP_NET_ADMIN is required)' : ''}`);
}
