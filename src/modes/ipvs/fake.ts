/**
 * In-memory sysctls for IPVS mode's unit tests ({@link FakeSysctls}). The
 * kernel-level fakes of IPVS mode's I/O live with their libraries:
 * kernel/ipvs/fake.ts (FakeIpvs), kernel/ipset/fake.ts (FakeIpset),
 * kernel/rtnetlink/fake.ts (FakeLinks).
 */
import type { Sysctls } from './sysctl.ts';

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
