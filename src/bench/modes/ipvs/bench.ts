/**
 * IPVS mode's part of `drover bench` (bench/harness.ts ModeBench): the harness
 * (harness.ts) runs in a worker inside the node namespace, because its
 * IPVS generic netlink and rtnetlink sockets act on the namespace of its
 * process.
 */
import { SystemIptables, toIptablesVariant } from '../../../kernel/iptables/exec.ts';
import { SystemIpset } from '../../../modes/ipvs/ipset.ts';
import { RtnlLinkManager } from '../../../kernel/rtnetlink/link.ts';
import { IpvsClient, IpvsUnavailableError } from '../../../kernel/ipvs/client.ts';
import { ProcSysctls } from '../../../modes/ipvs/sysctl.ts';
import type { ModeBench } from '../../harness.ts';
import { BENCH_CLUSTER_CIDR } from '../../synth.ts';
import type { BenchSettings } from '../../types.ts';
import { ipvsHarness } from './harness.ts';

/** The bench of `--mode ipvs`. */
export const ipvsBench: ModeBench = {
  placement: 'namespace',
  async createHarness({ iptablesVariant }) {
    const variant = toIptablesVariant(iptablesVariant);
    // Generous timeouts: an emulated guest is ~25x slower than a host.
    const ipvs = await IpvsClient.open({ timeoutMs: 120_000 });
    const links = new RtnlLinkManager();
    return ipvsHarness(
      {
        ipvs,
        ipset: new SystemIpset(900_000),
        iptables: new SystemIptables({ variant, timeoutMs: 900_000 }),
        links,
        sysctls: new ProcSysctls(),
        close: () => {
          links.close();
          ipvs.close();
        },
      },
      { iptablesVariant, render: { clusterCIDR: BENCH_CLUSTER_CIDR, masqueradeAll: false } },
    );
  },
  async unavailableReason() {
    try {
      (await IpvsClient.open()).close();
      return undefined;
    } catch (err) {
      const guest = '; `npm run bench` measures IPVS mode in the test guest instead (scripts/vm/)';
      if (err instanceof IpvsUnavailableError) return `this kernel has no IPVS (the generic netlink family IPVS is not there)${guest}`;
      return `IPVS cannot be reached: ${(err as Error).message}${guest}`;
    }
  },
  methodText: (s: BenchSettings) => [
        '',
        'IPVS mode (each timed from the first command sent, or the ipset process started, to the last answer):',
        '',
        '- **raw minimal**: the IPVS commands the change needs (one real server added or deleted; one virtual server added with its real servers, or deleted), its ipset entries (one `ipset restore`) and its ClusterIP on kube-ipvs0.',
        "- **kube-proxy-style**: what kube-proxy's IPVS proxier does on every sync (it has no partial sync): read and update the ipsets, rewrite its iptables rules with one `iptables-restore --noflush`, list kube-ipvs0's addresses and bind every ClusterIP again, read every virtual server and its real servers (one GET_SERVICE and one destination dump each, plus one dump of all virtual servers), then send the commands that differ. Its reads and plan are on the clock. It is a lower bound of kube-proxy's cost, in kube-proxy's favour: the reads are pipelined where kube-proxy makes them one at a time, the set entries go in one `ipset restore` where kube-proxy runs `ipset add` per entry, and kube-proxy's per-sync `iptables-save` and chain checks are left out.",
        `- **full re-render**: every virtual server and real server sent again (SET_SERVICE, SET_DEST), every set entry and every ClusterIP, without reading first; ${s.fullBaselineRepeats} time(s) per size on a "service added" change, up to ${s.fullBaselineMax} services.`,
  ],
};
