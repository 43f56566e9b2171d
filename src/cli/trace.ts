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
import { isCanonicalIPv4, parseIP } from '../model/addr.ts';
import { parseIPv4HostPort } from '../model/validate.ts';
import { modeDriver } from '../modes/registry.ts';
import { inspectKernelOptions, netnsArg } from './options.ts';
import type { KernelOptions } from '../config/kernel.ts';
import { modeHelp } from './setup.ts';
import { EXIT } from './exit.ts';
import { UsageError } from '../errors.ts';

/** An IPv4 address, or an IPv6 one in canonical text (RFC 5952, e.g. fd00::10). */
function ipArg(value: string): string {
  if (!isCanonicalIPv4(value) && parseIP(value)?.text !== value) throw new InvalidArgumentError(`"${value}" is not an IPv4 address nor a canonical IPv6 one`);
  return value;
}

/** `ip:port`, or `[ipv6]:port` for an IPv6 destination. */
function hostPortArg(value: string): { ip: string; port: number } {
  // A loopback destination is a NodePort on 127.0.0.1 (iptables mode's --nodeport-localhost); the endpoint parser refuses it.
  const loopback = /^(127\.[0-9.]+):([0-9]+)$/.exec(value);
  if (loopback && isCanonicalIPv4(loopback[1]!) && !('problem' in parseIPv4HostPort(`10.0.0.1:${loopback[2]}`))) return { ip: loopback[1]!, port: Number(loopback[2]) };
  const v6 = /^\[([0-9a-f:.]+)\]:([1-9][0-9]{0,4})$/.exec(value);
  if (v6) {
    const port = Number(v6[2]);
    if (parseIP(v6[1]!)?.text !== v6[1] || v6[1]!.indexOf(':') < 0 || port > 65535) throw new InvalidArgumentError(`"${value}" is not an "[ipv6]:port" destination (canonical IPv6 text, port 1-65535)`);
    return { ip: v6[1]!, port };
  }
  const parsed = parseIPv4HostPort(value);
  if ('problem' in parsed) throw new InvalidArgumentError(parsed.problem);
  return parsed;
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
      if (opts.probeFrom !== undefined && !opts.kernel) throw new UsageError('--probe-from is for --kernel');
      if (opts.kernel && !driver.kernelTrace) {
        throw new UsageError(`trace --kernel is built for --mode nftables only (the probe is marked with meta nftrace in table ip drover); ${driver.title} mode has no kernel trace`);
      }
      const family = opts.dst.ip.includes(':') ? 'IPv6' : 'IPv4';
      if (opts.src.includes(':') !== (family === 'IPv6')) throw new UsageError(`--src ${opts.src} and --dst ${opts.dst.ip} are of different IP families`);
      const { ctx, where, note, format } = await driver.trace({ ...opts, family });
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
