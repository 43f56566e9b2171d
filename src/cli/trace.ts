/**
 * `drover trace`: where a new connection goes through the live ruleset (see
 * src/inspect/trace.ts; the mode's driver supplies the rules and its dataplane), with the state the mode's driver reads (in IPVS
 * mode also the ipsets' contents, the kube-ipvs0 addresses and the virtual
 * servers).
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { formatTrace } from '../inspect/trace-format.ts';
import { trace, type Packet } from '../inspect/trace.ts';
import { isCanonicalIPv4 } from '../model/addr.ts';
import { parseIPv4HostPort } from '../model/validate.ts';
import { modeDriver } from '../modes/registry.ts';
import { inspectKernelOptions, type KernelOptions } from './options.ts';
import { modeHelp } from './setup.ts';

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
    .description('walk the live ruleset for a new connection: matched rules, candidate endpoints, masquerade, REJECT' + modeHelp('trace'))
    .addOption(new Option('--src <ip>', 'source address of the connection').argParser(ipArg).makeOptionMandatory())
    .addOption(new Option('--dst <ip:port>', 'destination, e.g. a ClusterIP and port').argParser(hostPortArg).makeOptionMandatory())
    .addOption(new Option('--proto <proto>', 'transport protocol').choices(['tcp', 'udp', 'sctp']).default('tcp'))
    .addOption(new Option('--json', 'print the trace as JSON').default(false))
    .action(async (opts: KernelOptions & { src: string; dst: { ip: string; port: number }; proto: Packet['proto']; json: boolean }) => {
      const packet: Packet = { src: opts.src, dst: opts.dst.ip, dport: opts.dst.port, proto: opts.proto };
      const { ctx, where, note, format } = await modeDriver(opts.mode).trace(opts);
      process.stderr.write(note);
      const result = trace(ctx, packet);
      process.stdout.write(opts.json ? `${JSON.stringify(result, null, 2)}\n` : formatTrace(result, format).replace('\n\n', `\n(${where})\n\n`));
    });
  for (const o of inspectKernelOptions()) cmd.addOption(o);
  return cmd;
}
