/**
 * The iptables I/O of a command: the variant detected as kube-proxy's
 * iptables-wrapper does (or forced with `--iptables-backend`), in the
 * namespace of `--netns`. IPVS mode uses it too, for the iptables rules it
 * still needs.
 */
import { requireNetns, requireRoot } from '../shared/access.ts';
import type { KernelOptions } from '../../config/kernel.ts';
import type { Logger } from '../../util/log.ts';
import { detectVariant, SystemIptables } from '../../kernel/iptables/exec.ts';
import { readTables } from '../../kernel/iptables/live.ts';
import type { ParsedDump } from '../../kernel/iptables/parse.ts';
import type { IPFamily } from '../../model/types.ts';

/**
 * The iptables I/O for the command's flags: `--iptables-backend` (or the
 * detected variant) and `--netns`.
 * @throws UsageError when not root or the namespace does not exist.
 */
export async function createIptablesExec(opts: KernelOptions, logger: Logger, family: IPFamily = 'IPv4'): Promise<SystemIptables> {
  requireRoot('iptables');
  requireNetns(opts.netns);
  const variant = opts.iptablesBackend === 'auto' ? await detectVariant(opts.netns) : opts.iptablesBackend;
  logger.debug({ iptables: variant, netns: opts.netns, family }, 'using iptables-%s', variant);
  return new SystemIptables({ variant, family, ...(opts.netns ? { netns: opts.netns } : {}) });
}

/**
 * The iptables I/O of both families, IPv4 first, of one variant (detected
 * once, as kube-proxy's iptables-wrapper does for both).
 * @throws as {@link createIptablesExec}.
 */
export async function createDualStackExec(opts: KernelOptions, logger: Logger): Promise<Record<IPFamily, SystemIptables>> {
  const v4 = await createIptablesExec(opts, logger);
  return { IPv4: v4, IPv6: new SystemIptables({ variant: v4.variant, family: 'IPv6', ...(opts.netns ? { netns: opts.netns } : {}) }) };
}

/**
 * The live filter and nat tables (iptables-save), with the iptables variant
 * detected or forced as for `run`.
 * @throws UsageError when not root; CommandError when iptables-save fails.
 */
export async function readKernel(opts: KernelOptions, logger: Logger, family: IPFamily = 'IPv4'): Promise<ParsedDump> {
  return readTables(await createIptablesExec(opts, logger, family));
}
