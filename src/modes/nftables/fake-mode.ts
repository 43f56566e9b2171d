/**
 * nftables mode on the fake nft (driver.ts ModeDriver.fake): the backend
 * `run` uses, writing every change as an `nft -f` script to FakeNft (no
 * netlink element writer, so that every element goes through a script),
 * traced from the table the fake lists.
 */
import { compareAddresses } from '../../model/addr.ts';
import { silentLogger } from '../../util/log.ts';
import type { FakeMode, FakeModeOptions } from '../driver.ts';
import { NftablesBackend } from './backend.ts';
import { FakeNft } from './fake.ts';
import { nftTraceContext } from './trace.ts';

/** nftables mode on a fresh FakeNft, with `opts.nodeAddresses` as the NodePort addresses and the trace's local addresses. */
export function nftablesFakeMode(opts: FakeModeOptions): FakeMode {
  const nft = new FakeNft();
  return {
    backend: new NftablesBackend({ nft, render: opts.render, frontends: { nodePortIPs: [...opts.nodeAddresses].sort(compareAddresses) }, logger: silentLogger() }),
    written: () => [...nft.scripts],
    trace: async () => nftTraceContext(await nft.list(), new Set(opts.nodeAddresses)).ctx,
  };
}
