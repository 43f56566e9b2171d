/**
 * `drover chains [NAMESPACE/NAME[:PORT]]`: what the live kernel holds for a
 * service port, read from the kernel (never from drover's memory), so it
 * also shows rules kube-proxy wrote. In iptables mode the KUBE-SERVICES
 * entry and the KUBE-SVC/KUBE-SEP chains (modes/iptables/chains.ts); each
 * mode's driver prints its own view (modes/registry.ts).
 */
import { Command, Option } from 'commander';
import { allModes, modeDriver } from '../modes/registry.ts';
import type { ChainsSourceOptions } from '../modes/driver.ts';
import { inspectKernelOptions } from './options.ts';
import type { KernelOptions } from '../config/kernel.ts';
import { chainsSourceOptions, modeHelp } from './setup.ts';

/** The `chains` command. */
export function chainsCommand(): Command {
  const cmd = new Command('chains')
    .description(
      'print the rules the live kernel holds for a service port (or every port of NAMESPACE/NAME, or all): ' +
        'the KUBE-SERVICES entry, the KUBE-SVC (or KUBE-SVL) and KUBE-SEP chains, or the REJECT of a port with no endpoints (DROP: no local endpoints)' +
        modeHelp('chains') +
        '; exit 1 for an unknown service',
    )
    .argument('[service]', 'NAMESPACE/NAME:PORT, or NAMESPACE/NAME for all its ports; all service ports when omitted')
    .addOption(
      new Option(
        '--json',
        `print JSON: ${allModes().map((m) => m.help.chainsJson).join('; ')}`,
      ).default(false),
    )
    .action(async (selector: string | undefined, opts: KernelOptions & ChainsSourceOptions) => {
      process.stdout.write(await modeDriver(opts.mode).chains(selector, opts));
    });
  for (const o of chainsSourceOptions()) cmd.addOption(o);
  for (const o of inspectKernelOptions()) cmd.addOption(o);
  return cmd;
}
