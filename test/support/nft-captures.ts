/**
 * The netlink captures of nft 1.0.6 in test/fixtures/nftables/*.hex (its
 * README says how they were taken): each datagram nft sent or received, in
 * order, host byte order in the headers as on the machine that took them.
 */
import { readFileSync } from 'node:fs';
import type { NlMessage } from '../../src/kernel/nftables/codec.ts';

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

/** A parsed message as the bytes it was captured as: its header (host order) and payload. */
export function messageBytes(m: NlMessage): Buffer {
  const b = Buffer.alloc(16 + m.payload.length);
  b.writeUInt32LE(b.length, 0);
  b.writeUInt16LE(m.type, 4);
  b.writeUInt16LE(m.flags, 6);
  b.writeUInt32LE(m.seq, 8);
  b.writeUInt32LE(m.pid, 12);
  m.payload.copy(b, 16);
  return b;
}
