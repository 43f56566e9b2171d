/** IPVS mode on in-memory fakes, shared by the unit tests of the IPVS backend and of the inspect commands in IPVS mode. */
import { FakeIptables } from '../../src/kernel/iptables/fake.ts';
import { IpvsBackend, type IpvsBackendOptions } from '../../src/modes/ipvs/backend.ts';
import { FakeIpset } from '../../src/kernel/ipset/fake.ts';
import { FakeIpvs } from '../../src/kernel/ipvs/fake.ts';
import { FakeLinks } from '../../src/kernel/rtnetlink/fake.ts';
import { FakeSysctls } from '../../src/modes/ipvs/fake.ts';
import type { Snapshot } from '../../src/model/types.ts';
import { silentLogger } from '../../src/util/log.ts';
import { ep, snap, sp } from './snapshots.ts';

export const RENDER = { clusterCIDR: '10.244.0.0/16', masqueradeAll: false };

export const web = (...ips: string[]) => sp('default/web:http', '10.96.0.10', 80, ips.map((ip) => ep(`${ip}:8080`)));
export const dns = (...ips: string[]) => sp('kube-system/dns:dns', '10.96.0.53', 53, ips.map((ip) => ep(`${ip}:53`)), { protocol: 'UDP' });
export const empty = sp('default/empty:http', '10.96.0.11', 80, []);
export const base = (): Snapshot => snap(web('10.244.1.2', '10.244.1.3'), dns('10.244.2.2'), empty);

/** The fakes of one node, and an IPVS backend on them. */
export class World {
  ipvs = new FakeIpvs();
  ipset = new FakeIpset();
  iptables = new FakeIptables();
  /** The IPv6 family's ip6tables (a dual-stack backend writes it; the inspect commands read it). */
  iptables6 = new FakeIptables();
  links = new FakeLinks();
  sysctls = new FakeSysctls();
  clock = 1_000_000;

  backend(extra: Partial<IpvsBackendOptions> = {}): IpvsBackend {
    return new IpvsBackend({
      ipvs: this.ipvs,
      ipset: this.ipset,
      iptables: this.iptables,
      links: this.links,
      sysctls: this.sysctls,
      render: RENDER,
      scheduler: 'rr',
      serviceCIDR: '10.96.0.0/12',
      gracefulPeriodMs: 60_000,
      gracefulCheckIntervalMs: 0,
      logger: silentLogger(),
      now: () => this.clock,
      ...extra,
    });
  }

  /** Counts of writes so far, to compare before/after a sync. */
  writes(): number[] {
    return [this.ipvs.log.length, this.ipset.restores.length, this.iptables.restores.length, this.links.log.length, this.sysctls.writes.length];
  }
}

