/** What every mode checks before it reads or programs the kernel: root, and the `--netns` it was given. */
import { existsSync } from 'node:fs';
import { UsageError } from '../../errors.ts';

/**
 * Refuse to go on without root.
 * @param what the kernel state, as the message names it ("iptables", "nftables").
 * @throws UsageError naming `what` when this process is not root.
 */
export function requireRoot(what: string): void {
  if (process.getuid?.() !== 0) throw new UsageError(`reading or programming ${what} needs root (CAP_NET_ADMIN); run drover as root`);
}

/**
 * Refuse a `--netns` that names no namespace (`/run/netns/NAME`, as `ip netns` keeps them).
 * @throws UsageError naming the namespace.
 */
export function requireNetns(netns: string | undefined): void {
  if (netns && !existsSync(`/run/netns/${netns}`)) throw new UsageError(`network namespace ${netns} does not exist (ip netns list shows the named ones)`);
}
