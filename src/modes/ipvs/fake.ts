/**
 * In-memory stand-ins for IPVS mode's I/O, for unit tests, in the spirit of
 * FakeIptables: each keeps the state the kernel would keep, refuses what the
 * kernel refuses (with the same error codes), and validates its input with
 * the same checks as the real implementation, so a test that passes on the
 * fakes sends nothing the kernel would reject.
 *
 * - {@link FakeIpvs}: virtual and real servers (IpvsKernel);
 * - {@link FakeIpset}: `ipset save` / `ipset restore -exist` (IpsetExec);
 * - {@link FakeLinks}: links and their IPv4 addresses (LinkManager);
 * - {@link FakeSysctls}: sysctl values (Sysctls).
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
  AF_INET6,
  parseIPAddress,
  type DestEntry,
  type RealServer,
  type RealServerKey,
  type ServiceEntry,
  type VirtualServer,
  type VirtualServerKey,
} from '../../kernel/ipvs/codec.ts';
import { realServerKey, virtualServerKey } from './desired.ts';
import { checkEntry, type IpsetExec } from './ipset.ts';
import type { IPFamily } from '../../model/types.ts';
import type { IpvsKernel } from './kernel.ts';
import { IpvsRequestError, type DumpResult } from '../../kernel/ipvs/client.ts';
import type { InterfaceAddress, LinkManager } from '../../kernel/rtnetlink/link.ts';
import type { Sysctls } from './sysctl.ts';
import { CommandError } from '../../kernel/exec.ts';

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

/**
 * In-memory ipset (IpsetExec) with `-exist` semantics; `restore` is line by
 * line, like ipset: create, add, del, flush, swap and destroy.
 */
export class FakeIpset implements IpsetExec {
  /** Every restore input, in order. */
  readonly restores: string[] = [];
  /** Number of save() calls. */
  saves = 0;
  private readonly sets = new Map<string, { type: string; family?: 'inet6'; entries: Set<string> }>();

  async save(): Promise<string> {
    this.saves++;
    const out: string[] = [];
    for (const [name, s] of this.sets) {
      // As ipset save prints them: a bitmap:port set has a range and no family.
      out.push(s.type === 'bitmap:port' ? `create ${name} bitmap:port range 0-65535` : `create ${name} ${s.type} family ${s.family ?? 'inet'} hashsize 1024 maxelem 65536 bucketsize 12 initval 0x5d1b1e6c`);
      for (const e of s.entries) out.push(`add ${name} ${e}`);
    }
    return out.length > 0 ? `${out.join('\n')}\n` : '';
  }

  async restore(input: string): Promise<void> {
    this.restores.push(input);
    const lines = input.split('\n');
    lines.forEach((line, i) => {
      if (line.trim() === '') return;
      const fail = (why: string): never => {
        throw new CommandError('ipset restore -exist', 1, `ipset v7.17: Error in line ${i + 1}: ${why}`);
      };
      const w = line.split(' ');
      const [cmd, name] = w;
      if (!name || !/^[A-Za-z0-9_-]{1,31}$/.test(name)) fail('bad set name');
      const set = this.sets.get(name!);
      switch (cmd) {
        case 'create': {
          const type = w[2] ?? '';
          if (!['hash:ip', 'hash:ip,port', 'hash:ip,port,ip', 'hash:ip,port,net', 'bitmap:port'].includes(type)) fail(`unsupported set type ${type}`);
          if (set && set.type !== type) fail('Set cannot be created: set with the same name already exists');
          const f = w.indexOf('family');
          if (!set) this.sets.set(name!, { type, ...(f > 0 && w[f + 1] === 'inet6' ? { family: 'inet6' as const } : {}), entries: new Set() });
          return;
        }
        case 'add':
        case 'del': {
          if (!set) fail('The set with the given name does not exist');
          if (w.length !== 3) fail('bad entry');
          try {
            checkEntry(set!.type, w[2]!, set!.family === 'inet6' ? 'IPv6' : 'IPv4');
          } catch (err) {
            fail((err as Error).message);
          }
          if (cmd === 'add') set!.entries.add(w[2]!);
          else set!.entries.delete(w[2]!);
          return;
        }
        case 'destroy':
          if (!set) fail('The set with the given name does not exist');
          this.sets.delete(name!);
          return;
        case 'flush':
          if (!set) fail('The set with the given name does not exist');
          set!.entries.clear();
          return;
        case 'swap': {
          // ipset(8): both sets must exist and be of the same type; the kernel swaps them atomically.
          const other = this.sets.get(w[2] ?? '');
          if (!set || !other) fail('The set with the given name does not exist');
          if (set!.type !== other!.type) fail('The sets cannot be swapped: their type does not match');
          this.sets.set(name!, other!);
          this.sets.set(w[2]!, set!);
          return;
        }
        default:
          fail(`unknown command ${cmd}`);
      }
    });
  }

  /** The number of entries of a set, as `ipset list -t` prints it; undefined when it does not exist. */
  async entryCount(name: string): Promise<number | undefined> {
    return this.sets.get(name)?.entries.size;
  }

  /** Entries of a set, sorted, or undefined when it does not exist. */
  entries(name: string): string[] | undefined {
    const s = this.sets.get(name);
    return s ? [...s.entries].sort() : undefined;
  }

  /** Change a set behind drover's back (drift); entries are taken as given, as a hand-made `ipset add` may hold ones drover never writes. */
  setEntries(name: string, type: string, entries: string[]): void {
    this.sets.set(name, { type, entries: new Set(entries) });
  }
}

/** In-memory links and addresses (LinkManager). */
export class FakeLinks implements LinkManager {
  /** Every modifying call, in order: "add 10.96.0.10/32", "del 10.96.0.99/32", "create kube-ipvs0". */
  readonly log: string[] = [];
  /** Number of addresses() calls (address dumps). */
  reads = 0;
  private readonly links = new Map<string, { index: number; kind: string; addresses: InterfaceAddress[] }>([
    ['lo', { index: 1, kind: 'loopback', addresses: [{ address: '127.0.0.1', prefixLength: 8 }] }],
  ]);
  private nextIndex = 2;

  async find(name: string): Promise<number | undefined> {
    return this.links.get(name)?.index;
  }

  async ensureDummy(name: string): Promise<{ index: number; created: boolean }> {
    const l = this.links.get(name);
    if (l) return { index: l.index, created: false };
    const index = this.nextIndex++;
    this.links.set(name, { index, kind: 'dummy', addresses: [] });
    this.log.push(`create ${name}`);
    return { index, created: true };
  }

  async addresses(index: number, family: IPFamily = 'IPv4'): Promise<InterfaceAddress[]> {
    this.reads++;
    return this.byIndex(index).addresses.filter((a) => a.address.includes(':') === (family === 'IPv6'));
  }

  async addAddress(index: number, address: string): Promise<void> {
    const full = parseIPAddress(address, 'address').af === AF_INET6 ? 128 : 32;
    const l = this.byIndex(index);
    if (!l.addresses.some((a) => a.address === address && a.prefixLength === full)) l.addresses.push({ address, prefixLength: full });
    this.log.push(`add ${address}/${full}`);
  }

  async delAddress(index: number, addr: InterfaceAddress): Promise<void> {
    parseIPAddress(addr.address, 'address');
    const l = this.byIndex(index);
    l.addresses = l.addresses.filter((a) => !(a.address === addr.address && a.prefixLength === addr.prefixLength));
    this.log.push(`del ${addr.address}/${addr.prefixLength}`);
  }

  async deleteLink(index: number): Promise<void> {
    for (const [name, l] of this.links) {
      if (l.index === index) {
        this.links.delete(name);
        this.log.push(`delete ${name}`);
      }
    }
  }

  /** Addresses of link `name` as "a.b.c.d/len", sorted; undefined when there is no such link. */
  addressesOf(name: string): string[] | undefined {
    return this.links.get(name)?.addresses.map((a) => `${a.address}/${a.prefixLength}`).sort();
  }

  /** Add an address behind drover's back. */
  addByHand(name: string, address: string, prefixLength: number): void {
    this.links.get(name)?.addresses.push({ address, prefixLength });
  }

  private byIndex(index: number): { index: number; kind: string; addresses: InterfaceAddress[] } {
    const l = [...this.links.values()].find((x) => x.index === index);
    if (!l) throw new Error(`rtnetlink: no link with index ${index}: ENODEV`);
    return l;
  }
}

/** In-memory sysctls: those the IPVS module provides exist, with the kernel's defaults. */
export class FakeSysctls implements Sysctls {
  /** Every write, "name=value". */
  readonly writes: string[] = [];
  readonly values = new Map<string, string>([
    ['net.ipv4.vs.conntrack', '0'],
    ['net.ipv4.vs.expire_nodest_conn', '0'],
    ['net.ipv4.vs.expire_quiescent_template', '0'],
    ['net.ipv4.ip_forward', '0'],
    ['net.ipv6.conf.all.forwarding', '0'],
  ]);

  async read(name: string): Promise<string | undefined> {
    return this.values.get(name);
  }

  async write(name: string, value: string): Promise<void> {
    if (!this.values.has(name)) throw new Error(`ENOENT: no such sysctl ${name}`);
    this.values.set(name, value);
    this.writes.push(`${name}=${value}`);
  }
}
