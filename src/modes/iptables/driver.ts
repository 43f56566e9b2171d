/**
 * iptables mode as the commands see it (driver.ts): kube-proxy's NAT chains
 * through `iptables-restore --noflush`, read back with `iptables-save`.
 * Names, options and help only: what the mode does with rules and the kernel
 * is operations.ts, loaded when a command first needs it.
 */
import { operationsOnUse, type ModeDriver } from '../driver.ts';
import { noNodePortLocalhostOption, nodePortLocalhostOption } from './localhost.ts';
import { IPTABLES_MODE, iptablesSection } from './section.ts';

/** The driver of `--mode iptables`. */
export const iptablesMode: ModeDriver = {
  name: IPTABLES_MODE,
  title: 'iptables',
  filter: 'iptables',
  // kube-proxy's default: each sync is one iptables-restore of the changed chains, which costs tens to hundreds of ms at scale.
  minSyncPeriodMs: 1000,
  options: { sync: () => [nodePortLocalhostOption(), noNodePortLocalhostOption()], compare: () => [nodePortLocalhostOption(), noNodePortLocalhostOption()] },
  exclusiveSwitches: { '--nodeport-localhost': 'NodePorts on 127.0.0.1' },
  metrics: async () => (await import('./metrics.ts')).iptablesMetrics,
  help: {
    render: '',
    chains: '',
    chainsJson:
      '[{"servicePort": "ns/name:port", "chains": [{"table": "nat"|"filter", "chain": "KUBE-…", ' +
      '"endpoint": "ip:port" (KUBE-SEP) or null, "pod": "namespace/name" (with --source, for an endpoint derived from a Pod), "rules": ["-A …"]}]}]',
    diff: '',
    trace: '',
    status: '',
    cleanup: '',
  },
  runInfo: (modes) => (iptablesSection(modes)?.nodeportLocalhost === true ? { render: { nodePortLocalhost: true } } : {}),
  recordedSection: (record) => ({ nodeportLocalhost: record.render.nodePortLocalhost === true }),
  ...operationsOnUse(async () => (await import('./operations.ts')).iptablesOperations),
};
