/**
 * nftables mode's element writer for a command: nf_tables netlink in this
 * process's network namespace. A netlink socket acts in the namespace of
 * the process that opened it, so with `--netns` elements go through
 * `nft -f` instead (inside that namespace).
 */
import type { KernelOptions } from '../../config/kernel.ts';
import type { IPFamily } from '../../model/types.ts';
import type { Logger } from '../../util/log.ts';
import type { ElementWriter } from './backend.ts';
import { NftNetlinkClient } from '../../kernel/nftables/client.ts';
import { NetlinkElementWriter } from './netlink-writer.ts';

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
