/**
 * nftables mode's element writer and notification watch for a command:
 * nf_tables netlink in this process's network namespace. A netlink socket
 * acts in the namespace of the process that opened it, so with `--netns`
 * elements go through `nft -f` instead (inside that namespace), and nothing
 * is watched.
 */
import type { KernelOptions } from '../../config/kernel.ts';
import type { IPFamily } from '../../model/types.ts';
import type { Logger } from '../../util/log.ts';
import type { ElementWriter } from './backend.ts';
import { NftNetlinkClient } from '../../kernel/nftables/client.ts';
import { NetlinkElementWriter } from './netlink-writer.ts';
import { NFPROTO } from '../../kernel/nftables/constants.ts';
import { spawnNftWatcher } from '../../kernel/nftables/watch.ts';
import { RepairWatch } from './repair-watch.ts';
import { nftFamily } from './layout.ts';

/**
 * The element writer of the table of `family` (default IPv4) for `opts` (netlink, in this process's namespace, one
 * socket per family), or undefined to write elements with `nft -f` (`--netns`, or no socket).
 */
export async function openElementWriter(opts: KernelOptions, logger: Logger, family: IPFamily = 'IPv4'): Promise<ElementWriter | undefined> {
  if (opts.netns) {
    logger.info({ netns: opts.netns }, 'nftables mode with --netns writes elements with nft -f (a netlink socket acts in the namespace of its process)');
    return undefined;
  }
  try {
    return new NetlinkElementWriter(await NftNetlinkClient.open(), family);
  } catch (err) {
    logger.warn({ err: (err as Error).message }, 'cannot open an nf_tables netlink socket; writing elements with nft -f');
    return undefined;
  }
}

/**
 * The watch of nf_tables notifications for `table ip drover` and `table ip6
 * drover` (repair-watch.ts) in this process's namespace; its process
 * (kernel/nftables/watch-process.ts) is started when `drover run` starts the
 * watch, with a warning when it cannot be (the drift check then compares
 * the generation id at each sync period).
 */
export function repairWatch(logger: Logger): RepairWatch {
  const tables = (['IPv4', 'IPv6'] as const).map((f) => ({ family: f === 'IPv4' ? NFPROTO.IPV4 : NFPROTO.IPV6, name: nftFamily(f).table.name }));
  return new RepairWatch({
    open: () => spawnNftWatcher(tables, { onExit: (why) => logger.warn({ why }, 'the nf_tables watcher process ended; it is started again, and drover\'s tables are then read back in full') }),
    logger,
  });
}
