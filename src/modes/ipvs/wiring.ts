/**
 * IPVS mode's I/O for a command, in this process's network namespace:
 * netlink sockets (IPVS, rtnetlink) act in the namespace of the process
 * that opened them, so `--netns` cannot work; start drover inside the
 * namespace instead. Checks in this order: `--netns`, IPVS in the kernel,
 * root.
 */
import { UsageError } from '../../cli/usage-error.ts';
import type { KernelOptions } from '../../cli/options.ts';
import { DEFAULT_SERVICE_CIDR } from '../../model/allocate.ts';
import type { Logger } from '../../util/log.ts';
import type { SystemIptables } from '../iptables/exec.ts';
import type { RenderOptions } from '../iptables/render.ts';
import { createIptablesExec } from '../iptables/wiring.ts';
import type { ModeOptions } from '../driver.ts';
import type { IPPrefix } from '../../model/addr.ts';
import { IpvsBackend } from './backend.ts';
import { nodeAddresses } from './node-ips.ts';
import { SystemIpset } from './ipset.ts';
import { RtnlLinkManager } from './link.ts';
import type { IpvsInspectIO } from './live.ts';
import { IpvsClient, IpvsUnavailableError } from './netlink.ts';
import type { IpvsCliOptions } from './options.ts';
import { ProcSysctls } from './sysctl.ts';

/**
 * IPVS mode's backend, in this process's network namespace: netlink sockets
 * (IPVS, rtnetlink) always act in the namespace of the process that opened
 * them, so `--netns` cannot work; start drover inside the namespace instead.
 * Checks in this order: `--netns`, IPVS in the kernel, root.
 * @throws UsageError (one line) for each of them.
 */
export async function createIpvsBackend(opts: ModeOptions & Partial<IpvsCliOptions> & { readonly serviceCidr?: string }, render: RenderOptions, logger: Logger): Promise<IpvsBackend> {
  const { ipvs, iptables } = await openIpvsMode(opts, logger);
  const scheduler = opts.ipvsScheduler ?? 'rr';
  const gracefulPeriodMs = opts.ipvsGracefulPeriod ?? 900_000;
  const serviceCIDR = opts.serviceCidr ?? DEFAULT_SERVICE_CIDR;
  // Read once, as kube-proxy reads the node's addresses for NodePorts (node-ips.ts).
  const addresses = nodeAddresses(opts.nodeportAddresses as readonly IPPrefix[] | undefined);
  logger.info(
    { mode: 'ipvs', iptables: iptables.variant, scheduler, gracefulPeriodMs, serviceCidr: serviceCIDR, nodePortAddresses: addresses.nodePortIPs },
    'using IPVS mode (scheduler %s)',
    scheduler,
  );
  return new IpvsBackend({
    ipvs,
    reopenIpvs: () => IpvsClient.open(),
    ipset: new SystemIpset(),
    iptables,
    links: new RtnlLinkManager(),
    sysctls: new ProcSysctls(),
    render,
    scheduler,
    serviceCIDR,
    nodeAddresses: addresses,
    gracefulPeriodMs,
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
    sysctls: new ProcSysctls(),
    close: () => {
      ipvs.close();
      links.close();
    },
  };
}
