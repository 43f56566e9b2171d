/**
 * The netlink captures of nft 1.0.6 in test/fixtures/nftables/*.hex (its
 * README says how they were taken): each datagram nft sent or received, in
 * order, host byte order in the headers as on the machine that took them.
 */
import { readFileSync } from 'node:fs';

/** The datagrams of capture `name` (without `.hex`), in order. */
export function capture(name: string): { dir: 'send' | 'recv'; bytes: Buffer }[] {
  return readFileSync(new URL(`../fixtures/nftables/${name}.hex`, import.meta.url), 'utf8')
    .trim()
    .split('\n')
    .map((line) => {
      const [dir, hex] = line.split(' ');
      return { dir: dir as 'send' | 'recv', bytes: Buffer.from(hex!, 'hex') };
    });
}
