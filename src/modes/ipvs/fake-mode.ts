/**
 * IPVS mode on fakes (driver.ts ModeDriver.fake): the backend `run` uses,
 * on the fake IPVS, ipset, iptables, links and sysctls of fake.ts, traced
 * from what the inspect commands read of them (live.ts readIpvsLive).
 */
import { compareAddresses } from '../../model/addr.ts';
import { DEFAULT_SERVICE_CIDR } from '../../model/allocate.ts';
import { silentLogger } from '../../util/log.ts';
import type { FakeMode, FakeModeOptions } from '../driver.ts';
import { FakeIptables } from '../../kernel/iptables/fake.ts';
import { IpvsBackend } from './backend.ts';
import { FakeIpset } from '../../kernel/ipset/fake.ts';
import { FakeIpvs } from '../../kernel/ipvs/fake.ts';
import { FakeLinks } from '../../kernel/rtnetlink/fake.ts';
import { FakeSysctls } from './fake.ts';
import { readIpvsLive } from './live.ts';
import { ipvsTraceContext } from './trace.ts';

/** The fakes' clock, ms: it stands still, so a removed real server stays in its graceful period (weight 0). */
const NOW = 1_000_000;

/**
 * IPVS mode on fresh fakes, scheduler `rr`, with `opts.nodeAddresses` as
 * the host's addresses and NodePort addresses; the trace takes them and
 * the addresses bound to kube-ipvs0 as local.
 */
export function ipvsFakeMode(opts: FakeModeOptions): FakeMode {
  const io = { ipvs: new FakeIpvs(), ipset: new FakeIpset(), iptables: new FakeIptables(), iptables6: new FakeIptables(), links: new FakeLinks(), sysctls: new FakeSysctls() };
  const node = [...opts.nodeAddresses].sort(compareAddresses);
  const backend = new IpvsBackend({
    ...io,
    render: opts.render,
    scheduler: 'rr',
    serviceCIDR: opts.serviceCIDR ?? DEFAULT_SERVICE_CIDR,
    nodeAddresses: { nodePortIPs: node, hostAddresses: node },
    gracefulPeriodMs: 60_000,
    gracefulCheckIntervalMs: 0,
    logger: silentLogger(),
    now: () => NOW,
  });
  return {
    backend,
    written: () => [...io.iptables.restores, ...io.ipset.restores, io.ipvs.log.join('\n'), io.links.log.join('\n'), io.sysctls.writes.join('\n')],
    async trace() {
      const live = await readIpvsLive(io, { tables: true });
      return ipvsTraceContext(live, new Set([...opts.nodeAddresses, ...(live.bound ?? []).map((a) => a.address)]));
    },
  };
}
