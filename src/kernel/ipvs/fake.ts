/**
 * In-memory IPVS ({@link IpvsKernel}) for unit tests: it keeps the virtual
 * and real servers the kernel would keep, refuses what the kernel refuses
 * with the same errno names (ESRCH, EEXIST, ENOENT, EINVAL, as
 * net/netfilter/ipvs/ip_vs_ctl.c), and encodes every request with the real
 * codec, so a test that passes on the fake sends nothing the kernel would
 * reject.
 */
import {
  IP_VS_SVC_F,
  encodeDelDest,
  encodeDelService,
  encodeGetDests,
  encodeNewDest,
  encodeNewService,
  encodeSetDest,
  encodeSetService,
  type DestEntry,
  type RealServer,
  type RealServerKey,
  type ServiceEntry,
  type VirtualServer,
  type VirtualServerKey,
} from './codec.ts';
import { realServerKey, virtualServerKey } from './keys.ts';
import type { IpvsKernel } from './interface.ts';
import { IpvsRequestError, type DumpResult } from './client.ts';

const ERRNO: Readonly<Record<string, number>> = { EEXIST: 17, ESRCH: 3, ENOENT: 2, EINVAL: 22 };

function refused(command: string, code: string): IpvsRequestError {
  return new IpvsRequestError(command, code, ERRNO[code]);
}

interface FakeService {
  entry: ServiceEntry;
  dests: Map<string, DestEntry>;
}

/** In-memory IPVS (IpvsKernel). */
export class FakeIpvs implements IpvsKernel {
  /** Every modifying command, in order: "NEW_SERVICE TCP/10.96.0.10:80", "SET_DEST TCP/10.96.0.10:80 10.244.1.2:8080 w0". */
  readonly log: string[] = [];
  /** Every request, reads included. */
  requests = 0;
  private readonly services = new Map<string, FakeService>();
  private readonly failures: { command: string; error: Error }[] = [];

  /** Make the next `command` ("NEW_DEST", ...) fail with `error`. */
  failNext(command: string, error: Error): void {
    this.failures.push({ command, error });
  }

  private injected(command: string): void {
    const i = this.failures.findIndex((f) => f.command === command);
    if (i >= 0) throw this.failures.splice(i, 1)[0]!.error;
  }

  async dumpServices(): Promise<DumpResult<ServiceEntry>> {
    this.requests++;
    this.injected('GET_SERVICE');
    return { entries: [...this.services.values()].map((s) => ({ ...s.entry })), unsupported: [] };
  }

  async getService(key: VirtualServerKey): Promise<ServiceEntry | undefined> {
    this.requests++;
    encodeGetDests(key);
    const s = this.services.get(virtualServerKey(key));
    return s ? { ...s.entry } : undefined;
  }

  async dumpDests(key: VirtualServerKey): Promise<DumpResult<DestEntry>> {
    this.requests++;
    encodeGetDests(key);
    const s = this.services.get(virtualServerKey(key));
    return { entries: s ? [...s.dests.values()].map((d) => ({ ...d })) : [], unsupported: [] };
  }

  async newService(vs: VirtualServer): Promise<void> {
    this.command('NEW_SERVICE', () => encodeNewService(vs));
    const key = virtualServerKey(vs);
    if (this.services.has(key)) throw refused('NEW_SERVICE', 'EEXIST');
    this.services.set(key, { entry: serviceEntry(vs), dests: new Map() });
    this.log.push(`NEW_SERVICE ${key} ${describeService(vs)}`);
  }

  async setService(vs: VirtualServer): Promise<void> {
    const s = this.serviceFor('SET_SERVICE', vs, () => encodeSetService(vs));
    s.entry = serviceEntry(vs);
    this.log.push(`SET_SERVICE ${virtualServerKey(vs)} ${describeService(vs)}`);
  }

  async delService(key: VirtualServerKey): Promise<void> {
    this.command('DEL_SERVICE', () => encodeDelService(key));
    if (!this.services.delete(virtualServerKey(key))) throw refused('DEL_SERVICE', 'ESRCH');
    this.log.push(`DEL_SERVICE ${virtualServerKey(key)}`);
  }

  async newDest(vs: VirtualServerKey, rs: RealServer): Promise<void> {
    const s = this.serviceFor('NEW_DEST', vs, () => encodeNewDest(vs, rs));
    if (s.dests.has(realServerKey(rs))) throw refused('NEW_DEST', 'EEXIST');
    s.dests.set(realServerKey(rs), destEntry(rs, 0, 0));
    this.log.push(`NEW_DEST ${virtualServerKey(vs)} ${realServerKey(rs)} w${rs.weight}`);
  }

  async setDest(vs: VirtualServerKey, rs: RealServer): Promise<void> {
    const s = this.serviceFor('SET_DEST', vs, () => encodeSetDest(vs, rs));
    const d = s.dests.get(realServerKey(rs));
    if (!d) throw refused('SET_DEST', 'ENOENT');
    s.dests.set(realServerKey(rs), destEntry(rs, d.activeConns, d.inactiveConns));
    this.log.push(`SET_DEST ${virtualServerKey(vs)} ${realServerKey(rs)} w${rs.weight}`);
  }

  async delDest(vs: VirtualServerKey, rs: RealServerKey): Promise<void> {
    const s = this.serviceFor('DEL_DEST', vs, () => encodeDelDest(vs, rs));
    if (!s.dests.delete(realServerKey(rs))) throw refused('DEL_DEST', 'ENOENT');
    this.log.push(`DEL_DEST ${virtualServerKey(vs)} ${realServerKey(rs)}`);
  }

  /** One command as the kernel takes it: counted, encoded as the real client would (so bad input throws the same), then any injected failure. */
  private command(name: string, encode: () => unknown): void {
    this.requests++;
    encode();
    this.injected(name);
  }

  /** {@link command}, then the virtual server the command is about; ESRCH when there is none, as the kernel answers. */
  private serviceFor(name: string, vs: VirtualServerKey, encode: () => unknown): FakeService {
    this.command(name, encode);
    const s = this.services.get(virtualServerKey(vs));
    if (!s) throw refused(name, 'ESRCH');
    return s;
  }

  /** Set a destination's connection counters (what the kernel counts). */
  setConns(vs: VirtualServerKey | string, rs: RealServerKey | string, active: number, inactive: number): void {
    const s = this.services.get(typeof vs === 'string' ? vs : virtualServerKey(vs));
    const key = typeof rs === 'string' ? rs : realServerKey(rs);
    const d = s?.dests.get(key);
    if (!s || !d) throw new Error(`FakeIpvs: no destination ${key}`);
    s.dests.set(key, { ...d, activeConns: active, inactiveConns: inactive });
  }

  /** The state as ipvsadm -Ln lists it, one line per service and destination, sorted: "TCP 10.96.0.10:80 rr", "  -> 10.244.1.2:8080 Masq 1". */
  list(): string[] {
    const out: string[] = [];
    for (const [key, s] of [...this.services].sort(([a], [b]) => (a < b ? -1 : 1))) {
      const [proto, addr] = key.split('/') as [string, string];
      const e = s.entry;
      out.push(`${proto} ${addr} ${e.scheduler}${e.persistent ? ` persistent ${e.persistent.timeoutSeconds}` : ''}`);
      for (const [rk, d] of [...s.dests].sort(([a], [b]) => (a < b ? -1 : 1))) {
        out.push(`  -> ${rk} ${d.forwarding === 'masq' ? 'Masq' : d.forwarding} ${d.weight}`);
      }
    }
    return out;
  }
}

function describeService(vs: VirtualServer): string {
  return `${vs.scheduler}${vs.persistent ? ` persistent ${vs.persistent.timeoutSeconds}` : ''}`;
}

function serviceEntry(vs: VirtualServer): ServiceEntry {
  return {
    protocol: vs.protocol,
    address: vs.address,
    port: vs.port,
    scheduler: vs.scheduler,
    ...(vs.persistent ? { persistent: { timeoutSeconds: vs.persistent.timeoutSeconds } } : {}),
    netmask: vs.netmask ?? 0xffffffff,
    flags: IP_VS_SVC_F.HASHED | (vs.persistent ? IP_VS_SVC_F.PERSISTENT : 0),
  };
}

function destEntry(rs: RealServer, active: number, inactive: number): DestEntry {
  return {
    address: rs.address,
    port: rs.port,
    weight: rs.weight,
    forwarding: rs.forwarding,
    upperThreshold: rs.upperThreshold ?? 0,
    lowerThreshold: rs.lowerThreshold ?? 0,
    activeConns: active,
    inactiveConns: inactive,
    persistConns: 0,
  };
}
