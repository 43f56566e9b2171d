/**
 * `drover trace`: where a new connection goes through the live ruleset (see
 * src/inspect/trace.ts); with `--mode ipvs` also through IPVS, with the
 * ipsets' contents, the kube-ipvs0 addresses and the virtual servers.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { localAddresses, readTables } from '../modes/iptables/live.ts';
import { formatTrace } from '../inspect/trace-format.ts';
import { trace, type Packet, type TraceContext } from '../inspect/trace.ts';
import { unsupportedNote } from '../modes/ipvs/live.ts';
import { isCanonicalIPv4 } from '../model/addr.ts';
import { parseIPv4HostPort } from '../model/validate.ts';
import { createLogger } from '../util/log.ts';
import { inspectKernelOptions } from './chains.ts';
import { readIpvsKernel } from '../modes/ipvs/inspect.ts';
import type { KernelOptions } from './options.ts';
import { createIptablesExec } from './setup.ts';

function ipArg(value: string): string {
  if (!isCanonicalIPv4(value)) throw new InvalidArgumentError(`"${value}" is not an IPv4 address`);
  return value;
}

function hostPortArg(value: string): { ip: string; port: number } {
  const parsed = parseIPv4HostPort(value);
  if ('problem' in parsed) throw new InvalidArgumentError(parsed.problem);
  return parsed;
}

/** The `trace` command. */
export function traceCommand(): Command {
  const cmd = new Command('trace')
    .description(
      'walk the live ruleset for a new connection: matched rules, candidate endpoints, masquerade, REJECT; ' +
        'with --mode ipvs also the virtual server, its scheduler and the real servers with their probability',
    )
    .addOption(new Option('--src <ip>', 'source address of the connection').argParser(ipArg).makeOptionMandatory())
    .addOption(new Option('--dst <ip:port>', 'destination, e.g. a ClusterIP and port').argParser(hostPortArg).makeOptionMandatory())
    .addOption(new Option('--proto <proto>', 'transport protocol').choices(['tcp', 'udp', 'sctp']).default('tcp'))
    .addOption(new Option('--json', 'print the trace as JSON').default(false))
    .action(async (opts: KernelOptions & { src: string; dst: { ip: string; port: number }; proto: Packet['proto']; json: boolean }) => {
      const packet: Packet = { src: opts.src, dst: opts.dst.ip, dport: opts.dst.port, proto: opts.proto };
      let ctx: TraceContext;
      let where: string;
      if (opts.mode === 'ipvs') {
        const [live, local] = await Promise.all([readIpvsKernel(opts, true), localAddresses()]);
        ctx = { dump: live.tables, localAddresses: local, ipsets: live.sets, ipvs: live.virtualServers };
        // A fwmark virtual server takes packets by their mark, which trace does not follow.
        process.stderr.write(unsupportedNote(live, 'not evaluated (the trace assumes none of them takes the packet)'));
        where = 'line numbers are those of iptables-save -t TABLE; IPVS as read over netlink, ipsets as ipset save lists them';
      } else {
        const exec = await createIptablesExec(opts, createLogger(opts.logLevel));
        const [dump, local] = await Promise.all([readTables(exec), localAddresses(opts.netns)]);
        ctx = { dump, localAddresses: local };
        where = `line numbers are those of iptables-save -t TABLE, iptables-${exec.variant}`;
      }
      const result = trace(ctx, packet);
      process.stdout.write(opts.json ? `${JSON.stringify(result, null, 2)}\n` : formatTrace(result).replace('\n\n', `\n(${where})\n\n`));
    });
  for (const o of inspectKernelOptions()) cmd.addOption(o);
  return cmd;
}
