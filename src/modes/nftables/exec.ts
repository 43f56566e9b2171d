/**
 * The `nft` command of nftables mode (nft(8)): one script as one
 * transaction (`nft -f -`), and the JSON listing of drover's table. Always
 * called by its absolute path, optionally inside a named network namespace
 * (`ip netns exec`). Besides, the few rules nft cannot write as drover
 * means them (the IPv6 affinity record rules and the pick rules:
 * netlink-rules.ts) go over nf_tables netlink in the same namespace: from
 * this process, or from a helper process started there (rule-helper.ts),
 * since a netlink socket acts in the namespace of the process that opens it.
 */
import type { IPFamily } from '../../model/types.ts';
import { moduleArgv } from '../../util/node-module.ts';
import { CommandError, runCommand } from '../../kernel/exec.ts';
import { netlinkRuleAdd, writeNetlinkRules, type NetlinkRuleOf } from './netlink-rules.ts';
import { nftFamily, type NftTable } from './layout.ts';
import { NftNetlinkClient } from '../../kernel/nftables/client.ts';
import { NO_TABLE, parseNftJson, type LiveSet, type LiveTable } from './live.ts';

/** Where nft is installed by Debian's nftables package; always run by this path: under npm, a bare `nft` on PATH is another program (node-file-trace, in node_modules/.bin). */
export const NFT = '/usr/sbin/nft';

/** What nftables mode asks of nft. */
export interface NftExec {
  /**
   * Run `script` as one transaction: all of it or nothing.
   * @throws CommandError with nft's message when the kernel or nft refuses it.
   */
  run(script: string): Promise<void>;
  /**
   * drover's table as the kernel has it; {@link NO_TABLE} when there is none.
   * @throws CommandError when nft fails otherwise; NftJsonError for output it cannot read.
   */
  list(opts?: { readonly terse?: boolean }): Promise<LiveTable>;
  /**
   * One set or map of drover's table, as the kernel has it (`nft -j list set|map`); undefined when it is missing.
   * @throws CommandError when nft fails otherwise; NftJsonError for output it cannot read.
   */
  listSet(name: string, kind: 'set' | 'map'): Promise<LiveSet | undefined>;
  /**
   * Write `rules` (layout.ts RuleDecl with `netlink`) to their chains of
   * drover's table, in order: an affinity record rule appended, a pick
   * rule in place of the rule with its `replaces` comment (netlink-rules.ts);
   * as one nf_tables netlink transaction (all of them or none) when they
   * fit one batch, else in consecutive batches (NftNetlinkClient.addRules).
   * @returns the bytes sent and the transactions committed.
   * @throws NftRequestError or CommandError naming the rule the kernel refused; ReplacedRuleError (or CommandError
   *   from the helper) when a rule to replace is not there; UnsafeElementError for a rule without `netlink`.
   */
  addRules(rules: readonly NetlinkRuleOf[]): Promise<RulesAdded>;
}

/** What {@link NftExec.addRules} sent. */
export interface RulesAdded {
  readonly bytes: number;
  readonly transactions: number;
}

/** nft on this host, or inside `netns`; it lists the table of `family` (default IPv4: `ip drover`; IPv6: `ip6 drover`). */
export class SystemNft implements NftExec {
  private readonly table: NftTable;

  constructor(private readonly opts: { readonly netns?: string; readonly timeoutMs?: number; readonly family?: IPFamily } = {}) {
    this.table = nftFamily(opts.family).table;
  }

  private exec(args: string[], input?: string) {
    return runCommand(NFT, args, { ...(this.opts.netns ? { netns: this.opts.netns } : {}), ...(input !== undefined ? { input } : {}), timeoutMs: this.opts.timeoutMs ?? 120_000 });
  }

  async run(script: string): Promise<void> {
    const res = await this.exec(['-f', '-'], script);
    if (res.code !== 0) throw new CommandError('nft -f', res.code, res.stderr);
  }

  /** With `terse`, sets and maps come without their elements (`nft -t`). */
  async list(opts: { readonly terse?: boolean } = {}): Promise<LiveTable> {
    const res = await this.exec(['-j', ...(opts.terse ? ['-t'] : []), 'list', 'table', this.table.family, this.table.name]);
    if (res.code !== 0) {
      if (/No such file or directory/.test(res.stderr)) return NO_TABLE;
      throw new CommandError('nft -j list table', res.code, res.stderr);
    }
    return parseNftJson(res.stdout);
  }

  /** Over a netlink socket of this process, or with `netns` of a helper process in that namespace (rule-helper.ts). */
  async addRules(rules: readonly NetlinkRuleOf[]): Promise<RulesAdded> {
    if (rules.length === 0) return { bytes: 0, transactions: 0 };
    const family = this.opts.family ?? 'IPv4';
    // Encoded here first, so that a bad rule fails before any process starts.
    for (const r of rules) netlinkRuleAdd(family, r);
    if (this.opts.netns === undefined) {
      const client = await NftNetlinkClient.open();
      try {
        const { bytes, transactions } = await writeNetlinkRules(client, family, rules);
        return { bytes, transactions };
      } finally {
        client.close();
      }
    }
    const [node, ...args] = moduleArgv(import.meta.url, 'rule-helper');
    const request = { family, rules: rules.map((r) => ({ chain: r.chain, comment: r.rule.comment, netlink: r.rule.netlink })) };
    const res = await runCommand(node!, args, { netns: this.opts.netns, input: JSON.stringify(request), timeoutMs: this.opts.timeoutMs ?? 120_000 });
    if (res.code !== 0) throw new CommandError('rule-helper (nf_tables netlink)', res.code, res.stderr);
    const { bytes, transactions } = JSON.parse(res.stdout) as RulesAdded;
    return { bytes, transactions };
  }

  async listSet(name: string, kind: 'set' | 'map'): Promise<LiveSet | undefined> {
    if (!/^[a-z0-9-]+$/.test(name)) throw new Error(`not a set name of drover's: ${JSON.stringify(name)}`);
    const res = await this.exec(['-j', 'list', kind, this.table.family, this.table.name, name]);
    if (res.code !== 0) {
      if (/No such file or directory/.test(res.stderr)) return undefined;
      throw new CommandError(`nft -j list ${kind}`, res.code, res.stderr);
    }
    return parseNftJson(res.stdout).sets.get(name);
  }
}
