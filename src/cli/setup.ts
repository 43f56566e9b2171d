/**
 * Building the pieces a command needs from its options: the backend (with
 * the iptables variant detected or forced) and the file source.
 */
import { existsSync } from 'node:fs';
import { IptablesBackend } from '../backends/iptables/backend.ts';
import { detectVariant, SystemIptables } from '../backends/iptables/exec.ts';
import type { RenderOptions } from '../backends/iptables/render.ts';
import { FileSource } from '../sources/file.ts';
import type { Logger } from '../util/log.ts';
import type { KernelOptions, RenderCliOptions } from './options.ts';

/** A one-line error for the user; main.ts prints it and exits 1. */
export class UsageError extends Error {
  override name = 'UsageError';
}

/** Render options from the CLI flags. */
export function renderConfig(opts: RenderCliOptions): RenderOptions {
  return { masqueradeAll: opts.masqueradeAll, ...(opts.clusterCidr ? { clusterCIDR: opts.clusterCidr } : {}) };
}

/**
 * The iptables I/O for the command's flags: `--iptables-backend` (or the
 * detected variant) and `--netns`.
 * @throws UsageError when not root.
 */
export async function createIptablesExec(opts: KernelOptions, logger: Logger): Promise<SystemIptables> {
  if (process.getuid?.() !== 0) throw new UsageError('reading or programming iptables needs root (CAP_NET_ADMIN); run drover as root');
  if (opts.netns && !existsSync(`/run/netns/${opts.netns}`)) {
    throw new UsageError(`network namespace ${opts.netns} does not exist (ip netns list shows the named ones)`);
  }
  const variant = opts.iptablesBackend === 'auto' ? await detectVariant(opts.netns) : opts.iptablesBackend;
  logger.debug({ iptables: variant, netns: opts.netns }, 'using iptables-%s', variant);
  return new SystemIptables({ variant, ...(opts.netns ? { netns: opts.netns } : {}) });
}

/**
 * The backend for `opts.mode`.
 * @throws UsageError when not root, or for a mode that is not built yet.
 */
export async function createBackend(opts: KernelOptions, render: RenderOptions, logger: Logger): Promise<IptablesBackend> {
  if (opts.mode === 'ipvs') throw new UsageError('IPVS mode is not built yet; use --mode iptables');
  const exec = await createIptablesExec(opts, logger);
  logger.info({ mode: opts.mode, iptables: exec.variant, netns: opts.netns }, 'using iptables-%s', exec.variant);
  if (render.clusterCIDR === undefined && !render.masqueradeAll) {
    logger.warn('neither --cluster-cidr nor --masquerade-all is set: traffic to ClusterIPs is not masqueraded (only hairpin traffic is)');
  }
  return new IptablesBackend({ exec, render, logger });
}

/** The file source for `--source`. */
export function createSource(opts: RenderCliOptions, logger: Logger): FileSource {
  return new FileSource(opts.source, { serviceCIDR: opts.serviceCidr, logger });
}
