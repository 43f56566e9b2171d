/**
 * The IPVS commands a mode calls, as a small interface (moby/ipvs's Handle
 * in spirit): {@link IpvsClient} (client.ts) implements it over generic
 * netlink, FakeIpvs (fake.ts) in memory. IPVS has no transaction: each
 * command takes effect on its own (net/netfilter/ipvs/ip_vs_ctl.c), so a
 * caller orders them itself.
 */
import type { DestEntry, RealServer, RealServerKey, ServiceEntry, VirtualServer, VirtualServerKey } from './codec.ts';
import type { DumpResult } from './client.ts';

/**
 * The IPVS commands the backend uses. Every method validates its input
 * before anything is sent (IpvsValidationError) and rejects with
 * IpvsRequestError (`code`: ESRCH, EEXIST, ENOENT, ...) when the kernel
 * refuses; see IpvsClient for the meaning of each.
 */
export interface IpvsKernel {
  /** Every virtual server; fwmark and IPv6 ones are listed in `unsupported`. */
  dumpServices(): Promise<DumpResult<ServiceEntry>>;
  /** One virtual server, or undefined when there is none. */
  getService(key: VirtualServerKey): Promise<ServiceEntry | undefined>;
  /** The destinations of a virtual server (empty for an unknown one). */
  dumpDests(key: VirtualServerKey): Promise<DumpResult<DestEntry>>;
  newService(vs: VirtualServer): Promise<void>;
  setService(vs: VirtualServer): Promise<void>;
  delService(key: VirtualServerKey): Promise<void>;
  newDest(vs: VirtualServerKey, rs: RealServer): Promise<void>;
  setDest(vs: VirtualServerKey, rs: RealServer): Promise<void>;
  delDest(vs: VirtualServerKey, rs: RealServerKey): Promise<void>;
}
