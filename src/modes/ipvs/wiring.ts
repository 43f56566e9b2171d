/**
 * IPVS mode's I/O for a command, in this process's network namespace:
 * netlink sockets (IPVS, rtnetlink) act in the namespace of the process
 * that opened them, so `--netns` cannot work; start drover inside the
 * namespace instead. Checks in this order: `--netns`, IPVS in the kernel,
 * root.
 */
import { UsageError } from '../../errors.ts';
import type { KernelOptions } from '../../config/kernel.ts';
import { DEFAULT_SERVICE_CIDR } from '../../model/allocate.ts';
import type { Logger } from '../../util/log.ts';
import { SystemIptables } from '../../kernel/iptables/exec.ts';
import { createIptablesExec } from '../shared/iptables-wiring.ts';
import { ipv6RenderOptions, type RenderOptions } from '../../config/render.ts';
import type { BackendConfig } from '../driver.ts';
import { DualStackIpvsBackend } from './dual-stack.ts';
import { nodeAddresses } from './node-ips.ts';
import { SystemIpset } from './ipset.ts';
import { RtnlLinkManager } from '../../kernel/rtnetlink/link.ts';
import type { IpvsInspectIO } from './live.ts';
import { IpvsClient, IpvsUnavailableError } from '../../kernel/ipvs/client.ts';
import { ipvsSection } from './options.ts';
import { ProcSysctls } from './sysctl.ts';

/**
 * IPVS mode's backend for both IP families (dual-stack.ts), in this
 * process's network namespace: netlink sockets (IPVS, rtnetlink) always act
 * in the namespace of the process that opened them, so `--netns` cannot
 * work; start drover inside the namespace instead. Checks in this order:
 * `--netns`, IPVS in the kernel, root. The IPv6 family uses ip6tables of
 * the same variant, the IPv6 entry of `--cluster-cidr`, the node's IPv6
 * addresses for NodePorts, and no service CIDR (`--service-cidr` is an
 * IPv4 range): its virtual servers are drover's when bound to kube-ipvs0 or
 * on the node's own addresses.
 * @throws UsageError (one line) for each of them.
 */
export async function createIpvsBackend(config: BackendConfig, render: RenderOptions, logger: Logger): Promise<DualStackIpvsBackend> {
  const { ipvs, iptables } = await openIpvsMode(config.kernel, logger);
  const { ipvsScheduler: scheduler, ipvsGracefulPeriod: gracefulPeriodMs } = ipvsSection(config.modes);
  const serviceCIDR = config.render.serviceCidr ?? DEFAULT_SERVICE_CIDR;
  // Read once, as kube-proxy reads the node's addresses for NodePorts (node-ips.ts).
  const cidrs = config.render.nodeportAddresses;
  const addresses = nodeAddresses(cidrs);
  const addresses6 = nodeAddresses(cidrs, undefined, 'IPv6');
  logger.info(
    { mode: 'ipvs', iptables: iptables.variant, scheduler, gracefulPeriodMs, serviceCidr: serviceCIDR, nodePortAddresses: [...addresses.nodePortIPs, ...addresses6.nodePortIPs] },
    'using IPVS mode (scheduler %s)',
    scheduler,
  );
  const iptables6 = new SystemIptables({ variant: iptables.variant, family: 'IPv6' });
  return new DualStackIpvsBackend({
    shared: {
      ipvs,
      reopenIpvs: () => IpvsClient.open(),
      ipset: new SystemIpset(),
      links: new RtnlLinkManager(),
      sysctls: new ProcSysctls(),
      scheduler,
      gracefulPeriodMs,
    },
    IPv4: { iptables, render, serviceCIDR, nodeAddresses: addresses },
    IPv6: { iptables: iptables6, render: ipv6RenderOptions(render, config.render.clusterCidr), nodeAddresses: addresses6 },
    logger,
  });
}

/**
 * IPVS mode works in drover's own network namespace: netlink sockets (IPVS,
 * rtnetlink) act in the namespace of the process that opened them.
 * @throws UsageError when `--netns` is given, naming the way to do it instead.
 */
function refuseNetnsInIpvsMode(opts: KernelOptions): void {
  if (opts.netns) {
    throw new UsageError(
      `--netns cannot be used with --mode ipvs (IPVS and kube-ipvs0 are programmed over netlink in drover's own network namespace); start drover inside the namespace instead: ip netns exec ${opts.netns} drover ... --mode ipvs`,
    );
  }
}

/**
 * An IPVS generic netlink client.
 * @throws UsageError when the kernel has no IPVS.
 */
async function openIpvs(): Promise<IpvsClient> {
  try {
    return await IpvsClient.open();
  } catch (err) {
    if (err instanceof IpvsUnavailableError) {
      throw new UsageError('--mode ipvs: IPVS is not available in this kernel (no generic netlink family IPVS; is the ip_vs module installed?); use --mode iptables');
    }
    throw err;
  }
}

/**
 * IPVS mode's netlink client and iptables, checked in this order: `--netns`,
 * IPVS in the kernel, root.
 * @throws UsageError (one line) for each of them.
 */
async function openIpvsMode(opts: KernelOptions, logger: Logger): Promise<{ ipvs: IpvsClient; iptables: SystemIptables }> {
  refuseNetnsInIpvsMode(opts);
  const ipvs = await openIpvs();
  try {
    return { ipvs, iptables: await createIptablesExec(opts, logger) };
  } catch (err) {
    ipvs.close();
    throw err;
  }
}

/** The I/O of the read-only commands in IPVS mode; `close` ends its netlink sockets. */
export interface IpvsInspectSession extends IpvsInspectIO {
  close(): void;
}

/**
 * The I/O the inspect commands read IPVS mode's state with, in this
 * process's network namespace: the same checks, in the same order, as
 * {@link createIpvsBackend}.
 * @throws UsageError for `--netns`, a kernel without IPVS, or no root.
 */
export async function createIpvsInspectIO(opts: KernelOptions, logger: Logger): Promise<IpvsInspectSession> {
  const { ipvs, iptables } = await openIpvsMode(opts, logger);
  const links = new RtnlLinkManager();
  return {
    ipvs,
    ipset: new SystemIpset(),
    links,
    iptables,
    iptables6: new SystemIptables({ variant: iptables.variant, family: 'IPv6' }),
    sysctls: new ProcSysctls(),
    close: () => {
      ipvs.close();
      links.close();
    },
  };
}
