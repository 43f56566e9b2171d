/**
 * `drover chains [NAMESPACE/NAME[:PORT]]`: the rules the live kernel holds
 * for a service port, read with iptables-save (never from drover's memory),
 * so it also shows rules kube-proxy wrote. See src/inspect/chains.ts.
 */
import { Command, Option } from 'commander';
import type { ParsedDump } from '../backends/iptables/parse.ts';
import { formatChains, selectServicePorts, serviceChains } from '../inspect/chains.ts';
import { readTables } from '../inspect/live.ts';
import { createLogger } from '../util/log.ts';
import { kernelOptions, type KernelOptions } from './options.ts';
import { createIptablesExec } from './setup.ts';

/**
 * The kernel options of the read-only commands (chains, diff, status): those
 * of `run` without `--mode` (they read iptables whatever the mode).
 */
export function inspectKernelOptions(): Option[] {
  return kernelOptions().filter((o) => o.long !== '--mode');
}

/**
 * The live filter and nat tables (iptables-save), with the iptables variant
 * detected or forced as for `run`.
 * @throws UsageError when not root; CommandError when iptables-save fails.
 */
export async function readKernel(opts: KernelOptions): Promise<ParsedDump> {
  return readTables(await createIptablesExec(opts, createLogger(opts.logLevel)));
}

/** The `chains` command. */
export function chainsCommand(): Command {
  const cmd = new Command('chains')
    .description(
      'print the rules the live kernel holds for a service port (or every port of NAMESPACE/NAME, or all): ' +
        'the KUBE-SERVICES entry, the KUBE-SVC and KUBE-SEP chains, or the REJECT of a port with no endpoints; ' +
        'exit 1 for an unknown service',
    )
    .argument('[service]', 'NAMESPACE/NAME:PORT, or NAMESPACE/NAME for all its ports; all service ports when omitted')
    .addOption(
      new Option(
        '--json',
        'print JSON: [{"servicePort": "ns/name:port", "chains": [{"table": "nat"|"filter", "chain": "KUBE-…", ' +
          '"endpoint": "ip:port" (KUBE-SEP) or null, "rules": ["-A …"]}]}]',
      ).default(false),
    )
    .action(async (selector: string | undefined, opts: KernelOptions & { json: boolean }) => {
      const found = selectServicePorts(serviceChains(await readKernel(opts)), selector);
      process.stdout.write(opts.json ? `${JSON.stringify(found, null, 2)}\n` : formatChains(found));
    });
  for (const o of inspectKernelOptions()) cmd.addOption(o);
  return cmd;
}
