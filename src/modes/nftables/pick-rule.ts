/**
 * The rules that pick one of a frontend's N endpoints (layout.ts
 * countRule, chains `pick` and `external-local`), as nf_tables expressions
 * written over netlink (netlink/rule-codec.ts), so that they DNAT new TCP,
 * UDP and SCTP flows alike.
 *
 * In nft's words the rule is
 *
 *   ip daddr . meta l4proto . th dport @endpoint-count-N
 *   dnat ip to ip daddr . meta l4proto . th dport . numgen random mod N map @endpoints
 *
 * but nft 1.0.6 compiles it with `meta l4proto tcp` in front of the map
 * lookup (`nft --debug=netlink`: `[ meta load l4proto => reg 1 ] [ cmp eq
 * reg 1 0x00000006 ]`), because the map is declared with `typeof … tcp
 * dport` (layout.ts slotMap: nft cannot read a typeof with `th dport` back
 * from the kernel). That rule DNATs TCP only. The expressions here are
 * nft's own for that rule (test/fixtures/nftables/rule-pick.hex, captured
 * from nft 1.0.6) without that dependency: the map's key is the frontend's
 * address, protocol and port whatever the protocol, as its elements are.
 *
 * How it is written: a script writes the rule as nft text with the comment
 * {@link PickRuleSpec.replaces} (TCP only, but in its place in the chain,
 * in the same transaction as the sets and elements it reads), and right
 * after it drover replaces that rule, by its handle, with these expressions
 * and the layout's comment (NLM_F_REPLACE: in place, in one transaction;
 * netlink-rules.ts). A rule still carrying the script's comment (the
 * replacement failed, or a table written by an earlier drover, whose rules
 * had that comment) differs from the layout by comment, so the next full
 * sync writes its chain again.
 *
 * Registers (each field padded to 4 bytes, as nft's concatenations are):
 * the frontend `daddr . l4proto . dport` from NFT_REG32_00 (IPv4: 0-2,
 * IPv6: 0-5), the slot (numgen) right after it; the map's value `address .
 * port` loaded from NFT_REG32_00 (IPv4: 0-1, IPv6: 0-4), where the DNAT
 * reads it.
 */
import type { IPFamily } from '../../model/types.ts';
import { countSetName, LOCAL, MAIN, nftFamily, type PickRuleSpec } from './layout.ts';
import { NFT_META, NFT_PAYLOAD, NFT_REG } from '../../kernel/nftables/constants.ts';
import type { RuleExpr } from '../../kernel/nftables/rule-codec.ts';

/** The 4-byte register `n` (0-15): NFT_REG32_00 + n. */
const reg32 = (n: number): number => NFT_REG.R32_00 + n;

/**
 * The expressions of the rule that DNATs a new connection to a frontend of
 * set `*endpoint-count-N` of selection `spec.selection` to one of its N
 * endpoints (`numgen random mod N` as the slot of map `endpoints` or
 * `local-endpoints`), any protocol, in the table of `family`.
 * @throws UnsafeElementError for a count that is not a positive integer.
 */
export function pickRuleExprs(family: IPFamily, spec: Pick<PickRuleSpec, 'selection' | 'count'>): RuleExpr[] {
  const sel = spec.selection === 'local' ? LOCAL : MAIN;
  const countSet = countSetName(sel, spec.count);
  const v6 = family === 'IPv6';
  const addrBytes = v6 ? 16 : 4;
  const addrRegs = addrBytes / 4;
  // The destination address in the IPv6 header (24) and the IPv4 one (16); the destination port at 2 of the transport header.
  const daddrAt = v6 ? 24 : 16;
  const frontend: RuleExpr[] = [
    { kind: 'payload', base: NFT_PAYLOAD.NETWORK_HEADER, offset: daddrAt, len: addrBytes, dreg: reg32(0) },
    { kind: 'meta', key: NFT_META.L4PROTO, dreg: reg32(addrRegs) },
    { kind: 'payload', base: NFT_PAYLOAD.TRANSPORT_HEADER, offset: 2, len: 2, dreg: reg32(addrRegs + 1) },
  ];
  return [
    ...frontend,
    { kind: 'lookup', set: countSet, sreg: reg32(0) },
    ...frontend,
    { kind: 'numgen', dreg: reg32(addrRegs + 2), modulus: spec.count },
    { kind: 'lookup', set: sel.map, sreg: reg32(0), dreg: reg32(0) },
    { kind: 'nat', family: nftFamily(family).table.family, regAddr: reg32(0), regProto: reg32(addrRegs) },
  ];
}
