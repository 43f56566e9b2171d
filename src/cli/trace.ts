/**
 * `drover trace`: where a new connection goes through the live ruleset (see
 * src/inspect/trace.ts; the mode's driver supplies the rules and its dataplane), with the state the mode's driver reads (in IPVS
 * mode also the ipsets' contents, the kube-ipvs0 addresses and the virtual
 * servers). With `--kernel`, the mode's driver also sends one real probe
 * and reports the path the kernel itself took (nftables mode:
 * modes/nftables/kernel-trace.ts), MATCH or MISMATCH.
 */
import { Command, InvalidArgumentError, Option } from 'commander';
import { formatTrace } from '../inspect/trace-format.ts';
import { trace, type Packet } from '../inspect/trace.ts';
import { parseBindAddress, parseIP } from '../model/addr.ts';
import { parseIPv4HostPort } from '../model/validate.ts';
import { modeDriver } from '../modes/registry.ts';
import { inspectKernelOptions, netnsArg, type KernelOptions } from './options.ts';
import { modeHelp } from './setup.ts';
import { EXIT } from './exit.ts';
import { UsageError } from './usage-error.ts';

/** `--src`: an IPv4 or IPv6 address, read strictly (addr.ts parseIP), in canonical form. */
function ipArg(value: string): string {
  const ip = parseIP(value);
  if (ip === undefined) throw new InvalidArgumentError(`"${value}" is not an IPv4 or IPv6 address`);
  return ip.text;
}

/** `--dst`: "ip:port", or "[ipv6]:port" (addr.ts parseBindAddress), port 1-65535. */
function hostPortArg(value: string): { ip: string; port: number } {
  if (!value.startsWith('[')) {
    const parsed = parseIPv4HostPort(value);
    if ('problem' in parsed) throw new InvalidArgumentError(parsed.problem);
    return parsed;
  }
  const bind = parseBindAddress(value);
  if (bind === undefined || bind.port === 0) throw new InvalidArgumentError(`"${value}" is not an "[ipv6]:port" destination (port 1-65535)`);
  return { ip: bind.ip.text, port: bind.port };
}

type TraceCliOptions = KernelOptions & {
  src: string;
  dst: { ip: string; port: number };
  proto: Packet['proto'];
  json: boolean;
  kernel: boolean;
  probeFrom?: string;
};

/** The `trace` command. */
export function traceCommand(): Command {
  const cmd = new Command('trace')
    .description('walk the live ruleset for a new connection: matched rules, candidate endpoints, masquerade, REJECT' + modeHelp('trace'))
    .addOption(new Option('--src <ip>', 'source address of the connection').argParser(ipArg).makeOptionMandatory())
    .addOption(new Option('--dst <ip:port>', 'destination, e.g. a ClusterIP and port ("[ipv6]:port" for IPv6)').argParser(hostPortArg).makeOptionMandatory())
    .addOption(new Option('--proto <proto>', 'transport protocol').choices(['tcp', 'udp', 'sctp']).default('tcp'))
    .addOption(new Option('--json', 'print the trace as JSON').default(false))
    .addOption(
      new Option(
        '--kernel',
        'also send one real probe (TCP SYN or UDP datagram) traced by the kernel (nftables mode: meta nftrace), print the path the kernel took next to the answer above, and exit 1 when they differ',
      ).default(false),
    )
    .addOption(new Option('--probe-from <netns>', 'with --kernel, for a --src that is not an address of the node: the namespace that holds --src, where the probe is sent from').argParser(netnsArg))
    .action(async (opts: TraceCliOptions) => {
      const packet: Packet = { src: opts.src, dst: opts.dst.ip, dport: opts.dst.port, proto: opts.proto };
      const driver = modeDriver(opts.mode);
      if (packet.src.includes(':') !== packet.dst.includes(':')) throw new UsageError(`--src ${packet.src} and --dst ${packet.dst} are of different IP families`);
      if (packet.dst.includes(':') && driver.name !== 'iptables') {
        throw new UsageError(`trace of an IPv6 destination is built for --mode iptables only; ${driver.title} mode programs the IPv4 view only`);
      }
      if (opts.probeFrom !== undefined && !opts.kernel) throw new UsageError('--probe-from is for --kernel');
      if (opts.kernel && !driver.kernelTrace) {
        throw new UsageError(`trace --kernel is built for --mode nftables only (the probe is marked with meta nftrace in table ip drover); ${driver.title} mode has no kernel trace`);
      }
      const { ctx, where, note, format } = await driver.trace(opts, packet);
      process.stderr.write(note);
      const result = trace(ctx, packet);
      const kernel = opts.kernel ? await driver.kernelTrace!(opts, result) : undefined;
      if (opts.json) {
        process.stdout.write(`${JSON.stringify(kernel ? { evaluator: result, kernel: kernel.json, match: kernel.match } : result, null, 2)}\n`);
      } else {
        const text = formatTrace(result, format).replace('\n\n', `\n(${where})\n\n`);
        process.stdout.write(kernel ? `evaluator:\n${text}\n${kernel.text}` : text);
      }
      if (kernel && !kernel.match) process.exitCode = EXIT.failed;
    });
  for (const o of inspectKernelOptions()) cmd.addOption(o);
  return cmd;
}
