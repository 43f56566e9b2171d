/**
 * Deleting conntrack entries with the `conntrack` tool (conntrack-tools),
 * spawned with an argument array, optionally inside a network namespace.
 */
import { runCommand } from '../kernel/exec.ts';
import type { StaleFlow } from './stale.ts';
import { parseIP } from '../model/addr.ts';

/** The conntrack I/O; a fake records calls in tests. */
export interface ConntrackExec {
  /**
   * Delete the UDP entries matching `flow`.
   * @returns the number of entries deleted.
   * @throws Error when conntrack fails for another reason than "nothing matched".
   */
  deleteUDP(flow: StaleFlow): Promise<number>;
}

/**
 * The arguments of `conntrack -D` for one stale flow (conntrack(8)): `-f
 * ipv6` for an IPv6 flow (conntrack lists and deletes IPv4 entries only
 * without it, even for a NodePort matched on its port alone). An IPv6
 * flow's endpoint is matched as the reply's source (`--reply-src`, the
 * endpoint a DNATed entry's replies come from, as kube-proxy's
 * pkg/proxy/conntrack filters on ConntrackReplySrcIP): conntrack-tools'
 * `--dst-nat` filter compares IPv4 addresses only and, with `-f ipv6`,
 * matches every entry (seen with conntrack-tools 1.4.7).
 *
 * A flow with `notNATed` keeps only the entries that were not DNATed
 * (conntrack(8) reply-tuple filters): for an address, those whose reply
 * comes from that same address (`--reply-src`: a DNATed entry's reply
 * comes from its endpoint); for a NodePort (no address), those whose
 * reply comes from that same port (`--reply-port-src`).
 * @throws Error when an address of the flow is not of the flow's family (nothing unvalidated reaches the command line).
 */
export function conntrackDeleteArgs(flow: StaleFlow): string[] {
  const family = flow.family === 'IPv6' ? 6 : 4;
  if (!Number.isInteger(flow.port) || flow.port < 1 || flow.port > 65535) throw new Error(`stale UDP flow: port ${JSON.stringify(flow.port)} is not a port number`);
  if (flow.notNATed && flow.endpointIP !== undefined) throw new Error('stale UDP flow: an entry not DNATed has no endpoint');
  for (const [field, ip] of [['ip', flow.ip], ['endpointIP', flow.endpointIP]] as const) {
    if (ip !== undefined && parseIP(ip)?.family !== family) throw new Error(`stale UDP flow: ${field} ${JSON.stringify(ip)} is not an IPv${family} address`);
  }
  return [
    '-D',
    ...(family === 6 ? ['-f', 'ipv6'] : []),
    '-p',
    'udp',
    ...(flow.ip ? ['--orig-dst', flow.ip] : []),
    '--orig-port-dst',
    String(flow.port),
    ...(flow.endpointIP ? [family === 6 ? '--reply-src' : '--dst-nat', flow.endpointIP] : []),
    ...(flow.notNATed ? (flow.ip ? ['--reply-src', flow.ip] : ['--reply-port-src', String(flow.port)]) : []),
  ];
}

/** The real conntrack tool. */
export class SystemConntrack implements ConntrackExec {
  constructor(private readonly netns?: string) {}

  async deleteUDP(flow: StaleFlow): Promise<number> {
    const res = await runCommand('conntrack', conntrackDeleteArgs(flow), this.netns ? { netns: this.netns } : {});
    const deleted = /(\d+) flow entries have been deleted/.exec(res.stderr);
    // conntrack exits 1 when nothing matched; that is not an error here.
    if (deleted) return Number(deleted[1]);
    throw new Error(`conntrack ${conntrackDeleteArgs(flow).join(' ')} failed (${res.code}): ${res.stderr.trim()}`);
  }
}
