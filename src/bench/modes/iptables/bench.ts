/**
 * iptables mode's part of `drover bench` (bench/harness.ts ModeBench): the
 * harness (harness.ts) runs in the bench's own process and reaches the node
 * namespace through `iptables-restore` run with `ip netns exec`.
 */
import { toIptablesVariant } from '../../../kernel/iptables/exec.ts';
import type { ModeBench } from '../../harness.ts';
import { BENCH_CLUSTER_CIDR } from '../../synth.ts';
import type { BenchSettings } from '../../types.ts';
import { iptablesHarness } from './harness.ts';

/** The bench of `--mode iptables`. */
export const iptablesBench: ModeBench = {
  placement: 'process',
  async createHarness({ netns, iptablesVariant }) {
    if (netns === undefined) throw new Error('the iptables bench harness programs the node namespace, which is missing');
    return iptablesHarness({ netns, variant: toIptablesVariant(iptablesVariant), render: { clusterCIDR: BENCH_CLUSTER_CIDR, masqueradeAll: false } });
  },
  unavailableReason: async () => undefined,
  methodText: (s: BenchSettings) => [
    '',
    'iptables mode (each timed from starting iptables-restore to its exit):',
    '',
    '- **raw minimal**: only what the change needs: the new or changed KUBE-SVC/KUBE-SEP chains, the deleted ones, and the one KUBE-SERVICES rule that comes or goes. This is the physical limit of a change through iptables-restore.',
    "- **kube-proxy-style**: what kube-proxy's partial sync writes: the static chains of both tables declared and rewritten, including the whole KUBE-SERVICES chain with one rule per service port, plus the changed chains.",
    `- **full re-render**: the whole ruleset re-sent with \`--noflush\` and every chain declared. On iptables-nft this grows much faster than the ruleset, so it is measured ${s.fullBaselineRepeats} time(s) per size, on a "service added" change only, and only up to ${s.fullBaselineMax} services (\`--full-baseline-max\`). It re-sends everything whatever the change, so its time stands for every kind of change.`,
  ],
};
