/**
 * The iptables I/O of a command: the variant detected as kube-proxy's
 * iptables-wrapper does (or forced with `--iptables-backend`), in the
 * namespace of `--netns`. IPVS mode uses it too, for the iptables rules it
 * still needs.
 */
import { requireNetns, requireRoot } from '../shared/access.ts';
import type { KernelOptions } from '../../cli/options.ts';
import type { Logger } from '../../util/log.ts';
import { detectVariant, SystemIptables } from './exec.ts';
import { readTables } from './live.ts';
import type { ParsedDump } from './parse.ts';

/**
 * The iptables I/O for the command's flags: `--iptables-backend` (or the
 * detected variant) and `--netns`.
 * @throws UsageError when not root or the namespace does not exist.
 */
export async function createIptablesExec(opts: KernelOptions, logger: Logger): Promise<SystemIptables> {
  requireRoot('iptables');
  requireNetns(opts.netns);
  const variant = opts.iptablesBackend === 'auto' ? await detectVariant(opts.netns) : opts.iptablesBackend;
  logger.debug({ iptables: variant, netns: opts.netns }, 'using iptables-%s', variant);
  return new SystemIptables({ variant, ...(opts.netns ? { netns: opts.netns } : {}) });
}

/**
 * The live filter and nat tables (iptables-save), with the iptables variant
 * detected or forced as for `run`.
 * @throws UsageError when not root; CommandError when iptables-save fails.
 */
export async function readKernel(opts: KernelOptions, logger: Logger): Promise<ParsedDump> {
  return readTables(await createIptablesExec(opts, logger));
}
