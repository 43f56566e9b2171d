/**
 * `drover chains [NAMESPACE/NAME[:PORT]]`: the rules the live kernel holds
 * for a service port, read with iptables-save (never from drover's memory),
 * so it also shows rules kube-proxy wrote. See src/inspect/chains.ts.
 * With `--mode ipvs`: the virtual servers, real servers, kube-ipvs0 binding
 * and ipset entries instead, named by `--source` (src/modes/ipvs/chains.ts).
 */
import { Command, Option } from 'commander';
import type { ParsedDump } from '../modes/iptables/parse.ts';
import type { DesiredIpvsState } from '../modes/ipvs/desired.ts';
import { formatChains, selectServicePorts, serviceChains, UnknownServiceError } from '../modes/iptables/chains.ts';
import { formatIpvsChains, ipvsServicePortViews } from '../modes/ipvs/chains.ts';
import { unsupportedNote } from '../modes/ipvs/live.ts';
import { readTables } from '../modes/iptables/live.ts';
import { createLogger } from '../util/log.ts';
import { kernelOptions, type KernelOptions } from './options.ts';
import { chainsSourceOptions, loadDesiredIpvs, readIpvsKernel } from '../modes/ipvs/inspect.ts';
import { createIptablesExec } from './setup.ts';

/** The kernel options of the read-only commands (chains, trace, diff, status): those of `run`. */
export function inspectKernelOptions(): Option[] {
  return kernelOptions();
}

/**
 * The live filter and nat tables (iptables-save), with the iptables variant
 * detected or forced as for `run`.
 * @throws UsageError when not root; CommandError when iptables-save fails.
 */
export async function readKernel(opts: KernelOptions): Promise<ParsedDump> {
  return readTables(await createIptablesExec(opts, createLogger(opts.logLevel)));
}

/** Options of `chains`. */
type ChainsOptions = KernelOptions & { json: boolean; source?: string; serviceCidr: string };

/**
 * `chains` in IPVS mode: the views of the selected virtual servers, as text or JSON.
 * @throws UnknownServiceError for a selector without `--source` or one that names no service port of the source.
 */
async function ipvsChains(selector: string | undefined, opts: ChainsOptions): Promise<string> {
  if (selector !== undefined && opts.source === undefined) {
    throw new UnknownServiceError(`selecting ${selector} in IPVS mode needs --source: IPVS keeps no service names`);
  }
  let desired: DesiredIpvsState | undefined;
  if (opts.source !== undefined) {
    const loaded = await loadDesiredIpvs({ source: opts.source, serviceCidr: opts.serviceCidr, masqueradeAll: false, ipvsScheduler: 'rr' });
    for (const p of loaded.problems) process.stderr.write(`drover: ${p}\n`);
    desired = loaded.desired;
  }
  const live = await readIpvsKernel(opts, false);
  process.stderr.write(unsupportedNote(live, 'not shown'));
  const views = selectServicePorts(ipvsServicePortViews(live, desired?.virtualServers), selector, 'in --source');
  return opts.json ? `${JSON.stringify(views, null, 2)}\n` : formatIpvsChains(views, desired !== undefined);
}

/** The `chains` command. */
export function chainsCommand(): Command {
  const cmd = new Command('chains')
    .description(
      'print the rules the live kernel holds for a service port (or every port of NAMESPACE/NAME, or all): ' +
        'the KUBE-SERVICES entry, the KUBE-SVC and KUBE-SEP chains, or the REJECT of a port with no endpoints; ' +
        'with --mode ipvs: each virtual server with its real servers (weight, forwarding, active and inactive connections), ' +
        'its kube-ipvs0 binding and its KUBE-CLUSTER-IP and KUBE-LOOP-BACK entries, named by --source; ' +
        'exit 1 for an unknown service',
    )
    .argument('[service]', 'NAMESPACE/NAME:PORT, or NAMESPACE/NAME for all its ports; all service ports when omitted')
    .addOption(
      new Option(
        '--json',
        'print JSON: [{"servicePort": "ns/name:port", "chains": [{"table": "nat"|"filter", "chain": "KUBE-…", ' +
          '"endpoint": "ip:port" (KUBE-SEP) or null, "rules": ["-A …"]}]}]; with --mode ipvs: [{"servicePort": "ns/name:port" or null, ' +
          '"key": "TCP/ip:port", "virtualServer": {protocol, address, port, scheduler, persistentTimeoutSeconds, netmask, flags} or null, ' +
          '"bound": bool, "clusterIP": {set, entry, present}, "realServers": [{address, port, weight, forwarding, activeConns, inactiveConns, loopBack}]}]',
      ).default(false),
    )
    .action(async (selector: string | undefined, opts: ChainsOptions) => {
      if (opts.mode === 'ipvs') return void process.stdout.write(await ipvsChains(selector, opts));
      const found = selectServicePorts(serviceChains(await readKernel(opts)), selector);
      process.stdout.write(opts.json ? `${JSON.stringify(found, null, 2)}\n` : formatChains(found));
    });
  for (const o of chainsSourceOptions()) cmd.addOption(o);
  for (const o of inspectKernelOptions()) cmd.addOption(o);
  return cmd;
}
