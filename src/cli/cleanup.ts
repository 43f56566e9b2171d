/**
 * `drover cleanup`: remove every chain and hook rule drover created, and
 * nothing else. A chain of drover's that a rule of someone else's still
 * jumps to cannot be deleted: cleanup empties it, names it and each such
 * rule on stderr, one line per rule, and exits with EXIT.partial (exit.ts).
 * (iptables mode leaves a kept KUBE-FIREWALL as it is instead: its
 * anti-martian rule serves the other program too; ruleset.ts SHARED_CHAINS.)
 */
import { Command, Option } from 'commander';
import { countOf, type CleanupResult, type KeptChain } from '../proxier/backend.ts';
import { escapeNonPrintable } from '../model/quote.ts';
import { createLogger } from '../util/log.ts';
import { EXIT, markPartial } from './exit.ts';
import { kernelOptions } from './options.ts';
import type { KernelOptions } from '../config/kernel.ts';
import { createBackend, lockNamespace, modeHelp } from './setup.ts';

/**
 * The stderr lines for a chain cleanup emptied but could not delete: one per
 * rule that jumps to it, naming the chain and the rule as iptables takes it
 * (`-t TABLE -A CHAIN …`, non-printable characters escaped so that each is
 * one line), e.g.
 * `drover: nat chain KUBE-MARK-MASQ was emptied but not deleted: a rule drover does not own still jumps to it: -t nat -A PREROUTING -j KUBE-MARK-MASQ`
 * (`was left as it is, rules included` for an untouched one).
 */
export function keptChainLines(kept: KeptChain): string {
  const what = kept.untouched === true ? 'was left as it is, rules included' : 'was emptied but not deleted';
  return kept.referencedBy
    .map((rule) => `drover: ${kept.table} chain ${kept.chain} ${what}: a rule drover does not own still jumps to it: -t ${kept.table} ${escapeNonPrintable(rule)}\n`)
    .join('');
}

/**
 * The line `cleanup` prints on stdout, from the chains and the hook rules
 * removed (the same in every mode), e.g. `removed 7 chains and 4 hook rules`.
 */
export function cleanupSummary(result: CleanupResult): string {
  return `removed ${countOf(result.removed, 'chain')} chains and ${countOf(result.removed, 'rule')} hook rules\n`;
}

/** The `cleanup` command. */
export function cleanupCommand(): Command {
  const cmd = new Command('cleanup')
    .description(
      "remove drover's chains and hook rules from the kernel" + modeHelp('cleanup') + '; other rules are left alone. ' +
        "A chain of drover's that another program's rule still jumps to is emptied but not deleted (iptables mode's KUBE-FIREWALL is left as it is); stderr names it and that rule, one line per rule. " +
        'Refused while drover run serves the network namespace (any mode), unless --force. ' +
        `Exit ${EXIT.ok} when everything was removed, ${EXIT.partial} when some chains were only emptied, ${EXIT.failed} on error`,
    )
    .addOption(new Option('--force', 'clean up even while drover run serves this network namespace (it programs its rules again at its next full sync)').default(false))
    .action(async (opts: KernelOptions & { force: boolean }) => {
      const logger = createLogger(opts.logLevel);
      // No section of any mode: cleanup takes none of their flags, and each mode removes whatever it may have written.
      const backend = await createBackend({ kernel: opts, render: {}, modes: {} }, { masqueradeAll: false }, logger);
      await lockNamespace('cleanup', opts, logger, { force: opts.force, close: backend });
      let result;
      try {
        result = await backend.cleanup();
      } finally {
        // An open netlink socket (nftables mode) would keep the process from exiting.
        await backend.close?.();
      }
      process.stdout.write(cleanupSummary(result));
      // The node DNS's chains, table, links and intercepted address: only in drover's own namespace (run refuses
      // --dns-address with --netns; a run started with `ip netns exec` is cleaned up the same way, and named here).
      if (opts.netns !== undefined) {
        const { nodeDnsStateIn } = await import('../dns/node-dns.ts');
        const left = await nodeDnsStateIn(opts.netns);
        if (left.length > 0) process.stderr.write(`drover: network namespace ${opts.netns} holds node DNS state (${left.join(', ')}) that --netns cannot remove: run \`ip netns exec ${opts.netns} drover cleanup\`\n`);
      }
      if (opts.netns === undefined) {
        const { removeNodeDns } = await import('../dns/node-dns.ts');
        const dns = await removeNodeDns();
        if (dns.chains + dns.rules + dns.tables + dns.links > 0) {
          process.stdout.write(`removed the node DNS dataplane: ${dns.chains} chains, ${dns.rules} hook rules, ${dns.tables} nftables tables, ${dns.links} links\n`);
        }
        if (dns.addresses > 0) process.stdout.write(`removed the intercepted cluster DNS address from lo: ${dns.addresses}\n`);
      }
      for (const kept of result.kept) process.stderr.write(keptChainLines(kept));
      markPartial(result.kept);
    });
  for (const o of kernelOptions()) cmd.addOption(o);
  return cmd;
}
