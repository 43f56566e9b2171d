/**
 * The helper process that appends rules nft cannot compile to drover's
 * table over nf_tables netlink, in the network namespace it runs in
 * (exec.ts SystemNft.addRules starts it with `ip netns exec`, since a
 * netlink socket acts in the namespace of the process that opens it).
 *
 * stdin: one JSON object, {@link RuleRequest}; stdout on success: one
 * line `{"rules": N, "bytes": B, "transactions": T}`; on failure a message on stderr and
 * exit status 1. The request is checked again here (family, chain names,
 * each rule's kind, protocol and timeout, its comment) before a socket is
 * opened.
 */
import { fileURLToPath } from 'node:url';
import type { IPFamily } from '../../model/types.ts';
import { netlinkRuleAdd, type NetlinkRuleOf } from './affinity-rule.ts';
import type { NetlinkRuleSpec } from './layout.ts';
import { NftNetlinkClient } from '../../kernel/nftables/client.ts';

/** What the helper is asked to append: rules of drover's table of `family`, in order. */
export interface RuleRequest {
  readonly family: IPFamily;
  readonly rules: readonly { readonly chain: string; readonly comment: string; readonly netlink: NetlinkRuleSpec }[];
}

/**
 * Read a request from its JSON text.
 * @throws Error naming the field that is missing or not valid.
 */
export function parseRuleRequest(text: string): { readonly family: IPFamily; readonly rules: NetlinkRuleOf[] } {
  const r = JSON.parse(text) as Record<string, unknown>;
  if (r.family !== 'IPv4' && r.family !== 'IPv6') throw new Error(`rules: family ${JSON.stringify(r.family)} is not IPv4 or IPv6`);
  if (!Array.isArray(r.rules)) throw new Error('rules: "rules" is not an array');
  const rules = r.rules.map((x: Record<string, unknown>, i: number): NetlinkRuleOf => {
    if (typeof x.chain !== 'string' || !/^[a-z0-9-]{1,64}$/.test(x.chain)) throw new Error(`rules[${i}]: chain ${JSON.stringify(x.chain)} is not a chain name of drover's`);
    if (typeof x.comment !== 'string') throw new Error(`rules[${i}]: comment is not a string`);
    const n = x.netlink as Record<string, unknown> | undefined;
    if (n?.kind !== 'affinity-record' || (n.proto !== 'tcp' && n.proto !== 'udp' && n.proto !== 'sctp') || typeof n.seconds !== 'number') {
      throw new Error(`rules[${i}]: netlink ${JSON.stringify(n)} is not an affinity record rule`);
    }
    return { chain: x.chain, rule: { text: '', comment: x.comment, netlink: { kind: 'affinity-record', proto: n.proto, seconds: n.seconds } } };
  });
  return { family: r.family, rules };
}

async function main(): Promise<void> {
  let input = '';
  for await (const chunk of process.stdin) input += String(chunk);
  const { family, rules } = parseRuleRequest(input);
  // Encodes (and so validates) every rule before the socket is opened.
  const adds = rules.map((r) => netlinkRuleAdd(family, r));
  const client = await NftNetlinkClient.open();
  try {
    const done = await client.addRules(adds);
    process.stdout.write(`${JSON.stringify(done)}\n`);
  } finally {
    client.close();
  }
}

// Run as a program (not when a test imports it).
if (process.argv[1] !== undefined && fileURLToPath(import.meta.url) === process.argv[1]) {
  main().catch((err: Error) => {
    process.stderr.write(`rule-helper: ${err.message}\n`);
    process.exit(1);
  });
}
