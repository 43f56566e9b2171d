/**
 * The helper process that writes the rules nft cannot write as drover
 * means them (netlink-rules.ts: appended, or in place of the TCP-only
 * pick rule) to drover's table over nf_tables netlink, in the network
 * namespace it runs in
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
import { netlinkRuleAdd, writeNetlinkRules, type NetlinkRuleOf } from './netlink-rules.ts';
import type { NetlinkRuleSpec } from './layout.ts';
import { NftNetlinkClient } from '../../kernel/nftables/client.ts';

/** What the helper is asked to append: rules of drover's table of `family`, in order. */
export interface RuleRequest {
  readonly family: IPFamily;
  readonly rules: readonly { readonly chain: string; readonly comment: string; readonly netlink: NetlinkRuleSpec }[];
}

/** A rule's `netlink` part, checked field by field. @throws Error naming what is not valid. */
function parseSpec(value: unknown, path: string): NetlinkRuleSpec {
  const n = value as Record<string, unknown> | undefined;
  if (n?.kind === 'affinity-record' && (n.proto === 'tcp' || n.proto === 'udp' || n.proto === 'sctp') && typeof n.seconds === 'number') {
    return { kind: 'affinity-record', proto: n.proto, seconds: n.seconds };
  }
  if (n?.kind === 'pick' && (n.selection === 'main' || n.selection === 'local') && typeof n.count === 'number' && typeof n.replaces === 'string') {
    return { kind: 'pick', selection: n.selection, count: n.count, replaces: n.replaces };
  }
  throw new Error(`${path}: netlink ${JSON.stringify(n)} is not an affinity record rule or a pick rule`);
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
    return { chain: x.chain, rule: { text: '', comment: x.comment, netlink: parseSpec(x.netlink, `rules[${i}]`) } };
  });
  return { family: r.family, rules };
}

async function main(): Promise<void> {
  let input = '';
  for await (const chunk of process.stdin) input += String(chunk);
  const { family, rules } = parseRuleRequest(input);
  // Encodes (and so validates) every rule before the socket is opened.
  for (const r of rules) netlinkRuleAdd(family, r);
  const client = await NftNetlinkClient.open();
  try {
    const done = await writeNetlinkRules(client, family, rules);
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
