/**
 * The netlink captures of nft 1.0.6 in test/fixtures/nftables/*.hex (its
 * README says how they were taken): each datagram nft sent or received, in
 * order, host byte order in the headers as on the machine that took them.
 */
import { readFileSync } from 'node:fs';
import { nftType, parseMessages, type NlMessage } from '../../src/kernel/nftables/codec.ts';
import { NFT_MSG } from '../../src/kernel/nftables/constants.ts';
import { parseAttrs, type NlAttr } from '../../src/kernel/netlink/nlattr.ts';

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

/** The NFT_MSG_NEWRULE messages nft sent in capture `name`, in order. */
export function sentNewRules(name: string): NlMessage[] {
  return capture(name)
    .filter((d) => d.dir === 'send')
    .flatMap((d) => parseMessages(d.bytes))
    .filter((m) => m.type === nftType(NFT_MSG.NEWRULE));
}

/** NFTA_LOOKUP_SET_ID and NFTA_DYNSET_SET_ID: nft names a set both ways; drover by name only. */
const SET_IDS: Readonly<Record<string, number>> = { lookup: 4, dynset: 2 };

/** A rule's expressions as {@link ruleShape} gives them: each its name, then its attributes as `type=hex`. */
export type ExprShape = string[];

/**
 * A NEWRULE's attributes as comparable text: each top-level attribute as
 * hex under `attr N`, the expressions (`exprs`) each as its name and its
 * attributes (hex, nested data as hex), the set ids left out.
 */
export function ruleShape(payload: Buffer): { exprs?: ExprShape[]; [attr: string]: unknown } {
  const attrs = parseAttrs(payload.subarray(4));
  const hex = (a: NlAttr) => a.data.toString('hex');
  const out: { exprs?: ExprShape[]; [attr: string]: unknown } = {};
  for (const a of attrs) {
    if (a.type !== 4) {
      out[`attr ${a.type}`] = hex(a);
      continue;
    }
    out.exprs = parseAttrs(a.data).map((el) => {
      const [name, data] = parseAttrs(el.data);
      const kind = name!.data.toString('ascii').replace(/\0+$/, '');
      return [kind, ...parseAttrs(data!.data).filter((x) => x.type !== SET_IDS[kind]).map((x) => `${x.type}=${hex(x)}`)];
    });
  }
  return out;
}
