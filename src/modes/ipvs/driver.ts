/**
 * IPVS mode as the commands see it (driver.ts): virtual and real servers
 * over generic netlink, kube-ipvs0 and ipsets, after kube-proxy's IPVS
 * proxier (pkg/proxy/ipvs/proxier.go). Everything runs in drover's own
 * network namespace (wiring.ts).
 * Names, options and help only: what the mode does with rules and the kernel
 * is operations.ts, loaded when a command first needs it.
 */
import { operationsOnUse, type ModeDriver } from '../driver.ts';
import { DEFAULT_IPVS_SCHEDULER, IPVS_MODE, ipvsOptions, ipvsSchedulerOption, ipvsSection } from './options.ts';

/** The driver of `--mode ipvs`. */
export const ipvsMode: ModeDriver = {
  name: IPVS_MODE,
  title: 'IPVS',
  filter: 'iptables',
  // kube-proxy's default: each sync is one iptables-restore of the changed chains, which costs tens to hundreds of ms at scale.
  minSyncPeriodMs: 1000,
  options: { sync: () => ipvsOptions(), compare: () => [ipvsSchedulerOption()] },
  help: {
    render: ', or with --mode ipvs also ipsets, kube-ipvs0 and virtual servers',
    chains:
      '; with --mode ipvs: each virtual server with its real servers (weight, forwarding, active and inactive connections), ' +
      'its kube-ipvs0 binding and its KUBE-CLUSTER-IP and KUBE-LOOP-BACK entries, named by --source',
    chainsJson:
      'with --mode ipvs: [{"servicePort": "ns/name:port" or null, ' +
      '"key": "TCP/ip:port", "virtualServer": {protocol, address, port, scheduler, persistentTimeoutSeconds, netmask, flags} or null, ' +
      '"bound": bool, "clusterIP": {set, entry, present}, "realServers": [{address, port, weight, forwarding, activeConns, inactiveConns, loopBack, pod (with --source, for an endpoint derived from a Pod)}]}]',
    diff: " (with --mode ipvs: virtual servers, real servers, kube-ipvs0 addresses, ipset entries and IPVS mode's rules)",
    trace: '; with --mode ipvs also the virtual server, its scheduler and the real servers with their probability',
    status: '; in IPVS mode also the virtual servers, real servers, ipset entries and kube-ipvs0 addresses',
    cleanup: ' (with --mode ipvs also its virtual servers, kube-ipvs0 and ipsets)',
  },
  runInfo: (modes) => ({ ipvs: { scheduler: ipvsSection(modes).ipvsScheduler } }),
  recordedSection: (record) => ({ ipvsScheduler: record.ipvs?.scheduler ?? DEFAULT_IPVS_SCHEDULER }),
  ...operationsOnUse(async () => (await import('./operations.ts')).ipvsOperations, false, true),
};
